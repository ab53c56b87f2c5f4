"""(Relax) Tasks: the fused PrimFuncs of Relax's CPU pipeline that tuning searches, each with the kind of policy that
will tune it (network.policy)."""
from __future__ import annotations

import dataclasses

import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from ..context import resolve
from .. import attention
from .. import winograd as wg
from ..metaschedule import ttile_problem


def fuse_passes(prepack: bool) -> list:
    # AttachAttrLayoutFreeBuffers marks the constant (weight) parameters of every fused function: lowering
    # then packs them (packing.pack_weights), once, at build time.
    return [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
            relax.transform.FuseOps(), relax.transform.FuseTIR(),
            *([relax.transform.AttachAttrLayoutFreeBuffers()] if prepack else [])]


def fuse(mod, target, prepack: bool = True):
    """The passes build_network runs before applying the database, so that task keys match its functions."""
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(fuse_passes(prepack))(mod)


@dataclasses.dataclass
class Task:
    name: str
    weight: int  # calls per inference
    mod: object  # the task's IRModule (one PrimFunc "main")
    policy: str  # "tvm_ttile", "metaschedule", "winograd" (a rewritten layer: winograd.py) or "attention"
    reason: str  # why not tvm_ttile (empty for tvm_ttile tasks)
    flops: float
    shape: str


def contraction_flops(problem) -> float:
    """2 x the product of a tvm_ttile problem's dimensions: its contraction's work, not its epilogue's (GELU's erf
    polynomial is some 70 operations an element, which would count as the model's FLOPs)."""
    n = 2.0 * problem.batch
    for _, extent in problem.sizes:
        n *= extent
    return n


def extract_tasks(mod, context=None, *, cpu=None, threads: int | None = None, prepack: bool | None = None) -> list:
    """The tuning tasks of a prepared Relax module, each with the policy that will tune it; with `prepack`,
    their weights are marked for packing at build time. `context` (context.Context) gives the CPU, the threads
    and prepack; or pass them one by one."""
    from tvm.s_tir.analysis import estimate_tir_flops
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    ctx = resolve(context, cpu=cpu, threads=threads, prepack=prepack)
    target = ctx.target
    from ..automcl.network import MARK

    tasks = []
    for t in ms.relax_integration.extract_tasks(fuse(mod, target, ctx.prepack), target):
        task_mod = t.dispatched[0]
        if MARK in (task_mod["main"].attrs or {}):
            continue  # an AutoMCL kernel, tuned already (dense="automcl")
        conv = wg.conv_of(task_mod["main"])
        if conv is not None:
            tasks.append(Task(t.task_name, int(t.weight), task_mod, "winograd", "",
                              float(estimate_tir_flops(task_mod)), conv))
            continue
        fused = attention.shape_of(task_mod["main"])
        if fused is not None:
            tasks.append(Task(t.task_name, int(t.weight), task_mod, "attention", "", fused.flops, fused.text))
            continue
        problem, reason = ttile_problem(task_mod, target)
        if problem is not None:
            shape = problem.op + " " + ",".join(f"{d}{e}" for d, e in problem.sizes if e > 1)
            shape += f" stride{problem.stride}" if problem.stride > 1 else ""
            shape += f" x{problem.batch}" if problem.batch > 1 else ""  # batch matmul's batch, conv2d's groups
        else:
            shape = ",".join("x".join(str(int(x)) for x in a.shape) for a in ArgInfo.from_prim_func(task_mod["main"]))
        tasks.append(Task(t.task_name, int(t.weight), task_mod, "tvm_ttile" if problem else "metaschedule",
                          reason or "", contraction_flops(problem) if problem else float(estimate_tir_flops(task_mod)),
                          shape))
    return tasks


