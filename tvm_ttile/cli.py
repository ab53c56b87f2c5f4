"""The `tvm-ttile` command line."""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from .errors import TTileError
from .winograd import DEFAULT as WINOGRAD_DEFAULT


def _cpu(args):
    from . import cpu

    if getattr(args, "target", None):
        return cpu.from_target(args.target)
    return cpu.detect_host(getattr(args, "isa", None))


def cmd_peak(args) -> int:
    from . import cpu as cpu_mod

    from . import limits
    from .microkernels.catalog import rethreshold
    from .microkernels.spec import FAMILIES

    cpu = _cpu(args)
    # Measured now (a capacity: the cache keeps the best), so that a peak cached in a busy moment gets truer.
    res = cpu_mod.peak(cpu, rebuild=args.rebuild, threads=args.threads, remeasure=cpu_mod.runs_here(cpu))
    res["cache"] = str(cpu_mod.peak_path(cpu, args.threads))
    if args.threads == 1:  # the catalogs are measured at 1 thread
        for op in FAMILIES:
            rethreshold(cpu, op)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"CPU      {res['cpu']}  ({res['isa']}, {res['lanes_fp32']} fp32 lanes, "
              f"{res['vector_registers']} vector registers)")
        print(f"caches   L1d {res['l1d_bytes'] // 1024} KiB, L2 {res['l2_bytes'] // 1024} KiB, "
              f"L3 {res['l3_bytes'] // 1024 // 1024} MiB")
        n = res.get("threads", 1)
        print(f"peak     {res['peak_gflops']:.1f} GFLOPS fp32, {n} thread{'s' if n > 1 else ''} (median repeat "
              f"{res['median_gflops']:.1f}; {res['accumulators']} FMA chains per thread built through TVM, target "
              f"{json.dumps(res['target'])})")
        print(f"kept     {limits.status(res)}")
        if res.get("nominal_gflops"):
            print(f"nominal  {res['nominal_gflops']:.1f} GFLOPS ({res['nominal_basis']})")
        for line in limits.problems(res):
            print(f"warning: {line}")
        if "bandwidth_gbs" in res:
            print(f"memory   {res['bandwidth_gbs']:.1f} GB/s read + write, {n} thread{'s' if n > 1 else ''} "
                  f"({res['bandwidth_bytes_streamed'] // 2**20} MiB streamed)")
        print(f"cached   {res['cache']}")
    return 0


def cmd_microkernels(args) -> int:
    from .microkernels.catalog import build_catalog, catalog_path
    from .microkernels.heatmap import write_heatmap
    from .microkernels.spec import FAMILIES

    cpu = _cpu(args)
    ops = list(FAMILIES) if args.op == "all" else [args.op]
    report = {}
    for op in ops:
        cat = build_catalog(cpu, op, threshold=args.threshold, rebuild=args.rebuild)
        path = catalog_path(cpu, op)
        heat = write_heatmap(cat, path.with_suffix(".png"))
        data = cat.to_json()
        data.pop("entries")
        data.update(catalog=str(path), heatmap=heat)
        report[op] = data
    if args.json:
        print(json.dumps(report if len(ops) > 1 else report[ops[0]], indent=1))
        return 0
    print(f"peak     {_peak_status(cpu, 1)}")
    for op, data in report.items():
        _print_catalog(op, data, args.top)
    return 0


def _peak_status(cpu, threads: int) -> str:
    """The peak in use, when it was measured and what this run (or the last one) measured: one line."""
    from . import cpu as cpu_mod
    from . import limits

    run = cpu_mod.run_peak(cpu, threads=threads) if cpu_mod.runs_here(cpu) else None
    return limits.status(cpu_mod.peak(cpu, threads=threads), run)


