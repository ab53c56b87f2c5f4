"""Matrix products: matmul / dense and batch matmul (nn, nt and tn layouts)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ShapeError, check_dtype, check_positive
from .base import _Operator, _pad_at_end, _padded


@dataclasses.dataclass(frozen=True)
class Matmul(_Operator):
    """C[M,N] = A[M,K] x B[K,N]; with dense=True the weights are stored W[N,K] (TVM's dense layout)."""

    M: int
    N: int
    K: int
    dense: bool = False
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False  # weights are a layer's constants (_prim_func)

    def __post_init__(self):
        check_positive(M=self.M, N=self.N, K=self.K)
        check_dtype(self.dtype)
        if not isinstance(self.dense, bool):
            raise ShapeError(f"dense must be true or false, got {self.dense!r}")

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def output_shape(self) -> tuple:
        return (self.M, self.N)

    def te(self, vector_lanes: int | None = None):
        """With `vector_lanes`, N is padded to whole vectors (B_pad, C_unpad; as for conv2d's K, the last column
        repeated), and the dense form is computed from a [K, N] copy of W (`W_packed`) so that j is contiguous."""
        from tvm import te

        a = te.placeholder((self.M, self.K), self.dtype, name="A")
        k = te.reduce_axis((0, self.K), name="k")
        np_ = _padded(self.N, vector_lanes)
        n = np_ if self.prepack else self.N  # constants come padded with zeros, as a network's build makes them
        if self.dense:
            b_in = te.placeholder((n, self.K), self.dtype, name="W")
            if vector_lanes is None:
                c = te.compute((self.M, self.N), lambda i, j: te.sum(a[i, k] * b_in[j, k], axis=k), name="dense")
                return a, b_in, c
        else:
            b_in = te.placeholder((self.K, n), self.dtype, name="B")
        last = lambda j: j if n == np_ else te.min(j, n - 1)  # noqa: E731  (plain indices: prepacking folds the copy)
        if self.dense:
            b = te.compute((self.K, np_), lambda kk, j: b_in[last(j), kk], name="W_packed")
        elif n != np_:
            b = te.compute((self.K, np_), lambda kk, j: b_in[kk, last(j)], name="B_pad")
        else:
            b = b_in
        c = te.compute((self.M, np_), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="matmul")
        if np_ != self.N:
            c = te.compute((self.M, self.N), lambda i, j: c[i, j], name="C_unpad")
        return a, b_in, c

    def operand_shapes(self) -> dict:
        return {"input": (self.M, self.K), "weights": (self.N, self.K) if self.dense else (self.K, self.N),
                "output": self.output_shape}

    def reference(self, a, b):
        b64 = b.astype(np.float64)
        return (a.astype(np.float64) @ (b64.T if self.dense else b64)).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class BatchMatmul(_Operator):
    """C[b, M, N] = A[b, M, K] x B[b, K, N] for b < B independent instances (a transformer's attention).
    `layout` says how the operands are stored: "nn" as above, "nt" B[b, N, K] (Q x K^T), "tn" A[b, K, M]."""

    B: int
    M: int
    N: int
    K: int
    layout: str = "nn"
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False  # the second operand is a constant (_prim_func); in attention both are activations

    LAYOUTS = ("nn", "nt", "tn")

    def __post_init__(self):
        check_positive(B=self.B, M=self.M, N=self.N, K=self.K)
        check_dtype(self.dtype)
        if self.layout not in self.LAYOUTS:
            raise ShapeError(f"batch matmul layout must be one of {', '.join(self.LAYOUTS)} (nt: the second operand "
                             f"stored [B, N, K]; tn: the first stored [B, K, M]), got {self.layout!r}")

    @property
    def flops(self) -> int:
        return 2 * self.B * self.M * self.N * self.K

    @property
    def output_shape(self) -> tuple:
        return (self.B, self.M, self.N)

    def _shapes(self, n=None):
        n = self.N if n is None else n
        a = (self.B, self.K, self.M) if self.layout == "tn" else (self.B, self.M, self.K)
        b = (self.B, n, self.K) if self.layout == "nt" else (self.B, self.K, n)
        return a, b

    def te(self, vector_lanes: int | None = None):
        """Operands in their stored layouts (recognition finds them; lowering copies a transposed one into
        the microkernels' layout, timed). With `vector_lanes` and N not a multiple of it, N is padded to whole
        vectors: a copy B_pad[b, K, N'] (the last column repeated; constants come padded with zeros instead)
        and C_unpad drops the extra columns, both timed with the function."""
        from tvm import te

        np_ = _padded(self.N, vector_lanes)
        a_shape, b_shape = self._shapes(np_ if self.prepack else self.N)
        a = te.placeholder(a_shape, self.dtype, name="A")
        b_in = te.placeholder(b_shape, self.dtype, name="B")
        k = te.reduce_axis((0, self.K), name="k")
        nt = self.layout == "nt"
        at = (lambda bb, i: a[bb, k, i]) if self.layout == "tn" else (lambda bb, i: a[bb, i, k])  # noqa: E731
        if np_ == self.N or self.prepack:
            bt = (lambda bb, j: b_in[bb, j, k]) if nt else (lambda bb, j: b_in[bb, k, j])  # noqa: E731
        else:
            last = lambda j: te.min(j, self.N - 1)  # noqa: E731
            b_pad = te.compute((self.B, self.K, np_), (lambda bb, kk, j: b_in[bb, last(j), kk]) if nt else
                               (lambda bb, kk, j: b_in[bb, kk, last(j)]), name="B_pad")
            bt = lambda bb, j: b_pad[bb, k, j]  # noqa: E731
        c = te.compute((self.B, self.M, np_), lambda bb, i, j: te.sum(at(bb, i) * bt(bb, j), axis=k),
                       name="batch_matmul")
        if np_ != self.N:
            c = te.compute((self.B, self.M, self.N), lambda bb, i, j: c[bb, i, j], name="C_unpad")
        return a, b_in, c

    def operand_shapes(self) -> dict:
        a_shape, b_shape = self._shapes()
        return {"input": a_shape, "weights": b_shape, "output": self.output_shape}

    def random_inputs(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        a_shape, b_shape = self._shapes()
        return rng.standard_normal(a_shape, dtype=np.float32), rng.standard_normal(b_shape, dtype=np.float32)

    def reference(self, a, b):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        a64 = np.swapaxes(a64, 1, 2) if self.layout == "tn" else a64
        b64 = np.swapaxes(b64, 1, 2) if self.layout == "nt" else b64
        return (a64 @ b64).astype(np.float32)

    def constant_weights(self, weights, shape):
        if self.layout != "nt":
            return _pad_at_end(weights, shape)
        return np.pad(weights, [(0, 0), (0, shape[1] - weights.shape[1]), (0, 0)])  # [B, N, K]: pad N
