"""Which contraction a PrimFunc computes, read from its computation, never from block or loop names.

A contraction is a block whose body accumulates the product of two buffer loads over reduction loops,
out[...] = out[...] + x[...] * y[...]. Its kind and the role of each iteration variable follow from the index
expressions alone:
- every index a plain variable: a matmul when one reduction variable is shared by the two operands, each of
  the two other output variables belonging to one operand; variables in both operands and the output are
  batch dimensions (batch matmul);
- an input index of the form h * stride + r * dilation (a sliding window): a convolution, NHWC when the output's
  channel is its last index (the weights' variable), depthwise when the output channel also indexes the input
  and nothing else is reduced, grouped when the input channel is computed from the output channel; with one
  window and a 3-d output (NWC), a 1-d convolution (plain, grouped or depthwise), tuned as the 2-d one of
  height 1 (canonicalize adds the unit h and r iterators; its intrinsics read the 3-d buffers, intrin.ONE_D).
The weights (the operand holding the output's innermost, vectorized variable) and the input may be read in
any layout; `Contraction.transposed` says which ones lowering must copy into the microkernels' layout.
"""
from __future__ import annotations

import dataclasses

import tvm
from tvm.sym.analyzer import Analyzer
from tvm.sym.pattern import detect_linear_equation
from tvm.tirx import IndexMap
from tvm.tirx.analysis import undefined_vars

from .errors import TTileError

# Canonical iteration order per operator: the block iterators lowering works on (batch variables come first).
CANONICAL = {"conv2d": ("n", "h", "w", "k", "r", "s", "c"), "matmul": ("i", "j", "k"),
             "depthwise": ("n", "h", "w", "k", "r", "s")}
# The layouts the microkernels read, by canonical dimension: input, weights, output.
LAYOUTS = {"conv2d": (("n", "h", "w", "c"), ("r", "s", "c", "k"), ("n", "h", "w", "k")),
           "matmul": (("i", "k"), ("k", "j"), ("i", "j")),
           "depthwise": (("n", "h", "w", "k"), ("r", "s", "k"), ("n", "h", "w", "k"))}
# Kinds tvm_ttile recognizes, and the operator whose structured space tunes each (None: recognized, refused).
KINDS = {"matmul": "matmul", "batch_matmul": "matmul", "conv2d": "conv2d", "grouped_conv2d": "conv2d",
         "conv2d_nchw": None, "depthwise_conv2d": "depthwise", "conv1d": "conv2d", "grouped_conv1d": "conv2d",
         "depthwise_conv1d": "depthwise"}
ONE_D_KINDS = ("conv1d", "grouped_conv1d", "depthwise_conv1d")  # tuned as their 2-d kind of height 1
# The dimensions a 1-d convolution lacks (extent 1 in its 2-d problem) and, per operator, the layouts its
# microkernels read the 3-d buffers in: input, weights, output.
CONV1D_UNIT = ("h", "r")
ONE_D_LAYOUTS = {"conv2d": (("n", "w", "c"), ("s", "c", "k"), ("n", "w", "k")),
                 "depthwise": (("n", "w", "k"), ("s", "k"), ("n", "w", "k"))}
REFUSALS = {
    "conv2d_nchw": "an NCHW conv2d: tvm_ttile tunes NHWC/HWIO; convert the layout first, e.g. "
                   "relax.transform.ConvertLayout({'relax.nn.conv2d': ['NHWC', 'HWIO']}) as tvm-ttile tune-model does",
}


