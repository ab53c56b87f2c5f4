"""Does the time ranker's L1 set-conflict term rank better? Offline, on `ranking_eval.py`'s ground truth (200 random
schemes measured per layer) with its fold models: the time ranker and the committee without the term
(`l1_conflicts=false`) and with it (each scheme's predicted time x analytic.l1_conflict_slowdown: max(1, P / (2 W)),
P the most input pixels one microkernel call reads per reduction step in one L1 set, W the L1's ways). The
threshold 2 W and the linear growth come from `l1_conflicts.py`'s channel sweep on Yolo9000-18's shape
(results/ranking_xeon/committee8/l1_conflicts_channels.md): that layer is not a clean test. `--zero-trial-seeds N`: also the zero-trial pick (`tvm-ttile tune --trials 0`, a pool of
2000, the fold model) with seeds 0..N-1, with and without the term (`--strategy-option l1_conflicts=false`); picks
that differ are built, checked against numpy and timed side by side with the best of the 200, 5 rounds round-robin.

    python benchmarks/paper/l1_term_offline.py --eval DIR/<layer> ... --models RANKING_OUT/work --out FILE.md
        [--zero-trial-seeds 4] [--shapes FILE --other-model PATH]

A layer that is not a named one (its work dir's name) comes from --shapes (`tvm-ttile compare --shapes`' format);
one of no network the fold models know is ranked with --other-model.
"""
import argparse
import os
import sys


from ranking_eval import NETWORK_OF, order_metrics  # noqa: E402
from tvm_ttile.evaluation import spearman  # noqa: E402
from tvm_ttile.evaluation import command_line
from zero_trial_pools import timed_side_by_side  # noqa: E402

WAY_BYTES = 4096


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", nargs="+", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--zero-trial-seeds", type=int, default=0)
    ap.add_argument("--shapes", help="a shapes file holding the layers that are not named ones")
    ap.add_argument("--other-model", help="the model file for layers of no network in NETWORK_OF")
    args = ap.parse_args()
    import numpy as np

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.costmodel import CostContext
    from tvm_ttile.costmodel.analytic import l1_conflict_slowdown
    from tvm_ttile.costmodel.records import measured_layers
    from tvm_ttile.costmodel.rankers import CommitteeRanker, TimeRanker
    from tvm_ttile.operators import get_layer, load_shapes

    shapes = {op.name: op for op in load_shapes(args.shapes)} if args.shapes else {}

    cpu = cpu_mod.detect_host()
    ways = cpu.l1d_bytes // WAY_BYTES
    rows = []
    for d in args.eval:
        name = os.path.basename(os.path.normpath(d))
        fold = NETWORK_OF.get(name.split("-")[0])
        model = os.path.join(args.models, f"ranker_without_{fold}.json") if fold else args.other_model
        if not model:
            sys.exit(f"{name}: of no network the fold models know; give --other-model")
        ((_, problem, measured),) = measured_layers(d)
        ctx = CostContext.for_cpu(cpu, problem.op, 1)
        schemes, secs = [s for s, _ in measured], [t for _, t in measured]
        best = min(secs)
        row = {"layer": name, "slowed": sum(l1_conflict_slowdown(problem, s, ctx) > 1 for s in schemes)}
        for label, ranker in (("time", TimeRanker(ctx, l1_conflicts=False)),
                              ("time + L1", TimeRanker(ctx, l1_conflicts=True)),
                              ("committee", CommitteeRanker(ctx, model=model, online=False, l1_conflicts=False)),
                              ("committee + L1", CommitteeRanker(ctx, model=model, online=False))):
            costs = ranker.costs(problem, schemes)
            order = [secs[i] for i in np.argsort(costs, kind="stable")]
            row[label] = {**order_metrics(order, best),
                          "spearman": spearman(costs, secs) if label.startswith("time") else float("nan")}
        if args.zero_trial_seeds:
            op = shapes[name] if name in shapes else get_layer(name)
            row["zero_trial"] = zero_trial(op, model, measured, args.zero_trial_seeds, cpu)
        rows.append(row)
        print(name, {k: v for k, v in row.items() if k != "layer"}, flush=True)
    labels = ("time", "time + L1", "committee", "committee + L1")
    from tvm_ttile.evaluation import geomean as geo

    command = command_line()
    lines = [f"# An L1 set-conflict term in the predicted time, offline, {cpu.name} ({cpu.isa.name})", "",
             f"Command: `{command}` (no timing; L1 {cpu.l1d_bytes // 1024} KiB, {ways} ways of 4 KiB)", "",
             "Per layer, the 200 measured schemes ranked; top-1 / top-8: the best-ranked scheme / the best of the 8 "
             "best-ranked, as a share of the best of the 200; slowed: schemes the term slows.", "",
             "| layer | slowed | " + " | ".join(f"{l} top-1" for l in labels) + " | " +
             " | ".join(f"{l} top-8" for l in labels) + " |", "|---|---:|" + "---:|" * (2 * len(labels))]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['slowed']} | " + " | ".join(f"{r[l]['top1']:.2f}" for l in labels) +
                     " | " + " | ".join(f"{r[l]['top8']:.2f}" for l in labels) + " |")
    lines.append("| geomean | | " + " | ".join(f"{geo([r[l]['top1'] for r in rows]):.3f}" for l in labels) + " | " +
                 " | ".join(f"{geo([r[l]['top8'] for r in rows]):.3f}" for l in labels) + " |")
    lines += ["", "Spearman of the predicted time with the measured seconds, without / with the term: " + ", ".join(
        f"{r['layer']} {r['time']['spearman']:.2f} / {r['time + L1']['spearman']:.2f}" for r in rows)]
    if args.zero_trial_seeds:
        lines += ["", f"Zero-trial picks (pool 2000, seeds 0-{args.zero_trial_seeds - 1}), timed side by side, % of the "
                  "best of the 200 (geometric mean over the seeds; picks the term changed / seeds):", "",
                  "| layer | without the term | with it | changed |", "|---|---:|---:|---:|"]
        for r in rows:
            z = r["zero_trial"]
            lines.append(f"| {r['layer']} | {100 * geo(z['without']):.1f} | {100 * geo(z['with']):.1f} | "
                         f"{z['changed']}/{len(z['without'])} |")
        lines.append("| geomean | " + " | ".join(
            f"{100 * geo([x for r in rows for x in r['zero_trial'][k]]):.1f}" for k in ("without", "with")) + " | |")
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def zero_trial(layer, model, measured, seeds, cpu) -> dict:
    """{"without": [share of the best of 200 per seed], "with": [...], "changed": n, "picks": ...}."""
    import dataclasses

    from tvm_ttile.metaschedule import cpu_tensor_intrinsics_only
    from tvm_ttile.tune import pick_without_measuring

    cpu_tensor_intrinsics_only()
    op = dataclasses.replace(layer, prepack=True)
    picks = {variant: [pick_without_measuring(op, cpu, seed=seed, strategy_options={
        "model": model, "l1_conflicts": variant == "with"}).scheme for seed in range(seeds)]
        for variant in ("without", "with")}
    best = min(measured, key=lambda st: st[1])[0].text
    gflops, verified = timed_side_by_side(op, [best, *picks["without"], *picks["with"]], cpu)
    if not verified:
        raise SystemExit(f"{layer.name}: a pick disagrees with numpy")
    return {"without": [gflops[t] / gflops[best] for t in picks["without"]],
            "with": [gflops[t] / gflops[best] for t in picks["with"]],
            "changed": sum(a != b for a, b in zip(picks["without"], picks["with"])), "picks": picks}


if __name__ == "__main__":
    main()
