"""What each `tvm-ttile` subcommand does (parser.py wires them to their arguments)."""
from __future__ import annotations

import json
import sys

from ..errors import TTileError
from .arguments import parse_options, strategy_name


def _cpu(args):
    from .. import cpu

    if getattr(args, "target", None):
        return cpu.from_target(args.target)
    return cpu.detect_host(getattr(args, "isa", None))


def cmd_peak(args) -> int:
    from .. import cpu as cpu_mod

    from .. import limits
    from ..microkernels.catalog import rethreshold
    from ..microkernels.spec import FAMILIES

    from ..precision import get as get_precision, require

    cpu = _cpu(args)
    require(args.precision, cpu)  # a precision the CPU lacks: one line
    unit = get_precision(args.precision).unit
    # Measured now (a capacity: the cache keeps the best), so that a peak cached in a busy moment gets truer.
    res = cpu_mod.peak(cpu, rebuild=args.rebuild, threads=args.threads, remeasure=cpu_mod.runs_here(cpu),
                       precision=args.precision)
    res["cache"] = str(cpu_mod.peak_path(cpu, args.threads, args.precision))
    if args.threads == 1:  # the catalogs are measured at 1 thread
        for op in FAMILIES:
            rethreshold(cpu, op, precision=args.precision)
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"CPU      {res['cpu']}  ({res['isa']}, {res['lanes_fp32']} fp32 lanes, "
              f"{res['vector_registers']} vector registers)")
        print(f"caches   L1d {res['l1d_bytes'] // 1024} KiB, L2 {res['l2_bytes'] // 1024} KiB, "
              f"L3 {res['l3_bytes'] // 1024 // 1024} MiB")
        n = res.get("threads", 1)
        print(f"peak     {res['peak_gflops']:.1f} {unit} {args.precision}, {n} thread{'s' if n > 1 else ''} (median "
              f"repeat {res['median_gflops']:.1f}; {res['accumulators']} chains of {res.get('instruction', 'FMA')} "
              f"per thread built through TVM, target {json.dumps(res['target'])})")
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
    from ..microkernels.catalog import build_catalog, catalog_path
    from ..microkernels.heatmap import write_heatmap
    from ..microkernels.spec import FAMILIES, REDUCED_OPS

    from ..precision import get as get_precision, require

    cpu = _cpu(args)
    require(args.precision, cpu)  # a precision the CPU lacks: one line
    ops = list(FAMILIES) if args.op == "all" else [args.op]
    if args.precision != "fp32":
        ops = [op for op in ops if op in REDUCED_OPS]
        if not ops:
            raise TTileError(f"{args.precision} microkernels exist for {', '.join(REDUCED_OPS)}, not {args.op}")
    report = {}
    for op in ops:
        cat = build_catalog(cpu, op, threshold=args.threshold, rebuild=args.rebuild, precision=args.precision)
        path = catalog_path(cpu, op, args.precision)
        heat = write_heatmap(cat, path.with_suffix(".png"))
        data = cat.to_json()
        data.pop("entries")
        data.update(catalog=str(path), heatmap=heat)
        report[op] = data
    if args.json:
        print(json.dumps(report if len(ops) > 1 else report[ops[0]], indent=1))
        return 0
    print(f"peak     {_peak_status(cpu, 1, args.precision)}")
    for op, data in report.items():
        _print_catalog(op, data, args.top, get_precision(args.precision).unit)
    return 0


def _peak_status(cpu, threads: int, precision: str = "fp32") -> str:
    """The peak in use, when it was measured and what this run (or the last one) measured: one line."""
    from .. import cpu as cpu_mod
    from .. import limits

    run = cpu_mod.run_peak(cpu, threads=threads, precision=precision) if cpu_mod.runs_here(cpu) else None
    return limits.status(cpu_mod.peak(cpu, threads=threads, precision=precision), run)


def _print_catalog(op, data, top, unit: str = "GFLOPS"):
    kept = data["kept"]
    print(f"\n== {op} microkernels on {data['cpu']['cpu']} ({data['cpu']['isa']}), 1 thread ==")
    print(f"peak {data['peak_gflops']:.1f} {unit}; {data['candidates']} candidates measured in {data['seconds']:.0f} s; "
          f"{len(kept)} kept at >= {100 * data['threshold']:.0f}% of peak; reduction loop {data['reduction_length']}")
    print(f"{'microkernel':58s} {unit:>8s} {'% peak':>7s}")
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

    from ..operators import at_precision

    # (a reduced precision's weights are always constants, packed at build time: --prepack changes nothing)
    return at_precision(dataclasses.replace(_shape(args), prepack=args.prepack), args.precision)


