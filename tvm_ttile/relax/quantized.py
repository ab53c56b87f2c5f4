"""(Relax) Quantized (QDQ) models: their convolutions as int8 tasks, their other quantize / dequantize steps as
elementwise arithmetic.

ONNX Runtime's quantizer and NNCF write DequantizeLinear on a conv2d's u8 input and s8 weights, so TVM's importer
gives a conv2d over fp32 values. Here
1. before ConvertLayout, every per-tensor (scalar scale and zero point) quantize / dequantize becomes the
   elementwise ops it means (ConvertLayout has no layout rule for them, and would wrap each in NHWC <-> NCHW
   permutes; elementwise ops follow NHWC): q = clip(round(x (1 / s)) + z) as u8 / s8, x = (q - z) * s;
2. after it, a conv2d (NHWC / HWIO, grouped or not) reading such a dequantized u8 tensor and per-channel s8 constant
   weights with zero points 0 becomes the int8 convolution of operators.QConv2d on the u8 tensor itself (padded
   with its zero point, weights packed for `vpdpbusd` now), then (acc - compensation[k]) x (s_x s_w[k]) in fp32:
   the real-valued conv2d the graph goes on with (bias, ReLU, residual Add, the next QuantizeLinear), fused
   into the task as its epilogue. compensation[k] = z_x x the sum of output channel k's weights. A depthwise
   conv2d (one input channel per output channel) becomes operators.QDepthwise on the u8 tensor the same way: its
   fp32 microkernels widen the u8 loads in registers, exact, so the layer before writes u8.
A matmul over a dequantized u8 tensor and s8 constant weights becomes operators.QMatmul the same way (leading
dimensions folded into rows); one over two dequantized u8 tensors (attention's) the int8 product of the two
(padded_products.py) with its zero points' corrections; the int32 products of MatMulInteger and ConvInteger
(dynamic quantization's, the input's zero point maybe a tensor) become QMatmul and QConv2d on the u8 tensor too.
Every conv2d or matmul left in fp32 is reported with the reason (`IntegerReport.kept_fp32`), never dropped silently.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import relax

from ..operators.base import conv2d_nhwc_reference
from .bindings import binding_of, constant_value, is_op, mutate_functions, static_shape
from .padded_products import activations_task, swaps_last_axes
from .rows import folded_task

RANGES = {"uint8": (0, 255), "int8": (-128, 127)}


@dataclasses.dataclass
class IntegerReport:
    integer: list = dataclasses.field(default_factory=list)  # the conv2d made int8, as text
    kept_fp32: list = dataclasses.field(default_factory=list)  # (conv2d, why it stays fp32)


def _scalar(mutator, expr):
    v = constant_value(mutator, expr)
    return v.reshape(()).item() if v is not None and v.size == 1 else None


def _const(value, dtype: str):
    return relax.const(np.asarray(value, dtype=dtype), dtype)


@relax.expr_functor.mutator
class _QDQAsElementwise(relax.PyExprMutator):
    """Per-tensor quantize / dequantize as the elementwise ops they mean (module doc, step 1)."""

    def __init__(self, mod=None):
        super().__init__(mod)

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not (is_op(call, "relax.quantize") or is_op(call, "relax.dequantize")):
            return call
        x, scale, zero = call.args
        s, z = _scalar(self, scale), _scalar(self, zero)
        if s is None or z is None:
            return call  # per-channel: a weight's, read as it is by the conv2d rewrite
        if is_op(call, "relax.dequantize"):
            if str(call.attrs.out_dtype) != "float32":
                return call
            return relax.op.multiply(relax.op.subtract(relax.op.astype(x, "float32"), _const(z, "float32")),
                                     _const(s, "float32"))
        dtype = str(call.attrs.out_dtype)
        if dtype not in RANGES:
            return call
        lo, hi = RANGES[dtype]
        # x * (1/s), not x / s: a vector divide is the slowest step of a fused epilogue (docs/decisions.md); the
        # two round to different integers only where x / s lies within an ulp of a half
        inverse = np.float32(1) / np.float32(s)
        q = relax.op.add(relax.op.round(relax.op.multiply(x, _const(inverse, "float32"))), _const(z, "float32"))
        q = relax.op.minimum(relax.op.maximum(q, _const(lo, "float32")), _const(hi, "float32"))
        return relax.op.astype(q, dtype)


def _dequantized_u8(mutator, expr):
    """(u8 tensor, scale, zero point) when `expr` is (astype(q, f32) - z) * s of a u8 `q`, through a permute to
    NHWC (ConvertLayout's, before a network's first conv2d: applied to q instead); else None."""
    expr = binding_of(mutator, expr)
    permute = None
    if is_op(expr, "relax.permute_dims") and [int(a) for a in expr.attrs.axes] == [0, 2, 3, 1]:
        permute, expr = expr, binding_of(mutator, expr.args[0])
    if not is_op(expr, "relax.multiply"):
        return None
    sub, s = binding_of(mutator, expr.args[0]), _scalar(mutator, expr.args[1])
    if s is None or not is_op(sub, "relax.subtract"):
        return None
    cast, z = binding_of(mutator, sub.args[0]), _scalar(mutator, sub.args[1])
    if z is None or not is_op(cast, "relax.astype"):
        return None
    q = cast.args[0]
    if str(q.ty.dtype) != "uint8" or z != int(z):
        return None
    return (relax.op.permute_dims(q, [0, 2, 3, 1]) if permute is not None else q), float(s), int(z)


def _weights(mutator, expr):
    """(s8 weights HWIO, per-output-channel scales) when `expr` is a permute to HWIO of an OIHW s8 constant's
    dequantize with zero points 0 (per channel, axis 0, or per tensor); else (None, why)."""
    expr = binding_of(mutator, expr)
    if not (is_op(expr, "relax.permute_dims") and [int(a) for a in expr.attrs.axes] == [2, 3, 1, 0]):
        return None, "its weights are not a permuted OIHW tensor"
    dq = binding_of(mutator, expr.args[0])
    if is_op(dq, "relax.dequantize"):
        w, scale, zero = (constant_value(mutator, a) for a in dq.args)
        if w is None or scale is None or zero is None:
            return None, "its weights' dequantize has operands that are not constants"
        if scale.size > 1 and int(dq.attrs.axis) != 0:
            return None, f"its weights are quantized along axis {int(dq.attrs.axis)}, not the output channels"
    else:
        found = _dequantized_const(mutator, dq)
        if found is None:
            return None, "its weights are not a dequantized int8 constant"
        w, scale, zero = found
    if w.dtype != np.int8:
        return None, f"its weights are {w.dtype}, not int8"
    if np.any(zero != 0):
        return None, "its weights have a nonzero zero point"
    k = w.shape[0]
    return (np.ascontiguousarray(w.transpose(2, 3, 1, 0)), np.broadcast_to(scale.astype(np.float64).reshape(-1),
                                                                          (k,)).copy()), ""


def _dequantized_const(mutator, expr):
    """(w, scale, zero) of (astype(w, f32) - z) * s on a constant w (a per-tensor weight's dequantize, step 1)."""
    if not is_op(expr, "relax.multiply"):
        return None
    sub = binding_of(mutator, expr.args[0])
    if not is_op(sub, "relax.subtract"):
        return None
    cast = binding_of(mutator, sub.args[0])
    if not is_op(cast, "relax.astype"):
        return None
    w, s, z = (constant_value(mutator, e) for e in (cast.args[0], expr.args[1], sub.args[1]))
    return None if w is None or s is None or z is None else (w, s, z)


@relax.expr_functor.mutator
class _IntegerConv2d(relax.PyExprMutator):
    """A quantized conv2d as an int8 task and its fp32 rescaling (module doc, step 2)."""

    def __init__(self, lanes: int, report: IntegerReport, dot=None, mod=None):
        super().__init__(mod)
        self.lanes, self.report, self.dot = lanes, report, dot

    @property
    def _bits(self) -> int:
        return 128 if self.dot is None else self.dot.weight_limit

    def _unfit(self, w) -> str:
        """Why the CPU's int8 instruction cannot multiply the s8 constant `w` exactly ("" when it can)."""
        if self.dot is None or self.dot.weights_fit(w):
            return ""
        return (f"its weights reach |w| = {int(abs(w.astype(np.int64)).max())} and this CPU's int8 instruction "
                f"({self.dot.name}, no VNNI) sums them exactly only up to {self.dot.weight_limit} (quantize with "
                f"reduce_range=True)")

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if is_op(call, "relax.matmul") and str(call.ty.dtype) == "int32":
            return self._integer_matmul(call)
        if is_op(call, "relax.nn.conv2d") and str(call.ty.dtype) == "int32":
            return self._integer_conv2d(call)
        if is_op(call, "relax.matmul"):
            return self._matmul(call)
        if not is_op(call, "relax.nn.conv2d"):
            return call
        a = call.attrs
        x = _dequantized_u8(self, call.args[0])
        if x is None:
            return call  # an fp32 conv2d: nothing quantized about it
        name = _conv2d_name(call)
        depthwise = _is_depthwise(call)
        why = _geometry_unfit(a)
        weights = None
        if not why:
            weights, why = _weights(self, call.args[1])
        if not why and depthwise:
            why = _depthwise_unfit(weights[0])
        elif not why:
            why = self._unfit(weights[0])
        if why:
            self.report.kept_fp32.append((name, why))
            return call
        q, sx, zx = x
        w, sw = weights
        self.report.integer.append(name)
        if depthwise:
            return self._depthwise(call, q, w[:, :, 0, :], zx, sx * sw)
        acc = self._conv_products(call, q, w, zx)
        real = relax.op.astype(relax.op.subtract(acc, _const(zx * w.astype(np.int64).sum(axis=(0, 1, 2)), "int32")),
                               "float32")
        return relax.op.multiply(real, _const(sx * sw, "float32"))

    def _depthwise(self, call, q, w, input_zero: int, scale):
        """operators.QDepthwise on the u8 tensor `q` (padded with `input_zero`) and the s8 weights `w` [R, S, C]
        as floats: its microkernels read q itself, widened in registers. Its exact result less the compensation
        (`input_zero` x each channel's weight sum) inside the task, exact too, then x `scale` per channel: as two
        steps in the graph, the rescaling merge would scale both first and subtract two large, rounded numbers."""
        from ..operators import QDepthwise

        a = call.attrs
        q = self.builder_.emit(q) if isinstance(q, relax.Call) else q
        n, h, width, c = static_shape(q) or static_shape(call.args[0])
        r, s, _ = w.shape
        op = QDepthwise(C=c, H=h, W=width, R=r, S=s, stride=int(a.strides[0]), pad=tuple(int(v) for v in a.padding),
                        dilation=int(a.dilation[0]), N=n, input_zero=input_zero)
        weights = relax.const(op.constant_weights(w, (r, s, -(-c // self.lanes) * self.lanes)))
        compensation = _const(input_zero * w.astype(np.int64).sum(axis=(0, 1)), "float32")
        acc = self.builder_.call_te(op.compensated, q, weights, compensation, primfunc_name_hint="qdepthwise")
        return relax.op.multiply(acc, _const(scale, "float32"))

    def _conv_products(self, call, q, w, input_zero: int):
        """The int32 result of operators.QConv2d on the u8 tensor `q` (padded with `input_zero`) and s8 HWIO
        weights `w`, in the geometry of the conv2d `call`."""
        from ..operators import QConv2d

        a = call.attrs
        q = self.builder_.emit(q) if isinstance(q, relax.Call) else q
        n, h, width, c = static_shape(q) or static_shape(call.args[0])
        r, s, _, k = w.shape
        op = QConv2d(K=k, C=c, H=h, W=width, R=r, S=s, stride=int(a.strides[0]), pad=tuple(int(v) for v in a.padding),
                     dilation=int(a.dilation[0]), N=n, input_zero=input_zero, weight_limit=self._bits,
                     groups=int(a.groups))
        packed = relax.const(op.pack_weights(w, self.lanes), "int8")
        return self.builder_.call_te(op.compute, q, packed, primfunc_name_hint="qconv2d")

    def _integer_conv2d(self, call):
        """ConvInteger as models/qoperators writes it for TVM's importer, conv2d(astype(x_u8) - astype(z_x),
        W) in int32 with constant s8 weights: QConv2d on x itself. A constant z_x pads x with it and its
        compensation is z_x x each channel's weight sum (as a QDQ conv2d's); one computed per inference (dynamic
        quantization's) pads x with 0 and subtracts z_x x the weight sum over the taps inside the image, per
        output pixel and channel (a constant)."""
        name = _conv2d_name(call)
        nchw = _below_nhwc_permute(self, call.args[0])  # (a channels-last block's input has no permute left)
        x = _shifted(self, call.args[0] if nchw is None else nchw)
        why = _geometry_unfit(call.attrs) or ("it is depthwise (a depthwise ConvInteger is not built)"
                                              if _is_depthwise(call) else "")
        if x is None or str(x[0].ty.dtype) != "uint8":
            self.report.kept_fp32.append((name, "its input is not a u8 tensor minus a scalar zero point"))
            return call
        q, zero = x
        q = q if nchw is None else relax.op.permute_dims(q, [0, 2, 3, 1])
        w = _integer_weights(self, call.args[1]) if not why else None
        if not why and w is None:
            why = "its weights are not a permuted OIHW int8 constant"
        if not why:
            why = self._unfit(w)
        if why:
            self.report.kept_fp32.append((name, why))
            return call
        z = None if zero is None else _scalar(self, zero)
        self.report.integer.append(name)
        if zero is None or z is not None:  # a constant zero point: the QDQ conv2d's form
            z = int(z or 0)
            return relax.op.subtract(self._conv_products(call, q, w, z),
                                     _const(z * w.astype(np.int64).sum(axis=(0, 1, 2)), "int32"))
        a = call.attrs
        n, h, width, c = static_shape(call.args[0])
        ones = np.ones((1, h, width, c), np.int64)
        inside = conv2d_nhwc_reference(ones, w.astype(np.int64), int(a.strides[0]), tuple(int(v) for v in a.padding),
                                       int(a.dilation[0]), int(a.groups), exact=True)
        return relax.op.subtract(self._conv_products(call, q, w, 0),
                                 relax.op.multiply(relax.op.astype(zero, "int32"), _const(inside, "int32")))


    def _matmul(self, call):
        """x[..., K] @ W[K, N] of a dequantized u8 x and s8 constant weights (a Gemm's W[N, K] permuted, or a
        MatMul's W[K, N]) as QMatmul over x's leading dimensions folded into rows, then its fp32 rescaling."""
        from ..operators import QMatmul

        x = _dequantized_u8(self, call.args[0])
        if x is None:
            return call
        shapes = " x ".join(str(list(static_shape(a) or ())) for a in call.args)
        y = _dequantized_operand(self, call.args[1])
        if y is not None:
            return self._activation_product(call, x, y, f"matmul {shapes}")
        weights, why = _matmul_weights(self, call.args[1])
        q, sx, zx = x
        shape = static_shape(q) if not isinstance(q, relax.Call) else None
        if not why and shape is None:
            why = "its input's shape is not static"
        if not why:
            why = self._unfit(weights[0])
        if why:
            self.report.kept_fp32.append((f"matmul {shapes}", why))
            return call
        w, sw = weights
        k, n = w.shape
        rows = int(np.prod(shape[:-1]))
        op = QMatmul(M=rows, N=n, K=k, weight_limit=self._bits)
        acc = self._products(op, q, shape, w)
        self.report.integer.append(f"matmul {shapes}")
        return relax.op.multiply(relax.op.astype(relax.op.subtract(
            acc, _const(zx * w.astype(np.int64).sum(axis=0), "int32")), "float32"), _const(sx * sw, "float32"))

    def _activation_product(self, call, x, y, name: str):
        """x @ y of two dequantized u8 activations (attention's Q K^T and P V) as the int8 product of their u8
        tensors, y shifted to s8 in the task (padded_products.py), then (with a, b the u8 tensors and sums over
        the reduction) sum (a - z_a)(b - z_b) = sum a (b - 128) + (128 - z_b) sum a - z_a sum b + K z_a z_b,
        exact in int32, times s_a s_b: the corrections fuse into the task's epilogue, the row and column sums
        are reductions of their own."""
        (a, sa, za), (b, sb, zb) = x, y
        shapes = [static_shape(e) for e in (a, b, call)]
        if any(s is None or len(s) < 2 for s in shapes):
            self.report.kept_fp32.append((name, "its operands' shapes are not static"))
            return call
        k_len = shapes[0][-1]
        acc = activations_task(self, a, b, shapes[2][-1], self.lanes, "int8")
        rows = relax.op.sum(relax.op.astype(a, "int32"), axis=[-1], keepdims=True)
        columns = relax.op.sum(relax.op.astype(b, "int32"), axis=[-2], keepdims=True)
        exact = relax.op.add(relax.op.subtract(relax.op.add(acc, relax.op.multiply(rows, _const(128 - zb, "int32"))),
                                               relax.op.multiply(columns, _const(za, "int32"))),
                             _const(k_len * za * zb, "int32"))
        self.report.integer.append(name)
        return relax.op.multiply(relax.op.astype(exact, "float32"), _const(sa * sb, "float32"))

    def _products(self, op, x, shape, weights):
        """op (a QMatmul of x's rows) on x of `shape` [..., K] and the constant `weights` [K, N]: its int32 result
        shaped [..., N] (rows.folded_task: the elementwise ops after it fuse into it)."""
        packed = relax.const(op.pack_weights(weights, self.lanes), "int8")
        return folded_task(self.builder_, op.compute, x, shape, packed, "qmatmul")

    def _integer_matmul(self, call):
        """ONNX's MatMulInteger as TVM imports it, (astype(x_u8) - astype(z_x)) @ (astype(W_s8) - astype(z_w)) in
        int32, with a constant W, z_w = 0 and z_x any scalar (dynamic quantization's, computed per inference):
        QMatmul on x (leading dimensions folded into rows) minus z_x x the columns' weight sums."""
        from ..operators import QMatmul

        x = _shifted(self, call.args[0])
        w = _shifted(self, call.args[1])
        shapes = " x ".join(str(list(static_shape(a) or ())) for a in call.args)
        why = ""
        if x is None or str(x[0].ty.dtype) != "uint8":
            return call  # not a product of quantized activations
        if w is None or constant_value(self, w[0]) is None or str(w[0].ty.dtype) != "int8":
            why = "its weights are not an int8 constant"
        elif w[1] is not None and (constant_value(self, w[1]) is None or np.any(constant_value(self, w[1]) != 0)):
            why = "its weights have a nonzero zero point"
        shape = static_shape(x[0])
        if not why and (shape is None or len(static_shape(w[0]) or ()) != 2):
            why = "its input's shape is not static or its weights are not a matrix"
        weights = constant_value(self, w[0]) if not why else None
        if not why:
            why = self._unfit(weights)
        if why:
            self.report.kept_fp32.append((f"matmul {shapes}", why))
            return call
        k, n = weights.shape
        rows = int(np.prod(shape[:-1]))
        op = QMatmul(M=rows, N=n, K=k, weight_limit=self._bits)
        acc = self._products(op, x[0], shape, weights)
        self.report.integer.append(f"matmul {shapes}")
        if x[1] is not None:  # - z_x x sum_k W[k, j], z_x a tensor of the graph
            sums = _const(weights.astype(np.int64).sum(axis=0), "int32")
            acc = relax.op.subtract(acc, relax.op.multiply(relax.op.astype(x[1], "int32"), sums))
        return acc


def _conv2d_name(call) -> str:
    return f"conv2d {list(static_shape(call.args[0]) or ())} x {list(static_shape(call.args[1]) or ())}"


def _is_depthwise(call) -> bool:
    """Whether a conv2d has one input channel per group and per output channel."""
    groups = int(call.attrs.groups)
    return groups > 1 and groups == (static_shape(call.args[0]) or (0,))[-1] == (static_shape(call) or (1,))[-1]


def _depthwise_unfit(w) -> str:
    """Why an int8 depthwise layer of s8 HWIO weights `w` has no exact task ("" when it has one)."""
    from ..operators.qdepthwise import EXACT_TAPS

    taps = w.shape[0] * w.shape[1]
    return "" if taps <= EXACT_TAPS else f"its {taps} taps sum beyond what fp32 holds exactly ({EXACT_TAPS})"


def _geometry_unfit(a) -> str:
    """Why a conv2d of attributes `a` has no int8 task ("" when it has one)."""
    if (a.data_layout, a.kernel_layout, a.out_layout) != ("NHWC", "HWIO", "NHWC"):
        return f"its layout is {a.data_layout}/{a.kernel_layout}, not NHWC/HWIO"
    if len(set(int(v) for v in a.strides)) != 1 or len(set(int(v) for v in a.dilation)) != 1:
        return "its strides or dilations differ along h and w"
    return ""


def _below_nhwc_permute(mutator, expr):
    """What the permute to NHWC that ConvertLayout put before a conv2d reads (None when there is none)."""
    expr = binding_of(mutator, expr)
    if is_op(expr, "relax.permute_dims") and [int(a) for a in expr.attrs.axes] == [0, 2, 3, 1]:
        return expr.args[0]
    return None


def _integer_weights(mutator, expr):
    """The s8 HWIO array of a permute to HWIO of an OIHW integer constant holding s8 values (ConvInteger's
    weights, cast to int32 and folded), else None."""
    expr = binding_of(mutator, expr)
    if not (is_op(expr, "relax.permute_dims") and [int(a) for a in expr.attrs.axes] == [2, 3, 1, 0]):
        return None
    inner = binding_of(mutator, expr.args[0])
    if is_op(inner, "relax.astype"):
        inner = inner.args[0]
    w = constant_value(mutator, inner)
    if w is None or w.dtype.kind not in "iu" or w.size == 0 or w.min() < -128 or w.max() > 127:
        return None
    return np.ascontiguousarray(w.astype(np.int8).transpose(2, 3, 1, 0))


def _dequantized_operand(mutator, expr):
    """_dequantized_u8 of a matmul's right operand, also through a permute exchanging its last two axes (K^T
    written after K's dequantize): (u8 tensor, scale, zero point), the permute applied to the u8 tensor; else None."""
    found = _dequantized_u8(mutator, expr)
    bound = binding_of(mutator, expr)
    if found is None and swaps_last_axes(bound):
        inner = _dequantized_u8(mutator, bound.args[0])
        if inner is not None:
            found = (relax.op.permute_dims(inner[0], bound.attrs.axes), *inner[1:])
    return found


def _shifted(mutator, expr):
    """(q, z) when `expr` is astype(q, int32) - astype(z, int32) with a scalar z (or a constant z, folded), (q,
    None) when it is astype(q, int32); else None."""
    expr = binding_of(mutator, expr)
    zero = None
    if is_op(expr, "relax.subtract"):
        z = binding_of(mutator, expr.args[1])
        if (static_shape(z) or ()) != () or not (is_op(z, "relax.astype") or constant_value(mutator, z) is not None):
            return None
        zero, expr = z.args[0] if is_op(z, "relax.astype") else z, binding_of(mutator, expr.args[0])
    if not is_op(expr, "relax.astype"):
        return None
    return expr.args[0], zero


def _matmul_weights(mutator, expr):
    """(s8 weights [K, N], per-column scales) of a matmul's dequantized constant weights with zero points 0:
    permute_dims(dequantize(W[N, K], axis 0)) (a Gemm with transB) or dequantize(W[K, N], axis 1) (a MatMul), or
    their per-tensor elementwise forms; else (None, why)."""
    expr = binding_of(mutator, expr)
    transposed = is_op(expr, "relax.permute_dims") and [int(a) for a in expr.attrs.axes] == [1, 0]
    dq = binding_of(mutator, expr.args[0]) if transposed else expr
    if is_op(dq, "relax.dequantize"):
        w, scale, zero = (constant_value(mutator, a) for a in dq.args)
        axis = int(dq.attrs.axis)
    else:
        found = _dequantized_const(mutator, dq)
        w, scale, zero = found if found is not None else (None, None, None)
        axis = None
    if w is None or scale is None or zero is None:
        return None, "its weights are not a dequantized constant"
    if w.dtype != np.int8 or w.ndim != 2:
        return None, f"its weights are {w.dtype} of {w.ndim} dimensions, not a 2-d int8 matrix"
    if np.any(zero != 0):
        return None, "its weights have a nonzero zero point"
    w = w.T if transposed else w
    if scale.size > 1 and axis != (0 if transposed else 1):
        return None, f"its weights are quantized along the reduction (axis {axis}), not the output columns"
    n = w.shape[1]
    return (np.ascontiguousarray(w), np.broadcast_to(scale.astype(np.float64).reshape(-1), (n,)).copy()), ""


@relax.expr_functor.mutator
class _PoolOnIntegers(relax.PyExprMutator):
    """quantize(max_pool2d(dequantize(q))) with one scale and zero point on both sides is max_pool2d(q): the
    (de)quantize is monotone and pooling picks an element (a u8 padding of 0 is below every value). The layer
    before then writes u8, not fp32, and the pool reads a quarter of the bytes."""

    def __init__(self, mod=None):
        super().__init__(mod)

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not is_op(call, "relax.quantize"):
            return call
        pool = binding_of(self, call.args[0])
        source = binding_of(self, pool.args[0]) if is_op(pool, "relax.nn.max_pool2d") else None
        if not is_op(source, "relax.dequantize"):
            return call
        same = [(_scalar(self, a), _scalar(self, b)) for a, b in zip(call.args[1:], source.args[1:])]
        q = source.args[0]
        if any(a is None or a != b for a, b in same) or str(q.ty.dtype) != str(call.attrs.out_dtype):
            return call
        return relax.Call(pool.op, [q], pool.attrs)


def as_elementwise(mod):
    """Step 1 of the module doc: before ConvertLayout (max pooling between a dequantize and a quantize of one
    scale first computed on the integers)."""
    return mutate_functions(mutate_functions(mod, _PoolOnIntegers), _QDQAsElementwise)


def integer_products(mod, lanes: int, dot=None) -> tuple:
    """Step 2 of the module doc (conv2d and matmuls): after ConvertLayout; `dot`: the CPU's int8 instruction
    (precision.DotProduct), whose weights a layer's must fit to become int8. Returns (module, IntegerReport)."""
    report = IntegerReport()
    return mutate_functions(mod, lambda m: _IntegerConv2d(lanes, report, dot, m)), report


def precision_of(mod) -> str:
    """The precision a module's kernels need: that of its reduced-precision contractions (int8 from the QDQ
    rewrite, bf16 from bf16.py's) when a PrimFunc holds one, else "fp32"."""
    from ..recognize import recognize_all

    for func in mod.functions.values():
        if isinstance(func, tvm.tirx.PrimFunc):
            reduced = [c.precision for c in recognize_all(func)[0] if c.precision != "fp32"]
            if reduced:
                return reduced[0]
    return "fp32"


def context_for(mod, ctx):
    """`ctx` for building and tuning `mod`: with its reduced precision's target (the CPU's dot-product
    instruction; refused in one line on a CPU without one) when the module has int8 or bf16 kernels."""
    from ..precision import require

    if ctx.precision != "fp32":  # (already a reduced precision's: nothing to scan)
        return ctx
    precision = precision_of(mod)
    if precision == "fp32":
        return ctx
    require(precision, ctx.cpu)
    return ctx.replace(precision=precision)


def output_step(onnx_model) -> float | None:
    """The quantization step of an ONNX model's output: the scale of the DequantizeLinear that produces it (a QDQ
    model's); None when the output is not dequantized from a per-tensor quantized value."""
    from onnx import numpy_helper

    if onnx_model is None or not onnx_model.graph.output:
        return None
    out = onnx_model.graph.output[0].name
    node = next((n for n in onnx_model.graph.node if out in n.output), None)
    if node is None or node.op_type != "DequantizeLinear":
        return None
    scales = {i.name: numpy_helper.to_array(i) for i in onnx_model.graph.initializer if i.name == node.input[1]}
    scale = scales.get(node.input[1])
    return float(scale) if scale is not None and scale.size == 1 else None


# The ONNX operators a QDQ model computes on integers here: conv2d and matmuls (int8 tasks, or reported in
# IntegerReport.kept_fp32) and max pooling (on the u8 values between a dequantize and a quantize of one scale)
INTEGER_OPS = ("Conv", "MatMul", "Gemm", "MaxPool")
# Operators that move values without arithmetic: what they move is not computed, in any precision
MOVING_OPS = ("Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Concat", "Split", "Gather",
              "Identity", "QuantizeLinear", "DequantizeLinear")


def float_nodes(onnx_model) -> list:
    """The nodes of a QDQ ONNX model that compute in fp32 on dequantized activations (DequantizeLinear before
    them, a QuantizeLinear usually after), as "OpType 'name'": what a user of ONNX Runtime's int8 may expect in
    integers (its QLinearAdd, QLinearGlobalAveragePool, a Softmax between two quantized layers)."""
    if onnx_model is None:
        return []
    graph = onnx_model.graph
    constants = {i.name for i in graph.initializer}
    constants |= {o for n in graph.node if n.op_type == "Constant" for o in n.output}
    dequantized = {n.output[0] for n in graph.node if n.op_type == "DequantizeLinear" and n.input[0] not in constants}
    return [f"{n.op_type} '{n.name or n.output[0]}'" for n in graph.node
            if n.op_type not in INTEGER_OPS + MOVING_OPS and any(i in dequantized for i in n.input)]


# The share of a quantized network's output elements within one quantization step of ONNX Runtime's that it must
# reach (network.model.accuracy)
WITHIN_ONE_STEP = 0.999


def agreement(got, ref, step: float) -> dict:
    """How far `got` is from `ref` in quantization steps: the largest distance and the shares of elements equal
    and within one step."""
    off = np.abs(np.asarray(got, np.float64) - np.asarray(ref, np.float64)) / step
    return {"step": step, "max_steps": float(off.max()), "equal": float(np.mean(off < 1e-3)),
            "within_one_step": float(np.mean(off <= 1 + 1e-3))}
