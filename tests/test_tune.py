"""Tuning through MetaSchedule: records, resuming, a fresh process reading the database, tune_tir with the
plug-ins, and measuring through an RPC tracker with two servers on loopback."""
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tvm
from tvm.s_tir import meta_schedule as ms

from kernels import conv_kept, matmul_kept
from tvm_ttile.measure import MeasureSettings, build_module
from tvm_ttile.metaschedule import TTileSearch, TTileSpaceGenerator, open_database, prepare_logging
from tvm_ttile.operators import Conv2d, Matmul
from tvm_ttile.scheme import Scheme
from tvm_ttile.tune import rpc_runner, tune


@pytest.fixture(scope="module")
def conv(host):
    return Conv2d(K=2 * host.lanes, C=16, H=10, W=10, R=3, S=3, pad=1, name="small-conv")


@pytest.fixture(scope="module")
def tuned(host, conv, tmp_path_factory):
    work = tmp_path_factory.mktemp("tune")
    return tune(conv, host, trials=6, seed=3, work_dir=str(work), kept=conv_kept(host.isa.name, host.lanes),
                trials_per_iter=3, progress=False, settings=MeasureSettings(confirm_top=5))


def test_tune_reports_a_verified_best(tuned):
    assert tuned.verified and tuned.trials == 6 and tuned.new_trials == 6
    assert tuned.gflops > 0 and tuned.percent_of_peak > 0 and tuned.threads == 1
    Scheme.parse(tuned.scheme)
    assert len(tuned.history) == 6 and all(g for _, g, _ in tuned.history)
    # the reported best is the record MetaSchedule applies (best mean time); its GFLOPS are a median
    assert any(g == pytest.approx(tuned.gflops) and s == tuned.scheme for s, g, _ in tuned.history)
    assert tuned.lowering_failures == []
    d = tuned.to_json()
    assert {"gflops", "percent_of_peak", "scheme", "trials", "seconds", "verified"} <= set(d)


def test_tuning_with_flushed_caches_times_one_cold_call_per_repeat(host, conv, tmp_path):
    """As a network's layers are timed: every repeat is one call after the caches were flushed."""
    from tvm_ttile.network import COLD_SETTINGS

    assert COLD_SETTINGS.cache_flush  # tune-model --cache-flush
    cfg = MeasureSettings(number=2, repeat=3, cache_flush=True).evaluator_config()
    assert (cfg.number, cfg.repeat, cfg.min_repeat_ms, cfg.enable_cpu_cache_flush) == (1, 6, 0, True)
    res = tune(conv, host, trials=2, work_dir=str(tmp_path), kept=conv_kept(host.isa.name, host.lanes),
               settings=MeasureSettings(number=1, repeat=3, cache_flush=True, confirm_top=0), progress=False)
    assert res.verified and res.gflops > 0
    records = open_database(str(tmp_path)).get_all_tuning_records()
    assert len(records) == 2 and all(len(r.run_secs) == 3 for r in records)


def test_weights_only_flush_keeps_the_input_and_residuals_in_cache(host, conv, tmp_path):
    """tune-model --cache-flush weights: before each timed call the weights, the small operands and the output are
    flushed, not the input or an argument shaped as the output (a residual the previous layers just wrote); the
    runner's worker registers that flush itself, and the work dir's key names it (other keys stay as they were)."""
    import dataclasses

    from tvm_ttile import timing
    from tvm_ttile.network import CACHE_STATES
    from tvm_ttile.workdir import work_key

    shapes = [(1, 8, 8, 16), (3, 3, 16, 16), (1, 1, 1, 16), (1, 8, 8, 16), (1, 8, 8, 16)]
    args = [tvm.runtime.tensor(np.ones(s, "float32")) for s in shapes]
    assert [tuple(a.shape) for a in timing.flushed_arguments(args)] == [shapes[1], shapes[2], shapes[4]]
    assert timing.flushed_arguments(args)[-1] is args[-1]
    settings = CACHE_STATES["weights"]
    assert settings.flushes_weights_only and not CACHE_STATES["on"].flushes_weights_only
    assert not MeasureSettings(keep_activations=True).flushes_weights_only  # nothing flushed: nothing to keep
    res = tune(conv, host, trials=2, work_dir=str(tmp_path), kept=conv_kept(host.isa.name, host.lanes),
               settings=dataclasses.replace(settings, repeat=3, confirm_top=0), progress=False)
    assert res.verified and res.gflops > 0
    records = open_database(str(tmp_path)).get_all_tuning_records()
    assert len(records) == 2 and all(len(r.run_secs) == 3 for r in records)
    target = host.target(1)
    assert work_key(target, 1, settings)["measure"]["keep_activations"] is True
    assert "keep_activations" not in work_key(target, 1, CACHE_STATES["on"])["measure"]