@dataclasses.dataclass(frozen=True)
class Contraction:
    """One recognized contraction block. `dims` maps each canonical dimension to the index of its block
    iterator; `batch` lists the batch iterators (batch matmul), outermost first."""

    kind: str
    block: str  # the block's name, only to find it again and to name it in messages
    dims: tuple  # ((canonical dim, block iterator index), ...) in CANONICAL order
    extents: tuple  # ((canonical dim, extent), ...)
    batch: tuple = ()  # ((block iterator index, extent), ...)
    stride: int = 1
    dilation: int = 1
    transposed: tuple = ()  # operands ("input", "weights") not read in LAYOUTS order
    weights_first: bool = False  # the product is written weights * input
    layouts: tuple = ()  # (("input", dims as read), ("weights", dims as read)); batch iterators are b0, b1, ...
    groups: int = 1  # a grouped convolution's groups: one conv2d per group, the group an outer level
    precision: str = "fp32"  # precision.PRECISIONS, from the operands' dtypes (PRECISION_OF_DTYPES)
    input: str = ""  # an fp32 depthwise's input held narrower and widened as read (spec.WIDENED_INPUTS)

    @property
    def op(self) -> str | None:
        return KINDS[self.kind]

    @property
    def one_d(self) -> bool:
        """A 1-d convolution: tuned as its 2-d operator of height 1 over its 3-d buffers."""
        return self.kind in ONE_D_KINDS

    @property
    def layouts_read(self) -> tuple:
        """The layouts the microkernels read: input, weights, output."""
        return ONE_D_LAYOUTS[self.op] if self.one_d else LAYOUTS[self.op]

    @property
    def batch_size(self) -> int:
        """Independent instances of the operator: a batch matmul's batch, a grouped convolution's groups."""
        size = self.groups
        for _, e in self.batch:
            size *= e
        return size

    def refusal(self) -> str | None:
        """Why tvm_ttile cannot tune this contraction (one line), None when it can."""
        if self.kind in REFUSALS:
            return f"block {self.block!r} is {REFUSALS[self.kind]}"
        if self.weights_first:
            return (f"block {self.block!r} is a {self.kind} whose product reads the weights first (w * x); "
                    "tvm_ttile's microkernels match x * w")
        return None

    def order(self) -> list:
        """Block iterator indices in lowering's order: batch iterators, then CANONICAL (None: a unit iterator
        canonicalize adds, a 1-d convolution's h and r)."""
        dims = dict(self.dims)
        return [i for i, _ in self.batch] + [dims.get(d) for d in CANONICAL[self.op]]


def blocks(sch) -> list:
    """Every block of the schedule's function, outermost first."""
    try:
        root = sch.get_sblock("root")
    except tvm.s_tir.schedule.ScheduleError:  # a function without blocks
        return []
    out, todo = [], [root]
    while todo:
        rv = todo.pop(0)
        children = sch.get_child_blocks(rv)
        out += children
        todo += children
    return out


def block_annotation(func, block: str, key: str) -> str | None:
    """The annotation `key` of the block named `block` of PrimFunc `func` (how a function of our own names what it
    computes: winograd.py, attention.py), or None when there is no such block or annotation."""
    sch = tvm.s_tir.Schedule(tvm.IRModule({"main": func}))
    try:
        stmt = sch.get(sch.get_sblock(block))
    except tvm.s_tir.schedule.ScheduleError:
        return None
    return str(stmt.annotations[key]) if key in stmt.annotations else None


LOADS = ("BufferLoad", "TensorLoad")  # TVM 0.27's TIR reads buffers with either


def product_of(value):
    """(accumulator load, x, y) of `acc + x * y` (either order of the sum), else None; x and y are the loads
    themselves where the product widens them first (an int8 product: int32(x) * int32(y))."""
    kind = type(value).__name__
    if kind != "Add":
        return None
    for acc, prod in ((value.a, value.b), (value.b, value.a)):
        if type(acc).__name__ in LOADS and type(prod).__name__ == "Mul":
            x, y = _widened(prod.a), _widened(prod.b)
            if type(x).__name__ in LOADS and type(y).__name__ in LOADS:
                return acc, x, y
    return None


# The call precision.Precision.widen wraps a load in (bf16 bits to fp32: reinterpret(uint32(x) << 16)).
_WIDENING_CALLS = ("tirx.reinterpret",)


