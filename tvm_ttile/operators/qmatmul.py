"""The int8 matrix product: C[M, N] (s32) = A[M, K] (u8) x W[K, N] (s8), the weights in `vpdpbusd`'s layout.

The weights are a layer's constants, packed once at build time into `[K'/4, N', 4]` (`pack_weights`): K' is K
rounded up to the group of 4 the instruction folds, N' is N in whole vectors; the padding is zeros, so it adds
nothing. The activations are padded along K with zeros too (an `A_pad` copy, timed with the function) when K is not
a multiple of 4. Integer accumulation is exact: the reference is numpy's int64 product, and a result must equal it.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ShapeError, check_positive
from ..precision import get as get_precision
from .base import _Operator, _padded

INT8 = get_precision("int8")


@dataclasses.dataclass(frozen=True)
class QMatmul(_Operator):
    """C[M, N] = sum_k int32(A[M, K]) x int32(W[K, N]): u8 activations, s8 weights, s32 output."""

    M: int
    N: int
    K: int
    name: str = ""
    precision: str = "int8"
    prepack = False  # the weights arrive packed (pack_weights), in the layout the microkernels read

    def __post_init__(self):
        check_positive(M=self.M, N=self.N, K=self.K)
        if self.precision != "int8":
            raise ShapeError(f"QMatmul computes int8 (u8 x s8 -> s32), not {self.precision!r}")

    @property
    def flops(self) -> int:
        """Operations, a multiply and an add each counting one (as fp32's FLOPs)."""
        return 2 * self.M * self.N * self.K

    @property
    def group(self) -> int:
        return INT8.group

    @property
    def output_shape(self) -> tuple:
        return (self.M, self.N)

    def padded_k(self) -> int:
        return -(-self.K // self.group) * self.group

    def operand_shapes(self) -> dict:
        return {"input": (self.M, self.K), "weights": (self.K, self.N), "output": self.output_shape}

    @property
    def operand_bytes(self) -> dict:
        return {"input": self.M * self.K, "weights": self.K * self.N, "output": 4 * self.M * self.N}

    def packed_shape(self, vector_lanes: int | None = None) -> tuple:
        return (self.padded_k() // self.group, _padded(self.N, vector_lanes), self.group)

    def pack_weights(self, w, vector_lanes: int | None = None) -> np.ndarray:
        """W [K, N] s8 in the instruction's layout [K'/4, N', 4], zeros in the padding."""
        if w.shape != (self.K, self.N) or w.dtype != np.int8:
            raise ShapeError(f"int8 weights must be int8 [{self.K}, {self.N}], got {w.dtype} {list(w.shape)}")
        return pack_grouped(w, self.packed_shape(vector_lanes))

    def constant_weights(self, weights, shape):
        """W [K, N] packed as the function takes it (`shape`: [K'/4, N', 4])."""
        return self.pack_weights(weights, shape[1])

    def te(self, vector_lanes: int | None = None):
        """A [M, K] u8, W packed [K'/4, N', 4] s8 -> C [M, N] s32 (C_unpad drops the padded columns)."""
        from tvm import te

        a = te.placeholder((self.M, self.K), INT8.activation, name="A")
        w = te.placeholder(self.packed_shape(vector_lanes), INT8.weight, name="W")
        return a, w, self.compute(a, w)

    def compute(self, a, w):
        """The output tensor of `te` from given activation and packed-weight tensors (a Relax rewrite's call_te);
        the weights' vector padding is read from their shape."""
        from tvm import te

        g = self.group
        kp, np_ = self.padded_k(), int(w.shape[1])
        a_read = a
        if kp != self.K:
            a_read = te.compute((self.M, kp), lambda i, kk: te.if_then_else(
                kk < self.K, a[i, te.min(kk, self.K - 1)], te.const(0, INT8.activation)), name="A_pad")
        k = te.reduce_axis((0, kp), name="k")
        c = te.compute((self.M, np_), lambda i, j: te.sum(
            a_read[i, k].astype(INT8.accumulator) * w[k // g, j, k % g].astype(INT8.accumulator), axis=k),
            name="matmul")
        if np_ != self.N:
            c = te.compute((self.M, self.N), lambda i, j: c[i, j], name="C_unpad")
        return c

    def random_inputs(self, seed: int = 0):
        """(A, W) uniform over the whole u8 and s8 ranges (the extremes included), reproducible."""
        rng = np.random.default_rng(seed)
        return (rng.integers(0, 256, (self.M, self.K), dtype=np.uint8),
                rng.integers(-128, 128, (self.K, self.N), dtype=np.int8))

    def reference(self, a, w):
        return (a.astype(np.int64) @ w.astype(np.int64)).astype(np.int32)


def pack_grouped(w, shape) -> np.ndarray:
    """Weights [..., red, vec] in a dot-product instruction's layout `shape` = [..., red' / g, vec', g]: the g
    consecutive reduction elements of one output column adjacent; zeros in the padding (red' >= red, vec' >= vec),
    so it adds nothing."""
    *lead, kg, n, g = shape
    full = np.zeros((*lead, kg * g, n), w.dtype)
    full[(..., slice(0, w.shape[-2]), slice(0, w.shape[-1]))] = w
    return np.ascontiguousarray(np.swapaxes(full.reshape(*lead, kg, g, n), -1, -2))
