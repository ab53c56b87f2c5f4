"""`tvm-ttile tune-model`: import a network, tune it with tvm_ttile, build it, check it, compare it.

    report = tune_model("resnet18", work_dir="rn18", trials_per_task=50)

Correctness: the tuned network's output is compared with the untuned Relax build (the reference), ONNX
Runtime and torch on one random input; each must agree within TOLERANCE x max|reference|. Latencies of
every system are measured each in a fresh process of its own (tvm_ttile.isolated: a library's thread pool left in
this process would disturb the next system timed), round-robin over ROUNDS rounds, with the same thread count.
The run is a sequence of phases, each a function below: tune, build (with the in-network picks), the optional
MetaSchedule network, the libraries, timing, and the report (report.py).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import numpy as np

from .. import cpu as cpu_mod
from ..context import Context, resolve
from ..errors import TTileError
from ..phases import phase, recording
from ..precision import get as get_precision
from ..isolated import IsolatedTimer, Saved
from ..measure import MeasureSettings
from ..relax import extract_tasks, prepare, quantized
from ..relax.bf16 import Bf16Report
from ..baselines.engines import reduced_float_precision
from ..workdir import WorkDir, append_journal
from ..winograd import apply as winograd_apply, saved_choices as winograd_choices
from .build import build_executable, build_network, run, vm_of
from .defaults import CACHE_STATES, network_sampler_options
from .in_network import IN_NETWORK_ROUNDS, alone_times, forget_picks, pick_in_network
from .policy import create as create_policy
from .profile import profile, spread
from .report import REPEATS, ROUNDS, TOLERANCE, check_report, format_report, in_network_summary
from .search import Comparisons, NetworkSearch, refuse_unknown, take
from .tune import tune_network, uses_library

__all__ = ["REPEATS", "ROUNDS", "TOLERANCE", "check_report", "format_report", "latency_rounds", "tune_model"]


def latency_rounds() -> int:
    """ROUNDS, or $TVM_TTILE_LATENCY_ROUNDS (e.g. 1 for quick runs: the tests)."""
    value = os.environ.get("TVM_TTILE_LATENCY_ROUNDS", str(ROUNDS))
    if not value.isdigit() or int(value) < 1:
        raise TTileError(f"TVM_TTILE_LATENCY_ROUNDS must be a whole number >= 1, got {value!r}")
    return int(value)


def tune_model(source, context: Context | None = None, *, search: NetworkSearch | None = None,
               compare: Comparisons | None = None, work_dir: str | None = None, input_shape=None, progress=True,
               verbose=False, cache_flush="on", **options) -> dict:
    """Tune, build, check and time a network (see the module doc): `source` a built-in model's name or an ONNX
    file. `search` (NetworkSearch: trials, strategy, sampler, Winograd, in-network picks) says how its tasks are
    tuned and `compare` (Comparisons: MetaSchedule's trials, the libraries) what it is timed against; either may
    be given field by field instead (trials_per_task=50, libraries=("onnxruntime",), ...). `context` (or
    threads=, seed=, prepack=, confirm_top= one by one) gives the CPU, threads, seed and prepacking; its timing
    settings come from `cache_flush`, the caches tvm_ttile's candidates are timed in (defaults.CACHE_STATES: "on"
    or True, every argument but the input flushed, the default, docs/decisions.md says why; "weights", only the
    weights and the output; "off" or False, hot). `work_dir`: where records go (default tune_<model>)."""
    from ..models.importers import load_model

    search = take(NetworkSearch, search, options)
    compare = take(Comparisons, compare, options)
    confirm_top = options.pop("confirm_top", None)
    loose = {k: options.pop(k) for k in ("threads", "seed", "prepack", "precision") if k in options}
    refuse_unknown("tune_model", options)
    cache_flush = {True: "on", False: "off"}.get(cache_flush, cache_flush)
    if cache_flush not in CACHE_STATES:
        raise TTileError(f"cache_flush={cache_flush!r}: one of {', '.join(map(repr, CACHE_STATES))}")
    # TVM's thread pool, ONNX Runtime and torch all get `threads` (Context.make sizes TVM's)
    settings = CACHE_STATES[cache_flush].with_confirm_top(confirm_top)
    with recording() as clock:
        with phase("import"):
            ctx = resolve(context, {}, settings=settings, **loose)
            ctx.check_runs_here()
        seed = ctx.seed
        with phase("import"):
            net = load_model(source, input_shape, seed=seed)
            # a bf16 build is held against the fp32 model itself
            fp32_source = compare.fp32_model or (source if ctx.precision == "bf16" else None)
            fp32_net = load_model(fp32_source, tuple(net.input_shape), seed=seed) if fp32_source else None
            ctx = ctx.replace(work_dir=work_dir or ctx.work_dir or f"tune_{net.name}")
            integer, bf16 = quantized.IntegerReport(), Bf16Report()
            mod = prepare(net.mod, ctx.cpu, quantized_report=integer, precision=ctx.precision, bf16_report=bf16)
        check_precision(ctx.precision, integer, net.name)
        ctx = quantized.context_for(mod, ctx)  # a QDQ model's int8 tasks: the CPU's int8 instruction (or one line)
        for layer, why in integer.kept_fp32 + bf16.kept_fp32:
            print(f"warning: {layer} stays fp32: {why}", file=sys.stderr)
        floats = quantized.float_nodes(net.onnx_model) if integer.integer else []
        if floats:
            print(f"warning: {len(floats)} nodes of the quantized model compute in fp32 on dequantized values: "
                  f"{', '.join(floats)}", file=sys.stderr)
        start = time.time()
        tuned = tune_network(mod, ctx, search=search, progress=progress, verbose=verbose)
        wall = time.time() - start
        x = np.random.default_rng(seed).standard_normal(net.input_shape).astype(np.float32)
        executables, picked = build_with_picks(mod, ctx, x, search.in_network_top, progress)
        vm = vm_of(executables["tvm_ttile"])
        with phase("reference build"):
            outputs = {"tvm_ttile": run(vm, x), "untuned": run(build_network(mod, None, ctx), x)}
        notes = run_notes(tuned, ctx, cache_flush, picked, search.in_network_top, search.dense)
        metaschedule_trials = compare.metaschedule_trials
        if metaschedule_trials == "same":  # the trials tvm_ttile's run measured, all tasks together
            metaschedule_trials = sum(t.trials for t in tuned.tasks)
        ms_info = None
        if metaschedule_trials:
            with phase("metaschedule network"):
                ms_info = metaschedule_network(net, ctx, metaschedule_trials, executables, outputs, x)
        with phase("profile"):
            inside = profile(vm, x)  # where the tuned network's time goes, call by call
            alone = alone_times(executables["tvm_ttile"], vm, x)  # the same functions alone, hot and cold
        with phase("library timings"):
            latencies, versions, rounds = time_systems(net, ctx, x, executables, compare.libraries, outputs, notes)
        with phase("peaks"):
            bandwidth = cpu_mod.run_peak(ctx.cpu, threads=ctx.threads).get("bandwidth_gbs")
        report = {
            "model": net.name, "input_shape": list(net.input_shape), "threads": ctx.threads,
            "peak_gflops": tuned.peak_gflops, "machine": ctx.cpu.describe(), "work_dir": ctx.work_dir,
            "trials_per_task": search.trials_per_task, "budget": search.budget, "budget_rounds": tuned.rounds,
        "from_library": sum(t.from_library for t in tuned.tasks), "library": uses_library(search),
        "memory_bound": search.memory_bound,
            "sampler_options": network_sampler_options(search.sampler_options),
            "strategy": search.strategy, "strategy_options": dict(search.strategy_options),
            "other_trials": search.other_trials, "dense": search.dense, "seed": seed, "confirm_top": ctx.settings.confirm_top, "cache_flush": cache_flush,
            "tuning_seconds": sum(t.tuning_seconds for t in tuned.tasks), "wall_seconds": wall,
            "tasks": [vars(t) for t in tuned.tasks], "versions": versions, "metaschedule": ms_info, "notes": notes,
            "date": time.strftime("%Y-%m-%d %H:%M"), "in_network": in_network_summary(tuned.tasks, inside, alone),
            "latency_rounds": rounds, "in_network_top": search.in_network_top, "in_network_picks": picked,
            "bandwidth_gbs": bandwidth,
            "winograd": winograd_choices(ctx.work_dir), "precision": ctx.precision,
            "int8": {"integer": integer.integer, "kept_fp32": [list(k) for k in integer.kept_fp32],
                     "float_nodes": floats},
            "bf16": {"bf16": bf16.bf16, "kept_fp32": [list(k) for k in bf16.kept_fp32]}}
        step = quantized.output_step(net.onnx_model) if integer.integer else None
        # bf16: the libraries compute in other precisions; dynamic int8 (no output step): an activation quantized per
        # inference rounds one step apart where the fp32 values before it differ in their last bits (a softmax, a
        # LayerNorm computed otherwise), so the libraries are reported beside it, and their spread is the tolerance
        dynamic = bool(integer.integer) and not step
        # an engine whose float layers compute in bf16 (OpenVINO's default here) is reported beside an fp32 build
        reduced = {name for name, version in versions.items() if reduced_float_precision(version)}
        report.update(accuracy(outputs, tuned, step, own_build_only=ctx.precision == "bf16" or dynamic,
                               tolerance=get_precision(ctx.precision).network_tolerance, spread=dynamic, beside=reduced))
        if step:  # a QDQ model: tvm_ttile's output against the others' in units of the output's quantization step
            report["int8_agreement"] = {other: quantized.agreement(outputs["tvm_ttile"], out, step)
                                        for other, out in outputs.items() if other != "tvm_ttile"}
        report.update(rates(latencies, tuned))
        if fp32_net is not None:
            with phase("fp32 agreement"):
                report["against_fp32"] = {"model": fp32_source,
                                          **fp32_agreement(fp32_net, net, ctx, vm, x, compare.libraries)}
        with phase("report"):
            report["phases"] = clock.to_json()
            with open(ctx.dirs.report_json, "w") as f:
                json.dump(report, f, indent=1)
            with open(ctx.dirs.report_md, "w") as f:
                f.write(format_report(report))
        append_journal(WorkDir(ctx.work_dir).phases, {"run": "tune_model", **report["phases"]})
        return report


def build_with_picks(mod, ctx: Context, x, in_network_top: int, progress) -> tuple:
    """The tuned build, and with `in_network_top` >= 2 the build of the candidates fastest inside the running
    network ({"tvm_ttile": Executable}, the picks)."""
    from ..metaschedule import open_database
    from ..progress import Progress

    forget_picks(ctx.work_dir)  # made again below, among the records as they are now
    with phase("final build"):
        executables = {"tvm_ttile": build_executable(mod, ctx.work_dir, ctx)}
    picked = {}
    if in_network_top >= 2:
        tasks = extract_tasks(winograd_apply(mod, ctx.work_dir)[0], ctx)  # the built functions
        bar = Progress(len(tasks), "timing candidates in the network") if progress else None
        with phase("in-network picks"):
            picked = pick_in_network(vm_of(executables["tvm_ttile"]), tasks, open_database(ctx.work_dir),
                                     ctx.target, x, ctx.work_dir, in_network_top, IN_NETWORK_ROUNDS, progress=bar)
        if bar:
            bar.close()
        if picked:
            with phase("final build"):
                executables["tvm_ttile"] = build_executable(mod, ctx.work_dir, ctx)
    return executables, picked


def run_notes(tuned, ctx: Context, cache_flush: str, picked: dict, in_network_top: int, dense: str) -> list:
    """What a reader of the report must know about how the run was made."""
    import tvm

    notes = []
    untuned = [t.name for t in tuned.tasks if create_policy(t.policy).structured and not t.trials and t.built
               and not t.ranked]
    if untuned:  # some tasks failed (every one failing is an error in tune_network): say so at the top
        notes.append(f"warning: {len(untuned)} conv2d/matmul task(s) have no successful measurement and run untuned: "
                     f"{', '.join(untuned)}")
    threads = ctx.threads
    if threads > 1 and tvm.runtime.num_threads() < threads:  # TVM sizes its pool once per process
        notes.append(f"warning: TVM's thread pool in this process holds {tvm.runtime.num_threads()} threads, not "
                     f"{threads} (it was sized before tvm_ttile could): set TVM_NUM_THREADS={threads} before the "
                     "first TVM call; the latencies below are not at the asked thread count")
    if cache_flush == "on":
        notes.append("tvm_ttile's tasks were timed with the CPU caches flushed before every call (weights cold, as "
                     "in the network); MetaSchedule's with its default, hot caches")
    elif cache_flush == "weights":
        notes.append("tvm_ttile's tasks were timed with their weights and output flushed from the CPU caches before "
                     "every call, the input and any residual kept in cache (as the previous layers leave them); "
                     "MetaSchedule's with its default, hot caches")
    if picked:
        changed = sum(e["picked"] != 0 for e in picked.values())
        notes.append(f"each tvm_ttile task's {in_network_top} fastest candidates (by tuning time) timed inside the "
                     f"running network ({IN_NETWORK_ROUNDS} rounds); the build takes the fastest there: another than "
                     f"tuning's pick for {changed} of {len(picked)} tasks (in_network.jsonl)")
    notes.append("conv2d/matmul weights prepacked once at build time (tvm_ttile and MetaSchedule)" if ctx.prepack else
                 "weights not prepacked (--no-prepack): kernels read the model's layout")
    confirm_top = ctx.settings.confirm_top
    notes.append(f"each task's {confirm_top} fastest candidates timed again together ({ctx.settings.confirm_rounds} "
                 "rounds) after tuning, the fastest then kept (tvm_ttile and MetaSchedule alike)" if confirm_top >= 2
                 else "no re-timing of the fastest candidates (--confirm-top 0)")
    rewritten = [t.name for t in tuned.tasks if create_policy(t.policy).rewritten and t.built]
    if rewritten:
        notes.append(f"{len(rewritten)} task(s) computed with Winograd (fewer multiplications than the direct "
                     "convolutions' GFLOP counted here: a % of peak above 100 is possible); the tasks they replace "
                     "are listed as not built")
    if not tuned.tasks or not any(t.trials for t in tuned.tasks):
        ranked = sum(t.ranked for t in tuned.tasks)
        notes.append(f"zero trials: {ranked} conv2d/matmul task(s) built with the ranker's top scheme, each verified "
                     "against its untuned function and never timed; no Winograd (no measurement to choose by), the "
                     "other tasks as written")
    library = [t.name for t in tuned.tasks if t.from_library]
    if library:
        notes.append(f"{len(library)} task(s) took their records from the record library (tuned in an earlier run "
                     f"on this CPU, target, threads and precision), not measured here: {', '.join(library)}")
    if dense == "automcl":
        notes.append("dense layers tuned by AutoMCL (its computes pack inside the kernel, every call); their "
                     "epilogues are separate elementwise tasks")
    return notes


def metaschedule_network(net, ctx: Context, trials: int, executables: dict, outputs: dict, x) -> dict:
    """MetaSchedule's own tuning of the network, `trials` in all: built into `executables`, run into
    `outputs`; returns its trials and tuning seconds."""
    from ..baselines.tvm_tuners import tune_network_metaschedule

    # MetaSchedule gets the network as TVM prepares it: padding outputs to whole vectors is tvm_ttile's choice
    # (and MetaSchedule's schedules of the padded network's sliced tasks computed wrong results on MobileNet-v2).
    ms_mod = prepare(net.mod, ctx.cpu, whole_vectors=False)
    db, secs = tune_network_metaschedule(ms_mod, ctx.cpu, ctx.dirs.metaschedule, trials,
                                         ctx.threads, ctx.seed, prepack=ctx.prepack,
                                         settings=MeasureSettings().with_confirm_top(ctx.settings.confirm_top))
    executables["metaschedule"] = build_executable(ms_mod, db, ctx)
    outputs["metaschedule"] = run(vm_of(executables["metaschedule"]), x)
    return {"trials": len(db.get_all_tuning_records()), "tuning_seconds": secs}


def time_systems(net, ctx: Context, x, executables: dict, libraries, outputs: dict, notes: list) -> tuple:
    """Every system's latency, each in a process of its own, round-robin: ({system: ms values}, the libraries'
    versions, the rounds). The libraries' outputs go into `outputs`; a library that cannot run is a note."""
    from ..baselines.engines import create as engine

    versions = {}
    with tempfile.TemporaryDirectory(prefix="tvm_ttile_timing_") as tmp:
        timer = IsolatedTimer(x, ctx.threads, tmp)
        for name, ex in executables.items():
            timer.add(name, Saved.tvm(ex, tmp, name))
        for lib in libraries:
            if engine(lib).model_of(net) is None:
                notes.append(f"{lib}: no {lib} form of this model; not compared")
                continue
            try:
                saved = Saved.library(lib, net, x, tmp)
                run_lib, versions[lib] = engine(lib).open(saved.path, saved.input_name, x, ctx.threads)
            except ImportError as e:
                notes.append(f"{lib} not installed ({e}); not compared. pip install 'tvm-ttile[libs]'")
                continue
            except Exception as e:  # noqa: BLE001 - a library that cannot read this model is reported, not fatal
                notes.append(f"{lib} cannot run this model ({type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}); "
                             "not compared")
                continue
            outputs[lib] = run_lib()  # the saved file's output, checked here; timed in a process of its own below
            timer.add(lib, saved)
        rounds = latency_rounds()
        return timer.run(rounds, REPEATS), versions, rounds


