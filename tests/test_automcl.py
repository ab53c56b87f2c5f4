"""AutoMCL: the analytic space (plain Python: factor and pfactor initialisation, Table 2 cache fit, filter) and
the compute variants of Table 1 with their templates."""
import pytest

from tvm_ttile.automcl.space import (COMPUTES, CacheModel, build_space, cache_fit, factor_space, factors, keep,
                                     pfactor_space)

L1 = CacheModel(48 * 1024, 64, 64)  # this machine's L1d, AVX-512 vectors


def test_factor_space_is_every_exact_tiling():
    assert len(factor_space("TMM", 12, 32, 8)) == len(factors(12)) * len(factors(32)) * len(factors(8))
    two_level = factor_space("DNMM", 8, 4, 2)
    assert all(8 % (mo * mt) == 0 and 4 % (no * nt) == 0 for mo, mt, no, nt, _ in two_level)
    assert len(two_level) == 10 * 6 * 2  # ordered 3-part factorisations of 2^3 and 2^2, times d(2)


def test_pfactor_spreads_threads_and_keeps_tvm_limits():
    assert pfactor_space("TMM", 12, 32, 8, threads=1) == sorted(factor_space("TMM", 12, 32, 8))
    # A prime size gets tiles of ceil(M / p_y): with 2 threads, 9 and 3 for M = 17 (not divisors of 17).
    tiles = {c[1] for c in pfactor_space("TMM", 17, 16, 4, threads=2)}
    assert {9, 3} <= tiles and 17 in tiles
    assert all(17 % c[1] == 0 for c in pfactor_space("LPMM", 17, 16, 4, threads=2))  # M_t | M for LPMM
    assert all(17 % c[3] == 0 for c in pfactor_space("RPMM", 16, 17, 4, threads=2))  # N_t | N for RPMM


@pytest.mark.parametrize("compute", list(COMPUTES))
def test_cache_fit_grows_with_the_tile_and_filters(compute):
    assert cache_fit(compute, 4, 64, 32, 16) < cache_fit(compute, 8, 128, 64, 16)
    assert keep(compute, (1, 4, 1, 16, 16), N=64, cache=L1)
    assert not keep(compute, (1, 512, 1, 512, 512), N=512, cache=L1)  # far more than 768 lines
    assert not keep(compute, (1, 4, 1, 8, 16), N=64, cache=L1)  # N_t below one vector
    space = build_space(compute, 128, 768, 768, L1)
    assert space["filtered"] == len(space["configs"]) < space["pfactor"] <= space["factor"]


def test_unknown_compute_is_named():
    with pytest.raises(ValueError, match="unknown compute 'XMM'"):
        cache_fit("XMM", 1, 1, 1, 16)


@pytest.mark.parametrize("compute", list(COMPUTES))
def test_compute_variants_match_numpy(compute, host):
    """Every compute of Table 1 with its template, on configurations drawn from its filtered space."""
    import random

    import numpy as np
    import tvm

    from tvm_ttile.automcl.computes import schedule

    M, N, K = 12, 48, 40
    rng = np.random.default_rng(0)
    d, w = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((N, K), dtype=np.float32)
    configs = build_space(compute, M, N, K, CacheModel(8 * 1024, 64, 4 * host.lanes))["configs"]
    for config in random.Random(1).sample(configs, 3):
        lib = tvm.compile(schedule(compute, M, N, K, config), target=host.target(1))
        out = tvm.runtime.tensor(np.zeros((M, N), np.float32))
        lib(tvm.runtime.tensor(d), tvm.runtime.tensor(w), out)
        np.testing.assert_allclose(out.numpy(), d @ w.T, rtol=1e-4, atol=1e-4, err_msg=f"{compute} {config}")
    with pytest.raises(ValueError, match="does not tile"):
        schedule(compute, M, N, K, (1, 5, 1, 16, 8))


def _synthetic_cost(config):
    """A smooth, known landscape: fastest at M_t = 4, N_t = 64, K_t = 128."""
    import math

    _, mt, _, nt, kt = config
    return 1e-3 * (1 + (math.log2(mt) - 2) ** 2 + (math.log2(nt) - 6) ** 2 + 0.5 * (math.log2(kt) - 7) ** 2)


@pytest.mark.parametrize("model", ["reg", "random"])
def test_auto_config_is_reproducible_and_measures_each_config_once(model):
    from tvm_ttile.automcl.tuner import auto_config

    configs = build_space("RPMM", 64, 256, 512, L1)["configs"]
    measure = lambda cs: [_synthetic_cost(c) for c in cs]  # noqa: E731
    a = auto_config("RPMM", configs, measure, trials=40, cache=L1, model=model, seed=3)
    b = auto_config("RPMM", configs, measure, trials=40, cache=L1, model=model, seed=3)
    assert a == b and len(a) == 40 and len({c for c, _ in a}) == 40


def test_regression_tuner_beats_random_choice_on_a_smooth_landscape():
    from tvm_ttile.automcl.tuner import auto_config

    configs = build_space("RPMM", 64, 256, 512, L1)["configs"]
    measure = lambda cs: [_synthetic_cost(c) for c in cs]  # noqa: E731
    best = {m: [min(s for _, s in auto_config("RPMM", configs, measure, 32, L1, model=m, seed=seed))
                for seed in range(5)] for m in ("reg", "random")}
    assert sum(best["reg"]) < sum(best["random"])
    with pytest.raises(ValueError, match="unknown model"):
        auto_config("RPMM", configs, measure, 8, L1, model="ga")


