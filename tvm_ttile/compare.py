"""`tvm-ttile compare`: every layer x system x seed, side by side in one run, resumable.

Records the machine, measured peak, threads, versions and measurement settings with the results, and
writes convergence curves (best GFLOPS against trials and against tuning seconds, every seed drawn), a
% of peak table per layer and system, and the ratios between systems.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import statistics
import sys
import time

from .baselines import (LIBRARY_SYSTEMS, SYSTEMS, TUNERS, check_strategy_options, handles, retime, run_system,
                        work_dir_for)
from .errors import TTileError
from .measure import MeasureSettings
from .samplers import options_text
from .evaluation.stats import geomean

DEFAULT_SYSTEMS = ("tvm_ttile", "metaschedule", "template-xgb", "template-random", "onednn", "onnxruntime", "numpy")
SETTINGS = MeasureSettings(number=1, repeat=5, min_repeat_ms=10)


def compare(layers, systems=DEFAULT_SYSTEMS, budget=200, ttile_budget=None, seeds=1, out_dir="compare",
            threads=1, settings: MeasureSettings = SETTINGS,
            progress=True, command: str = "", baseline_seeds=None, retime_rounds=3, prepack=False,
            sampler_options: dict | None = None, strategy_options: dict | None = None) -> dict:
    """Tune every layer (a layer's name, or a Conv2d / Matmul with a name, e.g. from operators.load_shapes)
    with every system (tvm_ttile: `seeds` seeds of `ttile_budget` trials; the TVM
    baselines: `baseline_seeds` seeds of `budget` trials), then time every best side by side. With
    `prepack` the layers' weights are constants (operators._prim_func) for every TVM tuner but AutoMCL.
    `sampler_options` go to tvm_ttile's sampler (its work directories are named after them, so that a resumed
    comparison never mixes two samplers' records). `strategy_options`: system name -> the options of its search
    strategy (resolve_strategy_options; the system's work directories are named after them too)."""
    from . import cpu as cpu_mod
    from .operators import get_layer, kind_of

    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        raise TTileError(f"unknown system(s) {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    strategy_options = dict(strategy_options or {})
    for system, options in strategy_options.items():
        if system not in systems:
            raise TTileError(f"strategy options for {system}, which is not among the systems ({', '.join(systems)})")
        check_strategy_options(system, options)
    ops = [get_layer(layer) if isinstance(layer, str) else layer for layer in layers]
    names = [op.name for op in ops]
    if not all(names) or len(set(names)) != len(names):
        raise TTileError(f"every layer needs a name of its own (they name the work dirs), got {names}")
    for op in ops:
        if not any(handles(s, op) for s in systems):
            takes = "; ".join(f"{s} takes {SYSTEMS[s].takes()}" for s in systems)
            raise TTileError(f"none of the systems handles {op.name}, a {type(op).__name__} ({takes})")
    for system in systems:  # said now, not only in compare.md at the end of a long run
        why = SYSTEMS[system].missing()
        if why:
            print(f"warning: {why}: no {system} figures in this comparison", file=sys.stderr)
    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(threads)
    # The peak at this thread count, measured in this run (the cached one is left alone): every % in the report
    # is of this one figure, or of the peak of a layer's precision (int8: its dot-product instruction's).
    precisions = sorted({op.precision for op in ops}, key=lambda p: p != "fp32")
    peaks = {p: cpu_mod.measure_peak(cpu, threads=threads, precision=p)["peak_gflops"] for p in precisions}
    peak = peaks.get("fp32", peaks[precisions[0]])
    os.makedirs(out_dir, exist_ok=True)
    baseline_seeds = seeds if baseline_seeds is None else baseline_seeds
    data = {"machine": dict(cpu.describe(), platform=platform.platform()), "peak_gflops": peak, "peak_threads": threads, "threads": threads,
            "budget": budget, "ttile_budget": ttile_budget or budget, "seeds": seeds,
            "baseline_seeds": baseline_seeds, "measure": settings.describe(), "retime_rounds": retime_rounds,
            "prepack": prepack, "sampler_options": dict(sampler_options or {}),
            "strategy_options": strategy_options, "versions": library_versions(),
            "date": time.strftime("%Y-%m-%d %H:%M"), "command": command,
            "peaks_by_precision": peaks, "results": {}, "bounds": {}}
    hier = None
    if threads == 1:  # the bandwidths are measured at one thread (costmodel.roofline)
        from .costmodel.hierarchy import hierarchy

        hier = hierarchy(cpu)
        data["hierarchy"] = {level: round(v["bandwidth_gbs"], 1) for level, v in hier["levels"].items()}
    for op in ops:
        layer = op.name
        if "prepack" in {f.name for f in dataclasses.fields(op)}:  # (a quantized operator's weights come packed)
            op = dataclasses.replace(op, prepack=prepack)
        data.setdefault("shapes", {})[layer] = {"op": kind_of(op),
                                                **{k: v for k, v in dataclasses.asdict(op).items()
                                                   if k not in ("name", "dtype", "prepack")}}
        if hier is not None and op.precision == "fp32":  # (the roofline is fp32's)
            from .costmodel.roofline import bound

            data["bounds"][layer] = bound(op, cpu, peak, hier)
        timed = []  # (system, run index, work_dir or None) to time again side by side
        for system in systems:
            if not handles(system, op):
                continue  # e.g. numpy is the matmul reference; oneDNN and ONNX Runtime the conv2d ones
            if not SYSTEMS[system].tunes:
                try:
                    res = run_system(system, op, cpu, threads=threads)
                except TTileError as e:
                    data["results"].setdefault(layer, {})[system] = {"error": str(e)}
                    continue
                data["results"].setdefault(layer, {})[system] = [res.to_json()]
                timed.append((system, 0, None))
                continue
            runs = []
            ttile = SYSTEMS[system].ours  # tvm_ttile's systems: --ttile-budget, --seeds, the sampler's options
            for seed in range(seeds if ttile else baseline_seeds):
                name = SYSTEMS[system].work_name(layer, prepack)
                if ttile and sampler_options:
                    name += "-" + options_text(sampler_options, sep="-")
                if strategy_options.get(system):
                    name += "-" + options_text(strategy_options[system], sep="-")
                work = work_dir_for(os.path.join(out_dir, "work"), system, name, seed, cpu.isa.name, threads)
                try:
                    res = run_system(system, op, cpu, trials=(ttile_budget or budget) if ttile else budget,
                                     seed=seed, work_dir=work, threads=threads, settings=settings, progress=progress,
                                     sampler_options=sampler_options if ttile else None,
                                     strategy_options=strategy_options.get(system))
                except TTileError as e:  # e.g. no valid candidate: reported in the results, the others go on
                    if ttile:
                        raise
                    print(f"warning: {system} on {layer}: {e}", file=sys.stderr)
                    runs = {"error": str(e)}
                    timed = [t for t in timed if t[0] != system]
                    break
                runs.append(res.to_json())
                timed.append((system, seed, work))
            data["results"].setdefault(layer, {})[system] = runs
        if retime_rounds:
            secs = retime([(s, w) for s, _, w in timed], op, cpu, threads, retime_rounds, settings)
            for (system, i, _), t in zip(timed, secs):
                data["results"][layer][system][i]["retimed_gflops"] = op.flops / t / 1e9
        _write(data, out_dir)  # after every layer: an interrupted comparison keeps what it measured
    return data


def resolve_strategy_options(systems, options: dict) -> dict:
    """Command-line strategy options -> system name -> options. A "SYSTEM:NAME" key is that system's option; a
    plain "NAME" goes to every chosen system whose search has it (e.g. rho to gbfs and tvm_ttile-gbfs), and to
    none is an error."""
    out: dict = {}
    for key, value in options.items():
        system, sep, name = key.rpartition(":")
        if sep:
            if system not in systems:
                raise TTileError(f"--strategy-option {key}: {system} is not among the systems ({', '.join(systems)})")
            targets = [system]
        else:
            targets = [s for s in systems if s in SYSTEMS and name in SYSTEMS[s].strategy_options()]
            if not targets:
                raise TTileError(f"--strategy-option {name}: no chosen system's search has it (systems with "
                                 f"strategy options: {', '.join(n for n, s in SYSTEMS.items() if s.strategy_options())})")
        for s in targets:
            out.setdefault(s, {})[name] = value
    return out


def render(out_dir) -> dict:
    """Rewrite compare.md and convergence.png from out_dir/compare.json (no measurement)."""
    with open(os.path.join(out_dir, "compare.json")) as f:
        data = json.load(f)
    _write(data, out_dir)
    return data


def library_versions():
    import numpy
    import tvm

    from . import __version__

    out = {"tvm": tvm.__version__, "tvm_ttile": __version__, "numpy": numpy.__version__}
    for mod in ("torch", "onnxruntime", "xgboost"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = None
    return out


def _peak(data, layer: str | None = None) -> float:
    """The peak every % of this comparison is of: measured at its thread count (files from before the
    thread-count peak hold the 1-thread peak, scaled here as they were then); a `layer` of another precision
    than fp32 (int8), the peak of that precision measured in the run."""
    precision = data.get("shapes", {}).get(layer, {}).get("precision", "fp32")
    if precision != "fp32":
        return data["peaks_by_precision"][precision]
    return data["peak_gflops"] if "peak_threads" in data else data["peak_gflops"] * data["threads"]


def _gflops(run) -> float:
    return run.get("retimed_gflops") or run["gflops"]


def summary(data) -> dict:
    """Per layer and system: median over seeds of the best GFLOPS (timed again side by side when the run
    did so), % of peak, tuning seconds, and trials to reach the final best."""
    out = {}
    for layer, systems in data["results"].items():
        for system, runs in systems.items():
            if isinstance(runs, dict):
                continue
            g = statistics.median(_gflops(r) for r in runs)
            out.setdefault(layer, {})[system] = {
                "gflops": g, "percent": 100 * g / _peak(data, layer),
                "tuning_gflops": statistics.median(r["gflops"] for r in runs),
                "seconds": statistics.median(r["seconds"] for r in runs), "seeds": len(runs),
                "verified": all(r["verified"] for r in runs), "trials": runs[0]["trials"]}
    return out


def trials_to_reach(curve, target) -> int | None:
    """First trial whose best-so-far reaches `target` GFLOPS (None: never within the curve)."""
    return next((trial for trial, _, best in curve if best >= target), None)


def headline(data, baseline="metaschedule", tolerance=0.05) -> dict:
    """The issue's questions: tvm_ttile vs `baseline` (geometric mean of the GFLOPS ratio; trials tvm_ttile
    needs to reach the baseline's best, exactly and within `tolerance`, against the trials the baseline
    needed), and the layers where tvm_ttile is at least as fast as the faster library."""
    summ, rows = summary(data), []
    for layer, res in data["results"].items():
        t, b = res.get("tvm_ttile"), res.get(baseline)
        if not isinstance(t, list) or not isinstance(b, list):
            continue
        row = {"layer": layer, "ratio": summ[layer]["tvm_ttile"]["gflops"] / summ[layer][baseline]["gflops"]}
        # The baseline's best as measured while tuning: the top of its curve (its result's GFLOPS are the
        # confirmed re-timing, confirm.py, which may sit below any single tuning-time timing).
        tops = [r["curve"][-1][2] if r["curve"] else r["gflops"] for r in b]
        goal = statistics.median(tops)
        row["baseline_trials_to_best"] = statistics.median(trials_to_reach(r["curve"], top) or 0
                                                           for r, top in zip(b, tops))
        for key, frac in (("ttile_trials_to_reach", 1.0), ("ttile_trials_within", 1 - tolerance)):
            reach = [trials_to_reach(r["curve"], frac * goal) for r in t]
            med = statistics.median(math.inf if v is None else v for v in reach)  # a seed that never got there: inf
            row[key] = None if med == math.inf else med
            row[key + "_seeds"] = f"{sum(v is not None for v in reach)}/{len(reach)}"
        libs = [summ[layer][s]["gflops"] for s in LIBRARY_SYSTEMS if s in summ[layer]]
        row["beats_libraries"] = (summ[layer]["tvm_ttile"]["gflops"] >= max(libs)) if libs else None
        rows.append(row)
    ratios = [r["ratio"] for r in rows]
    geo = geomean(ratios) if ratios else None
    return {"baseline": baseline, "tolerance": tolerance, "geomean_ratio": geo, "rows": rows,
            "beats_libraries": sum(1 for r in rows if r["beats_libraries"]),
            "with_libraries": sum(1 for r in rows if r["beats_libraries"] is not None)}


def against_libraries(data) -> dict:
    """tvm_ttile against the fastest library on each layer (GFLOPS ratio, both timed again side by side):
    per layer the library and the ratio, their geometric mean, and the layers under 0.9x and 0.95x."""
    summ, rows = summary(data), []
    for layer, v in summ.items():
        libs = {s: v[s]["gflops"] for s in LIBRARY_SYSTEMS if s in v}
        if "tvm_ttile" not in v or not libs:
            continue
        best = max(libs, key=libs.get)
        rows.append({"layer": layer, "library": best, "ratio": v["tvm_ttile"]["gflops"] / libs[best]})
    ratios = [r["ratio"] for r in rows]
    return {"rows": rows, "geomean": geomean(ratios) if ratios else None,
            "under_0.95": [r["layer"] for r in rows if r["ratio"] < 0.95],
            "under_0.9": [r["layer"] for r in rows if r["ratio"] < 0.9]}


def _bound_lines(data) -> list:
    """The layers bound by moving their operands rather than by FMAs: each system's % of that bound."""
    bounds = {layer: b for layer, b in data.get("bounds", {}).items() if b["limit"] != "FMA peak"}
    summ = summary(data)
    rows = [(layer, b) for layer, b in bounds.items() if layer in summ]
    if not rows:
        return []
    systems = sorted({s for layer, _ in rows for s in summ[layer]})
    lines = ["", "Layers bound by moving their operands (once, at the measured bandwidth of the cache level that "
             f"holds them all; bandwidths {data.get('hierarchy')} GB/s, measured by a copy B = A + 1, so a kernel "
             "that mostly reads can pass 100%): % of that bound, which their % of peak understates:", "",
             "| layer | operands | bound | " + " | ".join(systems) + " |",
             "|---|---:|---|" + "---:|" * len(systems)]
    for layer, b in rows:
        limit_gflops = b["flops"] / b["seconds"] / 1e9
        cells = [f"{100 * summ[layer][s]['gflops'] / limit_gflops:.1f}" if s in summ[layer] else "-" for s in systems]
        lines.append(f"| {layer} | {b['bytes'] / 2**20:.2f} MiB | {b['limit']}, {1e6 * b['seconds']:.1f} us | "
                     + " | ".join(cells) + " |")
    return lines


def _failure_lines(data) -> list:
    """Systems asked for that gave no figure on some layers, with why (a library not installed, a refusal): the
    tables leave them out, so the file says so rather than comparing against fewer systems silently."""
    failed = {}
    for layer, systems in data["results"].items():
        for system, runs in systems.items():
            if isinstance(runs, dict) and "error" in runs:
                failed.setdefault((system, runs["error"]), []).append(layer)
    if not failed:
        return []
    lines = ["", "Not measured:"]
    for (system, error), layers in sorted(failed.items()):
        where = "every layer" if len(layers) == len(data["results"]) else ", ".join(layers)
        lines.append(f"- {system} on {where}: {error}")
    return lines


def _library_lines(data) -> list:
    a = against_libraries(data)
    if not a["rows"]:
        return []
    lines = ["", f"tvm_ttile against the fastest library per layer (GFLOPS ratio, timed side by side): geometric "
             f"mean **{a['geomean']:.3f}** over {len(a['rows'])} layers; under 0.95x on {len(a['under_0.95'])} "
             f"({', '.join(a['under_0.95']) or 'none'}), under 0.9x on {len(a['under_0.9'])}. "
             "Plot: vs_best_library.png.", "", "| layer | fastest library | tvm_ttile / it |", "|---|---|---:|"]
    lines += [f"| {r['layer']} | {r['library']} | {r['ratio']:.2f} |" for r in a["rows"]]
    return lines


def _plot_against_libraries(data, out_dir, plt) -> None:
    a = against_libraries(data)
    if not a["rows"]:
        return
    fig, ax = plt.subplots(figsize=(max(6, 0.3 * len(a["rows"]) + 2), 4))
    ratios = [r["ratio"] for r in a["rows"]]
    ax.bar(range(len(ratios)), ratios, color=["tab:green" if x >= 0.95 else "tab:orange" if x >= 0.9 else "tab:red"
                                              for x in ratios])
    for y, style in ((1.0, "-"), (0.95, "--"), (0.9, ":")):
        ax.axhline(y, color="black", lw=0.8, ls=style)
    ax.set_xticks(range(len(ratios)))
    ax.set_xticklabels([r["layer"] for r in a["rows"]], rotation=90, fontsize=7)
    ax.set_ylabel("tvm_ttile / fastest library")
    ax.set_title(f"{data['threads']} thread(s), {data['machine']['cpu']}: geometric mean {a['geomean']:.2f}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "vs_best_library.png"), dpi=100)
    plt.close(fig)


def _headline_lines(data) -> list:
    h = headline(data)
    if not h["rows"]:
        return []
    fmt = lambda v: "not reached" if v is None else f"{v:.0f}"  # noqa: E731
    lines = ["", f"tvm_ttile ({data['ttile_budget']} trials) against {h['baseline']} ({data['budget']} trials): "
             f"geometric mean of the GFLOPS ratio **{h['geomean_ratio']:.3f}** over {len(h['rows'])} layers; "
             f"at least as fast as the fastest library on **{h['beats_libraries']} of "
             f"{h['with_libraries']}** layers.", "",
             f"Trials to reach {h['baseline']}'s best (as measured while tuning, so at different moments: single "
             "timings vary by 4-8% here; medians over seeds, a seed that never got there counting as infinite; "
             "in brackets the seeds that got there):", "",
             f"| layer | {h['baseline']} to its best | tvm_ttile to reach it | tvm_ttile to within "
             f"{100 * h['tolerance']:.0f}% |", "|---|---:|---:|---:|"]
    for r in h["rows"]:
        lines.append(f"| {r['layer']} | {fmt(r['baseline_trials_to_best'])} | {fmt(r['ttile_trials_to_reach'])} "
                     f"({r['ttile_trials_to_reach_seeds']} seeds) | {fmt(r['ttile_trials_within'])} "
                     f"({r['ttile_trials_within_seeds']} seeds) |")
    return lines


def _write(data, out_dir):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(data, f, indent=1)
    summ = summary(data)
    systems = sorted({s for v in summ.values() for s in v})
    lines = [f"# Comparison, {data['threads']} thread(s), {data['machine']['cpu']} ({data['machine']['isa']})", "",
             f"Command: `{data.get('command', '')}`", "",
             f"Peak {_peak(data):.1f} GFLOPS at {data['threads']} thread(s) (measured in this run"
             + "".join(f"; {p} {v:.1f} GOPS" for p, v in data.get("peaks_by_precision", {}).items() if p != "fp32")
             + f", each layer's % of its precision's); budget {data['budget']} trials "
             f"(tvm_ttile {data['ttile_budget']}); seeds: tvm_ttile {data['seeds']}, TVM baselines "
             f"{data.get('baseline_seeds', data['seeds'])}; medians over seeds; measurement {data['measure']}; "
             f"versions {data['versions']}; {data['date']}.", "",
             *(["Weights prepacked (--prepack): constants, as in a network; the TVM tuners' kernels read them "
                "padded to whole vectors and packed once at build time, untimed; ONNX Runtime and oneDNN hold them "
                "as constants in their own layouts; numpy and AutoMCL's computes pack inside every call.", ""]
               if data.get("prepack") else []),
             *([f"tvm_ttile's sampler options: {options_text(data['sampler_options'])}.", ""]
               if data.get("sampler_options") else []),
             *(["Search strategy options: " + "; ".join(f"{k} {options_text(v)}" for k, v in
                                                       sorted(data["strategy_options"].items())) + ".", ""]
               if data.get("strategy_options") else []),
             f"% of peak of each system's best, timed again side by side after tuning ({data.get('retime_rounds', 0)} "
             "round-robin rounds, median); in brackets the tuning wall time:", "", "| layer | " + " | ".join(systems) + " |",
             "|---|" + "---:|" * len(systems)]
    for layer, v in summ.items():
        cells = []
        for s in systems:
            c = v.get(s)
            cells.append("-" if c is None else f"{c['percent']:.1f} ({c['seconds']:.0f} s)" + ("" if c["verified"] else " UNVERIFIED"))
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    if "tvm_ttile" in systems:
        lines += ["", "tvm_ttile / other (GFLOPS ratio):", "", "| layer | " + " | ".join(s for s in systems if s != "tvm_ttile") + " |",
                  "|---|" + "---:|" * (len(systems) - 1)]
        for layer, v in summ.items():
            t = v.get("tvm_ttile")
            cells = [f"{t['gflops'] / v[s]['gflops']:.2f}" if t and s in v else "-" for s in systems if s != "tvm_ttile"]
            lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    lines += _failure_lines(data)
    lines += _bound_lines(data)
    lines += _library_lines(data)
    lines += _headline_lines(data)
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

    _plot_against_libraries(data, out_dir, plt)
    layers = list(data["results"])
    fig, axes = plt.subplots(len(layers), 2, figsize=(11, 3.2 * len(layers)), squeeze=False)
    for row, layer in zip(axes, layers):
        for system, runs in data["results"][layer].items():
            color = SYSTEMS[system].color if system in SYSTEMS else "tab:gray"
            if isinstance(runs, dict) or system not in TUNERS:
                if not isinstance(runs, dict) and runs:
                    for ax in row:
                        ax.axhline(100 * _gflops(runs[0]) / _peak(data, layer), ls="--", lw=1, label=system,
                                   color=color)
                continue
            for i, r in enumerate(runs):
                curve = r["curve"]
                if not curve:
                    continue
                peak = _peak(data, layer)
                kw = dict(color=color, lw=1.2, label=system if i == 0 else None)
                row[0].step([c[0] for c in curve], [100 * c[2] / peak for c in curve], where="post", **kw)
                row[1].step([c[1] for c in curve], [100 * c[2] / peak for c in curve], where="post", **kw)
        row[0].set_title(f"{layer}: best so far vs trials", fontsize=9)
        row[1].set_title(f"{layer}: best so far vs tuning seconds", fontsize=9)
        row[1].set_xscale("log")
        for ax in row:
            ax.set_ylabel("% of peak")
            ax.set_ylim(0, 105)
        row[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "convergence.png"), dpi=100)
    plt.close(fig)
