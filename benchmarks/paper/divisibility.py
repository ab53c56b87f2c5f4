"""Divisible against non-divisible tile sizes (paper section 6.3, Fig. 13), side by side in one run.

    python benchmarks/paper/divisibility.py [--layers ...] [--samples 50]

Both spaces use the section 6.3 sampler with the same bias (levels per dimension in 1..4, single
microkernels): `levels(singles_only)` draws ordered factorizations (divisible), `nondivisible` draws tile
sizes between twice the microkernel and the problem size (P levels, the last tile of a loop partial).
1 thread; writes benchmarks/results/divisibility.{md,json,png}.
"""
import argparse
import json
import os
import time
from tvm_ttile.evaluation import command_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(HERE, "results")
LAYERS = "ResNet18-2,ResNet18-6,ResNet18-9,ResNet18-12,Yolo9000-4,Yolo9000-8,Yolo9000-13,Yolo9000-19"

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default=LAYERS)
    ap.add_argument("--samples", type=int, default=50)
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.measure import MeasureSettings
    from tvm_ttile.operators import get_layer
    from tvm_ttile.tune import tune

    host = cpu_mod.detect_host()
    peak = cpu_mod.peak(host, rebuild=True)["peak_gflops"]  # measured in this run
    settings = MeasureSettings(number=1, repeat=5, min_repeat_ms=10, timeout_sec=120)
    spaces = {"divisible": "levels", "non-divisible": "nondivisible"}
    data = {"machine": host.describe(), "peak_gflops": peak, "threads": 1, "samples": args.samples,
            "command": command_line(), "date": time.strftime("%Y-%m-%d"), "layers": {}}
    names = args.layers.split(",")
    for name in names:
        data["layers"][name] = {}
        for label, sampler in spaces.items():
            work = os.path.join(HERE, "work", f"{host.isa.name}-{sampler}-{name}")

            res = tune(get_layer(name), host, trials=args.samples, seed=0, work_dir=work, sampler=sampler,
                       settings=settings, sampler_options={"singles_only": True} if sampler == "levels" else {})
            data["layers"][name][label] = {"best_percent": res.percent_of_peak, "scheme": res.scheme,
                                           "verified": res.verified, "seconds": res.seconds,
                                           "percent": [100 * g / peak if g else 0.0 for _, g, _ in res.history]}
            print(f"{name} {label}: {res.percent_of_peak:.1f}% {res.scheme} verified={res.verified}", flush=True)

    fig, axes = plt.subplots(2, 4, figsize=(14, 6), sharex=True, sharey=True)
    for ax, name in zip(axes.flat, names):
        for label, color in (("divisible", "tab:green"), ("non-divisible", "tab:orange")):
            vals = sorted(data["layers"][name][label]["percent"])
            ax.step(vals, [1 - i / len(vals) for i in range(len(vals))], where="post", color=color, label=label)
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    fig.supxlabel("% of measured peak")
    fig.supylabel("fraction of samples at or above")
    fig.suptitle(f"Divisible vs non-divisible tile sizes, {args.samples} samples each, 1 thread (Fig. 13)")
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "divisibility.png"), dpi=100)

    def median(v):
        v = sorted(v)
        return v[len(v) // 2]

    md = ["# Divisible vs non-divisible tile sizes (paper section 6.3)", "", f"Command: `{data['command']}` "
          f"({data['date']}). Machine: {host.name}, {host.isa.name}, 1 thread, peak {peak:.1f} GFLOPS measured in "
          f"the same run. Both spaces: the section 6.3 sampler, single microkernels, {args.samples} samples, seed 0; "
          "every best kernel verified against numpy.", "", "![cdf](divisibility.png)", "",
          "| layer | divisible best % | non-divisible best % | divisible median % | non-divisible median % |",
          "|---|---:|---:|---:|---:|"]
    for name in names:
        d, n = data["layers"][name]["divisible"], data["layers"][name]["non-divisible"]
        md.append(f"| {name} | {d['best_percent']:.1f} | {n['best_percent']:.1f} | {median(d['percent']):.1f} | "
                  f"{median(n['percent']):.1f} |")
    with open(os.path.join(RESULTS, "divisibility.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(RESULTS, "divisibility.json"), "w") as f:
        json.dump(data, f, indent=1)
    print("\n".join(md))

if __name__ == "__main__":
    main()