def test_the_fastest_records_are_timed_again_together_and_the_build_uses_them(tuned, host, conv):
    """confirm.confirm_top: the 5 fastest of the 6 records were re-timed in 3 rounds; their run_secs are now
    the round medians, the replaced timings are in confirmed.jsonl, and MetaSchedule's pick is a confirmed one."""
    from tvm_ttile.confirm import CONFIRM_LOG, MAX_PASSES, confirm_top

    with open(f"{tuned.work_dir}/{CONFIRM_LOG}") as f:
        entries = [json.loads(line) for line in f]
    first, last = entries[0]["candidates"], entries[-1]
    assert [c["tuning_rank"] for c in first] == [0, 1, 2, 3, 4] and entries[0]["rounds"] == 3
    assert all(len(c["round_medians"]) == 3 and c["error"] is None and len(c["tuning_secs"]) == 5 for c in first)
    tuning_means = [np.mean(c["tuning_secs"]) for c in first]
    assert tuning_means == sorted(tuning_means)  # the five MetaSchedule would have ranked first
    assert last["best_confirmed"] or len(entries) == MAX_PASSES
    db = open_database(tuned.work_dir)
    mod = tvm.IRModule({"main": conv.prim_func(host.lanes)})
    records = db.get_top_k(db.commit_workload(mod), 10)
    secs = [[float(x) for x in r.run_secs] for r in records]
    assert all(c["round_medians"] in secs for c in last["candidates"])
    if last["best_confirmed"]:
        assert len(secs[0]) == 3  # the fastest record now carries fresh timings, one median per round
        sch = tvm.s_tir.Schedule(mod)
        records[0].trace.apply_to_schedule(sch, remove_postproc=False)
        from tvm_ttile.lowering import scheme_of_schedule

        assert scheme_of_schedule(sch) == last["candidates"][last["picked_rank"]]["scheme"]
    # Done: called again it re-times nothing, unless a record never re-timed has entered the 5 fastest since (the
    # re-timed ones came out slower than their tuning times: a busy machine, e.g. beside another test worker).
    confirmed = {c["key"] for e in entries for c in e["candidates"]}
    again = confirm_top(db, mod, host.target(), MeasureSettings(confirm_top=5), progress=False)
    assert again is None or any(c["key"] not in confirmed for c in again["candidates"])


def test_confirm_all_after_tune_relax_style_tuning(tuned, host, conv, tmp_path):
    """confirm_all, for a database tuned elsewhere (tune_relax): every workload's fastest timed again."""
    import shutil

    from tvm_ttile.confirm import CONFIRM_LOG, confirm_all

    shutil.copytree(tuned.work_dir, tmp_path / "db")
    (tmp_path / "db" / CONFIRM_LOG).unlink()  # as if never re-timed
    db = open_database(str(tmp_path / "db"))
    again = confirm_all(db, host.target(), MeasureSettings(confirm_top=3), progress=False)
    assert again is not db  # reopened: the records changed underneath the first handle
    with open(tmp_path / "db" / CONFIRM_LOG) as f:
        entries = [json.loads(line) for line in f]
    assert {e["workload"] for e in entries} == {0} and all(len(e["candidates"]) == 3 for e in entries)
    assert confirm_all(again, host.target(), MeasureSettings(confirm_top=0)) is again  # off: untouched


def test_confirm_top_default_comes_from_the_environment(monkeypatch):
    from tvm_ttile.errors import TTileError

    monkeypatch.setenv("TVM_TTILE_CONFIRM_TOP", "4")
    assert MeasureSettings().confirm_top == 4
    monkeypatch.delenv("TVM_TTILE_CONFIRM_TOP")
    assert MeasureSettings().confirm_top == 3
    monkeypatch.setenv("TVM_TTILE_CONFIRM_TOP", "-1")
    with pytest.raises(TTileError, match="TVM_TTILE_CONFIRM_TOP must be a whole number"):
        MeasureSettings()


