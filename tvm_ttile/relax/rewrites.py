"""(Relax) The rewrites that make an imported module ready for tvm_ttile's kernels: transposed convolutions as
phase convolutions (transposed.py), conv2d / conv1d in channels-last layouts, activations as elementwise
functions, outputs padded to whole vectors and NCHW inputs read in place by the first convolution."""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.transform.fast_math import FastMathTransform

from .. import cpu as cpu_mod
from ..recognize import blocks
from .bf16 import Bf16Report, bf16_products
from ..precision import dot_product
from .attention import fuse_attention
from .bindings import binding_of, mutate_functions, static_shape
from .quantized import IntegerReport, as_elementwise, integer_products
from .padded_products import pad_columns
from .permutes import sink_permutes
from .rescaling import merge_rescaling
from .rows import fold_rows
from .softmax import pad_softmax_rows
from .transposed import rewrite as rewrite_transposed


def _bound_of(func) -> str | None:
    """"maximum" or "minimum" when PrimFunc `func` computes max / min(x[...], bound[()]) element by element (how
    TVM's ONNX frontend writes Clip, e.g. ReLU6), read from its body; else None."""
    if not isinstance(func, tvm.tirx.PrimFunc) or len(func.params) != 3:
        return None
    sch = tvm.s_tir.Schedule(func)
    found = blocks(sch)
    if len(found) != 1:
        return None
    stmt = sch.get(found[0])
    value = getattr(stmt.body, "value", None)
    kind = {"Max": "maximum", "Min": "minimum"}.get(type(value).__name__)
    if kind is None or not all(type(v).__name__ in ("BufferLoad", "TensorLoad") for v in (value.a, value.b)):
        return None
    ivs = [iv.var for iv in stmt.iter_vars]
    elementwise = len(value.a.indices) == len(ivs) and all(i.same_as(v) for i, v in zip(value.a.indices, ivs))
    ok = (elementwise and value.a.source.same_as(func.params[0]) and value.b.source.same_as(func.params[1])
          and len(value.b.indices) == 0)
    return kind if ok else None


@relax.expr_functor.mutator
class _ActivationsAsElementwise(relax.PyExprMutator):
    """leaky_relu(x) = max(x, alpha x), clip(x, a, b) = min(max(x, a), b) (ReLU6), and the TIR calls of max /
    min by a scalar that TVM's ONNX frontend makes of Clip as Relax's maximum / minimum: ConvertLayout has no
    layout rule for nn.leakyrelu, clip or TIR calls and would wrap every one in NHWC <-> NCHW transposes,
    splitting it from its convolution; maximum, minimum and multiply follow NHWC."""

    def __init__(self, mod=None):
        super().__init__(mod)
        self.mod = mod

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        x = call.args[0] if call.args else None
        if call.op.name == "relax.call_tir" and self.mod is not None and x in self.mod.functions:
            kind = _bound_of(self.mod[x])
            args = call.args[1]
            if kind and isinstance(args, relax.Tuple) and len(args.fields) == 2:
                return getattr(relax.op, kind)(args.fields[0], args.fields[1])
            return call
        if call.op.name == "relax.nn.leakyrelu":
            return relax.op.maximum(x, relax.op.multiply(x, relax.const(float(call.attrs.alpha), "float32")))
        if call.op.name == "relax.clip" and all(isinstance(a, (tvm.tirx.IntImm, tvm.tirx.FloatImm))
                                                for a in call.args[1:]):
            low, high = (float(a.value) for a in call.args[1:])
            dtype = x.ty.dtype
            return relax.op.minimum(relax.op.maximum(x, relax.const(low, dtype)), relax.const(high, dtype))
        return call


