"""(Relax) Attention's matmul, softmax, matmul as one fused task (attention.py): softmax(c Q K^T + mask) V in float32,
with an optional scalar constant c, an optional mask (a constant or an activation, e.g. a padding or causal mask,
broadcast to the scores), K^T written as a permute of K or given as it is.

Only the chain as a whole is replaced: the scores' matmul, the scale, the mask's add, a softmax over the last axis,
the matmul by V, with static shapes, the same leading dimensions on Q, K and V, more keys than one vector and values
of whole vectors (attention.fits). Anything else (a broadcast batch, a few keys) keeps its three tasks
(padded_products.py, softmax.py). The scores and probabilities left without a reader are removed by prepare's
dead-code elimination (were they read elsewhere, they would still be computed there).
"""
from __future__ import annotations

import numpy as np
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
        """(Q, K or K^T, keys transposed, scale, mask or None) of the scores `expr` feeding the softmax, or None."""
        scores, scale, mask = binding_of(self, expr), 1.0, None
        if is_op(scores, "relax.add"):  # the mask on either side of the add
            sides = [binding_of(self, a) for a in scores.args]
            inner = 0 if is_op(sides[0], "relax.matmul") or is_op(sides[0], "relax.multiply") else 1
            scores, mask = sides[inner], scores.args[1 - inner]
        if is_op(scores, "relax.multiply"):
            c = constant_value(self, scores.args[1])
            if c is None or c.size != 1 or not np.isfinite(c).all() or float(c.reshape(())) == 0:
                return None
            scores, scale = binding_of(self, scores.args[0]), float(c.reshape(()))
        if not is_op(scores, "relax.matmul"):
            return None
        q, kt = scores.args
        source = binding_of(self, kt)
        if swaps_last_axes(source):
            return q, source.args[0], False, scale, mask
        return q, kt, True, scale, mask

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
        q, k, keys_transposed, scale, mask = found
        shapes = [static_shape(e) for e in (q, k, v, softmax)]
        if any(s is None or len(s) < 3 for s in shapes) or not _fp32(q, k, v, call, *([mask] if mask else [])):
            return call
        (*lead, m, d), k_shape, (*v_lead, n, dv), scores = shapes
        if int(softmax.attrs.axis) not in (-1, len(scores) - 1) or not fits(n, dv, self.lanes):
            return call
        keys = (*lead, d, n) if keys_transposed else (*lead, n, d)
        if tuple(k_shape) != keys or list(v_lead) != list(lead) or tuple(scores) != (*lead, m, n):
            return call
        mask_shape = None if mask is None else static_shape(mask)
        if mask is not None and (mask_shape is None or len(mask_shape) > len(scores) or any(
                e not in (1, x) for e, x in zip(mask_shape[::-1], scores[::-1]))):
            return call
        args = (q, k, v) if mask is None else (q, k, v, mask)
        return self.builder_.call_te(
            lambda *a: fused_attention(*a, keys_transposed=keys_transposed, scale=scale, lanes=self.lanes),
            *args, primfunc_name_hint="attention")


def fuse_attention(mod, lanes: int):
    """`mod` with every float32 attention the module doc describes as one fused_attention task."""
    return mutate_functions(mod, lambda m: _FusedAttention(lanes, m))