def test_a_non_square_kernel_with_asymmetric_padding_is_tuned_and_verified(host, tmp_path):
    op = Conv2d(K=2 * host.lanes, C=8, H=9, W=11, R=1, S=5, pad=(0, 2, 1, 1), name="asymmetric")
    res = tune(op, host, trials=3, work_dir=str(tmp_path), kept=conv_kept(host.isa.name, host.lanes),
               progress=False)
    assert res.verified and res.gflops > 0 and op.output_shape == (1, 10, 10, 2 * host.lanes)


def test_rerun_resumes_from_the_database(tuned, host, conv):
    again = tune(conv, host, trials=8, seed=3, work_dir=tuned.work_dir, kept=conv_kept(host.isa.name, host.lanes),
                 trials_per_iter=3, progress=False)
    assert again.new_trials == 2 and again.trials == 8
    assert [h[0] for h in again.history[:6]] == [h[0] for h in tuned.history]  # the same seed draws the same order
    assert len({h[0] for h in again.history}) == 8


def test_fresh_process_opens_and_applies_the_database(tuned, host, conv):
    code = textwrap.dedent(f"""
        import json, numpy as np, tvm
        from tvm.s_tir import meta_schedule as ms
        from tvm_ttile.metaschedule import open_database
        from tvm_ttile.operators import Conv2d
        from tvm_ttile.cpu import detect_host
        host = detect_host()
        op = Conv2d(K={conv.K}, C=16, H=10, W=10, R=3, S=3, pad=1)
        mod = tvm.IRModule({{"main": op.prim_func(host.lanes)}})
        db = open_database({tuned.work_dir!r})
        sch = ms.tir_integration.compile_tir(db, mod, host.target())
        lib = tvm.compile(sch.mod, target=host.target())
        a, b = op.random_inputs(seed=9)
        dev = tvm.cpu()
        out = tvm.runtime.tensor(np.zeros((1, 10, 10, op.K), np.float32), dev)
        lib(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out)
        print(json.dumps({{"err": float(np.abs(out.numpy() - op.reference(a, b)).max()),
                          "scheme": sch.get(sch.get_sblock("root")).annotations["tvm_ttile.scheme"]}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    db = open_database(tuned.work_dir)
    mod = tvm.IRModule({"main": conv.prim_func(host.lanes)})
    best = db.get_top_k(db.commit_workload(mod), 1)[0]
    sch = tvm.s_tir.Schedule(mod)
    best.trace.apply_to_schedule(sch, remove_postproc=False)
    from tvm_ttile.lowering import scheme_of_schedule

    assert res["err"] < 1e-3 and res["scheme"] == scheme_of_schedule(sch)


@pytest.mark.slow
def test_plugins_work_inside_tune_tir(host, tmp_path):
    """The way a TVM user passes a custom policy: tune_tir(..., space=..., strategy=...)."""
    op = Matmul(M=12, N=2 * host.lanes, K=32)
    mod = tvm.IRModule({"main": op.prim_func(host.lanes)})
    prepare_logging()
    db = ms.tune_tir(mod, host.target(), str(tmp_path), max_trials_global=4, num_trials_per_iter=2,
                     builder=ms.builder.LocalBuilder(f_build=build_module, max_workers=2),
                     space=TTileSpaceGenerator(), strategy=TTileSearch(kept=matmul_kept(host.isa.name, host.lanes)),
                     cost_model=ms.cost_model.RandomModel())
    sch = ms.tir_integration.compile_tir(db, mod, host.target())
    assert sch is not None
    lib = tvm.compile(sch.mod, target=host.target())
    a, b = op.random_inputs()
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros((12, op.N), np.float32), dev)
    lib(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out)
    np.testing.assert_allclose(out.numpy(), op.reference(a, b), rtol=1e-4, atol=1e-4)
    assert len(db.get_all_tuning_records()) == 4
    assert open_database(str(tmp_path)) is not None


@pytest.mark.slow
def test_measuring_through_an_rpc_tracker_with_two_servers(host, tmp_path):
    from tvm import rpc
    from tvm.rpc.tracker import Tracker

    tracker = Tracker(host="127.0.0.1", port=9190, port_end=9290, silent=True)
    servers = [rpc.Server(host="127.0.0.1", port=9300, port_end=9400, key="ttile-test",
                          tracker_addr=("127.0.0.1", tracker.port), silent=True) for _ in range(2)]
    try:
        import time

        for _ in range(100):
            summary = rpc.connect_tracker("127.0.0.1", tracker.port).summary()
            free = [q for q in summary["queue_info"].values()] if "queue_info" in summary else []
            if free and free[0].get("free", 0) >= 2:
                break
            time.sleep(0.1)
        assert free and free[0]["free"] == 2, summary
        op = Matmul(M=8, N=host.lanes, K=16, name="rpc-matmul")
        res = tune(op, host, trials=4, work_dir=str(tmp_path), kept=matmul_kept(host.isa.name, host.lanes),
                   runner=rpc_runner("127.0.0.1", tracker.port, "ttile-test"), trials_per_iter=4, progress=False)
        assert res.verified and res.trials == 4 and all(g for _, g, _ in res.history)
    finally:
        for s in servers:
            s.terminate()
        tracker.terminate()


def test_cli_tune_json(host, monkeypatch, capsys, tmp_path):
    """`tvm-ttile tune ... --json` on a catalog made of a few microkernels (measured here)."""
    from tvm_ttile import cli
    from tvm_ttile.microkernels import family

    monkeypatch.setattr(family, "candidates", lambda op, isa, red, precision="fp32": matmul_kept(isa.name, isa.lanes, red))
    argv = ["tune", "matmul", "--M", "10", "--N", str(3 * host.lanes - 2), "--K", "24", "--trials", "3",
            "--work-dir", str(tmp_path), "--json", "--confirm-top", "0"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"gflops", "percent_of_peak", "scheme", "trials", "seconds", "verified"} <= set(out)
    assert out["verified"] is True and out["trials"] == 3
    assert not (tmp_path / "confirmed.jsonl").exists()  # --confirm-top 0: the tuning timings stand
    with pytest.raises(SystemExit):
        cli.main(argv[:-1] + ["-1"])
    assert "expected a whole number >= 0, got '-1'" in capsys.readouterr().err
    assert cli.main(["tune", "conv2d", "--K", "8"]) == 2
    assert "--C" in capsys.readouterr().err
    assert cli.main(["tune", "conv2d", "--layer", "bert-qkv"]) == 2


@pytest.mark.slow
def test_the_model_strategy_tunes_and_builds_with_zero_trials(host, monkeypatch, capsys, tmp_path):
    """`--strategy model`: the ranked pool measured from the top (verified, resumable: nothing measured twice);
    `--trials 0`: the top-ranked scheme built and checked against numpy, no candidate timed, no work dir."""
    from tvm_ttile import cli
    from tvm_ttile.microkernels import family

    monkeypatch.setattr(family, "candidates", lambda op, isa, red, precision="fp32": matmul_kept(isa.name, isa.lanes, red))
    shape = ["tune", "matmul", "--M", "10", "--N", str(3 * host.lanes - 2), "--K", "24", "--strategy", "model",
             "--strategy-option", "pool=200", "--json", "--confirm-top", "0"]
    assert cli.main(shape + ["--trials", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verified"] is True and out["trials"] == 0 and out["work_dir"] == "" and out["gflops"] > 0
    assert cli.main(shape + ["--trials", "4", "--work-dir", str(tmp_path)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["verified"] is True and first["trials"] == 4 and first["new_trials"] == 4
    assert cli.main(shape + ["--trials", "6", "--work-dir", str(tmp_path), "--history"]) == 0
    again = json.loads(capsys.readouterr().out)
    schemes = [h["scheme"] for h in again["history"]]
    assert again["trials"] == 6 and again["new_trials"] == 2 and len(set(schemes)) == len(schemes)
    assert cli.main(shape + ["--trials", "0", "--strategy-option", "ranker=nope"]) == 2
    assert "unknown ranker 'nope'" in capsys.readouterr().err
    assert cli.main(shape[:8] + ["--trials", "0"]) == 2  # zero trials need a ranking
    assert "trials must be positive" in capsys.readouterr().err


@pytest.mark.slow
def test_the_gbfs_strategy_walks_from_measured_schemes_and_resumes(host, monkeypatch, capsys, tmp_path):
    """`--strategy gbfs`: G-BFS over the structured space, verified; a second run goes on from the database
    without measuring a scheme twice."""
    from tvm_ttile import cli
    from tvm_ttile.microkernels import family

    monkeypatch.setattr(family, "candidates", lambda op, isa, red, precision="fp32": matmul_kept(isa.name, isa.lanes, red))
    shape = ["tune", "matmul", "--M", "12", "--N", str(2 * host.lanes), "--K", "32", "--strategy", "gbfs",
             "--strategy-option", "starts=2", "--json", "--confirm-top", "0", "--work-dir", str(tmp_path)]
    assert cli.main(shape + ["--trials", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True
    assert cli.main(shape + ["--trials", "6", "--history"]) == 0
    again = json.loads(capsys.readouterr().out)
    schemes = [h["scheme"] for h in again["history"]]
    assert again["verified"] is True and again["new_trials"] == 3 and len(set(schemes)) == len(schemes) == 6
    assert cli.main(shape + ["--trials", "7", "--strategy-option", "rho=x"]) == 2
    assert "option 'rho' takes a value of type int" in capsys.readouterr().err


@pytest.mark.slow
def test_compare_systems_side_by_side(host, monkeypatch, tmp_path):
    """Tuners and a library side by side through one API and one result type (every system on its own:
    test_systems.py); a resumed comparison measures nothing again."""
    from tvm_ttile.baselines import run_system
    from tvm_ttile.compare import compare, headline, summary, trials_to_reach
    from tvm_ttile.errors import TTileError
    from tvm_ttile.microkernels import family

    monkeypatch.setattr(family, "candidates", lambda op, isa, red, precision="fp32": matmul_kept(isa.name, isa.lanes, red))
    monkeypatch.setattr("tvm_ttile.operators.get_layer",
                        lambda name: Matmul(M=12, N=2 * host.lanes, K=32, name=name))
    systems = ["tvm_ttile", "metaschedule", "numpy"]
    data = compare(["tiny"], systems, budget=4, seeds=2, baseline_seeds=1, out_dir=str(tmp_path), progress=False)
    summ = summary(data)["tiny"]
    assert set(summ) == set(systems)
    for s in systems:
        assert summ[s]["verified"] and summ[s]["gflops"] > 0
        assert summ[s]["seeds"] == (2 if s == "tvm_ttile" else 1)
        assert all(r["retimed_gflops"] > 0 for r in data["results"]["tiny"][s])  # timed again side by side
    head = headline(data)
    assert len(head["rows"]) == 1 and head["geomean_ratio"] == pytest.approx(head["rows"][0]["ratio"])
    assert head["with_libraries"] == 1  # numpy, a matmul library
    libs = __import__("tvm_ttile.compare", fromlist=["against_libraries"]).against_libraries(data)
    assert [r["library"] for r in libs["rows"]] == ["numpy"]
    assert libs["geomean"] == pytest.approx(summ["tvm_ttile"]["gflops"] / summ["numpy"]["gflops"])
    assert (tmp_path / "vs_best_library.png").exists()
    assert trials_to_reach([(1, 0.1, 5.0), (2, 0.2, 9.0), (3, 0.3, 9.0)], 8.0) == 2
    assert trials_to_reach([(1, 0.1, 5.0)], 8.0) is None
    for s in systems[:2]:
        run = data["results"]["tiny"][s][0]
        assert run["trials"] == 4 and len(run["curve"]) == 4
        assert [c[2] for c in run["curve"]] == sorted(c[2] for c in run["curve"])  # best so far
    assert (tmp_path / "compare.md").exists() and (tmp_path / "convergence.png").exists()
    again = compare(["tiny"], ["metaschedule"], budget=4, out_dir=str(tmp_path), progress=False)
    assert again["results"]["tiny"]["metaschedule"][0]["trials"] == 4  # resumed: still the same 4 records
    with pytest.raises(TTileError, match="unknown system"):
        run_system("autotvm", Matmul(M=4, N=host.lanes, K=4), host)


def test_prepacked_weights_are_packed_at_build_time_and_not_timed(host, monkeypatch, tmp_path):
    """With prepack the weights are constants: tvm_ttile's best kernel reads them packed (the packing is a
    layout-rewrite block that the timed build drops; the function as a whole still takes the operator's
    layout, which is what verification runs), and the prepacked layer has its own work dirs."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from tvm_ttile.baselines import best_module
    from tvm_ttile.compare import compare, summary
    from tvm_ttile.microkernels import family

    monkeypatch.setattr(family, "candidates", lambda op, isa, red, precision="fp32": matmul_kept(isa.name, isa.lanes, red))
    monkeypatch.setattr("tvm_ttile.operators.get_layer", lambda name: Matmul(M=12, N=2 * host.lanes, K=32, name=name))
    systems = ["tvm_ttile", "numpy"]  # MetaSchedule's RewriteLayout on prepacked weights: test_network
    data = compare(["tiny"], systems, budget=3, out_dir=str(tmp_path), progress=False, prepack=True,
                   sampler_options={"weights_first": 1.0})
    assert data["prepack"] is True and "prepacked" in (tmp_path / "compare.md").read_text()
    # the sampler's options are recorded, and tvm_ttile's runs get their own work dirs (a resumed comparison
    # never mixes two samplers' records)
    assert data["sampler_options"] == {"weights_first": 1.0} and "weights_first=1.0" in (tmp_path / "compare.md").read_text()
    summ = summary(data)["tiny"]
    for s in systems:
        assert summ[s]["verified"] and data["results"]["tiny"][s][0]["retimed_gflops"] > 0
    op = Matmul(M=12, N=2 * host.lanes, K=32, prepack=True)
    mod = best_module(op, str(tmp_path / "work" / f"{host.isa.name}-tvm_ttile-tiny-prepack-weights_first=1.0-seed0"),
                      host)
    timed = [tuple(int(x) for x in a.shape) for a in ArgInfo.from_entry_func(mod, remove_preproc=True)]
    assert len(timed[1]) == 3 and np.prod(timed[1]) == 32 * 2 * host.lanes, timed  # [j // b, k, j % b]
    whole = [tuple(int(x) for x in a.shape) for a in ArgInfo.from_entry_func(mod, remove_preproc=False)]
    assert whole[1] == (32, 2 * host.lanes)


