"""How much of a tuning run is starting build processes? One layer tuned with the same seed (so the same
candidates) through MetaSchedule's LocalBuilder, which starts its build processes again for every batch, and
through measure.PooledBuilder, which keeps them; the two alternate, each run in a fresh work dir.

    python benchmarks/experiments/builder_pool.py [--layer ResNet18-2] [--trials 50] [--rounds 2] [--out FILE]

1 thread. Reports each run's tuning wall time (tune's own count: drawing, building, timing, the confirm pass)
and its verified best. Writes FILE.md and FILE.json (default benchmarks/results/builder_pool).
"""
import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from tvm_ttile.evaluation import command_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", default="ResNet18-2")
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "builder_pool"))
    args = ap.parse_args()

    from tvm.s_tir import meta_schedule as ms

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.measure import MeasureSettings, PooledBuilder, build_module, unpin_build_worker
    from tvm_ttile.operators import get_layer
    from tvm_ttile.tune import tune

    host = cpu_mod.detect_host()
    settings = MeasureSettings()
    same = {"f_build": build_module, "max_workers": settings.build_workers, "timeout_sec": settings.timeout_sec,
            "initializer": unpin_build_worker}  # only the processes' lifetime differs
    builders = {"LocalBuilder": lambda: ms.builder.LocalBuilder(**same), "PooledBuilder": lambda: PooledBuilder(**same)}
    layer = get_layer(args.layer)
    tune(layer, host, trials=2, progress=False)  # the peak, the catalog and the intrinsics first, for neither
    runs = []
    for r in range(args.rounds):
        for name in (list(builders) if r % 2 == 0 else list(builders)[::-1]):
            start = time.time()  # the builder's start (its check of f_build) counts too
            res = tune(layer, host, trials=args.trials, seed=0, work_dir=tempfile.mkdtemp(prefix="builder_pool_"),
                       progress=False, builder=builders[name](), settings=settings)
            wall = time.time() - start
            if not res.verified:
                sys.exit(f"{name}: the best kernel does not match numpy ({res.max_abs_error})")
            runs.append({"builder": name, "round": r, "tuning_seconds": res.seconds, "wall_seconds": wall,
                         "gflops": res.gflops, "percent_of_peak": res.percent_of_peak, "scheme": res.scheme})
            print(f"{name} round {r}: {res.seconds:.1f} s tuning, {wall:.1f} s wall, best {res.gflops:.1f} GFLOPS",
                  flush=True)
    medians = {n: statistics.median(x["wall_seconds"] for x in runs if x["builder"] == n) for n in builders}
    data = {"command": command_line(), "machine": platform.node(), "cpu": host.name,
            "isa": host.isa.name, "threads": 1, "date": time.strftime("%Y-%m-%d %H:%M"), "layer": args.layer,
            "trials": args.trials, "settings": settings.describe(), "runs": runs, "median_wall_seconds": medians}
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as fh:
        json.dump(data, fh, indent=1)
    lines = [f"# Build processes kept or started per batch: {args.layer}, {args.trials} trials, {host.name} "
             f"({host.isa.name}), 1 thread", "",
             f"Command: `{data['command']}` ({data['date']}). Seed 0 in every run (the same candidates, "
             f"{settings.build_workers} build processes); runs alternate, each in a fresh work dir; every best "
             "checked against numpy. Tuning s: tune's count (drawing, building, timing, the confirm pass); wall s: "
             "that and the builder's start.", "",
             "| builder | round | tuning s | wall s | best GFLOPS | % of peak |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {x['builder']} | {x['round']} | {x['tuning_seconds']:.1f} | {x['wall_seconds']:.1f} | "
              f"{x['gflops']:.1f} | {x['percent_of_peak']:.1f} |" for x in runs]
    lines += ["", "Median wall seconds: " + ", ".join(f"{n} {s:.1f}" for n, s in medians.items())]
    with open(args.out + ".md", "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
