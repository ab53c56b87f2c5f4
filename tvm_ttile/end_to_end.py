"""`tvm-ttile tune-model`: import a network, tune it with tvm_ttile, build it, check it, compare it.

    report = tune_model("resnet18", work_dir="rn18", trials_per_task=50)

Correctness: the tuned network's output is compared with the untuned Relax build (the reference), ONNX
Runtime and torch on one random input; each must agree within TOLERANCE x max|reference|. Latencies of
every system are measured each in a fresh process of its own (tvm_ttile.isolated: a library's thread pool left in
this process would disturb the next system timed), round-robin over ROUNDS rounds, with the same thread count.
"""
from __future__ import annotations

import json
import os
import tempfile
import time

import numpy as np

from . import cpu as cpu_mod
from . import network as nw
from .errors import TTileError
from .in_network import IN_NETWORK_ROUNDS, IN_NETWORK_TOP
from .isolated import IsolatedTimer, Saved
from .workdir import WorkDir
from .measure import MeasureSettings
from .samplers import options_text

TOLERANCE = 1e-3  # float32 networks summed in different orders
ROUNDS, REPEATS = 3, 5  # processes per system, repeats in each


def latency_rounds() -> int:
    """ROUNDS, or $TVM_TTILE_LATENCY_ROUNDS (e.g. 1 for quick runs: the tests)."""
    value = os.environ.get("TVM_TTILE_LATENCY_ROUNDS", str(ROUNDS))
    if not value.isdigit() or int(value) < 1:
        raise TTileError(f"TVM_TTILE_LATENCY_ROUNDS must be a whole number >= 1, got {value!r}")
    return int(value)


