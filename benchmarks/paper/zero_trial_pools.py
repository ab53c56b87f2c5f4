"""Does the zero-trial pick depend on the size of the pool it is the top of? Per layer of `ranking_eval.py`'s ground
truth (200 random schemes measured), the top-ranked scheme of fresh pools of each size, drawn with several seeds
(`tvm-ttile tune --trials 0 --strategy-option pool=N` with the layer's fold model: trained without its network),
then every distinct pick and the best of the 200 built, checked against numpy and timed side by side, 5 rounds
round-robin.

    python benchmarks/paper/zero_trial_pools.py --eval DIR/<layer> ... --models RANKING_OUT/work --pools 200 500 2000 \
        --seeds 3 --out benchmarks/results/R/zero_trial_pools.md

--models: a directory holding ranking_eval.py's fold models (ranker_without_<network>.json). No other heavy job may
run meanwhile.
"""
import argparse
import dataclasses
import json
import os
import statistics
import sys
import time


from ranking_eval import NETWORK_OF  # noqa: E402
from tvm_ttile.evaluation import command_line

ROUNDS = 5


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval", nargs="+", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--pools", nargs="+", type=int, default=[200, 500, 2000])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.costmodel.records import measured_layers
    from tvm_ttile.metaschedule import cpu_tensor_intrinsics_only
    from tvm_ttile.operators import get_layer
    from tvm_ttile.tune import pick_without_measuring

    cpu = cpu_mod.detect_host()
    cpu_tensor_intrinsics_only()
    rows = []
    for d in args.eval:
        name = os.path.basename(os.path.normpath(d))
        model = os.path.join(args.models, f"ranker_without_{NETWORK_OF[name.split('-')[0]]}.json")
        if not os.path.exists(model):
            sys.exit(f"{model}: no fold model for {name} (run ranking_eval.py first)")
        ((_, _, measured),) = measured_layers(d)
        best = min(measured, key=lambda st: st[1])[0].text
        op = dataclasses.replace(get_layer(name), prepack=True)
        picks = {}  # (pool, seed) -> scheme text
        start = time.time()
        for pool in args.pools:
            for seed in range(args.seeds):
                picks[(pool, seed)] = pick_without_measuring(op, cpu, seed=seed, strategy_options={
                    "model": model, "pool": pool}).scheme
        gflops, verified = timed_side_by_side(op, [best, *picks.values()], cpu)
        share = {f"{pool}/{seed}": gflops[t] / gflops[best] for (pool, seed), t in picks.items()}
        rows.append({"layer": name, "best_of_200": best, "picks": {f"{p}/{s}": t for (p, s), t in picks.items()},
                     "share_of_best": share, "verified": verified, "seconds": round(time.time() - start)})
        print(name, {k: round(v, 3) for k, v in share.items()}, flush=True)
    write(args, rows, cpu)


def timed_side_by_side(op, texts, cpu, rounds: int = ROUNDS) -> tuple:
    """({scheme text: GFLOPS}, all verified) of the distinct schemes `texts` of `op`: each lowered, checked against
    numpy, then all timed together, `rounds` rounds round-robin (medians)."""
    import tvm

    from tvm_ttile.lowering import lower
    from tvm_ttile.measure import MeasureSettings, measure_modules
    from tvm_ttile.scheme import Scheme
    from tvm_ttile.space import Problem
    from tvm_ttile.tune import verify

    texts = list(dict.fromkeys(texts))
    problem, target = Problem.from_operator(op, cpu.lanes, cpu.isa.name), cpu.target(1)
    mods, verified = [], []
    for text in texts:
        sch = tvm.s_tir.Schedule(tvm.IRModule({"main": op.prim_func(cpu.lanes)}))
        lower(problem, Scheme.parse(text), sch)
        verified.append(verify(op, sch.mod, target)[0])
        mods.append(sch.mod)
    timed = measure_modules(mods, target, MeasureSettings(), rounds=rounds)
    return {t: op.flops / statistics.median(m.seconds) / 1e9 for t, m in zip(texts, timed)}, all(verified)


def write(args, rows, cpu):
    from tvm_ttile.evaluation import geomean as geo

    command = command_line()
    base = os.path.splitext(args.out)[0]
    with open(base + ".json", "w") as f:
        json.dump({"command": command, "machine": cpu.name, "isa": cpu.isa.name, "threads": 1,
                   "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, f, indent=1)
    seeds = range(args.seeds)
    lines = [f"# The zero-trial pick against the size of its pool, {cpu.name} ({cpu.isa.name}), 1 thread", "",
             f"Command: `{command}` ({time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Per layer and pool size, the top-ranked scheme of a fresh pool drawn with seeds 0-{args.seeds - 1} "
             "(the default ranker, the layer's fold model), built, checked against numpy and timed with the best of "
             f"the 200 measured, {ROUNDS} rounds round-robin: % of that best, geometric mean over the seeds "
             "(min-max).", "",
             "| layer | " + " | ".join(f"pool {p}" for p in args.pools) + " | verified |",
             "|---|" + "---:|" * len(args.pools) + "---|"]
    for r in rows:
        cells = []
        for p in args.pools:
            v = [r["share_of_best"][f"{p}/{s}"] for s in seeds]
            cells.append(f"{100 * geo(v):.1f} ({100 * min(v):.0f}-{100 * max(v):.0f})")
        lines.append(f"| {r['layer']} | " + " | ".join(cells) + f" | {'yes' if r['verified'] else 'NO'} |")
    lines.append("| geomean | " + " | ".join(
        f"{100 * geo([r['share_of_best'][f'{p}/{s}'] for r in rows for s in seeds]):.1f}" for p in args.pools) +
        " | |")
    for s in seeds:
        lines.append(f"| seed {s} alone | " + " | ".join(
            f"{100 * geo([r['share_of_best'][f'{p}/{s}'] for r in rows]):.1f}" for p in args.pools) + " | |")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
