"""Whole networks with Relax: extract the tuning tasks, tune them, build with the database.

    net = load_model("resnet18")                       # or an .onnx path, or a torch.nn.Module
    result = tune_network(net.mod, work_dir="rn18")    # tvm_ttile for conv2d/matmul tasks, MetaSchedule for the rest
    vm = build_network(net.mod, "rn18")                # tvm.relax.VirtualMachine

Conv2d runs in NHWC with HWIO (= RSCK) weights, the layout the microkernels are made for: `prepare` converts
the imported (NCHW) module. Tasks are the fused PrimFuncs of Relax's CPU pipeline (conv2d + bias + residual add
+ ReLU is one task); each task's records go to one MetaSchedule JSON database in work_dir, so an interrupted
run resumes and `build_network` (MetaSchedule's compile_relax pipeline) finds every record.

Weights are constants: with `prepack` (the default) each fused function marks them layout-free, its schedule
copies them into the layout its microkernel streams (lowering.pack_weights; MetaSchedule's RewriteLayout does
the same for its own tasks), tuning times the kernel on packed weights, and `build_network` splits the copies
out and folds them on the constants: packing costs nothing per inference (TVM's cpu_weight_prepack, without
its change of the module's interface).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import statistics
import time

import numpy as np
import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms
from tvm_ffi import structural_hash

from . import cpu as cpu_mod
from .errors import TTileError
from .in_network import forget_picks, task_symbol, weight_bytes
from .relax_rewrite import binding_of, static_shape
from .transposed import rewrite as rewrite_transposed
from .workdir import WorkDir, claim, work_key
from .measure import MeasureSettings
from .memory_bound import schedules as memory_bound_schedules, variant_of
from .metaschedule import (DesignSpacesOnce, MemoryBoundSpace, TTileSearch, TTileSpaceGenerator, WinogradSpace,
                           best_schedule, evolutionary_search, measured_schemes, record_variants,
                           open_database, records_of, ttile_problem)
from . import winograd as wg


def _bound_of(func) -> str | None:
    """"maximum" or "minimum" when PrimFunc `func` computes max / min(x[...], bound[()]) element by element (how
    TVM's ONNX frontend writes Clip, e.g. ReLU6), read from its body; else None."""
    from .recognize import blocks

    if not isinstance(func, tvm.tirx.PrimFunc) or len(func.params) != 3:
        return None
    sch = tvm.s_tir.Schedule(func)
    found = blocks(sch)
    if len(found) != 1:
        return None
    stmt = sch.get(found[0])
    value = getattr(stmt.body, "value", None)
    kind = {"Max": "maximum", "Min": "minimum"}.get(type(value).__name__)
    if kind is None or not all(type(v).__name__ in ("BufferLoad", "TensorLoad") for v in (value.a, value.b)):
        return None
    ivs = [iv.var for iv in stmt.iter_vars]
    elementwise = len(value.a.indices) == len(ivs) and all(i.same_as(v) for i, v in zip(value.a.indices, ivs))
    ok = (elementwise and value.a.source.same_as(func.params[0]) and value.b.source.same_as(func.params[1])
          and len(value.b.indices) == 0)
    return kind if ok else None


@relax.expr_functor.mutator
class _ActivationsAsElementwise(relax.PyExprMutator):
    """leaky_relu(x) = max(x, alpha x), clip(x, a, b) = min(max(x, a), b) (ReLU6), and the TIR calls of max /
    min by a scalar that TVM's ONNX frontend makes of Clip as Relax's maximum / minimum: ConvertLayout has no
    layout rule for nn.leakyrelu, clip or TIR calls and would wrap every one in NHWC <-> NCHW transposes,
    splitting it from its convolution; maximum, minimum and multiply follow NHWC."""

    def __init__(self, mod=None):
        super().__init__(mod)
        self.mod = mod

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op):
            return call
        x = call.args[0] if call.args else None
        if call.op.name == "relax.call_tir" and self.mod is not None and x in self.mod.functions:
            kind = _bound_of(self.mod[x])
            args = call.args[1]
            if kind and isinstance(args, relax.Tuple) and len(args.fields) == 2:
                return getattr(relax.op, kind)(args.fields[0], args.fields[1])
            return call
        if call.op.name == "relax.nn.leakyrelu":
            return relax.op.maximum(x, relax.op.multiply(x, relax.const(float(call.attrs.alpha), "float32")))
        if call.op.name == "relax.clip" and all(isinstance(a, (tvm.tirx.IntImm, tvm.tirx.FloatImm))
                                                for a in call.args[1:]):
            low, high = (float(a.value) for a in call.args[1:])
            dtype = x.ty.dtype
            return relax.op.minimum(relax.op.maximum(x, relax.const(low, dtype)), relax.const(high, dtype))
        return call


# How much padding output channels to whole vectors may add to a contraction's work: 24 -> 32 channels or 1000 ->
# 1008 classes, not a 10-class head to 16 (a tiny layer, 60% more work, no parallel split at N threads).
MAX_OUTPUT_GROWTH = 1.5


