"""Measured limits (the FMA peak, the memory bandwidth) kept as capacities.

A busy machine only ever slows a measurement down, so the cache keeps the best figure ever measured and any later
measurement that finds more revises it. A nominal rate from the CPU's FMA units, lanes and clock is kept beside the
measured one as a sanity check. Pure functions over the cached records: cpu.py measures, this module decides.
"""
from __future__ import annotations

import time

REVISE_ABOVE = 1.05  # a measurement this much above the cached figure revises it (below: noise)
NOMINAL_FLOOR = 0.75  # a peak under this share of the nominal rate was measured on a busy machine
ENTRY_CEILING = 1.05  # a catalog entry above this share of its peak says the peak reads low
FIRST_BURSTS = 3  # a first measurement: the best of this many bursts...
BURST_GAP_SECONDS = 1.0  # ...this far apart, so that one busy moment does not decide it

# What each limit's figure is and the fields measured with it (replaced together when the figure is revised).
LIMITS = {
    "peak_gflops": ("median_gflops", "gflops_per_repeat", "accumulators", "target", "runtime_threads", "measured_at"),
    "bandwidth_gbs": ("bandwidth_bytes_streamed", "bandwidth_measured_at"),
}
BUSY_FIX = "`tvm-ttile peak --rebuild` on a quiet machine measures it again"

# fp32 flop per cycle per core, by (vendor, cpu family, ISA), with models that differ: a lower bound of what such
# a core does, so that the check never calls a healthy measurement low. Zen 4 runs 512-bit FMAs as two halves.
FLOP_PER_CYCLE = {
    ("AMD", 25, "avx2"): 32, ("AMD", 25, "avx512"): 32,
    ("AMD", 26, "avx2"): 32, ("AMD", 26, "avx512"): 64,
    ("Intel", 6, "avx2"): 32, ("Intel", 6, "avx512"): 32,
}
FLOP_PER_CYCLE_BY_MODEL = {  # server cores with two 512-bit FMA units (Sapphire, Emerald and Granite Rapids)
    ("Intel", 6, 143, "avx512"): 64, ("Intel", 6, 207, "avx512"): 64, ("Intel", 6, 173, "avx512"): 64,
}


def nominal(vendor: str, family: int | None, model: int | None, isa: str, mhz: float | None, threads: int) -> dict:
    """{"nominal_gflops", "nominal_basis"}: flop per cycle x the clock the OS reports x threads, or None where the
    table does not know the core (the check is then skipped, and says so in the basis)."""
    per_cycle = FLOP_PER_CYCLE_BY_MODEL.get((vendor, family, model, isa), FLOP_PER_CYCLE.get((vendor, family, isa)))
    if not per_cycle or not mhz:
        return {"nominal_gflops": None,
                "nominal_basis": f"unknown for {vendor} family {family} model {model} {isa} at {mhz} MHz"}
    return {"nominal_gflops": per_cycle * mhz / 1e3 * threads,
            "nominal_basis": f"{per_cycle} fp32 flop/cycle x {mhz:.0f} MHz x {threads} thread(s)"}


def best_of(bursts: list) -> dict:
    """One record from several measurements of the same limits: each limit's best burst, every repeat kept."""
    out = {}
    for figure, fields in LIMITS.items():
        got = [b for b in bursts if b.get(figure)]
        if got:
            best = max(got, key=lambda b: b[figure])
            out.update({k: best[k] for k in (figure,) + fields if k in best})
    for b in bursts:
        out.update({k: v for k, v in b.items() if k not in out})
    if all("gflops_per_repeat" in b for b in bursts):
        out["gflops_per_repeat"] = sorted((g for b in bursts for g in b["gflops_per_repeat"]), reverse=True)
    out["bursts"] = len(bursts)
    return out


def merge(cached: dict | None, measured: dict) -> tuple:
    """(the record to cache, the revisions made): each limit keeps the best figure ever measured; a measurement
    more than REVISE_ABOVE above it replaces the figure and the fields measured with it."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S")
    if not cached:
        return dict(measured, last_run={**_figures(measured), "at": now}, revisions=[]), []
    out, revised = dict(cached), []
    for figure, fields in LIMITS.items():
        old, new = cached.get(figure), measured.get(figure)
        if new and (not old or new > old * REVISE_ABOVE):
            out.update({k: measured[k] for k in (figure,) + fields if k in measured})
            if old:  # a figure the cache lacked is added, not revised
                revised.append({"limit": figure, "from": old, "to": new, "at": now})
    out["last_run"] = {**_figures(measured), "at": now}
    out["revisions"] = list(cached.get("revisions", [])) + revised
    return out, revised


def _figures(record: dict) -> dict:
    return {k: record[k] for k in LIMITS if k in record}


def problems(record: dict) -> list:
    """One line per limit that reads implausibly low against the nominal rate (empty when none)."""
    peak, nom = record.get("peak_gflops"), record.get("nominal_gflops")
    if peak and nom and peak < NOMINAL_FLOOR * nom:
        return [f"the measured peak {peak:.1f} GFLOPS is {100 * peak / nom:.0f}% of the nominal {nom:.1f} "
                f"({record.get('nominal_basis')}): the machine was busy while the peak was measured; {BUSY_FIX}"]
    return []


def entry_problem(what: str, entries: list, peak: float) -> str | None:
    """The one line for a catalog whose fastest entry is above ENTRY_CEILING of its peak, or None."""
    top = max((e for e in entries if e.get("gflops")), key=lambda e: e["gflops"], default=None)
    if top is None or top["gflops"] <= ENTRY_CEILING * peak:
        return None
    return (f"{what}: {top['text']} runs at {100 * top['gflops'] / peak:.0f}% of the {peak:.1f} GFLOPS peak: the "
            f"machine was busy while the peak was measured; {BUSY_FIX}")


def status(record: dict, run: dict | None = None) -> str:
    """One line: the peak in use, when it was measured, and what the last run (or this one) measured."""
    n = record.get("threads", 1)
    from .precision import get as get_precision

    precision = record.get("precision", "fp32")
    unit = get_precision(precision).unit
    text = (f"{record['peak_gflops']:.1f} {unit} {precision} at {n} thread{'s' if n > 1 else ''}, the best measured "
            f"({record.get('measured_at', 'unknown date')}")
    last = (run or {}).get("peak_gflops") or record.get("last_run", {}).get("peak_gflops")
    if last:
        text += f"; {'this' if run else 'the last'} run measured {last:.1f}"
        revs = [r for r in record.get("revisions", []) if r["limit"] == "peak_gflops"]
        if revs and run and abs(revs[-1]["to"] - last) < 1e-9 and revs[-1]["from"]:
            text += f" and revised it from {revs[-1]['from']:.1f}"
    return text + ")"
