"""(Relax) Attention's matmul, softmax, matmul as one fused task (attention.py): softmax(Q K^T) V, or
softmax(c Q K^T) V with a positive scalar constant c, in float32, K^T written as a permute of K or given as it is.

Only the chain as a whole is replaced: the scores' matmul, an optional scale, a softmax over the last axis, the
matmul by V, with static shapes, the same leading dimensions on all three operands, more keys than one vector and
values of whole vectors (attention.fits). Anything else (a mask added to the scores, a broadcast batch, a few keys)
keeps its three tasks (padded_products.py, softmax.py). The scores and probabilities left without a reader are
removed by prepare's dead-code elimination (were they read elsewhere, they would still be computed there).
"""
from __future__ import annotations

from tvm import relax

from ..attention import fits, fused_attention
from .bindings import binding_of, constant_value, is_op, mutate_functions, static_shape
from .padded_products import swaps_last_axes


def _fp32(*exprs) -> bool:
    return all(str(getattr(e.ty, "dtype", "")) == "float32" for e in exprs)


@relax.expr_functor.mutator
class _FusedAttention(relax.PyExprMutator):
    def __init__(self, lanes: int, mod=None):
        super().__init__(mod)
        self.lanes = lanes

    def _scores(self, expr):
        """(Q, K or K^T, keys transposed, scale) of the scores `expr` feeding the softmax, or None."""
        scores, scale = binding_of(self, expr), 1.0
        if is_op(scores, "relax.multiply"):
            c = constant_value(self, scores.args[1])
            if c is None or c.size != 1 or not float(c.reshape(())) > 0:
                return None
            scores, scale = binding_of(self, scores.args[0]), float(c.reshape(()))
        if not is_op(scores, "relax.matmul"):
            return None
        q, kt = scores.args
        source = binding_of(self, kt)
        if swaps_last_axes(source):
            return q, source.args[0], False, scale
        return q, kt, True, scale

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not is_op(call, "relax.matmul"):
            return call
        p, v = call.args
        softmax = binding_of(self, p)
        if not is_op(softmax, "relax.nn.softmax"):
            return call
        found = self._scores(softmax.args[0])
        if found is None:
            return call
        q, k, keys_transposed, scale = found
        shapes = [static_shape(e) for e in (q, k, v, softmax)]
        if any(s is None or len(s) < 3 for s in shapes) or not _fp32(q, k, v, call):
            return call
        (*lead, m, d), k_shape, (*v_lead, n, dv), scores = shapes
        if int(softmax.attrs.axis) not in (-1, len(scores) - 1) or not fits(n, dv, self.lanes):
            return call
        keys = (*lead, d, n) if keys_transposed else (*lead, n, d)
        if tuple(k_shape) != keys or list(v_lead) != list(lead) or tuple(scores) != (*lead, m, n):
            return call
        return self.builder_.call_te(
            lambda a, b, c: fused_attention(a, b, c, keys_transposed=keys_transposed, scale=scale, lanes=self.lanes),
            q, k, v, primfunc_name_hint="attention")


def fuse_attention(mod, lanes: int):
    """`mod` with every float32 attention the module doc describes as one fused_attention task."""
    return mutate_functions(mod, lambda m: _FusedAttention(lanes, m))