def _print_catalog(op, data, top):
    kept = data["kept"]
    print(f"\n== {op} microkernels on {data['cpu']['cpu']} ({data['cpu']['isa']}), 1 thread ==")
    print(f"peak {data['peak_gflops']:.1f} GFLOPS; {data['candidates']} candidates measured in {data['seconds']:.0f} s; "
          f"{len(kept)} kept at >= {100 * data['threshold']:.0f}% of peak; reduction loop {data['reduction_length']}")
    print(f"{'microkernel':58s} {'GFLOPS':>8s} {'% peak':>7s}")
    for e in kept[:top]:
        print(f"{e['text'].split(' ', 1)[1]:58s} {e['gflops']:8.1f} {e['percent_of_peak']:7.1f}")
    if len(kept) > top:
        print(f"... {len(kept) - top} more (--top N, or --json)")
    print(f"{len(data['classes'])} classes (kept kernels differing only along one dimension):")
    for c in data["classes"][:top]:
        fixed = ",".join(f"{d}{f}" for d, f in c["fixed"].items() if f != 1) or "-"
        print(f"  along {c['dim']}: sizes {c['sizes']} with {fixed}")
    for dim, cov in data["coverage"].items():
        print(f"two-microkernel combinations cover every {dim} from {cov['all_sizes_from']} to {cov['up_to']}"
              + (f"; not {cov['uncovered_at_or_above_8']}" if cov["uncovered_at_or_above_8"] else ""))
    print(f"catalog {data['catalog']}\nheat map {data['heatmap']}")


def _operator(args):
    import dataclasses

    return dataclasses.replace(_shape(args), prepack=args.prepack)


def _shape(args):
    import dataclasses

    from .operators import BatchMatmul, Conv1d, Conv2d, Depthwise, Depthwise1d, Matmul, get_layer

    if args.groups != 1 and args.op not in ("conv2d", "conv1d"):
        raise TTileError(f"--groups is for conv2d and conv1d (a grouped convolution), not {args.op}")
    if args.layout is not None and args.op != "batch_matmul":
        raise TTileError(f"--layout is for batch_matmul (nn, nt, tn), not {args.op}")
    h = args.H if args.H is not None else args.hw
    w = args.W if args.W is not None else args.hw
    s = args.S if args.S is not None else args.R
    window = f"{h}x{w}-R{args.R}S{s}-s{args.stride}-p{'-'.join(map(str, args.pad))}" + (
        f"-batch{args.batch}" if args.batch != 1 else "")
    if args.op == "batch_matmul":
        missing = [n for n in ("M", "N", "K") if getattr(args, n) is None]
        if args.layer or missing:
            raise TTileError("tune batch_matmul takes --batch B, --M, --N, --K and --layout nn|nt|tn; no --layer" +
                             (f" (missing: {', '.join('--' + m for m in missing)})" if missing else ""))
        layout = args.layout or "nn"
        return BatchMatmul(B=args.batch, M=args.M, N=args.N, K=args.K, layout=layout,
                           name=f"batch_matmul-{args.batch}x{args.M}x{args.N}x{args.K}-{layout}")
    if args.op in ("conv1d", "depthwise1d"):
        fields = ("K", "C", "W") if args.op == "conv1d" else ("C", "W")
        missing = [n for n in fields if getattr(args, n) is None]
        if args.layer or args.H is not None or args.hw is not None or missing or (args.op == "depthwise1d" and args.K):
            raise TTileError(f"tune {args.op} takes {', '.join('--' + f for f in fields)} (the length), --S (or --R) "
                             "taps, --stride, --pad (1, or left,right), --dilation, --batch" +
                             (", --groups; no --layer, --H or --hw" if args.op == "conv1d"
                              else "; no --layer, --H, --hw or --K (the output channels are C)") +
                             (f" (missing: {', '.join('--' + m for m in missing)})" if missing else ""))
        if len(args.pad) > 2:
            raise TTileError(f"{args.op} --pad is one value or left,right, got {','.join(map(str, args.pad))}")
        common = dict(C=args.C, W=args.W, S=s, stride=args.stride, pad=args.pad[0] if len(args.pad) == 1
                      else tuple(args.pad), dilation=args.dilation, N=args.batch)
        tail = (f"-W{args.W}-S{s}-s{args.stride}-p{'-'.join(map(str, args.pad))}"
                + (f"-batch{args.batch}" if args.batch != 1 else ""))
        if args.op == "depthwise1d":
            return Depthwise1d(**common, name=f"depthwise1d-C{args.C}{tail}")
        return Conv1d(K=args.K, groups=args.groups, **common,
                      name=f"conv1d-K{args.K}-C{args.C}{tail}" + (f"-g{args.groups}" if args.groups != 1 else ""))
    if args.op == "depthwise":
        if args.layer or args.K is not None:
            raise TTileError("tune depthwise takes --C and --hw (or --H and --W), --R/--S, --stride, --pad, --dilation, "
                             "--batch; no --layer or --K (the output channels are C)")
        missing = [n for n, v in (("C", args.C), ("H", h), ("W", w)) if v is None]
        if missing:
            raise TTileError("tune depthwise needs --C and --hw (or --H and --W) (missing: " +
                             ", ".join("--" + m for m in missing) + ")")
        return Depthwise(C=args.C, H=h, W=w, R=args.R, S=s, stride=args.stride, pad=args.pad, dilation=args.dilation,
                         N=args.batch, name=f"depthwise-C{args.C}-{window}")
    if args.layer:
        op = get_layer(args.layer)
        if (args.op == "conv2d") != isinstance(op, Conv2d):
            raise TTileError(f"layer {args.layer!r} is not a {args.op}")
        if args.batch != 1:
            if not isinstance(op, Conv2d):
                raise TTileError("--batch is for conv2d and batch_matmul; a matmul's batch of rows is its M")
            op = dataclasses.replace(op, N=args.batch, name=f"{op.name}-batch{args.batch}")
        if args.groups != 1:
            raise TTileError(f"--groups with --layer: {args.layer} is a layer of its own; give the grouped "
                             "convolution's sizes (--K, --C, --hw, --groups)")
        return op
    if args.op == "conv2d":
        missing = [n for n, v in (("K", args.K), ("C", args.C), ("H", h), ("W", w)) if v is None]
        if missing:
            raise TTileError("tune conv2d needs --layer NAME or --K, --C and --hw (or --H and --W) (missing: " +
                             ", ".join("--" + m for m in missing) + ")")
        return Conv2d(K=args.K, C=args.C, H=h, W=w, R=args.R, S=s, stride=args.stride, pad=args.pad,
                      dilation=args.dilation, N=args.batch, groups=args.groups,
                      name=f"conv2d-K{args.K}-C{args.C}-{window}" + (f"-g{args.groups}" if args.groups != 1 else ""))
    if args.batch != 1:
        raise TTileError("--batch is for conv2d, conv1d and batch_matmul; a matmul's batch of rows is its M")
    missing = [n for n in ("M", "N", "K") if getattr(args, n) is None]
    if missing:
        raise TTileError("tune matmul needs --layer NAME or --M, --N and --K (missing: " + ", ".join(
            "--" + m for m in missing) + ")")
    return Matmul(M=args.M, N=args.N, K=args.K, dense=args.dense, name=f"matmul-{args.M}x{args.N}x{args.K}")


