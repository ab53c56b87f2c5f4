"""Microkernels as TVM tensor intrinsics.

description    = the tile's computation, loop for loop as the operator's block after tiling;
implementation = fully unrolled vector FMAs; the output tile lives in a local vector buffer (registers)
                 for the whole reduction loop: loaded once before it, stored once after it.
PrimFuncs are built with the IR builder (no TVMScript parsing, ~1 ms each), so registering a
microkernel on demand is cheap.
"""
from __future__ import annotations

import re

import tvm
import tvm.tirx as tir
from tvm.s_tir import TensorIntrin
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as T

from ..errors import TTileError
from ..precision import get as get_precision
from . import intrin_dot
from .spec import WIDENED_INPUTS, Microkernel
from .no_init import skip_init
from .packed import packed_shape, weights

# The microkernel code of each reduced precision (its buffers, description and emission); fp32's is this module's.
REDUCED_FORMS = {"int8": intrin_dot, "bf16": intrin_dot}


def loop_nest(mk: Microkernel):
    """The microkernel's loops from the outermost (the reduction loop) inwards, as (name, extent);
    loops of extent 1 are left out on both sides of tensorize (lowering moves them above)."""
    extent = dict(mk.unroll)
    extent[mk.family["vector"]] *= mk.lanes
    unrolled = mk.family["unrolled_reduction"]
    if unrolled:  # conv2d: the reuse loop runs red // uc steps of uc unrolled channels (c_i)
        extent["c_o"], extent["c_i"] = mk.red // extent[unrolled], extent[unrolled]
    else:
        extent[mk.family["reduction"]] = mk.red
    nest = [(n, extent[n]) for n in loop_nest_names(mk.op)]
    return [(n, e) for n, e in nest if e > 1]


# The loops of each family's microkernel from the outermost (the reuse loop) inwards.
LOOP_NEST_NAMES = {"conv2d": ("c_o", "s", "r", "c_i", "w", "h", "k"), "matmul": ("k", "i", "j"),
                   "depthwise": ("r", "s", "w", "h", "k")}


def loop_nest_names(op: str) -> tuple:
    """The names loop_nest gives the loops of an `op` microkernel, the reuse loop first."""
    return LOOP_NEST_NAMES[op]


PACKED = "_pkw"  # name suffix (+ block size) of the intrinsics that read prepacked weights


PREFETCH = "_pf"  # name suffix (+ distance in reduction steps) of the intrinsics that prefetch their weights


ZERO_START = "_zs"  # name suffix of the intrinsics whose accumulators start at zero instead of the output's value


# Name suffix of the conv2d and depthwise intrinsics of a 1-d convolution (the 2-d one of height 1): they read
# its 3-d buffers, NWC / WIO (a depthwise one's weights [s, k]), which hold no h and r index (tensorize needs a
# description's buffers to have at most the rank of the function's).
ONE_D = "_1d"


def variant_suffix(block: int, prefetch: int = 0, zero_start: bool = False, one_d: bool = False) -> str:
    """The name suffix of an intrinsic's variant: weights prepacked in blocks of `block`, prefetched `prefetch`
    reduction steps ahead, accumulators started at zero (`zero_start`), over a 1-d convolution's buffers."""
    return ((f"{PACKED}{block}" if block else "") + (f"{PREFETCH}{prefetch}" if prefetch else "")
            + (ZERO_START if zero_start else "") + (ONE_D if one_d else ""))


def parse_suffix(name: str) -> tuple:
    """(name without the suffixes, packed block, prefetch distance, zero start, one_d) of an intrinsic name."""
    m = re.fullmatch(f"(.*?)(?:{PACKED}(\\d+))?(?:{PREFETCH}(\\d+))?({ZERO_START})?({ONE_D})?", name)
    return m.group(1), int(m.group(2) or 0), int(m.group(3) or 0), bool(m.group(4)), bool(m.group(5))


class OneD:
    """A 1-d convolution's 3-d buffer indexed as its conv2d (height 1) counterpart: the index at `drop` (h of
    the input and output, r of the weights; always 0) is left out."""

    def __init__(self, buf, drop: int):
        self.buf, self.drop = buf, drop

    def index(self, idx):
        return [i for n, i in enumerate(idx) if n != self.drop]

    def __getitem__(self, idx):
        return self.buf[tuple(self.index(list(idx)))]

    def vload(self, idx, dtype):
        return self.buf.vload(self.index(list(idx)), dtype)


