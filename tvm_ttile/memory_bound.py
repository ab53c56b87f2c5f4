"""Schedules of a network's memory-bound tasks (pooling, global means, layout transposes): the loop nests that
read and write whole vectors along the axis stored contiguously, with the window or reduction loops inside.

MetaSchedule's evolutionary search reaches such schedules slowly on a few trials (ResNet-18's 3x3 max pool at
16 trials: about twice the time of these). So tune_network measures these few schedules, each once, beside
MetaSchedule's own search of the task; the database keeps whichever is faster. A function these rules cannot
read (loops not bound one to one to its axes, no whole vectors along the axis) gets only the function as written
from here, beside MetaSchedule's search."""
from __future__ import annotations

import dataclasses

import tvm
from tvm import s_tir, tirx
from tvm_ffi import structural_hash

#: Annotation on the root block of every schedule made here (in the trace, so in tuning records too): its name.
MARK = "tvm_ttile.memory_bound"
#: The name of the function left as written, unscheduled.
AS_WRITTEN = "as_written"
#: Window / reduction loops of at most this many iterations are unrolled.
UNROLL_LIMIT = 64


@dataclasses.dataclass(frozen=True)
class Variant:
    """Which axis is vectorized and where the loop over its vectors sits."""
    axis: str  # "output": the output's contiguous axis; "input": the largest input's contiguous axis
    # "inner": just outside the window (reduction) loops; "across_window": inside them, unrolled, so that every
    # vector of the axis accumulates at once; "outermost": outside every other loop, so that a transpose writes
    # one vector's worth of rows at a time
    place: str = "inner"

    @property
    def name(self) -> str:
        return f"{self.axis}_vectors" + ("" if self.place == "inner" else f"_{self.place}")


VARIANTS = tuple(Variant(axis, place) for axis in ("output", "input")
                 for place in ("inner", "across_window", "outermost"))


def _last_index_var(region):
    if not region.region:  # a scalar (a reduction of a whole tensor: dynamic quantization's max and min)
        return None
    index = region.region[-1].min
    return index if isinstance(index, tirx.Var) else None


def _axes(sch, block):
    """[(loop, iter var, is_reduction)] when the block's loops bind its axes one to one, in order; else None."""
    loops = sch.get_loops(block)
    realize = sch.get(loops[-1]).body if loops else None
    if not isinstance(realize, s_tir.SBlockRealize):
        return None
    iters = realize.block.iter_vars
    if len(loops) != len(iters):
        return None
    out = []
    for loop, iv, value in zip(loops, iters, realize.iter_values):
        if not value.same_as(sch.get(loop).loop_var):
            return None
        if iv.iter_type not in (tirx.IterVar.DataPar, tirx.IterVar.CommReduce):
            return None
        out.append((loop, iv.var, iv.iter_type == tirx.IterVar.CommReduce))
    return out


def _vector_axis(sch, block, axis: str):
    """The block var stored contiguously in its output ("output") or in its largest input ("input")."""
    stmt = sch.get(block)
    if axis == "output":
        return _last_index_var(stmt.writes[0])

    def size(region):
        n = 1
        for d in region.source.shape:
            n *= int(d)
        return n

    reads = [r for r in stmt.reads if not any(r.source.same_as(w.source) for w in stmt.writes)]
    return _last_index_var(max(reads, key=size)) if reads else None


