"""Model zoo: torchvision architectures exported to ONNX, then for each the share of FLOPs in tvm_ttile's tasks,
`tvm-ttile tune-model` and every other system timed side by side (each in its own process), in one table and a plot.

    python benchmarks/zoo.py convnext_tiny vit_b_16 --out benchmarks/results/modern_networks_zen4
    python benchmarks/zoo.py shufflenet_v2_x1_0 --precision bf16 --libraries openvino,onnxruntime --out DIR

Models are torchvision's definitions with seeded random weights (benchmarks/tools/torchvision_onnx.py: needs torch
and torchvision, `pip install 'tvm-ttile[libs]' torchvision`; only the definitions are used), or a `transformers`
encoder stack (bert_base, bert_large: benchmarks/tools/transformers_onnx.py, `pip install transformers`). Per model
tune-model's report lands in OUT/<model>_<precision>_<T>thread.{md,json}; models and work dirs in OUT/work
(resumable: a rerun only builds and times again); OUT/zoo_<precision>_<T>thread.md holds the table of every model
reported in OUT at that precision and thread count, and zoo_*.png the plot.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools"))


def _export(model: str, work: str, tokens: int) -> str:
    import transformers_onnx
    import torchvision_onnx

    path = os.path.join(work, f"{model}.onnx")
    if not os.path.isfile(path):
        if model in transformers_onnx.ENCODERS:
            transformers_onnx.export(model, path, tokens)
        else:
            torchvision_onnx.export(model, path)
    return path


def _tune(path: str, name: str, args, work: str, share: dict) -> dict:
    cmd = ["tvm-ttile", "tune-model", path, "--precision", args.precision, "--threads", str(args.threads),
           "--trials-per-task", str(args.trials), "--other-trials", str(args.other_trials),
           "--work-dir", os.path.join(work, name)]
    if args.strategy:
        cmd += ["--strategy", args.strategy]
    if args.libraries:
        cmd += ["--libraries", args.libraries]
    if args.metaschedule_trials:
        cmd += ["--metaschedule-trials", args.metaschedule_trials]
    print("+", shlex.join(cmd), flush=True)
    code = subprocess.call(cmd)
    report = os.path.join(work, name, "report.json")
    if code:  # (a report left in the work dir is an earlier run's)
        sys.exit(f"zoo: tune-model on {path} failed (exit {code}); no report written")
    if not os.path.isfile(report):
        sys.exit(f"zoo: tune-model on {path} wrote no report")
    with open(report) as f:
        result = json.load(f)
    with open(os.path.join(work, name, "report.md")) as f:
        text = f.read()
    result["command"] = shlex.join(cmd)
    result["exit"] = code
    result["flop_share"] = {"gflop": share["gflop"], "tvm_ttile": share["tvm_ttile"], "tasks": share["tasks"]}
    with open(os.path.join(args.out, f"{name}.md"), "w") as f:
        f.write(f"Command: `{shlex.join(sys.argv)}`, i.e. `{shlex.join(cmd)}` (exit {code})\n\n{text}")
    with open(os.path.join(args.out, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def _table(rows: list, systems: list) -> str:
    head = "| model | GFLOP | tvm_ttile's share | " + " | ".join(f"{s} ms (IQR)" for s in systems)
    head += " | " + " | ".join(f"vs {s}" for s in systems[1:]) + " | outputs |"
    lines = [head, "|---|---:|---:|" + "---:|" * (2 * len(systems) - 1) + "---|"]
    for model, rep in rows:
        share = rep["flop_share"]
        lat = rep.get("latency") or {}
        cells = [f"{lat[s]['median_ms']:.2f} ({lat[s]['iqr_ms']:.2f})" if s in lat else "-" for s in systems]
        ours = lat.get("tvm_ttile", {}).get("median_ms")
        ratios = [f"{ours / lat[s]['median_ms']:.2f}x" if ours and s in lat else "-" for s in systems[1:]]
        verdict = "correct" if rep.get("correct") else "MISMATCH"
        lines.append(f"| {model} | {share['gflop']:.2f} | {100 * share['tvm_ttile']:.1f}% | " + " | ".join(cells)
                     + " | " + " | ".join(ratios) + f" | {verdict} ({rep.get('held_to', '')}) |")
    return "\n".join(lines) + "\n"


def _plot(rows: list, systems: list, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1.6 + 1.6 * len(rows), 3.2))
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        xs, ys = [], []
        for j, (_, rep) in enumerate(rows):
            lat = rep.get("latency") or {}
            if s in lat and "tvm_ttile" in lat:
                xs.append(j + i * width)
                ys.append(lat["tvm_ttile"]["median_ms"] / lat[s]["median_ms"])
        ax.bar(xs, ys, width, label=s)
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))], [m for m, _ in rows])
    ax.set_ylabel("tvm_ttile latency / system's")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+",
                   help="torchvision model names (convnext_tiny, vit_b_16, shufflenet_v2_x1_0, ...) or bert_base")
    p.add_argument("--out", required=True, help="results directory (work/ under it holds models and databases)")
    p.add_argument("--tokens", type=int, default=128, help="sequence length of a transformers encoder (bert_base)")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "int8"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--trials", type=int, default=50, help="tvm_ttile trials per conv2d/matmul task")
    p.add_argument("--other-trials", type=int, default=0, help="MetaSchedule evolutionary-search trials per other task (0: tvm_ttile's memory-bound schedules alone)")
    p.add_argument("--strategy", help="tune-model's --strategy (default: its own)")
    p.add_argument("--libraries", default="onnxruntime,openvino-fp32,openvino")
    p.add_argument("--metaschedule-trials", default="", help="also MetaSchedule's tune_relax ('same': as many trials)")
    args = p.parse_args(argv)
    from flop_shares import shares

    work = os.path.join(args.out, "work")
    os.makedirs(work, exist_ok=True)
    suffix = f"_{args.precision}_{args.threads}thread"
    for model in args.models:
        path = _export(model, work, args.tokens)
        _tune(path, f"{model}{suffix}", args, work, shares(path, work))
    # the table holds every model of this precision and thread count in OUT, earlier runs' too
    rows = []
    for name in sorted(os.listdir(args.out)):
        if name.endswith(f"{suffix}.json"):
            with open(os.path.join(args.out, name)) as f:
                rep = json.load(f)
            model = name[:-len(suffix) - 5]
            if "flop_share" not in rep and os.path.isfile(os.path.join(work, f"{model}.onnx")):
                rep["flop_share"] = shares(os.path.join(work, f"{model}.onnx"), work)  # a report from before
            if "flop_share" in rep:
                rows.append((model, rep))
    systems = ["tvm_ttile"] + [s for s in (["metaschedule"] if args.metaschedule_trials else [])
                               + args.libraries.split(",") if s]
    tag = f"zoo_{args.precision}_{args.threads}thread"
    machine = rows[-1][1].get("machine", {})
    text = (f"Command: `{shlex.join(sys.argv)}`\n\nMachine: {machine.get('cpu')} ({machine.get('isa')}), "
            f"{args.threads} thread(s), precision {args.precision}; each system in its own process, medians of "
            f"3 rounds x 5 repeats (per-model reports beside this file).\n\n" + _table(rows, systems))
    with open(os.path.join(args.out, f"{tag}.md"), "w") as f:
        f.write(text)
    _plot(rows, systems, os.path.join(args.out, f"{tag}.png"),
          f"{machine.get('cpu')}, {args.threads} thread(s), {args.precision}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
