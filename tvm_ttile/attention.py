"""Attention's Q K^T, softmax and P V as one function: each block of query rows computes its scores, their softmax
and its rows of the output while the scores are in L1.

Computed as three tasks, the scores S = Q K^T and the probabilities P (ViT-B/16: 12 x 197 x 197 floats, 1.9 MB per
layer, more than a core's L2) are written and read back twice, and P is normalized element by element. Here, per
head, K is copied once as K^T with its columns padded to whole vectors (the padding repeats the last key, and a
mask's padded columns its last column, so the padded scores are real ones: the row max needs no mask), and per
block of `rows` query rows: S on register blocks (rows x one vector, the reduction over D outside), scaled and
masked, the row max and sum as one vector per row, then across its lanes, exp on whole vectors (fast_exp, as the
network's softmax), and the unnormalized exponentials times V on register blocks (rows x `outputs` vectors, the
reduction over the keys outside). The sum, less the padded columns' copies of the last exponential, divides the
block's D outputs per row once (not N probabilities). Query rows are padded to a multiple of ROW_ALIGN (the last
real row repeated), so every variant's blocks are whole.

`schedules` gives the few finished schedules (the variants: rows per block, output vectors per register block);
tune_network measures each once (like Winograd's) and keeps the fastest.
"""
from __future__ import annotations

import dataclasses
import math

#: Block annotation (on the output block) naming the attention's shapes: AttentionShape.key.
MARK = "tvm_ttile.attention"
#: Query rows are padded to a multiple of this, which every variant's rows divide.
ROW_ALIGN = 8


@dataclasses.dataclass(frozen=True)
class AttentionShape:
    """softmax(scale x Q K^T + mask) V for Q [*lead, M, D], K [*lead, N, D] (or K^T [*lead, D, N]), V [*lead, N, DV]
    and a mask broadcast to the scores [*lead, M, N], or none."""
    lead: tuple
    M: int
    N: int
    D: int
    DV: int
    scale: float
    keys_transposed: bool  # the function's K operand is K^T [*lead, D, N]
    mask: tuple | None = None  # the mask's shape

    @property
    def key(self) -> str:
        lead = "x".join(str(x) for x in self.lead) or "1"
        mask = "-" if self.mask is None else "x".join(str(x) for x in self.mask)
        return (f"attention lead{lead} M{self.M} N{self.N} D{self.D} DV{self.DV} scale{self.scale!r} "
                f"kt{int(self.keys_transposed)} mask{mask}")

    @classmethod
    def from_key(cls, key: str) -> "AttentionShape":
        prefixes = ("lead", "mask", "scale", "DV", "kt", "M", "N", "D")  # (each before any prefix of it)
        fields = {p: f[len(p):] for f in key.split()[1:] for p in [next(p for p in prefixes if f.startswith(p))]}
        dims = lambda text: tuple(int(x) for x in text.split("x"))  # noqa: E731
        mask = None if fields["mask"] == "-" else dims(fields["mask"])
        return cls(dims(fields["lead"]), int(fields["M"]), int(fields["N"]), int(fields["D"]), int(fields["DV"]),
                   float(fields["scale"]), bool(int(fields["kt"])), mask)

    @property
    def heads(self) -> int:
        return math.prod(self.lead)

    @property
    def flops(self) -> float:
        """The two products' work (2 M N D + 2 M N DV per head); the softmax's is left out, as a matmul's epilogue's."""
        return 2.0 * self.heads * self.M * self.N * (self.D + self.DV)

    @property
    def text(self) -> str:
        return f"attention m{self.M},n{self.N},d{self.D}" + (f",dv{self.DV}" if self.DV != self.D else "") + \
            f" x{self.heads}"


@dataclasses.dataclass(frozen=True)
class Variant:
    rows: int  # query rows per block (divides ROW_ALIGN)
    outputs: int  # output vectors per register block of the P V product

    @property
    def name(self) -> str:
        return f"attention_{self.rows}rows_{self.outputs}vectors"


#: The variants measured (those whose outputs divide the values' vectors): register blocks of rows x outputs
#: accumulators, at most 24 of the 32 vector registers.
VARIANTS = (Variant(4, 4), Variant(4, 2), Variant(8, 2), Variant(2, 4), Variant(8, 1), Variant(4, 3), Variant(8, 3))


