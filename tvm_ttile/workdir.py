"""What a work directory's timings depend on, written beside them, so they are never reused under other
conditions: the target (ISA, mcpu, cores), the thread count, and the measurement settings that change a timing.

    claim(work_dir, work_key(target, threads, settings))   # before reading or adding records

A work dir tuned at 1 thread and asked for 2 threads (or another target) refuses with one line naming both;
a work dir from a tvm_ttile that wrote no key is adopted, with a warning.
"""
from __future__ import annotations

import json
import logging
import os

from .errors import TTileError

KEY_FILE = "tvm_ttile_key.json"
# The settings fields that change what a timing means (not how many candidates are re-timed, or build workers).
TIMING_FIELDS = ("number", "repeat", "min_repeat_ms", "cache_flush")


class WorkDirMismatch(TTileError):
    pass


def work_key(target, threads: int, settings=None) -> dict:
    """The key of timings made for `target` (a tvm.target.Target or dict) with `threads` threads."""
    if not isinstance(target, dict):
        target = {k: (list(v) if type(v).__name__ == "Array" else v) for k, v in dict(target.export()).items()
                  if k in ("kind", "mcpu", "mtriple", "mattr", "num-cores")}
    key = {"target": {k: target[k] for k in sorted(target) if k != "num-cores"}, "threads": int(threads)}
    if settings is not None:
        key["measure"] = {f: getattr(settings, f) for f in TIMING_FIELDS}
    return json.loads(json.dumps(key, default=str))


def describe(key: dict) -> str:
    target = key.get("target", {})
    text = f"threads={key.get('threads')}, target {target.get('mcpu') or target.get('mtriple') or target}"
    if "measure" in key:
        text += ", timing " + ",".join(f"{k}={v}" for k, v in key["measure"].items())
    return text


def claim(work_dir: str, key: dict) -> None:
    """Write `key` into a new work dir; in an existing one, refuse (WorkDirMismatch) when its key differs
    in the target, the thread count or (when both name them) the timing settings."""
    os.makedirs(work_dir, exist_ok=True)
    path = os.path.join(work_dir, KEY_FILE)
    if os.path.exists(path):
        try:
            with open(path) as f:
                held = json.load(f)
        except (OSError, ValueError):
            raise WorkDirMismatch(f"{path} is damaged (not JSON): cannot tell what its timings are for; delete "
                                  "the work dir or pass another --work-dir") from None
        mismatch = [f for f in ("target", "threads", "measure") if f in held and f in key and held[f] != key[f]]
        if mismatch:
            raise WorkDirMismatch(f"work dir {work_dir} holds timings for {describe(held)}; this run asks for "
                                  f"{describe(key)} ({', '.join(mismatch)} differ): its timings cannot be reused, "
                                  "pass another --work-dir")
        return
    if any(name.startswith("database_") for name in os.listdir(work_dir)):
        logging.getLogger(__name__).warning("work dir %s has records but no %s (an older tvm_ttile): taken to be for "
                                            "%s", work_dir, KEY_FILE, describe(key))
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(key, f, indent=1)
    os.replace(tmp, path)
