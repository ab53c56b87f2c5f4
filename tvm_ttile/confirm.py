"""Re-time the fastest few records of a workload together before a build uses them.

A tuning run times each candidate at one moment of a shared machine (5 repeats), and MetaSchedule ranks records
by the mean of those: one repeat slowed by a neighbour sends a good candidate down the list. On the Zen 3 the
square-512 candidate with the best median at tuning time (84.7, 89.4, 82.8, 87.1 and 54.7 GFLOPS) ranked 5th
by mean; timed again it was the fastest (91 GFLOPS against 79 for the mean's pick). So after tuning, the `top`
records with the least mean time (MetaSchedule's own order) are built once and timed `rounds` times
round-robin through the same builder and runner, and their run_secs in the database become the fresh timings,
one median per round. MetaSchedule's pick (least mean run_secs: ApplyHistoryBest, compile_relax) is then one
of the confirmed candidates. The replaced timings go to confirmed.jsonl beside the database before its record
file is replaced (atomically). Over 20 tuned matmuls the change averages out near 1.0
(benchmarks/results/confirm_top.md): insurance against a pick spoiled by one timing, not a speed-up.
"""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import time

import tvm
from tvm.s_tir import meta_schedule as ms
from tvm_ffi import structural_equal

from .lowering import scheme_of_schedule
from .measure import MeasureSettings, measure_modules
from .progress import Progress, Silent
from .workdir import WorkDir, append_journal, read_journal

CONFIRM_LOG = WorkDir.CONFIRMED
FAILED = 1e10  # MetaSchedule's run time of a failed candidate


def _mean(secs) -> float:
    return statistics.fmean(float(s) for s in secs) if secs else float("inf")


def record_key(record_json) -> str:
    """A record's identity: its trace (the same schedule tuned twice gives one key)."""
    return hashlib.sha1(json.dumps(record_json[0], sort_keys=True).encode()).hexdigest()[:16]


def confirmed_keys(log_path) -> set:
    """(workload index, record key) of every record confirmed before."""
    return {(entry["workload"], c["key"]) for entry in read_journal(log_path) for c in entry["candidates"]}


def reopen(database):
    """A fresh handle on a JSON database after its files changed underneath it."""
    return ms.database.JSONDatabase(path_workload=database.path_workload,
                                    path_tuning_record=database.path_tuning_record, module_equality="structural")


def confirm_top(database, mod, target, settings: MeasureSettings = MeasureSettings(), builder=None, runner=None,
                progress: bool = True) -> dict | None:
    """Re-time `mod`'s `settings.confirm_top` fastest records in `database` (a JSONDatabase) in
    `settings.confirm_rounds` round-robin rounds and store the fresh timings in place of the tuning ones.
    Returns what changed (None when there is nothing to confirm: fewer than two records, all of the top ones
    confirmed before, or confirmation off). A candidate that fails to build or run now is stored as failed.
    Reopen the database afterwards (reopen): the handle still holds the old timings."""
    if not isinstance(database, ms.database.JSONDatabase):
        return None
    workloads = [ms.database.Workload.from_json(w) for w in read_journal(database.path_workload)]
    index = next((i for i, w in enumerate(workloads) if structural_equal(w.mod, mod)), None)
    return None if index is None else _confirm_passes(database, index, workloads[index], target, settings, builder,
                                                      runner, progress)


def confirm_all(database, target, settings: MeasureSettings = MeasureSettings(), builder=None, runner=None,
                progress: bool = True):
    """confirm_top for every workload in `database` (e.g. after MetaSchedule's tune_relax). Returns the
    database, reopened when anything changed."""
    if not isinstance(database, ms.database.JSONDatabase):
        return database
    changed = [_confirm_passes(database, i, ms.database.Workload.from_json(w), target, settings, builder, runner,
                               progress) for i, w in enumerate(read_journal(database.path_workload))]
    return reopen(database) if any(changed) else database


MAX_PASSES = 3


def _confirm_passes(database, index, workload, target, settings, builder, runner, progress) -> dict | None:
    """Confirm again while an unconfirmed record is the fastest (the confirmed ones re-timed slower than its
    tuning time), at most MAX_PASSES times. Returns the last pass's entry."""
    entry = None
    for _ in range(MAX_PASSES):
        new = _confirm(database, index, workload, target, settings, builder, runner, progress)
        if new is None:
            break
        entry = new
        if entry["best_confirmed"]:
            break
    return entry


def _confirm(database, index, workload, target, settings, builder, runner, progress) -> dict | None:
    top, rounds = settings.confirm_top, settings.confirm_rounds
    if top < 2 or rounds < 1:
        return None
    lines = read_journal(database.path_tuning_record)
    mine = sorted((n for n, (w, rec) in enumerate(lines) if w == index and rec[1]), key=lambda n: _mean(lines[n][1][1]))
    chosen = [n for n in mine if _mean(lines[n][1][1]) < FAILED][:top]
    log_path = os.path.join(os.path.dirname(database.path_tuning_record), CONFIRM_LOG)
    if len(chosen) < 2 or {(index, record_key(lines[n][1])) for n in chosen} <= confirmed_keys(log_path):
        return None
    mods, schemes = [], []
    for n in chosen:
        sch = tvm.s_tir.Schedule(workload.mod)
        ms.database.TuningRecord.from_json(lines[n][1], workload).trace.apply_to_schedule(sch, remove_postproc=False)
        mods.append(sch.mod)
        schemes.append(scheme_of_schedule(sch))
    bar = Progress(len(mods) * rounds, "confirming the fastest") if progress else Silent()
    measured = measure_modules(mods, target, settings, progress=bar, builder=builder, runner=runner, rounds=rounds)
    bar.close()
    candidates = []
    for rank, (n, scheme, m) in enumerate(zip(chosen, schemes, measured)):
        size = len(m.seconds) // rounds
        fresh = [statistics.median(m.seconds[r * size:(r + 1) * size]) for r in range(rounds)] if m.seconds \
            else [FAILED]
        candidates.append({"key": record_key(lines[n][1]), "scheme": scheme, "tuning_rank": rank,
                           "tuning_secs": lines[n][1][1], "round_medians": fresh, "error": m.error})
        lines[n][1][1] = fresh
    entry = {"workload": index, "rounds": rounds, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
             "candidates": candidates,
             "picked_rank": min(range(len(candidates)), key=lambda r: _mean(candidates[r]["round_medians"]))}
    best = min((n for n, (w, rec) in enumerate(lines) if w == index and rec[1]), key=lambda n: _mean(lines[n][1][1]))
    entry["best_confirmed"] = best in chosen
    append_journal(log_path, entry)  # first the record of what is replaced, then the replacement
    tmp = database.path_tuning_record + ".tmp"
    with open(tmp, "w") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    os.replace(tmp, database.path_tuning_record)
    return entry
