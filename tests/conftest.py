import dataclasses
import os
import tempfile

import pytest

# Tests never read or write the user's cache: measured peaks and catalogs go to a fresh directory, one per run,
# shared by pytest-xdist's workers (they measure a peak or a catalog one at a time, through the cache's locks).
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
if _RUN:
    os.environ["TVM_TTILE_CACHE"] = os.path.join(tempfile.gettempdir(), f"tvm_ttile_test_cache_{_RUN}")
    os.makedirs(os.environ["TVM_TTILE_CACHE"], exist_ok=True)
else:
    os.environ["TVM_TTILE_CACHE"] = tempfile.mkdtemp(prefix="tvm_ttile_test_cache_")
# Re-timing the fastest candidates after tuning (confirm.py) costs a build and 15 runs per tuning call: off
# unless a test asks for it (MeasureSettings(confirm_top=5), --confirm-top 5).
os.environ["TVM_TTILE_CONFIRM_TOP"] = "0"
# MetaSchedule's evolutionary search (its baseline, the tasks tvm_ttile leaves to it) with a population of 32, not
# 512: the tests check that it runs and what it returns, not how well it searches.
os.environ["TVM_TTILE_EVOLUTIONARY_POPULATION"] = "32"
# Networks are tuned without Winograd forms unless a test asks for them (test_winograd.py does).
os.environ["TVM_TTILE_WINOGRAD"] = "off"
# Whole networks are timed in a fresh process per system and round (isolated.py): one round in tests.
os.environ["TVM_TTILE_LATENCY_ROUNDS"] = "1"
# Networks neither read nor add to the per-CPU record library unless a test asks (test_records.py does): each
# test tunes what it asserts on.
os.environ["TVM_TTILE_RECORDS"] = "off"


@pytest.fixture(scope="session")
def host():
    from tvm_ttile.cpu import detect_host

    return detect_host()


def runnable_isas():
    from tvm_ttile.cpu import _runs_here

    return [i for i in ("avx2", "avx512", "neon") if _runs_here(i)]


@pytest.fixture
def small_catalog(monkeypatch):
    """A few microkernels per operator instead of the measured catalog: network and system tests stay short."""
    from kernels import conv_kept, depthwise_kept, matmul_kept
    from tvm_ttile.microkernels import family

    kept = {"conv2d": conv_kept, "matmul": matmul_kept, "depthwise": lambda isa, lanes, red: depthwise_kept(isa, lanes)}

    def candidates(op, isa, red, precision="fp32"):  # the same tiles at a reduced precision (int8: matmul, conv2d)
        return [dataclasses.replace(mk, precision=precision) for mk in kept[op](isa.name, isa.lanes, red)]

    monkeypatch.setattr(family, "candidates", candidates)
    real_window = family.window_candidates
    monkeypatch.setattr(family, "window_candidates",
                        lambda isa, red, R, S, channels=None, precision="fp32":
                        real_window(isa, red, R, S, channels, precision)[:4])
    real_depthwise_window = family.depthwise_window_candidates
    monkeypatch.setattr(family, "depthwise_window_candidates", lambda isa, S: real_depthwise_window(isa, S)[:4])


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject's default): a worker per core, at most 4 (each builds with a pool of its own)."""
    return max(1, min(4, os.cpu_count() or 1))


def pytest_collection_modifyitems(config, items):
    """The tests that build whole networks or tune are shared out among pytest-xdist's workers, each worker's
    share first in its part of the list (the workers start from equal consecutive parts; idle ones then take
    tests queued for the busy ones): no worker gets all the long tests, none is left with a long one at the end."""
    n = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    slow = [item for item in items if item.get_closest_marker("slow")]
    fast = [item for item in items if not item.get_closest_marker("slow")]
    items[:] = [item for w in range(n) for item in slow[w::n] + fast[w::n]]
