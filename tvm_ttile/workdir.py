"""A work directory: every file tvm_ttile keeps in it (WorkDir, the one owner of their names), what its timings
depend on, written beside them so they are never reused under other conditions (the target: ISA, mcpu, cores;
the thread count; the measurement settings that change a timing), and files that survive faults (JSON-lines
journals and the MetaSchedule database read past damaged lines).

    claim(work_dir, work_key(target, threads, settings, cpu))   # before reading or adding records
    WorkDir(work_dir).curve                                # its curve log's path

A work dir tuned at 1 thread and asked for 2 threads (or another target) refuses with one line naming both;
a work dir from a tvm_ttile that wrote no key is adopted, with a warning.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os

from .errors import TTileError


@dataclasses.dataclass(frozen=True)
class WorkDir:
    """A work directory and the path of every file kept in it, by what the file is."""
    path: str

    KEY = "tvm_ttile_key.json"  # what its timings depend on (claim)
    CURVE = "curve.jsonl"  # every measured candidate, in order: tuning seconds so far, GFLOPS
    TRIALS = "ttile_trials.jsonl"  # every drawn scheme: its lowering error or notes
    SECONDS = "ttile_tuning_seconds.json"  # tuning wall time summed over every run
    CONFIRMED = "confirmed.jsonl"  # records re-timed together after tuning, and what they replaced
    ASKED = "asked.json"  # a finished run's budget, so that failed trials are not redone
    AUTOMCL = "automcl.json"  # AutoMCL's result (baselines.AutoMCL)
    REPORT_JSON, REPORT_MD = "report.json", "report.md"  # tune-model's report
    WORKLOADS, RECORDS = "database_workload.json", "database_tuning_record.json"  # MetaSchedule's database
    # A network's work dir: one work dir per task, MetaSchedule's own network, AutoMCL's dense shapes, the
    # Winograd choices, the in-network picks and the log of every candidate timed there.
    TASKS, METASCHEDULE, AUTOMCL_DENSE = "tasks", "metaschedule", "automcl"
    WINOGRAD = "winograd.json"  # {layer: {"m": m or 0, "direct_ms": ..., "winograd_ms": {m: ...}}}
    IN_NETWORK, IN_NETWORK_LOG = "in_network", "in_network.jsonl"
    # Per task whose fastest record failed its check: the fastest verified one, or the function as written
    VERIFIED = "verified"
    AUTOMCL_PARTIAL = "automcl_partial.json"  # per compute: its measured configurations, as each compute finishes
    PHASES = "phases.jsonl"  # per run: its wall time by phase (phases.py)
    RANKED = "ranked"  # a zero-trial network's picks (network.tune.keep_ranked), read after the tuning records

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    key = property(lambda self: self.file(self.KEY))
    curve = property(lambda self: self.file(self.CURVE))
    trials = property(lambda self: self.file(self.TRIALS))
    seconds = property(lambda self: self.file(self.SECONDS))
    confirmed = property(lambda self: self.file(self.CONFIRMED))
    asked = property(lambda self: self.file(self.ASKED))
    automcl = property(lambda self: self.file(self.AUTOMCL))
    report_json = property(lambda self: self.file(self.REPORT_JSON))
    report_md = property(lambda self: self.file(self.REPORT_MD))
    workloads = property(lambda self: self.file(self.WORKLOADS))
    records = property(lambda self: self.file(self.RECORDS))
    metaschedule = property(lambda self: self.file(self.METASCHEDULE))
    winograd = property(lambda self: self.file(self.WINOGRAD))
    in_network = property(lambda self: self.file(self.IN_NETWORK))
    in_network_log = property(lambda self: self.file(self.IN_NETWORK_LOG))
    verified = property(lambda self: self.file(self.VERIFIED))
    automcl_partial = property(lambda self: self.file(self.AUTOMCL_PARTIAL))
    phases = property(lambda self: self.file(self.PHASES))
    ranked = property(lambda self: self.file(self.RANKED))

    def task(self, index: int, name: str) -> str:
        """The work dir of a network's task, by its place and name in the network."""
        return os.path.join(self.path, self.TASKS, f"{index:02d}-{name}")

    def dense(self, M: int, K: int, N: int, suffix: str = "") -> str:
        """AutoMCL's file (suffix ".json") or work dir of a network's dense shape."""
        return os.path.join(self.path, self.AUTOMCL_DENSE, f"{M}x{K}x{N}{suffix}")


# The settings fields that change what a timing means (not how many candidates are re-timed, or build workers).
TIMING_FIELDS = ("number", "repeat", "min_repeat_ms", "cache_flush")


class WorkDirMismatch(TTileError):
    pass


def work_key(target, threads: int, settings=None, cpu=None, precision: str = "fp32") -> dict:
    """The key of timings made for `target` (a tvm.target.Target or dict) with `threads` threads, on `cpu` (a
    cpu.CPUModel: its name says which processor; one target, e.g. x86-64-v4, covers several), at `precision`
    (named only when not fp32, so that work dirs tuned before precisions existed keep their keys)."""
    if not isinstance(target, dict):
        target = {k: (list(v) if type(v).__name__ == "Array" else v) for k, v in dict(target.export()).items()
                  if k in ("kind", "mcpu", "mtriple", "mattr", "num-cores")}
    key = {"target": {k: target[k] for k in sorted(target) if k != "num-cores"}, "threads": int(threads)}
    if settings is not None:
        key["measure"] = {f: getattr(settings, f) for f in TIMING_FIELDS}
        if getattr(settings, "flushes_weights_only", False):  # named only when on: the keys of work dirs timed
            key["measure"]["keep_activations"] = True  # otherwise stay as they were
    if cpu is not None:
        key["cpu"] = cpu.describe()["cpu"]
    if precision != "fp32":
        key["precision"] = precision
    return json.loads(json.dumps(key, default=str))