def _schedule_block(sch, block, variant: Variant, lanes: int, threads: int) -> bool:
    """Schedule one block per `variant`; False when it does not apply (then the schedule is left unfinished)."""
    axes = _axes(sch, block)
    if axes is None:
        return False
    var = _vector_axis(sch, block, variant.axis)
    vector = [i for i, (_, v, red) in enumerate(axes) if var is not None and v.same_as(var) and not red]
    reductions = [loop for loop, _, red in axes if red]
    if not vector or (variant.place == "across_window" and not reductions):
        return False
    loop, _, _ = axes[vector[0]]
    extent = int(sch.get(loop).extent)
    width = next((w for w in (lanes, lanes // 2, lanes // 4) if w > 1 and extent % w == 0), 0)
    if not width:
        return False
    v_outer, v_inner = sch.split(loop, [None, width])
    spatial = [lp for i, (lp, _, red) in enumerate(axes) if not red and i != vector[0]]
    order = {"inner": [*spatial, v_outer, *reductions], "across_window": [*spatial, *reductions, v_outer],
             "outermost": [v_outer, *spatial, *reductions]}[variant.place] + [v_inner]
    sch.reorder(*order)
    # vectorize and parallel before the reduction is split into init and update: both need the whole block
    sch.vectorize(v_inner)
    outermost = order[:order.index(reductions[0])] if reductions else order[:-1]
    if threads > 1 and outermost:
        sch.parallel(sch.fuse(*outermost) if len(outermost) > 1 else outermost[0])
    if reductions:
        trips = 1
        for lp in reductions:
            trips *= int(sch.get(lp).extent)
        init = sch.decompose_reduction(block, reductions[0])
        sch.vectorize(sch.get_loops(init)[-1])
        if trips <= UNROLL_LIMIT:
            for lp in reductions:
                sch.unroll(lp)
        if variant.place == "across_window":
            sch.unroll(v_outer)
    return True


#: Name of the schedule that computes a row-wise function (LayerNorm, softmax: every block over the same rows,
#: reducing or mapping their last axis) one row at a time, each block's last axis in whole vectors.
ROWS = "rows"


def _is_reduction(sch, block) -> bool:
    return any(iv.iter_type == tirx.IterVar.CommReduce for iv in sch.get(block).iter_vars)


def _partial_sums(sch, block, lanes: int):
    """A reduction along the row (before any compute_at: rfactor refuses after one) as `lanes` partial sums over
    whole vectors plus the block that adds them up; the partial-sum block, or None when not whole vectors."""
    inner = sch.get_loops(block)[-1]
    extent = int(sch.get(inner).extent)
    if extent % lanes or extent == lanes:
        return None
    rank = len(sch.get(block).writes[0].region)
    return sch.rfactor(sch.split(inner, [None, lanes])[1], rank)  # the lanes last in the partial sums' buffer


def _lane_first(sch, block, loops) -> tuple:
    """(the loop bound to the partial-sum block's data-parallel lane, the one bound to its reduction)."""
    realize = sch.get(loops[-1]).body
    kinds = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        for lp in loops:
            if value.same_as(sch.get(lp).loop_var):
                kinds[iv.iter_type == tirx.IterVar.DataPar] = lp
    return kinds[True], kinds[False]


def _rows(sch, lanes: int, threads: int) -> bool:
    """The ROWS schedule of the function in `sch`; False when its blocks do not all share the output's rows."""
    root = sch.get_sblock("root")
    blocks = sch.get_child_blocks(root)
    if len(blocks) < 2:
        return False
    rows = [int(sch.get(lp).extent) for lp in sch.get_loops(blocks[-1])[:-1]]
    if not rows:
        return False
    for b in blocks[:-1]:  # each producer: the same leading loops, then one loop along the row or none (a mean)
        extents = [int(sch.get(lp).extent) for lp in sch.get_loops(b)]
        if extents[:-1] != rows and extents != rows:
            return False
    partial = [p for p in (_partial_sums(sch, b, lanes) for b in blocks[:-1]
                           if len(sch.get_loops(b)) > len(rows) and _is_reduction(sch, b)) if p is not None]
    partial_names = {sch.get(p).name_hint for p in partial}
    out_loops = sch.get_loops(blocks[-1])
    row = sch.fuse(*out_loops[:-1]) if len(out_loops) > 2 else out_loops[0]
    for b in reversed(sch.get_child_blocks(root)[:-1]):
        sch.compute_at(b, row)
    if threads > 1:
        sch.parallel(row)
    for b in sch.get_child_blocks(row):
        loops = sch.get_loops(b)[1:]  # under the row
        if not loops:
            continue
        if sch.get(b).name_hint in partial_names:  # the lanes as one vector accumulator, innermost
            lane, outer = _lane_first(sch, b, loops)
            sch.reorder(outer, lane)
            sch.vectorize(lane)
            sch.vectorize(sch.get_loops(sch.decompose_reduction(b, outer))[-1])
        elif not _is_reduction(sch, b) and int(sch.get(loops[-1]).extent) % lanes == 0:
            sch.vectorize(sch.split(loops[-1], [None, lanes])[1])
    return True


def schedules(mod, lanes: int, threads: int = 1) -> list:
    """[(variant name, Schedule)] of `mod`'s memory-bound schedules (producers such as padding inlined, every
    remaining block vectorized along its contiguous axis), each distinct one once, after the function as written
    (unscheduled: LLVM's own vectorization is sometimes as good, and a search's pick can be slower still)."""
    plain = tvm.s_tir.Schedule(mod)
    plain.annotate(plain.get_sblock("root"), MARK, AS_WRITTEN)
    out, seen = [(AS_WRITTEN, plain)], set()
    for variant in VARIANTS:
        sch = tvm.s_tir.Schedule(mod)
        try:
            root = sch.get_sblock("root")
            blocks = sch.get_child_blocks(root)
            for block in blocks[:-1]:  # padding and layout producers: read in place by their consumer
                try:
                    sch.compute_inline(block)
                except tvm.s_tir.ScheduleError:
                    pass
            blocks = sch.get_child_blocks(root)
            if not _schedule_block(sch, blocks[0], variant, lanes, threads):
                continue
            for b in blocks[1:]:  # e.g. a mean's division: vectorized along its output as well
                _schedule_block(sch, b, Variant("output"), lanes, threads)
        except tvm.s_tir.ScheduleError:
            continue
        key = structural_hash(sch.mod)
        if key in seen:
            continue
        seen.add(key)
        sch.annotate(root, MARK, variant.name)
        out.append((variant.name, sch))
    sch = tvm.s_tir.Schedule(mod)
    try:
        if _rows(sch, lanes, threads) and structural_hash(sch.mod) not in seen:
            sch.annotate(sch.get_sblock("root"), MARK, ROWS)
            out.append((ROWS, sch))
    except tvm.s_tir.ScheduleError:
        pass
    return out


def variant_of(func) -> str | None:
    """The variant name a scheduled PrimFunc was made with here, or None (e.g. MetaSchedule's own)."""
    body = func.body
    if isinstance(body, s_tir.SBlockRealize) and MARK in body.block.annotations:
        return str(body.block.annotations[MARK])
    return None
