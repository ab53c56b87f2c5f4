"""The G-BFS / N-A2C paper's experiment on this CPU: square GEMMs, best time found against the fraction of the
(template) space visited and against tuning seconds, for every tuner, several seeds, then each run's best built,
verified against numpy (by run_system) and timed again side by side, round-robin.

    python benchmarks/gemm_search.py --sizes 512 1024 --seeds 0 1 2 --trials 64 \
        --out benchmarks/results/gemm_search_zen4

Each (size, system, seed) run keeps its work dir under OUT/work/ and its result in OUT/runs/*.json: an interrupted
or split run resumes (finished runs are read back, a half-finished work dir goes on from its records). Candidates
are timed with number=1, repeat=3 (a bad GEMM tiling runs for seconds; the final side-by-side timing uses the
default settings). Writes OUT/gemm_search.{md,json} and OUT/gemm<size>.png (the paper's Fig. 7: best cost
against the fraction visited and against tuning seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

SYSTEMS = ["template-random", "template-xgb", "gbfs", "na2c", "metaschedule", "tvm_ttile", "tvm_ttile-gbfs"]
# The walks from other starts than the paper's s0 (each extent in its outermost level): measured as systems of
# their own, registered here only (--systems gbfs-8starts ...).
VARIANTS = {"gbfs-8starts": ("gbfs", {"starts": 8}), "na2c-random-start": ("na2c", {"start": "random"})}


def register_variants():
    from tvm.s_tir import meta_schedule as ms

    from tvm_ttile.baselines import SYSTEMS as registry
    from tvm_ttile.baselines import TVMPolicy
    from tvm_ttile.baselines.tvm_tuners import POLICIES, template_space
    from tvm_ttile.metaschedule.knob_search import KnobSearch

    for name, (search, options) in VARIANTS.items():
        registry[name] = TVMPolicy(name, "tab:olive", ("Conv2d", "Matmul"))
        POLICIES[name] = (lambda search, options: lambda mod, seed: (
            template_space(mod), KnobSearch(search, seed, options), ms.cost_model.RandomModel()))(search, options)
FRACTIONS = (0.0001, 0.001, 0.005, 0.01)


def template_space_size(op, lanes) -> int:
    """States of the AutoTVM-style matmul template's knobs (the space gbfs and na2c walk)."""
    import tvm

    from tvm_ttile.baselines.templates import matmul_template
    from tvm_ttile.metaschedule.knob_search import knob_landscape

    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": op.prim_func(lanes)}), seed=1)
    matmul_template(sch)
    return knob_landscape(sch.trace)[0].size()


def best_at(curve, trials):
    """Best GFLOPS within the first `trials` measurements (0 when none)."""
    got = [g for t, _, g in curve if t <= trials]
    return max(got) if got else 0.0


def seconds_to(curve, gflops):
    for _, s, g in curve:
        if g >= gflops:
            return s
    return None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    p.add_argument("--systems", nargs="+", default=SYSTEMS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5, help="side-by-side timing rounds of every run's best")
    p.add_argument("--out", default="benchmarks/results/gemm_search")
    p.add_argument("--no-retime", action="store_true", help="tables from the tuning measurements only")
    args = p.parse_args(argv)

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.baselines import retime, run_system
    from tvm_ttile.measure import MeasureSettings
    from tvm_ttile.operators import Matmul

    register_variants()
    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(1)
    peak = cpu_mod.peak(cpu, threads=1)["peak_gflops"]
    fast = MeasureSettings(number=1, repeat=3, min_repeat_ms=0, timeout_sec=20.0, confirm_top=0)
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    report = {"command": "python " + " ".join([sys.argv[0]] + (argv or sys.argv[1:])),
              "machine": f"{cpu.name} ({platform.processor() or platform.machine()}), 1 thread, "
                         f"peak {peak:.1f} GFLOPS measured", "settings": fast.describe(), "sizes": {}}
    for n in args.sizes:
        op = Matmul(n, n, n, name=f"gemm{n}")
        size = template_space_size(op, cpu.lanes)
        runs = {}
        for system in args.systems:
            for seed in args.seeds:
                name = f"{n}-{system}-seed{seed}"
                path = os.path.join(args.out, "runs", name + ".json")
                if os.path.exists(path):
                    with open(path) as f:
                        saved = json.load(f)
                    if saved["trials_asked"] == args.trials:
                        runs[(system, seed)] = saved
                        continue
                work = os.path.join(args.out, "work", name)
                start = time.time()
                res = run_system(system, op, cpu, trials=args.trials, seed=seed, work_dir=work, settings=fast,
                                 progress=False)
                saved = dict(res.to_json(), trials_asked=args.trials, work_dir=work, wall=time.time() - start)
                with open(path, "w") as f:
                    json.dump(saved, f)
                runs[(system, seed)] = saved
                print(f"{name}: {res.gflops:.1f} GFLOPS, {res.trials} trials, {res.seconds:.0f} s, verified "
                      f"{res.verified}", flush=True)
        entry = {"template_space": size, "runs": {f"{s}-seed{k}": r for (s, k), r in runs.items()}}
        if not args.no_retime:
            keys = sorted(runs)
            secs = retime([(s, runs[(s, k)]["work_dir"]) for s, k in keys], op, cpu, rounds=args.rounds)
            entry["retimed_gflops"] = {f"{s}-seed{k}": op.flops / t / 1e9 for (s, k), t in zip(keys, secs)}
        report["sizes"][str(n)] = entry
    with open(os.path.join(args.out, "gemm_search.json"), "w") as f:
        json.dump(report, f, indent=1)
    write_markdown(report, args, peak)
    plot(report, args)


