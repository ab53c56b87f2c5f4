"""ONNX's quantized operators (QOperator format: QLinearConv, QLinearMatMul, and ONNX Runtime's QGemm, QLinearAdd,
...) as the QDQ form they compute, so that TVM's importer (which has none of them) reads them and relax.quantized
makes their products int8 as for a QDQ model.

Each node becomes DequantizeLinear on its quantized inputs (once per tensor), the float operator, and
QuantizeLinear to its quantized output under the output's own name; an int32 bias is dequantized with the scale
x_scale * w_scale it was quantized with. ConvInteger (dynamic quantization's), whose result is the int32 sum, becomes
the Conv over int32 operands it defines. The model given to ONNX Runtime and OpenVINO is the original file: only
TVM reads the rewritten one.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import TTileError


@dataclasses.dataclass(frozen=True)
class QOperator:
    """How a quantized operator's inputs are laid out: `float_op` computed on the dequantized `operands` (each
    the positions of a (tensor, scale, zero point) triple), an int32 `bias` at a position dequantized with the
    first two operands' scales, the (scale, zero point) of the quantized output (None: the output is float), and
    the axis a per-channel scale of operand i runs along."""
    float_op: str
    operands: tuple  # ((tensor, scale, zero), ...) input positions
    output: tuple | None  # (scale, zero) input positions
    bias: int | None = None
    axes: tuple = (0, 0)  # per operand, the axis of a per-channel scale
    drop: tuple = ()  # attributes the float operator does not take


def _concat_operands(node) -> tuple:
    n = (len(node.input) - 2) // 3
    return tuple((2 + 3 * i, 3 + 3 * i, 4 + 3 * i) for i in range(n))


TWO = ((0, 1, 2), (3, 4, 5))
ONE = ((0, 1, 2),)
QOPERATORS = {
    "QLinearConv": QOperator("Conv", TWO, (6, 7), bias=8),
    "QLinearMatMul": QOperator("MatMul", TWO, (6, 7), axes=(0, -1)),
    "QGemm": QOperator("Gemm", TWO, (7, 8), bias=6),  # ONNX Runtime's; its weight axis follows transB
    "QLinearAdd": QOperator("Add", TWO, (6, 7)),
    "QLinearMul": QOperator("Mul", TWO, (6, 7)),
    "QLinearGlobalAveragePool": QOperator("GlobalAveragePool", ONE, (3, 4), drop=("channels_last",)),
    "QLinearAveragePool": QOperator("AveragePool", ONE, (3, 4), drop=("channels_last",)),
    "QLinearSigmoid": QOperator("Sigmoid", ONE, (3, 4)),
    "QLinearLeakyRelu": QOperator("LeakyRelu", ONE, (3, 4)),
    "QLinearConcat": QOperator("Concat", (), (0, 1)),  # its operands: _concat_operands
}


def has_qoperators(model) -> bool:
    return any(n.op_type in QOPERATORS or n.op_type in INTEGER_FORMS for n in model.graph.node)


# Integer-only operators TVM's importer lacks, written as the int32 arithmetic they mean (dynamic quantization's
# DynamicQuantizeLinear and MatMulInteger go to the importer as they are); relax.quantized reads both products
INTEGER_FORMS = ("ConvInteger",)


def as_qdq(model):
    """A copy of `model` with every QOPERATORS node in QDQ form (module doc); TTileError in one line for a node
    tvm_ttile cannot read."""
    import onnx
    from onnx import helper, numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    dequantized = {}  # (tensor, scale, zero) -> the float tensor
    new_inits = []

    def dequantize(x, scale, zero, axis, nodes):
        key = (x, scale, zero, axis)
        if key not in dequantized:
            name = f"{x}__dq{len(dequantized)}"
            per_channel = scale in inits and numpy_helper.to_array(inits[scale]).size > 1
            nodes.append(helper.make_node("DequantizeLinear", [x, scale, zero] if zero else [x, scale], [name],
                                          **({"axis": axis} if per_channel else {})))
            dequantized[key] = name
        return dequantized[key]

    for node in model.graph.node:
        if node.op_type in INTEGER_FORMS:
            out.graph.node.extend(_conv_integer(node, inits, helper, numpy_helper))
            continue
        q = QOPERATORS.get(node.op_type)
        if q is None:
            out.graph.node.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in q.drop}
        if attrs.pop("channels_last", 0) if "channels_last" in q.drop else False:
            raise TTileError(f"node {node.name!r} ({node.op_type}): channels_last=1 is not read")
        operands = q.operands or _concat_operands(node)
        axes = q.axes
        if node.op_type == "QGemm":
            axes = (0, 0 if attrs.get("transB", 0) else 1)
        nodes, inputs = [], []
        arg = lambda i: node.input[i] if i < len(node.input) else ""  # noqa: E731 - optional inputs are ""
        for i, (x, s, z) in enumerate(operands):
            inputs.append(dequantize(arg(x), arg(s), arg(z), axes[min(i, len(axes) - 1)], nodes))
        if q.bias is not None and arg(q.bias):
            bias_scale = _product_scale(node, operands, inits, numpy_helper)
            scale_name = f"{node.output[0]}__bias_scale"
            new_inits.append(numpy_helper.from_array(bias_scale, scale_name))
            inits[scale_name] = new_inits[-1]
            inputs.append(dequantize(arg(q.bias), scale_name, "", 0, nodes))
        if q.output is not None and arg(q.output[0]):
            real = f"{node.output[0]}__float"
            nodes.append(helper.make_node(q.float_op, inputs, [real], name=node.name, **attrs))
            s, z = arg(q.output[0]), arg(q.output[1])
            nodes.append(helper.make_node("QuantizeLinear", [real, s, z] if z else [real, s], [node.output[0]]))
        else:  # a float output (QGemm without an output scale)
            nodes.append(helper.make_node(q.float_op, inputs, list(node.output), name=node.name, **attrs))
        out.graph.node.extend(nodes)
    out.graph.initializer.extend(new_inits)
    return out


def _conv_integer(node, inits, helper, numpy_helper) -> list:
    """ConvInteger(x, w, x_zero, w_zero) as Conv over int32 (x - x_zero) and int32 w: the exact int32 result ONNX
    defines, which relax.quantized makes an int8 task. A weight zero point must be a constant 0 (dynamic
    quantization's symmetric s8 weights); any other is refused in one line."""
    from onnx import TensorProto

    name = node.name or node.output[0]
    x, w = node.input[0], node.input[1]
    x_zero = node.input[2] if len(node.input) > 2 else ""
    w_zero = node.input[3] if len(node.input) > 3 else ""
    if w_zero and (w_zero not in inits or np.any(numpy_helper.to_array(inits[w_zero]) != 0)):
        raise TTileError(f"node {name!r} (ConvInteger): its weights' zero point is not a constant 0; "
                         "quantize the weights symmetrically")
    cast = lambda t: helper.make_node("Cast", [t], [f"{t}__i32"], to=TensorProto.INT32)  # noqa: E731
    nodes = [cast(x), cast(w)]
    shifted = f"{x}__i32"
    if x_zero:
        shifted = f"{node.output[0]}__shifted"
        nodes += [cast(x_zero), helper.make_node("Sub", [f"{x}__i32", f"{x_zero}__i32"], [shifted])]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return nodes + [helper.make_node("Conv", [shifted, f"{w}__i32"], list(node.output), name=node.name, **attrs)]


def _product_scale(node, operands, inits, numpy_helper) -> np.ndarray:
    """x_scale * w_scale (per output channel), the scale an int32 bias was quantized with."""
    try:
        xs, ws = (numpy_helper.to_array(inits[node.input[operands[i][1]]]).astype(np.float32) for i in (0, 1))
    except KeyError:
        raise TTileError(f"node {node.name!r} ({node.op_type}): its bias needs constant scales") from None
    scale = (xs.reshape(-1) * ws.reshape(-1)).astype(np.float32)
    return scale.reshape(()) if scale.size == 1 else scale
