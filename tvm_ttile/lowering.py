"""Scheme -> tvm.s_tir.Schedule on the operator's PrimFunc, tensorized with catalog intrinsics.

Levels above the tensorized region become split + reordered loops. The region is either
- the microkernel with its reuse loop (no Lambda): tensorized with the microkernel's intrinsic; or
- everything from a Lambda down: tensorized with a *tail intrinsic* whose description is the plain tile
  computation and whose implementation runs the Lambda's parts in sequence, each a loop nest around the
  inlined microkernel. (TVM's loop_partition pieces cannot be tensorized: the second piece starts
  mid-tile; see ENVIRONMENT.md.)
Tail intrinsic names carry the whole sub-scheme, so a fresh process can register them from a name alone.
"""
from __future__ import annotations

import dataclasses
import re

import tvm
from tvm.s_tir import TensorIntrin
from tvm.sym.analyzer import Analyzer
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as T

from .errors import TTileError
from . import read_in_place as in_place_reads
from .microkernels import intrin
from .microkernels.spec import FAMILIES, Microkernel
from .scheme import T as Tile
from .scheme import P, Scheme, U, V
from .recognize import CANONICAL, LAYOUTS, LOADS, ONE_D_LAYOUTS, _product, as_schedule, canonicalize, recognize
from .space import DIMS, REDUCTION, Problem, microkernel_of

BLOCK_DIMS = CANONICAL  # the block's iterators after recognize.canonicalize (batch iterators before them)
TAIL_PREFIX = "ttile_tail~"


# --- tail intrinsics -------------------------------------------------------------------------------

def _region_mk(op, isa, lanes, stride, dilation, ext: dict) -> Microkernel:
    """A Microkernel whose tile is `ext`: its description is exactly the tile computation we need."""
    family = FAMILIES[op]
    v = family["vector"]
    if ext.get(v, lanes) % lanes:
        raise TTileError(f"tile extent {ext[v]} along {v} is not whole vectors of {lanes}")
    if ext.get("n", 1) != 1:
        raise TTileError("a Lambda region may not contain levels along the batch dimension n")
    factors = {d: ext.get(d, 1) for d in family["dims"]}
    factors[v] = ext.get(v, lanes) // lanes
    if family["unrolled_reduction"]:  # conv2d: the region's c is the reduction loop's, none unrolled
        factors[family["unrolled_reduction"]] = 1
    return Microkernel.make(op, isa, lanes, ext.get(family["reduction"], 1), stride, dilation, **factors)


def tail_name(problem: Problem, sub: Scheme, ext: dict | None = None, packed: int = 0, prefetch: int = 0,
              zero_start: bool = False, one_d: bool = False) -> str:
    extra = "" if ext is None else "~ext=" + ",".join(f"{d}{e}" for d, e in sorted(ext.items()))
    suffix = intrin.variant_suffix(packed, prefetch, zero_start, one_d)
    return (f"{TAIL_PREFIX}{problem.op}~{problem.isa}x{problem.lanes}~st{problem.stride}~dl{problem.dilation}~"
            f"{sub.text}{extra}{'~' + suffix if suffix else ''}")


def _parse_tail_name(name: str):
    m = re.fullmatch(re.escape(TAIL_PREFIX) + r"(\w+)~(\w+)x(\d+)~st(\d+)~dl(\d+)~(.*?)(?:~ext=([\w,]+))?"
                     + f"(?:~(?:{intrin.PACKED}(\\d+))?(?:{intrin.PREFETCH}(\\d+))?({intrin.ZERO_START})?"
                     + f"({intrin.ONE_D})?)?", name)
    if not m:
        raise TTileError(f"not a tvm_ttile tail intrinsic name: {name!r}")
    op, isa, lanes, st, dl, text, ext, packed, prefetch, zero_start, one_d = m.groups()
    problem = Problem(op, (), int(lanes), isa, int(st), int(dl))
    sizes = None if ext is None else {item[0]: int(item[1:]) for item in ext.split(",")}
    return (problem, Scheme.parse(text), sizes, int(packed or 0), int(prefetch or 0), bool(zero_start),
            bool(one_d))


def register_tail(problem: Problem, sub: Scheme, ext: dict | None = None, packed: int = 0,
                  prefetch: int = 0, zero_start: bool = False, one_d: bool = False) -> tuple:
    """Register the tail intrinsic of sub-scheme `sub`: from a Lambda down, or (with `ext`, the region's
    extents) a whole scheme with partial P tiles; `packed`: reading weights prepacked in blocks of that
    many vector elements; `prefetch`: its microkernels prefetch weights that many reduction steps ahead;
    `zero_start`: its microkernels start their accumulators at zero (only where each call covers the whole
    reduction); `one_d`: over a 1-d convolution's buffers (intrin.ONE_D). Returns (name, region_mk)."""
    name = tail_name(problem, sub, ext, packed, prefetch, zero_start, one_d)
    region = _region_mk(problem.op, problem.isa, problem.lanes, problem.stride, problem.dilation,
                        ext if ext is not None else sub.extents(problem.lanes)[0])
    if TensorIntrin.get(name, allow_missing=True) is None:
        desc = intrin._func(region, impl=False, packed=packed, one_d=one_d)
        with IRBuilder() as ib:
            with T.prim_func(s_tir=True):
                T.func_name("tail_impl")
                params = [T.arg(n, T.handle()) for n in ("a", "b", "c")]
                A, B, C = intrin._buffers(region, params, impl=True, packed=packed, one_d=one_d)
                full = lambda buf: buf[tuple(slice(0, e) for e in buf.shape)]  # noqa: E731
                with T.sblock("root"):
                    T.reads(full(C), full(A), full(B))
                    T.writes(full(C))
                    A, B, C = intrin.views(A, B, C, packed, one_d)
                    if ext is not None:
                        _emit_partial(problem, sub, ext, A, B, C, prefetch)
                    else:
                        _emit_tail(problem, sub, A, B, C, prefetch, zero_start)
        TensorIntrin.register(name, desc, ib.get())
    return name, region