def write_markdown(report, args, peak):
    lines = ["# G-BFS and N-A2C against the other tuners on square GEMMs (the paper's Fig. 7/8 on this CPU)", "",
             f"Command: `{report['command']}`", f"Machine: {report['machine']}",
             f"Candidates timed with number=1, repeat=3; each run's best built, verified against numpy and timed "
             f"again side by side ({args.rounds} rounds, round-robin, default settings): the last columns.", ""]
    for n, entry in report["sizes"].items():
        size = entry["template_space"]
        cols = [f for f in FRACTIONS if f * size >= 1]
        lines += [f"## {n} x {n} x {n}", "",
                  f"The template's knob space: {size} states (i in 3 levels, j and k in 2, 4 unroll depths); "
                  f"{args.trials} trials = {100 * args.trials / size:.2f}% of it. Best GFLOPS found (median over "
                  f"seeds {args.seeds}) after visiting a fraction of that space (= trials):", "",
                  "| system | " + " | ".join(f"{100 * f:g}% ({max(1, round(f * size))})" for f in cols)
                  + f" | all {args.trials} | tuning s | retimed GFLOPS (median of seeds) | % of peak | verified |",
                  "|---|" + "---|" * (len(cols) + 5)]
        for system in args.systems:
            runs = [(k, r) for k, r in entry["runs"].items() if k.rsplit("-seed", 1)[0] == system]
            if not runs:
                continue
            cells = [statistics.median(best_at(r["curve"], max(1, round(f * size))) for _, r in runs) for f in cols]
            final = statistics.median(best_at(r["curve"], args.trials) for _, r in runs)
            tune_s = statistics.median(r["seconds"] for _, r in runs)
            retimed = [entry.get("retimed_gflops", {}).get(k) for k, _ in runs]
            retimed = statistics.median(retimed) if all(retimed) else None
            lines.append(f"| {system} | " + " | ".join(f"{c:.1f}" for c in cells) + f" | {final:.1f} | {tune_s:.0f} | "
                         + (f"{retimed:.1f} | {100 * retimed / peak:.0f}%" if retimed else "- | -")
                         + f" | {all(r['verified'] for _, r in runs)} |")
        lines.append("")
    with open(os.path.join(args.out, "gemm_search.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def plot(report, args):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots")
        return
    colors = {"template-random": "tab:gray", "template-xgb": "tab:purple", "gbfs": "tab:pink", "na2c": "tab:cyan",
              "metaschedule": "tab:blue", "tvm_ttile": "tab:green", "tvm_ttile-gbfs": "darkgreen"}
    for n, entry in report["sizes"].items():
        fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
        flops = 2.0 * int(n) ** 3
        for system in args.systems:
            runs = [r for k, r in entry["runs"].items() if k.rsplit("-seed", 1)[0] == system]
            if not runs:
                continue
            trials = range(1, args.trials + 1)
            ms = [[flops / best_at(r["curve"], t) / 1e6 if best_at(r["curve"], t) else float("nan") for t in trials]
                  for r in runs]
            med = [statistics.median(v) for v in zip(*ms)]
            frac = [100 * t / entry["template_space"] for t in trials]
            a.plot(frac, med, label=system, color=colors.get(system))
            a.fill_between(frac, [min(v) for v in zip(*ms)], [max(v) for v in zip(*ms)], alpha=0.15,
                           color=colors.get(system))
            for r in runs:
                b.plot([s for _, s, _ in r["curve"]], [flops / g / 1e6 for _, _, g in r["curve"]], alpha=0.6,
                       color=colors.get(system), label=system if r is runs[0] else None)
        for ax, xl in ((a, "% of the template space visited"), (b, "tuning seconds")):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(xl)
            ax.set_ylabel("best time found (ms)")
            ax.grid(alpha=0.3)
        a.set_title(f"GEMM {n}^3, 1 thread: median of {len(args.seeds)} seeds (band: min-max)")
        b.set_title("each seed")
        b.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, f"gemm{n}.png"), dpi=110)


if __name__ == "__main__":
    main()
