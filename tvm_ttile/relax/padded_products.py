"""(Relax) Products of two activations whose output columns are not whole vectors - attention's Q K^T at 197, 50
or 77 tokens - as tasks that pad the columns inside the function; and batch matmuls whose batch dimensions
broadcast, written with the broadcast in their indices (TVM's own form of them is not read as a batch matmul).

The right operand is copied with its columns padded to whole vectors (`B_pad`, the last column repeated so no
read leaves the tensor; a transposed operand, K^T written as a permute of K, is read through the same copy), the
product runs on whole vectors, and the task's last stage drops the extra columns (`C_unpad`), so the scale or mask
after it still fuses in. The copy and the extra columns are part of the task's timed cost, as for the operators'
`vector_lanes` padding (operators/matmul.py).

In a bf16 network (`precision` "bf16") every such product of two activations is computed in bf16, as the layers by
constant weights are (bf16.py): the left operand rounded to bf16 in its copy (`A_pad`), the right one rounded and
packed in the instruction's pairs (`B_pack`, [..., K/2, N', 2]) in its copy, both inside the task, fp32 out. A
quantized model's product of two u8 activations (quantized.py) is int8 the same way, the right operand shifted to s8
in its copy ([..., K/4, N', 4]), int32 out.
"""
from __future__ import annotations

import tvm
from tvm import relax, te

from .. import bfloat16
from ..operators.base import _padded
from ..precision import get as get_precision
from .bindings import binding_of, mutate_functions, static_shape

# Padding may add at most this share of the columns (197 -> 208 adds 6%, 10 -> 16 would add 60%).
MAX_PADDING = 0.5


