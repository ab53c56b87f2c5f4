"""Building a tuned network: the prepared Relax module compiled with the work dir's records (and its AutoMCL dense
kernels, Winograd choices and in-network picks), weights packed once at build time; and checking a tuned function
against the untuned one."""
from __future__ import annotations

import os

import numpy as np
import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from ..context import resolve
from .. import bfloat16, read_in_place
from .. import winograd as wg
from ..automcl.network import apply_dense
from ..metaschedule import open_database
from ..metaschedule.database import existing_database
from ..workdir import WorkDir
from ..relax import fuse_passes, quantized
from .in_network import picks_database


def verify_against_untuned(mod, tuned, target, rtol: float = 1e-3, seed: int = 0) -> tuple:
    """Run the untuned and the tuned function on the same random inputs; compare every output buffer."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    rng = np.random.default_rng(seed)
    infos = ArgInfo.from_prim_func(mod["main"])
    inputs = [_random_argument(rng, [int(x) for x in a.shape], str(a.dtype)) for a in infos]
    outs = []
    read_in_place.install()
    for m in (mod, tuned):
        lib = tvm.compile(m, target=target)
        args = [tvm.runtime.tensor(x.copy(), tvm.cpu()) for x in inputs]
        lib(*args)
        outs.append([a.numpy() for a in args])
    # Every buffer after the call: the inputs must be untouched, the outputs equal (differences taken in float64:
    # u8 158 - 159 is 255 in u8). An 8-bit output is a requantized value: it may land one step apart where the
    # fp32 rescale before its rounding is contracted into FMAs differently (what a QDQ network's check allows too);
    # so may a float output of whole numbers, a requantized value the next layer reads in fp32 (rescaling.py).
    floats = [r for r in outs[0] if r.size and not np.issubdtype(r.dtype, np.integer)]
    scale = max((float(np.max(np.abs(r))) for r in floats), default=0.0) or 1.0
    err, ok = 0.0, True
    for r, g in zip(*outs):
        if not r.size:
            continue
        diff = float(np.max(np.abs(r.astype(np.float64) - g.astype(np.float64))))
        allowed = ((1.0 if r.dtype.itemsize == 1 else 0.0) if np.issubdtype(r.dtype, np.integer)
                   else max(rtol * scale, 1.0) if _whole(r) and _whole(g) else rtol * scale)
        err, ok = max(err, diff), ok and bool(np.isfinite(diff) and diff <= allowed)
    return ok, err


def _whole(values) -> bool:
    """Whether a float array holds whole numbers only (a requantized value kept in fp32), not all of them 0."""
    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)) and np.any(values))


def _random_argument(rng, shape, dtype: str):
    """Standard-normal values as `dtype`; uint16 tensors hold bf16 bits (bfloat16.py), so theirs are bf16 values
    (raw random bits would be NaNs and infinities)."""
    values = rng.standard_normal(shape)
    return bfloat16.bits(values) if dtype == "uint16" else values.astype(dtype)


def verified_database(work_dir: str):
    """The work dir's `verified` database (network.tune: records replacing ones that failed their check), or
    None."""
    return existing_database(WorkDir(work_dir).verified)


def build_network(mod, records=None, context=None, *, cpu=None, threads: int | None = None,
                  prepack: bool | None = None):
    """build_executable(...) in a tvm.relax.VirtualMachine on the CPU."""
    return vm_of(build_executable(mod, records, context, cpu=cpu, threads=threads, prepack=prepack))


def vm_of(executable):
    """A tvm.relax.VirtualMachine on the CPU running `executable` (built here, or loaded from a library file)."""
    return relax.VirtualMachine(executable, tvm.cpu())


def build_executable(mod, records=None, context=None, *, cpu=None, threads: int | None = None,
                     prepack: bool | None = None, exec_mode: str = "bytecode"):
    """Compile the prepared Relax module with the tuning `records` (a work dir or a MetaSchedule database; None:
    untuned) in `context` (context.Context; or its cpu, threads and prepack one by one) (the pipeline of MetaSchedule's compile_relax,
    plus weight prepacking: the packing blocks of tuned functions are split out and folded on the constant
    weights, once); functions without a record keep the default (unscheduled) lowering. `prepack` must be as
    when the tasks were tuned (it changes the task keys). `exec_mode`: relax.build's ("compiled" turns the VM's
    program into machine code; level with "bytecode" on ResNet-18 and Darknet-19). Returns the relax Executable."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline  # (not reachable via relax.pipeline in 0.27)

    ctx = resolve(context, cpu=cpu, threads=threads, prepack=prepack)  # (sizes TVM's thread pool: Context.make)
    ctx = quantized.context_for(mod, ctx)  # a QDQ model's int8 kernels: the CPU's int8 instruction in the target
    target, prepack = ctx.target, ctx.prepack
    database = records
    if database is None:
        database = ms.database.MemoryDatabase()
    elif isinstance(database, (str, os.PathLike)):
        work_dir = os.fspath(database)
        mod, _ = apply_dense(mod, work_dir)  # dense layers tuned by AutoMCL (dense="automcl")
        mod, _ = wg.apply(mod, work_dir)  # the 3x3 layers where Winograd was faster
        database = open_database(work_dir)
        picks = picks_database(work_dir)  # the candidates fastest inside the network (in_network), first
        if picks is not None:
            database = ms.database.OrderedUnionDatabase(picks, database)
        verified = verified_database(work_dir)  # before all: what replaces a record that failed its check
        if verified is not None:
            database = ms.database.OrderedUnionDatabase(verified, database)
        ranked = existing_database(WorkDir(work_dir).ranked)  # last: a zero-trial pick, where nothing was tuned
        if ranked is not None:
            database = ms.database.OrderedUnionDatabase(database, ranked)

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(m, _ctx):
        passes = [*fuse_passes(prepack), relax.transform.MetaScheduleApplyDatabase(enable_warning=False)]
        if prepack:
            passes += [relax.transform.SplitLayoutRewritePreproc(), relax.transform.FoldConstant()]
        passes += cpu_pipeline.dataflow_lower_passes(target) + cpu_pipeline.finalize_passes(target)
        return tvm.transform.Sequential(passes)(m)

    read_in_place.install()  # records replay the read-in-place marks; the pass turns them into the timed code
    with target, database, tvm.transform.PassContext(opt_level=3):
        return relax.build(mod, target=target, relax_pipeline=pipeline, exec_mode=exec_mode)


def run(vm, x) -> np.ndarray:
    out = vm["main"](tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu()))
    while not hasattr(out, "numpy"):  # a tuple of outputs: the first
        out = out[0]
    return out.numpy()

