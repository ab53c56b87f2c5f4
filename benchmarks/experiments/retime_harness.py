"""Does `compare`'s re-timing (in-process time_evaluator, after numpy and the libraries are loaded) time a tuned
kernel slower than tuning did (MetaSchedule's runner, a popen worker)? The same best kernel both ways,
alternating, with numpy in between, so both see the same moments of a shared machine.

    python benchmarks/experiments/retime_harness.py COMPARE_OUT [--layers bert-qkv,square-512,square-1024] [--rounds 6]

COMPARE_OUT is a `tvm-ttile compare --prepack` output directory (its work/ holds tvm_ttile's seed-0 databases).
Single thread. Writes benchmarks/results/retime_harness.md.
"""
import argparse
import dataclasses
import os
import statistics
import time
from tvm_ttile.evaluation import command_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_out")
    ap.add_argument("--layers", default="bert-qkv,square-512,square-1024")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "retime_harness.md"))
    args = ap.parse_args()

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.baselines import best_module, in_process_timers, work_dir_for
    from tvm_ttile.compare import SETTINGS as settings
    from tvm_ttile.measure import default_builder, default_runner, measure_modules
    from tvm_ttile.operators import get_layer

    cpu = cpu_mod.detect_host()
    builder, runner = default_builder(settings), default_runner(settings)
    rows = []
    for layer in args.layers.split(","):
        op = dataclasses.replace(get_layer(layer), prepack=True)
        work = work_dir_for(os.path.join(args.compare_out, "work"), "tvm_ttile", layer + "-prepack", 0, cpu.isa.name)
        mod = best_module(op, work, cpu, 1)
        gflops = lambda s: op.flops / s / 1e9  # noqa: E731
        kernel, lib = in_process_timers([("tvm_ttile", work), ("numpy", None)], op, cpu, 1, settings)
        worker, in_process, numpy_ = [], [], []
        for _ in range(args.rounds):
            worker.append(gflops(measure_modules([mod], cpu.target(1), settings, builder=builder, runner=runner)[0].median))
            in_process.append(gflops(kernel()))
            numpy_.append(gflops(lib()))
        cells = [f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" for v in (worker, in_process, numpy_)]
        rows.append(f"| {layer} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    lines = ["# Re-timing harness: the same tuned kernel in MetaSchedule's runner and in-process", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {cpu.describe()}; 1 thread; "
             f"{args.rounds} alternating rounds; each cell the median GFLOPS (range) of the rounds.", "",
             "| layer | tvm_ttile best, runner (popen worker, as tuning) | same, in-process (as compare's re-timing) "
             "| numpy, in-process |", "|---|---:|---:|---:|", *rows, ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
