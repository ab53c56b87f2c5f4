"""(TVM) The copies lowering makes before it tiles: the padding of a scheme's Pad specifiers (pad_einsum's zero
copies) and the weights packed into the layout the microkernels stream (at build time for layout-free
constants, by the copy the function makes anyway otherwise)."""
from __future__ import annotations

import tvm

from .recognize import CANONICAL as BLOCK_DIMS, LAYOUTS, ONE_D_LAYOUTS, Grouped, ungrouped
from .scheme import Scheme, U
from .space import Problem


def producers_of(sch, block, load) -> list:
    """The blocks that write the buffer `load` (a load in `block`) reads."""
    return [p for p in sch.get_producers(block) if any(w.source.same_as(load.source) for w in sch.get(p).writes)]


def _loads(expr) -> list:
    if type(expr).__name__ in ("BufferLoad", "TensorLoad"):
        return [expr]
    if hasattr(expr, "a") and hasattr(expr, "b"):
        return _loads(expr.a) + _loads(expr.b)
    if hasattr(expr, "value"):
        return _loads(expr.value)
    if hasattr(expr, "args"):  # a call: bf16's widening is a reinterpret of a shift
        return [ld for arg in expr.args for ld in _loads(arg)]
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


def _ungrouped_in_schedule(load):
    """recognize.ungrouped, also where the reduction is one instruction group: W[.., c // g, k, c % g] with c of
    extent g, which the schedule simplified to W[.., 0, k, c] (a grouped conv2d of 4 input channels per group)."""
    idx = list(load.indices)
    if ungrouped(load) is None and len(idx) >= 3 and isinstance(idx[-3], tvm.tirx.IntImm) and int(idx[-3]) == 0:
        return Grouped(load.source, (*idx[:-3], idx[-1], idx[-2]))
    return ungrouped(load)


def pack_weights(sch, block, op: str, size: int, one_d: bool = False, group: int = 1) -> int:
    """Give the microkernels their weights in the blocked layout of packed.packed_shape (one contiguous stream
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
    its own; a 1-d convolution's as ONE_D_LAYOUTS), or, with `group` > 1 (a dot-product precision), so in
    its instruction's layout (recognize.ungrouped): constants the operator gave in that layout, blocked with the
    group kept innermost. Returns the block size, 0 when nothing was packed."""
    func = sch.mod["main"]
    stmt = sch.get(block)
    ivs = dict(zip(BLOCK_DIMS[op], (iv.var for iv in stmt.iter_vars[-len(BLOCK_DIMS[op]):])))
    batch = [iv.var for iv in stmt.iter_vars[:-len(BLOCK_DIMS[op])]]
    # A batch matmul's weights lead with the batch indices; a grouped conv2d's output channel is group * K/groups
    # + k: either way the blocked layout below cuts the same whole blocks out of the vector dimension.
    lead = batch if op == "matmul" else []
    indices = ONE_D_LAYOUTS[op][1] if one_d else WEIGHT_INDICES[op]
    want = len(lead) + len(indices)
    # the weights are the last operand; a dot-product precision's read as the W[.., k, j] they hold
    loads = [ld if group == 1 else _ungrouped_in_schedule(ld) for ld in reversed(_loads(stmt.body.value))]
    load = next((ld for ld in loads if ld is not None and len(ld.indices) == want
                 and all(i.same_as(v) for i, v in zip(ld.indices, lead))
                 and all(_indexes(i, ivs[d], batch) for i, d in zip(ld.indices[len(lead):], indices))), None)
    if load is None or len(lead) > 2 or (group > 1 and (lead or one_d)):
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
    elif group > 1:  # (the operator's weights are its parameter; a copy of them is not its layout)
        return 0
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
    plain = blocked[len(lead), len(indices)]
    # a dot-product precision's group stays innermost, after the block
    grouped = {2: lambda a, b, g: (*plain(a, b), g), 4: lambda a, b, c, d, g: (*plain(a, b, c, d), g)}
    sch.transform_layout(block, ("read", index), grouped[len(indices)] if group > 1 else plain)
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
