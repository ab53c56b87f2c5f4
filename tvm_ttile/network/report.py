"""`tvm-ttile tune-model`'s report: what a tuned network's run found, as JSON and as markdown."""
from __future__ import annotations

from ..errors import TTileError
from ..phases import build_seconds, format_phases
from ..relax.quantized import WITHIN_ONE_STEP
from ..samplers import options_text
from ..winograd import TILE_SIZES
from .fidelity import format_lines as fidelity_lines
from .in_network import STATES, ranking_summary, task_symbol

TOLERANCE = 1e-3  # float32 networks summed in different orders
ROUNDS, REPEATS = 3, 5  # processes per system, repeats in each (model.time_systems)


def in_network_summary(tasks, inside, alone) -> dict:
    """Each task's ms per inference inside the running network, and the VM's own calls (allocation, shape
    checks) together; per task, its built function alone (hot, and with flushed caches: alone_times) and the
    bytes of its constant weights."""
    calls = dict(inside["calls"])
    per_task, causes = {}, {}
    for t in tasks:
        if not t.built:
            continue
        symbol = task_symbol(calls, t.symbol or t.name)
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


def _budget_text(r) -> str:
    """How many trials the conv2d/matmul tasks measured: "up to 50 trials per conv2d/matmul task (budget share, 3
    rounds after the first 8)"."""
    if not r["trials_per_task"]:
        return "zero trials (the ranker's top scheme per conv2d/matmul task)"
    if r.get("budget", "fixed") == "fixed":  # (reports written before budgets existed: fixed)
        return f"{r['trials_per_task']} trials per conv2d/matmul task"
    return (f"up to {r['trials_per_task']} trials per conv2d/matmul task (budget {r['budget']}: "
            f"{r.get('budget_rounds', 0)} round(s) after each task's first; {r.get('from_library', 0)} task(s) from "
            "the record library)")


def _phases_text(r) -> str:
    """" This run: 171 s to the tuned build, 230 s in all (by phase below)." (reports before phases: "")."""
    p = r.get("phases")
    if not p:
        return ""
    return (f" This run: {build_seconds(p):.0f} s to the tuned build, {p['wall_seconds']:.0f} s with its checks "
            "and comparisons (by phase below).")


def _tuning_split(r) -> str:
    """Where the tuning time went, by policy: "tvm_ttile 125 s over 16 tasks, metaschedule 32 s over 3"."""
    by = {}
    for t in r["tasks"]:
        seconds, tasks = by.get(t["policy"], (0.0, 0))
        by[t["policy"]] = (seconds + t.get("tuning_seconds", 0.0), tasks + 1)
    return ", ".join(f"{p} {s:.0f} s over {n} task{'s' if n > 1 else ''}" for p, (s, n) in by.items())


PEAK_UNITS = {"fp32": "GFLOPS", "int8": "GOPS int8", "bf16": "GFLOPS bf16"}


def format_report(r) -> str:
    built = [t for t in r["tasks"] if t.get("built", True)]  # (a layer computed with Winograd: one form built)
    total = sum(t["seconds"] * t["weight"] for t in built if t["trials"])
    lines = [f"# {r['model']}: input {r['input_shape']}, {r['threads']} thread(s), {r['machine']['cpu']} "
             f"({r['machine']['isa']}), peak {r['peak_gflops']:.1f} "
             f"{PEAK_UNITS.get(r.get('precision', 'fp32'), 'GFLOPS')} (measured in this run)", "",
             f"{len(r['tasks'])} tasks, {r['total_gflop']:.2f} GFLOP per inference; tvm_ttile {_budget_text(r)}"
             f"{_options_text(r)}, MetaSchedule {r['other_trials']} per other task; tuning "
             f"{r['tuning_seconds']:.0f} s ({_tuning_split(r)}; {r['wall_seconds']:.0f} s wall in this run, resumed "
             "runs add up)." + _phases_text(r), "",
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
    allowed = (f"one quantization step, {r['allowed_error']:.3g}, for {WITHIN_ONE_STEP:.1%} of the elements "
               "against ONNX Runtime"
               if r.get("int8_agreement") else f"tolerance {r['tolerance']:g} x {r['output_scale']:.3g}")
    if not r.get("int8_agreement") and r["allowed_error"] > r["tolerance"] * r["output_scale"] * (1 + 1e-9):
        allowed += f", widened to the engines' own spread from the untuned build, {r['allowed_error']:.3g}"
    if r.get("held_to", "all") != "all":
        why = ("compute in other precisions" if not (r.get("int8") or {}).get("integer")
               else "round their int8 their own way" if r.get("int8_agreement")
               else "round activations quantized per inference on their own fp32 values")
        allowed += f"; held to {r['held_to']} only, the others {why}"
    lines += ["", f"Outputs (max abs difference; {allowed}): " +
              ", ".join(f"{k} {v:.2e}" for k, v in r["max_abs_error"].items()) +
              (" - all agree." if r["correct"] else " - MISMATCH.")]
    if r.get("constant_output"):
        lines += ["", "The untuned build's output is the same value everywhere: the comparison above checks nothing "
                      "(give the model weights that make its outputs vary)."]
    if r.get("int8_agreement"):  # a QDQ model: in quantization steps of its output
        lines += ["", "int8 (QDQ): " + "; ".join(
            f"tvm_ttile vs {k}: {100 * v['within_one_step']:.2f}% of elements within one step ({v['step']:.3g}), "
            f"{100 * v['equal']:.2f}% equal, at most {v['max_steps']:.2f} steps" for k, v in r["int8_agreement"].items())
            + f". {len(r['int8']['integer'])} conv2d / matmuls computed in int8"
            + "".join(f"; {layer} stays fp32: {why}" for layer, why in r["int8"]["kept_fp32"]) + "."]
        floats = r["int8"].get("float_nodes") or []
        if floats:
            lines += ["", f"Computed in fp32 on dequantized values ({len(floats)} nodes): " + ", ".join(floats) + "."]
    if (r.get("bf16") or {}).get("bf16"):
        lines += ["", f"bf16: {len(r['bf16']['bf16'])} conv2d / matmuls computed in bf16 (fp32 accumulation, "
                      "activations fp32 between layers)"
                  + "".join(f"; {layer} stays fp32: {why}" for layer, why in r["bf16"]["kept_fp32"]) + "."]
    if r.get("against_fp32"):
        lines += [""] + fidelity_lines(r["against_fp32"], r["against_fp32"]["model"])
    if r.get("phases"):  # (reports written before phases were recorded have none)
        lines += ["", "Where this run's wall time went, by phase:", ""] + format_phases(r["phases"])
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