def tune_model(source, work_dir=None, trials_per_task=50, other_trials=16, threads=1, seed=0, input_shape=None,
               metaschedule_trials=0, libraries=("onnxruntime", "torch"), progress=True, verbose=False,
               prepack=True, dense="tvm_ttile", cache_flush=True, sampler_options=None, confirm_top=None,
               in_network_top=IN_NETWORK_TOP, strategy=None, strategy_options=None, winograd=None) -> dict:
    """Tune, build, check and time a network (see the module doc). `in_network_top` >= 2: after tuning, each
    tvm_ttile task's that many fastest candidates are timed inside the running network and the build takes the
    fastest there (in_network.pick_in_network); 0 or 1: the build takes tuning's pick. `cache_flush`: the
    caches tvm_ttile's candidates are timed in (network.CACHE_STATES: "on" or True, every argument but the input
    flushed, the default, network.COLD_SETTINGS says why; "weights", only the weights and the output; "off" or
    False, hot). `strategy`: how conv2d/matmul tasks pick what to measure (strategies.STRATEGIES; None:
    network.NETWORK_STRATEGY). `winograd`: also time Winograd forms of the 3x3 layers (network.tune_network)."""
    from .baselines import libraries as libs
    from .in_network import alone_times, forget_picks, pick_in_network
    from .models.importers import load_model
    from .winograd import apply as winograd_apply, saved_choices as winograd_choices

    cache_flush = {True: "on", False: "off"}.get(cache_flush, cache_flush)
    if cache_flush not in nw.CACHE_STATES:
        raise TTileError(f"cache_flush={cache_flush!r}: one of {', '.join(map(repr, nw.CACHE_STATES))}")
    cpu = cpu_mod.detect_host()
    cpu_mod.check_runs_here(cpu)
    cpu_mod.use_threads(threads)  # TVM's thread pool, ONNX Runtime and torch all get `threads`
    net = load_model(source, input_shape, seed=seed)
    work_dir = work_dir or f"tune_{net.name}"
    mod = nw.prepare(net.mod, cpu)
    strategy = strategy or nw.NETWORK_STRATEGY
    start = time.time()
    settings = nw.CACHE_STATES[cache_flush].with_confirm_top(confirm_top)
    confirm_top = settings.confirm_top
    tuned = nw.tune_network(mod, cpu, work_dir, trials_per_task, other_trials, threads, seed, settings,
                            progress=progress, verbose=verbose, prepack=prepack, dense=dense,
                            sampler_options=sampler_options, strategy=strategy, strategy_options=strategy_options,
                            winograd=winograd)
    wall = time.time() - start
    x = np.random.default_rng(seed).standard_normal(net.input_shape).astype(np.float32)
    forget_picks(work_dir)  # made again below, among the records as they are now
    executables = {"tvm_ttile": nw.build_executable(mod, work_dir, cpu, threads, prepack)}
    picked = {}
    if in_network_top >= 2:
        from .metaschedule import open_database
        from .progress import Progress

        tasks = nw.extract_tasks(winograd_apply(mod, work_dir)[0], cpu, threads, prepack)  # the built functions
        bar = Progress(len(tasks), "timing candidates in the network") if progress else None
        picked = pick_in_network(nw.vm_of(executables["tvm_ttile"]), tasks, open_database(work_dir),
                                 cpu.target(threads), x, work_dir, in_network_top, IN_NETWORK_ROUNDS, progress=bar)
        if bar:
            bar.close()
        if picked:
            executables["tvm_ttile"] = nw.build_executable(mod, work_dir, cpu, threads, prepack)
    systems = {"tvm_ttile": nw.vm_of(executables["tvm_ttile"])}
    outputs = {"tvm_ttile": nw.run(systems["tvm_ttile"], x)}
    outputs["untuned"] = nw.run(nw.build_network(mod, None, cpu, threads), x)
    notes, versions, ms_info = [], {}, None
    untuned = [t.name for t in tuned.tasks if t.policy != "metaschedule" and not t.trials and t.built]
    if untuned:  # some tasks failed (every one failing is an error in tune_network): say so at the top
        notes.append(f"warning: {len(untuned)} conv2d/matmul task(s) have no successful measurement and run untuned: "
                     f"{', '.join(untuned)}")
    import tvm

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
    notes.append("conv2d/matmul weights prepacked once at build time (tvm_ttile and MetaSchedule)" if prepack else
                 "weights not prepacked (--no-prepack): kernels read the model's layout")
    notes.append(f"each task's {confirm_top} fastest candidates timed again together ({settings.confirm_rounds} "
                 "rounds) after tuning, the "
                 "fastest then kept (tvm_ttile and MetaSchedule alike)" if confirm_top >= 2 else
                 "no re-timing of the fastest candidates (--confirm-top 0)")
    rewritten = [t.name for t in tuned.tasks if t.policy == "winograd" and t.built]
    if rewritten:
        notes.append(f"{len(rewritten)} task(s) computed with Winograd (fewer multiplications than the direct "
                     "convolutions' GFLOP counted here: a % of peak above 100 is possible); the tasks they replace "
                     "are listed as not built")
    if dense == "automcl":
        notes.append("dense layers tuned by AutoMCL (its computes pack inside the kernel, every call); their "
                     "epilogues are separate elementwise tasks")
    if metaschedule_trials == "same":  # the trials tvm_ttile's run measured, all tasks together
        metaschedule_trials = sum(t.trials for t in tuned.tasks)
    if metaschedule_trials:
        from .baselines.tvm_tuners import tune_network_metaschedule

        # MetaSchedule gets the network as TVM prepares it: padding outputs to whole vectors is tvm_ttile's choice
        # (and MetaSchedule's schedules of the padded network's sliced tasks computed wrong results on MobileNet-v2).
        ms_mod = nw.prepare(net.mod, cpu, whole_vectors=False)
        db, secs = tune_network_metaschedule(ms_mod, cpu, os.path.join(work_dir, "metaschedule"), metaschedule_trials,
                                             threads, seed, prepack=prepack,
                                             settings=MeasureSettings().with_confirm_top(confirm_top))
        executables["metaschedule"] = nw.build_executable(ms_mod, db, cpu, threads, prepack)
        outputs["metaschedule"] = nw.run(nw.vm_of(executables["metaschedule"]), x)
        ms_info = {"trials": len(db.get_all_tuning_records()), "tuning_seconds": secs}
    inside = nw.profile(systems["tvm_ttile"], x)  # where the tuned network's time goes, call by call
    alone = alone_times(executables["tvm_ttile"], systems["tvm_ttile"], x)  # the same functions alone, hot and cold
    with tempfile.TemporaryDirectory(prefix="tvm_ttile_timing_") as tmp:
        timer = IsolatedTimer(x, threads, tmp)
        for name, ex in executables.items():
            timer.add(name, Saved.tvm(ex, tmp, name))
        for lib in libraries:
            if (lib == "onnxruntime" and net.onnx_model is None) or (lib == "torch" and net.torch_module is None):
                notes.append(f"{lib}: no {lib} form of this model; not compared")
                continue
            try:
                run, versions[lib] = libs.network_runner(lib, net, x, threads)
            except ImportError as e:
                notes.append(f"{lib} not installed ({e}); not compared. pip install 'tvm-ttile[libs]'")
                continue
            outputs[lib] = run()  # checked here; timed in a process of its own below
            timer.add(lib, Saved.library(lib, net, x, tmp))
        rounds = latency_rounds()
        latencies = timer.run(rounds, REPEATS)
    ref = outputs["untuned"]
    scale = float(np.max(np.abs(ref))) or 1.0
    checks = {f"tvm_ttile vs {other}": float(np.max(np.abs(outputs["tvm_ttile"] - outputs[other])))
              for other in outputs if other != "tvm_ttile"}
    checks.update({f"{s} vs untuned": float(np.max(np.abs(outputs[s] - ref))) for s in outputs
                   if s not in ("tvm_ttile", "untuned")})
    peak = tuned.peak_gflops
    # the direct convolutions' FLOPs (a Winograd task computes a layer in fewer: its rate would not compare)
    total_flops = sum(t.flops * t.weight for t in tuned.tasks if t.policy != "winograd")
    report = {
        "model": net.name, "input_shape": list(net.input_shape), "threads": threads, "peak_gflops": peak,
        "machine": cpu.describe(), "work_dir": work_dir, "trials_per_task": trials_per_task,
        "sampler_options": nw.network_sampler_options(sampler_options), "strategy": strategy,
        "strategy_options": dict(strategy_options or {}),
        "other_trials": other_trials, "dense": dense, "seed": seed, "confirm_top": confirm_top,
        "cache_flush": cache_flush,
        "tuning_seconds": sum(t.tuning_seconds for t in tuned.tasks),
        "wall_seconds": wall, "total_gflop": total_flops / 1e9, "tasks": [vars(t) for t in tuned.tasks],
        "latency": {name: nw.spread(v) for name, v in latencies.items()}, "versions": versions,
        "tolerance": TOLERANCE, "output_scale": scale, "max_abs_error": checks,
        "correct": all(err <= TOLERANCE * scale for err in checks.values()) and all(t.verified for t in tuned.tasks
                                                                                   if t.trials),
        "metaschedule": ms_info, "notes": notes, "date": time.strftime("%Y-%m-%d %H:%M"),
        "in_network": _in_network(tuned.tasks, inside, alone), "latency_rounds": rounds, "in_network_top": in_network_top,
        "in_network_picks": picked, "bandwidth_gbs": cpu_mod.run_peak(cpu, threads=threads).get("bandwidth_gbs"),
        "winograd": winograd_choices(work_dir)}
    for lat in report["latency"].values():
        lat["percent_of_peak"] = 100 * total_flops / (lat["median_ms"] / 1e3) / 1e9 / peak
    with open(WorkDir(work_dir).report_json, "w") as f:
        json.dump(report, f, indent=1)
    with open(WorkDir(work_dir).report_md, "w") as f:
        f.write(format_report(report))
    return report


