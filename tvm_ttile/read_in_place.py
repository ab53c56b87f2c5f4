"""Interior tiles read the input in place: a build-time rewrite of scheduled functions.

A depthwise tile copies its input window (with the padding) before its microkernels read it: at stride 2 the copy
moves about as many vectors as the microkernels do FMAs, and it costs more than the computation (the same schemes
run 1.2-2.3x faster on a layer without padding, where there is no copy). Most tiles' windows lie wholly inside the
input and need no padding. For those, the microkernels can read the input itself.

`lowering.lower` marks a copy made per tile (compute_at under a tile loop) with ANNOTATION; the schedule's trace
records the mark, so a database record rebuilt elsewhere gets the same code. At build time (`apply`; importing
`install()`, which `mark` and tvm_ttile's builders call, puts it in front of TVM's TIR pipeline, so tvm.compile
and relax.build run it), each marked copy and
what follows it in its loop body become

    if <this tile's window lies inside the input>:  the tensorized calls, their tiles of the copy replaced by the
                                                     same tiles of the input (match_buffer regions shifted)
    else:                                            the copy, then the calls as scheduled

The condition is evaluated once per tile, never inside a microkernel. A copy marked GUARD (lowering's default)
skips the copy on the border too: there the calls read the input with each load guarded by the copy's own
condition (a load of the padding reads the padding value), so a row whose every tile touches the padding (a 7-wide
output row, one microkernel wide) still reads in place. The guards are scalar (rows and columns; channels must be
whole vectors, proven for the tile), most fold away (a column outside the input is a constant), and what is left
is a compare per window row that LLVM hoists out of the unrolled columns. A copy this cannot prove safe to skip (a
reader that loads it outside a tensorized call, a copy that is not an element-wise padding of one buffer) is left
as scheduled. A function built in a process that never called `install()` is correct, only slower: the mark is
inert there.
"""
from __future__ import annotations

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.sym import IntervalSet
from tvm.sym.analyzer import Analyzer

ANNOTATION = "tvm_ttile.read_in_place"
COPY, GUARD = 1, 2  # the mark's values: what border tiles do (copy their window, or read the input guarded)


def mark(sch, copy_block, border: int = GUARD) -> None:
    """Mark a copy made per tile so that `apply` lets interior tiles skip it, and border tiles too with GUARD."""
    install()
    sch.annotate(copy_block, ANNOTATION, border)


def apply(mod):
    """`mod` (an IRModule or a PrimFunc) with every marked copy rewritten; unmarked functions are returned as
    they are (the same objects)."""
    if isinstance(mod, tirx.PrimFunc):
        return _rewrite_func(mod)
    changed = {gv: _rewrite_func(f) for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)}
    changed = {gv: f for gv, f in changed.items() if not f.same_as(mod[gv])}
    if not changed:
        return mod
    mod = mod.clone()
    for gv, f in changed.items():
        mod.update_func(gv, f)
    return mod


@tvm.transform.module_pass(opt_level=0, name="tvm_ttile.ReadInPlace")
def ReadInPlace(mod, _ctx):  # noqa: N802 - a pass, named as TVM names its passes
    return apply(mod)


def install() -> None:
    """Put ReadInPlace in front of TVM's TIR pipeline ("s_tir", what tvm.compile and relax.build use by
    default) in this process, so that a record tuned with tvm_ttile compiles to the code that was timed wherever
    it is built (ms.tir_integration.compile_tir then tvm.compile, relax.build with a database). Idempotent."""
    from tvm.tirx import compilation_pipeline

    base = compilation_pipeline.PIPELINE_MAP.get("s_tir")
    if base is None or getattr(base, "tvm_ttile_read_in_place", False):
        return

    def factory(**kwargs):
        pipeline, host, device = base(**kwargs)
        return tvm.transform.Sequential([ReadInPlace, pipeline]), host, device

    factory.tvm_ttile_read_in_place = True
    compilation_pipeline.PIPELINE_MAP["s_tir"] = factory



def _rewrite_func(func):
    if not _sites(func.body):
        return func
    body = _visit(func.body)
    if body.same_as(func.body):
        return func
    # The interior branch repeats the loops and blocks of the copy's consumers; TVM refuses a variable defined
    # twice: ConvertSSA defines the repeated ones anew.
    mod = tvm.s_tir.transform.ConvertSSA()(tvm.IRModule({"main": func.with_body(body)}))
    return mod["main"]