def cmd_tune(args) -> int:
    from .measure import MeasureSettings
    from .tune import rpc_runner, tune

    cpu = _cpu(args)
    op = _operator(args)
    if args.strategy == "automcl":
        return _tune_automcl(op, cpu, args)
    runner = None
    if args.rpc_tracker:
        host, port = args.rpc_tracker
        runner = rpc_runner(host, port, args.rpc_key)
    elif not args.json:
        from . import cpu as cpu_mod

        cpu_mod.use_threads(args.threads)  # before the peak's first parallel loop sizes the pool
        print(f"peak     {_peak_status(cpu, args.threads)}", flush=True)
    res = tune(op, cpu, trials=args.trials, seed=args.seed, threads=args.threads, work_dir=args.work_dir,
               sampler=args.sampler, runner=runner, progress=not args.json, verbose=args.verbose,
               sampler_options=_sampler_options(args.sampler_option),
               settings=MeasureSettings().with_confirm_top(args.confirm_top),
               strategy=_strategy(args.strategy),
               strategy_options=_sampler_options(args.strategy_option, "--strategy-option"))
    if args.json:
        d = res.to_json()
        if not args.history:
            d.pop("history")
        print(json.dumps(d, indent=1))
        return 0 if res.verified else 1
    print(f"{res.operator}: best {res.gflops:.1f} GFLOPS = {res.percent_of_peak:.1f}% of the {res.peak_gflops:.0f} "
          f"GFLOPS peak measured at {res.threads} thread{'s' if res.threads > 1 else ''}")
    if res.percent_of_peak > 110:  # a peak cached while the machine was busy reads low: say so
        print(f"warning: {res.percent_of_peak:.0f}% of peak: the cached peak ({res.peak_gflops:.0f} GFLOPS) was probably "
              "measured under load; re-measure it with `tvm-ttile peak --rebuild` on a quiet machine")
    print(f"scheme   {res.scheme}")
    if res.threads > 1 and res.parallel:
        b = res.parallel
        print(f"parallel {b['chunks']} chunks for {b['threads']} threads ({b['kind']}; the threads are busy "
              f"{100 * b['efficiency']:.0f}% of the time if the chunks cost the same)")
    if not res.work_dir:  # --strategy model --trials 0
        print(f"trials   none: the model ranked the drawn schemes and this one was built in {res.seconds:.0f} s "
              "(timed once, for this report only)")
    else:
        print(f"trials   {res.trials} in the database ({res.new_trials} new), {res.seconds:.0f} s wall time")
    print(f"verified {'yes' if res.verified else 'NO'} against numpy (max abs error {res.max_abs_error:.2e})")
    if res.lowering_failures:
        print(f"warning: {len(res.lowering_failures)} drawn schemes could not be lowered, e.g. "
              f"{res.lowering_failures[0]}")
    for note in res.lowering_notes:
        print(f"note: {note}")
    if res.work_dir:
        print(f"records  {res.work_dir} (MetaSchedule JSON database; rerun with --work-dir to resume)")
    return 0 if res.verified else 1


