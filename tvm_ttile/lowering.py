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
import warnings

import tvm
from tvm.sym.analyzer import Analyzer

from .errors import TTileError
from . import read_in_place as in_place_reads
from .microkernels import intrin
from .microkernels.spec import FAMILIES
from .precision import get as get_precision, tag_for
from .scheme import T as Tile
from .scheme import Scheme, U, V
from .recognize import CANONICAL, LOADS, product_of, as_schedule, canonicalize, recognize
from .space import DIMS, REDUCTION, Problem, microkernel_of
from .packing import pack_block, pack_weights, pad, producers_of
from .tails import register_tail

BLOCK_DIMS = CANONICAL  # the block's iterators after recognize.canonicalize (batch iterators before them)


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


def problem_of(func, isa: str, lanes: int, cpu=None) -> Problem:
    """The Problem of a PrimFunc's contraction, recognized from its computation (recognize.py); TTileError
    with one line saying why when tvm_ttile cannot tune it. With `cpu`, a reduced precision's microkernels use
    the instruction that CPU computes it with (precision.tag_for); else their ISA's first."""
    sch = as_schedule(func)
    c = recognize(sch)
    sizes = dict(c.extents)
    vector = sizes[FAMILIES[c.op]["vector"]]
    if vector % lanes:
        raise TTileError(f"the vectorized dimension ({vector}, the output's innermost) is not a multiple of {lanes} "
                         "lanes: build the function with vector_lanes= (operators.py) so that it is padded")
    block = sch.get_sblock(c.block)
    _, x, y = product_of(sch.get(block).body.value)
    halo = any(not _is_identity_copy(sch.get(p)) for p in producers_of(sch, block, y if c.weights_first else x))
    return Problem(c.op, tuple((d, sizes[d]) for d in DIMS[c.op]), lanes, isa, c.stride, c.dilation,
                   batch=c.batch_size, halo=halo, precision=c.precision,
                   dot=tag_for(c.precision, cpu) if cpu is not None else "", input=c.input)


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


@dataclasses.dataclass(frozen=True)
class LoweringOptions:
    """How a scheme is lowered beyond what the scheme says: the experiment switches of lower(), one value.
    `prefetch`: reduction steps ahead at which the microkernels prefetch their weights (None: WEIGHT_PREFETCH's
    for the operator; 0: none). `zero_start`: where each tensorized call covers the whole reduction, its
    accumulators start at zero instead of loading the output tile the reduction's init has just zeroed.
    `vector_init`: the reduction's init stores its zeros in whole vectors (intrin.vectorize_init).
    `skip_dead_init`: where the accumulators start at zero, the init (whose zeros they overwrite) is replaced by
    nothing (intrin.skip_init), at any thread count. `vector_copy`: a depthwise tile's input copy
    (INPUT_COPY_AT) moves whole vectors of channels instead of what LLVM makes of the padded copy's conditional
    loads. `copy_at`: where that copy is made (COPY_AT; None: INPUT_COPY_AT_IN_PLACE's or INPUT_COPY_AT's place
    for the operator, whichever copies less; with guarded borders, which copy nothing, INPUT_COPY_AT_IN_PLACE's).
    `read_in_place`: the copy is marked so that, at build time, the tiles whose window lies inside the input skip
    it and read the input itself (read_in_place.py); `border`: what the other tiles do, "guard" (read the input
    too, each load guarded by the copy's condition) or "copy" (copy their window)."""
    prefetch: int | None = None
    zero_start: bool = True
    vector_init: bool = False
    skip_dead_init: bool = True
    vector_copy: bool = False
    copy_at: str | None = None
    read_in_place: bool = True
    border: str = "guard"

    def __post_init__(self):
        if self.border not in BORDERS:
            raise TTileError(f"border={self.border!r}: one of {', '.join(map(repr, BORDERS))}")
        if self.copy_at is not None and self.copy_at not in COPY_AT:
            raise TTileError(f"copy_at={self.copy_at!r}: one of {', '.join(map(repr, COPY_AT))}")


