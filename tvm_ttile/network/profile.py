"""Timing a built network: its end-to-end latency, and where an inference spends its time call by call."""
from __future__ import annotations

import statistics
import time

import numpy as np
import tvm

from ..timing import evaluator


def latency(vm, x, repeat: int = 15, min_repeat_ms: int = 200) -> dict:
    """End-to-end latency in ms: median, min, max and interquartile range over `repeat` repeats."""
    f = evaluator(vm, "main", repeat=repeat, min_repeat_ms=min_repeat_ms)
    return spread([1e3 * s for s in f(tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu())).results])


def profile(vm, x, repeat: int = 20) -> dict:
    """Where an inference spends its time: every call the VM makes (compiled functions and VM builtins such as
    allocation), timed inside the running network through the VM's instrument hook, so each function meets its
    inputs and weights as the network leaves them (unlike tuning, which times a task alone, hot). Returns
    {"total_ms": median inference with the hook, "calls": {symbol: {"ms": median per inference, "calls": n}}};
    the hook's own cost (~1 us a call) is in total_ms, not in the calls."""
    x = tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu())
    per_run, current, clock = [], {}, {}

    def instrument(func, symbol, before_run, ret, *args):
        now = time.perf_counter()
        if before_run:
            clock[symbol] = now
        else:
            current[symbol] = current.get(symbol, 0.0) + now - clock.pop(symbol)
            current[symbol + "#calls"] = current.get(symbol + "#calls", 0) + 1
        return 0  # VMInstrumentReturnKind.NO_OP

    vm.set_instrument(tvm.runtime.convert(instrument))
    totals = []
    try:
        for _ in range(repeat + 1):  # the first run warms up (allocations, page faults)
            current.clear()
            start = time.perf_counter()
            vm["main"](x)
            totals.append(time.perf_counter() - start)
            per_run.append(dict(current))
    finally:
        vm.set_instrument(None)
    per_run, totals = per_run[1:], totals[1:]
    symbols = [s for s in per_run[0] if not s.endswith("#calls")]
    calls = {s: {"ms": 1e3 * statistics.median(r.get(s, 0.0) for r in per_run), "calls": per_run[0][s + "#calls"]}
             for s in symbols}
    return {"total_ms": 1e3 * statistics.median(totals), "calls": calls, "repeats": repeat}


def spread(ms_values) -> dict:
    q = statistics.quantiles(ms_values, n=4) if len(ms_values) > 1 else [ms_values[0]] * 3
    return {"median_ms": statistics.median(ms_values), "min_ms": min(ms_values), "max_ms": max(ms_values),
            "iqr_ms": q[2] - q[0], "repeats": len(ms_values)}
