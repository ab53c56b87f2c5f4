"""The offline microkernel catalog (paper section 4.1): measure every candidate in isolation, keep the
ones at or above a fraction of the measured peak, and group them into classes for combination.

Stored as JSON per CPU (see cpu.CPUModel.cache_dir), written after every chunk of measurements so an
interrupted build resumes where it stopped.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from itertools import groupby
from pathlib import Path

from .. import cpu as cpu_mod
from .. import limits
from ..cache import measuring, read_json, write_json
from ..errors import TTileError
from ..phases import phase
from ..precision import get as get_precision, tag_for
from .spec import FAMILIES, Microkernel

DEFAULT_THRESHOLD = 0.80  # the paper keeps microkernels at >= 80% of peak
# Candidates measured within this share of the threshold are measured once more and keep the faster figure: on a
# shared machine noise only slows a kernel down, and one slow moment must not decide which microkernels a CPU keeps
# (fresh catalogs of one machine kept different sets, and seed 0's first tuning run moved from 75% to 90% of peak).
RETIME_BAND = 0.10
COVERAGE_MAX = 256  # sizes checked for two-microkernel coverage


def classes_of(kept: list, vector: bool = False) -> list:
    """Kept microkernels that differ only in their size along one row dimension (h or w; i for matmul), and with
    `vector` along the vector dimension too (k; j for matmul: its sizes in vectors). Only classes with two or more
    sizes are returned: those are what a Lambda can combine."""
    out = []
    if not kept:
        return out
    family = FAMILIES[kept[0].op]
    for dim in family["rows"] + ((family["vector"],) if vector else ()):
        key = lambda mk: tuple((d, f) for d, f in mk.unroll if d != dim)  # noqa: E731
        for fixed, group in groupby(sorted(kept, key=key), key=key):
            members = sorted(group, key=lambda mk: mk.get(dim))
            if len(members) >= 2:
                out.append({"dim": dim, "fixed": dict(fixed), "sizes": [mk.get(dim) for mk in members],
                            "members": [mk.text for mk in members]})
    return out


def decompose(n: int, sizes) -> tuple | None:
    """(a, h1, b, h2) with a*h1 + b*h2 == n from two sizes of a class (a single size when b == 0),
    preferring fewer, larger pieces. None when impossible."""
    best = None
    sizes = sorted(set(sizes), reverse=True)
    for i, h1 in enumerate(sizes):
        for h2 in sizes[i:]:
            for a in range(n // h1, -1, -1):
                rest = n - a * h1
                if rest % h2 == 0 and (a or rest):
                    b = rest // h2
                    cand = (a + b, (a, h1, b, h2) if a else (b, h2, 0, h2))
                    if best is None or cand[0] < best[0]:
                        best = cand
                    break
    return best[1] if best else None


def coverage(classes: list, max_n: int = COVERAGE_MAX) -> dict:
    """Which sizes 1..max_n a single microkernel or a combination of two from one class can cover."""
    covered = {dim: set() for dim in {c["dim"] for c in classes}}
    for c in classes:
        for n in range(1, max_n + 1):
            if n not in covered[c["dim"]] and decompose(n, c["sizes"]):
                covered[c["dim"]].add(n)
    out = {}
    for dim, got in covered.items():
        missing = [n for n in range(1, max_n + 1) if n not in got]
        start = max(missing) + 1 if missing else 1
        out[dim] = {"all_sizes_from": start, "up_to": max_n, "uncovered_at_or_above_8": [n for n in missing if n >= 8]}
    return out


@dataclasses.dataclass
class Catalog:
    op: str
    cpu: dict
    peak_gflops: float
    threshold: float
    red: int
    entries: list  # every measured candidate: text, gflops, percent_of_peak, error
    settings: dict
    seconds: float = 0.0
    complete: bool = True

    @property
    def kept(self) -> list:
        return [Microkernel.parse(e["text"]) for e in self.entries
                if e.get("percent_of_peak") is not None and e["percent_of_peak"] >= 100 * self.threshold]

    def ranked(self) -> list:
        """Every successfully measured microkernel with its GFLOPS, fastest first (the fallback pool)."""
        ok = sorted((e for e in self.entries if e.get("gflops")), key=lambda e: -e["gflops"])
        return [(Microkernel.parse(e["text"]), e["gflops"]) for e in ok]

    @property
    def classes(self) -> list:
        return classes_of(self.kept)

    def only(self, texts: set) -> "Catalog":
        """The same catalog with only the entries of these microkernels."""
        return dataclasses.replace(self, entries=[e for e in self.entries if e["text"] in texts])

    def best(self) -> dict:
        ok = [e for e in self.entries if e.get("gflops")]
        if not ok:
            raise TTileError(f"the {self.op} catalog has no successful measurement")
        return max(ok, key=lambda e: e["gflops"])

    def to_json(self) -> dict:
        kept_texts = {mk.text for mk in self.kept}
        classes = self.classes
        return {
            "op": self.op, "cpu": self.cpu, "peak_gflops": self.peak_gflops, "threshold": self.threshold,
            "reduction_length": self.red, "threads": 1, "settings": self.settings, "seconds": self.seconds,
            "complete": self.complete, "candidates": len(self.entries),
            "kept": [dict(e, unroll=dict(Microkernel.parse(e["text"]).unroll), name=Microkernel.parse(e["text"]).name)
                     for e in sorted(self.entries, key=lambda e: -(e.get("gflops") or 0)) if e["text"] in kept_texts],
            "classes": classes, "coverage": coverage(classes), "entries": self.entries,
        }

    @classmethod
    def from_json(cls, d: dict) -> "Catalog":
        return cls(d["op"], d["cpu"], d["peak_gflops"], d["threshold"], d["reduction_length"], d["entries"],
                   d.get("settings", {}), d.get("seconds", 0.0), d.get("complete", True))


def catalog_path(cpu, op, precision: str = "fp32"):
    kind = "" if precision == "fp32" else f"_{precision}"  # (fp32's files keep their names)
    return cpu.cache_dir / f"catalog_{op}{kind}.json"


def build_catalog(cpu, op: str, threshold: float = DEFAULT_THRESHOLD, rebuild: bool = False, candidates=None,
                  settings=None, path=None, chunk: int = 32, precision: str = "fp32") -> Catalog:
    """Measure (or load) the catalog of `op` for `cpu` at `precision` (its own file, against the peak of that
    precision). `candidates` overrides the family (tests use a few, layers with an unusual window add theirs:
    `catalog_for`). The file keeps every microkernel ever measured for the CPU; the Catalog returned holds only
    the candidates asked for, so what one layer measured never enters another's space."""
    from ..measure import MeasureSettings
    from . import family

    if op not in FAMILIES:
        raise TTileError(f"unknown operator {op!r}; choose one of {sorted(FAMILIES)}")
    if not 0 < threshold <= 1:
        raise TTileError(f"threshold must be in (0, 1], got {threshold}")
    path = Path(path) if path else catalog_path(cpu, op, precision)
    settings = settings or MeasureSettings()
    red = family.measurement_red(cpu.isa, cpu.l1d_bytes, precision)
    cands = candidates if candidates is not None else family.candidates(op, cpu.isa, red, precision)
    tag = tag_for(precision, cpu)  # (int8 on a CPU without VNNI: microkernels of its other instruction)
    cands = [dataclasses.replace(mk, dot=tag) for mk in cands] if tag else cands
    cat = _cached(path, op, cpu, cands, threshold, rebuild, precision)[2]
    if cat is None:
        with measuring(path, f"the {op} microkernel catalog"), phase("catalogs"):  # one process at a time
            cat = _measure(cpu, op, threshold, rebuild, cands, settings, path, chunk, red, precision)
        _report_entries(op, cat.entries, cat.peak_gflops)
    return cat.only({mk.text for mk in cands})


