"""bfloat16 values as tvm_ttile holds them: their 16 bits in uint16 arrays and tensors (precision.py says why).

`bits` rounds fp32 to the nearest bf16, ties to even, as `vcvtneps2bf16` and PyTorch do; `values` is the exact fp32
of bf16 bits. `te_bits` is `bits` as a TE expression, for conversions fused into a kernel.
"""
from __future__ import annotations

import numpy as np


def bits(x) -> np.ndarray:
    """fp32 (or any float) array -> the bits of its nearest bf16, ties to even; NaNs stay NaNs."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint16(0x7FC0), rounded).astype(np.uint16)


def values(b) -> np.ndarray:
    """bf16 bits (uint16) -> their exact fp32 values."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def te_bits(x):
    """A float32 TE/TIR value -> its bf16 bits (uint16), rounded as `bits` (NaNs not kept: a network's values
    are finite)."""
    from tvm import tirx as tir

    u = tir.reinterpret("uint32", x)
    odd = tir.bitwise_and(tir.shift_right(u, tir.const(16, "uint32")), tir.const(1, "uint32"))
    return tir.shift_right(u + tir.const(0x7FFF, "uint32") + odd, tir.const(16, "uint32")).astype("uint16")