def _number(value: str):
    try:
        return float(value)
    except ValueError:
        return value


def _sampler_options(items, flag: str = "--sampler-option") -> dict:
    """NAME=VALUE strings -> options; numbers and true/false are converted (the sampler checks names and
    types)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise TTileError(f"{flag} takes NAME=VALUE, got {item!r}")
        low = value.lower()
        out[name] = int(value) if value.lstrip("-").isdigit() else (low == "true") if low in ("true", "false") \
            else _number(value)
    return out


def _tune_automcl(op, cpu, args) -> int:
    import dataclasses

    from .automcl.tune import tune_automcl

    res = tune_automcl(op, cpu, trials=args.trials, seed=args.seed, threads=args.threads, work_dir=args.work_dir)
    if args.json:
        print(json.dumps(dataclasses.asdict(res), indent=1))
        return 0 if res.verified else 1
    print(f"{res.operator}: best {res.gflops:.1f} GFLOPS = {res.percent_of_peak:.1f}% of peak with {res.compute} "
          f"{res.config} (M_o, M_t, N_o, N_t, K_t); compute chosen by {res.selected_by}")
    for compute, v in res.per_compute.items():
        print(f"  {compute:5s} {v['gflops']:7.1f} GFLOPS  {v['trials']:3d} trials of a {v['space']}-configuration space")
    print(f"verified {'yes' if res.verified else 'NO'} against numpy (max abs error {res.max_abs_error:.2e}); "
          f"{res.seconds:.0f} s")
    if args.work_dir:
        print(f"records  {args.work_dir} (each compute's measurements; rerun with --work-dir to resume)")
    return 0 if res.verified else 1


def cmd_compare(args) -> int:
    from .compare import SETTINGS, compare, resolve_strategy_options, summary

    from .operators import load_shapes

    systems = args.systems.split(",")
    strategy_options = resolve_strategy_options(systems, _sampler_options(args.strategy_option, "--strategy-option"))
    layers = load_shapes(args.shapes) if args.shapes else args.layers.split(",")
    data = compare(layers, systems, budget=args.budget,
                   ttile_budget=args.ttile_budget, seeds=args.seeds, out_dir=args.out, threads=args.threads,
                   settings=SETTINGS.with_confirm_top(args.confirm_top),
                   baseline_seeds=args.baseline_seeds, retime_rounds=args.retime_rounds, progress=not args.json,
                   prepack=args.prepack, sampler_options=_sampler_options(args.sampler_option),
                   strategy_options=strategy_options, command="tvm-ttile " + " ".join(sys.argv[1:]))
    if args.json:
        print(json.dumps(summary(data), indent=1))
    else:
        with open(f"{args.out}/compare.md") as f:
            print(f.read())
        print(f"curves: {args.out}/convergence.png; all data: {args.out}/compare.json")
    return 0


def cmd_tune_model(args) -> int:
    from .network.model import format_report, tune_model

    try:
        shape = tuple(int(v) for v in args.input_shape.split(",")) if args.input_shape else None
    except ValueError:
        raise TTileError(f"--input-shape takes whole numbers separated by commas, e.g. 1,3,224,224; got "
                         f"{args.input_shape!r}") from None
    if shape is not None and any(v <= 0 for v in shape):
        raise TTileError(f"--input-shape needs positive sizes, got {args.input_shape!r}")
    libs = tuple(v for v in args.libraries.split(",") if v)
    unknown = [v for v in libs if v not in ("onnxruntime", "torch")]
    if unknown:
        raise TTileError(f"--libraries: unknown {', '.join(unknown)}; choose from onnxruntime, torch")
    report = tune_model(args.model, work_dir=args.work_dir, trials_per_task=args.trials_per_task,
                        other_trials=args.other_trials, threads=args.threads, seed=args.seed, input_shape=shape,
                        metaschedule_trials=args.metaschedule_trials, libraries=libs, progress=not args.json, verbose=args.verbose,
                        prepack=not args.no_prepack, dense=args.dense,
                        cache_flush=args.cache_flush,
                        sampler_options=_sampler_options(args.sampler_option), confirm_top=args.confirm_top,
                        strategy=_strategy(args.strategy),
                        strategy_options=_sampler_options(args.strategy_option, "--strategy-option"),
                        in_network_top=args.in_network_top, winograd=args.winograd == "on")
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(format_report(report))
        print(f"records  {report['work_dir']} (MetaSchedule JSON database; rerun with --work-dir to resume); "
              f"report {report['work_dir']}/report.md")
    return 0 if report["correct"] else 1


MAX_THREADS = 1024
THREADS_HELP = ("threads to tune and run with: a number, or 'all' (the physical cores, as MetaSchedule counts "
                "them); schemes get a parallel level for it, and timings are kept per thread count")


def physical_cores() -> int:
    import os

    import psutil

    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def _threads(value):
    """--threads: a whole number in [1, MAX_THREADS] or 'all'; a warning above the cores this host has."""
    if value == "all":
        return physical_cores()
    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"expected a number of threads from 1 to {MAX_THREADS} or 'all', got {value!r}")
    if n > physical_cores():
        print(f"tvm-ttile: warning: {n} threads on a host with {physical_cores()} physical cores: threads will share "
              "cores, and timings will say little", file=sys.stderr)
    return n


def _host_port(value):
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected host:port (e.g. 127.0.0.1:9190), got {value!r}")
    return host, int(port)


def _trials_or_same(value):
    if value == "same":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of trials or 'same', got {value!r}") from None


def _pad(value):
    try:
        pads = tuple(int(v) for v in value.split(","))
    except ValueError:
        pads = ()
    if len(pads) not in (1, 2, 4) or any(v < 0 for v in pads):
        raise argparse.ArgumentTypeError(f"expected 1, 0,3 (height, width) or 0,3,0,3 (top, left, bottom, right) "
                                         f"with whole numbers >= 0, got {value!r}")
    return pads


def _dir(value):
    from .workdir import check_dir

    try:
        return check_dir(value)
    except TTileError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _non_negative(value):
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value!r}")
    return n


CONFIRM_HELP = ("after tuning, time the N fastest candidates of each task again together (3 round-robin rounds) and "
                "keep the fastest then: one slow repeat can bury a good candidate on a shared machine (default 3, or "
                "$TVM_TTILE_CONFIRM_TOP; 0: off; the TVM baselines get the same)")
PREPACK_HELP = ("weights are constants, as in a network: the tuned kernel may read them packed once at build "
                "time, and timing leaves that packing out (tvm_ttile, MetaSchedule and the templates)")


def _add_cpu_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--isa", choices=["avx2", "avx512", "neon"], help="force a narrower ISA of the host")
    g.add_argument("--target", help='a TVM llvm target as JSON, e.g. \'{"kind":"llvm","mcpu":"x86-64-v3"}\'')


def _parents():
    """The options several commands share, declared once: (output, tuning)."""
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print the result as JSON")
    output.add_argument("--verbose", action="store_true",
                        help="MetaSchedule's log while tuning, and the traceback of an unexpected error")
    tuning = argparse.ArgumentParser(add_help=False)
    tuning.add_argument("--threads", type=_threads, default=1, help=THREADS_HELP)
    tuning.add_argument("--confirm-top", type=_non_negative, metavar="N", help=CONFIRM_HELP)
    tuning.add_argument("--sampler-option", action="append", default=[], metavar="NAME=VALUE",
                        help="an option of tvm_ttile's sampler, e.g. min_reuse=32, weights_first=0.5, "
                             "parallel=balanced (tune-model's defaults: weights_first=0.5, reduction_inner=0.5, "
                             "parallel_dims=rows)")
    return output, tuning


def _add_strategy_option(p) -> None:
    """tune's and tune-model's --strategy-option (compare has its own, per system: one Action object shared
    through a parent parser cannot be redefined in one subcommand without changing it in the others)."""
    p.add_argument("--strategy-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an option of the search strategy: any: in_place_variants=0.2 (share of the "
                        "trials spent last on the fastest schemes again with a padded input read in place; 0 in "
                        "networks); random (the default): none; model: pool=2000 (schemes drawn and ranked), "
                        "ranker=committee|learned|time|polydl, online=true, explore=0.1; gbfs: rho=5, starts=8; "
                        "na2c: steps=3, tau=0.5, ...")


def _strategy(name: str | None) -> str | None:
    """The strategies module's name of a --strategy choice (ttile: the paper's draws, measured as drawn; None: the
    command's default)."""
    return {"ttile": "random"}.get(name, name)