def _emit_partial(problem, scheme, ext, A, B, C, prefetch=0):
    """Loops for a scheme with P levels: each P runs ceil(avail / size) tiles, the last one clipped; below
    the last level, a loop over the whole microkernels left in the (possibly clipped) tile."""
    import tvm.tirx as tir

    specs = scheme.specs
    mk_start = len(specs)
    while mk_start > 0 and isinstance(specs[mk_start - 1], (U, V)):
        mk_start -= 1
    reuse_i = mk_start - 1
    mk = microkernel_of(problem, scheme)
    mk.check_registers()
    exts = scheme.extents(problem.lanes)
    unit = exts[reuse_i]
    partial = sorted(scheme.partial_dims)

    def counts(dims, base, avail):
        if not dims:
            intrin.emit_microkernel(mk, A, B, C, base, prefetch)
            return
        d, u = dims[0], unit.get(dims[0], 1)
        with T.serial(0, tir.floordiv(avail[d], u)) as v:
            counts(dims[1:], {**base, d: base.get(d, 0) + v * u}, avail)

    def walk(i, base, avail):
        if i == reuse_i:
            counts(partial, base, avail)
            return
        spec = specs[i]
        d = spec.dim
        if isinstance(spec, P):
            t = spec.size
            with T.serial(0, tir.floordiv(avail[d] + t - 1, t)) as v:
                walk(i + 1, {**base, d: base.get(d, 0) + v * t}, {**avail, d: tir.min(t, avail[d] - v * t)})
        else:
            below = exts[i + 1].get(d, 1)
            with T.serial(0, spec.n) as v:
                walk(i + 1, {**base, d: base.get(d, 0) + v * below}, {**avail, d: below})

    walk(0, {}, dict(ext))


def _emit_tail(problem, sub, A, B, C, prefetch=0, zero_start=False):
    lam = sub.specs[0]
    offset = 0
    for repeats, unroll in lam.parts:
        mk = microkernel_of(problem, sub, lambda_unroll=unroll)
        mk.check_registers()
        ext = sub.extents(problem.lanes, lambda_unroll=unroll)
        part = ext[1][lam.dim] if len(sub.specs) > 1 else unroll
        with T.serial(0, repeats) as p:
            _emit_levels(sub.specs[1:], ext[1:], {lam.dim: offset + p * part}, mk, A, B, C, prefetch, zero_start)
        offset += repeats * part


def _emit_levels(specs, exts, base, mk, A, B, C, prefetch=0, zero_start=False):
    """Loops for the T specifiers down to the reuse loop, then the microkernel at the accumulated offsets."""
    if len(specs) > 1 and not isinstance(specs[0], (U, V)) and isinstance(specs[1], (U, V)):
        # specs[0] is the reuse loop: the microkernel owns it
        intrin.emit_microkernel(mk, A, B, C, base, prefetch, zero_start)
        return
    spec = specs[0]
    below = exts[1].get(spec.dim, 1)
    with T.serial(0, spec.n) as v:
        inner = dict(base)
        inner[spec.dim] = inner.get(spec.dim, 0) + v * below
        _emit_levels(specs[1:], exts[1:], inner, mk, A, B, C, prefetch, zero_start)


def register_by_name(name: str) -> None:
    """Register a tvm_ttile intrinsic from its name alone (used before opening a database)."""
    if TensorIntrin.get(name, allow_missing=True) is not None:
        return
    if name.startswith(intrin.NO_INIT):
        intrin.register_no_init(name)
    elif name.startswith(TAIL_PREFIX):
        register_tail(*_parse_tail_name(name))
    else:
        base, *variant = intrin.parse_suffix(name)
        intrin.register(Microkernel.from_name(base), *variant)


# --- lowering -------------------------------------------------------------------------------------

@dataclasses.dataclass
class Lowered:
    sch: object  # tvm.s_tir.Schedule
    intrinsics: list  # names of the intrinsics used
    notes: list  # what could not be done as asked (reported, never hidden)


def _split_scheme(scheme: Scheme):
    specs = scheme.specs
    mk_start = len(specs)
    while mk_start > 0 and isinstance(specs[mk_start - 1], (U, V)):
        mk_start -= 1
    lam = scheme.lambda_spec()
    cut = specs.index(lam) if lam is not None else mk_start - 1
    return cut, mk_start