def _visit(stmt):
    """`stmt` with each marked copy site rewritten (nodes rebuilt only on the paths that change)."""
    if isinstance(stmt, tirx.SeqStmt):
        items = list(stmt.seq)
        for i, item in enumerate(items):
            if _copy_of(item) is not None:
                site = _rewrite_site(item, items[i + 1:])
                if site is not None:
                    return _seq([_visit(x) for x in items[:i]] + [site])
        new = [_visit(x) for x in items]
        return stmt if all(a.same_as(b) for a, b in zip(new, items)) else tirx.SeqStmt(new)
    if isinstance(stmt, tirx.For):
        body = _visit(stmt.body)
        return stmt if body.same_as(stmt.body) else tirx.For(
            stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding, stmt.annotations)
    if isinstance(stmt, tvm.s_tir.SBlockRealize):
        b = stmt.block
        body = _visit(b.body)
        if body.same_as(b.body):
            return stmt
        block = tvm.s_tir.SBlock(b.iter_vars, b.reads, b.writes, b.name_hint, body, b.init, b.alloc_buffers,
                                 b.match_buffers, b.annotations)
        return tvm.s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, block)
    if isinstance(stmt, tirx.IfThenElse):
        then, other = _visit(stmt.then_case), stmt.else_case and _visit(stmt.else_case)
        same = then.same_as(stmt.then_case) and (other is None or other.same_as(stmt.else_case))
        return stmt if same else tirx.IfThenElse(stmt.condition, then, other)
    return stmt


def _unmarked(copy_item):
    if isinstance(copy_item, tirx.For):
        return tirx.For(copy_item.loop_var, copy_item.min, copy_item.extent, copy_item.kind,
                        _unmarked(copy_item.body), copy_item.thread_binding, copy_item.annotations)
    b = copy_item.block
    block = tvm.s_tir.SBlock(b.iter_vars, b.reads, b.writes, b.name_hint, b.body, b.init, b.alloc_buffers,
                             b.match_buffers, {k: v for k, v in b.annotations.items() if k != ANNOTATION})
    return tvm.s_tir.SBlockRealize(copy_item.iter_values, copy_item.predicate, block)


def _seq(stmts):
    return stmts[0] if len(stmts) == 1 else tirx.SeqStmt(stmts)


def _copy_of(item):
    """(loops, realize) of a marked copy nest: For loops down to one block marked ANNOTATION; else None."""
    loops = []
    while isinstance(item, tirx.For):
        loops.append(item)
        item = item.body
    if isinstance(item, tvm.s_tir.SBlockRealize) and ANNOTATION in item.block.annotations:
        return loops, item
    return None


