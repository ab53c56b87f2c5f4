"""Winograd convolution F(m x m, 3 x 3) for a network's 3x3, stride-1 conv2d layers (NHWC, HWIO weights).

A 3x3 layer computes m x m outputs of a tile from an (m+2) x (m+2) input tile with (m+2)^2 multiplications per
channel pair instead of 9 m^2 (2.25x fewer for m = 2, 4x for m = 4): the input tile is transformed (V = B^T d B),
multiplied channel by channel with the transformed weights (M = V U, one GEMM per tile position: (m+2)^2 GEMMs
over the tiles), and transformed back (Y = A^T M A). The weights are constants: U = G g G^T is computed once, in
numpy, when the network is rewritten, so it costs nothing per inference (U is (m+2)^2 / 9 times the weights'
size: 4x for m = 4, which is why the choice is measured, layer by layer, against the direct convolution).

The function is written so that each stage stays in registers or L1/L2: per block of tile rows, the input
transforms of its tiles (V, separable and with only the transform's nonzero coefficients), the GEMMs of its tiles
(a register tile of `rows` tiles x `vecs` vectors of output channels, accumulated over the input channels), then
the inverse transforms and the epilogue that Relax fused after the convolution (bias, residual, ReLU or leaky
ReLU). The GEMMs read U packed per register tile's output channels, a copy folded on the constants at build time.
`schedules` gives the few finished schedules of such a fused function (the knobs: tile rows per block, register
tile); tune_network measures each once (like memory_bound's) and keeps Winograd for a layer only where its best
beats the direct convolution's best, both timed alike.
"""
from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np

from .workdir import WorkDir

#: Block annotation (on the GEMM block) naming a Winograd function's convolution: WinogradConv.key.
MARK = "tvm_ttile.winograd"
#: Output tile sizes tried per layer (m = 6 loses accuracy in fp32 and grows U 7x).
TILE_SIZES = (2, 4)
#: Whether tune_network / tune-model try Winograd when not told ("on" / "off"); the test suite sets it "off"
#: for the tests that are not about Winograd (each eligible layer adds its few schedules per tile size).
DEFAULT = os.environ.get("TVM_TTILE_WINOGRAD", "on")


@functools.lru_cache(maxsize=None)
def transform_matrices(m: int, r: int = 3) -> tuple:
    """(A, B, G) of F(m, r) as float64 numpy arrays (TVM's Cook-Toom construction, the points TOPI uses):
    Y = A^T [(G g G^T) * (B^T d B)] A."""
    from tvm.topi.nn.winograd_util import _cook_toom_convolution, _interpolation_points

    return tuple(np.asarray(x, dtype=np.float64) for x in _cook_toom_convolution(_interpolation_points(m + r - 2), m, r))