def test_compute_classifier_learns_a_rule_and_reports_held_out_accuracy():
    from tvm_ttile.automcl.selection import NAMES, dataset_shapes, select, train_classifier

    shapes, note = dataset_shapes(max_gflop=0.5)
    assert shapes and "of" in note and all(2 * m * k * n <= 0.5e9 for m, k, n in shapes)

    def gflops(m, k, n):  # a synthetic ground truth: DNMM for small M, RPMM otherwise
        return {c: (10.0 if c == ("DNMM" if m <= 16 else "RPMM") else 5.0) for c in NAMES}

    result = train_classifier([((m, k, n), gflops(m, k, n)) for m, k, n in shapes])
    assert result["computes"] == ["DNMM", "RPMM"]  # the only ones ever the best
    assert result["accuracy"] >= 0.9 and result["within_10"] >= 0.9 and result["relative_gflops"] >= 0.95
    assert select(result["model"], 4, 512, 512) == "DNMM" and select(result["model"], 512, 512, 512) == "RPMM"


def test_candidate_computes_are_those_alone_the_best_on_five_percent():
    from tvm_ttile.automcl.selection import NAMES, candidate_computes

    def row(**g):
        return ((64, 64, 64), {c: g.get(c, 1.0) for c in NAMES})

    rows = [row(RPMM=10.0)] * 15 + [row(DPMM=10.0)] * 4 + [row(TTMM=10.0)] * 1
    rows += [row(DNMM=10.0, LPMM=9.9)] * 5  # near-ties (within 2%) make neither one a candidate
    assert candidate_computes(rows) == ["RPMM", "DPMM"]  # TTMM: 1 of 25 shapes = 4%
    assert candidate_computes(rows + [row(TTMM=10.0)]) == ["TTMM", "RPMM", "DPMM"]  # 2 of 26 = 7.7%


def test_layer_band_shapes_are_layer_like_and_leave_the_benchmarks_out():
    from tvm_ttile.automcl.selection import layer_band_shapes

    shapes = layer_band_shapes(20, max_gflop=1.0, exclude={(128, 768, 768)})
    assert len(set(shapes)) == 20 and shapes == layer_band_shapes(20, max_gflop=1.0, exclude={(128, 768, 768)})
    assert all(16 <= m <= 512 and 256 <= k <= 4096 and 256 <= n <= 4096 and 2 * m * k * n <= 1e9
               for m, k, n in shapes)
    assert (128, 768, 768) not in shapes


@pytest.mark.slow
def test_tune_automcl_on_a_small_dense_layer(host):
    from tvm_ttile.automcl.tune import tune_automcl
    from tvm_ttile.errors import TTileError
    from tvm_ttile.operators import Matmul

    res = tune_automcl(Matmul(M=8, N=64, K=32, dense=True, name="tiny"), host, trials=12, classifier=None)
    assert res.verified and res.gflops > 0 and res.selected_by == "all computes: no classifier"
    assert set(res.per_compute) == set(COMPUTES) and all(v["trials"] == 2 for v in res.per_compute.values())
    with pytest.raises(TTileError, match="dense"):
        tune_automcl(Matmul(M=8, N=64, K=32), host, trials=6)


@pytest.mark.slow
def test_interrupted_automcl_run_keeps_each_finished_compute(host, tmp_path, monkeypatch):
    from tvm_ttile.automcl import tune as automcl_tune
    from tvm_ttile.operators import Matmul

    op = Matmul(M=8, N=64, K=32, dense=True, name="tiny")
    real, calls = automcl_tune.measure_configs, []

    def measure_until_third(compute, *a, **k):
        calls.append(compute)
        if len(calls) == 3:
            raise KeyboardInterrupt  # the run is stopped while the third compute is being tuned
        return real(compute, *a, **k)

    monkeypatch.setattr(automcl_tune, "measure_configs", measure_until_third)
    with pytest.raises(KeyboardInterrupt):
        automcl_tune.tune_automcl(op, host, trials=12, classifier=None, work_dir=str(tmp_path))
    calls.clear()
    monkeypatch.setattr(automcl_tune, "measure_configs", lambda compute, *a, **k: calls.append(compute) or real(
        compute, *a, **k))
    res = automcl_tune.tune_automcl(op, host, trials=12, classifier=None, work_dir=str(tmp_path))
    assert calls == list(COMPUTES)[2:]  # the two finished computes are not measured again
    assert res.verified and all(v["trials"] == 2 for v in res.per_compute.values()) and len(res.curve) == 12


@pytest.mark.slow
def test_trained_classifier_is_kept_per_cpu_and_picks_the_compute(host, tmp_path, monkeypatch):
    """A classifier trained on this CPU is found again from its cache directory; tune then tunes only the
    compute it picks (or every compute with all_computes, naming the pick)."""
    from tvm_ttile.automcl.selection import dataset_shapes, load_classifier, save_classifier, train_classifier
    from tvm_ttile.automcl.tune import tune_automcl
    from tvm_ttile.operators import Matmul

    monkeypatch.setenv("TVM_TTILE_CACHE", str(tmp_path))
    assert load_classifier(host)[0] is None
    shapes, note = dataset_shapes(0.5)
    rows = [((m, k, n), {c: 10.0 if c == "TMM" else 5.0 for c in COMPUTES}) for m, k, n in shapes]
    save_classifier(host, train_classifier(rows), note)
    model, how = load_classifier(host)
    assert model is not None and "exact 100%" in how and model.computes == ["TMM"]
    op = Matmul(M=8, N=64, K=32, dense=True, name="tiny")
    res = tune_automcl(op, host, trials=3)
    assert res.selected == "TMM" and list(res.per_compute) == ["TMM"] and res.verified
    both = tune_automcl(op, host, trials=6, all_computes=True)
    assert both.selected == "TMM" and set(both.per_compute) == set(COMPUTES)
