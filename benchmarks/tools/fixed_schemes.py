"""Fixed schemes on one layer of a finished `tvm-ttile compare` run, timed side by side with the bests the run's
tuners found and with libraries: is a gap the search's (a scheme in the space matches the other system) or the
lowering's (the same tiling stays slower)? Each scheme is lowered as tvm_ttile lowers it, checked against numpy,
then everything is timed in this process, round-robin.

    python benchmarks/tools/fixed_schemes.py COMPARE_OUT|- --layer L --schemes "[...]" "[...]" \
        [--variants as-is,vector-init,skip-init] [--systems template-random,tvm_ttile,numpy] [--in-place] \
        [--also-run OTHER_COMPARE_OUT] \
        [--threads N] [--rounds 7] [--out FILE]

COMPARE_OUT `-`: no run; L a named layer (tvm-ttile tune's --layer), weights prepacked, --systems only libraries.
`--variants`: each scheme lowered several ways (VARIANTS: lower()'s options). `--in-place`: the weights as an argument read where they lie (default: as the run had them, e.g. --prepack).
`--threads N`: schemes lowered for N threads (a scheme without a Par level gets its outer loops parallelized,
said in its notes), libraries run on N threads, % of the N-thread peak; a tuner's best is then read from its
N-thread work dir. Writes OUT.md and OUT.json (default results/fixed_schemes).
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

from compare_run import add_output_args, operator_of, read_run, render_only
from tvm_ttile.timing import kernel_timer, round_robin
from tvm_ttile.evaluation import command_line


# Lowerings of one scheme: lowering.lower's keyword arguments.
VARIANTS = {"as-is": {}, "vector-init": {"vector_init": True, "skip_dead_init": False},
            "init-kept": {"skip_dead_init": False}, "skip-init": {"skip_dead_init": True}, "loaded": {"zero_start": False},
            **{f"copy-{at}": {"copy_at": at} for at in ("pass", "k", "h", "w", "inner")},
            "copied": {"read_in_place": False},  # every tile copies its input window (no in-place reads)
            "border-copy": {"border": "copy"},  # in place inside the input, border tiles copy their window
            "copy-inner-border-copy": {"copy_at": "inner", "border": "copy"}}  # ... the copy per region


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_out", help="a compare run's --out, or - (no run: --layer names a built-in layer)")
    ap.add_argument("--layer", required=True)
    ap.add_argument("--schemes", nargs="+", default=[], help="scheme texts, each lowered as tvm_ttile lowers it")
    ap.add_argument("--systems", default="", help="comma-separated: the run's tuners (their best, seed 0) and "
                                                   "libraries, timed beside the schemes")
    ap.add_argument("--also-run", action="append", default=[], metavar="COMPARE_OUT",
                    help="the --systems tuners' bests of another run of the same layer too (e.g. of an earlier "
                         "version), labelled 'SYSTEM (RUN)'")
    ap.add_argument("--in-place", action="store_true", help="weights read in place at every call")
    ap.add_argument("--variants", default="as-is", help="comma-separated lowerings of each scheme: " +
                    ", ".join(f"{k} ({v or 'default'})" for k, v in VARIANTS.items()))
    ap.add_argument("--rounds", type=int, default=7, help="round-robin rounds")
    ap.add_argument("--threads", type=int, default=1, help="threads of every kernel timed")
    add_output_args(ap, "fixed_schemes")
    args = ap.parse_args()
    if render_only(args, render):
        return


    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.baselines import get_system, in_process_timers, work_dir_for
    from tvm_ttile.lowering import LoweringOptions, lower, problem_of
    from tvm_ttile.measure import build_module, timing_args
    from tvm_ttile.scheme import Scheme
    from tvm_ttile.tune import verify

    no_run = args.compare_out == "-"
    run = {"prepack": True} if no_run else read_run(args.compare_out)
    op = operator_of(run, args.layer, prepack=False if args.in_place else None)
    prepack = op.prepack
    cpu = cpu_mod.detect_host()
    threads = args.threads
    cpu_mod.use_threads(threads)  # before TVM sizes its pool
    target = cpu.target(threads)
    peak = cpu_mod.peak(cpu, threads=threads)["peak_gflops"]
    rows, timers = [], []
    systems = [s for s in args.systems.split(",") if s]
    if no_run and (args.also_run or any(get_system(s).tunes for s in systems)):
        sys.exit("without a compare run (-) there are no tuners' bests: --systems takes libraries only, no --also-run")
    run_layer = args.layer + ("-prepack" if run.get("prepack") else "")
    for out in [args.compare_out] + args.also_run:
        listed = systems if out == args.compare_out else [s for s in systems if get_system(s).tunes]
        entries = [(s, None if not get_system(s).tunes else
                    work_dir_for(os.path.join(out, "work"), s, run_layer, 0, cpu.isa.name, threads))
                   for s in listed]
        timers += in_process_timers(entries, op, cpu, threads)
        label = "" if out == args.compare_out else f" ({os.path.basename(os.path.normpath(out))})"
        rows += [{"what": s + label, "kind": "system"} for s in listed]
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    for text in args.schemes:
        for variant in variants:
            func = op.prim_func(cpu.lanes)
            lowered = lower(problem_of(func, cpu.isa.name, cpu.lanes), Scheme.parse(text), func, threads=threads,
                            options=LoweringOptions(**VARIANTS[variant]))
            mod = lowered.sch.mod
            ok, err = verify(op, mod, target)
            if not ok:  # no time is reported for a wrong kernel
                sys.exit(f"{text} ({variant}): output differs from numpy by {err}")
            timers.append(kernel_timer(build_module(mod, target), timing_args(mod), repeat=5, min_repeat_ms=10))
            rows.append({"what": text, "kind": "scheme", "variant": variant, "notes": lowered.notes})
            print(f"built {text} ({variant})" + "".join(f"; {n}" for n in lowered.notes), flush=True)
    print(f"timing {len(timers)} kernels, {args.rounds} round-robin rounds", flush=True)
    gflops = [[op.flops / s / 1e9 for s in secs] for secs in round_robin(timers, args.rounds)]
    for row, g in zip(rows, gflops):
        row.update(gflops=g, median=statistics.median(g), percent_of_peak=100 * statistics.median(g) / peak)
    data = {"command": command_line(), "peak_gflops": peak,
            "machine": cpu.name, "isa": cpu.isa.name, "threads": threads, "rounds": args.rounds, "layer": args.layer,
            "weights": "prepacked (constant, packed at build time)" if prepack else "in place, read at every call",
            "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}
    with open(args.out + ".json", "w") as f:
        json.dump(data, f, indent=1)
    render(data, args.out + ".md")


def render(data, path):
    threads = data.get("threads", 1)
    lines = [f"# Fixed schemes on {data['layer']}, {data['machine']} ({data['isa']}), {threads} thread"
             + "s" * (threads > 1), "",
             f"Command: `{data['command']}` ({data['date']}); peak {data['peak_gflops']:.1f} GFLOPS at {threads} "
             f"thread{'s' * (threads > 1)}, cached measurement of this CPU); weights {data['weights']}; {data['rounds']} round-robin rounds, each a "
             "median of 5 repeats; medians over rounds (min-max in brackets). Every scheme checked against numpy "
             "before it is timed; the systems' bests were verified by their run.", "",
             "| what | GFLOPS | % of peak | min-max |", "|---|---:|---:|---|"]
    for r in data["rows"]:
        what = f"`{r['what']}` {r.get('variant', 'as-is')}" if r["kind"] == "scheme" else r["what"]
        what += "".join(f" ({n})" for n in r.get("notes") or ())  # e.g. an init kept, loops parallelized
        lines.append(f"| {what} | {r['median']:.1f} | {r['percent_of_peak']:.1f} | "
                     f"{min(r['gflops']):.1f}-{max(r['gflops']):.1f} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