def _widened(expr):
    """The load under a widening (int32(u8 load), bf16 bits to fp32), else `expr`."""
    inner = expr
    while True:
        if type(inner).__name__ == "Cast":
            inner = inner.value
        elif type(inner).__name__ == "LShift":
            inner = inner.a
        elif type(inner).__name__ == "Call" and getattr(inner.op, "name", "") in _WIDENING_CALLS:
            inner = inner.args[0]
        else:
            break
    return inner if type(inner).__name__ in LOADS else expr


# The precisions a contraction may compute, by the dtypes of its (output, input, weights).
PRECISION_OF_DTYPES = {("float32", "float32", "float32"): "fp32", ("int32", "uint8", "int8"): "int8",
                       ("float32", "uint16", "uint16"): "bf16"}
# the kinds with reduced-precision microkernels (spec.REDUCED_OPS; a batch matmul runs matmul's on each instance)
REDUCED_KINDS = ("matmul", "batch_matmul", "conv2d", "grouped_conv2d")
# fp32 products of a narrower input widened as it is read, by (output, input, weights) dtypes: the microkernel
# family that does it and the input's spec.WIDENED_INPUTS name (a quantized depthwise layer's u8 activations)
WIDENED_DTYPES = {("float32", "uint8", "float32"): ("depthwise", "u8")}


@dataclasses.dataclass(frozen=True)
class Grouped:
    """A weight load in a dot-product instruction's layout, W[k // g, j, k % g], seen as the W[k, j] it holds."""
    source: object
    indices: tuple


def ungrouped(load):
    """`load` as `Grouped` when it reads W[k // g, j, k % g] (one iterator k, a constant g), else None."""
    idx = list(load.indices)
    if len(idx) < 3 or type(idx[-3]).__name__ != "FloorDiv" or type(idx[-1]).__name__ != "FloorMod":
        return None
    div, mod = idx[-3], idx[-1]
    if not (div.a.same_as(mod.a) and isinstance(div.b, tvm.tirx.IntImm) and isinstance(mod.b, tvm.tirx.IntImm)
            and int(div.b) == int(mod.b)):
        return None
    return Grouped(load.source, (*idx[:-3], div.a, idx[-2]))


def index_of(expr, ivars, analyzer):
    """{iterator index: coefficient} of an affine index (constants ignored), or (None, used iterators) when
    it is not affine in the iterators. Simplified first within the iterators' ranges (co // CO -> 0)."""
    expr = analyzer.simplify(expr)
    used = [i for i, v in enumerate(ivars) if any(u.same_as(v) for u in undefined_vars(expr))]
    coef = detect_linear_equation(expr, [ivars[i] for i in used]) if used else [expr]
    if len(coef) != len(used) + 1 or not all(isinstance(c, tvm.tirx.IntImm) for c in coef[:-1]):
        return None, set(used)
    return {i: int(c) for i, c in zip(used, coef[:-1]) if int(c) != 0}, set(used)


