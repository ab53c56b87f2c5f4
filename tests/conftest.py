import os
import tempfile

import pytest

# Tests never read or write the user's cache: measured peaks and catalogs go to a fresh directory.
os.environ["TVM_TTILE_CACHE"] = tempfile.mkdtemp(prefix="tvm_ttile_test_cache_")
# Re-timing the fastest candidates after tuning (confirm.py) costs a build and 15 runs per tuning call: off
# unless a test asks for it (MeasureSettings(confirm_top=5), --confirm-top 5).
os.environ["TVM_TTILE_CONFIRM_TOP"] = "0"
# Whole networks are timed in a fresh process per system and round (isolated.py): one round in tests.
os.environ["TVM_TTILE_LATENCY_ROUNDS"] = "1"


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
    monkeypatch.setattr(family, "candidates", lambda op, isa, red: kept[op](isa.name, isa.lanes, red))