def fitting_variants(values: int, lanes: int) -> list:
    """The VARIANTS whose output vectors divide the values' (`values` elements a row, whole vectors of `lanes`)."""
    return [x for x in VARIANTS if ROW_ALIGN % x.rows == 0 and (values // lanes) % x.outputs == 0]


def fits(keys: int, values: int, lanes: int) -> bool:
    """Whether the schedules apply: more keys than one vector (a row's max and sum then loop over vectors) and
    values of whole vectors."""
    return keys > lanes and values % lanes == 0


def fused_attention(q, k, v, mask=None, *, keys_transposed: bool, scale: float, lanes: int):
    """TE: softmax(scale x Q K^T + mask) V (module doc), k being K^T when `keys_transposed`, `mask` (None: no mask)
    broadcast to the scores; the output block carries MARK."""
    import tvm
    from tvm import te, topi

    *lead, m, d = (int(x) for x in q.shape)
    n, dv = int(v.shape[-2]), int(v.shape[-1])
    mask_shape = None if mask is None else tuple(int(x) for x in mask.shape)
    shape = AttentionShape(tuple(lead), m, n, d, dv, float(scale), keys_transposed, mask_shape)
    padded, rows = -(-n // lanes) * lanes, -(-m // ROW_ALIGN) * ROW_ALIGN
    key_at = (lambda i, r, j: k[(*i, r, te.min(j, n - 1))]) if keys_transposed else \
        (lambda i, r, j: k[(*i, te.min(j, n - 1), r)])
    kt = te.compute((*lead, d, padded), lambda *i: key_at(i[:-2], i[-2], i[-1]), name="Kt")
    r = te.reduce_axis((0, d), name="r")
    s = te.compute((*lead, rows, padded), lambda *i: te.sum(
        q[(*i[:-2], te.min(i[-2], m - 1), r)] * kt[(*i[:-2], r, i[-1])], axis=r), name="S")
    c = tvm.tirx.const(scale, "float32")

    if mask is not None:  # copied once with its columns (and rows, if it has them) padded as the scores'
        padded_shape = (*mask_shape[:-2], *([rows if mask_shape[-2] > 1 else 1] if len(mask_shape) > 1 else []),
                        padded)
        mask_pad = te.compute(padded_shape, lambda *i: mask[(*i[:-2], *([te.min(i[-2], m - 1)] if len(i) > 1 else []),
                                                             te.min(i[-1], n - 1))], name="Mask_pad")

    def mask_at(i):  # the padded mask's element for scores index i
        at = list(i[len(i) - len(mask_shape):])
        return mask_pad[tuple(0 if e == 1 else x for x, e in zip(at, padded_shape))]

    logits = te.compute(s.shape, lambda *i: s[i] * c if mask is None else s[i] * c + mask_at(i), name="L")
    j = te.reduce_axis((0, padded // lanes), name="j")
    mx_lanes = te.compute((*lead, rows, lanes), lambda *i: te.max(logits[(*i[:-1], j * lanes + i[-1])], axis=j),
                          name="Mx_lanes")
    jl = te.reduce_axis((0, lanes), name="jl")
    mx = te.compute((*lead, rows), lambda *i: te.max(mx_lanes[(*i, jl)], axis=jl), name="Mx")
    delta = te.compute(s.shape, lambda *i: logits[i] - mx[i[:-1]], name="delta")
    ex = topi.fast_exp(delta)
    e = te.compute(s.shape, lambda *i: ex[i], name="E")
    jj = te.reduce_axis((0, padded // lanes), name="jj")
    sm_lanes = te.compute((*lead, rows, lanes), lambda *i: te.sum(e[(*i[:-1], jj * lanes + i[-1])], axis=jj),
                          name="Sum_lanes")
    sl = te.reduce_axis((0, lanes), name="sl")
    sm = te.compute((*lead, rows), lambda *i: te.sum(sm_lanes[(*i, sl)], axis=sl), name="Sum")
    t = te.reduce_axis((0, n), name="t")
    oa = te.compute((*lead, rows, dv), lambda *i: te.sum(e[(*i[:-1], t)] * v[(*i[:-2], t, i[-1])], axis=t),
                    name="Oa")
    one = tvm.tirx.const(1, "float32")
    return te.compute((*lead, m, dv), lambda *i: oa[i] * (one / (sm[i[:-1]] - (padded - n) * e[(*i[:-1], n - 1)])),
                      name="O", attrs={MARK: shape.key})


def shape_of(func) -> AttentionShape | None:
    """The AttentionShape of a fused_attention function, else None."""
    from .recognize import block_annotation

    key = block_annotation(func, "O", MARK)
    return None if key is None else AttentionShape.from_key(key)


def schedule(mod, variant: Variant, lanes: int, threads: int = 1):
    """The fused schedule of a fused_attention function (module doc), its root annotated with the variant's name."""
    from tvm import s_tir

    from .memory_bound import MARK as FINISHED

    sch = s_tir.Schedule(mod)
    for name in ("L", "delta", "T_fast_exp"):
        sch.compute_inline(sch.get_sblock(name))
    o = sch.get_sblock("O")
    *lead, oi, oe = sch.get_loops(o)
    heads = sch.fuse(*lead) if len(lead) > 1 else lead[0]
    block, o_rows = sch.split(oi, [None, variant.rows])
    for name in ("Oa", "Sum", "Sum_lanes", "E", "Mx", "Mx_lanes", "S"):  # consumers first
        sch.compute_at(sch.get_sblock(name), block)
    sch.compute_at(sch.get_sblock("Kt"), heads)
    if threads > 1:  # the heads across the threads (before any reduction is split: parallel wants it whole)
        sch.parallel(heads)
    sch.vectorize(sch.split(oe, [None, lanes])[1])
    # S: register blocks of rows x one vector, the reduction over D outside them
    s = sch.get_sblock("S")
    *_, si, sj, sr = sch.get_loops(s)
    sjo, sjl = sch.split(sj, [None, lanes])
    sch.reorder(sjo, sr, si, sjl)
    sch.reverse_compute_at(sch.cache_write(s, 0, "local"), sjo)
    sch.unroll(si), sch.vectorize(sjl)  # (before the init is split off: vectorize wants the whole reduction)
    sch.vectorize(sch.get_loops(sch.decompose_reduction(s, sr))[-1])
    # the row max and sum: one vector per row, the block's rows side by side
    for name in ("Mx_lanes", "Sum_lanes"):
        b = sch.get_sblock(name)
        *_, bi, bl, bj = sch.get_loops(b)
        sch.reorder(bj, bi, bl)
        sch.unroll(bi), sch.vectorize(bl)
        sch.vectorize(sch.get_loops(sch.decompose_reduction(b, bj))[-1])
    sch.vectorize(sch.split(sch.get_loops(sch.get_sblock("E"))[-1], [None, lanes])[1])
    # P V: register blocks of rows x `outputs` vectors, the reduction over the keys outside them
    oa = sch.get_sblock("Oa")
    *_, ai, ae, at = sch.get_loops(oa)
    aeb, aeo, ael = sch.split(ae, [None, variant.outputs, lanes])
    sch.reorder(aeb, at, ai, aeo, ael)
    sch.cache_write(oa, 0, "local")
    sch.unroll(ai), sch.unroll(aeo), sch.vectorize(ael)
    sch.vectorize(sch.get_loops(sch.decompose_reduction(oa, at))[-1])
    sch.vectorize(sch.split(sch.get_loops(sch.get_sblock("Oa_local"))[-1], [None, lanes])[1])
    sch.annotate(sch.get_sblock("root"), FINISHED, variant.name)
    return sch


def schedules(mod, lanes: int, threads: int = 1, errors: list | None = None) -> list:
    """[(variant name, Schedule)] of every fitting variant of the function that lowers; why another did not goes to
    `errors` (one line each)."""
    shape = shape_of(mod["main"])
    out = []
    if shape is None or not fits(shape.N, shape.DV, lanes):
        return out
    for variant in fitting_variants(shape.DV, lanes):
        try:
            out.append((variant.name, schedule(mod, variant, lanes, threads)))
        except Exception as e:  # noqa: BLE001 - a variant this function's form does not admit: the others remain
            if errors is not None:
                errors.append(f"{variant.name}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:300]}")
    return out