@relax.expr_functor.mutator
class _WholeVectorOutputs(relax.PyExprMutator):
    """A conv2d (NHWC / HWIO, one group) or matmul by constant weights whose output channels are not whole vectors
    (MobileNet-v2's 24-channel projections, a 1000-class head) gets its weights padded with zeros to whole vectors
    (folded at build time) and its output sliced back, so that it becomes a task tvm_ttile tunes instead of one
    left to MetaSchedule. The slice moves past the elementwise ops with constant operands that follow (bias add,
    ReLU, ReLU6's bounds: their constants padded too), which then stay fused with the contraction; the padded
    channels' extra FMAs and the slice's pass (fused with what reads it) are part of the task's timed cost."""

    ELEMENTWISE = ("relax.add", "relax.subtract", "relax.multiply", "relax.maximum", "relax.minimum")
    UNARY = ("relax.nn.relu", "relax.sigmoid", "relax.tanh", "relax.nn.silu", "relax.nn.gelu")

    def __init__(self, lanes: int, mod=None):
        super().__init__(mod)
        self.lanes = lanes
        self.sliced = []  # (slice var, the padded tensor's var, the true channel count); vars compare by same_as

    def _constant(self, expr) -> bool:
        """Whether `expr` is computed from constants only (a weight and the permutes ConvertLayout puts on it)."""
        expr = binding_of(self, expr)
        if isinstance(expr, tvm.ir.expr.Constant):
            return True
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            tensors = [a for a in expr.args if isinstance(a, (relax.Var, relax.Call, tvm.ir.expr.Constant))]
            return bool(tensors) and all(self._constant(a) for a in tensors)
        return False

    def _pad_last(self, expr, extent: int):
        rank = len(static_shape(expr))
        return self.builder_.emit(relax.op.nn.pad(expr, [0] * (2 * rank - 1) + [extent]))

    def _sliced(self, padded, channels: int):
        out = self.builder_.emit(relax.op.strided_slice(padded, axes=[len(static_shape(padded)) - 1], begin=[0],
                                                        end=[channels], assume_inbound=True))
        self.sliced.append((out, padded, channels))
        return out

    def _source(self, expr):
        """(padded var, channels) when `expr` is one of this pass's slices, else None."""
        while isinstance(expr, relax.Var):
            found = next(((p, c) for v, p, c in self.sliced if v.same_as(expr)), None)
            if found:
                return found
            expr = self.lookup_binding(expr)
        return None

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not isinstance(call.op, tvm.ir.Op) or static_shape(call) is None:
            return call
        name = call.op.name
        if name in ("relax.nn.conv2d", "relax.matmul"):
            return self._contraction(call)
        if name in self.UNARY:
            source = self._source(call.args[0])
            if source:
                return self._sliced(self.builder_.emit(relax.Call(call.op, [source[0]], call.attrs)), source[1])
        if name in self.ELEMENTWISE:
            return self._elementwise(call)
        return call

    def _contraction(self, call):
        out_shape, w = static_shape(call), call.args[1]
        w_shape = static_shape(w)
        channels = out_shape[-1]
        if not channels % self.lanes or w_shape is None or w_shape[-1] != channels or not self._constant(w):
            return call
        if call.op.name == "relax.nn.conv2d" and (call.attrs.data_layout != "NHWC" or call.attrs.kernel_layout != "HWIO"
                                                  or call.attrs.groups != 1 or call.attrs.out_layout not in ("NHWC", "")):
            return call
        if call.op.name == "relax.matmul" and len(w_shape) != 2:
            return call
        whole = -(-channels // self.lanes) * self.lanes
        if whole > MAX_OUTPUT_GROWTH * channels:
            return call
        padded = self.builder_.emit(relax.Call(call.op, [call.args[0], self._pad_last(w, whole - channels)],
                                               call.attrs))
        return self._sliced(padded, channels)

    def _elementwise(self, call):
        a, b = call.args
        source, other, first = self._source(a), b, True
        if source is None:
            source, other, first = self._source(b), a, False
        if source is None or not self._constant(other):
            return call
        padded, channels = source
        shape, rank = static_shape(other), len(static_shape(padded))
        if shape is None or len(shape) > rank or (shape and shape[-1] not in (1, channels)):
            return call
        if shape and shape[-1] == channels:  # a per-channel constant (bias, scale): zeros in the padded channels
            other = self._pad_last(other, static_shape(padded)[-1] - channels)
        args = [padded, other] if first else [other, padded]
        return self._sliced(self.builder_.emit(relax.Call(call.op, args, call.attrs)), channels)


def _conv2d_reading_nchw(x, w, strides, padding, dilation):
    """TE: conv2d of NCHW `x` by HWIO `w` into NHWC, whose padding stage is also the layout change: it writes
    the padded input in NHWC, which the conv2d block reads as any NHWC conv2d reads its padded copy."""
    from tvm import te

    n, c, h, width = x.shape
    r, s, _, k = w.shape
    (top, left, bottom, right), (sh, sw), (dh, dw) = padding, strides, dilation
    zero = tvm.tirx.const(0, x.dtype)
    padded = te.compute((n, h + top + bottom, width + left + right, c), lambda b, y, z, ch: tvm.tirx.if_then_else(
        tvm.tirx.all(y >= top, y < h + top, z >= left, z < width + left), x[b, ch, y - top, z - left], zero),
        name="pad_temp")
    ry, rx, rc = te.reduce_axis((0, r), "ry"), te.reduce_axis((0, s), "rx"), te.reduce_axis((0, c), "rc")
    out_h = (h + top + bottom - (r - 1) * dh - 1) // sh + 1
    out_w = (width + left + right - (s - 1) * dw - 1) // sw + 1
    return te.compute((n, out_h, out_w, k), lambda b, y, z, f: te.sum(
        padded[b, y * sh + ry * dh, z * sw + rx * dw, rc] * w[ry, rx, rc, f], axis=[ry, rx, rc]), name="conv2d_nhwc")


@relax.expr_functor.mutator
class _InputLayoutIntoConv(relax.PyExprMutator):
    """ConvertLayout gives a network's first conv2d its NCHW input through a permute_dims of its own: a pass
    over the input (a function of its own, timed apart), after which the conv2d's padding stage copies the input
    again. Such a conv2d (NHWC / HWIO, one group) reads the NCHW tensor instead, its padding stage writing the
    NHWC padded copy: one pass instead of two (ONNX Runtime's first convolution reads NCHW too). A permute that
    something else also reads stays for that reader."""

    def visit_call_(self, call):
        call = self.builder_.normalize(super().visit_call_(call))
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.nn.conv2d"):
            return call
        a = call.attrs
        if (a.data_layout, a.kernel_layout, a.out_layout, a.groups) != ("NHWC", "HWIO", "NHWC", 1):
            return call
        source = binding_of(self, call.args[0])
        if not (isinstance(source, relax.Call) and isinstance(source.op, tvm.ir.Op)
                and source.op.name == "relax.permute_dims" and source.attrs.axes is not None
                and [int(v) for v in source.attrs.axes] == [0, 2, 3, 1]):
            return call
        x = source.args[0]
        if static_shape(x) is None or static_shape(call.args[1]) is None or x.ty.dtype != call.ty.dtype:
            return call
        return self.builder_.call_te(_conv2d_reading_nchw, x, call.args[1], [int(v) for v in a.strides],
                                     [int(v) for v in a.padding], [int(v) for v in a.dilation],
                                     primfunc_name_hint="conv2d")


def _mutate(mutator_class, mod, *args):
    """`mod` with every Relax function visited by one mutator_class(*args, mod), whose builder also holds the
    PrimFuncs it adds."""
    mutator = mutator_class(*args, mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()


def prepare(mod, cpu=None, whole_vectors: bool = True, input_layout_in_conv: bool = True):
    """The imported Relax module with transposed conv2d as their stride^2 phase convolutions (transposed.py),
    conv2d in NHWC / HWIO and conv1d in NWC / WIO (permutes at the boundaries, folded on weights), and with
    `whole_vectors`, conv2d / matmul outputs by constant weights padded to whole vectors of `cpu`'s ISA (the
    host's by default; _WholeVectorOutputs). With `input_layout_in_conv`, a conv2d whose input is an NCHW
    tensor permuted to NHWC reads the NCHW tensor (_InputLayoutIntoConv)."""
    mod, _ = rewrite_transposed(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mod[gv] = _ActivationsAsElementwise(mod).visit_expr(func)
    mod = relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "HWIO"], "relax.nn.conv1d": ["NWC", "WIO"]})(mod)
    if whole_vectors:
        lanes = (cpu or cpu_mod.detect_host()).lanes
        for gv, func in list(mod.functions.items()):
            if isinstance(func, relax.Function):
                mod[gv] = _WholeVectorOutputs(lanes, mod).visit_expr(func)
    if input_layout_in_conv:
        mod = _mutate(_InputLayoutIntoConv, mod)
    # the slices that the next elementwise op moved past, and the permutes now read by nothing, are dead:
    # removed, not computed
    return relax.transform.DeadCodeElimination()(relax.transform.CanonicalizeBindings()(mod))


