import json
import os

import pytest

from tvm_ttile import cpu
from tvm_ttile.errors import UnsupportedISAError


def test_host_model(host):
    assert host.isa.name in ("avx2", "avx512", "neon")
    assert host.lanes in (4, 8, 16) and host.vector_registers in (16, 32)
    assert host.l1d_bytes > 0 and host.l2_bytes > host.l1d_bytes
    assert host.target().kind.name == "llvm"


@pytest.mark.parametrize("target,isa", [({"kind": "llvm", "mcpu": "x86-64-v3"}, "avx2"),
                                        ({"kind": "llvm", "mcpu": "skylake-avx512"}, "avx512"),
                                        ({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]}, "neon"),
                                        ('{"kind": "llvm", "mcpu": "haswell"}', "avx2")])
def test_isa_follows_the_target(target, isa):
    model = cpu.from_target(target)
    assert model.isa.name == isa
    assert model.target().kind.name == "llvm"


def test_bad_targets_are_named():
    with pytest.raises(UnsupportedISAError, match="JSON dict"):
        cpu.from_target("llvm -mcpu=haswell")
    with pytest.raises(UnsupportedISAError, match="llvm"):
        cpu.from_target({"kind": "c"})
    with pytest.raises(UnsupportedISAError, match="neither"):
        cpu.from_target({"kind": "llvm", "mcpu": "nehalem"})


def test_cache_key_separates_isas(host):
    other = "avx2" if host.isa.name != "avx2" else "avx512"
    model = cpu.CPUModel(name=host.name, isa=cpu.get_isa(other))
    assert model.cache_dir != host.cache_dir
    assert "TVM_TTILE" not in str(host.cache_dir) and "tvm_ttile_test_cache" in str(host.cache_dir)


def test_peak_is_measured_once_then_cached(host):
    first = cpu.peak(host)
    assert first["peak_gflops"] > 1 and first["threads"] == 1
    assert len(first["gflops_per_repeat"]) == 9
    assert cpu.peak(host)["measured_at"] == first["measured_at"]
    assert json.loads((host.cache_dir / "peak.json").read_text())["peak_gflops"] == first["peak_gflops"]


def test_run_peak_is_measured_once_in_this_process_and_the_cache_keeps_the_best(host, monkeypatch):
    cached = cpu.peak(host)
    calls, real = [], cpu.measure_peak
    monkeypatch.setattr(cpu, "_RUN_PEAKS", {})
    monkeypatch.setattr(cpu, "measure_peak", lambda c, **kw: calls.append(kw) or real(c, **kw))
    first = cpu.run_peak(host)
    assert cpu.run_peak(host) is first and calls == [{"threads": 1, "precision": "fp32"}]
    assert first["peak_gflops"] > 1 and first["bandwidth_gbs"] > 0 and first["cpu"] == host.describe()["cpu"]
    kept = cpu.peak(host)
    assert kept["peak_gflops"] >= cached["peak_gflops"] and kept["last_run"]["peak_gflops"] == first["peak_gflops"]
    assert kept["peak_gflops"] == cached["peak_gflops"] or first["peak_gflops"] > 1.05 * cached["peak_gflops"]


def test_foreign_isa_cannot_be_measured_here():
    foreign = [i for i in ("avx2", "avx512", "neon") if not cpu._runs_here(i)]
    for isa in foreign:
        with pytest.raises(UnsupportedISAError, match="cannot run"):
            cpu.detect_host(isa)
        with pytest.raises(UnsupportedISAError, match="cannot run on this host"):
            cpu.measure_peak(cpu.CPUModel(name="x", isa=cpu.get_isa(isa)))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2, reason="Linux, 2+ CPUs")
def test_a_build_worker_is_not_bound_to_the_core_tvm_bound_its_parent_to(tmp_path):
    """TVM binds a process's main thread to one core when it sizes its pool; processes started later inherit
    the mask, so the builder's workers unbind themselves (measure.unpin_build_worker)."""
    import subprocess
    import sys

    code = ("import os, tvm_ttile, tvm; tvm.get_global_func('runtime.NumThreads')(); bound = len(os.sched_getaffinity(0)); "
            "from tvm_ttile.measure import unpin_build_worker; unpin_build_worker(); "
            "print(bound, ','.join(map(str, sorted(os.sched_getaffinity(0)))))")
    env = {k: v for k, v in os.environ.items() if k not in ("TVM_NUM_THREADS", "TVM_BIND_THREADS", "TVM_TTILE_CPUS")}
    env["TVM_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    bound, after = out.split()
    assert bound == "1" and after == ",".join(map(str, sorted(os.sched_getaffinity(0))))
    # A run confined to some CPUs (taskset) keeps its build workers there: they do not escape to every CPU.
    last = max(os.sched_getaffinity(0))
    out = subprocess.run([sys.executable, "-c", f"import os; os.sched_setaffinity(0, [{last}]); " + code], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", str(last)]


def test_the_pooled_builder_keeps_its_processes_replaces_them_after_their_uses_and_reports_failures(host, tmp_path):
    """measure.PooledBuilder: build processes serve batch after batch (LocalBuilder starts new ones per batch),
    each replaced after `uses_per_worker` calls (its first use is the check of f_build); a failing build is an
    error on its own result."""
    import tvm
    from tvm.s_tir.meta_schedule.builder import BuilderInput

    from tvm_ttile.measure import PooledBuilder, build_module
    from tvm_ttile.operators import Matmul

    mod = tvm.IRModule({"main": Matmul(M=4, N=8, K=8).prim_func(host.lanes)})
    log = tmp_path / "pids"

    def logged_build(m, target, params=None):
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        return build_module(m, target)

    builder = PooledBuilder(f_build=logged_build, max_workers=1, uses_per_worker=3)
    for _ in range(2):
        built = builder.build([BuilderInput(mod, host.target(1))] * 2)
        assert [b.error_msg for b in built] == [None, None] and all(b.artifact_path for b in built)
    pids = log.read_text().split()
    assert len(pids) == 4 and pids[0] == pids[1] != pids[2] == pids[3] and str(os.getpid()) not in pids
    broken = PooledBuilder(f_build=lambda m, target, params=None: 1 // 0, max_workers=2)
    assert all("ZeroDivisionError" in b.error_msg for b in broken.build([BuilderInput(mod, host.target(1))] * 3))
