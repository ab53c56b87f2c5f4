"""(Relax) Matmuls on N-d activations, x[..., M, K] @ W[K, N] by a constant W (a transformer's or ConvNeXt's linear
layers), as 2-d matmuls over x's leading dimensions folded into rows.

TVM computes such a matmul over all of x's dimensions, a block tvm_ttile does not read as a matmul. Here x is
reshaped to [rows, K] before the task (a view, or fused into x's producer) and the task's own last stage gives the
result its shape back (`unfolded`), so the elementwise ops after it (bias, GELU, a layer scale, a residual add)
still fuse into it: a reshape after the task would cut them off. The quantized and bf16 rewrites (quantized.py,
bf16.py) build their matmuls on N-d activations the same way (`folded_task`).
"""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax, te

from .bindings import binding_of, mutate_functions, static_shape
from .padded_products import padded_product


def unfolded(out, lead: tuple):
    """A [rows, N] TE tensor as [*lead, N] (rows = the product of `lead`), a stage of the same function."""
    def at(*idx):
        row = 0
        for i, extent in zip(idx[:-1], lead):
            row = row * extent + i
        return out[row, idx[-1]]

    return te.compute((*lead, int(out.shape[1])), at, name="C_unfold")


def folded_task(builder, compute, x, shape, weights, name: str):
    """`compute(a, w)` (a TE [rows, N] matmul of a [rows, K] and the `weights` expression) on x of `shape` [..., K]:
    a call_te whose result is [..., N], x's rows folded by a reshape before it."""
    if len(shape) == 2:
        return builder.call_te(compute, x, weights, primfunc_name_hint=name)
    rows = int(np.prod(shape[:-1]))
    flat = builder.emit(relax.op.reshape(x, (rows, shape[-1])))
    lead = tuple(shape[:-1])
    return builder.call_te(lambda a, w: unfolded(compute(a, w), lead), flat, weights, primfunc_name_hint=name)


def _fp32_matmul(a, w):
    n = int(w.shape[1])
    return padded_product(a, w, n, n, transposed=False)


@relax.expr_functor.mutator
class _FoldedRows(relax.PyExprMutator):
    """fp32 x[..., K] @ W[K, N] (W a constant, x of 3 dimensions or more) as the 2-d matmul of folded rows."""

    def __init__(self, mod=None):
        super().__init__(mod)

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.matmul"):
            return call
        x, w = call.args
        shape = static_shape(x)
        weights = _constant_matrix(self, w)
        if shape is None or len(shape) < 3 or weights is None or str(x.ty.dtype) != "float32" \
                or str(call.ty.dtype) != "float32":
            return call
        return folded_task(self.builder_, _fp32_matmul, x, shape, relax.const(weights, "float32"), "matmul")


def _constant_matrix(mutator, expr):
    """The fp32 [K, N] numpy value of a constant matrix or of its transpose (a Gemm's or a linear layer's W[N, K]
    permuted), else None."""
    expr = binding_of(mutator, expr)
    transposed = isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and \
        expr.op.name == "relax.permute_dims" and [int(a) for a in expr.attrs.axes] == [1, 0]
    if transposed:
        expr = binding_of(mutator, expr.args[0])
    if not isinstance(expr, tvm.ir.expr.Constant):
        return None
    value = expr.value.numpy()
    if value.ndim != 2 or value.dtype != np.float32:
        return None
    return np.ascontiguousarray(value.T if transposed else value)


def fold_rows(mod):
    """The module doc's rewrite of every fp32 matmul by constant weights on N-d activations."""
    return mutate_functions(mod, _FoldedRows)