def _fuse_passes(prepack: bool) -> list:
    # AttachAttrLayoutFreeBuffers marks the constant (weight) parameters of every fused function: lowering
    # then packs them (lowering.pack_weights), once, at build time.
    return [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(),
            relax.transform.FuseOps(), relax.transform.FuseTIR(),
            *([relax.transform.AttachAttrLayoutFreeBuffers()] if prepack else [])]


def fuse(mod, target, prepack: bool = True):
    """The passes build_network runs before applying the database, so that task keys match its functions."""
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(_fuse_passes(prepack))(mod)


@dataclasses.dataclass
class Task:
    name: str
    weight: int  # calls per inference
    mod: object  # the task's IRModule (one PrimFunc "main")
    policy: str  # "tvm_ttile", "metaschedule" or "winograd" (a rewritten layer: winograd.py)
    reason: str  # why not tvm_ttile (empty for tvm_ttile tasks)
    flops: float
    shape: str


def extract_tasks(mod, cpu=None, threads: int = 1, prepack: bool = True) -> list:
    """The tuning tasks of a prepared Relax module, each with the policy that will tune it; with `prepack`,
    their weights are marked for packing at build time."""
    from tvm.s_tir.analysis import estimate_tir_flops
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    cpu = cpu or cpu_mod.detect_host()
    target = cpu.target(threads)
    from .automcl.network import MARK

    tasks = []
    for t in ms.relax_integration.extract_tasks(fuse(mod, target, prepack), target):
        task_mod = t.dispatched[0]
        if MARK in (task_mod["main"].attrs or {}):
            continue  # an AutoMCL kernel, tuned already (dense="automcl")
        conv = wg.conv_of(task_mod["main"])
        if conv is not None:
            tasks.append(Task(t.task_name, int(t.weight), task_mod, "winograd", "",
                              float(estimate_tir_flops(task_mod)), conv))
            continue
        problem, reason = ttile_problem(task_mod, target)
        if problem is not None:
            shape = problem.op + " " + ",".join(f"{d}{e}" for d, e in problem.sizes if e > 1)
            shape += f" stride{problem.stride}" if problem.stride > 1 else ""
            shape += f" x{problem.batch}" if problem.batch > 1 else ""  # batch matmul's batch, conv2d's groups
        else:
            shape = ",".join("x".join(str(int(x)) for x in a.shape) for a in ArgInfo.from_prim_func(task_mod["main"]))
        tasks.append(Task(t.task_name, int(t.weight), task_mod, "tvm_ttile" if problem else "metaschedule",
                          reason or "", float(estimate_tir_flops(task_mod)), shape))
    return tasks


