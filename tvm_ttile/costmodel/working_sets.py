"""Working sets of a scheme and the data it moves between cache levels (PolyDL section 4.1-4.2, on our schemes).

PolyDL finds a loop nest's data reuses from its polyhedral dependences; a scheme states its loops directly, so
here a reuse is read off the tile extents: loop level i (an outer loop of the scheme, above the microkernel)
carries a reuse of tensor t when t's footprint over the whole loop is less than the loop's trips times its
footprint over one iteration (t is not indexed by the loop's dimension, or its windows overlap). As in PolyDL's
Algorithm 1, that reuse has two working sets: everything one iteration touches (WS_min, the next iteration's
reuse) and everything the whole loop touches (WS_max, the last iteration's); a parallel level adds the whole
parallel tile (lines 6-10). The microkernel's own loops reuse registers, not caches, and are left out, as PolyDL
leaves its microkernel a black box.

Plain Python: sizes in bytes of fp32 elements; no TVM here.
"""
from __future__ import annotations

import dataclasses
import functools
import math

from ..scheme import Scheme, U, V, conv2d_footprint, matmul_footprint
from ..space import Problem

BYTES = 4  # fp32


def depthwise_footprint(stride=1, dilation=1):
    """Elements of input, weights and output touched by a depthwise tile with the given extents."""
    def fp(e):
        g = lambda d: e.get(d, 1)  # noqa: E731
        ih = (g("h") - 1) * stride + (g("r") - 1) * dilation + 1
        iw = (g("w") - 1) * stride + (g("s") - 1) * dilation + 1
        return {"input": ih * iw * g("k"), "weights": g("r") * g("s") * g("k"), "output": g("h") * g("w") * g("k")}
    return fp


# Per operator: the footprint function of a problem, and which tensor is written (its traffic counts twice:
# read for accumulation, written back).
FOOTPRINTS = {"conv2d": lambda p: conv2d_footprint(p.stride, p.dilation),
              "matmul": lambda p: matmul_footprint,
              "depthwise": lambda p: depthwise_footprint(p.stride, p.dilation)}
OUTPUT = {"conv2d": "output", "matmul": "C", "depthwise": "output"}


@dataclasses.dataclass(frozen=True)
class Level:
    """One tile of the scheme's loop nest: the specifier whose loop iterates over it, its footprint per tensor
    (bytes) and how many times the whole problem executes it."""

    spec: str
    trips: int  # iterations of this loop (1 for the microkernel's tile)
    executions: float  # times this tile runs in the whole problem (batch included; a Lambda's parts averaged)
    footprint: dict  # tensor -> bytes over the whole tile

    @property
    def total(self) -> int:
        return sum(self.footprint.values())


@dataclasses.dataclass(frozen=True)
class WorkingSet:
    spec: str  # the loop that carries the reuse
    tensor: str  # the reused tensor ("*" for a parallel level's whole tile)
    kind: str  # "min", "max" or "parallel"
    bytes: int


@functools.lru_cache(maxsize=8192)
def loop_levels(problem: Problem, scheme: Scheme) -> tuple:
    """The scheme's tiles from its outermost loop inwards to the microkernel's call (the last one). Footprints
    take the larger part of a Lambda; executions count the sizes the scheme tiles (its Pad applied). Cached:
    a ranked scheme's working sets, traffic and features all start here (five calls per scheme, most of a
    pool's ranking time); the Levels are frozen, read only."""
    fp_fn = FOOTPRINTS[problem.op](problem)
    sizes = scheme.padded_sizes(problem.size)
    specs = scheme.specs
    first_u = len(specs)
    while first_u > 0 and isinstance(specs[first_u - 1], (U, V)):
        first_u -= 1
    lam = scheme.lambda_spec()
    unroll = max(a for _, a in lam.parts) if lam else None
    ext = scheme.extents(problem.lanes, unroll)
    lam_at = specs.index(lam) if lam else None
    partial = scheme.partial_dims
    # Tile i is what specifier i iterates over; the last is the reuse loop the microkernel owns (one call).
    # Dimensions the specifiers leave uncovered run in implicit loops above them (as lowering places them):
    # they multiply the executions, not the tiles.
    out = []
    for i in range(first_u):
        e = ext[i]
        executions = float(problem.batch)
        for d, n in sizes.items():
            executions *= n / e.get(d, 1) if d not in partial else math.ceil(n / e.get(d, 1))
        if lam is not None and i > lam_at:  # tiles sized by the larger part: count the parts' calls instead
            executions *= sum(r for r, _ in lam.parts) * unroll / sum(r * a for r, a in lam.parts)
        fps = {t: v * BYTES for t, v in fp_fn(e).items()}
        if lam is not None:  # the footprint of the larger Lambda part (as Scheme.footprints takes it)
            for _, a in lam.parts:
                part = fp_fn(scheme.extents(problem.lanes, a)[i])
                fps = {t: max(v, part[t] * BYTES) for t, v in fps.items()}
        out.append([specs[i].text if i < first_u - 1 else "microkernel", executions, fps])
    if out and out[0][1] > problem.batch:  # the implicit loops: one more tile, the whole problem
        out.insert(0, ["implicit", float(problem.batch), {t: v * BYTES for t, v in fp_fn(sizes).items()}])
    levels = []
    for i, (spec, executions, fps) in enumerate(out):
        trips = round(out[i + 1][1] / executions) if i + 1 < len(out) else 1
        levels.append(Level(spec, max(trips, 1), executions, fps))
    return tuple(levels)


