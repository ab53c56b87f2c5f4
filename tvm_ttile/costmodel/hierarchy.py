"""Latency and bandwidth of each cache level and of memory, measured once per CPU like the peak (PolyDL's
lat^L and bw^L), with small TVM-built kernels, and cached beside the catalogs.

Per level, a buffer of half its capacity (the L3: half one core's share) is
- chased: a random cyclic permutation of cache lines, each load's address the previous load's value, so the
  loads cannot overlap: nanoseconds per load is the latency (TLB misses included, as a kernel meets them);
- streamed: B = A + 1 over the buffer, repeated while it stays in that level: bytes read + written per second.
"""
from __future__ import annotations

import time

LEVELS = ("L1", "L2", "L3", "mem")
MEMORY_MIB = 256  # far beyond any last-level cache seen here
LINE_BYTES = 64


def level_bytes(cpu) -> dict:
    """The buffer measured at each level: half of its capacity."""
    return {"L1": cpu.l1d_bytes // 2, "L2": cpu.l2_bytes // 2, "L3": cpu.l3_bytes // 2,
            "mem": MEMORY_MIB * 1024 * 1024}


def _chase_primfunc(elements: int, steps: int):
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def chase(P: T.Buffer((elements,), "int32"), O: T.Buffer((1,), "int32")):
        T.func_attr({"tirx.noalias": True})
        with T.sblock("root"):
            at = T.alloc_buffer((1,), "int32", scope="local")
            at[0] = 0
            for _ in range(steps):
                at[0] = P[at[0]]
            O[0] = at[0]
    return chase


def chase_order(elements: int, seed: int = 0):
    """P with P[a] = the next address of a random cycle through every cache line of the buffer."""
    import numpy as np

    per_line = LINE_BYTES // 4
    lines = np.random.default_rng(seed).permutation(elements // per_line)
    P = np.zeros(elements, "int32")
    P[lines * per_line] = np.roll(lines, -1) * per_line
    return P


def measure_level(cpu, nbytes: int, repeat: int = 5) -> dict:
    import numpy as np
    import tvm

    from ..cpu import stream_primfunc, check_runs_here
    from ..timing import evaluator

    check_runs_here(cpu)
    dev = tvm.cpu()
    target = cpu.target(1)
    elements = nbytes // 4
    steps = 200_000
    lib = tvm.compile(tvm.IRModule({"main": _chase_primfunc(elements, steps)}), target=target)
    p = tvm.runtime.tensor(chase_order(elements), dev)
    o = tvm.runtime.tensor(np.zeros(1, "int32"), dev)
    lat = min(evaluator(lib.mod, number=2, repeat=repeat, min_repeat_ms=0)(p, o).results) / steps
    half = elements // 2 - (elements // 2) % cpu.lanes  # two arrays of half the buffer each
    lib = tvm.compile(tvm.IRModule({"main": stream_primfunc(cpu.lanes, half, 1)}), target=target)
    a = tvm.runtime.tensor(np.ones(half, "float32"), dev)
    b = tvm.runtime.tensor(np.zeros(half, "float32"), dev)
    secs = min(evaluator(lib.mod, repeat=repeat, min_repeat_ms=20)(a, b).results)
    return {"bytes": nbytes, "latency_ns": lat * 1e9, "bandwidth_gbs": 2 * 4 * half / secs / 1e9}


def measure_hierarchy(cpu) -> dict:
    levels = {name: measure_level(cpu, n) for name, n in level_bytes(cpu).items()}
    return {"levels": levels, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "cpu": cpu.describe()}


def hierarchy_path(cpu):
    return cpu.cache_dir / "hierarchy.json"


def hierarchy(cpu, rebuild: bool = False) -> dict:
    """The cached measured hierarchy of `cpu` (measured on first use, about 10 s); a damaged file is reported
    and measured again."""
    import logging

    from ..cache import measuring, read_json, write_json

    path = hierarchy_path(cpu)

    def valid(d):
        return isinstance(d, dict) and all(isinstance(d.get("levels", {}).get(n), dict) and
                                           d["levels"][n].get("bandwidth_gbs", 0) > 0 for n in LEVELS)

    cached = None if rebuild else read_json(path)
    if valid(cached):
        return cached
    if cached is not None or (path.exists() and not rebuild):
        logging.getLogger(__name__).warning("%s is damaged: measuring the memory hierarchy again", path)
    with measuring(path, "the memory hierarchy"):
        cached = None if rebuild else read_json(path)
        if valid(cached):
            return cached
        result = measure_hierarchy(cpu)
        write_json(path, result)
    return result