@dataclasses.dataclass
class TaskResult:
    name: str
    policy: str
    shape: str
    weight: int
    flops: float
    seconds: float  # best run time of one call
    gflops: float
    trials: int
    tuning_seconds: float
    verified: bool  # the tuned function matches the untuned one on random inputs
    max_abs_error: float
    notes: list
    weight_bytes: int = 0  # its constant (layout-free) parameters: what it reads from memory in a cold network
    # Who made the fastest record: the policy, or for a memory-bound task "tvm_ttile <variant>" (memory_bound.py)
    # or "metaschedule's search"
    made_by: str = ""
    # Whether the build runs it: a layer computed with Winograd runs its winograd task instead of its direct one
    built: bool = True
    # Its function's name in the built network when that differs from `name` (a rewritten network numbers its
    # fused functions anew)
    symbol: str = ""


@dataclasses.dataclass
class NetworkTuneResult:
    tasks: list  # TaskResult
    tuning_seconds: float
    work_dir: str
    peak_gflops: float
    threads: int

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


DENSE_POLICIES = ("tvm_ttile", "automcl")
# Timing network tasks as the network runs them: caches flushed, weights cold (ResNet-18's 46 MB of weights
# outgrow the last-level cache). Builds tuned so ran level with or faster than builds tuned hot on every CPU
# measured: 2% faster at 2 threads (Zen 4), at 1 thread 1.4% (Xeon), 2.7% on ResNet-18 and 1.1-1.3% slower on
# Darknet-19 (Zen 5, within the spread), no faster on a Zen 3 (benchmarks/results/in_network_{zen4,xeon,zen5}/
# NOTES.md). A hot pick can also be one that streams its weights badly: the Zen 5's hot-tuned ResNet-18 stem ran
# 1.51x its time alone in the network, the cold-tuned one 1.06x. And each candidate costs 10 single calls instead
# of 5 repeats of at least 10 ms, so tuning takes 0.58-0.65x the time. So tune-model times cold at every thread
# count (tune-model --cache-flush off, tune_network(settings=MeasureSettings()) to time hot).
COLD_SETTINGS = MeasureSettings(number=1, repeat=10, cache_flush=True)
# What tune-model's --cache-flush can ask for: everything but the input flushed ("on"), only the weights and the
# output flushed, the input and the residuals an epilogue adds kept in cache as the previous layers leave them
# ("weights", MeasureSettings.keep_activations), or nothing ("off": hot).
CACHE_STATES = {"on": COLD_SETTINGS, "weights": dataclasses.replace(COLD_SETTINGS, keep_activations=True),
                "off": MeasureSettings()}
TWIN_SCHEMES = 5  # the best schemes of an earlier task with the same operator and sizes, measured first
# The ttile sampler's options for network tasks unless the caller sets them (benchmarks/results/end_to_end_zen3/
# NOTES.md, Zen 3, builds side by side). Half the draws weights-first: Darknet-19 at 224x224 ran 1.07-1.08x ONNX
# Runtime with it against 1.18-1.27x with the paper's draw. Half of all draws then reduction-innermost, the order
# of MetaSchedule's best conv2d kernels: ResNet-18 40.07 ms against 41.56 without (its 7x7 C=3 stem 65.7 -> 99.0
# GFLOPS alone). At threads > 1 each thread a band of whole rows in every layer (parallel_dims=rows; it draws
# nothing different at 1 thread), so that a layer reads its input from its own core's cache. Level at 2 threads on
# the Zen 5: ResNet-18 0.972-0.993x a same-day build with any split in three runs (seed 0), 1.006-1.008x in two
# (seed 1), Darknet-19 1.00x (benchmarks/results/in_network_zen5/NOTES.md). Kept for the many-core model there:
# split over channels, every core reads (T - 1) / T of its input from the others' caches; in bands, the halos.
NETWORK_SAMPLER_OPTIONS = {"weights_first": 0.5, "reduction_inner": 0.5, "parallel_dims": "rows"}


# The search strategy of network tasks unless the caller names one: a pool of drawn schemes ranked by the cost
# model, measured from the top (strategies/model.py). Builds of it ran at 0.96-0.97x the latency of same-day builds
# of the paper's random draws on the Zen 5 at 1 thread, side by side (ResNet-18, two seeds; its C = 3 stem, a
# lottery at 50 random draws, took 0.8x the time in the network), Darknet-19 level, MobileNet-v2 at 0.92x; at 2
# threads ResNet-18 level, Darknet-19 0.95x (benchmarks/results/in_network_zen5/NOTES.md).
NETWORK_STRATEGY = "model"


# ... and the search strategies' options: no strategy measures in-place variants in a network. With them (the
# random strategy's last 10 of 50 trials per padded conv2d) Darknet-19 on an AVX-512 Xeon ran 1.07-1.12x slower than
# builds tuned without, side by side, while its tasks alone were as fast; ResNet-18 was level
# (benchmarks/results/in_network_xeon/NOTES.md, item 7).
NETWORK_STRATEGY_OPTIONS = {"in_place_variants": 0.0}


