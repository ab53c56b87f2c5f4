"""Candidates timed inside a running network (tvm_ttile.network.in_network)."""
import numpy as np
import pytest

from tvm_ttile.network import in_network as inn


def test_spearman_and_ranking_summary():
    assert inn.spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert inn.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)

    def cand(tuning, hot, flushed, net):
        return {"tuning_s": tuning, "alone_hot_s": hot, "alone_flushed_s": flushed, "in_network_s": net}

    picks = {  # hot timing prefers candidate 0, the network candidate 1
        "a": {"calls": 2, "picked": 1, "candidates": [cand(1, 1, 3, 4e-3), cand(2, 2, 2, 3e-3)]},
        "b": {"calls": 1, "picked": 0, "candidates": [cand(1, 1, 1, 1e-3), cand(2, 2, 2, 2e-3)]},
    }
    s = inn.ranking_summary(picks)
    assert s["alone_hot_s"]["network_ms"] == pytest.approx(2 * 4 + 1)
    assert s["alone_hot_s"]["agrees"] == 1 and s["alone_flushed_s"]["agrees"] == 2
    assert s["in_network_s"]["network_ms"] == pytest.approx(2 * 3 + 1)
    assert s["alone_flushed_s"]["spearman"] == pytest.approx(1.0)
    assert "alone_weights_flushed_s" not in s  # picks timed before that state was: no row, no KeyError
    for e, wf in zip(picks.values(), ([2, 1], [1, 2])):  # weights-only flushing agrees with the network on both
        for c, v in zip(e["candidates"], wf):
            c["alone_weights_flushed_s"] = v
    s = inn.ranking_summary(picks)
    assert s["alone_weights_flushed_s"]["agrees"] == 2 and s["alone_weights_flushed_s"]["network_ms"] == pytest.approx(7)


@pytest.mark.slow
def test_candidates_are_timed_at_their_call_sites_and_the_network_stays_correct(small_catalog, tmp_path):
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.metaschedule import open_database
    from tvm_ttile.models.importers import load_model

    mod = nw.prepare(load_model("micro_resnet").mod)
    work = str(tmp_path / "w")
    nw.tune_network(mod, work_dir=work, trials_per_task=3, memory_bound=False, progress=False)
    vm = nw.build_network(mod, work)
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    expected = nw.run(vm, x)
    db, target = open_database(work), cpu_mod.detect_host().target(1)
    task = next(t for t in nw.extract_tasks(mod) if t.policy == "tvm_ttile")
    cands = inn.top_candidates(db, task.mod, 2)
    assert len(cands) == 2 and cands[0][0].tuning_seconds <= cands[1][0].tuning_seconds
    mods = [m for _, m, _ in cands]
    timer = inn.InNetworkTimer(vm)
    timer.add(task.name, task.mod, mods, inn.build_all(mods, target))
    samples = timer.run(x, rounds=3)
    assert [len(s) for s in samples[task.name]] == [3 * task.weight] * 2
    assert all(v > 0 for s in samples[task.name] for v in s)
    np.testing.assert_array_equal(nw.run(vm, x), expected)  # the real functions still wrote every output
    with pytest.raises(inn.TTileError, match="never calls task nosuch"):
        bad = inn.InNetworkTimer(vm)
        bad.add("nosuch", task.mod, mods[:1], inn.build_all(mods[:1], target))
        bad.run(x, rounds=1)