def catalog_for(cpu, problem, threshold: float = DEFAULT_THRESHOLD, settings=None) -> Catalog:
    """The catalog a problem draws from: its operator's, plus for a conv2d window the base unrolls do not divide
    (1x7, 7x1, the 7x7 stem) the microkernels unrolling a row or a column of it, and for a depthwise window as
    wide (7x7) those taking a whole row of it per step, measured on first use."""
    from . import family

    cands = None
    if problem.op == "conv2d":
        size = problem.size
        if family.window_unrolls(size["r"], size["s"], size["c"]):
            red = family.measurement_red(cpu.isa, cpu.l1d_bytes, problem.precision)
            cands = (family.candidates("conv2d", cpu.isa, red, problem.precision)
                     + family.window_candidates(cpu.isa, red, size["r"], size["s"], size["c"], problem.precision))
    elif problem.op == "depthwise" and problem.precision == "fp32":
        extra = family.depthwise_window_candidates(cpu.isa, problem.size["s"])
        if extra:
            red = family.measurement_red(cpu.isa, cpu.l1d_bytes)
            cands = family.candidates("depthwise", cpu.isa, red) + extra
    return build_catalog(cpu, problem.op, threshold, candidates=cands, settings=settings,
                         precision=problem.precision)


def rethreshold(cpu, op, path=None, precision: str = "fp32") -> dict | None:
    """Re-express a cached catalog against the CPU's current (best measured) peak from its stored measurements,
    measuring nothing again; says so in one line when the peak moved, and in another when an entry is above
    limits.ENTRY_CEILING of it. Returns what the file now holds (None when there is no catalog)."""
    path = Path(path) if path else catalog_path(cpu, op, precision)
    old = read_json(path)
    if not old or "entries" not in old:
        return None
    peak = cpu_mod.peak(cpu, precision=precision)["peak_gflops"]
    log = logging.getLogger(__name__)
    if abs(old["peak_gflops"] - peak) > 1e-6 * peak:
        was = len(Catalog.from_json(old).kept)
        cat = Catalog.from_json(old)
        cat.peak_gflops, cat.entries = peak, _against(old["entries"], peak)
        write_json(path, cat.to_json())
        log.warning("the %s catalog is re-thresholded against the %.1f %s %s peak (it was measured against %.1f): "
                    "%d microkernels kept instead of %d, none measured again", op, peak,
                    get_precision(precision).unit, precision, old["peak_gflops"], len(cat.kept), was)
        old = read_json(path)
    _report_entries(op, old["entries"], peak)
    return old