def fp32_agreement(fp32_net, net, ctx: Context, vm, x, libraries) -> dict:
    """tvm_ttile's tuned build and each library on `net` (a quantized or bf16 build) against the fp32 model over
    fidelity.FP32_INPUTS random inputs (fidelity.against_fp32). The fp32 reference is ONNX Runtime's where it runs
    the fp32 model (an untuned build of a transformer takes tens of seconds an inference), else `fp32_net`'s untuned
    build; the result names it."""
    from ..baselines.engines import create as engine
    from .fidelity import against_fp32

    systems = {"tvm_ttile": lambda inp: run(vm, inp)}
    for lib in libraries:
        if engine(lib).model_of(net) is not None:
            try:
                systems[lib] = engine(lib).runner_for(net, x, ctx.threads)[0]
            except Exception:  # noqa: BLE001 - not installed or cannot read the model: said in the notes by time_systems
                continue
    reference = None
    if engine("onnxruntime").model_of(fp32_net) is not None:
        try:
            reference = engine("onnxruntime").runner_for(fp32_net, x, ctx.threads)[0], "onnxruntime fp32"
        except Exception:  # noqa: BLE001 - not installed: the untuned build below
            reference = None
    if reference is None:
        fp32_vm = build_network(prepare(fp32_net.mod, ctx.cpu), None, ctx)
        reference = (lambda inp: run(fp32_vm, inp)), "the fp32 model's untuned TVM build"
    return {"reference": reference[1],
            **against_fp32(systems, reference[0], tuple(net.input_shape), seed=ctx.seed)}


