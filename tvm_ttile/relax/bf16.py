"""(Relax) bf16 networks: every conv2d and matmul by constant weights, and every matmul of two activations (attention's
Q K^T and P V), computed in bf16 with fp32 accumulation.

After ConvertLayout (and the padding of outputs to whole vectors), a conv2d (NHWC / HWIO, grouped or not, the same
stride and dilation along h and w) or a matmul whose weights are constants becomes operators.QConv2d / QMatmul at bf16:
its weights rounded to bf16 and packed in `vdpbf16ps`'s layout now, its fp32 input rounded to bf16 in the kernel's
own input copy (no pass of its own), its output fp32, so the bias, ReLU and residual Add that follow fuse into the
task's epilogue as they do in fp32. A product of two activations rounds and packs both inside its task
(padded_products.py). Activations between layers stay fp32. Every conv2d or matmul left in fp32 is
reported with the reason (`Bf16Report.kept_fp32`), never dropped silently.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from tvm import relax

from .bindings import constant_value, is_op, mutate_functions, static_shape
from .padded_products import product_of_activations
from .rows import folded_task


@dataclasses.dataclass
class Bf16Report:
    bf16: list = dataclasses.field(default_factory=list)  # the layers made bf16, as text
    kept_fp32: list = dataclasses.field(default_factory=list)  # (layer, why it stays fp32)


@relax.expr_functor.mutator
class _Bf16Products(relax.PyExprMutator):
    """Each conv2d / matmul by constant weights as its bf16 task (module doc)."""

    def __init__(self, lanes: int, report: Bf16Report, mod=None):
        super().__init__(mod)
        self.lanes, self.report = lanes, report

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if is_op(call, "relax.nn.conv2d"):
            return self._conv2d(call)
        if is_op(call, "relax.matmul"):
            return self._matmul(call)
        return call

    def _conv2d(self, call):
        from ..operators import QConv2d

        a = call.attrs
        shape, w = static_shape(call.args[0]), constant_value(self, call.args[1])
        name = f"conv2d {list(shape or ())} x {list(static_shape(call.args[1]) or ())}"
        why = ""
        if (a.data_layout, a.kernel_layout, a.out_layout) != ("NHWC", "HWIO", "NHWC"):
            why = f"its layout is {a.data_layout}/{a.kernel_layout}, not NHWC/HWIO"
        elif int(a.groups) != 1 and int(a.groups) == (shape or (0,))[-1] == (static_shape(call) or (1,))[-1]:
            why = f"it is depthwise, {int(a.groups)} groups (bf16 depthwise convolutions are not built yet)"
        elif len({int(v) for v in a.strides}) != 1 or len({int(v) for v in a.dilation}) != 1:
            why = "its strides or dilations differ along h and w"
        elif w is None or w.dtype != np.float32 or shape is None:
            why = "its weights are not an fp32 constant" if shape else "its input's shape is not static"
        if why:
            self.report.kept_fp32.append((name, why))
            return call
        n, h, width, c = shape
        r, s, _, k = w.shape
        op = QConv2d(K=k, C=c, H=h, W=width, R=r, S=s, stride=int(a.strides[0]), pad=tuple(int(v) for v in a.padding),
                     dilation=int(a.dilation[0]), N=n, precision="bf16", float_input=True, groups=int(a.groups))
        packed = relax.const(op.pack_weights(w, self.lanes), "uint16")
        self.report.bf16.append(name)
        return self.builder_.call_te(op.compute, call.args[0], packed, primfunc_name_hint="bf16_conv2d")

    def _matmul(self, call):
        """x[..., K] @ W[K, N], W a constant (a Gemm's transposed weights are folded into one), as QMatmul over
        x's leading dimensions folded into rows."""
        from ..operators import QMatmul

        shape, w = static_shape(call.args[0]), constant_value(self, call.args[1])
        name = "matmul " + " x ".join(str(list(static_shape(a) or ())) for a in call.args)
        if w is None and (product := product_of_activations(self, call, self.lanes, "bf16")) is not None:
            self.report.bf16.append(name)  # attention's Q K^T and P V (padded_products.py)
            return product
        why = ""
        if w is None or w.dtype != np.float32 or w.ndim != 2:
            why = "its weights are not a 2-d fp32 constant"
        elif shape is None:
            why = "its input's shape is not static"
        if why:
            self.report.kept_fp32.append((name, why))
            return call
        k, n = w.shape
        rows = int(np.prod(shape[:-1]))
        op = QMatmul(M=rows, N=n, K=k, precision="bf16", float_input=True)
        out = folded_task(self.builder_, op.compute, call.args[0], shape,
                          relax.const(op.pack_weights(w, self.lanes), "uint16"), "bf16_matmul")
        self.report.bf16.append(name)
        return out


def bf16_products(mod, lanes: int, report: Bf16Report):
    """The module doc's rewrite of `mod` (constants folded first, so that a weight's permutes and padding are one
    constant); `report` receives which layers became bf16 and why the others did not."""
    return mutate_functions(relax.transform.FoldConstant()(mod), lambda m: _Bf16Products(lanes, report, m))
