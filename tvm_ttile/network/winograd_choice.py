"""Winograd or direct, layer by layer: the Winograd tasks of a network's eligible 3x3 layers, and the choice of the
faster form per layer from their tuned times (saved in the work dir, applied by build.build_executable)."""
from __future__ import annotations

from tvm_ffi import structural_hash

from .. import winograd as wg
from ..relax import extract_tasks
from .policy import WinogradPolicy, create as create_policy


def winograd_tasks(mod, context) -> list:
    """The tasks of the (prepared) module's eligible 3x3 layers computed with Winograd, for each tile size in
    winograd.TILE_SIZES (the module's other tasks are extract_tasks')."""
    out = []
    for m in wg.TILE_SIZES:
        rewritten, count = wg.rewrite(mod, lambda conv, m=m: m)
        if count:
            out += [t for t in extract_tasks(rewritten, context) if t.policy == WinogradPolicy.kind]
    return out


def choose_winograd(pairs: list, mod, context) -> dict:
    """Choose Winograd or the direct convolution per layer from the tuned (Task, TaskResult) pairs, save the
    choices in the context's work dir (none: no layer takes Winograd) and say on each task whether the build runs it."""
    timed, layer_of_task, target = [], {}, context.target
    for task, res in pairs:
        form = create_policy(task.policy).layer_form(task, target)
        if form is None:
            continue
        layer_of_task[task.name] = form
        layer, m = layer_of_task[task.name]
        timed.append((layer, m, res.seconds * 1e3 * res.weight, res.verified and res.trials > 0))
    choices = wg.choose(timed)
    wg.save_choices(context.work_dir, choices)
    for task, res in pairs:
        if task.name not in layer_of_task or layer_of_task[task.name][0] not in choices:
            continue
        layer, m = layer_of_task[task.name]
        c = choices[layer]
        res.built = c["m"] == m
        forms = ", ".join([f"direct {c['direct_ms']:.3f}"] + [f"F({k},3) {v:.3f}" for k, v in c["winograd_ms"].items()])
        res.notes.append(f"{'built' if res.built else 'not built'}: the layer's forms, ms per inference: {forms}")
    if any(c["m"] for c in choices.values()):  # the built network's names for its functions
        built = extract_tasks(wg.apply(mod, context.work_dir)[0], context)
        names = {str(structural_hash(t.mod)): t.name for t in built}
        for task, res in pairs:
            name = names.get(str(structural_hash(task.mod)))
            if res.built and name and name != task.name:
                res.symbol = name
    return choices