def recognize_block(stmt) -> Contraction | str:
    """The Contraction a block computes, or one line saying why it is none."""
    name = stmt.name_hint
    ivars = [iv.var for iv in stmt.iter_vars]
    reduce = {i for i, iv in enumerate(stmt.iter_vars) if int(iv.iter_type) == tvm.tirx.IterVar.CommReduce}
    if not reduce:
        return f"block {name!r} reduces nothing"
    store = stmt.body
    if type(store).__name__ != "BufferStore":
        return f"block {name!r} is not a single store"
    parts = product_of(store.value)
    if parts is None:
        return f"block {name!r} does not accumulate a product of two loads (out = out + x * y)"
    acc, x, y = parts
    if not acc.source.same_as(store.buffer) or any(not a.same_as(b) for a, b in zip(acc.indices, store.indices)):
        return f"block {name!r} does not accumulate into the element it stores"
    dtypes = tuple(str(b.dtype) for b in (store.buffer, x.source, y.source))
    precision = PRECISION_OF_DTYPES.get(dtypes) or PRECISION_OF_DTYPES.get((dtypes[0], dtypes[2], dtypes[1]))
    widened = WIDENED_DTYPES.get(dtypes) or WIDENED_DTYPES.get((dtypes[0], dtypes[2], dtypes[1]))
    precision = "fp32" if widened else precision
    if precision is None:
        return (f"block {name!r} computes {dtypes[1]} x {dtypes[2]} -> {dtypes[0]}; tvm_ttile's microkernels "
                "compute float32, u8 x s8 -> s32 and bf16 (uint16 bits) -> float32")
    if precision != "fp32":  # the weights (int8's signed operand; bf16's grouped one) in the instruction's layout
        weights = next((ld for ld in (x, y) if str(ld.source.dtype) == "int8"), None)
        if weights is None:
            weights = next((ld for ld in (y, x) if ungrouped(ld) is not None), y)
        grouped = ungrouped(weights)
        if grouped is None:
            return (f"block {name!r}: {precision} weights must be read in the dot-product layout "
                    "W[k // g, j, k % g] (operators.QMatmul.pack_weights)")
        x, y = (grouped, y) if weights is x else (x, grouped)
    analyzer = Analyzer()
    for iv in stmt.iter_vars:  # not the unit ones: they would become 0 and leave the indices
        if int(iv.dom.extent) > 1:
            analyzer.bind(iv.var, iv.dom)
    out = []
    for e in store.indices:
        terms, _ = index_of(e, ivars, analyzer)
        if terms is None or len(terms) != 1 or next(iter(terms.values())) != 1:
            return f"block {name!r} does not store at plain iterators"
        out.append(next(iter(terms)))
    if set(out) & reduce or len(set(out)) != len(out):
        return f"block {name!r} stores at a reduction iterator"
    loads = [[index_of(e, ivars, analyzer) for e in ld.indices] for ld in (x, y)]
    extent = {i: int(iv.dom.extent) for i, iv in enumerate(stmt.iter_vars)}
    compound = [any(t is None or len(t) > 1 for t, _ in idx) for idx in loads]
    if any(compound):
        group = lambda pos, k, c, kg: analyzer.can_prove_equal(  # noqa: E731 - a grouped input channel?
            analyzer.simplify((x if compound[0] else y).indices[pos]), tvm.tirx.floordiv(ivars[k], kg) * extent[c] + ivars[c])
        found = _convolution(name, out, reduce, loads, compound, extent, group)
    else:
        found = _matmul(name, out, reduce, loads, extent)
    if isinstance(found, Contraction) and precision != "fp32":
        if found.kind not in REDUCED_KINDS:
            return f"block {name!r}: {precision} is tuned for {', '.join(REDUCED_KINDS)} only, not {found.kind}"
        found = dataclasses.replace(found, precision=precision)
    if isinstance(found, Contraction) and widened:
        op, widened_input = widened
        if found.op != op:
            return f"block {name!r} widens a {dtypes[1]} input, which only {op} microkernels do, not {found.kind}"
        found = dataclasses.replace(found, input=widened_input)
    return found


def _plain(idx) -> list:
    return [next(iter(t)) if t else None for t, _ in idx]


