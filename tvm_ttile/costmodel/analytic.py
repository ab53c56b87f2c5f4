"""What a scheme costs before it is built: PolyDL's working-set cost (its Eq. 1) and a predicted time
(the microkernel's measured rate plus the data the scheme moves between cache levels), and the normalized
statistics a learned ranker reads (`features`).

A CostContext holds the measured facts of one CPU: its peak, the catalog rates of its microkernels, the latency
and bandwidth of each memory level (hierarchy.py), its cache capacities, and the thread count. Plain Python.
"""
from __future__ import annotations

import dataclasses
import math

from ..space import Problem, microkernel_of
from .working_sets import (L1_WAY_BYTES, cache_capacities, l1_pixels_per_set, loop_levels, per_cache, traffic,
                           working_sets)

# What feeds each cache level: data coming into L1 is served at L2's bandwidth, and so on; the accumulators'
# loads and stores ("L0") at L1's.
SERVED_BY = {"L0": "L1", "L1": "L2", "L2": "L3", "L3": "mem"}


@dataclasses.dataclass(frozen=True)
class CostContext:
    peak_gflops: float  # one core's measured peak
    rates: tuple  # ((microkernel scheme text, GFLOPS measured in the catalog), ...)
    levels: tuple  # ((name, latency_ns, bandwidth_gbs), ...) for L1, L2, L3, mem
    capacities: tuple  # ((name, bytes), ...) per core, exclusive: see working_sets.cache_capacities
    threads: int = 1
    vector_registers: int = 32

    @classmethod
    def for_cpu(cls, cpu, op: str, threads: int = 1, catalog=None, hierarchy=None, peak=None) -> "CostContext":
        """The context of `cpu` from its cached measurements (measured now when missing)."""
        from ..cpu import peak as measured_peak
        from ..microkernels.catalog import build_catalog
        from .hierarchy import hierarchy as measured_hierarchy

        catalog = catalog or build_catalog(cpu, op)
        hier = hierarchy or measured_hierarchy(cpu)
        peak = peak or measured_peak(cpu)["peak_gflops"]
        return cls(peak, rates_of(catalog), tuple((n, v["latency_ns"], v["bandwidth_gbs"])
                                                  for n, v in hier["levels"].items()),
                   tuple(cache_capacities(cpu, threads)), threads, cpu.vector_registers)

    def rate(self, mk) -> float:
        """GFLOPS of microkernel `mk` as the catalog measured it (any reduction length); a shape the catalog did
        not measure counts at half the peak."""
        return dict(self.rates).get(mk.scheme, 0.5 * self.peak_gflops)

    def level(self, name: str) -> tuple:
        return next((lat, bw) for n, lat, bw in self.levels if n == name)


def rates_of(catalog) -> tuple:
    """((microkernel scheme text, best GFLOPS the catalog measured for that shape), ...)."""
    from ..microkernels.spec import Microkernel

    best = {}
    for e in catalog.entries:
        if e.get("gflops"):
            key = Microkernel.parse(e["text"]).scheme
            best[key] = max(best.get(key, 0.0), e["gflops"])
    return tuple(sorted(best.items()))


def useful_flops(problem: Problem) -> float:
    """Multiply-adds x 2 of the problem as posed (before any padding of the vector dimension)."""
    n = 2.0 * problem.batch
    for d, v in problem.sizes:
        n *= v
    if problem.vector_pad:
        size = problem.size
        n *= (size[problem.vector] - problem.vector_pad) / size[problem.vector]
    return n


def compute_seconds(problem: Problem, scheme, ctx: CostContext) -> float:
    """The scheme's FMAs at its microkernel's measured rate (a Lambda: each part at its own, by share)."""
    sizes = scheme.padded_sizes(problem.size)
    flops = 2.0 * problem.batch * math.prod(sizes.values())
    lam = scheme.lambda_spec()
    if lam is None:
        return flops / (ctx.rate(microkernel_of(problem, scheme)) * 1e9)
    total = sum(r * a for r, a in lam.parts)
    return sum(flops * r * a / total / (ctx.rate(microkernel_of(problem, scheme, a)) * 1e9) for r, a in lam.parts)


def movement_seconds(problem: Problem, scheme, ctx: CostContext) -> dict:
    """{level: seconds} to bring the scheme's traffic into each level at the bandwidth of the one below it."""
    moved = traffic(problem, scheme, list(ctx.capacities))
    out = {}
    for name, nbytes in moved.items():
        _, bw = ctx.level(SERVED_BY[name])
        if SERVED_BY[name] == "mem" and ctx.threads > 1:
            bw /= ctx.threads  # the cores share memory's bandwidth
        out[name] = nbytes / (bw * 1e9)
    return out