def accuracy(outputs: dict, tuned, step: float | None = None, own_build_only: bool = False,
             tolerance: float = TOLERANCE, spread: bool = False, beside=()) -> dict:
    """Every output against tvm_ttile's and the untuned build's, and whether all agree within TOLERANCE x the
    output's scale; a quantized model's (`step`: its output's quantization step) within one step of its untuned
    build and, for quantized.WITHIN_ONE_STEP of the elements, of ONNX Runtime's, since rounding to a step is where equal
    integer results may part (an fp32 rescale computed with or without an FMA).
    `own_build_only` (bf16): only tvm_ttile against its untuned build of the same precision counts, the others
    compute in another precision (how far each is from fp32 is against_fp32's). `tolerance`: the precision's
    (precision.Precision.network_tolerance). `spread` (a dynamically quantized model: its activations quantized per
    inference round a step apart where fp32 values before them differ in their last bits, in any two builds): held
    within the largest distance of an engine's output from the untuned build when that is wider than the tolerance.
    `beside`: systems reported but not held to (an engine computing its float layers in bf16)."""
    ref = outputs["untuned"]
    scale = float(np.max(np.abs(ref))) or 1.0
    allowed = step * (1 + 1e-3) if step else tolerance * scale
    if spread:  # within the engines' own distance from the untuned build, when that is wider
        allowed = max([allowed] + [float(np.max(np.abs(out - ref))) for name, out in outputs.items()
                                   if name not in ("tvm_ttile", "untuned")])
    checks = {f"tvm_ttile vs {other}": float(np.max(np.abs(outputs["tvm_ttile"] - outputs[other])))
              for other in outputs if other != "tvm_ttile"}
    checks.update({f"{s} vs untuned": float(np.max(np.abs(outputs[s] - ref))) for s in outputs
                   if s not in ("tvm_ttile", "untuned")})
    # A quantized model's outputs are held to ONNX Runtime's, whose QDQ rounding is ONNX's: another engine's int8
    # (OpenVINO's) may round its own way, a step or two from both (reported beside them)
    held = (["tvm_ttile vs untuned"] if own_build_only
            else ["tvm_ttile vs untuned", f"tvm_ttile vs {INT8_REFERENCE}"] if step else list(checks))
    held = [name for name in held if name in checks
            and not any(name.endswith(f" vs {b}") or name.startswith(f"{b} vs ") for b in beside)]
    # outputs that do not vary (a classifier head of zeros) agree whatever the network computes: not a check
    constant = float(np.ptp(ref)) == 0.0
    agrees = {name: err <= allowed for name, err in checks.items() if name in held}
    reference = f"tvm_ttile vs {INT8_REFERENCE}"
    if step and reference in agrees:
        # Each layer rounds its rescale to a step, in ONNX's order there and in fp32 steps here: a step's
        # difference at one layer may grow through the next ones to two at the output, on a few elements of a
        # deep network (MobileNet-v2: in either depthwise form). Held to that share within one step.
        share = quantized.agreement(outputs["tvm_ttile"], outputs[INT8_REFERENCE], step)["within_one_step"]
        agrees[reference] = share >= quantized.WITHIN_ONE_STEP
    correct = all(agrees.values()) and all(t.verified for t in tuned.tasks if t.trials or t.ranked) and not constant
    return {"tolerance": tolerance, "output_scale": scale, "max_abs_error": checks, "correct": correct,
            "allowed_error": allowed, "held_to": "all" if held == list(checks) else " and ".join(held),
            "constant_output": constant}