def _matmul(name, out, reduce, loads, extent):
    xv, yv = (_plain(idx) for idx in loads)
    shared = set(xv) & set(yv)
    red = [i for i in reduce if i in shared]
    if len(red) != 1 or set(reduce) - {red[0]}:
        return f"block {name!r} is a contraction over {len(reduce)} reduction iterators, not a matmul"
    j = out[-1]  # the output's innermost variable: the microkernels' vector dimension
    batch = [i for i in out if i in shared]
    rest = [i for i in out if i not in shared]
    if len(rest) != 2 or j not in rest:
        return f"block {name!r} is not a matmul: its output is not (batch..., rows, columns)"
    i = rest[0]
    weights_first = j in xv
    inp, wgt = (yv, xv) if weights_first else (xv, yv)
    if i not in inp or j not in wgt or any(v is None for v in inp + wgt):
        return f"block {name!r} is not a matmul: each operand must hold one output variable and the reduction"
    k = red[0]
    if inp[-2:] not in ([i, k], [k, i]) or wgt[-2:] not in ([k, j], [j, k]) or out[:-2] != batch \
            or inp[:-2] != batch or wgt[:-2] != batch:
        return f"block {name!r} is not a matmul: its batch iterators are not the outermost of every operand"
    transposed = tuple(n for n, v, want in (("input", inp, [i, k]), ("weights", wgt, [k, j])) if v[-2:] != want)
    dims = (("i", i), ("j", j), ("k", k))
    names = {**{v: d for d, v in dims}, **{b: f"b{n}" for n, b in enumerate(batch)}}
    layouts = (("input", tuple(names[v] for v in inp)), ("weights", tuple(names[v] for v in wgt)))
    return Contraction("batch_matmul" if batch else "matmul", name, dims, tuple((d, extent[v]) for d, v in dims),
                       tuple((b, extent[b]) for b in batch), transposed=transposed, weights_first=weights_first,
                       layouts=layouts)


def _input_channel(t, used, k, rest, extent, group, pos) -> tuple:
    """How a convolution's input channel index (at `pos`; `t` its affine terms, None when it is not affine, `used`
    the iterators it reads) follows from the output channel k and the reduction iterators `rest` besides the
    window's: ("depthwise", 1, None) when it is k itself; ("grouped", groups, c) when it is k // (K / groups) *
    C / groups + c (`group` proves it for one K / groups; groups 0 when no K / groups fits); ("plain", 1, c) when
    it is c; (None, 0, None) otherwise."""
    if t is not None and k in t and all(extent[v] == 1 for v in rest):
        return "depthwise", 1, None
    if t is None and k in used and len(rest) == 1:
        c = next(iter(rest))
        return "grouped", next((extent[k] // kg for kg in range(1, extent[k]) if extent[k] % kg == 0
                                and group(pos, k, c, kg)), 0), c
    if t is not None and len(t) == 1 and next(iter(t)) in rest and len(rest) == 1:
        return "plain", 1, next(iter(t))
    return None, 0, None


