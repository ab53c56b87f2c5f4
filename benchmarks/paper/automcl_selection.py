"""AutoMCL's learned compute selection on this machine (issue #6): measure every compute variant on a
dataset of shapes (the paper's design, FLOP-capped to fit the time budget), train the XGBoost classifier,
report its held-out accuracy; and the REG tuner against random choice on the benchmark shapes.

    python benchmarks/paper/automcl_selection.py [--min-gflop 0] [--max-gflop 0.05] [--trials 6] [--sample 80]
        [--out benchmarks/results/automcl_selection]  -> <out>.{md,json}
The measured dataset is resumable and per CPU: benchmarks/work/automcl_dataset-<CPU cache key>.json.
The trained classifier is kept in the CPU's cache directory, where `tvm-ttile tune --strategy automcl` finds it.
"""
import argparse
import json
import os
import statistics

from tvm_ttile.automcl.selection import (LAYER_BAND, NAMES, dataset_shapes, layer_band_shapes, save_classifier,
                                         train_classifier)
from tvm_ttile.automcl.space import CacheModel, build_space
from tvm_ttile.automcl.tuner import auto_config, measure_configs
from tvm_ttile.cpu import detect_host, peak
from tvm_ttile.measure import MeasureSettings
from tvm_ttile.operators import matmul_shapes
from tvm_ttile.evaluation import command_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Builds that take longer than 20 s count as failed configurations (0 GFLOPS): some TTMM configurations
# take minutes to compile.
SETTINGS = MeasureSettings(number=1, repeat=3, min_repeat_ms=5, timeout_sec=20)


def best_gflops(compute, M, K, N, cache, target, trials, model="reg", seed=0):
    space = build_space(compute, M, N, K, cache)["configs"]
    if not space:
        return 0.0
    runs = auto_config(compute, space, measure_configs(compute, M, N, K, target, SETTINGS), trials, cache,
                       model=model, seed=seed)
    secs = [s for _, s in runs if s]
    return 2 * M * N * K / min(secs) / 1e9 if secs else 0.0


