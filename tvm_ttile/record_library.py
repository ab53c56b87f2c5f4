"""The record library: the best records of every task tuned on this CPU, kept beyond one model's work dir, so that
a second model sharing shapes with one tuned before (ResNet-34 after ResNet-18, a fine-tuned copy, another model
with the same layers) takes their records without measuring.

    library = RecordLibrary.of(context)          # this CPU, target, threads, precision and timing settings
    library.lend(task.mod, work_database)        # its records of this function, copied in: how many
    library.keep([task.mod, ...], work_database) # the work dir's best records of these functions, added

A library is a MetaSchedule JSON database in the CPU's cache directory, in a directory named by the digest of
everything its timings depend on (workdir.work_key: target, threads, precision, the timing settings, the CPU),
whose key file it holds, so a record timed under other conditions is never found. Workloads match by structure
(the function's computation and shapes, not its names). Writers take a lock and reopen the files under it, so two
processes tuning at once both land their records; damaged lines are set aside with a warning (open_database).
"""
from __future__ import annotations

import hashlib
import json
import os

from .workdir import claim

# Whether networks read and add to the library unless told (NetworkSearch.library): the tests turn it off, so
# that each tunes what it asserts on.
DEFAULT = os.environ.get("TVM_TTILE_RECORDS", "on")
KEPT_PER_TASK = 5  # the best records of a task that the library keeps (confirm-top re-times at most these)


class RecordLibrary:
    def __init__(self, path: str, key: dict):
        self.path, self.key = path, key
        self._snapshot = None

    @classmethod
    def of(cls, context, root=None) -> "RecordLibrary":
        """The library of `context`'s CPU, target, threads, precision and timing settings (in `root`, by
        default the CPU's cache directory)."""
        key = context.key()
        digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        return cls(os.path.join(os.fspath(root or context.cpu.cache_dir), "records", digest), key)

    def _locked(self):
        from filelock import FileLock

        os.makedirs(self.path, exist_ok=True)
        return FileLock(os.path.join(self.path, "lock"))

    def _open(self):
        from .metaschedule import open_database

        claim(self.path, self.key)  # (a directory whose key differs is refused: a digest collision, or a hand copy)
        return open_database(self.path)

    def lend(self, mod, database) -> int:
        """Copy the library's best records of `mod`'s function into `database` (the work dir's), under the
        workload `database` files them by; returns how many (0: the library has none that replay on it)."""
        from tvm.s_tir import meta_schedule as ms

        from .metaschedule import records_of, schedule_of

        if self._snapshot is None:  # read once per run: what other processes add later is theirs until then
            with self._locked():
                self._snapshot = self._open()
        if not self._snapshot.has_workload(mod):
            return 0
        workload = database.commit_workload(mod)
        lent = 0
        for rec in records_of(self._snapshot, mod, KEPT_PER_TASK):
            copy = ms.database.TuningRecord(rec.trace, workload, rec.run_secs, rec.target, rec.args_info)
            try:
                schedule_of(copy)  # a trace that does not replay on this function's names is not lent
            except Exception:  # noqa: BLE001 - TVM raises several kinds
                continue
            database.commit_tuning_record(copy)
            lent += 1
        return lent

    def keep(self, mods, database) -> int:
        """Add `database`'s best records of each of `mods` that the library does not hold yet; returns how many."""
        from tvm.s_tir import meta_schedule as ms

        from .metaschedule import records_of

        added = 0
        with self._locked():
            library = self._open()  # under the lock: what another process added is seen, indices stay whole
            for mod in mods:
                best = [r for r in records_of(database, mod, KEPT_PER_TASK) if min(float(s) for s in r.run_secs) < 1e9]
                if not best:
                    continue
                held = {str(r.trace) for r in records_of(library, mod)} if library.has_workload(mod) else set()
                todo = [r for r in best if str(r.trace) not in held]
                if not todo:
                    continue
                workload = library.commit_workload(mod)
                for rec in todo:
                    library.commit_tuning_record(ms.database.TuningRecord(rec.trace, workload, rec.run_secs,
                                                                          rec.target, rec.args_info))
                    added += 1
        return added
