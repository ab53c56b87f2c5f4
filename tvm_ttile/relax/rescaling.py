"""(Relax) A quantized model's rescaling after each int8 task, in fewer steps.

After an int8 conv2d or matmul the graph goes on in fp32: the task's own rescaling (x s_x s_w[k]), the bias, the
next QuantizeLinear (x 1/s_y, round, + z_y, clamp, as u8) and, where the next layer computes in fp32, that layer's
DequantizeLinear (as fp32, - z_y, x s_y). Fused into the task as its epilogue, each is one vector instruction per
output vector, and for a 1x1 layer of 16 input channels they took twice the time of the products. Here
- products and sums by constants merge: (x c1 + c2) c3 = x (c1 c3) + c2 c3, (x + c1) + c2 = x + (c1 + c2),
  max(x, c0) c3 = max(x c3, c0 c3) for positive c3 (a ReLU before the quantize's scale); + 0 and x 1 go;
- astype(astype(v, u8), f32) is v where v is already an integer in [0, 255] (clamped after a round);
- an fp32 conv2d of (x c) is one of x with its constant weights times c (the dequantize's scale, per tensor).
The merged constants round once where the graph rounded twice, so a result moves by an ulp at most: within the
quantize's step except at exact halves.
"""
from __future__ import annotations

import numpy as np
from tvm import relax

from .bindings import binding_of, constant_value, is_op, mutate_functions, static_shape


def _const_of(mutator, expr):
    """The float32 numpy value of a constant operand, else None."""
    v = constant_value(mutator, expr)
    return v if v is not None and v.dtype == np.float32 else None


def _fits(value, x) -> bool:
    """Whether a merged constant broadcasts to `x`'s shape without growing it."""
    shape = static_shape(x)
    if shape is None or value.ndim > len(shape):
        return False
    try:
        return np.broadcast_shapes(value.shape, shape) == tuple(shape)
    except ValueError:
        return False


def _const(value):
    return relax.const(np.asarray(value, np.float32), "float32")


@relax.expr_functor.mutator
class _MergedRescaling(relax.PyExprMutator):
    def __init__(self, mod=None):
        super().__init__(mod)

    def visit_call_(self, call):
        return self._simplify(super().visit_call_(call))

    def _simplify(self, call):
        if not isinstance(call, relax.Call) or str(getattr(call.ty, "dtype", "")) != "float32":
            return call
        if is_op(call, "relax.nn.conv2d"):
            return self._scaled_weights(call)
        if is_op(call, "relax.astype"):
            return self._widened_integer(call)
        c = _const_of(self, call.args[1]) if len(call.args) == 2 else None
        if c is not None and is_op(call, "relax.subtract"):  # x - c = x + (-c): merges with the adds around it
            return self._simplify(self.builder_.normalize(relax.op.add(call.args[0], _const(-c))))
        if c is not None and _fits(c, call.args[0]) and (
                is_op(call, "relax.add") and not np.any(c) or is_op(call, "relax.multiply") and np.all(c == 1)):
            return call.args[0]  # + 0, x 1 (a zero point of 0, a scale of 1)
        if not (is_op(call, "relax.multiply") or is_op(call, "relax.add")):
            return call
        inner = binding_of(self, call.args[0])
        if c is None or not isinstance(inner, relax.Call) or len(inner.args) != 2:
            return call
        c_in = _const_of(self, inner.args[1])
        x = inner.args[0]
        if c_in is None:
            return call
        if is_op(call, "relax.add") and is_op(inner, "relax.add") and _fits(c_in + c, x):
            return relax.op.add(x, _const(c_in + c))
        if is_op(call, "relax.multiply") and is_op(inner, "relax.multiply") and _fits(c_in * c, x):
            return relax.op.multiply(x, _const(c_in * c))
        if is_op(call, "relax.multiply") and is_op(inner, "relax.add") and _fits(c_in * c, x) and _fits(c, x):
            return relax.op.add(self._simplify(self.builder_.normalize(relax.op.multiply(x, _const(c)))),
                                _const(c_in * c))
        if (is_op(call, "relax.multiply") and is_op(inner, "relax.maximum") and np.all(c > 0) and not _integral(self, x)
                and _fits(c_in * c, x) and _fits(c, x)):  # a ReLU before a scale, not a quantized value's clamp
            return relax.op.maximum(self._simplify(self.builder_.normalize(relax.op.multiply(x, _const(c)))),
                                    _const(c_in * c))
        return call

    def _scaled_weights(self, call):
        """conv2d(x c, W) -> conv2d(x, W c) for a scalar c and constant W: the dequantize's scale on an fp32 conv's
        input (a depthwise one's) leaves the layer before; the zero padding is the same either way."""
        data, w = binding_of(self, call.args[0]), _const_of(self, call.args[1])
        c = _const_of(self, data.args[1]) if is_op(data, "relax.multiply") else None
        if w is None or c is None or c.size != 1:
            return call
        return relax.Call(call.op, [data.args[0], _const(w * c.reshape(()))], call.attrs)

    def _widened_integer(self, call):
        """astype(astype(v, u8), f32) -> v for v = min(max(w, lo), hi), 0 <= lo, hi <= 255, w a rounded value (plus
        an integer): v is such an integer already, so the two casts give it back."""
        narrow = binding_of(self, call.args[0])
        if not (is_op(narrow, "relax.astype") and str(narrow.ty.dtype) == "uint8"):
            return call
        v = binding_of(self, narrow.args[0])
        lower = binding_of(self, v.args[0]) if is_op(v, "relax.minimum") else None
        hi = _const_of(self, v.args[1]) if lower is not None else None
        lo = _const_of(self, lower.args[1]) if is_op(lower, "relax.maximum") else None
        if hi is None or lo is None or hi.size != 1 or lo.size != 1 or not 0 <= lo <= hi <= 255 \
                or not _integral(self, v):
            return call
        return narrow.args[0]


def _integral(mutator, expr) -> bool:
    """Whether `expr` is round(...), or that plus, max or min with integer constants: integer-valued."""
    expr = binding_of(mutator, expr)
    while any(is_op(expr, f"relax.{name}") for name in ("add", "maximum", "minimum")):
        c = _const_of(mutator, expr.args[1])
        if c is None or np.any(c != np.round(c)):
            return False
        expr = binding_of(mutator, expr.args[0])
    return is_op(expr, "relax.round")


def merge_rescaling(mod):
    """The module doc's merges, over every Relax function of `mod` (a quantized model's, after
    quantized.integer_products)."""
    # the bias's dequantize, reshape and permute to channels-last folded into the constant they make
    return mutate_functions(relax.transform.FoldConstant()(mod), _MergedRescaling)
