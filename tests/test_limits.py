"""Measured limits kept as capacities (limits.py, cpu.peak, catalog.rethreshold): a peak measured in a busy moment
is revised by the next measurement that finds more, and the catalogs follow without measuring again."""
import json
import logging

import pytest

from tvm_ttile import cpu, limits
from tvm_ttile.microkernels import catalog as catalog_mod
from tvm_ttile.microkernels import family
from tvm_ttile.microkernels.spec import Microkernel


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A cache of this test's own, and no peak measured yet in this process."""
    monkeypatch.setenv("TVM_TTILE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cpu, "_RUN_PEAKS", {})
    monkeypatch.setattr(catalog_mod, "_REPORTED", set())
    return tmp_path / "cache"


def fake_measurement(gflops, bandwidth=10.0):
    def measure(c, repeat=9, threads=1, bursts=1, precision="fp32"):
        return {"peak_gflops": gflops, "median_gflops": gflops, "gflops_per_repeat": [gflops] * repeat * bursts,
                "threads": threads, "measured_at": "now", "bandwidth_gbs": bandwidth}
    return measure


def test_merge_keeps_the_best_and_revises_only_above_the_noise():
    first, _ = limits.merge(None, {"peak_gflops": 60.0, "bandwidth_gbs": 10.0, "measured_at": "a"})
    same, revised = limits.merge(first, {"peak_gflops": 62.0, "bandwidth_gbs": 9.0, "measured_at": "b"})
    assert revised == [] and same["peak_gflops"] == 60.0 and same["measured_at"] == "a"
    assert same["last_run"]["peak_gflops"] == 62.0
    more, revised = limits.merge(same, {"peak_gflops": 120.0, "bandwidth_gbs": 9.0, "measured_at": "c"})
    assert [r["limit"] for r in revised] == ["peak_gflops"] and more["peak_gflops"] == 120.0
    assert more["measured_at"] == "c" and more["bandwidth_gbs"] == 10.0  # each limit on its own
    lower, revised = limits.merge(more, {"peak_gflops": 50.0, "bandwidth_gbs": 20.0})
    assert lower["peak_gflops"] == 120.0 and lower["bandwidth_gbs"] == 20.0
    assert [r["limit"] for r in lower["revisions"]] == ["peak_gflops", "bandwidth_gbs"]


def test_a_first_measurement_is_the_best_of_spaced_bursts(own_cache, host, monkeypatch):
    bursts = [{"peak_gflops": g, "gflops_per_repeat": [g, g - 1], "measured_at": str(g)} for g in (50.0, 110.0, 90.0)]
    best = limits.best_of(bursts)
    assert best["peak_gflops"] == 110.0 and best["measured_at"] == "110.0" and best["bursts"] == 3
    assert len(best["gflops_per_repeat"]) == 6
    asked = []
    monkeypatch.setattr(cpu, "measure_peak", lambda c, **kw: asked.append(kw) or fake_measurement(110.0)(c, **kw))
    assert cpu.peak(host)["peak_gflops"] == 110.0 and asked == [{"repeat": 3, "threads": 1, "bursts": 3, "precision": "fp32"}]
    assert json.loads(cpu.peak_path(host).read_text())["peak_gflops"] == 110.0
    cpu.peak(host)
    assert len(asked) == 1  # cached


def _write_catalog(host, peak, fractions):
    """A complete conv2d catalog of a few microkernels measured at these fractions of `peak`, as the cache keeps
    it: against a cached peak of `peak`."""
    red = family.measurement_red(host.isa, host.l1d_bytes)
    mks = [Microkernel.make("conv2d", host.isa.name, host.lanes, red, h=h, w=1, k=2) for h in (1, 4, 5, 6)]
    entries = [{"text": mk.text, "gflops": f * peak, "percent_of_peak": 100 * f, "measurements": [f * peak]}
               for mk, f in zip(mks, fractions)]
    cat = catalog_mod.Catalog("conv2d", host.describe(), peak, 0.8, red, entries, {}, 1.0, complete=True)
    path = catalog_mod.catalog_path(host, "conv2d")
    catalog_mod.write_json(path, cat.to_json())
    return mks


def test_a_halved_peak_is_revised_by_the_next_run_and_the_catalog_rethresholded_without_measuring(
        own_cache, host, monkeypatch, caplog):
    true_peak = 100.0
    cpu.peak_path(host).parent.mkdir(parents=True)
    cpu.write_json(cpu.peak_path(host), {"peak_gflops": true_peak / 2, "threads": 1, "measured_at": "busy"})
    # Measured against the halved peak: all four above 80% of it, two of them above 80% of the true one.
    mks = _write_catalog(host, true_peak / 2, [1.8, 1.7, 1.4, 1.0])
    monkeypatch.setattr(cpu, "measure_peak", fake_measurement(true_peak))
    monkeypatch.setattr(catalog_mod, "_measure", lambda *a, **k: pytest.fail("a microkernel was measured again"))
    with caplog.at_level(logging.WARNING):
        run = cpu.run_peak(host)
        assert run["peak_gflops"] == true_peak and cpu.peak(host)["peak_gflops"] == true_peak
        assert "revised from 50.0 to 100.0" in caplog.text
        cat = catalog_mod.build_catalog(host, "conv2d", candidates=mks)
    assert [mk.text for mk in cat.kept] == [mk.text for mk in mks[:2]]
    assert cat.peak_gflops == true_peak and max(e["percent_of_peak"] for e in cat.entries) == pytest.approx(90.0)
    assert "re-thresholded against the 100.0 GFLOPS fp32 peak (it was measured against 50.0): 2 microkernels kept " \
           "instead of 4, none measured again" in caplog.text
    stored = json.loads(catalog_mod.catalog_path(host, "conv2d").read_text())
    assert stored["peak_gflops"] == true_peak and len(stored["kept"]) == 2
    assert "busy while the peak was measured" not in caplog.text  # every entry is now under 105%


def test_a_measurement_below_the_cached_peak_leaves_it(own_cache, host, monkeypatch):
    cpu.peak_path(host).parent.mkdir(parents=True)
    cpu.write_json(cpu.peak_path(host), {"peak_gflops": 100.0, "threads": 1, "measured_at": "quiet"})
    monkeypatch.setattr(cpu, "measure_peak", fake_measurement(60.0))
    assert cpu.run_peak(host)["peak_gflops"] == 60.0  # this run's own figure, for its "% of peak"
    kept = cpu.peak(host)
    assert kept["peak_gflops"] == 100.0 and kept["measured_at"] == "quiet" and kept["last_run"]["peak_gflops"] == 60.0
    assert "this run measured 60.0" in limits.status(kept, cpu.run_peak(host))


def test_a_catalog_entry_above_its_peak_is_reported_in_one_line(own_cache, host, monkeypatch, caplog):
    cpu.peak_path(host).parent.mkdir(parents=True)
    cpu.write_json(cpu.peak_path(host), {"peak_gflops": 50.0, "threads": 1, "measured_at": "busy"})
    mks = _write_catalog(host, 50.0, [1.83, 1.0, 0.9, 0.5])
    monkeypatch.setattr(catalog_mod, "_measure", lambda *a, **k: pytest.fail("a microkernel was measured again"))
    with caplog.at_level(logging.WARNING):
        catalog_mod.build_catalog(host, "conv2d", candidates=mks)
        catalog_mod.build_catalog(host, "conv2d", candidates=mks)
    lines = [r.getMessage() for r in caplog.records if "busy while the peak was measured" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert "183% of the 50.0 GFLOPS peak" in lines[0] and "tvm-ttile peak --rebuild" in lines[0]


def test_a_peak_far_under_the_nominal_rate_names_the_cause_and_the_fix(own_cache, host, monkeypatch, caplog):
    assert limits.problems({"peak_gflops": 130.0, "nominal_gflops": 134.4}) == []
    (line,) = limits.problems({"peak_gflops": 64.0, "nominal_gflops": 134.4, "nominal_basis": "b"})
    assert "48% of the nominal 134.4" in line and "busy" in line and "--rebuild" in line
    monkeypatch.setattr(cpu, "host_nominal", lambda c, t: {"nominal_gflops": 200.0, "nominal_basis": "test"})
    monkeypatch.setattr(limits, "BURST_GAP_SECONDS", 0.0)
    monkeypatch.setattr(cpu, "measure_peak", fake_measurement(64.0))
    with caplog.at_level(logging.WARNING):
        cpu.peak(host)
    assert "32% of the nominal 200.0" in caplog.text


def test_nominal_rates_are_known_for_the_cores_seen_and_unknown_otherwise():
    assert limits.nominal("AMD", 25, 17, "avx512", 3700.0, 1)["nominal_gflops"] == pytest.approx(118.4)
    assert limits.nominal("Intel", 6, 207, "avx512", 2100.0, 2)["nominal_gflops"] == pytest.approx(268.8)
    assert limits.nominal("ARM", None, None, "neon", 2000.0, 1)["nominal_gflops"] is None


def test_a_damaged_peak_file_is_reported_and_measured_again(own_cache, host, monkeypatch, caplog):
    cpu.peak_path(host).parent.mkdir(parents=True)
    cpu.peak_path(host).write_text('{"peak_gflops": 1')
    monkeypatch.setattr(limits, "BURST_GAP_SECONDS", 0.0)
    monkeypatch.setattr(cpu, "measure_peak", fake_measurement(90.0))
    with caplog.at_level(logging.WARNING):
        assert cpu.peak(host)["peak_gflops"] == 90.0
    assert "is damaged: the peak is measured again" in caplog.text
