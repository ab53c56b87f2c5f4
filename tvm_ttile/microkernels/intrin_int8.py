"""int8 matmul microkernels: u8 activations x s8 weights -> s32, one `vpdpbusd` per accumulator and step.

The weights are in the layout the instruction reads, `[k/4, j, 4]` (what operators.QMatmul takes, packed once at
build time): the 4 reduction elements of one output column are adjacent, so one 64-byte load gives 16 columns'
groups. Each reduction step broadcasts a row's 4 activation bytes (one 32-bit scalar) to every lane and adds the
16 four-element dot products into the row's accumulators, which stay in registers for the whole reduction loop, as
in the fp32 microkernels (intrin.py). `red` counts reduction elements (a multiple of 4).
"""
from __future__ import annotations

import tvm.tirx as tir
from tvm.tirx.script import builder as T

from ..precision import get as get_precision


def buffers(mk, params, impl: bool):
    """One tile's buffers: A [i, red] u8, B [red/4, j, 4] s8, C [i, j] s32; the implementation binds the row
    strides (symbolic)."""
    p = get_precision(mk.precision)
    u = dict(mk.unroll)
    kv = u["j"] * mk.lanes
    shapes = [((u["i"], mk.red), p.activation), ((mk.red // p.group, kv, p.group), p.weight),
              ((u["i"], kv), p.accumulator)]
    out = []
    for param, (shape, dtype) in zip(params, shapes):
        strides = [T.int32() for _ in shape[:-1]] + [1] if impl else None
        out.append(T.match_buffer(param, shape, dtype, strides=strides, offset_factor=1))
    return out


def desc_body(mk, A, B, C, nest) -> None:
    """The tile's computation as the operator writes it (operators.QMatmul): the weights indexed by group."""
    group = get_precision(mk.precision).group
    with T.grid(*[e for _, e in nest]) as loop_vars:
        lv = dict(zip([n for n, _ in nest], loop_vars if len(nest) > 1 else [loop_vars]))
        with T.sblock("update"):
            iv = {}
            for dim, kind in (("i", "S"), ("j", "S"), ("k", "R")):
                if dim in lv:
                    iv[dim] = (T.axis.spatial if kind == "S" else T.axis.reduce)(mk.tile[dim], lv[dim])
            g = lambda d: iv.get(d, 0)  # noqa: E731
            o = [g("i"), g("j")]
            product = (tir.Cast("int32", A[g("i"), g("k")])
                       * tir.Cast("int32", B[tir.floordiv(g("k"), group), g("j"), tir.floormod(g("k"), group)]))
            T.buffer_store(C, C[tuple(o)] + product, o)


def emit(mk, A, B, C, dot, base: dict, zero_start: bool = False) -> None:
    """The microkernel's statements (its reduction loop included) into the current IR builder frame, with `dot`
    (a precision.DotProduct) as its instruction; `base` offsets the tile (i, j, k; k in elements)."""
    p = get_precision(mk.precision)
    L, group = mk.lanes, p.group
    u = dict(mk.unroll)
    b = lambda d: base.get(d, 0)  # noqa: E731
    acc_vec, w_vec = f"{p.accumulator}x{L}", f"{p.weight}x{L * group}"
    nj = u["j"]
    acc = T.alloc_buffer((u["i"] * nj,), acc_vec, scope="local")
    for i in range(u["i"]):
        for jj in range(nj):
            start = (tir.Broadcast(tir.const(0, p.accumulator), L) if zero_start
                     else C.vload([b("i") + i, b("j") + jj * L], acc_vec))
            T.buffer_store(acc, start, [i * nj + jj])
    with T.serial(0, mk.red // group) as c:
        k = b("k") + c * group
        for jj in range(nj):
            weights = B.vload([tir.floordiv(k, group), b("j") + jj * L, 0], w_vec)
            for i in range(u["i"]):
                row = tir.reinterpret("int32", A.vload([b("i") + i, k], f"{p.activation}x{group}"))
                T.buffer_store(acc, dot.step(acc[i * nj + jj], row, weights), [i * nj + jj])
    for i in range(u["i"]):
        for jj in range(nj):
            T.buffer_store(C, acc[i * nj + jj], [b("i") + i, tir.Ramp(b("j") + jj * L, 1, L)])