def network_strategy_options(options: dict | None = None) -> dict:
    """The search strategy's options for network tasks (any strategy): NETWORK_STRATEGY_OPTIONS, overridden by
    `options`."""
    return {**NETWORK_STRATEGY_OPTIONS, **(options or {})}


def network_sampler_options(options: dict | None = None) -> dict:
    """The ttile sampler options network tuning uses: NETWORK_SAMPLER_OPTIONS, overridden by `options`
    ({"weights_first": 0, "reduction_inner": 0} gives the paper's draw)."""
    return {**NETWORK_SAMPLER_OPTIONS, **(options or {})}


def _claim_task_dir(task_dir: str, workload: str, has_records: bool) -> int:
    """Make `task_dir` the directory of the function whose structural hash is `workload`, and return the budget a
    finished run asked for it (0: none). A task directory is named by its place and name in the network, which a
    function changed since (prepared or fused otherwise) can keep: a directory whose asked.json names another
    function is moved aside, logs and all, to `task_dir`.earlier-<that hash>, so the budget, trial log, curve and
    tuning seconds of the new function start clean. An asked.json written before functions were recorded belongs
    to this function while the database holds records of it; an unreadable one is reported and counts for nothing."""
    path = WorkDir(task_dir).asked
    if os.path.exists(path):
        try:
            with open(path) as f:
                saved = json.load(f)
            trials = int(saved["trials"])
        except (ValueError, KeyError, TypeError) as e:
            logging.getLogger(__name__).warning("%s is damaged (%s): its task is searched up to its budget again",
                                                path, type(e).__name__)
            return 0
        owner = str(saved.get("workload", workload if has_records else "unrecorded"))
        if owner == workload:
            return trials
        aside = f"{task_dir}.earlier-{owner}"
        if os.path.exists(aside):
            shutil.rmtree(aside)  # an older copy of the same function's directory
        os.replace(task_dir, aside)
        logging.getLogger(__name__).info("%s held another function's tuning: moved to %s", task_dir, aside)
    os.makedirs(task_dir, exist_ok=True)
    return 0


def _earlier_forms(database, task_mods: list, target) -> dict:
    """{Problem: modules} of the conv2d / matmul workloads in `database` that are none of `task_mods`: a task's
    earlier form (the same layer fused or prepared otherwise, e.g. by an earlier version of prepare). A task of
    that Problem first measures their best schemes, as a twin's, instead of starting from blind draws."""
    seen = {structural_hash(m) for m in task_mods}
    found = {}
    for rec in database.get_all_tuning_records():
        key = structural_hash(rec.workload.mod)
        if key in seen:
            continue
        seen.add(key)
        problem, _ = ttile_problem(rec.workload.mod, target)
        if problem is not None:
            found.setdefault(problem, []).append(rec.workload.mod)
    return found