def lower(problem: Problem, scheme: Scheme, func, *, threads: int = 1, prepack: bool = True,
          options: LoweringOptions | None = None, **flags) -> Lowered:
    """Apply `scheme` to `func` (a PrimFunc such as Conv2d.prim_func(lanes), an IRModule, or a Schedule
    of one, e.g. MetaSchedule's, so that the trace records every step), on `threads` threads. With `prepack`,
    weights the function marks layout-free, or copies anyway, are packed (pack_weights). `options`: the
    experiment switches (LoweringOptions); the same given one by one as keywords (`prefetch=16`) are deprecated."""
    options = options or LoweringOptions()
    if flags:
        warnings.warn("lower(**flags) is deprecated: pass options=LoweringOptions(...)", DeprecationWarning,
                      stacklevel=2)
        options = dataclasses.replace(options, **flags)
    if scheme.in_place:  # the scheme says where the input's padding goes (explicit copy_at= still wins)
        if problem.op == "matmul":
            raise TTileError(f"{scheme.text}: InPlace reads a convolution's padded input; {problem.op} has none")
        options = dataclasses.replace(options, copy_at=options.copy_at or "inner", read_in_place=True,
                                      border=scheme.in_place)
    scheme.validate(problem.size, problem.lanes, problem.reuse, REDUCTION[problem.op])
    sch = func if isinstance(func, tvm.s_tir.Schedule) else tvm.s_tir.Schedule(func)
    contraction = recognize(sch)
    block = canonicalize(sch, contraction)
    notes = inline_identity_copies(sch, block)
    one_d = contraction.one_d  # a conv2d of height 1 over 3-d buffers: its intrinsics' variant
    text = scheme.text
    padded_dims = set(scheme.padding)
    if scheme.pads:  # the copies first; the loops then tile the padded problem
        notes += pad(sch, block, problem, scheme.padding)
        problem, scheme = problem.padded(scheme.padding), scheme.unpadded
        block = sch.get_sblock(contraction.block)
    op = problem.op
    npar = len(scheme.parallel_levels)
    prefetch = WEIGHT_PREFETCH[op] if options.prefetch is None else options.prefetch
    packed = pack_weights(sch, block, op, pack_block(problem, scheme), one_d,
                          get_precision(problem.precision).group) if prepack else 0
    # Batch loops (a batch matmul's batch, a grouped conv2d's groups) stay outermost, above every level of the
    # scheme; with a Par level they join the parallel loop (independent instances: more chunks, one fork).
    *batch_loops, = sch.get_loops(block)[:-len(BLOCK_DIMS[op])]
    region = _Region.of(problem, scheme, packed, prefetch, options.zero_start, one_d)
    outer, keys, inner, init_loop = _tile(sch, block, problem, scheme, region)
    # Epilogues move in before tensorize: afterwards reverse_compute_at no longer finds the producer.
    notes += _epilogue(sch, block, outer, REDUCTION[op], keys, problem.size, padded_dims)
    copy_at = options.copy_at or _default_copy_at(sch, block, problem, options, outer[npar:], keys[npar:])
    if copy_at != "pass":  # before `parallel` fuses the outer loops
        notes += _input_copy_per_tile(sch, block, outer[npar:], keys[npar:],
                                      problem.lanes if options.vector_copy else 0, copy_at,
                                      BORDERS[options.border] if options.read_in_place else 0)
    if threads > 1 and PARALLEL_INPUT_PASS:
        notes += _parallel_input_pass(sch, block)
    # Threads before tensorize: once tensorize has decomposed the reduction and hoisted its init, `parallel`
    # refuses the loop (its child blocks are no longer complete or reduction blocks).
    if npar:
        par = [*batch_loops, *outer[:npar]]
        sch.parallel(sch.fuse(*par) if len(par) > 1 else par[0])
    elif threads > 1:
        notes += _parallel(sch, outer, keys, REDUCTION[op])
    # A zero-start call writes its whole tile, and no reduction loop lies above it: the init covers that tile only
    # (under a parallel loop too: the fused loop is shared by the init and the call).
    skip = options.skip_dead_init and region.zero_start
    no_init = intrin.tensorize_nest(sch, block, region.microkernel, inner, init_loop=init_loop,
                                    intrin_name=region.intrinsic, vector_init=options.vector_init, no_init=skip)
    if skip and not no_init:
        notes.append("the reduction's init is not a plain tile: kept")
    # The scheme travels with the schedule's trace, so database records say which scheme they are.
    sch.annotate(sch.get_sblock("root"), SCHEME_ANNOTATION, text)
    return Lowered(sch, [region.intrinsic] + ([no_init] if no_init else []), notes)


