"""What does re-timing the fastest few records together (confirm.confirm_top) change? For each layer and tuner of a
finished `tvm-ttile compare --prepack` run: a copy of its seed-0 database is confirmed, then the record
MetaSchedule picked before and the one it picks after are timed in-process, side by side with numpy, round-robin.

    python benchmarks/tools/confirm_top.py COMPARE_OUT [--layers a,b] [--systems tvm_ttile,metaschedule] [--rounds 7]

Single thread. Writes benchmarks/results/confirm_top.md (and .json). The original databases are not touched.
"""
import argparse
import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import time

from compare_run import add_output_args, layers_of, render_only
from tvm_ttile.evaluation import command_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_out")
    ap.add_argument("--layers", help="default: every layer of the comparison")
    ap.add_argument("--systems", default="tvm_ttile,metaschedule")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=7, help="round-robin rounds of the side-by-side timing")
    add_output_args(ap, "confirm_top")
    args = ap.parse_args()
    if render_only(args, render):
        return

    import tvm

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.baselines import in_process_timers, work_dir_for
    from tvm_ttile.compare import SETTINGS
    from tvm_ttile.confirm import confirm_top
    from tvm_ttile.metaschedule import open_database
    from tvm_ttile.operators import get_layer

    layers = layers_of(args.compare_out, args.layers)
    cpu = cpu_mod.detect_host()
    peak = cpu_mod.peak(cpu)["peak_gflops"]
    settings = dataclasses.replace(SETTINGS, confirm_top=args.top)
    data = []
    for layer in layers:
        op = dataclasses.replace(get_layer(layer), prepack=True)
        mod = tvm.IRModule({"main": op.prim_func(cpu.lanes)})
        entries = []
        for system in args.systems.split(","):
            work = work_dir_for(os.path.join(args.compare_out, "work"), system, layer + "-prepack", 0, cpu.isa.name)
            if not os.path.isdir(work):
                print(f"skip {system} {layer}: no {work}")
                continue
            copy = tempfile.mkdtemp(prefix="confirm_top_")
            shutil.copytree(work, copy, dirs_exist_ok=True)
            before = tempfile.mkdtemp(prefix="confirm_top_before_")
            shutil.copytree(work, before, dirs_exist_ok=True)
            entry = confirm_top(open_database(copy), mod, cpu.target(1), settings)
            entries.append((system, before, copy, entry))
        timers = in_process_timers([(s, d) for s, b, c, _ in entries for d in (b, c)] + [("numpy", None)], op, cpu,
                                   1, settings)
        times = [[] for _ in timers]
        for _ in range(args.rounds):
            for i, t in enumerate(timers):
                times[i].append(op.flops / t() / 1e9)
        for k, (system, _, _, entry) in enumerate(entries):
            data.append({"layer": layer, "system": system, "before_gflops": times[2 * k],
                         "after_gflops": times[2 * k + 1], "numpy_gflops": times[-1], "confirmation": entry})
    report = {"command": command_line(), "date": time.strftime("%Y-%m-%d %H:%M"),
              "machine": cpu.describe(), "peak_gflops": peak, "top": args.top, "rounds": settings.confirm_rounds,
              "timing_rounds": args.rounds, "compare_out": args.compare_out, "rows": data}
    with open(args.out + ".json", "w") as f:
        json.dump(report, f, indent=1)
    render(report, args.out + ".md")
    print(f"wrote {args.out}.md")


def render(r, path):
    """The table from the JSON: medians of the side-by-side rounds, and their best (the noise here only ever
    slows a kernel down, and came in slow phases of seconds: the best round is the kernel undisturbed)."""
    peak, rows = r["peak_gflops"], []
    for d in r["rows"]:
        b, a, n = (statistics.median(d[k]) for k in ("before_gflops", "after_gflops", "numpy_gflops"))
        bb, ab, nb = (max(d[k]) for k in ("before_gflops", "after_gflops", "numpy_gflops"))
        picked = d["confirmation"]["picked_rank"] + 1 if d["confirmation"] else 1
        rows.append(f"| {d['layer']} | {d['system']} | {picked} | {b:.1f} ({100 * b / peak:.0f}%) | "
                    f"{a:.1f} ({100 * a / peak:.0f}%) | {a / b:.2f} | {n:.1f} | {a / n:.2f} | {bb:.1f} | {ab:.1f} | "
                    f"{ab / bb:.2f} | {nb:.1f} | {ab / nb:.2f} |")
    lines = ["# Re-timing the fastest records together before the build (confirm.confirm_top)", "",
             f"Command: `{r['command']}` ({r['date']}); {r['machine']}; peak {peak:.1f} GFLOPS (cached); 1 thread; "
             f"databases of `{r['compare_out']}` (seed 0, copies), top {r['top']} re-timed in {r['rounds']} rounds; "
             f"then the pick before and after, and numpy, timed in-process in {r['timing_rounds']} round-robin "
             "rounds: median GFLOPS (% of peak), and the best round.", "",
             "| layer | tuner | tuning rank of the new pick | before, median | after, median | after / before | numpy "
             "| after / numpy | before, best | after, best | after / before | numpy, best | after / numpy |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|", *rows, ""]
    for system in dict.fromkeys(d["system"] for d in r["rows"]):
        mine = [d for d in r["rows"] if d["system"] == system]
        for stat, f in (("medians", statistics.median), ("best rounds", max)):
            gain = [f(d["after_gflops"]) / f(d["before_gflops"]) for d in mine]
            wins = [sum(f(d[k]) >= f(d["numpy_gflops"]) for d in mine) for k in ("before_gflops", "after_gflops")]
            lines.append(f"- {system}, {stat}: after / before geometric mean {statistics.geometric_mean(gain):.3f} "
                         f"over {len(mine)} layers (min {min(gain):.2f}, max {max(gain):.2f}); at least numpy's "
                         f"speed on {wins[0]} layers before, {wins[1]} after.")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