def tune_network(mod, cpu=None, work_dir: str = "tune_network", trials_per_task: int = 50, other_trials: int = 16,
                 threads: int = 1, seed: int = 0, settings: MeasureSettings = COLD_SETTINGS, progress=True,
                 verbose=False, prepack: bool = True, dense: str = "tvm_ttile",
                 sampler_options: dict | None = None, strategy: str = NETWORK_STRATEGY,
                 strategy_options: dict | None = None, winograd: bool | None = None) -> NetworkTuneResult:
    """Tune every task of the (prepared) Relax module: conv2d/matmul tasks (with their fused epilogues) with
    tvm_ttile's search of the structured space, `trials_per_task` trials each; every other task with
    MetaSchedule's default policy, `other_trials` trials each, beside tvm_ttile's few memory-bound schedules
    (memory_bound.py: pooling, means, transposes), each measured once (0: leave them to the default build). Every
    task's best is checked against the untuned function before it is reported (settings=COLD_SETTINGS times
    every candidate with flushed caches, as a layer meets its weights in the network). With `prepack`, constant
    weights are packed for the kernels once at build time (build with the same `prepack`). With
    dense="automcl", dense layers (matmul by a constant) are tuned by AutoMCL instead, `trials_per_task`
    trials per shape (automcl.network), and their epilogues become elementwise tasks. `sampler_options` go to
    the ttile sampler of every conv2d/matmul task, over NETWORK_SAMPLER_OPTIONS (e.g. {"min_reuse": 32});
    `strategy` (strategies.STRATEGIES; NETWORK_STRATEGY by default) orders what those tasks measure. With
    `winograd`, each 3x3 stride-1 conv2d layer is also computed with Winograd F(2,3) and F(4,3) (winograd.py; every
    schedule of those tasks measured once) and the build takes, layer by layer, whichever form was faster
    (work_dir/winograd.json); None: winograd.DEFAULT."""
    from .microkernels.catalog import catalog_for
    from .measure import default_builder, default_runner
    from .tune import run_tuner

    if dense not in DENSE_POLICIES:
        raise TTileError(f"unknown dense-layer policy {dense!r}; choose from {', '.join(DENSE_POLICIES)}")
    ttile_strategy = strategy  # the loop below names MetaSchedule's own strategy of the other tasks `strategy`
    cpu = cpu or cpu_mod.detect_host()
    cpu_mod.use_threads(threads)
    target = cpu.target(threads)
    claim(work_dir, work_key(target, threads, settings, cpu))
    database = open_database(work_dir)
    start = time.time()
    results, measurer = [], {}  # one builder and runner for every task, made when first needed
    twins_of = {}  # Problem -> the task modules of that conv2d/matmul tuned so far
    if dense == "automcl":
        from .automcl.network import apply_dense, tune_dense

        for (M, K, N), calls, saved in tune_dense(mod, cpu, work_dir, trials_per_task, threads, seed, settings):
            flops, name, shape = 2.0 * M * K * N, f"automcl_dense_{M}x{K}x{N}", f"dense M{M},K{K},N{N}"
            if "error" in saved:
                results.append(TaskResult(name, "automcl", shape, calls, flops, float("nan"), 0.0, 0, 0.0, False,
                                          float("nan"), [f"AutoMCL failed, left to the other policies: "
                                                         f"{saved['error']}"]))
                continue
            results.append(TaskResult(
                name, "automcl", shape, calls, flops, flops / (saved["gflops"] * 1e9), saved["gflops"],
                len(saved["curve"]), saved["seconds"], saved["verified"], saved["max_abs_error"],
                [f"compute {saved['compute']} {tuple(saved['config'])}; {saved['selected_by']}"]))
        mod, _ = apply_dense(mod, work_dir)
    tasks = extract_tasks(mod, cpu, threads, prepack)
    if winograd if winograd is not None else wg.DEFAULT == "on":
        tasks += winograd_tasks(mod, cpu, threads, prepack)
    earlier = _earlier_forms(database, [t.mod for t in tasks], target)
    for i, task in enumerate(tasks):
        budget = trials_per_task if task.policy == "tvm_ttile" else other_trials  # (winograd: its schedules, below)
        task_dir = os.path.join(work_dir, "tasks", f"{i:02d}-{task.name}")
        before = records_of(database, task.mod)
        workload = str(structural_hash(task.mod))
        asked = _claim_task_dir(task_dir, workload, bool(before))
        if task.policy == "tvm_ttile":
            problem, _ = ttile_problem(task.mod, target)
            catalog = catalog_for(cpu, problem)
            space, cost_model = TTileSpaceGenerator(), ms.cost_model.RandomModel()
            # Tasks of one operator and size (with other epilogues) share what they learn: a twin first
            # measures the best schemes of those tuned before it, then draws with another seed.
            twins = twins_of.setdefault(problem, list(earlier.get(problem, [])))
            first = [t for twin in twins for t in measured_schemes(database, twin, TWIN_SCHEMES)]
            strategy = TTileSearch(seed=seed + len(twins), kept=catalog.kept, fallback=catalog.ranked(),
                                   threads=threads, trial_log=WorkDir(task_dir).trials, first=first,
                                   sampler_options=network_sampler_options(sampler_options),
                                   strategy=ttile_strategy,
                                   strategy_options=network_strategy_options(strategy_options))
            twins.append(task.mod)
            per_iter = 10
        elif task.policy == "winograd":
            space, strategy, cost_model = WinogradSpace(), DesignSpacesOnce(), ms.cost_model.RandomModel()
            errors = []
            made = [n for n, _ in wg.schedules(task.mod, cpu.lanes, cpu.vector_registers, threads, errors)]
            if not made:  # reported below (no record), with why
                task.reason = "no Winograd schedule of this function lowers: " + "; ".join(errors[:2])
            # Like memory-bound ones, each schedule is measured once, whatever an earlier run asked: those it has
            # no record of (new, or failed before) are measured on a resume.
            measured = set(record_variants(database, task.mod))
            budget, asked, per_iter = len(made), 0, max(len(made), 1)
            before = [n for n in made if n in measured]
        else:
            space, strategy, cost_model, per_iter = "post-order-apply", evolutionary_search(), "xgb", min(64, max(budget, 1))
            variants = record_variants(database, task.mod)
            # (tvm_ttile's memory-bound schedules, measured first, are not in MetaSchedule's budget)
            before = [v for v in variants if v is None]
        # A finished run's budget is remembered: a task whose space holds fewer candidates than the budget, or
        # whose candidates partly failed, is not searched again on every resume.
        todo = 0 if asked >= budget else max(budget - len(before), 0)
        if todo:  # the in-network picks were made among the records before this run: stale now
            forget_picks(work_dir)
        if todo and not measurer:
            measurer = {"builder": default_builder(settings), "runner": default_runner(settings, threads)}
        tuning = 0.0
        fresh = []
        if task.policy == "metaschedule" and budget:
            # Pooling, means, transposes: a few finished schedules (memory_bound.py), each measured once;
            # MetaSchedule's search below competes with them in the database.
            fresh = [n for n, _ in memory_bound_schedules(task.mod, cpu.lanes, threads) if n not in variants]
        if fresh:
            forget_picks(work_dir)
            if not measurer:
                measurer = {"builder": default_builder(settings), "runner": default_runner(settings, threads)}
            tuning, database = run_tuner(task.flops, task.mod, target, task_dir, database, len(fresh),
                                         MemoryBoundSpace(), DesignSpacesOnce(), ms.cost_model.RandomModel(), seed,
                                         settings, threads=threads, trials_per_iter=len(fresh), progress=False,
                                         verbose=verbose, label=f"memory-bound {task.name}", cpu=cpu, **measurer)
        if budget:
            tuning, database = run_tuner(task.flops, task.mod, target, task_dir, database, todo, space, strategy,
                                         cost_model, seed, settings, threads=threads, trials_per_iter=per_iter,
                                         progress=progress, verbose=verbose, label=f"{task.policy} {task.name}",
                                         cpu=cpu, **measurer)
        with open(WorkDir(task_dir).asked, "w") as f:
            json.dump({"trials": max(asked, budget), "workload": workload}, f)
        results.append(_task_result(task, database, target, tuning))
    _choose_winograd(list(zip(tasks, results[-len(tasks):])), mod, cpu, threads, prepack, work_dir)
    failed = [r for r in results if r.policy != "metaschedule" and not r.trials]
    if failed and len(failed) == sum(r.policy != "metaschedule" for r in results):
        raise TTileError(f"every conv2d/matmul task failed to tune ({len(failed)} of them), e.g. {failed[0].name}: "
                         f"{'; '.join(failed[0].notes) or 'no successful measurement'}; see {work_dir}/tasks/*/"
                         f"{WorkDir.TRIALS}. No untuned build is reported as a result")
    return NetworkTuneResult(results, time.time() - start, work_dir, cpu_mod.run_peak(cpu, threads=threads)["peak_gflops"],
                             threads)


