"""The offline catalog on a handful of candidates: measured through MetaSchedule, stored, resumed, shown."""
import json

import pytest

from tvm_ttile import cli
from tvm_ttile.microkernels import catalog as cat_mod
from tvm_ttile.microkernels import family
from tvm_ttile.microkernels.heatmap import write_heatmap
from tvm_ttile.microkernels.spec import Microkernel


def few(host, op):
    red = family.measurement_red(host.isa, host.l1d_bytes)
    if op == "matmul":
        return [Microkernel.make("matmul", host.isa.name, host.lanes, red, i=i, j=2) for i in (1, 4, 5, 6)]
    if op == "depthwise":
        return [Microkernel.make("depthwise", host.isa.name, host.lanes, red, h=h, w=1, k=2) for h in (1, 4)]
    return [Microkernel.make("conv2d", host.isa.name, host.lanes, red, h=h, w=1, k=2) for h in (1, 4, 5, 6)]


@pytest.fixture(scope="module")
def small_catalog(host, tmp_path_factory):
    path = tmp_path_factory.mktemp("cat") / "catalog_matmul.json"
    return cat_mod.build_catalog(host, "matmul", candidates=few(host, "matmul"), path=path), path


def test_every_candidate_is_measured(small_catalog):
    cat, path = small_catalog
    assert len(cat.entries) == 4
    for e in cat.entries:
        assert e["error"] is None, e["error"]
        assert e["gflops"] > 0 and 0 < e["percent_of_peak"]
    assert cat.best()["gflops"] == max(e["gflops"] for e in cat.entries)
    data = json.loads(path.read_text())
    assert data["complete"] and data["threads"] == 1 and data["peak_gflops"] > 0
    assert {e["text"] for e in data["kept"]} == {m.text for m in cat.kept}


def test_catalog_is_reused_not_remeasured(small_catalog, host, monkeypatch):
    cat, path = small_catalog
    monkeypatch.setattr("tvm_ttile.measure.measure_modules", lambda *a, **k: pytest.fail("re-measured"))
    again = cat_mod.build_catalog(host, "matmul", candidates=few(host, "matmul"), path=path)
    assert again.entries == cat.entries


def test_interrupted_catalog_resumes(small_catalog, host, tmp_path, monkeypatch):
    cat, _ = small_catalog
    partial = cat.to_json()
    partial["entries"], partial["complete"] = partial["entries"][:3], False
    path = tmp_path / "catalog_matmul.json"
    path.write_text(json.dumps(partial))
    import tvm_ttile.measure as measure

    real, seen = measure.measure_modules, []

    def counting(mods, *a, **k):
        seen.append(len(mods))
        return real(mods, *a, **k)

    monkeypatch.setattr(measure, "measure_modules", counting)
    resumed = cat_mod.build_catalog(host, "matmul", candidates=few(host, "matmul"), path=path)
    # the missing one, then (if any) those near the threshold measured once more
    assert seen[0] == 1 and len(seen) <= 2 and len(resumed.entries) == 4
    assert json.loads(path.read_text())["complete"]


def test_another_candidate_set_measures_only_its_new_members_and_keeps_the_others(small_catalog, host, tmp_path,
                                                                                  monkeypatch):
    """As a layer with a 1x7 window adds its microkernels: only the new ones are measured, the file keeps every
    microkernel measured, and each catalog returned holds only the candidates asked for."""
    _, first_path = small_catalog
    path = tmp_path / "catalog_matmul.json"
    path.write_text(first_path.read_text())
    import tvm_ttile.measure as measure

    real, seen = measure.measure_modules, []

    def counting(mods, *a, **k):
        seen.append(len(mods))
        return real(mods, *a, **k)

    monkeypatch.setattr(measure, "measure_modules", counting)
    monkeypatch.setattr(cat_mod, "RETIME_BAND", 0.0)  # no second pass: count the first one only
    red = family.measurement_red(host.isa, host.l1d_bytes)
    new = [Microkernel.make("matmul", host.isa.name, host.lanes, red, i=i, j=2) for i in (2, 3)]
    asked = few(host, "matmul")[1:3] + new
    got = cat_mod.build_catalog(host, "matmul", candidates=asked, path=path)
    assert seen == [2]
    assert sorted(e["text"] for e in got.entries) == sorted(mk.text for mk in asked)
    in_file = {e["text"] for e in json.loads(path.read_text())["entries"]}
    assert in_file == {mk.text for mk in few(host, "matmul") + new}
    again = cat_mod.build_catalog(host, "matmul", candidates=few(host, "matmul"), path=path)
    assert seen == [2] and sorted(e["text"] for e in again.entries) == sorted(mk.text for mk in few(host, "matmul"))


