"""(TVM) Tail intrinsics: the nest of a scheme's Lambda region (two microkernels side by side, or a partial
tile's clipped loops) as one tensor intrinsic, named so that it can be registered again from its name alone."""
from __future__ import annotations

import re

from tvm.s_tir import TensorIntrin
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as T

from .errors import TTileError
from .microkernels import intrin
from .microkernels.no_init import NO_INIT, register_no_init
from .microkernels.spec import FAMILIES, Microkernel
from .scheme import P, Scheme, U, V
from .space import Problem, microkernel_of

TAIL_PREFIX = "ttile_tail~"


def _region_mk(op, isa, lanes, stride, dilation, ext: dict, precision: str = "fp32", dot: str = "",
               input: str = "") -> Microkernel:
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
    return Microkernel.make(op, isa, lanes, ext.get(family["reduction"], 1), stride, dilation, precision, dot,
                            input, **factors)


def tail_name(problem: Problem, sub: Scheme, ext: dict | None = None, packed: int = 0, prefetch: int = 0,
              zero_start: bool = False, one_d: bool = False) -> str:
    extra = "" if ext is None else "~ext=" + ",".join(f"{d}{e}" for d, e in sorted(ext.items()))
    suffix = intrin.variant_suffix(packed, prefetch, zero_start, one_d)
    kind = "" if problem.precision == "fp32" else f":{problem.precision}"  # (fp32's names stay as they were)
    kind += f".{problem.dot}" if problem.dot else ""
    kind += f"<{problem.input}" if problem.input else ""
    return (f"{TAIL_PREFIX}{problem.op}~{problem.isa}x{problem.lanes}{kind}~st{problem.stride}~dl{problem.dilation}~"
            f"{sub.text}{extra}{'~' + suffix if suffix else ''}")


def _parse_tail_name(name: str):
    m = re.fullmatch(re.escape(TAIL_PREFIX) + r"(\w+)~(\w+)x(\d+)(?::(\w+)(?:\.(\w+))?)?(?:<(\w+))?"
                     + r"~st(\d+)~dl(\d+)~(.*?)"
                     + r"(?:~ext=([\w,]+))?"
                     + f"(?:~(?:{intrin.PACKED}(\\d+))?(?:{intrin.PREFETCH}(\\d+))?({intrin.ZERO_START})?"
                     + f"({intrin.ONE_D})?)?", name)
    if not m:
        raise TTileError(f"not a tvm_ttile tail intrinsic name: {name!r}")
    op, isa, lanes, precision, dot, widened, st, dl, text, ext, packed, prefetch, zero_start, one_d = m.groups()
    problem = Problem(op, (), int(lanes), isa, int(st), int(dl), precision=precision or "fp32", dot=dot or "",
                      input=widened or "")
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
                        ext if ext is not None else sub.extents(problem.lanes)[0], problem.precision, problem.dot,
                        problem.input)
    if TensorIntrin.get(name, allow_missing=True) is None:
        desc = intrin._func(region, impl=False, packed=packed, one_d=one_d)
        with IRBuilder() as ib:
            with T.prim_func(s_tir=True):
                T.func_name("tail_impl")
                params = [T.arg(n, T.handle()) for n in ("a", "b", "c")]
                A, B, C = intrin.tile_buffers(region, params, impl=True, packed=packed, one_d=one_d)
                full = lambda buf: buf[tuple(slice(0, e) for e in buf.shape)]  # noqa: E731
                with T.sblock("root"):
                    T.reads(full(C), full(A), full(B))
                    T.writes(full(C))
                    A, B, C = intrin.views(region, A, B, C, packed, one_d)
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
            intrin.emit(mk, A, B, C, base, prefetch)
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
        intrin.emit(mk, A, B, C, base, prefetch, zero_start)
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
    if name.startswith(NO_INIT):
        register_no_init(name)
    elif name.startswith(TAIL_PREFIX):
        register_tail(*_parse_tail_name(name))
    else:
        base, *variant = intrin.parse_suffix(name)
        intrin.register(Microkernel.from_name(base), *variant)