INT8_REFERENCE = "onnxruntime"  # the engine a quantized model's outputs are held to (accuracy)


def check_precision(precision: str, integer, name: str) -> None:
    """A one-line refusal of a precision the model cannot be built in: int8 needs a quantized (QDQ) model, and a
    quantized model runs in int8, not bf16."""
    if precision == "int8" and not integer.integer:
        raise TTileError(f"{name} has no quantized (QDQ) conv2d or matmul: int8 needs a model quantized first "
                         "(benchmarks/tools/quantize_model.py); bf16 needs none")
    if precision == "bf16" and integer.integer:
        raise TTileError(f"{name} is a quantized (QDQ) model: it runs in int8, not bf16 (drop --precision)")


def rates(latencies: dict, tuned) -> dict:
    """Each system's latency spread and % of the peak at the network's direct-convolution FLOPs (a Winograd task
    computes a layer in fewer: its rate would not compare)."""
    total_flops = sum(t.flops * t.weight for t in tuned.tasks if not create_policy(t.policy).rewritten)
    latency = {name: spread(v) for name, v in latencies.items()}
    for lat in latency.values():
        lat["percent_of_peak"] = 100 * total_flops / (lat["median_ms"] / 1e3) / 1e9 / tuned.peak_gflops
    return {"total_gflop": total_flops / 1e9, "latency": latency}