@dataclasses.dataclass
class _Region:
    """The scheme's innermost part, one tensorized call: its intrinsic and microkernel, the loops it covers
    (name, dim, extent) and where the scheme's levels above it end (`cut`)."""
    intrinsic: str
    microkernel: object
    loops: list
    extents: dict
    cut: int
    zero_start: bool

    @classmethod
    def of(cls, problem, scheme, packed: int, prefetch: int, zero_start: bool, one_d: bool) -> "_Region":
        op, size = problem.op, problem.size
        chunk = dict(size)  # the extents one parallel chunk covers: what the per-core scheme tiles
        for spec in scheme.parallel_levels:
            chunk[spec.dim] //= spec.n
        cut, mk_start = _split_scheme(scheme)
        region_ext = scheme.extents(problem.lanes)[cut]
        # Each tensorized call holds the whole reduction when the region covers it and no level inside the region
        # but the reuse loop is on it: the call's accumulators may then start at zero (emit_microkernel).
        zero_start = zero_start and not scheme.partial_dims and all(
            region_ext.get(d, 1) == size[d] for d in REDUCTION[op]) and not any(
            getattr(spec, "dim", None) in REDUCTION[op] for spec in scheme.specs[cut:mk_start - 1])
        reuse = intrin.loop_nest_names(op)[0]  # the name intrin.loop_nest gives the reuse loop
        if scheme.partial_dims:  # P levels: a chunk's nest below its batch loops is one tail intrinsic, loops clipped
            cut = len(scheme.parallel_levels)
            while cut < len(scheme.specs) and isinstance(scheme.specs[cut], Tile) and scheme.specs[cut].dim == "n":
                chunk["n"] //= scheme.specs[cut].n
                cut += 1
            nest = Scheme(scheme.specs[cut:])
            if any(spec.dim == "n" for spec in nest.specs):
                raise TTileError(f"{scheme.text}: with P levels the batch's levels must come first (below Par)")
            region_ext = dict(chunk)
            name, nest_mk = register_tail(problem, nest, ext={d: e for d, e in chunk.items() if d != "n"},
                                          packed=packed, prefetch=prefetch, one_d=one_d)
            loops = [(reuse, problem.reuse, nest_mk.red)]
        elif cut == mk_start - 1:  # no Lambda: the microkernel and its reuse loop
            mk = microkernel_of(problem, scheme)
            unrolled = mk.family["unrolled_reduction"]
            loops = [(reuse, problem.reuse, mk.red // mk.get(unrolled) if unrolled else mk.red)]
            if unrolled and mk.get(unrolled) > 1:
                loops.append(("c_i", unrolled, mk.get(unrolled)))
            name, nest_mk = intrin.register(mk, packed, prefetch, zero_start, one_d), mk
        else:
            name, nest_mk = register_tail(problem, Scheme(scheme.specs[cut:]), packed=packed, prefetch=prefetch,
                                          zero_start=zero_start, one_d=one_d)
            loops = [(reuse, problem.reuse, nest_mk.red)]
        for d in intrin.loop_nest_names(op)[1:]:
            if d in BLOCK_DIMS[op]:  # not conv2d's c_i, added above when the microkernel unrolls c
                loops.append((d, d, region_ext.get(d, 1)))
        return cls(name, nest_mk, loops, region_ext, cut, zero_start)


def _tile(sch, block, problem, scheme, region: _Region) -> tuple:
    """Split the block's loops by the scheme's levels above the region and the region's own, and order them:
    (the outer loops, their (dim, index) keys, {region loop name: loop}, the loop the init goes above)."""
    op, size, npar = problem.op, problem.size, len(scheme.parallel_levels)
    loops = dict(zip(BLOCK_DIMS[op], sch.get_loops(block)[-len(BLOCK_DIMS[op]):]))
    # Per dimension: the factors of the levels above the region, outermost first, then the region's.
    factors = {d: [] for d in BLOCK_DIMS[op]}
    order = []  # (dim, index into that dim's factors)
    for spec in scheme.specs[:region.cut]:
        factors[spec.dim].append(spec.n)
        order.append((spec.dim, len(factors[spec.dim]) - 1))
    region_index = {}
    for name_, d, f in region.loops:
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
    split = {d: sch.split(loops[d], factors[d]) if len(factors[d]) > 1 else [loops[d]] for d in BLOCK_DIMS[op]}
    keys = order[:npar] + implicit + order[npar:]  # the parallel level stays outermost
    outer = [split[d][i] for d, i in keys]
    inner = {k: split[d][i] for k, (d, i) in region_index.items()}
    sch.reorder(*outer, *[inner[k] for k, _, _ in region.loops])
    # The init goes above the outermost reduction loop; None: above the region (tensorize_nest decides,
    # after it hoists the region's unit loops).
    init_loop = next((split[d][i] for d, i in keys if d in REDUCTION[op]), None)
    return outer, keys, inner, init_loop


def _default_copy_at(sch, block, problem, options: LoweringOptions, outer, keys) -> str:
    """Where a tile's input copy goes when the caller does not say (LoweringOptions.copy_at)."""
    op = problem.op
    copy_at = INPUT_COPY_AT[op]
    if options.read_in_place and options.border == "guard" and not problem.vector_pad:
        return INPUT_COPY_AT_IN_PLACE[op]
    if options.read_in_place and INPUT_COPY_AT_IN_PLACE[op] != copy_at:
        # Per region where that copies fewer elements, the regions inside the input skipping theirs: where
        # few are inside (a tile as wide as the row, a reduction tile loop above the copy), each would copy
        # its window, halo included, again (0.79x the copy at k on a 7x7x960 best).
        copied = {}
        for at in (copy_at, INPUT_COPY_AT_IN_PLACE[op]):
            trial = sch.copy()
            _input_copy_per_tile(trial, block, outer, keys, 0, at, BORDERS["copy"])
            copied[at] = in_place_reads.copied_elements(trial.mod["main"])
        if None not in copied.values() and copied[INPUT_COPY_AT_IN_PLACE[op]] < copied[copy_at]:
            return INPUT_COPY_AT_IN_PLACE[op]
    return copy_at


def _parallel_input_pass(sch, block) -> list:
    """The input's copy, where it stays a pass over the whole input before the operator (the padding, a first
    layer's NCHW input), split over the threads too: its leading loops fused and parallel. Left serial, ResNet-18's
    padded layers copied their input on one core while the other waited (a serial share that grows with the
    cores). A copy marked for read_in_place is left as it is (that pass rewrites it at build time)."""
    copies = producers_of(sch, block, product_of(sch.get(block).body.value)[1])
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
    copies = producers_of(sch, block, product_of(sch.get(block).body.value)[1])
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


def _epilogue(sch, block, outer_loops, red_dims, keys, size=None, padded_dims=()) -> list:
    """Keep elementwise consumers (bias, residual add, ReLU, leaky ReLU = max(x, a*x), unpadding) fused at the
    innermost all-spatial loop: intermediate stages are inlined into their consumers until only the last
    ones read the operator's block, and those move into the loop. A consumer that gives folded rows their
    shape back (relax/rows.py: rows = the product of its leading extents) moves only into a loop whose tile of
    rows is a box of those dimensions; elsewhere TVM's region would reach rows the tile has not computed."""
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
        lead = _unfolded_rows(sch, block, consumer)
        if lead and "i" in padded_dims:
            notes.append(f"epilogue {sch.get(consumer).name_hint} left unfused: folded rows padded")
            continue
        at = len(prefix) - 1
        while lead and at >= 0 and not _rows_box(_rows_under(keys, outer_loops, sch, at, size), lead):
            at -= 1
        if at < 0:
            notes.append(f"epilogue {sch.get(consumer).name_hint} left unfused: no tile of rows is a box of "
                         f"{list(lead)}")
            continue
        notes += _inline_other_producers(sch, block, consumer)
        try:
            sch.reverse_compute_at(consumer, prefix[at])
        except Exception as e:  # noqa: BLE001 - schedule errors; reported in notes
            notes.append(f"epilogue {sch.get(consumer).name_hint} left unfused: {str(e).splitlines()[0]}")
    return notes


def _inline_other_producers(sch, block, consumer) -> list:
    """Inline into the epilogue the elementwise stages that compute its other operands (a quantized residual
    block's skip tensor, dequantized in the same function): reverse_compute_at moves a block only under a loop
    that all its producers are under, and these run over the whole tensor before the operator's loops."""
    notes = []
    while True:
        others = [p for p in sch.get_producers(consumer) if not sch.get(p).same_as(sch.get(block))]
        if not others:
            return notes
        try:
            sch.compute_inline(others[-1])
        except Exception as e:  # noqa: BLE001 - schedule errors; reported in notes
            return notes + [f"producer {sch.get(others[-1]).name_hint} of epilogue {sch.get(consumer).name_hint} "
                            f"not inlined: {str(e).splitlines()[0]}"]


def _unfolded_rows(sch, block, consumer) -> tuple:
    """The leading extents of a consumer whose iterators outnumber the block's output dimensions (its rows
    unfolded into them), else ()."""
    rank = len(sch.get(block).writes[0].region)
    extents = [int(iv.dom.extent) for iv in sch.get(consumer).iter_vars]
    return tuple(extents[:-1]) if len(extents) > rank else ()


def _rows_under(keys, outer_loops, sch, at: int, size) -> int:
    """Rows (dimension i) one iteration of outer loop `at` covers: i's extent over its loops at or above it."""
    rows = int(size["i"]) if size else 0
    for (d, _), lp in zip(keys[:at + 1], outer_loops[:at + 1]):
        if d == "i":
            rows //= int(sch.get(lp).extent)
    return rows


def _rows_box(rows: int, lead: tuple) -> bool:
    """Whether every aligned run of `rows` consecutive folded rows is a box of the dimensions `lead`: a multiple of
    the innermost dimensions' product that divides it times the next one (any run, along the outermost)."""
    lead = [e for e in lead if e != 1]
    inner = 1
    for depth, extent in enumerate(reversed(lead)):
        if rows and rows % inner == 0 and (depth == len(lead) - 1 or (inner * extent) % rows == 0):
            return True
        inner *= extent
    return bool(rows) and rows % inner == 0


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