_REPORTED: set = set()


def _report_entries(op: str, entries: list, peak: float) -> None:
    """The one line of limits.entry_problem, once per catalog and peak in a process."""
    problem = limits.entry_problem(f"the {op} catalog", entries, peak)
    if problem and (op, peak) not in _REPORTED:
        _REPORTED.add((op, peak))
        logging.getLogger(__name__).warning("%s", problem)


def _against(entries: list, peak: float) -> list:
    return [dict(e, percent_of_peak=100 * e["gflops"] / peak if e.get("gflops") else None) for e in entries]


def _cached(path, op, cpu, cands, threshold, rebuild, precision: str = "fp32"):
    """(what the cache holds, its entries by text, the complete Catalog or None), against the current peak."""
    old = None if rebuild else rethreshold(cpu, op, path, precision)
    done = {}
    if old and old.get("op") == op and old.get("cpu") == cpu.describe():
        done = {e["text"]: e for e in old["entries"]}
        if old.get("complete") and {mk.text for mk in cands} <= set(done):  # complete: borderline ones timed twice
            cat = Catalog.from_json(old)
            cat.threshold = threshold
            return old, done, cat
    return old, done, None


def _measure(cpu, op, threshold, rebuild, cands, settings, path, chunk, red, precision: str = "fp32") -> Catalog:
    from ..measure import default_builder, default_runner, measure_modules
    from ..progress import Progress
    from . import intrin

    from ..precision import require

    old, done, cat = _cached(path, op, cpu, cands, threshold, rebuild, precision)
    if cat is not None:  # measured by another process while this one waited
        return cat
    peak = cpu_mod.peak(cpu, precision=precision)["peak_gflops"]
    todo = [mk for mk in cands if mk.text not in done]
    started = time.time() - (old or {}).get("seconds", 0.0) if done else time.time()
    target = cpu.target(1, require(precision, cpu).mattr)
    bar = Progress(len(todo), f"{op} microkernels")
    entries = [done[mk.text] for mk in cands if mk.text in done]
    asked = {mk.text for mk in cands}
    others = [e for text, e in done.items() if text not in asked]  # measured for other layers: kept in the file
    measurer = {}

    def timed(part, bar):  # (microkernel, calls repeated in one timed call, measurement) for each of part
        # Repeat the tile so one timed call does ~2 MFLOP: call overhead stays negligible.
        reps = [max(1, math.ceil(2e6 / mk.flops)) for mk in part]
        if not measurer:
            measurer.update(builder=default_builder(settings), runner=default_runner(settings))
        mods = [intrin.tensorized_tile(mk, rep) for mk, rep in zip(part, reps)]
        return zip(part, reps, measure_modules(mods, target, settings, progress=bar, **measurer))

    def save(complete=False):  # after every chunk: an interruption loses no finished measurement
        cat = Catalog(op, cpu.describe(), peak, threshold, red, entries + others, settings.describe(),
                      time.time() - started, complete=complete)
        write_json(path, cat.to_json())
        return cat

    for i in range(0, len(todo), chunk):
        for mk, rep, m in timed(todo[i:i + chunk], bar):
            gflops = mk.flops * rep / m.median / 1e9 if m.median else None
            entries.append({"text": mk.text, "gflops": gflops,
                            "percent_of_peak": 100 * gflops / peak if gflops else None,
                            "seconds_per_call": m.median, "repeats_in_call": rep, "error": m.error,
                            "measurements": [gflops] if gflops else []})
        save()
    bar.close()
    again = [e for e in entries if _borderline(e, threshold)]
    if again:
        bar = Progress(len(again), f"{op} microkernels near the threshold, again")
        by_text = {e["text"]: e for e in again}
        for i in range(0, len(again), chunk):
            for mk, rep, m in timed([Microkernel.parse(e["text"]) for e in again[i:i + chunk]], bar):
                e = by_text[mk.text]
                e["measurements"] = e.get("measurements") or [e["gflops"]]
                if m.median:  # a failed second run leaves the first figure, which stands on its own
                    e["measurements"].append(mk.flops * rep / m.median / 1e9)
                else:
                    e["measurements"].append(None)
                e["gflops"] = max(g for g in e["measurements"] if g)
                e["percent_of_peak"] = 100 * e["gflops"] / peak
            save()
        bar.close()
    return save(complete=True)


def _borderline(entry: dict, threshold: float) -> bool:
    """Measured once, near enough to the threshold that noise could have put it on the wrong side."""
    pct, cut = entry.get("percent_of_peak"), 100 * threshold
    return (pct is not None and abs(pct - cut) <= cut * RETIME_BAND
            and len(entry.get("measurements") or [entry["gflops"]]) < 2)