def working_sets(problem: Problem, scheme: Scheme) -> list:
    """PolyDL's Algorithm 1 on a scheme: the working sets of every reuse its outer loops carry."""
    levels = loop_levels(problem, scheme)
    out = []
    for i, lv in enumerate(levels[:-1]):
        inner = levels[i + 1]
        if lv.spec.startswith("Par("):
            out.append(WorkingSet(lv.spec, "*", "parallel", lv.total))
            continue
        if lv.trips <= 1:
            continue
        for t in lv.footprint:
            if lv.footprint[t] < lv.trips * inner.footprint[t]:  # t is reused across this loop's iterations
                out.append(WorkingSet(lv.spec, t, "min", inner.total))
                out.append(WorkingSet(lv.spec, t, "max", lv.total))
    return out


L1_WAY_BYTES = 4096  # what one L1 way spans on the CPUs seen here (48 KiB / 12 ways, 32 KiB / 8 ways)


def l1_pixels_per_set(problem: Problem, mk) -> tuple:
    """(input pixels one conv2d microkernel call reads per reduction step, the most of them in one L1 set). In NHWC
    a pixel is C x 4 bytes and a row (W - 1) x stride + (S - 1) x dilation + 1 pixels; the pixels read at one
    channel offset share a set when their addresses agree modulo one way's span. Other operators: (0, 0)."""
    if problem.op != "conv2d":
        return 0, 0
    size, unroll = problem.size, dict(mk.unroll)
    g = lambda d: unroll.get(d, 1)  # noqa: E731
    rows = (g("h") - 1) * problem.stride + (g("r") - 1) * problem.dilation + 1
    cols = (g("w") - 1) * problem.stride + (g("s") - 1) * problem.dilation + 1
    pixel = size["c"] * BYTES
    row = ((size["w"] - 1) * problem.stride + (size["s"] - 1) * problem.dilation + 1) * pixel
    sets: dict = {}
    for i in range(rows):
        for j in range(cols):
            line = (i * row + j * pixel) % L1_WAY_BYTES // 64
            sets[line] = sets.get(line, 0) + 1
    return rows * cols, max(sets.values())


def cache_capacities(cpu, threads: int = 1) -> list:
    """[(name, bytes)] of the levels a core can keep data in, exclusive caches (PolyDL's assumption): level i
    holds up to the sum of the sizes up to it. A core owns its L1 and L2 and an equal share of the L3."""
    sizes = [("L1", cpu.l1d_bytes), ("L2", cpu.l2_bytes), ("L3", cpu.l3_bytes // max(threads, 1))]
    out, total = [], 0
    for name, b in sizes:
        total += b
        out.append((name, total))
    return out


def per_cache(sets: list, capacities: list) -> dict:
    """PolyDL's Algorithm 2: each working set (smallest first) added to the fastest level it fits in; the ones
    that fit none to memory. {level: bytes} with every level and "mem"."""
    out = {name: 0 for name, _ in capacities}
    out["mem"] = 0
    for ws in sorted(sets, key=lambda w: w.bytes):
        level = next((name for name, cap in capacities if ws.bytes <= cap), "mem")
        out[level] += ws.bytes
    return out


def traffic(problem: Problem, scheme: Scheme, capacities: list) -> dict:
    """Bytes that come into each cache level from the one below it, over the whole problem: {level: bytes}.

    For a cache of capacity C: j is the outermost tile whose whole footprint fits C. Tensor t stays in the cache
    across the loops above j for as long as its footprint there plus one tile j of the other tensors still fits
    (LRU keeps what every iteration touches); from the outermost such tile k_t, t comes in once per execution
    of k_t. The written tensor counts twice (read to accumulate, written back). Into the registers ("L0") come
    the microkernel's operands at every call: what the measured microkernel rate already includes, so only its
    accumulators' loads and stores count there."""
    levels = loop_levels(problem, scheme)
    written = OUTPUT[problem.op]
    out = {}
    mk = levels[-1]
    out["L0"] = 2 * mk.footprint[written] * mk.executions
    for name, cap in capacities:
        j = next((i for i, lv in enumerate(levels) if lv.total <= cap), len(levels) - 1)
        moved = 0
        for t in levels[j].footprint:
            others = levels[j].total - levels[j].footprint[t]
            k = next(i for i in range(j + 1) if levels[i].footprint[t] + others <= cap or i == j)
            moved += levels[k].footprint[t] * levels[k].executions * (2 if t == written else 1)
        out[name] = moved
    return out