def problem_of(func, isa: str, lanes: int) -> Problem:
    """The Problem of a PrimFunc's contraction, recognized from its computation (recognize.py); TTileError
    with one line saying why when tvm_ttile cannot tune it."""
    sch = as_schedule(func)
    c = recognize(sch)
    sizes = dict(c.extents)
    vector = sizes[FAMILIES[c.op]["vector"]]
    if vector % lanes:
        raise TTileError(f"the vectorized dimension ({vector}, the output's innermost) is not a multiple of {lanes} "
                         "lanes: build the function with vector_lanes= (operators.py) so that it is padded")
    block = sch.get_sblock(c.block)
    _, x, y = _product(sch.get(block).body.value)
    halo = any(not _is_identity_copy(sch.get(p)) for p in _producers_of(sch, block, y if c.weights_first else x))
    return Problem(c.op, tuple((d, sizes[d]) for d in DIMS[c.op]), lanes, isa, c.stride, c.dilation,
                   batch=c.batch_size, halo=halo)


def _producers_of(sch, block, load) -> list:
    """The blocks that write the buffer `load` (a load in `block`) reads."""
    return [p for p in sch.get_producers(block) if any(w.source.same_as(load.source) for w in sch.get(p).writes)]


def _loads(expr) -> list:
    if type(expr).__name__ in ("BufferLoad", "TensorLoad"):
        return [expr]
    if hasattr(expr, "a") and hasattr(expr, "b"):
        return _loads(expr.a) + _loads(expr.b)
    if hasattr(expr, "value"):
        return _loads(expr.value)
    return []


LAYOUT_REWRITE = "meta_schedule.layout_rewrite_preproc"


def pad(sch, block, problem: Problem, pads: dict) -> list:
    """Pad the operator's block (in canonical form, recognize.canonicalize) to `pads` ({dim: size}) with TVM's
    pad_einsum: zero-filled copies of the operands it reads and a copy of the outputs it keeps, separate passes
    timed with the function. A copy of a copy (a vector-padded weight padded again) becomes one; notes say
    where that failed."""
    problem.padded(pads)  # refuses dimensions the operator cannot pad
    size = problem.size
    before = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    ivs = sch.get(block).iter_vars
    batch = [int(iv.dom.extent) for iv in ivs[:len(ivs) - len(BLOCK_DIMS[problem.op])]]
    sch.pad_einsum(block, batch + [pads.get(d, size[d]) for d in BLOCK_DIMS[problem.op]])
    notes = []
    for producer in sch.get_producers(block):
        for inner in sch.get_producers(producer):  # e.g. B_pad (vector lanes) under B_pad_pad
            if sch.get(inner).name_hint in before and not sch.get_producers(inner):
                try:
                    sch.compute_inline(inner)
                except Exception as e:  # noqa: BLE001 - schedule errors; reported in notes
                    notes.append(f"padding copy {sch.get(inner).name_hint} kept apart: {str(e).splitlines()[0]}")
    return notes


def pack_block(problem: Problem, scheme: Scheme) -> int:
    """Weights are packed in blocks of the microkernel's vector extent; of one vector when a Lambda combines
    sizes along the vector dimension or partial tiles leave a remainder along it."""
    for spec in scheme.specs:
        if isinstance(spec, U) and spec.dim == problem.vector and isinstance(spec.n, int):
            block = spec.n * problem.lanes
            return block if problem.size[problem.vector] % block == 0 else problem.lanes
    return problem.lanes


WEIGHT_INDICES = {op: layouts[1] for op, layouts in LAYOUTS.items()}  # the layouts the microkernels read