def test_tuning_registers_only_the_cpu_tensor_intrinsics():
    """TuneContext imports tvm.s_tir.tensor_intrin; tuning first registers its CPU modules only (30-65 s saved
    per process), after which MetaSchedule's default CPU space still generates (fresh process: nothing imported)."""
    code = textwrap.dedent("""
        import sys, tvm
        from tvm.s_tir import meta_schedule as ms
        from tvm_ttile.cpu import detect_host
        from tvm_ttile.metaschedule import cpu_tensor_intrinsics_only
        from tvm_ttile.operators import Matmul
        assert cpu_tensor_intrinsics_only() and not cpu_tensor_intrinsics_only()
        mod = tvm.IRModule({"main": Matmul(M=8, N=32, K=8).prim_func(16)})
        ctx = ms.TuneContext(mod=mod, target=detect_host().target(1), space_generator="post-order-apply",
                             search_strategy="evolutionary")
        assert ctx.generate_design_space()
        loaded = {m.rsplit(".", 1)[-1] for m in sys.modules if m.startswith("tvm.s_tir.tensor_intrin.")}
        assert {"x86", "arm_cpu"} <= loaded and "cuda" not in loaded and "rocm" not in loaded, loaded
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_compare_names_the_systems_it_could_not_measure():
    """A library that is not installed leaves its columns out of the tables: the file says so, per system."""
    from tvm_ttile.compare import _failure_lines

    missing = {"error": "onednn is not installed (No module named 'torch'); pip install 'tvm-ttile[libs]'"}
    data = {"results": {"a": {"onednn": missing, "numpy": [{}]}, "b": {"onednn": missing, "numpy": [{}]}}}
    assert _failure_lines(data) == ["", "Not measured:", f"- onednn on every layer: {missing['error']}"]
    data["results"]["b"]["onednn"] = [{}]
    assert _failure_lines(data)[-1] == f"- onednn on a: {missing['error']}"
    assert _failure_lines({"results": {"a": {"numpy": [{}]}}}) == []


def test_compare_warns_at_once_of_a_library_that_is_not_installed(monkeypatch, capsys):
    """Before any tuning: a long comparison must not end with a library's column silently empty."""
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.baselines import SYSTEMS
    from tvm_ttile.compare import compare

    class Stop(Exception):
        pass

    def stop():
        raise Stop

    monkeypatch.setattr(SYSTEMS["numpy"], "module", "no_such_module_here")
    monkeypatch.setattr(cpu_mod, "detect_host", stop)
    assert SYSTEMS["numpy"].missing() == ("numpy is not installed (no module named 'no_such_module_here'); "
                                          "pip install 'tvm-ttile[libs]'")
    assert SYSTEMS["metaschedule"].missing() is None
    with pytest.raises(Stop):
        compare([Matmul(M=4, N=16, K=4, name="tiny")], ["numpy"], budget=1, progress=False)
    assert "warning: numpy is not installed" in capsys.readouterr().err