def predicted_seconds(problem: Problem, scheme, ctx: CostContext) -> float:
    """Compute at the microkernel's rate plus data movement; at several threads, what one thread runs: its
    rounds of the parallel level's equal chunks (caches per core already in ctx.capacities)."""
    total = compute_seconds(problem, scheme, ctx) + sum(movement_seconds(problem, scheme, ctx).values())
    if ctx.threads <= 1 or not scheme.parallel_levels:
        return total
    chunks = scheme.parallel_chunks
    return total / chunks * -(-chunks // ctx.threads)


def l1_conflict_slowdown(problem: Problem, scheme, ctx: CostContext) -> float:
    """How much slower a conv2d microkernel runs inside the layer than the catalog timed it (on a compact input)
    when the input pixels one call reads per reduction step crowd L1 sets: max(1, P / (2 W)), P the most pixels
    in one set, W the L1's ways. A 17-row microkernel on a 17x17 layer lost nothing with 15 pixels per 12-way set,
    a quarter with 29 and nearly half with 57; a 2-vector one likewise at 17 and 33
    (benchmarks/results/ranking_xeon/committee8/l1_conflicts_channels.md)."""
    if problem.op != "conv2d":
        return 1.0
    ways = max(ctx.capacities[0][1] // L1_WAY_BYTES, 1)
    return max(1.0, l1_pixels_per_set(problem, microkernel_of(problem, scheme))[1] / (2 * ways))


def polydl_cost(problem: Problem, scheme, ctx: CostContext) -> float:
    """PolyDL's Eq. 1: sum over levels of the working-set bytes that fit there x latency / bandwidth."""
    ws = per_cache(working_sets(problem, scheme), list(ctx.capacities))
    cost = 0.0
    for name, nbytes in ws.items():
        lat, bw = ctx.level(name)
        cost += nbytes * lat / bw
    return cost


FEATURES = ("compute_over_ideal", "move_L0", "move_L1", "move_L2", "move_L3", "predicted_over_ideal",
            "ws_L1", "ws_L2", "ws_L3", "ws_mem", "log_ws_total", "microkernel_rate", "accumulators",
            "log_reuse_steps", "loop_levels", "lambda", "padded_work", "parallel_efficiency", "call_over_L1")


def features(problem: Problem, scheme, ctx: CostContext) -> list:
    """The normalized statistics of one scheme, in FEATURES order: times as ratios to the problem's ideal time
    (its FLOPs at the peak), working sets per level as shares of their sum (PolyDL's normalized statistics),
    the microkernel's measured rate as a share of the peak, and the scheme's structure. Ratios and logs, so that
    a model trained on one CPU's records reads another's."""
    ideal = useful_flops(problem) / (ctx.peak_gflops * 1e9)
    comp = compute_seconds(problem, scheme, ctx)
    move = movement_seconds(problem, scheme, ctx)
    ws = per_cache(working_sets(problem, scheme), list(ctx.capacities))
    ws_total = sum(ws.values()) or 1
    mk = microkernel_of(problem, scheme)
    levels = loop_levels(problem, scheme)
    red_steps = mk.red // (mk.get(mk.family["unrolled_reduction"]) if mk.family["unrolled_reduction"] else 1)
    balance = scheme.parallel_balance(ctx.threads)["efficiency"] if ctx.threads > 1 else 1.0
    sizes = scheme.padded_sizes(problem.size)
    padded = math.prod(sizes.values()) / math.prod(problem.size.values())
    return [
        math.log(comp / ideal),
        *(math.log1p(move[n] / ideal) for n in ("L0", "L1", "L2", "L3")),
        math.log(predicted_seconds(problem, scheme, ctx) / ideal),
        *(ws[n] / ws_total for n in ("L1", "L2", "L3", "mem")),
        math.log1p(ws_total / ctx.capacities[0][1]),
        ctx.rate(mk) / ctx.peak_gflops,
        mk.output_registers / ctx.vector_registers,
        math.log2(max(red_steps, 1)),
        len(levels),
        1.0 if scheme.lambda_spec() is not None else 0.0,
        math.log(padded),
        balance,
        # One microkernel call's operands against L1: the catalog timed each call with its operands in L1, over
        # a short reduction; a call whose weights leave L1 (a whole 3x3 window over hundreds of channels) does not
        # run at that rate.
        math.log(levels[-1].total / ctx.capacities[0][1]),
    ]