def _shape(args):
    import dataclasses

    from ..operators import BatchMatmul, Conv1d, Conv2d, Depthwise, Depthwise1d, Matmul, get_layer

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
    from ..measure import MeasureSettings
    from ..precision import get as get_precision
    from ..tune import rpc_runner, tune

    cpu = _cpu(args)
    op = _operator(args)
    if args.strategy == "automcl":
        return _tune_automcl(op, cpu, args)
    runner = None
    if args.rpc_tracker:
        host, port = args.rpc_tracker
        runner = rpc_runner(host, port, args.rpc_key)
    elif not args.json:
        from .. import cpu as cpu_mod

        cpu_mod.use_threads(args.threads)  # before the peak's first parallel loop sizes the pool
        print(f"peak     {_peak_status(cpu, args.threads, op.precision)}", flush=True)
    res = tune(op, cpu, trials=args.trials, seed=args.seed, threads=args.threads, work_dir=args.work_dir,
               sampler=args.sampler, runner=runner, progress=not args.json, verbose=args.verbose,
               sampler_options=parse_options(args.sampler_option),
               settings=MeasureSettings().with_confirm_top(args.confirm_top),
               strategy=strategy_name(args.strategy),
               strategy_options=parse_options(args.strategy_option, "--strategy-option"))
    if args.json:
        d = res.to_json()
        if not args.history:
            d.pop("history")
        print(json.dumps(d, indent=1))
        return 0 if res.verified else 1
    unit = get_precision(op.precision).unit
    print(f"{res.operator}: best {res.gflops:.1f} {unit} = {res.percent_of_peak:.1f}% of the {res.peak_gflops:.0f} "
          f"{unit} {op.precision} peak measured at {res.threads} thread{'s' if res.threads > 1 else ''}")
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


def _tune_automcl(op, cpu, args) -> int:
    import dataclasses

    from ..automcl.tune import tune_automcl

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
    from ..compare import SETTINGS, compare, resolve_strategy_options, summary

    from ..operators import load_shapes

    systems = args.systems.split(",")
    strategy_options = resolve_strategy_options(systems, parse_options(args.strategy_option, "--strategy-option"))
    layers = load_shapes(args.shapes) if args.shapes else args.layers.split(",")
    data = compare(layers, systems, budget=args.budget,
                   ttile_budget=args.ttile_budget, seeds=args.seeds, out_dir=args.out, threads=args.threads,
                   settings=SETTINGS.with_confirm_top(args.confirm_top),
                   baseline_seeds=args.baseline_seeds, retime_rounds=args.retime_rounds, progress=not args.json,
                   prepack=args.prepack, sampler_options=parse_options(args.sampler_option),
                   strategy_options=strategy_options, command="tvm-ttile " + " ".join(sys.argv[1:]))
    if args.json:
        print(json.dumps(summary(data), indent=1))
    else:
        with open(f"{args.out}/compare.md") as f:
            print(f.read())
        print(f"curves: {args.out}/convergence.png; all data: {args.out}/compare.json")
    return 0


def cmd_tune_model(args) -> int:
    from ..context import Context
    from ..network.model import format_report, tune_model
    from ..network.search import Comparisons, NetworkSearch

    try:
        shape = tuple(int(v) for v in args.input_shape.split(",")) if args.input_shape else None
    except ValueError:
        raise TTileError(f"--input-shape takes whole numbers separated by commas, e.g. 1,3,224,224; got "
                         f"{args.input_shape!r}") from None
    if shape is not None and any(v <= 0 for v in shape):
        raise TTileError(f"--input-shape needs positive sizes, got {args.input_shape!r}")
    compare = Comparisons(metaschedule_trials=args.metaschedule_trials,
                          libraries=tuple(v for v in args.libraries.split(",") if v), fp32_model=args.fp32_model)
    search = NetworkSearch(trials_per_task=args.trials_per_task, other_trials=args.other_trials, dense=args.dense,
                           budget=args.budget, memory_bound=args.memory_bound == "on", library=False if args.fresh else None,
                           strategy=strategy_name(args.strategy), winograd=args.winograd == "on",
                           sampler_options=parse_options(args.sampler_option),
                           strategy_options=parse_options(args.strategy_option, "--strategy-option"),
                           in_network_top=args.in_network_top)
    context = Context.make(threads=args.threads, seed=args.seed, prepack=not args.no_prepack, precision=args.precision)
    report = tune_model(args.model, context, search=search, compare=compare, work_dir=args.work_dir,
                        input_shape=shape, progress=not args.json, verbose=args.verbose,
                        cache_flush=args.cache_flush, confirm_top=args.confirm_top)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print(format_report(report))
        print(f"records  {report['work_dir']} (MetaSchedule JSON database; rerun with --work-dir to resume); "
              f"report {report['work_dir']}/report.md")
    return 0 if report["correct"] else 1