def _conjuncts(cond) -> list:
    if isinstance(cond, tirx.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def _rewrite_site(copy_item, rest):
    """IfThenElse(interior, rest reading the source in place, border), border being rest reading the source
    with guarded loads (GUARD) or [copy] + rest; None where neither is safe."""
    found = _interior(copy_item)
    if not rest or found is None:
        return None
    interior, dst, src, offsets = found
    border = _guarded(copy_item, rest, found)
    if isinstance(interior, tirx.IntImm) and not interior.value:
        return border  # never inside the input: guarded throughout, or the copy stays
    in_place = [_read_source(s, dst, src, offsets) for s in rest]
    if any(s is None for s in in_place):
        return None
    if border is None:  # unmarked: applying the rewrite again changes nothing
        border = tirx.SeqStmt([_unmarked(copy_item), *rest])
    then = _seq(in_place)
    if isinstance(interior, tirx.IntImm):
        return then  # always inside (a function whose padding this copy's tiles never reach)
    return tirx.IfThenElse(interior, then, border)


def _guarded(copy_item, rest, found):
    """`rest` reading the source with guarded loads where the copy is marked GUARD and every load can be
    guarded; else None."""
    if not rest or int(_copy_of(copy_item)[1].block.annotations[ANNOTATION]) != GUARD:
        return None
    guard = _guard_of(copy_item)
    if guard is None:
        return None
    _, dst, src, offsets = found
    guarded = [_read_source(s, dst, src, offsets, guard) for s in rest]
    return None if any(s is None for s in guarded) else _seq(guarded)


def _conditions(store) -> list:
    """A padding copy's condition (store = if_then_else(cond, load, 0)) as conjuncts; channels padded to whole
    vectors, read as min(c, C - 1), add c <= C - 1."""
    value = store.value
    out = _conjuncts(value.args[0])
    for si, di in zip(value.args[1].indices, store.indices):
        if isinstance(si, tirx.Min) and si.a.same_as(di):
            out.append(tirx.LE(si.a, si.b))
    return out


def _guard_of(copy_item):
    """(conjuncts, the copy block's variable of each destination dimension, the padding's value): the copy's
    condition, split, for guarding loads of its destination; None where a conjunct is not a comparison or the
    padding is not a constant (a quantized input's zero point is one)."""
    realize = _copy_of(copy_item)[1]
    store = realize.block.body
    ivars = [iv.var for iv in realize.block.iter_vars]
    conjuncts = _conditions(store)
    if not all(isinstance(c, (tirx.LT, tirx.LE, tirx.GT, tirx.GE)) for c in conjuncts):
        return None
    padding = store.value.args[2]
    if not isinstance(padding, (tirx.IntImm, tirx.FloatImm)):
        return None
    dims = [next(i for i, v in enumerate(ivars) if v.same_as(di)) for di in store.indices]
    return conjuncts, [ivars[d] for d in dims], padding


def _interior(copy_item):
    """(condition, copy buffer, source buffer, per-dimension offsets): when the condition holds (once per
    iteration of the loops around the copy), every element the copy makes is the source's, at index + offset.
    None where the copy is not an element-wise padding of one buffer, or never inside it."""
    loops, realize = _copy_of(copy_item)
    block = realize.block
    store = block.body
    if not isinstance(store, tirx.BufferStore) or not isinstance(store.value, tvm.ir.expr.Call):
        return None
    value = store.value
    if not value.op.name.endswith(".if_then_else") or not isinstance(value.args[1], tvm.ir.expr.TensorLoad):
        return None
    load = value.args[1]
    dst, src = store.buffer, load.source
    ivars = [iv.var for iv in block.iter_vars]
    if len(store.indices) != len(load.indices) or not all(
            any(i.same_as(v) for v in ivars) for i in store.indices):
        return None
    analyzer = Analyzer()
    # Per dimension: source index = destination index + offset, the offset free of the copy's own variables.
    offsets = []
    for di, si in zip(store.indices, load.indices):
        if isinstance(si, tirx.Min) and si.a.same_as(di):  # channels padded to whole vectors (_conditions)
            si = si.a
        off = analyzer.simplify(si - di)
        if any(any(v.same_as(u) for u in ivars) for v in tirx.analysis.undefined_vars(off, [])):
            return None
        offsets.append(off)
    # The condition must hold at every point the copy covers in this iteration of the loops around it.
    for iv, bound in zip(ivars, realize.iter_values):
        analyzer.bind(iv, bound)
    dom = {lp.loop_var: IntervalSet(lp.min, lp.min + lp.extent - 1) for lp in loops}
    checks = []
    for c in _conditions(store):
        if isinstance(c, (tirx.GT, tirx.GE)):
            c = (tirx.LT if isinstance(c, tirx.GT) else tirx.LE)(c.b, c.a)
        if not isinstance(c, (tirx.LT, tirx.LE)):
            return None
        worst = analyzer.int_set(analyzer.simplify(c.a - c.b), dom).max_value
        if not isinstance(worst, tirx.Expr) or "inf" in str(worst):
            return None
        checks.append(worst < 0 if isinstance(c, tirx.LT) else worst <= 0)
    interior = analyzer.simplify(tirx.all(*checks)) if checks else tirx.const(True, "bool")
    return interior, dst, src, offsets  # (interior False: never inside the input)


def copied_elements(func, limit: int = 1 << 22):
    """Elements the marked copies of `func` (scheduled, tensorized or not) still copy once the iterations whose
    window lies inside the source skip them: per copy, its size times the iterations of the loops around it
    that are not inside, counted by evaluating the condition over those loops (numpy, at most `limit` points;
    None beyond, or where a condition cannot be evaluated). A copy whose border tiles read guarded copies
    nothing."""
    total = 0
    for loops, item, rest in _sites(func.body):
        size = 1
        for lp in _copy_of(item)[0]:
            size *= int(lp.extent)
        iterations = 1
        for lp in loops:
            iterations *= int(lp.extent)
        found = _interior(item)
        if found is not None and _guarded(item, rest, found) is not None:
            continue
        inside = 0
        if found is not None:
            interior = found[0]
            if isinstance(interior, tirx.IntImm):
                inside = iterations if interior.value else 0
            else:
                used = [lp for lp in loops if any(v.same_as(lp.loop_var)
                                                  for v in tirx.analysis.undefined_vars(interior, []))]
                points = 1
                for lp in used:
                    points *= int(lp.extent)
                if points > limit:
                    return None
                grids = np.meshgrid(*[np.arange(int(lp.min), int(lp.min) + int(lp.extent)) for lp in used],
                                    indexing="ij", sparse=True)
                value = _evaluate(interior, {lp.loop_var: g for lp, g in zip(used, grids)})
                if value is None:
                    return None
                inside = int(np.broadcast_to(value, [int(lp.extent) for lp in used]).sum()) * (iterations // points)
        total += (iterations - inside) * size
    return total


def _sites(stmt, loops=()):
    """(enclosing loops, copy item, the statements after it) of every marked copy under `stmt`."""
    if isinstance(stmt, tirx.SeqStmt):
        out = []
        for i, x in enumerate(stmt.seq):
            out += [(loops, x, list(stmt.seq[i + 1:]))] if _copy_of(x) is not None else _sites(x, loops)
        return out
    if isinstance(stmt, tirx.For):
        if _copy_of(stmt) is not None:
            return [(loops, stmt, [])]
        return _sites(stmt.body, loops + (stmt,))
    if isinstance(stmt, tvm.s_tir.SBlockRealize):
        return _sites(stmt.block.body, loops)
    if isinstance(stmt, tirx.IfThenElse):
        return _sites(stmt.then_case, loops) + (_sites(stmt.else_case, loops) if stmt.else_case is not None else [])
    return []


def _evaluate(expr, env):
    """An integer / boolean expression over loop variables, evaluated on numpy grids; None if not one."""
    binary = {tirx.Add: lambda a, b: a + b, tirx.Sub: lambda a, b: a - b, tirx.Mul: lambda a, b: a * b,
              tirx.FloorDiv: lambda a, b: a // b, tirx.FloorMod: lambda a, b: a % b,
              tirx.Min: np.minimum, tirx.Max: np.maximum,
              tirx.LT: lambda a, b: a < b, tirx.LE: lambda a, b: a <= b, tirx.GT: lambda a, b: a > b,
              tirx.GE: lambda a, b: a >= b, tirx.EQ: lambda a, b: a == b, tirx.NE: lambda a, b: a != b,
              tirx.And: lambda a, b: a & b, tirx.Or: lambda a, b: a | b}
    if isinstance(expr, tirx.IntImm):
        return int(expr.value)
    if isinstance(expr, tirx.Var):
        return next((g for v, g in env.items() if v.same_as(expr)), None)
    if isinstance(expr, tirx.Not):
        a = _evaluate(expr.a, env)
        return None if a is None else ~a
    for kind, f in binary.items():
        if isinstance(expr, kind):
            a, b = _evaluate(expr.a, env), _evaluate(expr.b, env)
            return None if a is None or b is None else f(a, b)
    return None


def _region_in_source(region, dst, src, offsets):
    if not region.source.same_as(dst):
        return region
    return tirx.BufferRegion(src, [tvm.ir.Range.from_min_extent(r.min + off, r.extent)
                                   for r, off in zip(region.region, offsets)])


def _read_source(stmt, dst, src, offsets, guard=None):
    """`stmt` with every tensorized block's tile of `dst` taken from `src` instead, its loads guarded by
    `guard` (_guard_of) if given; None if something reads `dst` another way (a load outside a match_buffer), or
    a guard cannot be made."""
    if isinstance(stmt, tirx.SeqStmt):
        items = [_read_source(s, dst, src, offsets, guard) for s in stmt.seq]
        return None if any(s is None for s in items) else _seq(items)
    if isinstance(stmt, tirx.For):
        body = _read_source(stmt.body, dst, src, offsets, guard)
        return body and tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, stmt.thread_binding,
                                 stmt.annotations)
    if isinstance(stmt, tirx.IfThenElse):
        then = _read_source(stmt.then_case, dst, src, offsets, guard)
        other = stmt.else_case and _read_source(stmt.else_case, dst, src, offsets, guard)
        if then is None or (stmt.else_case is not None and other is None):
            return None
        return tirx.IfThenElse(stmt.condition, then, other)
    if isinstance(stmt, tvm.s_tir.SBlockRealize):
        b = stmt.block
        matched = any(m.source.source.same_as(dst) for m in b.match_buffers)
        # A tensorized block reads its tile through match_buffer; any other block is looked into.
        body = b.body if matched else _read_source(b.body, dst, src, offsets, guard)
        if body is None:
            return None
        # The repeated block's match buffers get variables of their own (strides, offset: bound to the source
        # region when lowered, so two blocks cannot share them).
        fresh = {m.buffer: _fresh_buffer(m.buffer) for m in b.match_buffers}
        body = tvm_ffi.structural_map(body, [(tirx.Buffer, lambda x: next(
            (n for o, n in fresh.items() if o.same_as(x)), x))], order="pre")
        if guard is not None and matched:
            body = _guard_loads(body, b, [(fresh[m.buffer], m.source) for m in b.match_buffers
                                          if m.source.source.same_as(dst)], guard)
            if body is None:
                return None
        block = tvm.s_tir.SBlock(
            b.iter_vars, [_region_in_source(r, dst, src, offsets) for r in b.reads], b.writes, b.name_hint, body,
            b.init, b.alloc_buffers,
            [tvm.s_tir.MatchBufferRegion(fresh[m.buffer], _region_in_source(m.source, dst, src, offsets))
             for m in b.match_buffers], b.annotations)
        return tvm.s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, block)
    if _reads_buffer(stmt, dst):
        return None
    return stmt


