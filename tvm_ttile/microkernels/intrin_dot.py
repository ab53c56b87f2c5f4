"""Microkernels on a dot-product instruction: int8 (u8 x s8 -> s32, `vpdpbusd`) and bf16 (bf16 x bf16 -> fp32,
`vdpbf16ps`), one instruction per accumulator and step.

The weights are in the layout the instruction reads, the reduction's groups of g (4 for int8, 2 for bf16) innermost:
`[k/g, j, g]` for a matmul (operators.QMatmul), `[r, s, c/g, k, g]` for a conv2d (operators.QConv2d), packed once at
build time; where lowering blocks constant weights (packing.pack_weights), the vector dimension's blocks lead
(packed.py), the code indexing them through a view. The g reduction elements of one output column are adjacent, so
one 64-byte load gives 16 columns' groups. Each reduction step broadcasts a row's g activations (one 32-bit scalar:
g consecutive k of a matmul row, g consecutive channels of a conv2d input pixel) to every lane and adds the 16
g-element dot products into the row's accumulators, which stay in registers for the whole reduction loop, as in the
fp32 microkernels (intrin.py).
`red` counts reduction elements (a multiple of g); a conv2d's c is not unrolled (each step takes a group).
"""
from __future__ import annotations

import tvm.tirx as tir
from tvm.tirx.script import builder as T

from ..precision import get as get_precision
from .packed import packed_shape


