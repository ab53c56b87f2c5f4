"""Does prefetching the weights inside the microkernels pay? For each layer of a finished `tvm-ttile compare`
run, the scheme of tvm_ttile's best (seed 0) is lowered again with the weights prefetched 0, 16 and 64 reduction
steps ahead (lowering.lower(prefetch=)), each checked against numpy, then all of them and numpy (matmul layers)
are timed in-process, round-robin. `--zero-start` compares instead the microkernels' accumulators loaded from
the output against started at zero where a call holds the whole reduction (lowering.lower(zero_start=));
`--vector-init` the reduction's init as LLVM vectorizes it against vectorized explicitly (lower(vector_init=));
`--skip-init` the init kept against replaced by nothing where it is dead (lower(skip_dead_init=)); `--vector-copy`
a depthwise tile's input copy as LLVM compiles it against vectorized in whole vectors (lower(vector_copy=));
`--copy-at k,h,inner,pass` the input copy made at each of those places (lower(copy_at=), lowering.COPY_AT).

    python benchmarks/tools/prefetch.py COMPARE_OUT [--layers a,b] [--distances 0,16,64 | --zero-start | --vector-init | --skip-init | --vector-copy | --copy-at k,h,inner] [--rounds 7] [--threads N]

One thread unless `--threads N`: each 1-thread best lowered for N threads, its outer spatial loops parallelized,
and numpy on N threads. Writes benchmarks/results/prefetch.md (and .json); `--render` rewrites the .md from the .json.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

from compare_run import add_output_args, layers_of, operator_of, read_run, render_only
from tvm_ttile.timing import kernel_timer, round_robin
from tvm_ttile.evaluation import command_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_out")
    ap.add_argument("--layers", help="default: every layer of the comparison")
    ap.add_argument("--distances", default="0,16,64")
    ap.add_argument("--zero-start", action="store_true", help="loaded against zero-started accumulators instead")
    ap.add_argument("--vector-init", action="store_true",
                    help="the reduction's init as LLVM vectorizes it against vectorized explicitly instead")
    ap.add_argument("--skip-init", action="store_true",
                    help="the reduction's init kept against skipped where zero-start microkernels make it dead")
    ap.add_argument("--vector-copy", action="store_true",
                    help="a depthwise tile's input copy as compiled against vectorized in whole vectors instead")
    ap.add_argument("--copy-at", help="comma-separated places of the input copy (lowering.COPY_AT) instead")
    ap.add_argument("--rounds", type=int, default=7, help="round-robin rounds")
    ap.add_argument("--threads", type=int, default=1, help="each best lowered for N threads (its outer spatial "
                    "loops parallelized when it has no Par level) and numpy on N threads")
    add_output_args(ap, "prefetch")
    args = ap.parse_args()
    if render_only(args, render):
        return

    import tvm

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.baselines import best_module, work_dir_for
    from tvm_ttile.baselines.libraries import LIBRARIES
    from tvm_ttile.lowering import LoweringOptions, lower, problem_of, scheme_of_schedule
    from tvm_ttile.measure import build_module, timing_args
    from tvm_ttile.scheme import Scheme
    from tvm_ttile.tune import verify

    layers = layers_of(args.compare_out, args.layers)
    run = read_run(args.compare_out)
    if args.copy_at:
        variants = {f"copy at {at}": {"copy_at": at} for at in args.copy_at.split(",")}
    elif args.vector_copy:
        variants = {"copy as is": {"vector_copy": False}, "vector copy": {"vector_copy": True}}
    elif args.skip_init:
        variants = {"init kept": {"skip_dead_init": False}, "dead init skipped": {"skip_dead_init": True}}
    elif args.vector_init:
        variants = {"init as is": {"vector_init": False, "skip_dead_init": False},
                    "vector init": {"vector_init": True, "skip_dead_init": False}}
    elif args.zero_start:
        variants = {"loaded": {"zero_start": False}, "zero start": {"zero_start": True}}
    else:
        variants = {f"prefetch {d}": {"prefetch": int(d)} for d in args.distances.split(",")}
    cpu = cpu_mod.detect_host()
    threads = args.threads
    cpu_mod.use_threads(threads)  # before TVM sizes its pool
    target = cpu.target(threads)
    peak = cpu_mod.peak(cpu, threads=threads)["peak_gflops"]
    timers, rows = [], []
    flops = {}
    for layer in layers:
        op = operator_of(run, layer)
        flops[layer] = op.flops
        work = work_dir_for(os.path.join(args.compare_out, "work"), "tvm_ttile",
                            layer + ("-prepack" if op.prepack else ""), 0, cpu.isa.name)
        scheme = scheme_of_schedule(tvm.s_tir.Schedule(best_module(op, work, cpu)))
        if type(op).__name__ in LIBRARIES["numpy"]:
            timers.append(lambda op=op: LIBRARIES["numpy"][type(op).__name__](op, threads)[1])
            rows.append({"layer": layer, "variant": "numpy", "scheme": None})
        for label, kwargs in variants.items():
            func = op.prim_func(cpu.lanes)
            mod = lower(problem_of(func, cpu.isa.name, cpu.lanes), Scheme.parse(scheme), func, threads=threads,
                        options=LoweringOptions(**kwargs)).sch.mod
            ok, err = verify(op, mod, target)
            if not ok:  # no time is reported for a wrong kernel
                sys.exit(f"{layer}, {label}: output differs from numpy by {err}")
            timers.append(kernel_timer(build_module(mod, target), timing_args(mod), repeat=5, min_repeat_ms=10))
            rows.append({"layer": layer, "variant": label, "scheme": scheme})
        print(f"built {layer}: {scheme}", flush=True)
    print(f"timing {len(timers)} kernels, {args.rounds} round-robin rounds", flush=True)
    gflops = [[flops[row["layer"]] / s / 1e9 for s in secs] for row, secs in zip(rows, round_robin(timers, args.rounds))]
    for row, g in zip(rows, gflops):
        row.update(gflops=g, median=statistics.median(g))
    data = {"command": command_line(), "peak_gflops": peak,
            "machine": cpu.name, "isa": cpu.isa.name, "threads": threads, "rounds": args.rounds, "variants": list(variants),
            "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(data, f, indent=1)
    render(data, args.out + ".md")


def render(data, path):
    # Files written before --zero-start name their variants by prefetch distance only.
    vs = data.get("variants") or [f"prefetch {d}" for d in data["distances"]]
    base, others = vs[0], vs[1:]
    by = {(r["layer"], r["variant"]): r for r in data["rows"]}
    layers = list(dict.fromkeys(r["layer"] for r in data["rows"]))
    where = " in the microkernels"  # where the compared variants act
    if vs[0].startswith("copy at "):
        where, title = "", "Where a tile's input copy is made"
        what = ("with the input copy made at each place (lowering.lower(copy_at=): pass = before the operator, "
                "k / h / w = under the innermost tile loop over that dimension, inner = under the innermost tile "
                "loop)")
    elif "vector copy" in vs:
        where, title = "", "A depthwise tile's input copy vectorized"
        what = ("with each tile's padded input copy as LLVM compiles it and in whole vectors of channels "
                "(lowering.lower(vector_copy=))")
    elif "dead init skipped" in vs:
        title, what = "The reduction's dead init skipped", ("with the reduction's init kept and, where "
                                                             "zero-start microkernels overwrite its whole tile, "
                                                             "replaced by nothing (lowering.lower(skip_dead_init=))")
    elif "vector init" in vs:
        title, what = "The reduction's init vectorized", ("with the reduction's init (the zeros stored before the "
                                                          "microkernels) as LLVM vectorizes it and vectorized "
                                                          "explicitly (lowering.lower(vector_init=))")
    elif "zero start" in vs:
        title, what = "Accumulators loaded or started at zero", ("with the accumulators loaded from the output and "
                                                                 "started at zero where a call holds the whole "
                                                                 "reduction")
    else:
        title, what = "Weight prefetch", "with the weights prefetched d reduction steps ahead (0: none)"
    threads = data.get("threads", 1)
    lines = [f"# {title}{where}, {data['machine']} ({data['isa']}), {threads} thread"
             + "s" * (threads > 1),
             "", f"Command: `{data['command']}` ({data['date']}); peak {data['peak_gflops']:.1f} GFLOPS; "
             f"{data['rounds']} round-robin rounds, each a median of 5 repeats; medians over rounds. Each layer: "
             f"the scheme of tvm_ttile's best (seed 0)"
             + (f" lowered for {threads} threads (no Par level: its outer spatial loops parallelized)"
                if threads > 1 else "") + f", lowered {what}, each checked against numpy before it is "
             "timed; weights as the comparison ran (prepacked ones untimed), numpy (matmul) packs in its call.", "",
             "| layer | numpy | " + " | ".join(vs) + " | " + " | ".join(f"{v} / {base}" for v in others) + " |",
             "|---|---:|" + "---:|" * len(vs) + "---:|" * len(others)]
    ratios = {v: [] for v in others}
    for layer in layers:
        numpy_row = by.get((layer, "numpy"))
        cells = [f"{numpy_row['median']:.1f}" if numpy_row else "-"] + [f"{by[(layer, v)]['median']:.1f}" for v in vs]
        for v in others:
            ratio = by[(layer, v)]["median"] / by[(layer, base)]["median"]
            ratios[v].append(ratio)
            cells.append(f"{ratio:.3f}")
        lines.append(f"| {layer} | " + " | ".join(cells) + " |")
    lines.append("")
    for v, rs in ratios.items():
        if rs:
            geo = statistics.geometric_mean(rs)
            lines.append(f"- {v} / {base}: geometric mean {geo:.3f} over {len(rs)} layers "
                         f"(range {min(rs):.3f}-{max(rs):.3f}).")
    lines += ["", "GFLOPS; schemes:", ""] + [f"- {layer}: `{by[(layer, base)]['scheme']}`" for layer in layers]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
