"""The input's padding pass on one thread or on all: each tvm_ttile task of a tuned network whose best scheme copies
its input in a pass (a padded conv2d), lowered both ways (lowering.PARALLEL_INPUT_PASS off and on), timed side by
side with the caches flushed before every call (as tune-model times), round-robin; each checked against the other.

    python benchmarks/tools/parallel_input_pass.py resnet18 WORK_DIR --threads 2 [--input-shape 1,3,224,224]
        [--rounds 5] [--split-first] --out FILE.md

WORK_DIR: a tune-model work dir tuned at that thread count (its best scheme per task is used).
"""
import statistics
import sys
import time

import numpy as np
from tuned_network import arguments, open_tuned
from tvm_ttile.evaluation import command_line


def main():
    args = arguments(__doc__, threads_required=True,
                     flags={"--split-first": "time the split pass first in every round (default: the serial one)"})

    import tvm

    from tvm_ttile import lowering
    from tvm_ttile import network as nw
    from tvm_ttile.measure import build_module, measure_modules, timing_args
    from tvm_ttile.metaschedule import best_schedule, ttile_problem
    from tvm_ttile.scheme import Scheme

    net = open_tuned(args)
    cpu, target, database = net.cpu, net.target, net.database
    rows, totals = [], [0.0, 0.0]
    for task in net.tasks:
        best = task.policy == "tvm_ttile" and best_schedule(database, task.mod)
        if not best:
            continue
        scheme = Scheme.parse(lowering.scheme_of_schedule(best[0]))
        problem, _ = ttile_problem(task.mod, target)
        built = []
        for flag in (False, True):
            lowering.PARALLEL_INPUT_PASS = flag
            sch = tvm.s_tir.Schedule(task.mod)
            lowering.lower(problem, scheme, sch, threads=args.threads)
            built.append(sch.mod)
        if built[0].script().count("T.parallel") == built[1].script().count("T.parallel"):
            continue  # no input pass in this scheme: lowered alike
        outs = []
        for m in built:
            run_args = timing_args(m)
            build_module(m, target)["main"](*run_args)
            outs.append(run_args[-1].numpy())
        if not np.allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4):
            sys.exit(f"{task.name}: the two lowerings disagree")
        order = built[::-1] if args.split_first else built
        timed = measure_modules(order, target, nw.COLD_SETTINGS, rounds=args.rounds)
        one, every = (statistics.median(m.seconds) * 1e3 for m in (timed[::-1] if args.split_first else timed))
        totals[0] += one * task.weight
        totals[1] += every * task.weight
        rows.append(f"| {task.name} | {task.shape} | {task.weight} | {one:.4f} | {every:.4f} | {every / one:.3f} |")
        print(rows[-1], flush=True)
    lines = [f"# {args.model}: the input's padding pass on one thread or on all ({args.threads} threads)", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {cpu.describe()['cpu']} "
             f"({cpu.isa.name}); each task's best scheme in the work dir lowered with lowering.PARALLEL_INPUT_PASS off "
             f"and on; caches flushed before every call (10 calls per round), {args.rounds} round-robin rounds; "
             "medians in ms per call. The two lowerings agree on every task.", "",
             "| task | shape | calls | pass on one thread | pass on every thread | ratio |", "|---|---|---:|---:|---:|---:|",
             *rows, "",
             f"All these tasks, x calls: {totals[0]:.3f} ms with the pass on one thread, {totals[1]:.3f} ms on every "
             f"thread ({totals[1] / totals[0]:.3f}x)." if totals[0] else "No task of this work dir copies its input in a pass."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