def _guard_loads(body, block, views, guard):
    """`body` (a tensorized block's) with each load of a view of the copy's destination (views: (buffer,
    destination region) pairs) replaced by if_then_else(the copy's condition at that element, load, padding); None
    where a condition on the vector dimension is not true over the whole vector."""
    conjuncts, dim_vars, padding = guard
    analyzer = Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)

    def bind_loop(loop):
        analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
        return loop

    tvm_ffi.structural_map(body, [(tirx.For, bind_loop)], order="pre")

    def at(cond, index):  # the condition at destination element `index`
        return analyzer.simplify(tvm_ffi.structural_map(cond, [(tirx.Var, lambda v: next(
            (i for u, i in zip(dim_vars, index) if u.same_as(v)), v))]))

    failed = []  # (an exception would not cross the FFI callback)

    def guarded(load):
        view = next((r for buf, r in views if buf.same_as(load.source)), None)
        if view is None or failed:
            return load
        if len(load.indices) != len(view.region):
            failed.append(load)
            return load
        base = [r.min + i for r, i in zip(view.region, load.indices)]
        ramps = [i for i, x in enumerate(load.indices) if isinstance(x, tirx.Ramp)]
        conds = []
        for c in conjuncts:
            used = tirx.analysis.undefined_vars(c, [])
            if any(any(v.same_as(dim_vars[d]) for v in used) for d in ramps):
                # a vector's lanes: the comparison is linear, so true at both ends is true throughout
                for end in (0, 1):
                    index = [r.min + (x.base + x.stride * (int(x.lanes) - 1) * end if d in ramps else x)
                             for d, (r, x) in enumerate(zip(view.region, load.indices))]
                    if not analyzer.can_prove(at(c, index)):
                        failed.append(load)
                        return load
                continue
            c = at(c, base)
            if isinstance(c, tirx.IntImm):
                if not c.value:  # wholly in the padding
                    return _filled(load, padding)
                continue
            conds.append(c)
        return tirx.if_then_else(tirx.all(*conds), load, _filled(load, padding)) if conds else load

    body = tvm_ffi.structural_map(body, [(tvm.ir.expr.TensorLoad, guarded)])
    return None if failed else body


def _filled(load, padding):
    """What a load of the padding reads: the copy's padding value, as the load's type (vector or scalar)."""
    scalar, _, lanes = str(load.ty).partition("x")
    value = tirx.const(padding.value, scalar)
    return tirx.Broadcast(value, int(lanes)) if lanes else value


def _fresh_buffer(buf):
    def fresh(x):
        return tirx.Var(x.name, x.ty) if isinstance(x, tirx.Var) else x
    return tirx.decl_buffer(buf.shape, buf.dtype, buf.name, strides=[fresh(s) for s in buf.strides],
                            elem_offset=fresh(buf.elem_offset), scope=buf.scope(),
                            data_alignment=buf.data_alignment, offset_factor=buf.offset_factor)


def _reads_buffer(stmt, buf) -> bool:
    """Whether `stmt` mentions `buf` (its data variable is free in it): a load the rewrite would miss."""
    return any(v.same_as(buf.data) for v in tirx.analysis.undefined_vars(stmt, []))
