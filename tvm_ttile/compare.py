"""`tvm-ttile compare`: every layer x system x seed, side by side in one run, resumable.

Records the machine, measured peak, threads, versions and measurement settings with the results, and
writes convergence curves (best GFLOPS against trials and against tuning seconds, every seed drawn), a
% of peak table per layer and system, and the ratios between systems.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time

from .baselines import LIBRARY_SYSTEMS, TUNERS, run_system, work_dir_for
from .errors import TTileError
from .measure import MeasureSettings

DEFAULT_SYSTEMS = ("tvm_ttile", "metaschedule", "template-xgb", "template-random", "onednn", "onnxruntime", "numpy")


def compare(layers, systems=DEFAULT_SYSTEMS, budget=200, ttile_budget=None, seeds=1, out_dir="compare",
            threads=1, settings: MeasureSettings = MeasureSettings(number=1, repeat=5, min_repeat_ms=10),
            progress=True, command: str = "") -> dict:
    from . import cpu as cpu_mod
    from .operators import Conv2d, get_layer

    cpu = cpu_mod.detect_host()
    peak = cpu_mod.peak(cpu, rebuild=True)["peak_gflops"]
    os.makedirs(out_dir, exist_ok=True)
    data = {"machine": dict(cpu.describe(), platform=platform.platform()), "peak_gflops": peak, "threads": threads,
            "budget": budget, "ttile_budget": ttile_budget or budget, "seeds": seeds, "measure": settings.describe(),
            "versions": _versions(), "date": time.strftime("%Y-%m-%d %H:%M"), "command": command, "results": {}}
    for layer in layers:
        op = get_layer(layer)
        for system in systems:
            if system in LIBRARY_SYSTEMS:
                conv = isinstance(op, Conv2d)
                if (system == "numpy") == conv:
                    continue  # numpy is the matmul reference; oneDNN and ONNX Runtime the conv2d ones
                try:
                    res = run_system(system, op, cpu, threads=threads)
                except TTileError as e:
                    data["results"].setdefault(layer, {})[system] = {"error": str(e)}
                    continue
                data["results"].setdefault(layer, {})[system] = [res.to_json()]
                continue
            if system not in TUNERS:
                raise TTileError(f"unknown system {system!r}; choose from {TUNERS + LIBRARY_SYSTEMS}")
            runs = []
            for seed in range(seeds):
                trials = (ttile_budget or budget) if system == "tvm_ttile" else budget
                work = work_dir_for(os.path.join(out_dir, "work"), system, layer, seed, cpu.isa.name)
                res = run_system(system, op, cpu, trials=trials, seed=seed, work_dir=work, threads=threads,
                                 settings=settings, progress=progress)
                runs.append(res.to_json())
            data["results"].setdefault(layer, {})[system] = runs
        _write(data, out_dir)  # after every layer: an interrupted comparison keeps what it measured
    return data


def _versions():
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


def summary(data) -> dict:
    """Per layer and system: median over seeds of the best GFLOPS, % of peak, tuning seconds."""
    out = {}
    for layer, systems in data["results"].items():
        for system, runs in systems.items():
            if isinstance(runs, dict):
                continue
            g = statistics.median(r["gflops"] for r in runs)
            out.setdefault(layer, {})[system] = {
                "gflops": g, "percent": 100 * g / (data["peak_gflops"] * data["threads"]),
                "seconds": statistics.median(r["seconds"] for r in runs),
                "verified": all(r["verified"] for r in runs), "trials": runs[0]["trials"]}
    return out


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
             f"Peak {data['peak_gflops']:.1f} GFLOPS (measured in this run); budget {data['budget']} trials "
             f"(tvm_ttile {data['ttile_budget']}); {data['seeds']} seed(s), medians over seeds; measurement "
             f"{data['measure']}; versions {data['versions']}; {data['date']}.", "",
             "% of peak (tuning seconds):", "", "| layer | " + " | ".join(systems) + " |",
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
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write("\n".join(lines) + "\n")

    layers = list(data["results"])
    fig, axes = plt.subplots(len(layers), 2, figsize=(11, 3.2 * len(layers)), squeeze=False)
    colors = dict(zip(TUNERS, ("tab:green", "tab:blue", "tab:purple", "tab:gray")))
    for row, layer in zip(axes, layers):
        for system, runs in data["results"][layer].items():
            if isinstance(runs, dict) or system not in TUNERS:
                if not isinstance(runs, dict) and runs:
                    for ax in row:
                        ax.axhline(runs[0]["percent_of_peak"], ls="--", lw=1, label=system,
                                   color="tab:orange" if system == "onednn" else "tab:red")
                continue
            for i, r in enumerate(runs):
                curve = r["curve"]
                if not curve:
                    continue
                peak = data["peak_gflops"] * data["threads"]
                kw = dict(color=colors[system], lw=1.2, label=system if i == 0 else None)
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