def _convolution(name, out, reduce, loads, compound, extent, group):
    """`group(pos, k, c, kg)`: whether the input's index at `pos` is k // kg * extent(c) + c."""
    if len(out) == 3 and sum(compound) == 1:
        return _convolution_1d(name, out, reduce, loads, compound, extent, group)
    if len(out) != 4 or sum(compound) != 1:
        return f"block {name!r} is not a 2-d convolution (a 4-d output and one input read through windows)"
    xi = compound.index(True)
    inp, wgt = loads[xi], loads[1 - xi]
    weights_first = xi == 1
    # A window is output * stride + tap * dilation; an output variable the weights also read is a channel (a
    # depthwise convolution's channel + its unit reduction iterator), not a window.
    wv = _plain(wgt)
    windows = [(pos, t) for pos, (t, _) in enumerate(inp) if t is not None and len(t) == 2
               and not any(v in wv and v not in reduce for v in t)]
    if len(windows) != 2:
        return f"block {name!r} is not a 2-d convolution (it reads {len(windows)} sliding windows, not 2)"
    spatial, taps, steps = [], [], []
    for _, t in windows:
        (a, ca), (b, cb) = sorted(t.items(), key=lambda kv: kv[0] in reduce)
        if a in reduce or b not in reduce:
            return f"block {name!r} is not a 2-d convolution (a window is not output * stride + tap * dilation)"
        spatial.append(a)
        taps.append(b)
        steps.append((ca, cb))
    if steps[0] != steps[1]:
        return f"block {name!r} is a convolution with different strides or dilations along h and w"
    stride, dilation = steps[0]
    h, w = spatial
    r, s = taps
    n = next((v for v in out if v not in (h, w) and v in _plain(inp)), None)
    ch_out = [v for v in out if v not in (h, w, n)]
    if n is None or len(ch_out) != 1:
        return f"block {name!r} is not a 2-d convolution (no batch or no output channel)"
    k = ch_out[0]
    dims = {"n": n, "h": h, "w": w, "k": k, "r": r, "s": s}
    rest = set(reduce) - {r, s}
    layout = "nchw" if out.index(k) == 1 else "nhwc" if out.index(k) == 3 else None
    channel = [pos for pos, (t, used) in enumerate(inp) if pos not in dict(windows) and (t is None or n not in t)]
    if layout is None or len(channel) != 1:
        return f"block {name!r} is a convolution in a layout tvm_ttile does not know"
    t, used = inp[channel[0]]
    form, groups, c = _input_channel(t, used, k, rest, extent, group, channel[0])
    if form == "grouped" and not groups:
        return f"block {name!r} is a convolution whose input channel is computed in a way tvm_ttile does not know"
    if form == "depthwise":
        kind = "depthwise_conv2d"
    elif form == "grouped":
        kind, dims["c"] = "grouped_conv2d", c
    elif form == "plain" and k in wv:
        kind, dims["c"] = "conv2d" if layout == "nhwc" else "conv2d_nchw", c
    else:
        return f"block {name!r} is a convolution tvm_ttile does not know (input channel index {t or used})"
    order = CANONICAL[KINDS[kind] or "conv2d"]
    extents = tuple((d, extent[dims[d]] // (groups if d == "k" else 1)) for d in order if d in dims)
    transposed, layouts = (), ()
    if kind == "depthwise_conv2d":
        # Unit dimensions (Relax's one input channel per group, a channel multiplier of 1) are left out of the
        # microkernels' layout: canonicalize drops them.
        names = {v: d for d, v in dims.items()}
        got_in = ["h" if pos == windows[0][0] else "w" if pos == windows[1][0] else "k" if pos == channel[0]
                  else names.get(v) for pos, v in enumerate(_plain(inp))]
        got_w = [names.get(v) or ("1" if v is None or extent[v] == 1 else None) for v in wv]
        if tuple(got_in) != LAYOUTS["depthwise"][0]:
            return f"block {name!r} is a depthwise conv2d whose input is not NHWC"
        if None in got_w or sorted(d for d in got_w if d != "1") != ["k", "r", "s"]:
            return f"block {name!r} is a depthwise conv2d whose weights are not indexed by r, s, k"
        transposed = ("weights",) if tuple(got_w) != LAYOUTS["depthwise"][1] else ()
        layouts = (("input", tuple(got_in)), ("weights", tuple(got_w)))
    elif kind in ("conv2d", "grouped_conv2d"):
        want_in, want_w, _ = LAYOUTS["conv2d"]
        names = {v: d for d, v in dims.items()}
        got_in = [("h", "w")[[p for p, _ in windows].index(pos)] if pos in dict(windows) else "c"
                  if pos == channel[0] else names.get(next(iter(tt)) if tt and len(tt) == 1 else None)
                  for pos, (tt, _) in enumerate(inp)]
        got_w = [names.get(v) for v in wv]
        transposed = tuple(nm for nm, got, want in (("input", got_in, want_in), ("weights", got_w, want_w))
                           if tuple(got) != want)
        if "input" in transposed:
            return f"block {name!r} is a conv2d whose input is not NHWC ({''.join(str(g) for g in got_in)})"
        if None in got_w:
            return f"block {name!r} is a conv2d whose weights are not indexed by r, s, c, k"
        layouts = (("input", tuple(got_in)), ("weights", tuple(got_w)))
    return Contraction(kind, name, tuple((d, dims[d]) for d in order if d in dims), extents, (), stride, dilation,
                       transposed, weights_first, layouts, groups)


def _convolution_1d(name, out, reduce, loads, compound, extent, group):
    """A 1-d convolution out[n, w, k] += in[n, w * stride + s * dilation, ch] * weights[s, c, k] (NWC, WIO: the
    layouts its 2-d operator of height 1 reads in place): plain (ch = c), grouped (ch = k // (K / groups) * C /
    groups + c) or depthwise (ch = k, weights [s, k] or WIO's [s, 1, k]); other layouts get their line."""
    xi = compound.index(True)
    inp, wgt = loads[xi], loads[1 - xi]
    wv = _plain(wgt)
    windows = [(pos, t) for pos, (t, _) in enumerate(inp) if t is not None and len(t) == 2
               and not any(v in wv and v not in reduce for v in t)]
    if len(windows) != 1:
        return f"block {name!r} is not a 1-d convolution (it reads {len(windows)} sliding windows, not 1)"
    pos_w, t = windows[0]
    (w, stride), (s, dilation) = sorted(t.items(), key=lambda kv: kv[0] in reduce)
    if w in reduce or s not in reduce:
        return f"block {name!r} is not a 1-d convolution (a window is not output * stride + tap * dilation)"
    n = next((v for v in out if v != w and v in _plain(inp)), None)
    ch_out = [v for v in out if v not in (w, n)]
    if n is None or len(ch_out) != 1:
        return f"block {name!r} is not a 1-d convolution (no batch or no output channel)"
    k = ch_out[0]
    dims = {"n": n, "w": w, "k": k, "s": s}
    rest = set(reduce) - {s}
    channel = [pos for pos, (tt, _) in enumerate(inp) if pos != pos_w and (tt is None or n not in tt)]
    if len(channel) != 1:
        return f"block {name!r} is a 1-d convolution in a layout tvm_ttile does not know"
    t, used = inp[channel[0]]
    form, groups, c = _input_channel(t, used, k, rest, extent, group, channel[0])
    if form is None or (form == "grouped" and not groups):
        return f"block {name!r} is a 1-d convolution whose input channel tvm_ttile does not know ({t or used})"
    kind = {"depthwise": "depthwise_conv1d", "grouped": "grouped_conv1d", "plain": "conv1d"}[form]
    if c is not None:
        dims["c"] = c
    op = KINDS[kind]
    names = {v: d for d, v in dims.items()}
    got_out = tuple(names.get(v) for v in out)
    got_in = tuple("w" if pos == pos_w else ("k" if op == "depthwise" else "c") if pos == channel[0]
                   else names.get(next(iter(tt))) if tt and len(tt) == 1 else None for pos, (tt, _) in enumerate(inp))
    # WIO weights of a depthwise one hold a unit input channel, left out of the microkernels' layout (canonicalize)
    got_w = tuple(names.get(v) or ("1" if op == "depthwise" and (v is None or extent[v] == 1) else None) for v in wv)
    want_in, want_w, want_out = ONE_D_LAYOUTS[op]
    transposed = ()  # a depthwise one's weights in any order of s and k: copied in the microkernels' (canonicalize)
    if op == "depthwise" and sorted(d for d in got_w if d != "1") == sorted(want_w) and got_w != want_w:
        transposed = ("weights",)
    for role, have, want, layout in (("output", got_out, want_out, "NWC"), ("input", got_in, want_in, "NWC"),
                                     ("weights", got_w, want_w, "WIO")):
        if have != want and not (role == "weights" and transposed):
            return (f"block {name!r} is a 1-d convolution whose {role} is not {layout}: tvm_ttile tunes NWC / WIO; "
                    "convert the layout first, e.g. relax.transform.ConvertLayout({'relax.nn.conv1d': ['NWC', 'WIO']}) "
                    "as tvm-ttile tune-model does")
    order = CANONICAL[op]
    extents = tuple((d, 1 if d in CONV1D_UNIT else extent[dims[d]] // (groups if d == "k" else 1)) for d in order)
    return Contraction(kind, name, tuple((d, dims[d]) for d in order if d in dims), extents, (), stride, dilation,
                       transposed, xi == 1, (("input", got_in), ("weights", got_w)), groups)


def recognize(func) -> Contraction:
    """The one contraction of `func` (a PrimFunc, an IRModule with "main", or a Schedule); TTileError with one
    line naming why when there is none, more than one, or one tvm_ttile cannot tune."""
    found, why = recognize_all(func)
    if not found:
        raise TTileError("no contraction (out = out + x * y over reduction loops) tvm_ttile can read in the "
                         "function" + (f": {why[0]}" if why else ": it has no reduction block"))
    if len(found) > 1:
        raise TTileError(f"the function holds {len(found)} contractions ({', '.join(c.block for c in found)}); "
                         "tvm_ttile tunes functions with one")
    refusal = found[0].refusal()
    if refusal:
        raise TTileError(refusal)
    return found[0]


def as_schedule(func):
    """A Schedule of `func` (a PrimFunc, an IRModule with "main", or a Schedule, returned as it is)."""
    if isinstance(func, tvm.s_tir.Schedule):
        return func
    return tvm.s_tir.Schedule(func["main"] if isinstance(func, tvm.IRModule) else func)


def recognize_all(func) -> tuple:
    """(the contractions of the function, why each other reduction block is none)."""
    sch = as_schedule(func)
    found, why = [], []
    for rv in blocks(sch):
        stmt = sch.get(rv)
        if not any(int(iv.iter_type) == tvm.tirx.IterVar.CommReduce for iv in stmt.iter_vars):
            continue
        result = recognize_block(stmt)
        (found if isinstance(result, Contraction) else why).append(result)
    return found, why


def _permutation(perm, ndim=None):
    """The IndexMap (x0, x1, ...) -> (x[perm[0]], x[perm[1]], ...); of `ndim` inputs when it drops unit ones."""
    return IndexMap.from_func(lambda *x: tuple(x[p] for p in perm), ndim=ndim or len(perm))


def canonicalize(sch, contraction: Contraction):
    """Give the contraction's block the form lowering works on, with schedule steps only (MetaSchedule's traces
    replay them): its iterators in Contraction.order() (the loops follow), and each operand read in another
    layout than the microkernels' through a copy in theirs (for constant weights lowering makes that copy
    build-time work, pack_weights). Returns the block."""
    block = sch.get_sblock(contraction.block)
    order = contraction.order()
    n_iters = len(sch.get(block).iter_vars)  # more than `order` holds: unit iterators the order drops
    unit = tvm.tirx.IntImm("int32", 0)  # a 1-d convolution's h and r (None in `order`): 0 in no index
    if contraction.groups > 1:  # k -> (group, k within the group): the group becomes the outermost iterator
        kg, ki = dict(contraction.extents)["k"], dict(contraction.dims)["k"]
        # int32 like the function's own iterators: a mix gives casts in the loops' bindings, and a batch loop
        # fused with a Par loop (lowering) could then no longer be tensorized under.
        sch.transform_block_layout(block, IndexMap.from_func(
            lambda *v: (v[ki] // kg, *(unit if i is None else v[i] % kg if i == ki else v[i] for i in order)),
            ndim=n_iters, index_dtype="int32"))
    elif order != list(range(n_iters)):
        sch.transform_block_layout(block, IndexMap.from_func(lambda *v: tuple(unit if i is None else v[i] for i in order),
                                                             ndim=n_iters, index_dtype="int32"))
    batch = tuple(f"b{n}" for n in range(len(contraction.batch)))
    stmt = sch.get(block)
    x, y = product_of(stmt.body.value)[1:]
    inp, wgt = (y, x) if contraction.weights_first else (x, y)
    layouts = dict(contraction.layouts)
    for role in contraction.transposed:
        load = inp if role == "input" else wgt
        want = tuple(b for b in batch if b in layouts[role]) + contraction.layouts_read[0 if role == "input" else 1]
        perm = [layouts[role].index(d) for d in want]
        index = next(i for i, region in enumerate(stmt.reads) if region.source.same_as(load.source))
        sch.cache_read(block, index, "global")
        sch.transform_layout(block, ("read", index), _permutation(perm, len(layouts[role])))
    return block