def buffers(mk, params, impl: bool, packed: int = 0):
    """One tile's buffers (the implementation binds the row strides, symbolic): a matmul's A [i, red] u8,
    B [red/4, j, 4] s8, C [i, j] s32; a conv2d's input [1, ih, iw, red], weights [r, s, red/4, k, 4], output
    [1, h, w, k]. With `packed` (a block size), the weights in the blocked layout (packed.packed_shape)."""
    p = get_precision(mk.precision)
    u = dict(mk.unroll)
    kv = mk.tile[mk.family["vector"]]
    if mk.op == "conv2d":
        ih = (u["h"] - 1) * mk.stride + (u["r"] - 1) * mk.dilation + 1
        iw = (u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1
        shapes = [(1, ih, iw, mk.red), (u["r"], u["s"], mk.red // p.group, kv, p.group), (1, u["h"], u["w"], kv)]
    else:
        shapes = [(u["i"], mk.red), (mk.red // p.group, kv, p.group), (u["i"], kv)]
    if packed:
        shapes[1] = packed_shape(shapes[1], packed, grouped=True)
    out = []
    for param, shape, dtype in zip(params, shapes, (p.activation, p.weight, p.accumulator)):
        strides = [T.int32() for _ in shape[:-1]] + [1] if impl else None
        out.append(T.match_buffer(param, shape, dtype, strides=strides, offset_factor=1))
    return out


# Each family's block iterators as the operator's block has them after canonicalize: (dim, kind, loop of
# intrin.loop_nest binding it); the reduction's loop is conv2d's c_o (c not unrolled) and matmul's k.
BLOCK_ITERS = {"conv2d": (("h", "S", "h"), ("w", "S", "w"), ("k", "S", "k"), ("r", "R", "r"), ("s", "R", "s"),
                          ("c", "R", "c_o")),
               "matmul": (("i", "S", "i"), ("j", "S", "j"), ("k", "R", "k"))}


def desc_body(mk, A, B, C, nest) -> None:
    """The tile's computation as the operator writes it (operators.QMatmul, QConv2d): the weights indexed by
    group."""
    p = get_precision(mk.precision)
    group = p.group
    with T.grid(*[e for _, e in nest]) as loop_vars:
        lv = dict(zip([n for n, _ in nest], loop_vars if len(nest) > 1 else [loop_vars]))
        with T.sblock("update"):
            iv = {}
            for dim, kind, loop in BLOCK_ITERS[mk.op]:
                if loop in lv:
                    iv[dim] = (T.axis.spatial if kind == "S" else T.axis.reduce)(mk.tile[dim], lv[loop])
            g = lambda d: iv.get(d, 0)  # noqa: E731
            red = g(mk.family["reduction"])
            grouped = (tir.floordiv(red, group), tir.floormod(red, group))
            if mk.op == "conv2d":
                st, dl = mk.stride, mk.dilation
                o = [0, g("h"), g("w"), g("k")]
                x = A[0, g("h") * st + g("r") * dl, g("w") * st + g("s") * dl, red]
                w = B[g("r"), g("s"), grouped[0], g("k"), grouped[1]]
            else:
                o = [g("i"), g("j")]
                x, w = A[g("i"), red], B[grouped[0], g("j"), grouped[1]]
            T.buffer_store(C, C[tuple(o)] + p.widen(x) * p.widen(w), o)


def emit(mk, A, B, C, dot, base: dict, zero_start: bool = False) -> None:
    """The microkernel's statements (its reduction loop included) into the current IR builder frame, with `dot`
    (a precision.DotProduct) as its instruction; `base` offsets the tile (matmul: i, j, k; conv2d: h, w, k, r,
    s, c; the vector dimension and the reduction in elements)."""
    p = get_precision(mk.precision)
    L, group = mk.lanes, p.group
    u = dict(mk.unroll)
    b = lambda d: base.get(d, 0)  # noqa: E731
    acc_vec, w_vec, row_vec = f"{p.accumulator}x{L}", f"{p.weight}x{L * group}", f"{p.activation}x{group}"
    if mk.op == "conv2d":
        st, dl = mk.stride, mk.dilation
        rows = [(w, h) for w in range(u["w"]) for h in range(u["h"])]
        steps = [(s, r) for s in range(u["s"]) for r in range(u["r"])]
        nv = u["k"]
        out_at = lambda row, v: [0, b("h") + row[1], b("w") + row[0], b("k") + v * L]  # noqa: E731
        in_at = lambda row, step, red: [0, (b("h") + row[1]) * st + (b("r") + step[1]) * dl,  # noqa: E731
                                        (b("w") + row[0]) * st + (b("s") + step[0]) * dl, red]
        w_at = lambda step, red, v: [b("r") + step[1], b("s") + step[0], tir.floordiv(red, group),  # noqa: E731
                                     b("k") + v * L, 0]
        red_base = b("c")
    else:
        rows, steps, nv = [(i,) for i in range(u["i"])], [()], u["j"]
        out_at = lambda row, v: [b("i") + row[0], b("j") + v * L]  # noqa: E731
        in_at = lambda row, step, red: [b("i") + row[0], red]  # noqa: E731
        w_at = lambda step, red, v: [tir.floordiv(red, group), b("j") + v * L, 0]  # noqa: E731
        red_base = b("k")
    acc = T.alloc_buffer((len(rows) * nv,), acc_vec, scope="local")
    slot = lambda ri, v: ri * nv + v  # noqa: E731
    for ri, row in enumerate(rows):
        for v in range(nv):
            start = (tir.Broadcast(tir.const(0, p.accumulator), L) if zero_start
                     else C.vload(out_at(row, v), acc_vec))
            T.buffer_store(acc, start, [slot(ri, v)])
    with dot.imports(), T.serial(0, mk.red // group) as c:
        red = red_base + c * group
        for step in steps:
            for v in range(nv):
                weights = B.vload(w_at(step, red, v), w_vec)
                for ri, row in enumerate(rows):
                    x = tir.reinterpret("int32", A.vload(in_at(row, step, red), row_vec))
                    T.buffer_store(acc, dot.step(acc[slot(ri, v)], x, weights), [slot(ri, v)])
    for ri, row in enumerate(rows):
        for v in range(nv):
            idx = out_at(row, v)
            T.buffer_store(C, acc[slot(ri, v)], idx[:-1] + [tir.Ramp(idx[-1], 1, L)])
