"""Where measured facts (peak, catalogs) are kept, and the key that says whose they are.

A cache entry is valid for one CPU model + feature set + ISA + TVM version + tvm_ttile version;
anything else gets a different directory, so stale measurements are never reused silently.
"""
import contextlib
import hashlib
import json
import logging
import os
import re
import uuid
from pathlib import Path

from . import __version__


def cache_root() -> Path:
    env = os.environ.get("TVM_TTILE_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tvm_ttile"


def cache_key(cpu_name: str, isa: str, flags, extra: str = "") -> str:
    import tvm

    ident = json.dumps(
        {"cpu": cpu_name, "isa": isa, "flags": sorted(flags), "tvm": tvm.__version__, "tvm_ttile": __version__,
         "extra": extra},
        sort_keys=True,
    )
    digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", cpu_name).strip("-").lower() or "cpu"
    return f"{slug}-{isa}-{digest}"


def read_json(path: Path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(path: Path, obj) -> None:
    """Write atomically so that an interrupted run never leaves a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # A temporary name of this process's own: two processes writing one path must not share it.
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
    os.replace(tmp, path)


@contextlib.contextmanager
def measuring(path: Path, what: str):
    """One process at a time measures what `path` caches (a lock file beside it): a second process waits,
    then reads what the first wrote instead of measuring at the same time (two peaks measured at once on one
    core are each about half the peak, and would be cached for good)."""
    from filelock import FileLock, Timeout

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path) + ".lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logging.getLogger(__name__).warning("another process is measuring %s (%s): waiting for it", what, path)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