def store(buf, value, idx) -> None:
    """buffer_store into a buffer or a OneD view of one."""
    if isinstance(buf, OneD):
        buf, idx = buf.buf, buf.index(list(idx))
    T.buffer_store(buf, value, idx)


def views(mk: Microkernel, A, B, C, packed: int = 0, one_d: bool = False) -> tuple:
    """The tile's buffers as `mk`'s code indexes them: weights through their packed layout (a dot-product
    precision's with its group innermost), a 1-d convolution's buffers as the 2-d operator's (the same indices
    drop for conv2d and depthwise)."""
    if one_d:  # packed weights lead with the vector blocks: their r comes second
        A, B, C = OneD(A, 1), OneD(B, 1 if packed else 0), OneD(C, 1)
    return A, weights(B, packed, mk.precision in REDUCED_FORMS), C


def _buffers(mk: Microkernel, params, impl: bool, packed: int = 0, one_d: bool = False):
    """Buffer shapes of one tile; the implementation binds any row stride (symbolic strides). With `packed`
    (a block size), the weights are in the layout of `packed_shape`; `one_d`: a 1-d convolution's (a conv2d
    of height 1: its buffers hold no h and r index)."""
    u = dict(mk.unroll)
    kv = mk.tile[mk.family["vector"]]
    if mk.op == "conv2d" and one_d:
        if u["h"] != 1 or u["r"] != 1:
            raise TTileError(f"{mk.name}: a 1-d convolution's microkernel unrolls neither h nor r")
        iw = (u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1
        shapes = [(1, iw, mk.red), (u["s"], mk.red, kv), (1, u["w"], kv)]
    elif mk.op == "conv2d":
        ih = (u["h"] - 1) * mk.stride + (u["r"] - 1) * mk.dilation + 1
        iw = (u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1
        shapes = [(1, ih, iw, mk.red), (u["r"], u["s"], mk.red, kv), (1, u["h"], u["w"], kv)]
    elif mk.op == "depthwise" and one_d:
        if u["h"] != 1 or mk.red != 1:
            raise TTileError(f"{mk.name}: a 1-d convolution's microkernel unrolls no h and reduces over no r")
        iw = (u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1
        shapes = [(1, iw, kv), (u["s"], kv), (1, u["w"], kv)]
    elif mk.op == "depthwise":
        ih = (u["h"] - 1) * mk.stride + (mk.red - 1) * mk.dilation + 1
        iw = (u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1
        shapes = [(1, ih, iw, kv), (mk.red, u["s"], kv), (1, u["h"], u["w"], kv)]
    else:
        shapes = [(u["i"], mk.red), (mk.red, kv), (u["i"], kv)]
    if packed:
        shapes[1] = packed_shape(shapes[1], packed)
    out = []
    for p, shape, dtype in zip(params, shapes, (input_dtype(mk), "float32", "float32")):
        strides = [T.int32() for _ in shape[:-1]] + [1] if impl else None
        out.append(T.match_buffer(p, shape, dtype, strides=strides, offset_factor=1))
    return out


def input_dtype(mk: Microkernel) -> str:
    """The dtype of an fp32 microkernel's input buffer: float32, or the narrower one it widens (WIDENED_INPUTS)."""
    return WIDENED_INPUTS[mk.input] if mk.input else "float32"


def _widened(mk: Microkernel, value):
    """An input element or vector of `mk` as the fp32 its lanes multiply (a u8 one converted)."""
    if not mk.input:
        return value
    lanes = str(value.ty).partition("x")[2]
    return tir.Cast(f"float32x{lanes}" if lanes else "float32", value)


def _func(mk: Microkernel, impl: bool, packed: int = 0, prefetch: int = 0, zero_start: bool = False,
          one_d: bool = False):
    with IRBuilder() as ib:
        with T.prim_func(s_tir=True):
            T.func_name(mk.name + variant_suffix(packed, prefetch, zero_start, one_d) + ("_impl" if impl else "_desc"))
            params = [T.arg(n, T.handle()) for n in ("a", "b", "c")]
            A, B, C = tile_buffers(mk, params, impl, packed, one_d)
            full = lambda buf: buf[tuple(slice(0, e) for e in buf.shape)]  # noqa: E731
            with T.sblock("root"):
                T.reads(full(C), full(A), full(B))
                T.writes(full(C))
                if impl:
                    emit(mk, *views(mk, A, B, C, packed, one_d), {}, prefetch, zero_start)
                elif mk.precision in REDUCED_FORMS:
                    REDUCED_FORMS[mk.precision].desc_body(mk, *views(mk, A, B, C, packed), loop_nest(mk))
                else:
                    _desc_body(mk, *views(mk, A, B, C, packed, one_d))
    return ib.get()


def _desc_body(mk, A, B, C):
    # Dimensions without a loop (extent 1) get no block iterator: blockize drops those on the
    # scheduled side too, so the two sides compare equal.
    nest = loop_nest(mk)
    with T.grid(*[e for _, e in nest]) as loop_vars:
        lv = dict(zip([n for n, _ in nest], loop_vars if len(nest) > 1 else [loop_vars]))
        with T.sblock("update"):
            if mk.op == "conv2d":
                dims = [("h", "S", "h"), ("w", "S", "w"), ("k", "S", "k"), ("r", "R", "r"), ("s", "R", "s"),
                        ("c", "R", None)]
            elif mk.op == "depthwise":
                dims = [("h", "S", "h"), ("w", "S", "w"), ("k", "S", "k"), ("r", "R", "r"), ("s", "R", "s")]
            else:
                dims = [("i", "S", "i"), ("j", "S", "j"), ("k", "R", "k")]
            iv = {}
            for dim, kind, loop in dims:
                if dim == "c":  # c = c_o * uc + c_i
                    bind = lv.get("c_o", 0) * mk.get("c") + lv.get("c_i", 0)
                    present = "c_o" in lv or "c_i" in lv
                else:
                    bind, present = lv.get(loop, 0), loop in lv
                if present:
                    ext = mk.tile[dim]
                    iv[dim] = (T.axis.spatial if kind == "S" else T.axis.reduce)(ext, bind)
            g = lambda d: iv.get(d, 0)  # noqa: E731
            if mk.op == "conv2d":
                st, dl = mk.stride, mk.dilation
                o = [0, g("h"), g("w"), g("k")]
                store(C, C[tuple(o)] + A[0, g("h") * st + g("r") * dl, g("w") * st + g("s") * dl, g("c")]
                      * B[g("r"), g("s"), g("c"), g("k")], o)
            elif mk.op == "depthwise":
                st, dl = mk.stride, mk.dilation
                o = [0, g("h"), g("w"), g("k")]
                store(C, C[tuple(o)] + _widened(mk, A[0, g("h") * st + g("r") * dl, g("w") * st + g("s") * dl, g("k")])
                      * B[g("r"), g("s"), g("k")], o)
            else:
                o = [g("i"), g("j")]
                T.buffer_store(C, C[tuple(o)] + A[g("i"), g("k")] * B[g("k"), g("j")], o)


def tile_buffers(mk: Microkernel, params, impl: bool, packed: int = 0, one_d: bool = False):
    """The buffers of one tile of `mk` (of any precision), as its intrinsic and the tails that hold it declare them."""
    if mk.precision in REDUCED_FORMS:  # (weights in the instruction's layout, packed or not; no 1-d variant)
        return REDUCED_FORMS[mk.precision].buffers(mk, params, impl, packed)
    return _buffers(mk, params, impl, packed, one_d)


def emit(mk, A, B, C, base: dict, prefetch: int = 0, zero_start: bool = False):
    """emit_microkernel for a microkernel of any precision (a reduced one: intrin_dot.emit, with its ISA's
    dot-product instruction)."""
    if mk.precision in REDUCED_FORMS:
        return REDUCED_FORMS[mk.precision].emit(mk, A, B, C, mk.instruction, base, zero_start)
    return emit_microkernel(mk, A, B, C, base, prefetch, zero_start)


def emit_microkernel(mk, A, B, C, base: dict, prefetch: int = 0, zero_start: bool = False):
    """Emit the microkernel's statements (reduction loop included) into the current IR builder frame.
    `base` offsets the tile inside the buffers, per dimension (conv2d: h, w, k, c, r, s; matmul: i, j,
    k); k (conv2d) and j (matmul) offsets are in elements. `prefetch` > 0: each reduction step also
    prefetches the weights that many steps ahead. `zero_start`: the accumulators start at zero instead of
    loading the output tile, right only where the call covers the whole reduction (the output was just set
    to zero): the load would wait for output lines that the reduction's init has only started to bring in."""
    L = mk.lanes
    vec = f"float32x{L}"
    u = dict(mk.unroll)
    b = lambda d: base.get(d, 0)  # noqa: E731
    nk = u[mk.family["vector"]]
    if mk.op == "conv2d":
        rows = [(w, h) for w in range(u["w"]) for h in range(u["h"])]
        steps = [(s, r, ci) for s in range(u["s"]) for r in range(u["r"]) for ci in range(u["c"])]
        st, dl, uc = mk.stride, mk.dilation, u["c"]
        out_at = lambda row, kk: [0, b("h") + row[1], b("w") + row[0], b("k") + kk * L]  # noqa: E731
        in_at = lambda row, step, c: A[0, (b("h") + row[1]) * st + (b("r") + step[1]) * dl,  # noqa: E731
                                       (b("w") + row[0]) * st + (b("s") + step[0]) * dl, b("c") + c * uc + step[2]]
        w_at = lambda step, c, kk: [b("r") + step[1], b("s") + step[0], b("c") + c * uc + step[2], b("k") + kk * L]  # noqa: E731
        red_trips = mk.red // uc
    elif mk.op == "depthwise":
        # Vector x vector: each output channel reads its own input channel. Stride 1: neighbouring rows read
        # the same input vectors at other taps; LLVM loads each once per step (no store in between).
        rows = [(w, h) for w in range(u["w"]) for h in range(u["h"])]
        steps = [(s,) for s in range(u["s"])]
        st, dl = mk.stride, mk.dilation
        out_at = lambda row, kk: [0, b("h") + row[1], b("w") + row[0], b("k") + kk * L]  # noqa: E731
        in_at = lambda row, step, r, kk: _widened(mk, A.vload(  # noqa: E731
            [0, (b("h") + row[1]) * st + (b("r") + r) * dl, (b("w") + row[0]) * st + (b("s") + step[0]) * dl,
             b("k") + kk * L], vec if not mk.input else f"{input_dtype(mk)}x{L}"))
        w_at = lambda step, r, kk: [b("r") + r, b("s") + step[0], b("k") + kk * L]  # noqa: E731
        red_trips = mk.red
    else:
        rows = [(i,) for i in range(u["i"])]
        steps = [()]
        out_at = lambda row, kk: [b("i") + row[0], b("j") + kk * L]  # noqa: E731
        in_at = lambda row, step, c: A[b("i") + row[0], b("k") + c]  # noqa: E731
        w_at = lambda step, c, kk: [b("k") + c, b("j") + kk * L]  # noqa: E731
        red_trips = mk.red

    def ramp(idx):
        return idx[:-1] + [tir.Ramp(idx[-1], 1, L)]

    acc = T.alloc_buffer((len(rows) * nk,), vec, scope="local")
    slot = lambda ri, kk: ri * nk + kk  # noqa: E731
    for ri, row in enumerate(rows):
        for kk in range(nk):
            start = tir.Broadcast(tir.const(0, "float32"), L) if zero_start else C.vload(out_at(row, kk), vec)
            T.buffer_store(acc, start, [slot(ri, kk)])

    def fma(ri, row, step, c, kk):
        bcast = in_at(row, step, c, kk) if mk.op == "depthwise" else tir.Broadcast(in_at(row, step, c), L)
        T.buffer_store(acc, T.fma(bcast, B.vload(w_at(step, c, kk), vec), acc[slot(ri, kk)]), [slot(ri, kk)])

    with T.serial(0, red_trips) as c:
        if prefetch:
            # For weights that stream from memory (lowering.WEIGHT_PREFETCH says where it pays). Every step's
            # lines: an unrolled window reads one stream per tap (r, s), each crossing pages the hardware
            # prefetcher stops at. Prefetches never fault on x86 or ARM, so running past the buffer's end in the
            # last steps is safe.
            for step in steps:
                for kk in range(0, nk, max(1, 16 // L)):  # one per 64-byte line of 4-byte lanes
                    T.evaluate(tir.call_llvm_intrin("void", "llvm.prefetch.p0", tir.address_of(
                        B[tuple(w_at(step, c + prefetch, kk))]), tir.const(0, "int32"), tir.const(3, "int32"),
                        tir.const(1, "int32")))
        for step in steps:
            if mk.weights_resident:
                for ri, row in enumerate(rows):
                    for kk in range(nk):
                        fma(ri, row, step, c, kk)
            else:
                for kk in range(nk):
                    for ri, row in enumerate(rows):
                        fma(ri, row, step, c, kk)
    for ri, row in enumerate(rows):
        for kk in range(nk):
            store(C, acc[slot(ri, kk)], ramp(out_at(row, kk)))


def register(mk: Microkernel, packed: int = 0, prefetch: int = 0, zero_start: bool = False,
             one_d: bool = False) -> str:
    """Register `mk` as a TensorIntrin (once per process) and return its name; `packed` (a block size): the
    variant reading weights prepacked in blocks of that many vector elements; `prefetch`: the variant
    prefetching its weights that many reduction steps ahead; `zero_start`: the variant whose accumulators
    start at zero (emit_microkernel); `one_d`: the variant over a 1-d convolution's buffers (ONE_D)."""
    name = mk.name + variant_suffix(packed, prefetch, zero_start, one_d)
    if mk.precision in REDUCED_FORMS and (prefetch or one_d):
        raise TTileError(f"{mk.text}: {mk.precision} microkernels have no prefetching or 1-d variant")
    if TensorIntrin.get(name, allow_missing=True) is None:
        mk.check_registers()
        TensorIntrin.register(name, _func(mk, False, packed, one_d=one_d),
                              _func(mk, True, packed, prefetch, zero_start, one_d))
    return name


# --- a tensorized tile of exactly one microkernel, used for measuring and for tests ------------------

def tile_problem(mk: Microkernel):
    """The operator instance whose whole iteration space is one call of `mk`."""
    from ..operators import Conv2d, Depthwise, Matmul, QConv2d, QMatmul

    u = dict(mk.unroll)
    # (the weights its instruction multiplies exactly: int8 without VNNI takes |w| <= 64)
    exact = mk.precision in REDUCED_FORMS and get_precision(mk.precision).exact
    limit = {"weight_limit": mk.instruction.weight_limit} if exact else {}
    if mk.precision in REDUCED_FORMS and mk.op == "conv2d":
        return QConv2d(K=u["k"] * mk.lanes, C=mk.red, H=(u["h"] - 1) * mk.stride + (u["r"] - 1) * mk.dilation + 1,
                       W=(u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1, R=u["r"], S=u["s"],
                       stride=mk.stride, dilation=mk.dilation, precision=mk.precision, **limit)
    if mk.precision in REDUCED_FORMS:
        return QMatmul(M=u["i"], N=u["j"] * mk.lanes, K=mk.red, precision=mk.precision, **limit)
    if mk.op == "depthwise":
        return Depthwise(C=u["k"] * mk.lanes, H=(u["h"] - 1) * mk.stride + (mk.red - 1) * mk.dilation + 1,
                         W=(u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1, R=mk.red, S=u["s"],
                         stride=mk.stride, dilation=mk.dilation)
    if mk.op == "conv2d":
        return Conv2d(K=u["k"] * mk.lanes, C=mk.red, H=(u["h"] - 1) * mk.stride + (u["r"] - 1) * mk.dilation + 1,
                      W=(u["w"] - 1) * mk.stride + (u["s"] - 1) * mk.dilation + 1, R=u["r"], S=u["s"],
                      stride=mk.stride, dilation=mk.dilation)
    return Matmul(M=u["i"], N=u["j"] * mk.lanes, K=mk.red)


def tensorize_nest(sch, block, mk: Microkernel, loops: dict, init_loop=None, intrin_name=None,
                   vector_init: bool = False, no_init: bool = False) -> str | None:
    """Order the microkernel-level loops `loops` (name -> loop) as `loop_nest(mk)` wants, unit loops
    above them, then decompose the reduction and tensorize. `loops` must hold every name of the
    nest; extra unit-extent loops listed in it are hoisted. `vector_init`: the init's innermost loop (the
    microkernel's vector dimension, the output's contiguous one) is vectorized. `no_init`: the init is dead
    (one tensorized call of zero-start microkernels writes its whole tile) and is replaced by nothing
    (skip_init); returns that intrinsic's name, None when there is none."""
    nest = [n for n, _ in loop_nest(mk)]
    units = [lp for n, lp in loops.items() if n not in nest]
    ordered = units + [loops[n] for n in nest]
    sch.reorder(*ordered)
    # The init must sit above every reduction loop, the hoisted unit ones included.
    init = sch.decompose_reduction(block, init_loop if init_loop is not None else ordered[0])
    skipped = skip_init(sch, init, block) if no_init else None
    if vector_init and not skipped:
        vectorize_init(sch, init, mk.lanes)
    sch.tensorize(loops[nest[0]], intrin_name or register(mk))
    return skipped


def vectorize_init(sch, init, lanes: int) -> bool:
    """Vectorize the init block's innermost loop when it runs over whole vectors: left to itself LLVM stores the
    zeros in narrower pieces (seen: 256-bit stores on AVX-512), and on a short reduction the init's stores are a
    visible share of the output's round trip. The nest's vector dimension is innermost (loop_nest), so the loop
    is the output's contiguous index. Returns whether it did."""
    inner = sch.get_loops(init)[-1]
    extent = sch.get(inner).extent
    if not isinstance(extent, tir.IntImm) or int(extent) % lanes:
        return False
    sch.vectorize(inner)
    return True


def tensorized_tile(mk: Microkernel, repeat: int = 1):
    """An IRModule computing `tile_problem(mk)` with one tensorized call; with repeat > 1 the whole
    body runs `repeat` times (same data, hot cache) so that one timed call is long enough."""
    from ..operators import Depthwise

    prob = tile_problem(mk)
    sch = tvm.s_tir.Schedule(prob.prim_func())
    if mk.op == "conv2d":
        block = sch.get_sblock("conv2d_nhwc")
        n, h, w, k, r, s, c = sch.get_loops(block)
        loops = {"n": n, "c_o": c, "s": s, "r": r, "w": w, "h": h, "k": k}
        if mk.get("c") > 1:  # split only when unrolled: a unit c_i loop would block blockize
            loops["c_o"], loops["c_i"] = sch.split(c, [None, mk.get("c")])
    elif mk.op == "depthwise":
        block = sch.get_sblock(Depthwise.BLOCK)
        n, h, w, k, r, s = sch.get_loops(block)
        loops = {"n": n, "r": r, "s": s, "w": w, "h": h, "k": k}
    else:
        block = sch.get_sblock("matmul")
        i, j, k = sch.get_loops(block)
        loops = {"k": k, "i": i, "j": j}
    tensorize_nest(sch, block, mk, loops)
    mod = sch.mod
    if repeat > 1:
        func = mod["main"]
        root = func.body.block
        # Only the update repeats: repeating init + update makes every round the same, and LLVM then drops all
        # but one (seen on depthwise tiles: "300x the peak"). Accumulating across rounds cannot be folded.
        parts = list(root.body.seq) if isinstance(root.body, tir.SeqStmt) else [root.body]
        init = [p for p in parts if _is_init(p)]
        update = [p for p in parts if not _is_init(p)]
        loop = tir.For(tir.Var("rep", "int32"), 0, repeat, tir.ForKind.SERIAL,
                       update[0] if len(update) == 1 else tir.SeqStmt(update))
        body = tir.SeqStmt(init + [loop]) if init else loop
        new_root = tvm.s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body, root.init,
                                    root.alloc_buffers, root.match_buffers, root.annotations)
        func = func.with_body(tvm.s_tir.SBlockRealize(func.body.iter_values, func.body.predicate, new_root))
        mod = tvm.IRModule({"main": func})
    return mod


def _is_init(stmt) -> bool:
    """Whether a statement of a tile's root is the reduction's init (decompose_reduction's `_init` block under
    its loops)."""
    while isinstance(stmt, tir.For):
        stmt = stmt.body
    return isinstance(stmt, tvm.s_tir.SBlockRealize) and stmt.block.name_hint.endswith("_init")
