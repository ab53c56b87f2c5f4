"""The candidate microkernels of an ISA, bounded by its register file (paper section 4.1).

The paper's AVX-512 bounds (32 registers) are 14 <= out <= 28 accumulators and out + weights <= 36;
here they are derived from the register count R: out in [7R/16, 7R/8], out + weights <= 9R/8, so AVX2
(16 registers) gets [7, 14] and footprint 18. Unrolling r and s (3x3) is kept for small-C layers.
A (k-unroll x h-unroll) slice with small kernels too is added for the heat map (paper Fig. 6).
"""
from __future__ import annotations

from ..cpu import ISA
from ..precision import get as get_precision
from .spec import REDUCED_OPS, Microkernel


def bounds(isa: ISA) -> dict:
    r = isa.vector_registers
    return {"out_min": -(-7 * r // 16), "out_max": 7 * r // 8, "footprint_max": 9 * r // 8, "k_max": 4}


BASE_WINDOW_UNROLLS = ((1, 1), (3, 3))  # (r, s) unrolls of the catalog every conv2d layer draws from
MAX_WINDOW_UNROLL = 7  # the longest window row or column a window microkernel unrolls (Inception's 1x7, the stem)


def conv2d_candidates(isa: ISA, red: int, rs_unrolls=BASE_WINDOW_UNROLLS, heatmap_k_max: int = 6,
                      precision: str = "fp32") -> list:
    b = bounds(isa)
    found = {mk.name: mk for mk in _conv2d_unrolled(isa, red, rs_unrolls, precision=precision)}
    for uk in range(1, heatmap_k_max + 1):  # the Fig. 6 slice: w = c = r = s = 1
        for uh in range(1, b["out_max"] // uk + 1):
            mk = Microkernel.make("conv2d", isa.name, isa.lanes, red, precision=precision, h=uh, k=uk)
            found.setdefault(mk.name, mk)
    return sorted(found.values(), key=lambda m: m.name)


def _conv2d_unrolled(isa: ISA, red: int, rs_unrolls, k_sizes=None, precision: str = "fp32") -> list:
    """Every (h, w, k) register tile per (r, s) unroll with its accumulators within [out_min, out_max] and its
    accumulators + one step's weights (r x s x k vectors) within the register footprint; k in `k_sizes` (vectors;
    default 1 to the bounds' k_max)."""
    b = bounds(isa)
    found = {}
    for ur, us in rs_unrolls:
        for uk in k_sizes or range(1, b["k_max"] + 1):
            for uh in range(1, b["out_max"] + 1):
                for uw in range(1, b["out_max"] + 1):
                    out = uh * uw * uk
                    if b["out_min"] <= out <= b["out_max"] and out + ur * us * uk <= b["footprint_max"]:
                        mk = Microkernel.make("conv2d", isa.name, isa.lanes, red, precision=precision, h=uh, w=uw,
                                              k=uk, r=ur, s=us)
                        found.setdefault(mk.name, mk)
    return sorted(found.values(), key=lambda m: m.name)


FEW_CHANNELS = 8  # below this many input channels, only microkernels unrolling the whole window pay (space.py)


def window_unrolls(R: int, S: int, channels: int | None = None) -> tuple:
    """The (r, s) unrolls a conv2d layer with an R x S window needs beyond BASE_WINDOW_UNROLLS: a whole row (1, S)
    and a whole column (R, 1) of its window, for windows the base unrolls do not divide (1x7, 7x1, 1x3, 5x5, the
    7x7 stem). Not the whole window at once: its R x S weight vectors per output vector leave too few registers
    for the accumulators above 3x3. With fewer than FEW_CHANNELS input `channels`, only the whole window: a row or a
    column of the 7x7 stem's per call measured 3-4% slower than 1x1 microkernels under the window's loops
    (benchmarks/results/awkward_xeon/windows_commit_ab.md)."""
    if (R, S) in BASE_WINDOW_UNROLLS or (R % 3 == 0 and S % 3 == 0):
        return ()
    pairs = {(1, S), (R, 1)} - set(BASE_WINDOW_UNROLLS)
    if channels is not None and channels < FEW_CHANNELS:
        pairs &= {(R, S)}
    return tuple(sorted((r, s) for r, s in pairs if max(r, s) <= MAX_WINDOW_UNROLL))


def window_candidates(isa: ISA, red: int, R: int, S: int, channels: int | None = None,
                      precision: str = "fp32") -> list:
    """The microkernels of `window_unrolls(R, S)` within the register model's bounds (conv2d_candidates' rule,
    the weights of one step r x s x k vectors): measured on first use by a layer with that window, so the
    catalog every layer needs stays as quick to build as before."""
    return _conv2d_unrolled(isa, red, window_unrolls(R, S, channels), precision=precision)


def matmul_candidates(isa: ISA, red: int, j_max: int = 6, precision: str = "fp32") -> list:
    b = bounds(isa)
    return [Microkernel.make("matmul", isa.name, isa.lanes, red, precision=precision, i=ui, j=uj)
            for uj in range(1, j_max + 1) for ui in range(1, b["out_max"] // uj + 1)]


DEPTHWISE_WINDOWS = (1, 3, 5)  # taps per step of the depthwise catalog every layer draws from


def depthwise_window_candidates(isa: ISA, S: int) -> list:
    """The depthwise microkernels taking a whole row of S taps per step, for a window width that no base tap count
    but 1 divides (ConvNeXt's 7x7): a scheme's tile of s divides S, so such a layer had only one tap per step, each
    FMA loading its own input vector (61-65% of the peak). Measured on first use by such a layer, as
    window_candidates for conv2d."""
    if S in DEPTHWISE_WINDOWS or S > MAX_WINDOW_UNROLL or any(S % w == 0 for w in DEPTHWISE_WINDOWS if w > 1):
        return []
    return depthwise_candidates(isa, windows=(S,))


def depthwise_candidates(isa: ISA, windows=DEPTHWISE_WINDOWS, h_max: int = 2) -> list:
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


def candidates(op: str, isa: ISA, red: int, precision: str = "fp32") -> list:
    if precision != "fp32":
        if op not in REDUCED_OPS:
            from ..errors import TTileError

            raise TTileError(f"{precision} microkernels exist for {', '.join(REDUCED_OPS)}, not {op}")
        return (conv2d_candidates if op == "conv2d" else matmul_candidates)(isa, red, precision=precision)
    if op == "conv2d":
        return conv2d_candidates(isa, red)
    if op == "matmul":
        return matmul_candidates(isa, red)
    if op == "depthwise":
        return depthwise_candidates(isa)
    from ..errors import TTileError

    raise TTileError(f"unknown operator {op!r}; choose conv2d, depthwise or matmul")


def measurement_red(isa: ISA, l1d_bytes: int, precision: str = "fp32") -> int:
    """Reduction length for measuring in isolation: the paper uses 512; we take the largest power of two
    <= 512 whose weight slice of a 2-vector kernel fits in half of L1, so timing stays hot-cache. A reduced
    precision's step folds `group` elements of one vector's bytes: its reduction is that many times longer, for
    the same steps and the same bytes of weights."""
    red = 512
    while red > 32 and red * 2 * isa.lanes * 4 > l1d_bytes // 2:
        red //= 2
    return red * get_precision(precision).group
