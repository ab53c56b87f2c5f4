"""The fastest one call of an operator can be on this CPU: the larger of its FMAs at the measured peak and its
operands moved once at the bandwidth of the cache level that holds them all (the memory hierarchy measured once
per CPU, hierarchy.py). Thin shapes (GEMV, a few rows) are bound by the second: their % of the FMA peak says
little, their % of this bound says how far from the machine they are.

Measured timings repeat the call on the same operands, so they stay in the smallest level that holds them all
(the L3 is shared, yet at one thread all of it is the core's). Bandwidths are measured at one thread, so the
bound is given at one thread only."""
from __future__ import annotations

from .hierarchy import LEVELS


def capacities(cpu) -> dict:
    return {"L1": cpu.l1d_bytes, "L2": cpu.l2_bytes, "L3": cpu.l3_bytes, "mem": None}


def bound(operator, cpu, peak_gflops: float, hierarchy: dict) -> dict:
    """{"seconds": the bound, "limit": "FMA peak" or "<level> bandwidth", "bytes", "level", "fma_seconds",
    "bandwidth_seconds", "flops"} of one call of `operator` (operators.py) at one thread."""
    nbytes = sum(operator.operand_bytes.values())
    cap = capacities(cpu)
    level = next(name for name in LEVELS if cap[name] is None or nbytes <= cap[name])
    bandwidth = hierarchy["levels"][level]["bandwidth_gbs"] * 1e9
    fma, moved = operator.flops / (peak_gflops * 1e9), nbytes / bandwidth
    return {"seconds": max(fma, moved), "limit": "FMA peak" if fma >= moved else f"{level} bandwidth",
            "bytes": nbytes, "level": level, "fma_seconds": fma, "bandwidth_seconds": moved, "flops": operator.flops}