def _in_network(tasks, inside, alone) -> dict:
    """Each task's ms per inference inside the running network, and the VM's own calls (allocation, shape
    checks) together; per task, its built function alone (hot, and with flushed caches: alone_times) and the
    bytes of its constant weights."""
    calls = dict(inside["calls"])
    per_task, causes = {}, {}
    for t in tasks:
        if not t.built:
            continue
        symbol = nw.task_symbol(calls, t.symbol or t.name)
        if symbol is not None:
            call = calls.pop(symbol)
            per_task[t.name] = call["ms"]
            if symbol in alone:
                causes[t.name] = {"calls": call["calls"], "in_network_ms": call["ms"],
                                  "alone_hot_ms": 1e3 * call["calls"] * alone[symbol]["hot_s"],
                                  "alone_flushed_ms": 1e3 * call["calls"] * alone[symbol]["flushed_s"],
                                  "alone_weights_flushed_ms": 1e3 * call["calls"] * alone[symbol]["weights_flushed_s"],
                                  "weight_bytes": t.weight_bytes}
    vm_ms = sum(c["ms"] for s, c in calls.items() if s.startswith("vm."))
    other = {s: c["ms"] for s, c in calls.items() if not s.startswith("vm.")}
    return {"total_ms": inside["total_ms"], "tasks_ms": per_task, "vm_builtins_ms": vm_ms, "other_ms": other,
            "repeats": inside["repeats"], "causes": causes}