def winograd_tasks(mod, cpu=None, threads: int = 1, prepack: bool = True) -> list:
    """The tasks of the (prepared) module's eligible 3x3 layers computed with Winograd, for each tile size in
    winograd.TILE_SIZES (the module's other tasks are extract_tasks')."""
    out = []
    for m in wg.TILE_SIZES:
        rewritten, count = wg.rewrite(mod, lambda conv, m=m: m)
        if count:
            out += [t for t in extract_tasks(rewritten, cpu, threads, prepack) if t.policy == "winograd"]
    return out


def _choose_winograd(pairs: list, mod, cpu, threads: int, prepack: bool, work_dir: str) -> dict:
    """Choose Winograd or the direct convolution per layer from the tuned (Task, TaskResult) pairs, save the
    choices in work_dir (none: no layer takes Winograd) and say on each task whether the build runs it."""
    timed, layer_of_task = [], {}
    for task, res in pairs:
        if task.policy == "winograd":
            conv = wg.conv_from_key(task.shape)
            layer_of_task[task.name] = (conv.layer, conv.m)
        elif task.policy == "tvm_ttile":
            layer = wg.layer_of(task.mod["main"], ttile_problem(task.mod, cpu.target(threads))[0])
            if layer is None:
                continue
            layer_of_task[task.name] = (layer, 0)
        else:
            continue
        layer, m = layer_of_task[task.name]
        timed.append((layer, m, res.seconds * 1e3 * res.weight, res.verified and res.trials > 0))
    choices = wg.choose(timed)
    wg.save_choices(work_dir, choices)
    for task, res in pairs:
        if task.name not in layer_of_task or layer_of_task[task.name][0] not in choices:
            continue
        layer, m = layer_of_task[task.name]
        c = choices[layer]
        res.built = c["m"] == m
        forms = ", ".join([f"direct {c['direct_ms']:.3f}"] + [f"F({k},3) {v:.3f}" for k, v in c["winograd_ms"].items()])
        res.notes.append(f"{'built' if res.built else 'not built'}: the layer's forms, ms per inference: {forms}")
    if any(c["m"] for c in choices.values()):  # the built network's names for its functions
        built = extract_tasks(wg.apply(mod, work_dir)[0], cpu, threads, prepack)
        names = {str(structural_hash(t.mod)): t.name for t in built}
        for task, res in pairs:
            name = names.get(str(structural_hash(task.mod)))
            if res.built and name and name != task.name:
                res.symbol = name
    return choices


def _task_result(task, database, target, tuning_seconds) -> TaskResult:
    best = best_schedule(database, task.mod)
    notes = [task.reason] if task.reason else []
    size = weight_bytes(task.mod)
    if best is None:
        missing = ("no record: this form is not chosen" if task.policy == "winograd" else
                   "no record: built with the default schedule")
        return TaskResult(task.name, task.policy, task.shape, task.weight, task.flops, float("nan"), 0.0, 0,
                          tuning_seconds, False, float("nan"), notes + [missing], size)
    sch, record = best
    ok, err = verify_against_untuned(task.mod, sch.mod, target)
    secs = statistics.median(float(s) for s in record.run_secs)
    made_by = task.policy
    if task.policy == "metaschedule":
        variant = variant_of(sch.mod["main"])
        made_by = f"tvm_ttile {variant}" if variant else "metaschedule's search"
    return TaskResult(task.name, task.policy, task.shape, task.weight, task.flops, secs, task.flops / secs / 1e9,
                      len(records_of(database, task.mod)), tuning_seconds, ok, err, notes, size, made_by)