def describe(key: dict) -> str:
    target = key.get("target", {})
    text = f"threads={key.get('threads')}, target {target.get('mcpu') or target.get('mtriple') or target}"
    if "cpu" in key:
        text += f" on {key['cpu']}"
    if key.get("precision", "fp32") != "fp32":  # (fp32 keys name none)
        text += f", precision {key['precision']}"
    if "measure" in key:
        text += ", timing " + ",".join(f"{k}={v}" for k, v in key["measure"].items())
    return text


def check_dir(work_dir: str) -> str:
    """work_dir, if it is a directory or does not exist yet; else TTileError naming it."""
    if os.path.exists(work_dir) and not os.path.isdir(work_dir):
        raise TTileError(f"work dir {work_dir} is a file, not a directory: pass another --work-dir")
    return work_dir


def claim(work_dir: str, key: dict) -> None:
    """Write `key` into a new work dir; in an existing one, refuse (WorkDirMismatch) when its key differs
    in the target, the thread count or (when both name them) the timing settings or the processor."""
    check_dir(work_dir)
    os.makedirs(work_dir, exist_ok=True)
    path = WorkDir(work_dir).key
    if os.path.exists(path):
        try:
            with open(path) as f:
                held = json.load(f)
        except (OSError, ValueError):
            raise WorkDirMismatch(f"{path} is damaged (not JSON): cannot tell what its timings are for; delete "
                                  "the work dir or pass another --work-dir") from None
        mismatch = [f for f in ("target", "threads", "measure", "cpu") if f in held and f in key and held[f] != key[f]]
        if held.get("precision", "fp32") != key.get("precision", "fp32"):  # (a key without one is fp32's)
            mismatch.append("precision")
        if mismatch:
            raise WorkDirMismatch(f"work dir {work_dir} holds timings for {describe(held)}; this run asks for "
                                  f"{describe(key)} ({', '.join(mismatch)} differ): its timings cannot be reused, "
                                  "pass another --work-dir")
        return
    if any(name.startswith("database_") and os.path.getsize(os.path.join(work_dir, name))
           for name in os.listdir(work_dir)):  # (an empty database is the one this run just opened)
        logging.getLogger(__name__).warning("work dir %s has records but no %s (an older tvm_ttile): taken to be for "
                                            "%s", work_dir, WorkDir.KEY, describe(key))
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(key, f, indent=1)
    os.replace(tmp, path)


# --- files that survive faults: JSON-lines journals and the MetaSchedule database --------------------------

def read_journal(path: str) -> list:
    """The rows of a JSON-lines file, in order. A damaged line (an interrupted write, a hand edit) is skipped
    with a warning naming the file and the line: what it held is measured again, nothing else is lost."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError:
                _warn_damaged(path, number, line)
    return rows


def append_journal(path: str, *rows) -> None:
    """Append rows to a JSON-lines file; a last line left without its newline by an interrupted write is
    ended first, so that no row is glued onto it."""
    with open(path, "a+b") as f:
        f.seek(0, os.SEEK_END)
        if f.tell():
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
        f.write("".join(json.dumps(r) + "\n" for r in rows).encode())


def repair_database(work_dir: str, record_ok=None) -> int:
    """Make a MetaSchedule JSON database in work_dir readable again after a fault: damaged lines of its
    workload and record files are moved to `<file>.damaged` (kept, not lost) with a warning naming file and
    line; records of a damaged workload go with it and the other records' workload indices are renumbered.
    `record_ok(workload line, record)`, when given, also sets aside the records it refuses (a trace that does not
    replay on its workload). Returns the number of lines moved (0: the database was sound; then nothing is
    rewritten)."""
    wl_path, rec_path = WorkDir(work_dir).workloads, WorkDir(work_dir).records
    workloads, damaged = [], {wl_path: [], rec_path: []}
    renumber = {}  # sound workload index -> its index once the damaged ones are gone
    for i, line in enumerate(_lines(wl_path)):
        if isinstance(_pair(line), list):
            renumber[i] = len(workloads)
            workloads.append(line)
        else:
            damaged[wl_path].append((i + 1, line))
    records = []
    for i, line in enumerate(_lines(rec_path)):
        value = _pair(line)
        if (value is not None and isinstance(value[0], int) and value[0] in renumber
                and (record_ok is None or record_ok(workloads[renumber[value[0]]], value[1]))):
            records.append(line if value[0] == renumber[value[0]] else json.dumps([renumber[value[0]], value[1]]))
        else:
            damaged[rec_path].append((i + 1, line))
    if not any(damaged.values()):
        return 0
    for path, lines in damaged.items():
        for number, line in lines:
            _warn_damaged(path, number, line)
        if lines:
            with open(path + ".damaged", "a") as f:
                f.writelines(line.rstrip("\n") + "\n" for _, line in lines)
    for path, lines in ((wl_path, workloads), (rec_path, records)):
        if os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.writelines(line.rstrip("\n") + "\n" for line in lines)
            os.replace(tmp, path)
    return sum(len(v) for v in damaged.values())


def _lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line for line in f if line.strip()]


def _pair(line):
    """The [index or hash, value] pair a database line holds, or None when the line is damaged."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, list) and len(value) == 2 else None


def _warn_damaged(path, number, line):
    text = line.strip()
    logging.getLogger(__name__).warning("%s line %d is damaged (%s): skipped; what it held is measured again",
                                        path, number, text[:60] + ("..." if len(text) > 60 else ""))