def dataset_gflops(M, K, N, cache, target, trials, seed=0):
    """Best GFLOPS of each compute over `trials` random configurations of its filtered space, all built and
    timed in one batch (one builder pool per shape)."""
    import random

    from tvm_ttile.automcl.computes import schedule
    from tvm_ttile.measure import measure_modules

    picks = []
    for c in NAMES:
        space = build_space(c, M, N, K, cache)["configs"]
        picks += [(c, cfg) for cfg in random.Random(seed).sample(space, min(trials, len(space)))]
    res = measure_modules([schedule(c, M, N, K, cfg) for c, cfg in picks], target, SETTINGS)
    out = {c: 0.0 for c in NAMES}
    for (c, _), r in zip(picks, res):
        if r.median:
            out[c] = max(out[c], 2 * M * N * K / r.median / 1e9)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-gflop", type=float, default=0.0)
    ap.add_argument("--max-gflop", type=float, default=0.05)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "automcl_selection"),
                    help="results prefix: <out>.md and <out>.json")
    ap.add_argument("--trials", type=int, default=6, help="random configurations per compute and shape")
    ap.add_argument("--limit", type=int, help="measure only the first N dataset shapes (a smoke run)")
    ap.add_argument("--sample", type=int, help="measure a random sample of N dataset shapes (seed 0)")
    ap.add_argument("--reg-shapes", type=int, default=4, help="benchmark shapes for REG vs random")
    ap.add_argument("--layer-band", type=int, default=0,
                    help="add N random shapes from the band dense layers live in (selection.layer_band_shapes)")
    args = ap.parse_args()
    cpu = detect_host()
    cache, target = CacheModel.of(cpu), cpu.target(1)
    shapes, note = dataset_shapes(args.max_gflop, min_gflop=args.min_gflop)
    if args.sample and args.sample < len(shapes):
        import random

        shapes = sorted(random.Random(0).sample(shapes, args.sample))
        note += f", of which a random sample of {args.sample} measured"
    if args.limit:
        shapes, note = shapes[:args.limit], note + f", of which the first {args.limit} measured"
    if args.layer_band:
        bench = {(op.M, op.K, op.N) for op in matmul_shapes().values()}
        shapes += layer_band_shapes(args.layer_band, args.max_gflop, exclude=bench)
        band = ", ".join(f"{d} {lo}-{hi}" for d, (lo, hi) in LAYER_BAND.items())
        note += f"; plus {args.layer_band} random shapes of the band dense layers live in ({band}), none of the benchmark shapes"
    path = os.path.join(HERE, "work", f"automcl_dataset-{cpu.cache_dir.name}.json")  # labels are this CPU's
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = {}
    if os.path.exists(path):
        with open(path) as f:
            data = json.load(f)
    for i, (m, k, n) in enumerate(shapes):
        key = f"{m}x{k}x{n}"
        if key not in data:
            data[key] = dataset_gflops(m, k, n, cache, target, args.trials)
            with open(path, "w") as f:  # after every shape: an interrupted run keeps what it measured
                json.dump(data, f)
        print(f"[{i + 1}/{len(shapes)}] {key}: best {max(data[key], key=data[key].get)}", flush=True)
    records = [((m, k, n), data[f"{m}x{k}x{n}"]) for m, k, n in shapes]  # this run's shapes only
    clf = train_classifier(records)
    saved_to = save_classifier(cpu, clf, note)
    wins = {c: sum(1 for _, g in records if max(g, key=g.get) == c) for c in NAMES}
    reg_vs_random = {}
    for name, op in list(matmul_shapes().items())[:args.reg_shapes]:  # REG against random choice, same trials, 3 seeds
        reg_vs_random[name] = {m: statistics.median(best_gflops("RPMM", op.M, op.K, op.N, cache, target, 16, m, s)
                                                    for s in range(3)) for m in ("reg", "random")}
    out = {"dataset": note, "trials_per_compute": args.trials, "peak_gflops": peak(cpu)["peak_gflops"],
           "wins": wins, "candidates": clf["computes"], "accuracy": clf["accuracy"], "within_10": clf["within_10"],
           "relative_gflops": clf["relative_gflops"], "train": clf["train"], "test": clf["test"],
           "reg_vs_random": reg_vs_random}
    with open(args.out + ".json", "w") as f:
        json.dump(out, f, indent=1)
    lines = ["# AutoMCL: learned compute selection", "",
             f"Command: `{command_line()}`; "
             f"{cpu.name}, 1 thread, peak {out['peak_gflops']:.1f} GFLOPS.", "",
             f"Dataset: {note}; label = the compute whose best of {args.trials} random configurations "
             "(from its filtered space) is fastest.", "",
             f"Fastest compute per shape: {wins}. Candidates (alone the best, no other within 2%, on at least 5% of "
             f"the shapes, as the paper chooses its four): {', '.join(clf['computes'])}.", "",
             f"XGBoost classifier among the candidates (log M, K, N, M N, M K N), held out on {clf['test']} shapes "
             f"(fitted on the other {clf['train']}): the pick is the fastest of all six computes on "
             f"**{100 * clf['accuracy']:.1f}%**, within 10% of it on **{100 * clf['within_10']:.1f}%**, and reaches "
             f"{100 * clf['relative_gflops']:.1f}% of its GFLOPS on average. The kept classifier is fitted on all "
             f"{clf['train'] + clf['test']} shapes: `{saved_to}`."]
    if reg_vs_random:
        lines += ["", "REG vs random choice (RPMM, 16 trials, median of 3 seeds, GFLOPS):", "",
                  "| shape | REG | random |", "|---|---:|---:|"]
        lines += [f"| {k} | {v['reg']:.1f} | {v['random']:.1f} |" for k, v in reg_vs_random.items()]
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