@relax.expr_functor.mutator
class _DivisionsAsProducts(relax.PyExprMutator):
    """x / c for a float scalar constant c as x * (1 / c): LLVM keeps a division by a constant that is not a power
    of two (it may differ from the product in the last bit), and a vector division costs what ten multiplies
    do, as GELU's x / sqrt(2) does in ConvNeXt's and ViT's matmul epilogues. ONNX Runtime's and OpenVINO's GELU
    multiply by 1 / sqrt(2) too."""

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.divide"):
            return call
        c, shape = call.args[1], static_shape(call.args[0])
        # (a scalar numerator, as dynamic quantization's scale (max - min) / 255, costs nothing and stays exact)
        if not isinstance(c, tvm.ir.expr.Constant) or c.value.numpy().size != 1 or not shape or np.prod(shape) == 1:
            return call
        value, dtype = float(c.value.numpy().reshape(())), str(c.value.numpy().dtype)
        if not dtype.startswith("float") or value == 0 or not np.isfinite(value):
            return call
        return relax.op.multiply(call.args[0], relax.const(np.full(c.value.numpy().shape, 1 / value, dtype), dtype))


# How much padding output channels to whole vectors may add to a contraction's work: 24 -> 32 channels or 1000 ->
# 1008 classes, not a 10-class head to 16 (a tiny layer, 60% more work, no parallel split at N threads).
MAX_OUTPUT_GROWTH = 1.5