def pack_weights(sch, block, op: str, size: int, one_d: bool = False) -> int:
    """Give the microkernels their weights in the blocked layout of intrin.packed_shape (one contiguous stream
    along the reduction instead of rows strided by K, which also share cache sets when the stride is a power
    of two), where that costs nothing at run time or is a copy the function makes anyway:
    - weights the function marks layout-free (constants: Relax's AttachAttrLayoutFreeBuffers) are prepacked:
      a copy annotated as MetaSchedule's layout-rewrite preprocessing, which its builder drops when timing
      (the runner passes packed weights) and Relax's SplitLayoutRewritePreproc + FoldConstant run once at
      build time;
    - weights read through a copy made inside the function (to whole vectors, the dense layout's transpose, a
      Pad specifier's zeros) have that copy write the blocked layout: at build time when it loads constants at
      its plain loop variables (the only copy MetaSchedule can split off as preprocessing), else at each call,
      timed with the function.
    Only weights read in place as WEIGHT_INDICES (after a batch matmul's batch indices, each instance packed on
    its own; a 1-d convolution's as ONE_D_LAYOUTS). Returns the block size, 0 when nothing was packed."""
    func = sch.mod["main"]
    stmt = sch.get(block)
    ivs = dict(zip(BLOCK_DIMS[op], (iv.var for iv in stmt.iter_vars[-len(BLOCK_DIMS[op]):])))
    batch = [iv.var for iv in stmt.iter_vars[:-len(BLOCK_DIMS[op])]]
    # A batch matmul's weights lead with the batch indices; a grouped conv2d's output channel is group * K/groups
    # + k: either way the blocked layout below cuts the same whole blocks out of the vector dimension.
    lead = batch if op == "matmul" else []
    indices = ONE_D_LAYOUTS[op][1] if one_d else WEIGHT_INDICES[op]
    want = len(lead) + len(indices)
    load = next((ld for ld in reversed(_loads(stmt.body.value))  # the weights are the last operand
                 if len(ld.indices) == want and all(i.same_as(v) for i, v in zip(ld.indices, lead))
                 and all(_indexes(i, ivs[d], batch) for i, d in zip(ld.indices[len(lead):], indices))),
                None)
    if load is None or len(lead) > 2:
        return 0
    reads = stmt.reads
    index = next(i for i in range(len(reads)) if reads[i].source.same_as(load.source))
    params = list(func.params)
    free = func.attrs.get("layout_free_buffers") if func.attrs is not None else None
    free = [params[int(i)] for i in free or ()]  # 0.27: parameters are the buffers themselves
    if any(load.source.same_as(p) for p in params):
        if not any(load.source.same_as(p) for p in free):
            return 0
        cache = sch.cache_read(block, index, "global")
        sch.annotate(cache, LAYOUT_REWRITE, True)
        copy = None
    else:
        copy = next((p for p in sch.get_producers(block)
                     if any(w.source.same_as(load.source) for w in sch.get(p).writes)), None)
        if copy is None:
            return 0
        if _plain_load_of(sch.get(copy), free):  # e.g. the dense layout's transpose of constants
            sch.annotate(copy, LAYOUT_REWRITE, True)
            copy = None
    # The vector dimension (last) split into blocks, outermost below the batch. (IndexMap.from_func of a *x
    # lambda fails here.)
    blocked = {(0, 4): lambda r, s, c, k: (k // size, r, s, c, k % size),  # conv2d
               (0, 3): lambda r, s, k: (k // size, r, s, k % size),  # depthwise; conv1d's s, c, k
               (0, 2): lambda k, j: (j // size, k, j % size),  # matmul
               (1, 2): lambda b, k, j: (b, j // size, k, j % size),  # batch matmul
               (2, 2): lambda a, b, k, j: (a, b, j // size, k, j % size)}
    sch.transform_layout(block, ("read", index), blocked[len(lead), len(indices)])
    if copy is not None:
        _write_in_order(sch, copy, size, len(lead))
    return size


def _indexes(expr, var, batch) -> bool:
    """Whether index `expr` is `var`, or `var` offset by whole multiples of batch (group) variables."""
    if expr.same_as(var):
        return True
    from tvm.sym.pattern import detect_linear_equation

    coef = detect_linear_equation(expr, [var, *batch])
    return (len(coef) == len(batch) + 2 and all(isinstance(c, tvm.tirx.IntImm) for c in coef)
            and int(coef[0]) == 1 and int(coef[-1]) == 0)


def _plain_load_of(stmt, buffers) -> bool:
    """Whether block `stmt` stores a load of one of `buffers` at its plain iteration variables: the only copy
    MetaSchedule can split off as build-time preprocessing (RemoveLayoutRewriteBlock)."""
    value = getattr(stmt.body, "value", None)
    if type(value).__name__ not in ("BufferLoad", "TensorLoad") or len(stmt.reads) != 1:
        return False
    ivs = [iv.var for iv in stmt.iter_vars]
    return (any(value.source.same_as(b) for b in buffers)
            and all(any(i.same_as(v) for v in ivs) for i in value.indices))


def _write_in_order(sch, copy, size: int, batch: int = 0) -> None:
    """The copy that writes the blocked weights walks them in their new order (batch, block, ..., lanes), the
    lanes vectorized: written as a stream, ~6x faster than in the source's order on the Zen 4."""
    loops = sch.get_loops(copy)
    *outer, last = loops
    if len(outer) + 1 != len(sch.get(copy).iter_vars):
        return
    extent = sch.get(last).extent
    if not isinstance(extent, tvm.tirx.IntImm) or int(extent) % size:
        return
    block_loop, lane = sch.split(last, [None, size])
    sch.reorder(*outer[:batch], block_loop, *outer[batch:], lane)
    sch.vectorize(lane)


# Reduction steps ahead at which the microkernels prefetch their weights, per operator (0: none). Off: on the
# Zen 3 matmul prefetching 16 steps ahead gained 3% (geometric mean of 10 shapes, prepacked weights,
# benchmarks/results/prefetch.md) but on the Zen 4 it lost 2% prepacked (0.935-1.002,
# results/awkward_zen4/prefetch_zen4.md) and up to 2.4x on weights read in place or through a padding copy
# (results/awkward_zen4/NOTES.md); conv2d prefetching made ResNet-18 5% slower on the Zen 3
# (results/end_to_end_zen3/builds_side_by_side_prefetch.md). lower(prefetch=) still asks for it.
WEIGHT_PREFETCH = {"matmul": 0, "conv2d": 0, "depthwise": 0}
# At threads > 1, an input copy left as a pass (a conv2d's padding) runs on every thread. ResNet-18's padded conv2d
# layers at 2 threads, the same schemes lowered both ways: 0.990x and 0.971x their time in all, in two runs
# (benchmarks/results/in_network_zen5/parallel_input_pass_2threads*.md); serial, that pass is the share Amdahl's
# law charges at many cores. Off, the pass runs on one core.
PARALLEL_INPUT_PASS = True


def lower(problem: Problem, scheme: Scheme, func, threads: int = 1, prepack: bool = True,
          prefetch: int | None = None, zero_start: bool = True, vector_init: bool = False,
          skip_dead_init: bool = True, vector_copy: bool = False, copy_at: str | None = None,
          read_in_place: bool = True, border: str = "guard") -> Lowered:
    """Apply `scheme` to `func` (a PrimFunc such as Conv2d.prim_func(lanes), an IRModule, or a Schedule
    of one, e.g. MetaSchedule's, so that the trace records every step). With `prepack`, weights the function
    marks layout-free, or copies anyway, are packed (pack_weights). `prefetch`: reduction steps ahead at which
    the microkernels prefetch their weights (None: WEIGHT_PREFETCH's for the operator; 0: none). `zero_start`:
    where each tensorized call covers the whole reduction, its accumulators start at zero instead of loading
    the output tile the reduction's init has just zeroed (False: always load, as before). `vector_init`: the
    reduction's init stores its zeros in whole vectors (intrin.vectorize_init). `skip_dead_init`: where the
    accumulators start at zero, the init (whose zeros they overwrite) is replaced by nothing (intrin.skip_init),
    at any thread count. `vector_copy`: a depthwise tile's input copy (INPUT_COPY_AT) moves whole vectors of
    channels (its innermost loop split by the lanes and vectorized) instead of what LLVM makes of the padded
    copy's conditional loads. `copy_at`: where that copy is made (COPY_AT; None: INPUT_COPY_AT_IN_PLACE's or
    INPUT_COPY_AT's place for the operator, whichever copies less; with guarded borders, which copy nothing,
    INPUT_COPY_AT_IN_PLACE's). `read_in_place`: the copy is marked so that,
    at build time, the tiles whose window lies inside the input skip it and read the input itself
    (read_in_place.py); `border`: what the other tiles do, "guard" (read the input too, each load guarded by the
    copy's condition) or "copy" (copy their window)."""
    if scheme.in_place:  # the scheme says where the input's padding goes (explicit copy_at= still wins)
        if problem.op == "matmul":
            raise TTileError(f"{scheme.text}: InPlace reads a convolution's padded input; {problem.op} has none")
        copy_at, read_in_place, border = copy_at or "inner", True, scheme.in_place
    if border not in BORDERS:
        raise TTileError(f"border={border!r}: one of {', '.join(map(repr, BORDERS))}")
    if copy_at is not None and copy_at not in COPY_AT:
        raise TTileError(f"copy_at={copy_at!r}: one of {', '.join(map(repr, COPY_AT))}")
    scheme.validate(problem.size, problem.lanes, problem.reuse, REDUCTION[problem.op])
    sch = func if isinstance(func, tvm.s_tir.Schedule) else tvm.s_tir.Schedule(func)
    contraction = recognize(sch)
    block = canonicalize(sch, contraction)
    notes = inline_identity_copies(sch, block)
    one_d = contraction.one_d  # a conv2d of height 1 over 3-d buffers: its intrinsics' variant
    text = scheme.text
    if scheme.pads:  # the copies first; the loops then tile the padded problem
        notes += pad(sch, block, problem, scheme.padding)
        problem, scheme = problem.padded(scheme.padding), scheme.unpadded
        block = sch.get_sblock(contraction.block)
    op, size, lanes = problem.op, problem.size, problem.lanes
    npar = len(scheme.parallel_levels)
    chunk = dict(size)  # the extents one parallel chunk covers: what the per-core scheme tiles
    for spec in scheme.parallel_levels:
        chunk[spec.dim] //= spec.n
    prefetch = WEIGHT_PREFETCH[op] if prefetch is None else prefetch
    packed = pack_weights(sch, block, op, pack_block(problem, scheme), one_d) if prepack else 0
    # Batch loops (a batch matmul's batch, a grouped conv2d's groups) stay outermost, above every level of the
    # scheme; with a Par level they join the parallel loop (independent instances: more chunks, one fork).
    *batch_loops, = sch.get_loops(block)[:-len(BLOCK_DIMS[op])]
    loops = dict(zip(BLOCK_DIMS[op], sch.get_loops(block)[-len(BLOCK_DIMS[op]):]))
    cut, mk_start = _split_scheme(scheme)
    region_ext = scheme.extents(lanes)[cut]
    # Each tensorized call holds the whole reduction when the region covers it and no level inside the region but
    # the reuse loop is on it: the call's accumulators may then start at zero (emit_microkernel).
    zero_start = zero_start and not scheme.partial_dims and all(
        region_ext.get(d, 1) == size[d] for d in REDUCTION[op]) and not any(
        getattr(spec, "dim", None) in REDUCTION[op] for spec in scheme.specs[cut:mk_start - 1])

    reuse = intrin.loop_nest_names(op)[0]  # the name intrin.loop_nest gives the reuse loop
    if scheme.partial_dims:  # P levels: a chunk's nest below its batch loops is one tail intrinsic, loops clipped
        cut = npar
        while cut < len(scheme.specs) and isinstance(scheme.specs[cut], Tile) and scheme.specs[cut].dim == "n":
            chunk["n"] //= scheme.specs[cut].n
            cut += 1
        nest = Scheme(scheme.specs[cut:])
        if any(spec.dim == "n" for spec in nest.specs):
            raise TTileError(f"{scheme.text}: with P levels the batch's levels must come first (below Par)")
        region_ext = dict(chunk)
        name, nest_mk = register_tail(problem, nest, ext={d: e for d, e in chunk.items() if d != "n"},
                                      packed=packed, prefetch=prefetch, one_d=one_d)
        region_loops = [(reuse, problem.reuse, nest_mk.red)]
    elif cut == mk_start - 1:  # no Lambda: the microkernel and its reuse loop
        mk = microkernel_of(problem, scheme)
        unrolled = mk.family["unrolled_reduction"]
        region_loops = [(reuse, problem.reuse, mk.red // mk.get(unrolled) if unrolled else mk.red)]
        if unrolled and mk.get(unrolled) > 1:
            region_loops.append(("c_i", unrolled, mk.get(unrolled)))
        name, nest_mk = intrin.register(mk, packed, prefetch, zero_start, one_d), mk
    else:
        name, nest_mk = register_tail(problem, Scheme(scheme.specs[cut:]), packed=packed, prefetch=prefetch,
                                      zero_start=zero_start, one_d=one_d)
        region_loops = [(reuse, problem.reuse, nest_mk.red)]
    for d in intrin.loop_nest_names(op)[1:]:
        if d in BLOCK_DIMS[op]:  # not conv2d's c_i, added above when the microkernel unrolls c
            region_loops.append((d, d, region_ext.get(d, 1)))

    # Per dimension: the factors of the levels above the region, outermost first, then the region's.
    factors = {d: [] for d in BLOCK_DIMS[op]}
    order = []  # (dim, index into that dim's factors)
    for spec in scheme.specs[:cut]:
        factors[spec.dim].append(spec.n)
        order.append((spec.dim, len(factors[spec.dim]) - 1))
    region_index = {}
    for name_, d, f in region_loops:
        factors[d].append(f)
        region_index[name_] = (d, len(factors[d]) - 1)
    implicit = []
    for d in BLOCK_DIMS[op]:
        prod = 1
        for f in factors[d]:
            prod *= f
        if prod != size[d] or not factors[d]:  # dims the scheme leaves to an implicit outer R (or of extent 1)
            factors[d].insert(0, size[d] // prod)
            order = [(dd, i + (dd == d)) for dd, i in order]
            region_index = {k: (dd, i + (dd == d)) for k, (dd, i) in region_index.items()}
            implicit.append((d, 0))
    split = {}
    for d in BLOCK_DIMS[op]:
        split[d] = sch.split(loops[d], factors[d]) if len(factors[d]) > 1 else [loops[d]]
    keys = order[:npar] + implicit + order[npar:]  # the parallel level stays outermost
    outer = [split[d][i] for d, i in keys]
    region = {k: split[d][i] for k, (d, i) in region_index.items()}
    sch.reorder(*outer, *[region[k] for k, _, _ in region_loops])

    red_dims = REDUCTION[op]
    # The init goes above the outermost reduction loop; None: above the region (tensorize_nest decides,
    # after it hoists the region's unit loops).
    init_loop = next((split[d][i] for d, i in keys if d in red_dims), None)
    # Epilogues move in before tensorize: afterwards reverse_compute_at no longer finds the producer.
    notes += _epilogue(sch, block, outer, red_dims, keys)
    if copy_at is None:
        copy_at = INPUT_COPY_AT[op]
        if read_in_place and border == "guard" and not problem.vector_pad:
            copy_at = INPUT_COPY_AT_IN_PLACE[op]
        elif read_in_place and INPUT_COPY_AT_IN_PLACE[op] != copy_at:
            # Per region where that copies fewer elements, the regions inside the input skipping theirs: where
            # few are inside (a tile as wide as the row, a reduction tile loop above the copy), each would copy
            # its window, halo included, again (0.79x the copy at k on a 7x7x960 best).
            copied = {}
            for at in (copy_at, INPUT_COPY_AT_IN_PLACE[op]):
                trial = sch.copy()
                _input_copy_per_tile(trial, block, outer[npar:], keys[npar:], 0, at, BORDERS["copy"])
                copied[at] = in_place_reads.copied_elements(trial.mod["main"])
            if None not in copied.values() and copied[INPUT_COPY_AT_IN_PLACE[op]] < copied[copy_at]:
                copy_at = INPUT_COPY_AT_IN_PLACE[op]
    if copy_at != "pass":  # before `parallel` fuses the outer loops
        notes += _input_copy_per_tile(sch, block, outer[npar:], keys[npar:], lanes if vector_copy else 0, copy_at,
                                      BORDERS[border] if read_in_place else 0)
    if threads > 1 and PARALLEL_INPUT_PASS:
        notes += _parallel_input_pass(sch, block)
    # Threads before tensorize: once tensorize has decomposed the reduction and hoisted its init, `parallel`
    # refuses the loop (its child blocks are no longer complete or reduction blocks).
    if npar:
        par = [*batch_loops, *outer[:npar]]
        sch.parallel(sch.fuse(*par) if len(par) > 1 else par[0])
    elif threads > 1:
        notes += _parallel(sch, outer, keys, red_dims)
    # A zero-start call writes its whole tile, and no reduction loop lies above it: the init covers that tile only
    # (under a parallel loop too: the fused loop is shared by the init and the call).
    skip = skip_dead_init and zero_start
    no_init = intrin.tensorize_nest(sch, block, nest_mk, region, init_loop=init_loop, intrin_name=name,
                                    vector_init=vector_init, no_init=skip)
    if skip and not no_init:
        notes.append("the reduction's init is not a plain tile: kept")
    # The scheme travels with the schedule's trace, so database records say which scheme they are.
    sch.annotate(sch.get_sblock("root"), SCHEME_ANNOTATION, text)
    return Lowered(sch, [name] + ([no_init] if no_init else []), notes)


def _parallel_input_pass(sch, block) -> list:
    """The input's copy, where it stays a pass over the whole input before the operator (the padding, a first
    layer's NCHW input), split over the threads too: its leading loops fused and parallel. Left serial, ResNet-18's
    padded layers copied their input on one core while the other waited (a serial share that grows with the
    cores). A copy marked for read_in_place is left as it is (that pass rewrites it at build time)."""
    copies = _producers_of(sch, block, _product(sch.get(block).body.value)[1])
    notes = []
    for copy in copies:
        if in_place_reads.ANNOTATION in sch.get(copy).annotations:
            continue
        loops = sch.get_loops(copy)
        if not loops or sch.get_sref(loops[0]).same_as(sch.get_sref(sch.get_loops(block)[0])):
            continue  # made per tile, under the operator's loops: the operator's parallel loop covers it
        lead = loops[:2] if len(loops) > 2 else loops[:1]
        try:
            sch.parallel(sch.fuse(*lead) if len(lead) > 1 else lead[0])
        except Exception as e:  # noqa: BLE001 - schedule errors; the copy stays serial, said in the notes
            notes.append(f"input copy {sch.get(copy).name_hint} left on one thread: {str(e).splitlines()[0]}")
    return notes


def inline_identity_copies(sch, block) -> list:
    """Inline every producer of `block` that copies a buffer element for element into one of the same shape:
    TOPI's conv2d writes its padding stage even when nothing is padded (every 1x1 or unpadded conv2d of a Relax
    network), a pass over the whole input before the convolution; a stride-2 1x1 layer reads a quarter of it.
    Inlined, the contraction reads the buffer itself. Returns notes on copies TVM would not inline (kept)."""
    notes = []
    for producer in sch.get_producers(block):
        if _is_identity_copy(sch.get(producer)):
            name = sch.get(producer).name_hint
            try:
                sch.compute_inline(producer)
            except Exception as e:  # noqa: BLE001 - schedule errors; the copy stays a pass, said in the notes
                notes.append(f"copy {name} (it pads nothing) kept as a pass: {str(e).splitlines()[0]}")
    return notes


def _is_identity_copy(stmt) -> bool:
    """Whether block `stmt` is `dst[v0, .., vn] = src[v0, .., vn]` over all of dst, src of dst's shape."""
    body = stmt.body
    if stmt.init is not None or type(body).__name__ != "BufferStore" or type(body.value).__name__ not in LOADS:
        return False
    ivs = stmt.iter_vars
    src, dst = body.value.source, body.buffer  # (a TensorLoad's source: the buffer it reads)
    if len(ivs) != len(dst.shape) or len(src.shape) != len(dst.shape) or \
            any(iv.iter_type != tvm.tirx.IterVar.DataPar for iv in ivs):
        return False
    same = Analyzer().can_prove_equal
    return all(idx.same_as(iv.var) and load.same_as(iv.var) and same(iv.dom.min, 0) and same(iv.dom.extent, n)
               and same(n, m) for idx, load, iv, n, m in zip(body.indices, body.value.indices, ivs, dst.shape,
                                                             src.shape))


SCHEME_ANNOTATION = "tvm_ttile.scheme"
# Where each operator's input copy (the padding, or channels padded to whole vectors) is made by default.
# Depthwise: per channel tile, inside the innermost loop over output channels, instead of as a pass over the whole
# input before the operator: it reads each input channel for one output channel only, so the tiles' copies do not
# overlap, stay in cache, and the function keeps no input-sized buffer. Conv2d's output channel tiles all read the
# whole input: one pass.
INPUT_COPY_AT = {"conv2d": "pass", "matmul": "pass", "depthwise": "k"}
# ... and where, when tiles inside the input read it in place (read_in_place): per tensorized region, so that only
# the tiles on the border copy, each its own window (per channel tile a copy often spans the whole height and is
# never inside), where that copies fewer elements (lower). The 10 MobileNet-v2 depthwise bests on the Zen 3: 1.23x
# their speed copied per channel tile, 1.00-1.50x (benchmarks/results/mobilenet_v2_zen3/NOTES.md). With guarded
# border reads (channels whole vectors) nothing is copied: per region, so that the most tiles read unguarded.
INPUT_COPY_AT_IN_PLACE = {**INPUT_COPY_AT, "depthwise": "inner"}
# Where the copy can go: a pass over the whole input before the operator, under the innermost tile loop over a
# dimension (the copy then covers what the loops below it read), or under the innermost tile loop of all (one
# copy per tensorized region: the least memory, the most halo copied again).
COPY_AT = ("pass", "k", "h", "w", "inner")
# What a tile whose window reaches the padding does with read_in_place (the copy's mark).
BORDERS = {"guard": in_place_reads.GUARD, "copy": in_place_reads.COPY}


def _input_copy_per_tile(sch, block, loops, keys, lanes: int, copy_at: str, in_place: int = 0) -> list:
    """compute_at of the block's input copy under the innermost of `loops` over `copy_at` (a dimension, or
    "inner": the innermost of them); none there: left as a pass. With `lanes`, the copy's innermost loop
    (channels) is vectorized in whole vectors. With `in_place` (read_in_place.COPY or GUARD), the copy is marked
    for read_in_place."""
    at = [lp for lp, (d, _) in zip(loops, keys) if copy_at in ("inner", d)]
    # x of out + x * y: canonicalize has put the input first
    copies = _producers_of(sch, block, _product(sch.get(block).body.value)[1])
    if not copies:
        return []
    if not at:  # left as a pass (marked too: lower counts what each place copies, read_in_place.copied_elements)
        if in_place:
            in_place_reads.mark(sch, copies[0], in_place)
        return []
    try:
        sch.compute_at(copies[0], at[-1], preserve_unit_loops=True)
    except Exception as e:  # noqa: BLE001 - schedule errors; reported in notes
        return [f"input copy {sch.get(copies[0]).name_hint} left as a separate pass: {str(e).splitlines()[0]}"]
    if in_place:
        in_place_reads.mark(sch, copies[0], in_place)
    inner = sch.get_loops(copies[0])[-1]
    extent = sch.get(inner).extent
    if lanes and isinstance(extent, tvm.tirx.IntImm) and int(extent) % lanes == 0:
        sch.vectorize(sch.split(inner, [None, lanes])[1])
    elif lanes:
        return [f"input copy {sch.get(copies[0]).name_hint}: {extent} channels per tile, not whole vectors; "
                "not vectorized"]
    return []


def scheme_of_schedule(sch) -> str | None:
    root = sch.get(sch.get_sblock("root"))
    value = root.annotations.get(SCHEME_ANNOTATION)
    return str(value) if value is not None else None


def _spatial_prefix(outer_loops, keys, red_dims):
    prefix = []
    for lp, (d, _) in zip(outer_loops, keys):
        if d in red_dims:
            break
        prefix.append(lp)
    return prefix


def _epilogue(sch, block, outer_loops, red_dims, keys) -> list:
    """Keep elementwise consumers (bias, residual add, ReLU, leaky ReLU = max(x, a*x), unpadding) fused at the
    innermost all-spatial loop: intermediate stages are inlined into their consumers until only the last
    ones read the operator's block, and those move into the loop."""
    notes = []
    while True:
        pending = [c for c in sch.get_consumers(block) if sch.get_consumers(c)]
        if not pending:
            break
        try:
            sch.compute_inline(pending[0])
        except Exception as e:  # noqa: BLE001 - schedule errors; reported in notes
            notes.append(f"consumer {sch.get(pending[0]).name_hint} not inlined: {str(e).splitlines()[0]}")
            break
    prefix = _spatial_prefix(outer_loops, keys, red_dims)
    for consumer in sch.get_consumers(block) if prefix else []:
        try:
            sch.reverse_compute_at(consumer, prefix[-1])
        except Exception as e:  # noqa: BLE001 - schedule errors; reported in notes
            notes.append(f"epilogue {sch.get(consumer).name_hint} left unfused: {str(e).splitlines()[0]}")
    return notes


def _parallel(sch, outer_loops, keys, red_dims) -> list:
    """A scheme without a parallel level at threads > 1 (hand-written, or drawn for 1 thread): its outermost
    spatial loops, fused, become the parallel loop, reported."""
    prefix = _nested(sch, _spatial_prefix(outer_loops, keys, red_dims))
    if not prefix:
        return ["threads > 1 but the scheme has no Par level and its outermost loop is a reduction: "
                "ran single-threaded"]
    sch.parallel(sch.fuse(*prefix) if len(prefix) > 1 else prefix[0])
    return ["threads > 1 but the scheme has no Par level: its outermost spatial loops were parallelized"]


def _nested(sch, loops) -> list:
    """The leading `loops` that each hold only the next one, as fuse needs: a depthwise tile's input copy
    (_input_copy_per_tile) sits beside the loop below the one it is attached to."""
    out = []
    for lp, below in zip(loops, loops[1:] + [None]):
        out.append(lp)
        if below is None or not sch.get(lp).body.same_as(sch.get(below)):
            break
    return out
