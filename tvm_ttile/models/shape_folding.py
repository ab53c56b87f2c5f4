"""Shape computations of an ONNX model folded to constants before TVM imports it.

Exporters write a tensor's shape as a computation: Shape, then Gather / Add / Div / Concat / Unsqueeze on it, into a
Reshape's shape or a Slice's ends (ShuffleNet's channel shuffle and `chunk`). TVM's importer cannot follow them
("emit_te now only supports Tensor that has ShapeExpr shape"). With the input's shape fixed, ONNX's shape inference
gives every tensor a static shape, so each such chain is a constant: `fold` evaluates it (ONNX's reference
evaluator, node by node) and puts the values in as initializers. What still depends on the input's values (a shape
from NonZero, say) is refused in one line naming the node.
"""
from __future__ import annotations

import numpy as np

from ..errors import TTileError

# Small integer tensors are shapes and indices; larger ones (weights) are left to TVM's own constant folding.
MAX_FOLDED = 64
# The inputs of these ops that are shapes: TVM needs them constant.
SHAPE_INPUTS = {"Reshape": (1,), "Expand": (1,), "ConstantOfShape": (0,), "Tile": (1,), "Slice": (1, 2, 3, 4),
                "Range": (0, 1, 2), "Resize": (2, 3), "Upsample": (1,), "Squeeze": (1,), "Unsqueeze": (1,)}


def needs_folding(model) -> bool:
    return any(n.op_type == "Shape" for n in model.graph.node)


def fold(model, input_name: str, shape, name: str = "model"):
    """`model` with `input_name` of `shape` and every computation of small constants from shapes and constants
    replaced by its value; TTileError naming the node where a shape still depends on the input's values."""
    import onnx
    from onnx import numpy_helper, shape_inference
    from onnx.reference import ReferenceEvaluator

    model = onnx.ModelProto.FromString(model.SerializeToString())
    for inp in model.graph.input:
        if inp.name == input_name:
            for dim, size in zip(inp.type.tensor_type.shape.dim, shape):
                dim.Clear()
                dim.dim_value = int(size)
    # A folded shape can make the next one inferable (a Slice's computed end, then the Shape of what follows):
    # shape inference and folding alternate until nothing more folds.
    while True:
        kept, folded = _fold_once(model, shape_inference, numpy_helper, ReferenceEvaluator)
        if not folded:
            break
        used = {i for n in kept for i in n.input} | {o.name for o in model.graph.output}
        del model.graph.node[:]
        model.graph.node.extend(kept)
        model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in folded.items() if k in used)
    known = {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        for pos in SHAPE_INPUTS.get(node.op_type, ()):
            if pos < len(node.input) and node.input[pos] and node.input[pos] not in known:
                raise TTileError(f"{name}: node {node.name or node.op_type!r} ({node.op_type}) takes its input "
                                 f"{node.input[pos]!r} as a shape computed from the input's values at run time; "
                                 "tvm_ttile builds static shapes only (--input-shape fixes the input's, not this)")
    return model


def _fold_once(model, shape_inference, numpy_helper, evaluator):
    """(the nodes left, {output: value} of the nodes folded) in one pass over `model` as shape inference sees it."""
    inferred = shape_inference.infer_shapes(model)
    static = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            static[vi.name] = [d.dim_value for d in dims]
    known = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    opset = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    kept, folded = [], {}
    for node in model.graph.node:
        value = _value_of(node, known, static, opset, evaluator)
        if value is not None and value.size <= MAX_FOLDED:
            known[node.output[0]] = folded[node.output[0]] = value
            continue
        kept.append(node)
    return kept, folded


def _value_of(node, known, static, opset, evaluator):
    """The value of `node`'s single output when it is a constant, else None."""
    from onnx import helper

    if len(node.output) != 1:
        return None
    if node.op_type == "Shape" and node.input[0] in static:
        attrs = {a.name: a.i for a in node.attribute}
        dims = static[node.input[0]]
        return np.array(dims[attrs.get("start", 0):attrs.get("end", len(dims))], np.int64)
    if node.op_type == "Size" and node.input[0] in static:
        return np.array(int(np.prod(static[node.input[0]])), np.int64)
    inputs = [i for i in node.input if i]
    if node.op_type != "Constant" and (not inputs or any(i not in known for i in inputs)):
        return None
    if node.op_type != "Constant" and any(known[i].size > MAX_FOLDED for i in inputs):
        return None
    graph = helper.make_graph([node], "fold", [], [helper.make_tensor_value_info(node.output[0], 0, None)],
                              initializer=[_tensor(k, known[k]) for k in inputs])
    try:
        return np.asarray(evaluator(helper.make_model(graph, opset_imports=opset)).run(None, {})[0])
    except Exception:  # noqa: BLE001 - an op the reference evaluator cannot run: left to TVM
        return None


def _tensor(name, value):
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value), name)