@relax.expr_functor.mutator
class _WholeVectorOutputs(relax.PyExprMutator):
    """A conv2d (NHWC / HWIO, one group) or matmul by constant weights whose output channels are not whole vectors
    (MobileNet-v2's 24-channel projections, a 1000-class head) gets its weights padded with zeros to whole vectors
    (folded at build time) and its output sliced back, so that it becomes a task tvm_ttile tunes instead of one
    left to MetaSchedule. The slice moves past the elementwise ops with constant operands that follow (bias add,
    ReLU, ReLU6's bounds: their constants padded too), which then stay fused with the contraction; the padded
    channels' extra FMAs and the slice's pass (fused with what reads it) are part of the task's timed cost."""

    ELEMENTWISE = ("relax.add", "relax.subtract", "relax.multiply", "relax.maximum", "relax.minimum")
    UNARY = ("relax.nn.relu", "relax.sigmoid", "relax.tanh", "relax.nn.silu", "relax.nn.gelu")

    def __init__(self, lanes: int, mod=None):
        super().__init__(mod)
        self.lanes = lanes
        self.sliced = []  # (slice var, the padded tensor's var, the true channel count); vars compare by same_as

    def _constant(self, expr) -> bool:
        """Whether `expr` is computed from constants only (a weight and the permutes ConvertLayout puts on it)."""
        expr = binding_of(self, expr)
        if isinstance(expr, tvm.ir.expr.Constant):
            return True
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            tensors = [a for a in expr.args if isinstance(a, (relax.Var, relax.Call, tvm.ir.expr.Constant))]
            return bool(tensors) and all(self._constant(a) for a in tensors)
        return False

    def _pad_last(self, expr, extent: int):
        rank = len(static_shape(expr))
        return self.builder_.emit(relax.op.nn.pad(expr, [0] * (2 * rank - 1) + [extent]))

    def _sliced(self, padded, channels: int):
        out = self.builder_.emit(relax.op.strided_slice(padded, axes=[len(static_shape(padded)) - 1], begin=[0],
                                                        end=[channels], assume_inbound=True))
        self.sliced.append((out, padded, channels))
        return out

    def _source(self, expr):
        """(padded var, channels) when `expr` is one of this pass's slices, else None."""
        while isinstance(expr, relax.Var):
            found = next(((p, c) for v, p, c in self.sliced if v.same_as(expr)), None)
            if found:
                return found
            expr = self.lookup_binding(expr)
        return None

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not isinstance(call.op, tvm.ir.Op) or static_shape(call) is None:
            return call
        name = call.op.name
        if name in ("relax.nn.conv2d", "relax.matmul"):
            return self._contraction(call)
        if name in self.UNARY:
            source = self._source(call.args[0])
            if source:
                return self._sliced(self.builder_.emit(relax.Call(call.op, [source[0]], call.attrs)), source[1])
        if name in self.ELEMENTWISE:
            return self._elementwise(call)
        return call

    def _contraction(self, call):
        out_shape, w = static_shape(call), call.args[1]
        w_shape = static_shape(w)
        channels = out_shape[-1]
        if not channels % self.lanes or w_shape is None or w_shape[-1] != channels or not self._constant(w):
            return call
        if call.op.name == "relax.nn.conv2d" and (call.attrs.data_layout != "NHWC" or call.attrs.kernel_layout != "HWIO"
                                                  or call.attrs.groups != 1 or call.attrs.out_layout not in ("NHWC", "")):
            return call
        if call.op.name == "relax.matmul" and len(w_shape) != 2:
            return call
        whole = -(-channels // self.lanes) * self.lanes
        if whole > MAX_OUTPUT_GROWTH * channels:
            return call
        padded = self.builder_.emit(relax.Call(call.op, [call.args[0], self._pad_last(w, whole - channels)],
                                               call.attrs))
        return self._sliced(padded, channels)

    def _elementwise(self, call):
        a, b = call.args
        source, other, first = self._source(a), b, True
        if source is None:
            source, other, first = self._source(b), a, False
        if source is None or not self._constant(other):
            return call
        padded, channels = source
        shape, rank = static_shape(other), len(static_shape(padded))
        if shape is None or len(shape) > rank or (shape and shape[-1] not in (1, channels)):
            return call
        if shape and shape[-1] == channels:  # a per-channel constant (bias, scale): zeros in the padded channels
            other = self._pad_last(other, static_shape(padded)[-1] - channels)
        args = [padded, other] if first else [other, padded]
        return self._sliced(self.builder_.emit(relax.Call(call.op, args, call.attrs)), channels)


def _conv2d_reading_nchw(x, w, strides, padding, dilation):
    """TE: conv2d of NCHW `x` by HWIO `w` into NHWC, whose padding stage is also the layout change: it writes
    the padded input in NHWC, which the conv2d block reads as any NHWC conv2d reads its padded copy."""
    from tvm import te

    n, c, h, width = x.shape
    r, s, _, k = w.shape
    (top, left, bottom, right), (sh, sw), (dh, dw) = padding, strides, dilation
    zero = tvm.tirx.const(0, x.dtype)
    padded = te.compute((n, h + top + bottom, width + left + right, c), lambda b, y, z, ch: tvm.tirx.if_then_else(
        tvm.tirx.all(y >= top, y < h + top, z >= left, z < width + left), x[b, ch, y - top, z - left], zero),
        name="pad_temp")
    ry, rx, rc = te.reduce_axis((0, r), "ry"), te.reduce_axis((0, s), "rx"), te.reduce_axis((0, c), "rc")
    out_h = (h + top + bottom - (r - 1) * dh - 1) // sh + 1
    out_w = (width + left + right - (s - 1) * dw - 1) // sw + 1
    return te.compute((n, out_h, out_w, k), lambda b, y, z, f: te.sum(
        padded[b, y * sh + ry * dh, z * sw + rx * dw, rc] * w[ry, rx, rc, f], axis=[ry, rx, rc]), name="conv2d_nhwc")


@relax.expr_functor.mutator
class _InputLayoutIntoConv(relax.PyExprMutator):
    """ConvertLayout gives a network's first conv2d its NCHW input through a permute_dims of its own: a pass
    over the input (a function of its own, timed apart), after which the conv2d's padding stage copies the input
    again. Such a conv2d (NHWC / HWIO, one group) reads the NCHW tensor instead, its padding stage writing the
    NHWC padded copy: one pass instead of two (ONNX Runtime's first convolution reads NCHW too). A permute that
    something else also reads stays for that reader."""

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.nn.conv2d"):
            return call
        a = call.attrs
        if (a.data_layout, a.kernel_layout, a.out_layout, a.groups) != ("NHWC", "HWIO", "NHWC", 1):
            return call
        source = binding_of(self, call.args[0])
        if not (isinstance(source, relax.Call) and isinstance(source.op, tvm.ir.Op)
                and source.op.name == "relax.permute_dims" and source.attrs.axes is not None
                and [int(v) for v in source.attrs.axes] == [0, 2, 3, 1]):
            return call
        x = source.args[0]
        if static_shape(x) is None or static_shape(call.args[1]) is None or x.ty.dtype != call.ty.dtype:
            return call
        return self.builder_.call_te(_conv2d_reading_nchw, x, call.args[1], [int(v) for v in a.strides],
                                     [int(v) for v in a.padding], [int(v) for v in a.dilation],
                                     primfunc_name_hint="conv2d")


def prepare(mod, cpu=None, whole_vectors: bool = True, input_layout_in_conv: bool = True,
            quantized_report: IntegerReport | None = None, precision: str = "fp32",
            bf16_report: Bf16Report | None = None, fused_attention: bool = True):
    """The imported Relax module with transposed conv2d as their stride^2 phase convolutions (transposed.py),
    conv2d in NHWC / HWIO and conv1d in NWC / WIO (permutes at the boundaries, folded on weights), and with
    `whole_vectors`, conv2d / matmul outputs by constant weights padded to whole vectors of `cpu`'s ISA (the
    host's by default; _WholeVectorOutputs). With `input_layout_in_conv`, a conv2d whose input is an NCHW
    tensor permuted to NHWC reads the NCHW tensor (_InputLayoutIntoConv). A quantized (QDQ) model's convolutions
    become int8 tasks (quantized.py); `quantized_report` (an IntegerReport) receives which did and why the others
    did not. `precision` "bf16": every conv2d / matmul by constant weights becomes a bf16 task (bf16.py), which
    `bf16_report` receives, as for int8. With `whole_vectors` and `fused_attention`, float32 softmax(Q K^T) V is one
    task (relax/attention.py); else its products and softmax are three."""
    mod, _ = rewrite_transposed(mod)
    mod = as_elementwise(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod[gv] = _DivisionsAsProducts(mod).visit_expr(_ActivationsAsElementwise(mod).visit_expr(func))
    mod = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"], "relax.nn.conv1d": ["NWC", "WIO"]})(mod)
    mod = sink_permutes(mod)  # a channels-last block's permutes in and out of it cancel (permutes.py)
    cpu = cpu or cpu_mod.detect_host()
    lanes = cpu.lanes
    mod, report = integer_products(mod, lanes, dot_product("int8", cpu))
    if report.integer:  # the int8 tasks' rescaling, bias and requantization merged (rescaling.py)
        mod = merge_rescaling(mod)
    if quantized_report is not None:
        quantized_report.integer += report.integer
        quantized_report.kept_fp32 += report.kept_fp32
    if whole_vectors:
        for gv, func in list(mod.functions.items()):
            if isinstance(func, relax.Function):
                mod[gv] = _WholeVectorOutputs(lanes, mod).visit_expr(func)
    if precision == "bf16":
        mod = bf16_products(mod, lanes, bf16_report if bf16_report is not None else Bf16Report())
    mod = fold_rows(mod)  # fp32 matmuls on N-d activations: 2-d ones over folded rows
    if whole_vectors:
        mod = fuse_attention(mod, lanes) if fused_attention else mod  # softmax(Q K^T) V as one task
        mod = pad_columns(mod, lanes)  # attention's Q K^T at 197 tokens: columns padded inside the task
    if input_layout_in_conv:
        mod = mutate_functions(mod, _InputLayoutIntoConv)
    if whole_vectors:
        mod = pad_softmax_rows(mod, lanes)  # attention's softmax over 197 tokens in whole vectors (softmax.py)
    # erf (GELU), exp (softmax), tanh as TVM's vectorizable polynomials: compiled as written they are a libm call
    # per element (erff, expf), a tenth of ConvNeXt-T's time; the polynomials are within 4e-7 of libm
    mod = FastMathTransform()(mod)
    # the slices that the next elementwise op moved past, and the permutes now read by nothing, are dead:
    # removed, not computed
    return relax.transform.DeadCodeElimination()(relax.transform.CanonicalizeBindings()(mod))

