"""(Relax) Softmax over rows that are not whole vectors (attention's 197 tokens) as a function whose row passes run
on whole vectors.

TVM's softmax over a row of 197 reduces it element by element: its max and its sum are loop-carried chains that
neither TVM's vectorizer (rfactor wants whole vectors) nor LLVM's (it may not reorder float sums) splits into
lanes, so each element waits for the previous one. Here the row is first copied into whole vectors, the extra
lanes -inf (so they add nothing to the max, and exactly nothing to the sum: they are selected out), and the
memory-bound ROWS schedule (memory_bound.py) then keeps vector partial sums. The division by the sum is one
reciprocal per row and a product per element, as in ONNX Runtime and OpenVINO.
"""
from __future__ import annotations

import tvm
from tvm import relax, te, topi

from ..operators.base import _padded
from .bindings import mutate_functions, static_shape


def padded_softmax(x, lanes: int):
    """TE: softmax of x along its last axis (fast_exp, as FastMathTransform's), the rows padded to whole vectors
    of `lanes` in the function."""
    *rows, n = (int(d) for d in x.shape)
    width = _padded(n, lanes)
    low = tvm.tirx.min_value(x.dtype)
    row_pad = te.compute((*rows, width), lambda *i: te.if_then_else(
        i[-1] < n, x[(*i[:-1], te.min(i[-1], n - 1))], low), name="row_pad")
    k = te.reduce_axis((0, width), name="k")
    row_max = te.compute(rows, lambda *r: te.max(row_pad[(*r, k)], axis=k), name="row_max")
    delta = te.compute((*rows, width), lambda *i: row_pad[i] - row_max[i[:-1]], name="row_delta")
    exp = topi.fast_exp(delta)
    j = te.reduce_axis((0, width), name="j")
    row_sum = te.compute(rows, lambda *r: te.sum(te.if_then_else(j < n, exp[(*r, j)], tvm.tirx.const(0, x.dtype)),
                                                 axis=j), name="row_sum")
    inverse = te.compute(rows, lambda *r: tvm.tirx.const(1, x.dtype) / row_sum[r], name="row_inverse")
    return te.compute((*rows, n), lambda *i: exp[i] * inverse[i[:-1]], name="softmax")


@relax.expr_functor.mutator
class _PaddedSoftmax(relax.PyExprMutator):
    def __init__(self, lanes: int, mod=None):
        super().__init__(mod)
        self.lanes = lanes

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.nn.softmax"):
            return call
        shape = static_shape(call.args[0])
        if (shape is None or str(call.args[0].ty.dtype) != "float32" or int(call.attrs.axis) not in (-1, len(shape) - 1)
                or shape[-1] % self.lanes == 0 or shape[-1] < self.lanes):
            return call
        return self.builder_.call_te(padded_softmax, call.args[0], self.lanes, primfunc_name_hint="softmax_padded")


def pad_softmax_rows(mod, lanes: int):
    """`mod` with each float32 softmax along a last axis that is not whole vectors of `lanes` (and at least one)
    as padded_softmax."""
    return mutate_functions(mod, lambda m: _PaddedSoftmax(lanes, m))
