"""(TVM) Permutes moved below the elementwise ops they feed, until they meet their inverse and both go.

A model exported channels-first that computes each block channels-last (ConvNeXt: permute to NHWC, LayerNorm and
the MLP, permute back, then the layer scale and the residual add in NCHW) keeps, after ConvertLayout, a transpose
out of every block and one into the next: two passes over the activations per block, each an untuned task. An
elementwise op whose tensor operands are all the same permute P of other tensors (or constants) is P of the op on
those tensors, the constants permuted back once at build time. Moved below the op, P meets the next block's
inverse permute and both vanish; the layer scale and the residual add then fuse into the matmul before them.
"""
from __future__ import annotations

import numpy as np
import tvm
from tvm import relax

from .bindings import binding_of, mutate_functions, static_shape

# Ops that apply lane by lane (binary ones broadcasting), so that they commute with any permute of all their
# tensor operands
ELEMENTWISE = frozenset({
    "relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.maximum", "relax.minimum",
    "relax.power", "relax.negative", "relax.sqrt", "relax.exp", "relax.erf", "relax.tanh", "relax.sigmoid",
    "relax.clip", "relax.nn.relu", "relax.nn.gelu", "relax.nn.gelu_tanh", "relax.nn.silu"})


def _axes(call) -> list | None:
    """The axes of a permute_dims call (its reverse when they are left out), None for any other expression."""
    if not (isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.permute_dims"):
        return None
    shape = static_shape(call)
    if shape is None:
        return None
    axes = call.attrs.axes
    return list(reversed(range(len(shape)))) if axes is None else [int(a) for a in axes]


def _permuted_back(constant: tvm.ir.expr.Constant, axes: list) -> tvm.ir.expr.Constant:
    """The constant c' with permute_dims(c', axes) == c, broadcast as c was against an operand of len(axes)
    dimensions (c's missing leading dimensions become ones)."""
    data = constant.value.numpy()
    data = data.reshape((1,) * (len(axes) - data.ndim) + data.shape)
    return relax.const(np.ascontiguousarray(np.transpose(data, np.argsort(axes))), str(data.dtype))


@relax.expr_functor.mutator
class _SinkPermutes(relax.PyExprMutator):
    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not isinstance(call.op, tvm.ir.Op):
            return call
        axes = _axes(call)
        if axes is not None:
            return self._composed(call, axes)
        if call.op.name in ELEMENTWISE:
            return self._sunk(call)
        return call

    def _composed(self, call, axes):
        """permute(permute(x, P), Q) as permute(x, P[Q]); an identity permute as its operand."""
        source = call.args[0]
        inner = binding_of(self, source)
        inner_axes = _axes(inner)
        if inner_axes is not None:
            source, axes = inner.args[0], [inner_axes[a] for a in axes]
        if axes == list(range(len(axes))):
            return source
        return relax.op.permute_dims(source, axes) if source is not call.args[0] else call

    def _sunk(self, call):
        """`call` as permute(call on the unpermuted operands, P) when every tensor operand is permute(_, P) or a
        constant (at least one a permute); else unchanged."""
        axes, args = None, []
        for arg in call.args:
            if not isinstance(getattr(arg, "ty", None), relax.TensorType) or isinstance(arg, tvm.ir.expr.Constant):
                args.append(arg)
                continue
            bound = binding_of(self, arg)
            arg_axes = _axes(bound)
            if arg_axes is None or (axes is not None and arg_axes != axes):
                return call
            axes = arg_axes
            args.append(bound.args[0])
        if axes is None:
            return call
        for i, arg in enumerate(args):
            if isinstance(arg, tvm.ir.expr.Constant):
                if arg.value.numpy().ndim > len(axes):
                    return call
                if arg.value.numpy().ndim:
                    args[i] = _permuted_back(arg, axes)
        inner = self.builder_.emit(relax.Call(call.op, args, call.attrs, call.ty_args))
        return relax.op.permute_dims(inner, axes)


def sink_permutes(mod):
    """`mod` with permutes moved below the elementwise ops they feed and cancelled against their inverses (module
    docstring); dead permutes are left for DeadCodeElimination."""
    return mutate_functions(mod, _SinkPermutes)