@dataclasses.dataclass(frozen=True)
class WinogradConv:
    """A 3x3 stride-1 conv2d, NHWC input [N, H, W, C], HWIO weights [3, 3, C, K], computed with F(m, 3)."""
    N: int
    H: int
    W: int
    C: int
    K: int
    pads: tuple  # (top, left, bottom, right)
    m: int

    @property
    def alpha(self) -> int:
        return self.m + 2

    @property
    def out_hw(self) -> tuple:
        t, l, b, r = self.pads
        return self.H + t + b - 2, self.W + l + r - 2

    @property
    def tiles(self) -> tuple:
        """(tile rows, tile columns) covering the output."""
        oh, ow = self.out_hw
        return -(-oh // self.m), -(-ow // self.m)

    @property
    def layer(self) -> str:
        """Stable text form of the convolution, whatever its m: what the choice of Winograd is keyed by (the
        output's size stands for the padding: the direct convolution's function shows only that)."""
        return _layer_text(self.N, self.H, self.W, self.C, self.K, *self.out_hw)

    @property
    def key(self) -> str:
        """Stable text form with the padding and m: what the GEMM block is annotated with."""
        return f"{self.layer} pads{','.join(map(str, self.pads))} m{self.m}"

    def transform_weights(self, weights) -> np.ndarray:
        """U[alpha, alpha, C, K] = G g G^T for HWIO weights g[3, 3, C, K] (float64 inside, float32 out)."""
        _, _, G = transform_matrices(self.m)
        return np.einsum("ea,abck,nb->enck", G, np.asarray(weights, dtype=np.float64), G).astype(np.float32)

    def prim_func(self):
        """The unscheduled PrimFunc (data, U, out); blocks winograd_* for `schedules`; op_pattern 4
        (kOutEWiseFusable) so that FuseOps fuses the layer's epilogue into it."""
        from tvm import te, tirx as tir

        N, H, W, C, K, m, a = self.N, self.H, self.W, self.C, self.K, self.m, self.alpha
        top, left, _, _ = self.pads
        nH, nW = self.tiles
        oh, ow = self.out_hw
        A, B, _ = transform_matrices(m)
        zero = tir.const(0.0, "float32")
        # int64 extents, as Relax's legalized functions have them (FuseTIR maps buffers of the same type only)
        data = te.placeholder(_i64(N, H, W, C), name="data")
        U = te.placeholder(_i64(a, a, C, K), name="U")
        d = te.compute(_i64(N, nH, nW, a, a, C), lambda n, th, tw, i, j, c: tir.if_then_else(
            tir.all(th * m + i >= top, th * m + i < H + top, tw * m + j >= left, tw * m + j < W + left),
            data[n, th * m + i - top, tw * m + j - left, c], zero), name="winograd_d")
        T1 = te.compute(_i64(N, nH, nW, a, a, C), lambda n, th, tw, e, j, c: _sparse_sum(
            B, e, lambda i: d[n, th, tw, i, j, c]), name="winograd_T1")
        V = te.compute(_i64(N, nH, a, a, nW, C), lambda n, th, e, nu, tw, c: _sparse_sum(
            B, nu, lambda j: T1[n, th, tw, e, j, c]), name="winograd_V")
        ci = te.reduce_axis((tir.IntImm("int64", 0), tir.IntImm("int64", C)), "ci")
        M = te.compute(_i64(N, nH, a, a, nW, K), lambda n, th, e, nu, tw, k: te.sum(
            V[n, th, e, nu, tw, ci] * U[e, nu, ci, k], axis=ci), name="winograd_M", attrs={MARK: self.key})
        T2 = te.compute(_i64(N, nH, nW, m, a, K), lambda n, th, tw, i, nu, k: _sparse_sum(
            A, i, lambda e: M[n, th, e, nu, tw, k]), name="winograd_T2")
        Y = te.compute(_i64(N, nH, nW, m, m, K), lambda n, th, tw, i, j, k: _sparse_sum(
            A, j, lambda nu: T2[n, th, tw, i, nu, k]), name="winograd_Y")
        out = te.compute(_i64(N, oh, ow, K), lambda n, h, w, k: Y[n, h // m, w // m, h % m, w % m, k],
                         name="winograd_out")
        return te.create_prim_func([data, U, out]).with_attr("op_pattern", 4)


def _i64(*dims) -> tuple:
    from tvm import tirx as tir

    return tuple(tir.IntImm("int64", int(d)) for d in dims)


def _sparse_sum(mat, out_index, term):
    """sum_a mat[a, o] * term(a) for o = out_index, as a Select over o's values of sums that hold only the
    nonzero coefficients (the Selects fold away once the loop over o is unrolled)."""
    from tvm import tirx as tir

    expr = None
    for o in reversed(range(mat.shape[1])):
        total = None
        for i in range(mat.shape[0]):
            c = float(mat[i, o])
            if c == 0.0:
                continue
            t = term(i) if c == 1.0 else -term(i) if c == -1.0 else term(i) * tir.const(c, "float32")
            total = t if total is None else total + t
        expr = total if expr is None else tir.Select(out_index == o, total, expr)
    return expr


@dataclasses.dataclass(frozen=True)
class Knobs:
    """One finished schedule: `tile_rows` tile rows per block; a register tile of `rows` tiles x `vecs` vectors."""
    tile_rows: int
    rows: int
    vecs: int

    @property
    def name(self) -> str:
        return f"winograd_tr{self.tile_rows}_r{self.rows}_v{self.vecs}"


def conv_of(func) -> str | None:
    """The WinogradConv.key of a (fused) function holding a Winograd convolution, else None."""
    from .recognize import block_annotation

    return block_annotation(func, "winograd_M", MARK)


def knob_choices(conv: WinogradConv, lanes: int, registers: int, threads: int = 1, limit: int = 12) -> list:
    """The schedules worth measuring for `conv`: tile rows per block dividing the tile rows (the block's V and M
    within 1 MiB, a Zen or Ice Lake core's L2), register tiles of rows x vecs accumulators (at least 2 rows, at
    most 4 vectors) that divide the block's tiles and the output channels' vectors and leave registers for a row
    of weights and a broadcast (28 of 32: 14 x 2, not 7 x 4, which spills: 0.60 against 0.33 ms on ResNet-18's
    56x56 layer). Preferred, where the sizes allow: at least 8 accumulators (an FMA's latency hidden) and a block
    for each of `threads` (the blocks are what the threads share). At most `limit`, the most accumulators first."""
    nH, nW = conv.tiles
    vectors = -(-conv.K // lanes)
    fits = []
    for tr in (d for d in range(1, nH + 1) if nH % d == 0):
        tiles = tr * nW
        if tr > 1 and 4 * tiles * conv.alpha ** 2 * (conv.C + conv.K) > 1024 * 1024:
            continue
        for vecs in (v for v in range(1, min(vectors, 4) + 1) if vectors % v == 0):
            # a register tile within one tile row or of whole tile rows (not straddling two)
            for rows in (r for r in range(2, tiles + 1) if tiles % r == 0 and (nW % r == 0 or r % nW == 0)):
                if rows * vecs + vecs + 1 <= registers:
                    fits.append(Knobs(tr, rows, vecs))
    for preferred in (lambda k: k.rows * k.vecs >= 8, lambda k: conv.N * nH // k.tile_rows >= threads):
        fits = [k for k in fits if preferred(k)] or fits
    fits.sort(key=lambda k: (-k.rows * k.vecs, k.tile_rows, -k.rows))
    return fits[:limit]


def schedule(mod, knobs: Knobs, lanes: int, threads: int = 1):
    """A finished schedule of a (fused) function holding one Winograd convolution, or raise."""
    from tvm import s_tir

    from .memory_bound import MARK as FINISHED

    sch = s_tir.Schedule(mod)
    conv = conv_from_key(conv_of(sch.mod["main"]))
    m = conv.m
    nH, nW = conv.tiles
    # The epilogue Relax fused after the convolution (bias, residual, ReLU or leaky ReLU, a slice): every block
    # from the convolution's output on is inlined into the last one, which then reads Y and writes the output.
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    names = [sch.get(b).name_hint for b in blocks]
    *between, last = blocks[names.index("winograd_out"):]
    for block in between:
        sch.compute_inline(block)
    packed = _pack_transformed_weights(sch, sch.get_sblock("winograd_M"), knobs.vecs * lanes)
    n, h, w, k = sch.get_loops(last)
    th, hi = sch.split(h, [nH, m])
    tw, wi = sch.split(w, [nW, m])
    ko, ki = sch.split(k, [None, lanes])
    tho, thi = sch.split(th, [None, knobs.tile_rows])
    sch.reorder(n, tho, thi, tw, ko, hi, wi, ki)
    outer = sch.fuse(n, tho)
    for name in ("winograd_Y", "winograd_T2"):  # per tile and output vector, in registers
        b = sch.get_sblock(name)
        sch.compute_at(b, ko)
        sch.set_scope(b, 0, "local")
    for name in ("winograd_M", "winograd_V"):  # per block of tile rows, in L1 / L2
        sch.compute_at(sch.get_sblock(name), outer)
    vb = sch.get_sblock("winograd_V")
    # (a block of one tile row has no loop over tile rows under `outer`: compute_at leaves loops of extent 1 out)
    *thv, ve, vnu, twv, c = sch.get_loops(vb)[-5 if knobs.tile_rows > 1 else -4:]
    co, cv = sch.split(c, [None, lanes])
    sch.reorder(*thv, twv, co, ve, vnu, cv)
    for name in ("winograd_T1", "winograd_d"):  # per tile and input vector, in registers
        b = sch.get_sblock(name)
        sch.compute_at(b, co)
        sch.set_scope(b, 0, "local")
    mb = sch.get_sblock("winograd_M")
    *thm, e, nu, twm, km, ci = sch.get_loops(mb)[-6 if knobs.tile_rows > 1 else -5:]
    sch.reorder(e, nu, *thm, twm)
    tiles = sch.fuse(*thm, twm) if thm else twm
    to, ti = sch.split(tiles, [None, knobs.rows])
    kb, kv, kl = sch.split(km, [None, knobs.vecs, lanes])
    sch.reorder(e, nu, to, kb, ci, ti, kv, kl)
    acc = sch.cache_write(mb, 0, "local")
    sch.reverse_compute_at(acc, kb)
    if threads > 1:
        sch.parallel(outer)
    for b in (sch.get_sblock(n) for n in ("winograd_Y", "winograd_T2", "winograd_T1", "winograd_d")):
        loops = sch.get_loops(b)
        for loop in loops[-3:-1]:
            sch.unroll(loop)
        sch.vectorize(loops[-1])
    # unrolled, the transforms' Selects over (e, nu) fold to their nonzero terms (V's left rolled: 0.362 against
    # 0.335 ms hot on ResNet-18's 56x56 layer); the GEMMs' (e, nu) unrolled or not measured level
    for loop in (ve, vnu, e, nu, hi, wi):
        sch.unroll(loop)
    sch.vectorize(cv)
    sch.vectorize(ki)
    sch.unroll(ti)
    sch.unroll(kv)
    sch.vectorize(kl)
    init = sch.decompose_reduction(mb, ci)
    init_loops = sch.get_loops(init)
    sch.unroll(init_loops[-3])
    sch.unroll(init_loops[-2])
    sch.vectorize(init_loops[-1])
    store = sch.get_loops(acc)
    _, lane = sch.split(store[-1], [None, lanes])
    sch.vectorize(lane)
    sch.annotate(sch.get_sblock("root"), FINISHED, knobs.name + ("_packed" if packed else ""))
    return sch


def _pack_transformed_weights(sch, gemm, size: int) -> bool:
    """U[e, nu, c, k] read as [e, nu, k / size, c, size] (size: the register tile's output channels), so that
    each (e, nu) GEMM streams its weights contiguously, block after block, instead of a `size`-wide column of
    rows K apart. Only where U is layout-free (a network's constant: the copy is done once at build time, as
    packing.pack_weights does for the direct kernels); returns whether it was."""
    from .packing import LAYOUT_REWRITE

    func = sch.mod["main"]
    params = list(func.params)
    free = [params[int(i)] for i in (func.attrs.get("layout_free_buffers") if func.attrs is not None else None) or ()]
    reads = sch.get(gemm).reads
    index = next((i for i, r in enumerate(reads) if any(r.source.same_as(p) for p in free)), None)
    if index is None:
        return False
    cache = sch.cache_read(gemm, index, "global")
    sch.annotate(cache, LAYOUT_REWRITE, True)
    sch.transform_layout(gemm, ("read", index), lambda e, nu, c, k: (e, nu, k // size, c, k % size))
    return True


def schedules(mod, lanes: int, registers: int, threads: int = 1, errors: list | None = None) -> list:
    """[(name, schedule)] of every knob_choices schedule of a Winograd function that lowers; why each other one
    did not goes to `errors` (one line each)."""
    conv = conv_from_key(conv_of(mod["main"]))
    from .memory_bound import variant_of

    out = []
    for knobs in knob_choices(conv, lanes, registers, threads):
        try:
            sch = schedule(mod, knobs, lanes, threads)
            out.append((variant_of(sch.mod["main"]), sch))
        except Exception as e:  # noqa: BLE001 - a knob set this function's form does not admit: the others remain
            if errors is not None:
                errors.append(f"{knobs.name}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}")
    return out


def conv_from_key(key: str | None) -> WinogradConv:
    """The WinogradConv a WinogradConv.key names (a Winograd task's shape)."""
    from .errors import TTileError

    if key is None:
        raise TTileError("not a Winograd function (no block annotated tvm_ttile.winograd)")
    fields = dict((f[0], f[1:]) if f[0] in "NHWCKm" else (f[:4], f[4:]) if f.startswith("pads") else (f[:3], f[3:])
                  for f in key.split()[1:])
    return WinogradConv(int(fields["N"]), int(fields["H"]), int(fields["W"]), int(fields["C"]), int(fields["K"]),
                        tuple(int(p) for p in fields["pads"].split(",")), int(fields["m"]))


def layer_of(func, problem) -> str | None:
    """The WinogradConv.layer of a direct conv2d function (a network task; `problem` its recognized Problem)
    when Winograd can compute it, else None."""
    if problem is None or problem.op != "conv2d" or problem.stride != 1 or problem.dilation != 1:
        return None
    if problem.batch != 1 or (problem.size.get("r"), problem.size.get("s")) != (3, 3):
        return None
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    shapes = [[int(d) for d in a.shape] for a in ArgInfo.from_prim_func(func)]
    weights = [s for s in shapes if len(s) == 4 and s[:2] == [3, 3]]
    if len(weights) != 1:
        return None
    C, K = weights[0][2:]
    data = next((s for s in shapes if len(s) == 4 and s[:2] != [3, 3] and s[3] == C), None)
    out = shapes[-1]
    if data is None or len(out) != 4 or out[3] != K:
        return None
    return _layer_text(*data[:3], C, K, *out[1:3])


def _layer_text(N, H, W, C, K, oh, ow) -> str:
    return f"conv3x3 N{N} H{H} W{W} C{C} K{K} out{oh}x{ow}"


def layers(mod) -> dict:
    """{WinogradConv.layer: calls} of the conv2d calls of a prepared Relax module Winograd can compute."""
    found = {}

    def count(conv):
        found[conv.layer] = found.get(conv.layer, 0) + 1

    rewrite(mod, count)
    return found


def rewrite(mod, choose):
    """`mod` with each eligible conv2d (NHWC data, HWIO constant float32 weights, 3x3, stride 1, dilation 1, one
    group, channels in whole vectors of 16) computed by a Winograd function where choose(WinogradConv with m=0)
    gives an m (None: keep the conv2d). The epilogue stays a separate call here; FuseOps fuses it in.
    Returns (module, number of calls rewritten)."""
    from tvm import relax

    from .relax.bindings import replace_calls

    def replace(call, add_func):
        conv = _eligible(call)
        m = choose(conv) if conv is not None else None
        if not m:
            return None
        conv = dataclasses.replace(conv, m=int(m))
        kernel = add_func(f"winograd{conv.m}_{conv.N}x{conv.H}x{conv.W}x{conv.C}x{conv.K}", conv.prim_func)
        U = relax.const(conv.transform_weights(call.args[1].value.numpy()))
        oh, ow = conv.out_hw
        return relax.call_tir(kernel, [call.args[0], U], relax.TensorType((conv.N, oh, ow, conv.K), "float32"))

    return replace_calls(mod, replace)


def _eligible(call):
    """The WinogradConv (m = 0) of a relax conv2d call Winograd can compute, else None."""
    import tvm
    from tvm import relax

    if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.nn.conv2d"):
        return None
    x, w = call.args
    a = call.attrs
    if not isinstance(w, tvm.ir.expr.Constant) or str(w.ty.dtype) != "float32":
        return None
    if (a.data_layout, a.kernel_layout, a.out_layout) != ("NHWC", "HWIO", "NHWC") or int(a.groups) != 1:
        return None
    if [int(v) for v in a.strides] != [1, 1] or [int(v) for v in a.dilation] != [1, 1]:
        return None
    xs, ws = x.ty.shape, [int(d) for d in w.ty.shape.values]
    if not isinstance(xs, relax.ShapeExpr) or not all(isinstance(d, tvm.tirx.IntImm) for d in xs.values):
        return None
    N, H, W, C = (int(d) for d in xs.values)
    if tuple(ws[:2]) != (3, 3) or str(x.ty.dtype) != "float32" or C % 16 or int(ws[3]) % 16:
        return None
    pads = [int(p) for p in a.padding]
    pads = pads * 2 if len(pads) == 2 else pads
    return WinogradConv(N, H, W, C, int(ws[3]), tuple(pads), 0)


CHOICES = WorkDir.WINOGRAD  # in a network's work dir: the per-layer choices


def choose(timed: list) -> dict:
    """Per layer, Winograd's m or 0 (the direct convolution): [(layer, m or 0 for direct, ms per inference of one
    task (best call x calls), verified)] -> {layer: {"m", "direct_ms", "winograd_ms"}}. A layer's form adds its
    tasks (one per epilogue); a form with a task unmeasured or unverified is not chosen. Winograd is taken only
    where its best form is faster than the direct one, both timed alike."""
    forms = {}
    for layer, m, ms, ok in timed:
        form = forms.setdefault(layer, {}).setdefault(m, [0.0, 0, True])
        form[0] += ms
        form[1] += 1
        form[2] = form[2] and ok and ms == ms
    out = {}
    for layer, by_m in forms.items():
        direct = by_m.get(0)
        if direct is None or not direct[2]:
            continue
        wino = {m: f[0] for m, f in by_m.items() if m and f[2] and f[1] == direct[1]}
        best = min(wino, key=wino.get) if wino else 0
        out[layer] = {"m": best if best and wino[best] < direct[0] else 0, "direct_ms": direct[0],
                      "winograd_ms": {str(m): v for m, v in sorted(wino.items())}}
    return out


def save_choices(work_dir: str, choices: dict) -> None:
    import json
    import os

    path = WorkDir(work_dir).winograd
    with open(path + ".tmp", "w") as f:
        json.dump(choices, f, indent=1)
    os.replace(path + ".tmp", path)  # never half written


def saved_choices(work_dir: str) -> dict:
    """work_dir's choices file as tune_network saved it (the forms' times too), {} when there is none."""
    import json

    path = WorkDir(work_dir).winograd
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def load_choices(work_dir: str) -> dict:
    """The choices tune_network saved in work_dir ({} when it saved none); a damaged file is reported and no
    layer takes Winograd (the direct convolutions are tuned too)."""
    import json
    import logging
    import os

    path = WorkDir(work_dir).winograd
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            saved = json.load(f)
        return {str(layer): int(c["m"]) for layer, c in saved.items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        logging.getLogger(__name__).warning("%s is damaged (%s): every layer built with its direct convolution; "
                                            "tune again to choose anew", path, type(e).__name__)
        return {}


def apply(mod, work_dir: str):
    """`mod` with the layers work_dir's choices give Winograd rewritten to it; (module, calls rewritten)."""
    choices = load_choices(work_dir)
    if not any(choices.values()):
        return mod, 0
    return rewrite(mod, lambda conv: choices.get(conv.layer) or None)
