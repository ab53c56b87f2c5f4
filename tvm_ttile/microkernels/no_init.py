"""(TVM) The reduction's init where zero-start microkernels make it dead: an intrinsic that replaces it by
nothing, named by the tile it covers so that it can be registered again from its name."""
from __future__ import annotations

import tvm
import tvm.tirx as tir
from tvm.s_tir import TensorIntrin
from tvm.sym.analyzer import Analyzer
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script import builder as T



NO_INIT = "ttile_noinit_"  # name prefix of the intrinsics that replace a dead init by nothing


def no_init_name(shape: tuple, order: tuple, dtype: str = "float32") -> str:
    """The name of the no-op init over an output tile of `shape` (of `dtype`, named when not float32), its loops
    (outermost first) running over the tile's dimensions `order` (dimensions of extent 1 have no loop)."""
    kind = "" if dtype == "float32" else f"_{dtype}"
    return NO_INIT + "x".join(map(str, shape)) + "_" + "".join(map(str, order)) + kind


def register_no_init(name: str) -> str:
    """Register (once per process) the intrinsic `name` (no_init_name): its description zeroes the output tile,
    its implementation does nothing. Only right where every element of the tile is then written by
    microkernels that start their accumulators at zero (lowering decides): the zeros would be overwritten
    before anything reads them, and on a short reduction storing them is a visible share of the time (the
    output's lines are fetched for the init, LLVM does not remove the stores)."""
    if TensorIntrin.get(name, allow_missing=True) is None:
        shape_text, order_text, *dtype = name[len(NO_INIT):].split("_")
        shape, order = tuple(int(x) for x in shape_text.split("x")), tuple(int(x) for x in order_text)
        dtype = dtype[0] if dtype else "float32"
        TensorIntrin.register(name, _no_init_func(shape, order, False, dtype),
                              _no_init_func(shape, order, True, dtype))
    return name


def _no_init_func(shape: tuple, order: tuple, impl: bool, dtype: str = "float32"):
    with IRBuilder() as ib:
        with T.prim_func(s_tir=True):
            T.func_name(f"{NO_INIT}{'impl' if impl else 'desc'}")
            c = T.arg("c", T.handle())
            strides = [T.int32() for _ in shape[:-1]] + [1] if impl else None
            C = T.match_buffer(c, shape, dtype, strides=strides, offset_factor=1)
            with T.sblock("root"):
                T.reads()
                T.writes(C[tuple(slice(0, e) for e in shape)])
                if impl:
                    T.evaluate(0)
                else:
                    with T.grid(*[shape[d] for d in order]) as loop_vars:
                        lv = loop_vars if len(order) > 1 else [loop_vars]
                        with T.sblock("init"):
                            # Block iterators in the output's dimension order, as the init block has them.
                            loop_of = dict(zip(order, lv))
                            iv = {d: T.axis.spatial(shape[d], loop_of[d]) for d in sorted(order)}
                            idx = [iv.get(d, 0) for d in range(len(shape))]
                            T.buffer_store(C, tir.const(0, dtype), idx)
    return ib.get()


def skip_init(sch, init, block) -> str | None:
    """Replace the init block `init` (decompose_reduction's, over the output tile of the update `block`'s
    tensorized call) by the no-op intrinsic (register_no_init). The init's own loops (those the update does not
    share) are reordered so that those of extent 1 come outermost, then the rest is tensorized. Returns the
    intrinsic's name, or None when the init is not a plain tile (then it is left as it is)."""
    from tvm.tirx.analysis import undefined_vars

    from ..recognize import index_of

    shared = [sch.get(lp) for lp in sch.get_loops(block)]
    own = [lp for lp in sch.get_loops(init) if not any(sch.get(lp).same_as(f) for f in shared)]
    if not own:
        return None
    units = [lp for lp in own if int(sch.get(lp).extent) == 1]
    rest = [lp for lp in own if int(sch.get(lp).extent) > 1]
    if units and rest:
        sch.reorder(*units, *rest)
    if not rest:
        return None
    realize = sch.get(rest[-1]).body
    if not isinstance(realize, tvm.s_tir.SBlockRealize) or not isinstance(realize.block.body, tir.BufferStore):
        return None
    store = realize.block.body
    ivars = [iv.var for iv in realize.block.iter_vars]
    own_vars = [sch.get(lp).loop_var for lp in rest]
    tiled = {i for i, value in enumerate(realize.iter_values)  # the iterators the tile's loops drive
             if any(u.same_as(w) for u in undefined_vars(value) for w in own_vars)}
    dim_of_iv = {}  # each moves one output index by 1 (a grouped conv's index is group * K/G + k)
    for d, idx in enumerate(store.indices):
        terms, used = index_of(idx, ivars, Analyzer())
        moved = [i for i in used if i in tiled]
        if not moved:
            continue
        if terms is None or len(moved) != 1 or terms.get(moved[0]) != 1 or moved[0] in dim_of_iv:
            return None
        dim_of_iv[moved[0]] = d
    shape, order = [1] * len(store.indices), []
    for lp in rest:
        loop = sch.get(lp)
        users = [i for i, value in enumerate(realize.iter_values)
                 if any(u.same_as(loop.loop_var) for u in undefined_vars(value))]
        if len(users) != 1 or users[0] not in dim_of_iv:
            return None
        shape[dim_of_iv[users[0]]] = int(loop.extent)
        order.append(dim_of_iv[users[0]])
    if len(set(order)) != len(order):  # two loops on one output index: not a tile
        return None
    name = register_no_init(no_init_name(tuple(shape), tuple(order), str(store.buffer.dtype)))
    sch.tensorize(rest[0], name)
    return name


