"""The G-BFS / N-A2C paper's experiment on this CPU: square GEMMs, best time found against the fraction of the
knob space visited and against tuning seconds, for every tuner, several seeds; then each run's best built,
verified against numpy (by run_system) and timed again side by side, round-robin.

    python benchmarks/paper/gemm_search.py --sizes 512 --seeds 0 1 2 --trials 64 \
        --out benchmarks/results/gemm_search_zen4/gemm512

Each (size, system, seed) run keeps its work dir under OUT/work/ and its result in OUT/runs/*.json: an interrupted
or split run resumes (finished runs are read back, a half-finished work dir goes on from its records). Candidates
are timed with number=1, repeat=3 (a bad GEMM tiling runs for seconds; the side-by-side timing uses the default
settings). Writes OUT/gemm_search.{md,json} and OUT/gemm<size>.png (the paper's Fig. 7: best cost against the
fraction visited and against tuning seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from tvm_ttile.evaluation import command_line

SYSTEMS = ["template-random", "template-xgb", "gbfs", "na2c", "metaschedule", "tvm_ttile", "tvm_ttile-gbfs"]
TEMPLATE_SYSTEMS = ("template-random", "template-xgb", "gbfs", "na2c")
# Systems registered here only: the walks from other starts than the paper's s0 (each extent in its outermost
# level), and the paper's own GEMM space (i, j in 4 levels, k in 2: templates.matmul_paper_template) searched at
# random, by XGBoost (MetaSchedule's evolutionary search, as AutoTVM's XGBTuner) and by the two walks.
VARIANTS = {"gbfs-8starts": ("template", "gbfs", {"starts": 8}),
            "na2c-random-start": ("template", "na2c", {"start": "random"}),
            "paper-random": ("paper", "replay-func", None), "paper-xgb": ("paper", "evolutionary", None),
            "paper-gbfs": ("paper", "gbfs", {}), "paper-na2c": ("paper", "na2c", {})}
CHECKPOINTS = (6, 16, 32, 64, 128, 256)  # trials at which the table reads each run's best so far
COLORS = {"template-random": "tab:gray", "template-xgb": "tab:purple", "gbfs": "tab:pink", "na2c": "tab:cyan",
          "metaschedule": "tab:blue", "tvm_ttile": "tab:green", "tvm_ttile-gbfs": "darkgreen",
          "gbfs-8starts": "deeppink", "na2c-random-start": "darkcyan", "paper-random": "silver",
          "paper-xgb": "violet", "paper-gbfs": "lightpink", "paper-na2c": "lightblue"}


def register_variants():
    from tvm.s_tir import meta_schedule as ms

    from tvm_ttile.baselines import SYSTEMS as registry
    from tvm_ttile.baselines import TVMPolicy
    from tvm_ttile.baselines.templates import matmul_paper_template
    from tvm_ttile.baselines.tvm_tuners import POLICIES, template_space
    from tvm_ttile.metaschedule.knob_search import KnobSearch

    def policy(space, search, options):
        def make(mod, seed, _options=None):
            sp = template_space(mod) if space == "template" else ms.space_generator.ScheduleFn(matmul_paper_template)
            if search == "evolutionary":
                return sp, "evolutionary", "xgb"
            if search == "replay-func":
                return sp, "replay-func", ms.cost_model.RandomModel()
            return sp, KnobSearch(search, seed, options), ms.cost_model.RandomModel()
        return make

    for name, (space, search, options) in VARIANTS.items():
        registry[name] = TVMPolicy(name, COLORS[name], ("Matmul",))
        POLICIES[name] = policy(space, search, options)


def space_size(system, op, lanes):
    """States of the knob space a template system searches (None: not a template's)."""
    import tvm

    from tvm_ttile.baselines.templates import matmul_paper_template, matmul_template
    from tvm_ttile.metaschedule.knob_search import knob_landscape

    if system in VARIANTS:
        template = matmul_paper_template if VARIANTS[system][0] == "paper" else matmul_template
    elif system in TEMPLATE_SYSTEMS:
        template = matmul_template
    else:
        return None
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": op.prim_func(lanes)}), seed=1)
    template(sch)
    return knob_landscape(sch.trace)[0].size()


def time_start(op, cpu):
    """The walks' start s0 (each extent in its outermost level) of the AutoTVM-style template, built as KnobSearch
    replays a state, checked against numpy and timed for one call: what every state near it costs to measure."""
    import tvm

    from tvm_ttile.baselines.templates import matmul_template
    from tvm_ttile.measure import build_module, timing_args
    from tvm_ttile.metaschedule.knob_search import knob_landscape, replay
    from tvm_ttile.tune import verify

    mod = tvm.IRModule({"main": op.prim_func(cpu.lanes)})
    sch = tvm.s_tir.Schedule(mod, seed=1)
    matmul_template(sch)
    land, insts = knob_landscape(sch.trace)
    s0 = replay(mod, sch.trace, insts, land.start())  # s0's unroll knob is 0: the postprocessors change nothing
    ok, err = verify(op, s0.mod, cpu.target(1))
    from tvm_ttile.timing import evaluator

    f = evaluator(build_module(s0.mod, cpu.target(1)), repeat=1, min_repeat_ms=0)
    secs = float(f(*timing_args(s0.mod)).results[0])
    return {"state": [list(v) if isinstance(v, tuple) else v for v in land.start()], "seconds": secs,
            "gflops": op.flops / secs / 1e9, "verified": bool(ok), "max_abs_error": float(err)}


def best_at(curve, trials):
    """Best GFLOPS within the first `trials` measurements (0 when none)."""
    got = [g for t, _, g in curve if t <= trials]
    return max(got) if got else 0.0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[512])
    p.add_argument("--systems", nargs="+", default=SYSTEMS, help=", ".join(SYSTEMS + list(VARIANTS)))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--rounds", type=int, default=5, help="side-by-side timing rounds of every run's best")
    p.add_argument("--out", default="benchmarks/results/gemm_search")
    p.add_argument("--no-retime", action="store_true", help="tables from the tuning measurements only")
    p.add_argument("--report-only", action="store_true", help="table and plots again from OUT/gemm_search.json")
    p.add_argument("--read-only", nargs="+", default=[], metavar="SYSTEM",
                   help="systems whose finished runs are read back but whose missing seeds are not tuned (e.g. the "
                        "walks from s0, too slow to measure at every seed)")
    p.add_argument("--time-start", action="store_true",
                   help="also time the walks' start s0 once per size (what measuring states near it costs)")
    args = p.parse_args(argv)
    if args.report_only:
        with open(os.path.join(args.out, "gemm_search.json")) as f:
            report = json.load(f)
        write_markdown(report, args, float(report["machine"].split("peak ")[1].split()[0]))
        return plot(report, args)

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
    report = {"command": command_line([sys.argv[0]] + (argv or sys.argv[1:])),
              "machine": f"{cpu.name} ({platform.processor() or platform.machine()}), 1 thread, "
                         f"peak {peak:.1f} GFLOPS measured", "settings": fast.describe(), "sizes": {}}
    for n in args.sizes:
        op = Matmul(n, n, n, name=f"gemm{n}")
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
                if system in args.read_only:
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
        entry = {"space": {s: space_size(s, op, cpu.lanes) for s in args.systems},
                 "runs": {f"{s}-seed{k}": r for (s, k), r in runs.items()}}
        if args.time_start:
            entry["start"] = time_start(op, cpu)
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
             f"Command: `{report['command']}`", "", f"Machine: {report['machine']}", "",
             "Candidates timed with number=1, repeat=3 while tuning; each run's best built, verified against numpy "
             f"and timed again side by side ({args.rounds} rounds, round-robin, default settings): the last columns.",
             ""]
    for n, entry in report["sizes"].items():
        cols = [c for c in CHECKPOINTS if c < args.trials] + [args.trials]
        lines += [f"## {n} x {n} x {n}", "",
                  "Best GFLOPS found after N trials (median over the runs of seeds " + ", ".join(map(str, args.seeds))
                  + "; seeds: how many ran); the "
                  "space a template system walks and the share of it visited; tuning seconds; each run's best timed "
                  "again side by side:", "",
                  "| system | seeds | " + " | ".join(f"{c} trials" for c in cols)
                  + " | space (states) | visited | tuning s | retimed GFLOPS (median of seeds) | % of peak | verified |",
                  "|---|---|" + "---|" * (len(cols) + 6)]
        for system in args.systems:
            runs = [(k, r) for k, r in entry["runs"].items() if k.rsplit("-seed", 1)[0] == system]
            if not runs:
                continue
            cells = [statistics.median(best_at(r["curve"], c) for _, r in runs) for c in cols]
            size = entry["space"].get(system)
            tune_s = statistics.median(r["seconds"] for _, r in runs)
            retimed = [entry.get("retimed_gflops", {}).get(k) for k, _ in runs]
            retimed = statistics.median(retimed) if all(retimed) else None
            lines.append(f"| {system} | {len(runs)} | " + " | ".join(f"{c:.1f}" for c in cells)
                         + (f" | {size} | {100 * args.trials / size:.3g}%" if size else " | - | -")
                         + f" | {tune_s:.0f} | "
                         + (f"{retimed:.1f} | {100 * retimed / peak:.0f}%" if retimed else "- | -")
                         + f" | {all(r['verified'] for _, r in runs)} |")
        if "start" in entry:
            st = entry["start"]
            lines += ["", f"The walks' start s0 `{st['state']}` alone: {st['seconds']:.2f} s per call = "
                          f"{st['gflops']:.2f} GFLOPS ({100 * st['gflops'] / peak:.2f}% of peak), verified "
                          f"{st['verified']}: each state measured near it costs about that, times the repeats."]
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
    for n, entry in report["sizes"].items():
        fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
        flops = 2.0 * int(n) ** 3
        for system in args.systems:
            runs = [r for k, r in entry["runs"].items() if k.rsplit("-seed", 1)[0] == system]
            if not runs:
                continue
            trials = range(1, args.trials + 1)
            ms = [[flops / best_at(r["curve"], t) / 1e6 if best_at(r["curve"], t) else float("nan") for t in trials]
                  for r in runs]
            med = [statistics.median(v) for v in zip(*ms)]
            size = entry["space"].get(system) or entry["space"].get("template-random") or 1
            frac = [100 * t / size for t in trials]
            a.plot(frac, med, label=system, color=COLORS.get(system))
            a.fill_between(frac, [min(v) for v in zip(*ms)], [max(v) for v in zip(*ms)], alpha=0.15,
                           color=COLORS.get(system))
            for r in runs:
                last = {}  # a batch's trials share one time stamp: its best stands for it
                for _, sec, g in r["curve"]:
                    last[sec] = g
                # A marker at each batch's end: a run measured in one batch (MetaSchedule's 64 trials per
                # iteration) has a single point and no step.
                b.step(sorted(last), [flops / last[sec] / 1e6 for sec in sorted(last)], where="post", alpha=0.6,
                       color=COLORS.get(system), marker=".", label=system if r is runs[0] else None)
        for ax, xl in ((a, "% of its knob space visited (tvm_ttile, MetaSchedule: of the template's)"),
                       (b, "tuning seconds")):
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