def test_catalog_for_asks_for_the_window_microkernels_a_layer_needs(host, monkeypatch):
    """A 1x7 layer's catalog is the base family plus its 1x7 microkernels; a 3x3, a matmul's or the 7x7 stem's (3
    channels) is the base alone."""
    from tvm_ttile.operators import Conv2d, Matmul
    from tvm_ttile.space import Problem

    asked = []
    monkeypatch.setattr(cat_mod, "build_catalog", lambda cpu, op, threshold, candidates=None, settings=None, precision="fp32":
                        asked.append((op, candidates)))
    red = family.measurement_red(host.isa, host.l1d_bytes)
    for op in (Conv2d(K=64, C=64, H=17, W=17, R=1, S=7, pad=(0, 3)), Conv2d(K=64, C=64, H=17, W=17, R=3, S=3),
               Matmul(M=8, N=64, K=64), Conv2d(K=64, C=3, H=32, W=32, R=7, S=7, stride=2, pad=3)):
        cat_mod.catalog_for(host, Problem.from_operator(op, host.lanes, host.isa.name))
    (op7, with_window), (op3, base), (opm, mm), (_, stem) = asked
    assert (op7, op3, opm) == ("conv2d", "conv2d", "matmul") and base is None and mm is None
    assert stem is None  # 3 channels: a row or column of the 7x7 is not wanted, so nothing is measured for it
    assert [mk.text for mk in with_window] == [mk.text for mk in family.candidates("conv2d", host.isa, red) +
                                               family.window_candidates(host.isa, red, 1, 7)]


def test_candidates_near_the_threshold_are_measured_twice_and_keep_the_faster(host, tmp_path, monkeypatch):
    """A band as wide as everything: every candidate measured twice; the faster figure is the one kept, and an
    interruption before the second pass leaves an incomplete catalog that finishes the second pass only."""
    monkeypatch.setattr(cat_mod, "RETIME_BAND", 10.0)
    import tvm_ttile.measure as measure

    real, seen = measure.measure_modules, []

    def counting(mods, *a, **k):
        seen.append(len(mods))
        return real(mods, *a, **k)

    monkeypatch.setattr(measure, "measure_modules", counting)
    path = tmp_path / "catalog_matmul.json"
    cat = cat_mod.build_catalog(host, "matmul", candidates=few(host, "matmul"), path=path)
    assert seen == [4, 4]
    for e in cat.entries:
        assert len(e["measurements"]) == 2 and e["gflops"] == max(e["measurements"])
        assert e["percent_of_peak"] == pytest.approx(100 * e["gflops"] / cat.peak_gflops)
    first_pass = cat.to_json()
    first_pass["complete"] = False
    for e in first_pass["entries"]:
        e["measurements"] = e["measurements"][:1]
    first_pass["entries"][0].pop("measurements")  # a catalog written before the second pass existed
    path.write_text(json.dumps(first_pass))
    seen.clear()
    resumed = cat_mod.build_catalog(host, "matmul", candidates=few(host, "matmul"), path=path)
    assert seen == [4] and all(len(e["measurements"]) == 2 for e in resumed.entries)
    assert json.loads(path.read_text())["complete"]


def test_heatmap_png(small_catalog, tmp_path):
    cat, _ = small_catalog
    out = write_heatmap(cat, tmp_path / "h.png")
    assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_threshold_is_validated(host):
    from tvm_ttile.errors import TTileError

    with pytest.raises(TTileError, match="threshold"):
        cat_mod.build_catalog(host, "matmul", threshold=1.5, candidates=[])
    with pytest.raises(TTileError, match="unknown operator"):
        cat_mod.build_catalog(host, "pool")


def test_cli_microkernels_json(host, monkeypatch, capsys):
    monkeypatch.setattr(family, "candidates", lambda op, isa, red, precision="fp32": few(host, op))
    assert cli.main(["microkernels", "--op", "conv2d", "--json", "--threshold", "0.5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["op"] == "conv2d" and out["threshold"] == 0.5
    for e in out["kept"]:
        assert set(e) >= {"text", "name", "unroll", "gflops", "percent_of_peak"}
        assert e["percent_of_peak"] >= 50
    assert isinstance(out["classes"], list) and "coverage" in out
    assert open(out["heatmap"], "rb").read(4) == b"\x89PNG"
    assert cli.main(["microkernels", "--op", "conv2d"]) == 0  # the text report, from the cache
    assert "conv2d microkernels" in capsys.readouterr().out


def test_cli_microkernels_every_op_by_default(host, monkeypatch, capsys):
    # the command's default (--op all) reports every family
    from tvm_ttile.microkernels.spec import FAMILIES

    monkeypatch.setattr(family, "candidates", lambda op, isa, red, precision="fp32": few(host, op))
    assert cli.main(["microkernels", "--json", "--threshold", "0.5"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == set(FAMILIES)


def test_cli_peak_and_errors(capsys):
    assert cli.main(["peak", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["peak_gflops"] > 0
    assert cli.main(["peak", "--target", "llvm -mcpu=haswell"]) == 2
    assert "JSON dict" in capsys.readouterr().err