def verify_against_untuned(mod, tuned, target, rtol: float = 1e-3, seed: int = 0) -> tuple:
    """Run the untuned and the tuned function on the same random inputs; compare every output buffer."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    rng = np.random.default_rng(seed)
    infos = ArgInfo.from_prim_func(mod["main"])
    inputs = [rng.standard_normal([int(x) for x in a.shape]).astype(a.dtype) for a in infos]
    outs = []
    for m in (mod, tuned):
        lib = tvm.compile(m, target=target)
        args = [tvm.runtime.tensor(x.copy(), tvm.cpu()) for x in inputs]
        lib(*args)
        outs.append([a.numpy() for a in args])
    # Every buffer after the call: the inputs must be untouched, the outputs equal.
    err = max(float(np.max(np.abs(r - g))) if r.size else 0.0 for r, g in zip(*outs))
    scale = max(float(np.max(np.abs(r))) if r.size else 0.0 for r in outs[0]) or 1.0
    return bool(np.isfinite(err) and err <= rtol * scale), err


def build_network(mod, work_dir_or_database=None, cpu=None, threads: int = 1, prepack: bool = True):
    """build_executable(...) in a tvm.relax.VirtualMachine on the CPU."""
    return vm_of(build_executable(mod, work_dir_or_database, cpu, threads, prepack))


def vm_of(executable):
    """A tvm.relax.VirtualMachine on the CPU running `executable` (built here, or loaded from a library file)."""
    return relax.VirtualMachine(executable, tvm.cpu())


def build_executable(mod, work_dir_or_database=None, cpu=None, threads: int = 1, prepack: bool = True,
                     exec_mode: str = "bytecode"):
    """Compile the prepared Relax module with the tuning records (the pipeline of MetaSchedule's compile_relax,
    plus weight prepacking: the packing blocks of tuned functions are split out and folded on the constant
    weights, once); functions without a record keep the default (unscheduled) lowering. `prepack` must be as
    when the tasks were tuned (it changes the task keys). `exec_mode`: relax.build's ("compiled" turns the VM's
    program into machine code; level with "bytecode" on ResNet-18 and Darknet-19). Returns the relax Executable."""
    from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline  # (not reachable via relax.pipeline in 0.27)

    cpu = cpu or cpu_mod.detect_host()
    cpu_mod.use_threads(threads)  # the network runs on TVM's thread pool, sized here for `threads`
    target = cpu.target(threads)
    database = work_dir_or_database
    if database is None:
        database = ms.database.MemoryDatabase()
    elif isinstance(database, (str, os.PathLike)):
        from .automcl.network import apply_dense

        from .in_network import picks_database

        work_dir = os.fspath(database)
        mod, _ = apply_dense(mod, work_dir)  # dense layers tuned by AutoMCL (dense="automcl")
        mod, _ = wg.apply(mod, work_dir)  # the 3x3 layers where Winograd was faster
        database = open_database(work_dir)
        picks = picks_database(work_dir)  # the candidates fastest inside the network (in_network), first
        if picks is not None:
            database = ms.database.OrderedUnionDatabase(picks, database)

    @tvm.transform.module_pass(opt_level=3)
    def pipeline(m, _ctx):
        passes = [*_fuse_passes(prepack), relax.transform.MetaScheduleApplyDatabase(enable_warning=False)]
        if prepack:
            passes += [relax.transform.SplitLayoutRewritePreproc(), relax.transform.FoldConstant()]
        passes += cpu_pipeline.dataflow_lower_passes(target) + cpu_pipeline.finalize_passes(target)
        return tvm.transform.Sequential(passes)(m)

    with target, database, tvm.transform.PassContext(opt_level=3):
        return relax.build(mod, target=target, relax_pipeline=pipeline, exec_mode=exec_mode)


def run(vm, x) -> np.ndarray:
    out = vm["main"](tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu()))
    while not hasattr(out, "numpy"):  # a tuple of outputs: the first
        out = out[0]
    return out.numpy()


def latency(vm, x, repeat: int = 15, min_repeat_ms: int = 200) -> dict:
    """End-to-end latency in ms: median, min, max and interquartile range over `repeat` repeats."""
    f = vm.time_evaluator("main", tvm.cpu(), number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return spread([1e3 * s for s in f(tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu())).results])


def profile(vm, x, repeat: int = 20) -> dict:
    """Where an inference spends its time: every call the VM makes (compiled functions and VM builtins such as
    allocation), timed inside the running network through the VM's instrument hook, so each function meets its
    inputs and weights as the network leaves them (unlike tuning, which times a task alone, hot). Returns
    {"total_ms": median inference with the hook, "calls": {symbol: {"ms": median per inference, "calls": n}}};
    the hook's own cost (~1 us a call) is in total_ms, not in the calls."""
    import time as _time

    x = tvm.runtime.tensor(np.ascontiguousarray(x), tvm.cpu())
    per_run, current, clock = [], {}, {}

    def instrument(func, symbol, before_run, ret, *args):
        now = _time.perf_counter()
        if before_run:
            clock[symbol] = now
        else:
            current[symbol] = current.get(symbol, 0.0) + now - clock.pop(symbol)
            current[symbol + "#calls"] = current.get(symbol + "#calls", 0) + 1
        return 0  # VMInstrumentReturnKind.NO_OP

    vm.set_instrument(tvm.runtime.convert(instrument))
    totals = []
    try:
        for _ in range(repeat + 1):  # the first run warms up (allocations, page faults)
            current.clear()
            start = _time.perf_counter()
            vm["main"](x)
            totals.append(_time.perf_counter() - start)
            per_run.append(dict(current))
    finally:
        vm.set_instrument(None)
    per_run, totals = per_run[1:], totals[1:]
    symbols = [s for s in per_run[0] if not s.endswith("#calls")]
    calls = {s: {"ms": 1e3 * statistics.median(r.get(s, 0.0) for r in per_run), "calls": per_run[0][s + "#calls"]}
             for s in symbols}
    return {"total_ms": 1e3 * statistics.median(totals), "calls": calls, "repeats": repeat}


def spread(ms_values) -> dict:
    q = statistics.quantiles(ms_values, n=4) if len(ms_values) > 1 else [ms_values[0]] * 3
    return {"median_ms": statistics.median(ms_values), "min_ms": min(ms_values), "max_ms": max(ms_values),
            "iqr_ms": q[2] - q[0], "repeats": len(ms_values)}