def make_parser():
    from .microkernels.spec import FAMILIES
    from .models.zoo import MODELS

    parser = argparse.ArgumentParser(prog="tvm-ttile", description="TTile's structured autotuning space for TVM")
    sub = parser.add_subparsers(dest="command", required=True)
    output, tuning = _parents()
    p = sub.add_parser("peak", help="measure (once, then cached) the fp32 peak and memory bandwidth", parents=[output])
    p.add_argument("--rebuild", action="store_true", help="measure again instead of reading the cache")
    p.add_argument("--threads", type=_threads, default=1, help="the peak and memory bandwidth of this many threads")
    _add_cpu_args(p)
    p.set_defaults(func=cmd_peak)
    p = sub.add_parser("microkernels", help="build (once, then cached) and show the microkernel catalog",
                       parents=[output])
    p.add_argument("--op", choices=[*FAMILIES, "all"], default="all")
    p.add_argument("--rebuild", action="store_true", help="measure every candidate again")
    p.add_argument("--threshold", type=float, default=0.80, help="keep kernels at >= this fraction of peak")
    p.add_argument("--top", type=int, default=15, help="rows of the kept list to print")
    _add_cpu_args(p)
    p.set_defaults(func=cmd_microkernels)

    p = sub.add_parser("tune", help="tune one conv2d or conv1d (grouped too), depthwise conv2d or conv1d, matmul or "
                       "batch matmul in the structured space", parents=[output, tuning])
    p.add_argument("op", choices=["conv2d", "depthwise", "conv1d", "depthwise1d", "matmul", "batch_matmul"])
    p.add_argument("--layer", help="a named layer, e.g. ResNet18-2, Yolo9000-12, bert-qkv")
    for name, helptext in (("K", "output channels (conv2d) / reduction size (matmul)"), ("C", "input channels"),
                           ("H", "input height"), ("W", "input width (conv1d, depthwise1d: length)"), ("hw", "input height = width (shorthand)"),
                           ("M", "rows"), ("N", "columns")):
        p.add_argument(f"--{name}", type=int, help=helptext)
    p.add_argument("--R", type=int, default=3, help="kernel height (default 3)")
    p.add_argument("--S", type=int, help="kernel width (default: --R)")
    p.add_argument("--stride", type=int, default=1)
    p.add_argument("--pad", type=_pad, default=(0,), help="1 (all sides), 0,3 (height, width) or 0,3,0,3 (top, "
                   "left, bottom, right)")
    p.add_argument("--dilation", type=int, default=1)
    p.add_argument("--batch", type=int, default=1, help="conv2d / conv1d batch (the parallel level may split it), "
                   "batch_matmul's number of matrices")
    p.add_argument("--groups", type=int, default=1, help="conv2d / conv1d groups: C/groups input channels per group "
                   "of K/groups outputs (ResNeXt); groups = C = K is `tune depthwise` / `tune depthwise1d`")
    p.add_argument("--layout", choices=["nn", "nt", "tn"], help="batch_matmul operands: nn A[B,M,K] x B[B,K,N]; nt "
                   "the second stored [B,N,K] (Q x K^T); tn the first stored [B,K,M]")
    p.add_argument("--dense", action="store_true", help="matmul with weights stored W[N,K]")
    p.add_argument("--prepack", action="store_true", help=PREPACK_HELP)
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--seed", type=_non_negative, default=0)
    p.add_argument("--sampler", default="ttile", help="ttile (paper 6.1), single, combined, levels")
    p.add_argument("--strategy", choices=["ttile", "model", "gbfs", "na2c", "automcl"], default="ttile",
                   help="ttile: the structured space, schemes measured as drawn; model: the structured space, a "
                        "pool of drawn schemes ranked before measuring (with --trials 0: build the top-ranked "
                        "one, no candidate timed); gbfs, na2c: the structured space walked from measured schemes "
                        "to their neighbours (G-BFS, N-A2C); automcl: AutoMCL's computes and analytic space (dense)")
    p.add_argument("--work-dir", type=_dir, help="MetaSchedule database directory (resumes if it exists)")
    p.add_argument("--rpc-tracker", type=_host_port, help="host:port of a TVM RPC tracker to measure on")
    p.add_argument("--rpc-key", default="local", help="device key at the RPC tracker")
    p.add_argument("--history", action="store_true", help="with --json: every trial's scheme and GFLOPS")
    _add_cpu_args(p)
    _add_strategy_option(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("tune-model", help="tune and compile a whole network (Relax) and compare it",
                       parents=[output, tuning])
    p.add_argument("model", help=", ".join(MODELS) + ", or a path to an .onnx file")
    p.add_argument("--input-shape", help="NCHW input shape when the model's is dynamic, e.g. 1,3,224,224")
    p.add_argument("--trials-per-task", type=int, default=50, help="tvm_ttile trials per conv2d/matmul task")
    p.add_argument("--other-trials", type=int, default=16,
                   help="MetaSchedule trials per other task (pooling, layout, ...), beside tvm_ttile's few "
                        "memory-bound schedules; 0: default build")
    p.add_argument("--seed", type=_non_negative, default=0)
    p.add_argument("--work-dir", type=_dir, help="database and report directory (default tune_<model>; resumes)")
    p.add_argument("--metaschedule-trials", type=_trials_or_same, default=0,
                   help="also tune the network with MetaSchedule's tune_relax for this many trials in all "
                        "('same': as many as tvm_ttile measured)")
    p.add_argument("--libraries", default="onnxruntime,torch", help="library references to time (optional extras)")
    p.add_argument("--strategy", choices=["ttile", "model", "gbfs", "na2c"], default=None,
                   help="how conv2d/matmul tasks pick what to measure: model (the default: a pool of drawn schemes "
                        "ranked by the cost model first, measured from the top; see --strategy-option), ttile "
                        "(schemes measured as drawn), gbfs or na2c (walks from measured schemes to their "
                        "neighbours)")
    p.add_argument("--dense", choices=["tvm_ttile", "automcl"], default="tvm_ttile",
                   help="who tunes dense layers (matmul by constant weights): tvm_ttile's space, or AutoMCL's "
                        "computes with the classifier's pick (--trials-per-task trials per shape)")
    p.add_argument("--cache-flush", nargs="?", choices=["on", "weights", "off"], const="on", default="on",
                   help="time tvm_ttile's candidates with the CPU caches flushed, as a layer meets its weights in the "
                        "network (default on: builds tuned so ran level with or faster than builds tuned hot, "
                        "tuned in 0.6x the time); weights: only the weights and the output flushed, the input and "
                        "residuals kept in cache")
    p.add_argument("--no-prepack", action="store_true",
                   help="keep the model's weight layout (default: pack conv2d/matmul weights once at build time)")
    p.add_argument("--in-network-top", type=_non_negative, metavar="N", default=0,
                   help="after tuning, time each conv2d/matmul task's N fastest candidates inside the running "
                        "network and build with the fastest there (default 0: tuning's pick; the report then also "
                        "says how well each way of timing candidates alone ranks them as the network does)")
    p.add_argument("--winograd", choices=["on", "off"], default=WINOGRAD_DEFAULT,
                   help="also compute each 3x3 stride-1 conv2d with Winograd F(2,3) and F(4,3) and build, layer by "
                        "layer, whichever form measured faster (default on); off: direct convolutions only")
    _add_strategy_option(p)
    p.set_defaults(func=cmd_tune_model)

    from .baselines import SYSTEMS
    from .compare import DEFAULT_SYSTEMS

    p = sub.add_parser("compare", help="tune layers with tvm_ttile and the baselines side by side",
                       parents=[output, tuning])
    p.add_argument("--strategy-option", action="append", default=[], metavar="[SYSTEM:]NAME=VALUE",
                   help="an option of a system's search: gbfs:starts=8 (that system's), or rho=8 (every chosen "
                        "system whose search has it: " + "; ".join(
                            f"{n}: {', '.join(s.strategy_options())}" for n, s in SYSTEMS.items()
                            if s.strategy_options()) + ")")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--layers", default="ResNet18-2,Yolo9000-12", help="named layers, comma separated")
    g.add_argument("--shapes", metavar="FILE", help='a JSON file of your own shapes: {"layers": [{"name": "my-conv", '
                   '"op": "conv2d", "K": 64, "C": 64, "H": 56, "W": 56, "R": 3, "S": 3, "stride": 1, "pad": [1, 1]}, '
                   '{"name": "my-mm", "op": "matmul", "M": 128, "N": 768, "K": 768}]}')
    p.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                   help=", ".join(name + (f" ({system.operators[0]} only)" if len(system.operators) == 1 else "")
                                  for name, system in SYSTEMS.items()))
    p.add_argument("--budget", type=int, default=200, help="trials per tuner, layer and seed")
    p.add_argument("--ttile-budget", type=int, help="trials for tvm_ttile (default: --budget)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per tuner (tvm_ttile; baselines too by default)")
    p.add_argument("--baseline-seeds", type=int, help="seeds for the TVM baselines (default: --seeds)")
    p.add_argument("--retime-rounds", type=int, default=3,
                   help="round-robin rounds timing every best side by side after tuning (0: no re-timing)")
    p.add_argument("--out", type=_dir, default="compare", help="results directory (resumes from its work/ databases)")
    p.add_argument("--prepack", action="store_true", help=PREPACK_HELP + "; AutoMCL's computes still pack in the "
                   "timed function, as in its paper, and libraries pack on every call")
    p.set_defaults(func=cmd_compare)
    return parser


