"""The candidate microkernels of an ISA, bounded by its register file (paper section 4.1).

The paper's AVX-512 bounds (32 registers) are 14 <= out <= 28 accumulators and out + weights <= 36;
here they are derived from the register count R: out in [7R/16, 7R/8], out + weights <= 9R/8, so AVX2
(16 registers) gets [7, 14] and footprint 18. Unrolling r and s (3x3) is kept for small-C layers.
A (k-unroll x h-unroll) slice with small kernels too is added for the heat map (paper Fig. 6).
"""
from __future__ import annotations

from ..cpu import ISA
from .spec import Microkernel


def bounds(isa: ISA) -> dict:
    r = isa.vector_registers
    return {"out_min": -(-7 * r // 16), "out_max": 7 * r // 8, "footprint_max": 9 * r // 8, "k_max": 4}


def conv2d_candidates(isa: ISA, red: int, rs_unrolls=(1, 3), heatmap_k_max: int = 6) -> list:
    b = bounds(isa)
    found = {}

    def add(**f):
        mk = Microkernel.make("conv2d", isa.name, isa.lanes, red, **f)
        found.setdefault(mk.name, mk)

    for rs in rs_unrolls:
        for uk in range(1, b["k_max"] + 1):
            for uh in range(1, b["out_max"] + 1):
                for uw in range(1, b["out_max"] + 1):
                    out = uh * uw * uk
                    if b["out_min"] <= out <= b["out_max"] and out + rs * rs * uk <= b["footprint_max"]:
                        add(h=uh, w=uw, k=uk, r=rs, s=rs)
    for uk in range(1, heatmap_k_max + 1):  # the Fig. 6 slice: w = c = r = s = 1
        for uh in range(1, b["out_max"] // uk + 1):
            add(h=uh, k=uk)
    return sorted(found.values(), key=lambda m: m.name)


def matmul_candidates(isa: ISA, red: int, j_max: int = 6) -> list:
    b = bounds(isa)
    return [Microkernel.make("matmul", isa.name, isa.lanes, red, i=ui, j=uj)
            for uj in range(1, j_max + 1) for ui in range(1, b["out_max"] // uj + 1)]


def depthwise_candidates(isa: ISA, windows=(1, 3, 5), h_max: int = 2) -> list:
    """Depthwise: the accumulators (w x h x k vectors) and one row of the window's weights (s x k vectors) in
    registers. Each step multiplies input vectors by weight vectors, so no broadcast register and a smaller
    tile than conv2d's already keeps the FMA units busy: from half of conv2d's minimum. Measured on a square
    window (red = s rows of s taps; s = 1 on three rows, the form a scheme with a tile level over s uses)."""
    b = bounds(isa)
    found = []
    for us in windows:
        for uk in range(1, b["k_max"] + 1):
            for uh in range(1, h_max + 1):
                for uw in range(1, b["out_max"] + 1):
                    out = uw * uh * uk
                    if -(-b["out_min"] // 2) <= out <= b["out_max"] and out + us * uk <= b["footprint_max"]:
                        found.append(Microkernel.make("depthwise", isa.name, isa.lanes, max(us, 3), s=us, w=uw,
                                                      h=uh, k=uk))
    return sorted(found, key=lambda m: m.name)


def candidates(op: str, isa: ISA, red: int) -> list:
    if op == "conv2d":
        return conv2d_candidates(isa, red)
    if op == "matmul":
        return matmul_candidates(isa, red)
    if op == "depthwise":
        return depthwise_candidates(isa)
    from ..errors import TTileError

    raise TTileError(f"unknown operator {op!r}; choose conv2d, depthwise or matmul")


def measurement_red(isa: ISA, l1d_bytes: int) -> int:
    """Reduction length for measuring in isolation: the paper uses 512; we take the largest power of two
    <= 512 whose weight slice of a 2-vector kernel fits in half of L1, so timing stays hot-cache."""
    red = 512
    while red > 32 and red * 2 * isa.lanes * 4 > l1d_bytes // 2:
        red //= 2
    return red