def _options_text(r) -> str:
    parts = []
    if r.get("strategy"):  # (reports written before these existed have none)
        given = r.get("strategy_options") or {}
        parts.append(f"strategy {r['strategy']}" + (f" {options_text(given)}" if given else ""))
    if r.get("sampler_options"):
        parts.append(f"sampler {options_text(r['sampler_options'])}")
    return f" ({'; '.join(parts)})" if parts else ""


def _tuning_split(r) -> str:
    """Where the tuning time went, by policy: "tvm_ttile 125 s over 16 tasks, metaschedule 32 s over 3"."""
    by = {}
    for t in r["tasks"]:
        seconds, tasks = by.get(t["policy"], (0.0, 0))
        by[t["policy"]] = (seconds + t.get("tuning_seconds", 0.0), tasks + 1)
    return ", ".join(f"{p} {s:.0f} s over {n} task{'s' if n > 1 else ''}" for p, (s, n) in by.items())


def format_report(r) -> str:
    built = [t for t in r["tasks"] if t.get("built", True)]  # (a layer computed with Winograd: one form built)
    total = sum(t["seconds"] * t["weight"] for t in built if t["trials"])
    lines = [f"# {r['model']}: input {r['input_shape']}, {r['threads']} thread(s), {r['machine']['cpu']} "
             f"({r['machine']['isa']}), peak {r['peak_gflops']:.1f} GFLOPS (measured in this run)", "",
             f"{len(r['tasks'])} tasks, {r['total_gflop']:.2f} GFLOP per inference; tvm_ttile {r['trials_per_task']} "
             f"trials per conv2d/matmul task{_options_text(r)}, MetaSchedule {r['other_trials']} per other task; tuning "
             f"{r['tuning_seconds']:.0f} s ({_tuning_split(r)}; {r['wall_seconds']:.0f} s wall in this run, resumed "
             "runs add up).", "",
             "| task | policy | shape | calls | GFLOP | share of time | GFLOPS | % peak | ms alone | ms in network | "
             "trials | tuning s | verified |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    inside = r.get("in_network") or {"tasks_ms": {}}
    for t in sorted(r["tasks"], key=lambda t: (not t.get("built", True),
                                               -(t["seconds"] * t["weight"] if t["trials"] else 0))):
        on = t.get("built", True)
        share = 100 * t["seconds"] * t["weight"] / total if on and t["trials"] and total else float("nan")
        in_net = inside["tasks_ms"].get(t["name"])
        made_by = t.get("made_by") or t["policy"]  # (reports written before it existed have none)
        policy = t["policy"] if made_by == t["policy"] else f"{t['policy']}: best {made_by}"
        policy += "" if on else ", not built"
        lines.append(f"| {t['name']} | {policy} | {t['shape']} | {t['weight']} | {t['flops'] / 1e9:.3f} | "
                     f"{share:.1f}% | {t['gflops']:.1f} | {100 * t['gflops'] / r['peak_gflops']:.1f} | "
                     f"{1e3 * t['seconds'] * t['weight']:.3f} | " + (f"{in_net:.3f}" if in_net is not None else "-")
                     + f" | {t['trials']} | {t.get('tuning_seconds', 0.0):.0f} | "
                     + f"{'yes' if t['verified'] else 'NO'} |")
    lines += ["", "Share of time: each built task's measured best x calls, over the sum (the tasks as tuning timed "
                  "them: alone, hot caches unless --cache-flush). ms alone: that time x calls; ms in network: the same "
                  "functions timed inside the running tvm_ttile network (per inference, all calls; median of "
                  f"{inside.get('repeats', 0)} inferences, the VM's instrument hook)."]
    if inside.get("total_ms"):
        lines += ["", f"Inside the network: tasks {sum(inside['tasks_ms'].values()):.2f} ms, VM builtins "
                      f"(allocation, checks) {inside['vm_builtins_ms']:.2f} ms, other functions "
                      f"{sum(inside['other_ms'].values()):.2f} ms; the instrumented inference "
                      f"{inside['total_ms']:.2f} ms; the tasks alone, as tuning timed them, add up to "
                      f"{total * 1e3:.2f} ms."]
    lines += _causes_lines(r) + _picks_lines(r) + _winograd_lines(r)
    lines += ["",
              f"End-to-end latency (ms; each system timed in a process of its own, {r.get('latency_rounds', ROUNDS)} round-robin rounds of {REPEATS} repeats):", "",
              "| system | median | IQR | min | max | % of peak | tvm_ttile speed-up |", "|---|---:|---:|---:|---:|---:|---:|"]
    mine = r["latency"]["tvm_ttile"]["median_ms"]
    for name, lat in r["latency"].items():
        lines.append(f"| {name} | {lat['median_ms']:.2f} | {lat['iqr_ms']:.2f} | {lat['min_ms']:.2f} | "
                     f"{lat['max_ms']:.2f} | {lat['percent_of_peak']:.1f} | {lat['median_ms'] / mine:.2f}x |")
    if r["metaschedule"]:
        lines += ["", f"MetaSchedule (tune_relax, default policy): {r['metaschedule']['trials']} trials in "
                      f"{r['metaschedule']['tuning_seconds']:.0f} s, on the network as TVM prepares it (NHWC; outputs "
                      "not padded to whole vectors)."]
    lines += ["", f"Outputs (max abs difference; tolerance {r['tolerance']:g} x {r['output_scale']:.3g}): " +
              ", ".join(f"{k} {v:.2e}" for k, v in r["max_abs_error"].items()) +
              (" - all agree." if r["correct"] else " - MISMATCH.")]
    lines += [f"Note: {n}" for n in r["notes"]]
    return "\n".join(lines) + "\n"


def _causes_lines(r) -> list:
    """Where each task's in-network time goes: its built function alone (hot), what its weights and output from
    memory add (alone with only those flushed), and the rest (in the network minus that: the input's and
    residuals' state there, the VM around the call); beside it, alone with every operand but the input flushed
    (what a residual from memory would add on top)."""
    causes = (r.get("in_network") or {}).get("causes") or {}
    if not causes:
        return []
    for c in causes.values():  # (reports written before weights-only flushing was timed: all flushed instead)
        c.setdefault("alone_weights_flushed_ms", c["alone_flushed_ms"])
    bw = r.get("bandwidth_gbs")
    lines = ["", "Where each task's time in the network goes (ms per inference, all its calls; the built functions "
                 "timed alone on the arguments they get in an inference). Weights and output cold: alone with only "
                 "the weights and the output flushed before each call minus alone hot; the rest: in the network "
                 "minus that (the input's and residuals' state there, the VM around the call); all flushed: alone "
                 "with every operand but the input flushed (a residual from memory too)" +
             (f". Weights at memory bandwidth: streaming them once at the {bw:.1f} GB/s measured in this run." if bw else "."),
             "", "| task | calls | weights MB (all calls) | weights at memory bandwidth | alone hot | weights and output "
                 "cold | the rest | in network | in network / alone | alone, all flushed |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, c in sorted(causes.items(), key=lambda kv: -kv[1]["in_network_ms"]):
        mb = c["calls"] * c["weight_bytes"] / 1e6  # (a task called twice has two sets of weights of that size)
        lines.append(f"| {name} | {c['calls']} | {mb:.2f} | " + (f"{mb / bw:.3f}" if bw else "-") +
                     f" | {c['alone_hot_ms']:.3f} | {c['alone_weights_flushed_ms'] - c['alone_hot_ms']:+.3f} | "
                     f"{c['in_network_ms'] - c['alone_weights_flushed_ms']:+.3f} | {c['in_network_ms']:.3f} | "
                     + (f"{c['in_network_ms'] / c['alone_hot_ms']:.2f}" if c["alone_hot_ms"] >= 0.01 else "-")
                     + f" | {c['alone_flushed_ms']:.3f} |")
    keys = ("alone_hot_ms", "alone_weights_flushed_ms", "alone_flushed_ms", "in_network_ms")
    tot = {k: sum(c[k] for c in causes.values()) for k in keys}
    mb = sum(c["calls"] * c["weight_bytes"] for c in causes.values()) / 1e6
    lines.append(f"| all | | {mb:.2f} | " + (f"{mb / bw:.3f}" if bw else "-") + f" | {tot['alone_hot_ms']:.3f} | "
                 f"{tot['alone_weights_flushed_ms'] - tot['alone_hot_ms']:+.3f} | "
                 f"{tot['in_network_ms'] - tot['alone_weights_flushed_ms']:+.3f} | {tot['in_network_ms']:.3f} | "
                 f"{tot['in_network_ms'] / tot['alone_hot_ms']:.2f} | {tot['alone_flushed_ms']:.3f} |")
    return lines


def _winograd_lines(r) -> list:
    """Each 3x3 layer's forms as tuning timed them, and the one built."""
    choices = r.get("winograd") or {}
    if not any(c["winograd_ms"] for c in choices.values()):
        return []
    from .winograd import TILE_SIZES

    lines = ["", "3x3 layers: each form's best, ms per inference (all the layer's calls, as tuning timed them); the "
                 "build takes the fastest:", "",
             "| layer | direct | " + " | ".join(f"F({m},3)" for m in TILE_SIZES) + " | built |",
             "|---|---:|" + "---:|" * len(TILE_SIZES) + "---|"]
    for layer, c in choices.items():
        forms = " | ".join("-" if v is None else f"{v:.3f}"
                           for v in (c["winograd_ms"].get(str(m)) for m in TILE_SIZES))
        built = f"F({c['m']},3)" if c["m"] else "direct"
        lines.append(f"| {layer} | {c['direct_ms']:.3f} | {forms} | {built} |")
    return lines


def _picks_lines(r) -> list:
    """--in-network-top: how well each way of timing candidates alone ranks them as the network does."""
    from .in_network import STATES, ranking_summary

    picks = r.get("in_network_picks") or {}
    if not picks:
        return []
    summary = ranking_summary(picks)
    names = {"tuning_s": "tuning's timing", "alone_hot_s": "alone, hot", "alone_flushed_s": "alone, caches flushed",
             "alone_weights_flushed_s": "alone, weights and output flushed",
             "in_network_s": "in the network (the build's pick)"}
    lines = ["", f"Each task's {r['in_network_top']} fastest candidates by tuning time, timed inside the running "
                 "network, ranked by each timing (tasks x calls, summed: the in-network ms of the tasks if each took "
                 "that ranking's fastest; the least of several noisy medians is low by chance, so the last row "
                 "flatters the picks: compare whole builds side by side):", "",
             "| ranked by | tasks' in-network ms | picks the in-network fastest | mean rank correlation |",
             "|---|---:|---:|---:|"]
    for state in (s for s in (*STATES, "in_network_s") if s in summary):
        v = summary[state]
        lines.append(f"| {names[state]} | {v['network_ms']:.2f} | {v['agrees']} of {v['tasks']} | "
                     f"{v['spearman']:.2f} |")
    return lines


def check_report(report) -> None:
    if not report["correct"]:
        raise TTileError(f"the tuned network does not match its references: {report['max_abs_error']}")