class _Interrupt:
    """Whether Ctrl-C was pressed: TVM turns a KeyboardInterrupt raised inside its callbacks into a RuntimeError."""
    seen = False

    @classmethod
    def handler(cls, signum, frame):
        cls.seen = True
        signal.default_int_handler(signum, frame)


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _Interrupt.handler) if on_main else None
    _Interrupt.seen = False
    try:
        return _run(args)
    finally:
        if on_main:
            signal.signal(signal.SIGINT, previous)


def _run(args) -> int:
    try:
        try:
            return args.func(args)
        except Exception:
            if _Interrupt.seen:
                raise KeyboardInterrupt from None
            raise
    except TTileError as e:
        print(f"tvm-ttile: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        work = getattr(args, "work_dir", None) or getattr(args, "out", None)
        print("tvm-ttile: interrupted; every finished measurement is kept" +
              (f" in {work}: run the same command again to resume" if work else
               " (pass --work-dir to be able to resume)"), file=sys.stderr)
        return 130
    except Exception as e:  # not an input error tvm_ttile knows: one line, the traceback with --verbose
        if getattr(args, "verbose", False):
            raise
        lines = str(e).strip().splitlines()
        print(f"tvm-ttile: error: {type(e).__name__}: {lines[-1] if lines else ''} (unexpected; run again with "
              "--verbose for the traceback and report it)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