def swaps_last_axes(call) -> bool:
    """Whether `call` is a permute_dims exchanging the last two axes and keeping the others."""
    if not (isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.permute_dims"):
        return False
    axes = [int(a) for a in call.attrs.axes] if call.attrs.axes is not None else None
    rank = len(static_shape(call) or ())
    return axes is not None and rank >= 2 and axes == list(range(rank - 2)) + [rank - 1, rank - 2]


def padded_product(a, b, n: int, padded: int, transposed: bool, precision: str = "fp32"):
    """TE: a[..., M, K] @ B[..., K, N] on broadcast batch dimensions, B = b (or b[..., N, K] transposed), the result
    [..., M, N]. With N padded to `padded` columns, or B transposed, B is first copied in [..., K, padded]; in
    bf16 both operands are copied, rounded, B in pairs (module doc)."""
    a_dims, b_dims = len(a.shape) - 2, len(b.shape) - 2
    rank = max(a_dims, b_dims)
    lead = [[1] * (rank - len(s)) + [int(d) for d in s] for s in (a.shape[:-2], b.shape[:-2])]
    batch = [max(x, y) for x, y in zip(*lead)]
    m, k_len = int(a.shape[-2]), int(a.shape[-1])

    def take(dims, shape, idx):  # a broadcast operand's own batch indices from the output's
        own = idx[rank - dims:]
        return [0 if int(e) == 1 and batch[rank - dims + i] != 1 else v for i, (v, e) in enumerate(zip(own, shape))]

    def b_at(idx, kk, j):
        own = take(b_dims, b.shape[:-2], idx)
        return b[(*own, j, kk)] if transposed else b[(*own, kk, j)]

    if precision != "fp32":
        return _reduced_product(a, b_at, take, batch, a_dims, n, padded, get_precision(precision))
    # a batch matmul's operands hold every batch iterator (recognize.py): a broadcast one is copied whole
    if padded == n and not transposed and lead[1] == batch:
        rhs = lambda idx, kk, j: b_at(idx, kk, j)  # noqa: E731
    else:
        b_pad = te.compute((*batch, k_len, padded), lambda *i: b_at(i[:-2], i[-2], te.min(i[-1], n - 1)), name="B_pad")
        rhs = lambda idx, kk, j: b_pad[(*idx, kk, j)]  # noqa: E731
    if lead[0] == batch:
        lhs = lambda idx, i, kk: a[(*take(a_dims, a.shape[:-2], idx), i, kk)]  # noqa: E731
    else:
        a_full = te.compute((*batch, m, k_len), lambda *i: a[(*take(a_dims, a.shape[:-2], i[:-2]), i[-2], i[-1])],
                            name="A_broadcast")
        lhs = lambda idx, i, kk: a_full[(*idx, i, kk)]  # noqa: E731
    k = te.reduce_axis((0, k_len), name="k")
    c = te.compute((*batch, m, padded), lambda *i: te.sum(lhs(i[:-2], i[-2], k) * rhs(i[:-2], k, i[-1]), axis=k),
                   name="matmul")
    return c if padded == n else te.compute((*batch, m, n), lambda *i: c[i], name="C_unpad")


def _shifted_s8(value):
    """A u8 value as the s8 value 128 below it (exact: [0, 255] -> [-128, 127]); the caller adds 128 x the row sums
    of the other operand back (quantized.py)."""
    return (value.astype("int32") - 128).astype("int8")


# What a reduced-precision product of two activations stores of each operand: bf16 rounds both fp32 operands to
# their bits; int8 multiplies a u8 left operand by a u8 right one shifted to s8 (vpdpbusd is u8 x s8)
OPERAND_VALUES = {"bf16": (bfloat16.te_bits, bfloat16.te_bits), "int8": (lambda v: v, _shifted_s8)}


def _reduced_product(a, b_at, take, batch, a_dims, n, padded, kind):
    """padded_product in `kind` (bf16, int8): A's values (OPERAND_VALUES) in A_pad [..., M, K'], B's packed in
    B_pack [..., K'/g, padded, g] (K' = K rounded up to the instruction's group g, zeros beyond K), the product in
    the accumulator's type."""
    m, k_len, g = int(a.shape[-2]), int(a.shape[-1]), kind.group
    kp = -(-k_len // g) * g
    a_value, b_value = OPERAND_VALUES[kind.name]

    def within(kk, value, dtype):
        return te.if_then_else(kk < k_len, value, te.const(0, dtype))

    a_pad = te.compute((*batch, m, kp), lambda *i: within(i[-1], a_value(a[(*take(a_dims, a.shape[:-2], i[:-2]), i[-2],
                                                                             te.min(i[-1], k_len - 1))]),
                                                          kind.activation), name="A_pad")
    b_pack = te.compute((*batch, kp // g, padded, g), lambda *i: within(
        i[-3] * g + i[-1], b_value(b_at(i[:-3], te.min(i[-3] * g + i[-1], k_len - 1), te.min(i[-2], n - 1))),
        kind.weight), name="B_pack")
    k = te.reduce_axis((0, kp), name="k")
    c = te.compute((*batch, m, padded), lambda *i: te.sum(
        kind.widen(a_pad[(*i[:-1], k)]) * kind.widen(b_pack[(*i[:-2], k // g, i[-1], k % g)]), axis=k), name="matmul")
    return c if padded == n else te.compute((*batch, m, n), lambda *i: c[i], name="C_unpad")


def product_of_activations(mutator, call, lanes: int, precision: str = "fp32"):
    """`call` (a relax.matmul of two fp32 activations of 3+ dimensions, static shapes) as a padded_product task,
    or None: in fp32 only when its N is not whole vectors of `lanes` or its batch dimensions differ (otherwise
    TVM's own batch matmul is read as one), in bf16 always (module doc)."""
    a, b = call.args
    shapes = [static_shape(e) for e in (a, b, call)]
    if any(s is None or len(s) < 3 for s in shapes[:2]) or shapes[2] is None \
            or any(str(e.ty.dtype) != "float32" for e in (a, b, call)) \
            or any(isinstance(binding_of(mutator, e), tvm.ir.expr.Constant) for e in (a, b)):
        return None
    broadcast = list(shapes[0][:-2]) != list(shapes[1][:-2])  # TVM's form of it is not read as a batch matmul
    return activations_task(mutator, a, b, shapes[2][-1], lanes, precision, unless_plain=not broadcast)


def activations_task(mutator, a, b, n: int, lanes: int, precision: str, unless_plain: bool = False):
    """The call_te of padded_product(a, b) in `precision`, b read through its transpose when it is one, N (`n`)
    padded to whole vectors of `lanes` (within MAX_PADDING); with `unless_plain`, None for an fp32 product that
    needs neither padding nor a copy."""
    padded = _padded(n, lanes)
    if padded - n > MAX_PADDING * n:
        padded = n
    if unless_plain and padded == n and precision == "fp32":
        return None
    source = binding_of(mutator, b)
    transposed = swaps_last_axes(source)
    operand = source.args[0] if transposed else b
    return mutator.builder_.call_te(lambda x, y: padded_product(x, y, n, padded, transposed, precision), a, operand,
                                    primfunc_name_hint="matmul" if precision == "fp32" else f"{precision}_matmul")


@relax.expr_functor.mutator
class _PaddedColumns(relax.PyExprMutator):
    """fp32 matmuls of two activations as product_of_activations makes them."""

    def __init__(self, lanes: int, mod=None):
        super().__init__(mod)
        self.lanes = lanes

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.matmul"):
            return call
        product = product_of_activations(self, call, self.lanes)
        return call if product is None else product


def pad_columns(mod, lanes: int):
    """The module doc's rewrite of every such matmul in `mod`."""
    return mutate_functions(mod, lambda m: _PaddedColumns(lanes, m))
