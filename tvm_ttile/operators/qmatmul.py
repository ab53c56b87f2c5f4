"""The matrix product on a dot-product instruction, the weights in its layout: int8, C[M, N] (s32) = A[M, K] (u8)
x W[K, N] (s8) on `vpdpbusd`; bf16, C (fp32) = A (bf16) x W (bf16) on `vdpbf16ps` (bf16 as its bits: bfloat16.py).

The weights are a layer's constants, packed once at build time into `[K'/g, N', g]` (`pack_weights`): K' is K
rounded up to the group g the instruction folds (4, 2), N' is N in whole vectors; the padding is zeros, so it adds
nothing. The activations are padded along K with zeros too (an `A_pad` copy, timed with the function) when K is not
a multiple of g. Integer accumulation is exact: the reference is numpy's int64 product, and a result must equal it;
bf16's is the float64 product of the same bf16 values, approached to fp32 accumulation's tolerance.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import bfloat16
from ..errors import ShapeError, check_positive
from ..precision import get as get_precision
from .base import _Operator, _padded


@dataclasses.dataclass(frozen=True)
class QMatmul(_Operator):
    """C[M, N] = sum_k wide(A[M, K]) x wide(W[K, N]): int8's u8 activations and s8 weights to s32, or bf16's to
    fp32 (`precision`)."""

    M: int
    N: int
    K: int
    name: str = ""
    precision: str = "int8"
    # bf16: the input arrives in fp32 and is rounded to bf16 in the kernel's input copy (a network's activations)
    float_input: bool = False
    # int8: the largest |weight| (64 on a CPU without VNNI, whose instruction sums only those exactly:
    # precision.PairedDotProduct); random weights are drawn within it, and larger ones refused
    weight_limit: int = 128
    # the weights are constants (_prim_func marks them layout-free), given in the instruction's layout
    # (pack_weights) and blocked by lowering at build time (packing.pack_weights)
    prepack = True

    def __post_init__(self):
        check_positive(M=self.M, N=self.N, K=self.K)
        check_grouped(self)
        check_float_input(self)
        check_weight_limit(self)

    @property
    def flops(self) -> int:
        """Operations, a multiply and an add each counting one (as fp32's FLOPs)."""
        return 2 * self.M * self.N * self.K

    @property
    def kind(self):
        """The precision.Precision it computes."""
        return get_precision(self.precision)

    @property
    def group(self) -> int:
        return self.kind.group

    @property
    def output_shape(self) -> tuple:
        return (self.M, self.N)

    def padded_k(self) -> int:
        return -(-self.K // self.group) * self.group

    def operand_shapes(self) -> dict:
        return {"input": (self.M, self.K), "weights": (self.K, self.N), "output": self.output_shape}

    @property
    def operand_bytes(self) -> dict:
        size = np.dtype(self.kind.activation).itemsize
        return {"input": (4 if self.float_input else size) * self.M * self.K, "weights": size * self.K * self.N,
                "output": 4 * self.M * self.N}

    def packed_shape(self, vector_lanes: int | None = None) -> tuple:
        return (self.padded_k() // self.group, _padded(self.N, vector_lanes), self.group)

    def pack_weights(self, w, vector_lanes: int | None = None) -> np.ndarray:
        """W [K, N] (int8: s8; bf16: its bits, or fp32 rounded to them) in the instruction's layout [K'/g, N', g],
        zeros in the padding."""
        return pack_grouped(weights_of(self, w, (self.K, self.N)), self.packed_shape(vector_lanes))

    def constant_weights(self, weights, shape):
        """W [K, N] packed as the function takes it (`shape`: [K'/4, N', 4])."""
        return self.pack_weights(weights, shape[1])

    def te(self, vector_lanes: int | None = None):
        """A [M, K], W packed [K'/g, N', g] -> C [M, N] (C_unpad drops the padded columns)."""
        from tvm import te

        a = te.placeholder((self.M, self.K), input_dtype(self), name="A")
        w = te.placeholder(self.packed_shape(vector_lanes), self.kind.weight, name="W")
        return a, w, self.compute(a, w)

    def compute(self, a, w):
        """The output tensor of `te` from given activation and packed-weight tensors (a Relax rewrite's call_te);
        the weights' vector padding is read from their shape."""
        from tvm import te

        g, p = self.group, self.kind
        kp, np_ = self.padded_k(), int(w.shape[1])
        a_read = a
        read = bfloat16.te_bits if self.float_input else (lambda v: v)
        if kp != self.K or self.float_input:
            a_read = te.compute((self.M, kp), lambda i, kk: te.if_then_else(
                kk < self.K, read(a[i, te.min(kk, self.K - 1)]), te.const(0, p.activation)), name="A_pad")
        k = te.reduce_axis((0, kp), name="k")
        c = te.compute((self.M, np_), lambda i, j: te.sum(
            p.widen(a_read[i, k]) * p.widen(w[k // g, j, k % g]), axis=k), name="matmul")
        if np_ != self.N:
            c = te.compute((self.M, self.N), lambda i, j: c[i, j], name="C_unpad")
        return c

    def random_inputs(self, seed: int = 0):
        """(A, W): int8 uniform over the whole u8 range and the weights' (the extremes included); bf16 normal values
        rounded to bf16; reproducible."""
        return random_operands(self, seed, (self.M, self.K), (self.K, self.N))

    def reference(self, a, w):
        if self.kind.exact:
            return (a.astype(np.int64) @ w.astype(np.int64)).astype(np.int32)
        return (bf16_values(a).astype(np.float64) @ bfloat16.values(w)).astype(np.float32)


def check_grouped(op) -> None:
    """A one-line refusal of a precision with no dot-product instruction (fp32: the plain operator)."""
    if get_precision(op.precision).group == 1:
        raise ShapeError(f"{type(op).__name__} computes a dot-product precision (int8, bf16), not {op.precision!r}; "
                         f"the fp32 operator is {type(op).__name__[1:]}")


def check_float_input(op) -> None:
    if op.float_input and op.kind.exact:
        raise ShapeError(f"an {op.precision} {type(op).__name__} reads its input quantized: no float_input")


def check_weight_limit(op) -> None:
    if not 1 <= op.weight_limit <= 128 or (op.weight_limit != 128 and not op.kind.exact):
        raise ShapeError(f"weight_limit must be in [1, 128] for int8 (128 for {op.precision}), got {op.weight_limit}")


def weight_range(op) -> tuple:
    """The smallest and largest weight `op` takes (int8: +-weight_limit, within s8)."""
    return -op.weight_limit, min(op.weight_limit, 127)


def input_dtype(op) -> str:
    return "float32" if op.float_input else op.kind.activation


def bf16_values(x) -> np.ndarray:
    """The bf16 values a bf16 operator multiplies: of bf16 bits, or of an fp32 input rounded to bf16."""
    return bfloat16.values(bfloat16.bits(x) if x.dtype == np.float32 else x)


def weights_of(op, w, shape) -> np.ndarray:
    """`w` as the stored weights of `op`'s precision (bf16: fp32 rounded to bits, or bits), refused in one line when
    its shape or type is not the operator's."""
    p = op.kind
    if tuple(w.shape) == tuple(shape) and p.weight == "uint16" and w.dtype in (np.float32, np.float64):
        return bfloat16.bits(w)
    if tuple(w.shape) != tuple(shape) or w.dtype != np.dtype(p.weight):
        raise ShapeError(f"{p.name} weights must be {p.weight} {list(shape)}, got {w.dtype} {list(w.shape)}")
    lo, hi = weight_range(op)
    if p.exact and w.size and (int(w.min()) < lo or int(w.max()) > hi):
        raise ShapeError(f"{p.name} weights must be in [{lo}, {hi}] for this operator (weight_limit "
                         f"{op.weight_limit}), got values in [{int(w.min())}, {int(w.max())}]")
    return w


def random_operands(op, seed: int, input_shape, weight_shape):
    rng = np.random.default_rng(seed)
    if op.kind.exact:
        lo, hi = weight_range(op)
        return (rng.integers(0, 256, input_shape, dtype=np.uint8),
                rng.integers(lo, hi + 1, weight_shape, dtype=np.int8))
    x = rng.standard_normal(input_shape).astype(np.float32)
    return (x if op.float_input else bfloat16.bits(x)), bfloat16.bits(rng.standard_normal(weight_shape))


def pack_grouped(w, shape) -> np.ndarray:
    """Weights [..., red, vec] in a dot-product instruction's layout `shape` = [..., red' / g, vec', g]: the g
    consecutive reduction elements of one output column adjacent; zeros in the padding (red' >= red, vec' >= vec),
    so it adds nothing."""
    *lead, kg, n, g = shape
    full = np.zeros((*lead, kg * g, n), w.dtype)
    full[(..., slice(0, w.shape[-2]), slice(0, w.shape[-1]))] = w
    return np.ascontiguousarray(np.swapaxes(full.reshape(*lead, kg, g, n), -1, -2))
