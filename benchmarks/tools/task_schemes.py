"""Other schemes for one task of a tuned network, side by side with tuning's pick: each lowered (optionally with
its weights prefetched some reduction steps ahead: SCHEME@STEPS), checked against the untuned function, then all
timed round-robin with the caches flushed before every call (as tune-model times candidates: the network's
weights arrive from memory) and hot. Says whether a loop order, microkernel or prefetch distance that tuning did
not pick would serve the task better in the network's conditions.

    python benchmarks/tools/task_schemes.py resnet18 WORK_DIR --task fused_conv2d9_add7_relu41
        [--scheme "[T(16,k),T(7,w),T(512,c),U(3,s),U(3,r),U(7,h),U(2,k),V(k)]" ...] [--scheme "SCHEME@16"]
        [--input-shape 1,3,224,224] [--threads 1] [--rounds 7] --out FILE.md

The work dir's best scheme for the task comes first (`tuning's pick`), then each --scheme in the order given.
"""
import statistics
import sys
import time

from tuned_network import arguments, open_tuned
from tvm_ttile.evaluation import command_line


def more(ap):
    ap.add_argument("--task", required=True, help="the task's function name (the tune-model report's first column)")
    ap.add_argument("--scheme", action="append", default=[], help="a scheme to time beside tuning's pick; "
                    "SCHEME@STEPS: lowered with its weights prefetched STEPS reduction steps ahead")


def main():
    args = arguments(__doc__, more=more)

    import tvm

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import lowering
    from tvm_ttile import network as nw
    from tvm_ttile.measure import MeasureSettings, measure_modules
    from tvm_ttile.metaschedule import best_schedule, ttile_problem
    from tvm_ttile.scheme import Scheme

    net = open_tuned(args)
    task = next((t for t in net.tasks if t.name == args.task), None)
    if task is None or task.policy != "tvm_ttile":
        sys.exit(f"--task {args.task}: not a tvm_ttile task of {args.model}; these are: "
                 f"{', '.join(t.name for t in net.tasks if t.policy == 'tvm_ttile')}")
    best = best_schedule(net.database, task.mod)
    if not best:
        sys.exit(f"{args.work_dir} holds no record of {args.task}")
    problem, _ = ttile_problem(task.mod, net.target)
    wanted = [("tuning's pick", lowering.scheme_of_schedule(best[0]), 0)]
    for text in args.scheme:
        scheme, _, steps = text.partition("@")
        wanted.append(("", scheme, int(steps or 0)))
    mods = []
    for _, text, steps in wanted:
        sch = tvm.s_tir.Schedule(task.mod)
        try:
            lowering.lower(problem, Scheme.parse(text), sch, threads=args.threads, options=lowering.LoweringOptions(prefetch=steps))
        except Exception as e:  # noqa: BLE001 - a bad scheme is named, not a traceback
            sys.exit(f"{text}: {str(e).splitlines()[0]}")
        ok, err = nw.verify_against_untuned(task.mod, sch.mod, net.target)
        if not ok:
            sys.exit(f"{text}: differs from the untuned function by {err:.3g}")
        mods.append(sch.mod)
    peak = cpu_mod.run_peak(net.cpu, threads=args.threads)["peak_gflops"]
    cold = measure_modules(mods, net.target, nw.COLD_SETTINGS, rounds=args.rounds)
    hot = measure_modules(mods, net.target, MeasureSettings(), rounds=args.rounds)
    rows = []
    for (label, text, steps), c, h in zip(wanted, cold, hot):
        if c.error or h.error:
            sys.exit(f"{text}: {c.error or h.error}")
        mc, mh = statistics.median(c.seconds), statistics.median(h.seconds)
        q = statistics.quantiles(c.seconds, n=4)
        rows.append(f"| {label} | `{text}` | {steps or '-'} | {1e3 * mc:.4f} | {1e3 * (q[2] - q[0]):.4f} | "
                    f"{1e3 * mh:.4f} | {mc / mh:.2f} | {100 * task.flops / mc / 1e9 / peak:.1f} |")
    lines = [f"# {args.model}: schemes for {args.task} ({task.shape}) side by side ({args.threads} thread(s))", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {net.cpu.describe()['cpu']} "
             f"({net.cpu.isa.name}), peak {peak:.1f} GFLOPS measured in this run. Each scheme checked against the "
             f"untuned function, then timed round-robin, {args.rounds} rounds, with the caches flushed before every "
             "call (all arguments but the input, as tune-model times candidates) and hot; medians in ms per call.", "",
             "| | scheme | weights prefetched (steps ahead) | flushed ms | IQR | hot ms | flushed / hot | % of peak, flushed |",
             "|---|---|---:|---:|---:|---:|---:|---:|", *rows]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
