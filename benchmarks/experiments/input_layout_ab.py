"""A network's first conv2d alone, reading its NCHW input itself (network.prepare's default) against the form
before (the input permuted to NHWC by a function of its own, then the conv2d), with the same schemes: the best of
each form's work dir, each lowered on both functions, timed round-robin with that permute function (its best
MetaSchedule schedule from the first work dir). Hot, 1 thread unless --threads.

    python benchmarks/experiments/input_layout_ab.py resnet18 APART_WORK_DIR INPUT_READ_WORK_DIR [--input-shape 1,3,224,224]
        [--schemes 2] [--rounds 15] --out FILE.md
"""
import argparse
import sys
import time

import numpy as np
from tvm_ttile.timing import evaluator, medians, round_robin
from tvm_ttile.evaluation import command_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("apart", help="work dir tuned with the input's permute apart (input_layout_in_conv=False)")
    ap.add_argument("read", help="work dir tuned with the first conv2d reading NCHW")
    ap.add_argument("--input-shape", default="1,3,224,224")
    ap.add_argument("--schemes", type=int, default=2, help="best schemes taken from each work dir")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import tvm
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.lowering import lower
    from tvm_ttile.metaschedule import best_schedule, measured_schemes, open_database, ttile_problem
    from tvm_ttile.microkernels.catalog import build_catalog
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.scheme import Scheme

    cpu = cpu_mod.detect_host()
    cpu_mod.use_threads(args.threads)
    target = cpu.target(args.threads)
    net = load_model(args.model, tuple(int(x) for x in args.input_shape.split(",")), seed=0)
    apart = nw.extract_tasks(nw.prepare(net.mod, cpu, input_layout_in_conv=False), cpu=cpu, threads=args.threads)
    read = nw.extract_tasks(nw.prepare(net.mod, cpu), cpu=cpu, threads=args.threads)
    # What differs between the two forms: the permute and the first conv2d (every other function is the same)
    from tvm_ffi import structural_hash

    hashes = {id(ts): {structural_hash(t.mod) for t in ts} for ts in (apart, read)}
    only = lambda tasks, others: [t for t in tasks if structural_hash(t.mod) not in hashes[id(others)]]  # noqa: E731
    permute = next((t for t in only(apart, read) if t.policy == "metaschedule"), None)
    first_apart = next((t for t in only(apart, read) if t.policy == "tvm_ttile"), None)
    first_read = next((t for t in only(read, apart) if t.policy == "tvm_ttile"), None)
    if permute is None or first_read is None or first_apart is None or first_apart.shape != first_read.shape:
        sys.exit(f"{args.model}: no input permute before a first conv2d of the same shape in both forms")
    schemes = list(dict.fromkeys(measured_schemes(open_database(args.apart), first_apart.mod, args.schemes)
                                 + measured_schemes(open_database(args.read), first_read.mod, args.schemes)))
    build_catalog(cpu, "conv2d")
    dev = tvm.cpu()

    def timer(mod):
        lib = tvm.compile(mod, target=target)
        rng = np.random.default_rng(1)
        data = [tvm.runtime.tensor(rng.standard_normal([int(s) for s in a.shape]).astype(a.dtype), dev)
                for a in ArgInfo.from_prim_func(mod["main"])]
        f = evaluator(lib.mod, number=20, repeat=1, min_repeat_ms=0)
        return lambda: f(*data).mean * 1e3

    timers = {}
    for form, task in (("permute apart", first_apart), ("input read by the conv2d", first_read)):
        problem, _ = ttile_problem(task.mod, target)
        for s in schemes:  # without prepacking on both: the weights are read as each function gets them
            timers[(form, s)] = timer(lower(problem, Scheme.parse(s), task.mod, threads=args.threads,
                                            prepack=False).sch.mod)
    best = best_schedule(open_database(args.apart), permute.mod)
    timers[("the permute function", "")] = timer(best[0].mod if best else permute.mod)
    samples = round_robin(timers, args.rounds)
    med = medians(samples)
    lines = [f"# {args.model}: the first conv2d reading the NCHW input against the input permuted apart", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); {cpu.describe()['cpu']}; "
             f"{args.threads} thread(s); {args.rounds} round-robin rounds, each the mean of 20 hot calls; ms.", "",
             f"First conv2d: `{first_read.shape}`; the permute: `{permute.name}` ({permute.shape}).", "",
             "| scheme | permute apart: conv2d | + the permute | input read by the conv2d | saved |",
             "|---|---:|---:|---:|---:|"]
    for s in schemes:
        a, r = med[("permute apart", s)], med[("input read by the conv2d", s)]
        p = med[("the permute function", "")]
        lines.append(f"| `{s}` | {a:.3f} | {a + p:.3f} | {r:.3f} | {a + p - r:+.3f} |")
    lines += ["", f"The permute function alone: {med[('the permute function', '')]:.3f} ms (median), min "
              f"{min(samples[('the permute function', '')]):.3f}."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
