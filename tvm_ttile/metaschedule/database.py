"""MetaSchedule JSON databases: opened with their tvm_ttile intrinsics registered and damaged lines set aside;
the records of one workload, fastest first; the best one as a Schedule; the schemes measured."""
from __future__ import annotations

import functools
import json
import os
import re

import tvm
from tvm.s_tir import meta_schedule as ms

from ..lowering import scheme_of_schedule
from ..tails import register_by_name
from ..workdir import WorkDir, repair_database


def records_of(database, mod, k: int = 10**6) -> list:
    """The `k` fastest tuning records of `mod` in `database` (none when it never saw the workload)."""
    if database is None or not database.has_workload(mod):
        return []
    return list(database.get_top_k(database.commit_workload(mod), k))


def schedule_of(record):
    """A tuning record's trace applied to the workload it was recorded on. A query's module is only structurally
    equal to that workload: its blocks may have other names (TVM names some after Relax variables, which a rewrite
    or another export renames), and a trace finds blocks by name."""
    sch = tvm.s_tir.Schedule(record.workload.mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


_NAME_IN_JSON = re.compile(r'"(ttile_[^"]*)"')


def register_intrinsics_in(work_dir: str) -> list:
    """Register every tvm_ttile intrinsic that the database files in `work_dir` mention."""
    names = set()
    for path in (WorkDir(work_dir).records, WorkDir(work_dir).workloads):
        if os.path.exists(path):
            with open(path) as f:
                names.update(_NAME_IN_JSON.findall(f.read()))
    for name in sorted(names):
        register_by_name(name)
    return sorted(names)


def best_schedule(database, mod):
    """(Schedule, record) of the fastest measured record of `mod` in `database`, or None when it has none."""
    records = records_of(database, mod, 1)
    if not records:
        return None
    return schedule_of(records[0]), records[0]


def record_variants(database, mod) -> list:
    """The memory_bound variant name of each of `mod`'s records in `database`, fastest first (None for a
    record made otherwise, e.g. by MetaSchedule's search)."""
    from ..memory_bound import variant_of

    out = []
    for rec in records_of(database, mod):
        out.append(variant_of(schedule_of(rec).mod["main"]))
    return out


def measured_schemes(database, mod, k: int = 10**6) -> list:
    """The schemes of `mod`'s records in `database`, fastest first (at most k)."""
    return list(measured_scheme_seconds(database, mod, k))


def measured_scheme_seconds(database, mod, k: int = 10**6) -> dict:
    """{scheme text: median measured seconds} of `mod`'s records in `database`, fastest first (at most k)."""
    import statistics

    out = {}
    for rec in records_of(database, mod, k):
        text = scheme_of_schedule(schedule_of(rec))
        if text is not None and text not in out:  # (a record of another tuner of the same workload has no scheme)
            out[text] = statistics.median(float(s) for s in rec.run_secs) if rec.run_secs else None
    return out


def existing_database(path: str):
    """The JSON database in `path` (structural module equality), or None when it holds no record file: the
    overlays a build puts before the tuning records (in-network picks, verified replacements)."""
    if not os.path.isfile(os.path.join(path, WorkDir.RECORDS)):
        return None
    return _json_database(path)


def _replays(workload_line: str, record) -> bool:
    """Whether a record's trace replays on the workload it is filed under (TVM replays every record when it opens
    a database, and one that does not aborts the whole open)."""
    try:
        ms.database.TuningRecord.from_json(record, _workload(workload_line))
        return True
    except Exception:  # noqa: BLE001 (TVM raises several kinds; the record is what is wrong)
        return False


@functools.lru_cache(maxsize=64)
def _workload(line: str):
    return ms.database.Workload.from_json(json.loads(line))


def open_database(work_dir: str):
    """A MetaSchedule JSON database in `work_dir`, with the tvm_ttile intrinsics it uses registered. Damaged lines
    (an interrupted write) and records that do not replay on their workload are set aside with a warning naming
    them, not fatal."""
    os.makedirs(work_dir, exist_ok=True)
    repair_database(work_dir)
    register_intrinsics_in(work_dir)
    return _json_database(work_dir)


def _json_database(path: str):
    """TVM's JSON database in `path`; when TVM cannot open it (it does not say which record), each record is
    replayed on its workload and those that fail are set aside with a warning (repair_database)."""
    try:
        return ms.database.JSONDatabase(work_dir=path, module_equality="structural")
    except Exception:  # noqa: BLE001 (TVM raises several kinds)
        repair_database(path, record_ok=_replays)
        return ms.database.JSONDatabase(work_dir=path, module_equality="structural")
