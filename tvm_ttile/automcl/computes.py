"""AutoMCL's compute variants for dense matmul C[M,N] = D[M,K] x W[N,K]^T (Table 1), each with its schedule
template; a configuration (M_o, M_t, N_o, N_t, K_t) from automcl.space sets the tile sizes.

    TMM   C[y,x] = sum_k D[y,k] W[x,k]                       (plain; the k loop is the innermost access)
    TTMM  W'[k,x] = W[x,k] first, then C = D W'              (transposed weights: x contiguous)
    DNMM  CC[y,x,ki] = sum_ko D[y,ko Kt+ki] W[x,ko Kt+ki]; C = sum_ki CC   (TVM's dense; DNMM332 tiles twice)
    LPMM  PD[yo,k,yi] = D[yo Mt+yi,k] (packed left operand)
    RPMM  PW[xo,k,xi] = W[xo Nt+xi,k] (packed right operand; TVM's dense_pack; RPMMV vectorizes xi)
    DPMM  both packed
Templates tile y and x (and k) by the configuration, put the contiguous axis innermost and vectorize it,
and keep the packing stages (timed with the rest, as in the paper).
"""
from __future__ import annotations

from .space import COMPUTES


def compute(name: str, M: int, N: int, K: int, config):
    """(D, W, C) TE tensors of compute `name` for the configuration's tile sizes."""
    from tvm import te

    _, mt, _, nt, kt = config
    D = te.placeholder((M, K), "float32", name="D")
    W = te.placeholder((N, K), "float32", name="W")
    k = te.reduce_axis((0, K), name="k")
    if name == "TMM":
        C = te.compute((M, N), lambda y, x: te.sum(D[y, k] * W[x, k], axis=k), name="C")
    elif name == "TTMM":
        Wt = te.compute((K, N), lambda kk, x: W[x, kk], name="Wt")
        C = te.compute((M, N), lambda y, x: te.sum(D[y, k] * Wt[k, x], axis=k), name="C")
    elif name == "DNMM":
        ko = te.reduce_axis((0, K // kt), name="ko")
        CC = te.compute((M, N, kt), lambda y, x, ki: te.sum(D[y, ko * kt + ki] * W[x, ko * kt + ki], axis=ko),
                        name="CC")
        ki = te.reduce_axis((0, kt), name="ki")
        C = te.compute((M, N), lambda y, x: te.sum(CC[y, x, ki], axis=ki), name="C")
    elif name in ("LPMM", "RPMM", "DPMM"):
        left = name in ("LPMM", "DPMM")
        right = name in ("RPMM", "DPMM")
        PD = te.compute((M // mt, K, mt), lambda yo, kk, yi: D[yo * mt + yi, kk], name="PD") if left else None
        PW = te.compute((N // nt, K, nt), lambda xo, kk, xi: W[xo * nt + xi, kk], name="PW") if right else None
        a = (lambda y: PD[y // mt, k, y % mt]) if left else (lambda y: D[y, k])
        b = (lambda x: PW[x // nt, k, x % nt]) if right else (lambda x: W[x, k])
        C = te.compute((M, N), lambda y, x: te.sum(a(y) * b(x), axis=k), name="C")
    else:
        raise ValueError(f"unknown compute {name!r}; choose from {', '.join(COMPUTES)}")
    return D, W, C


def schedule(name: str, M: int, N: int, K: int, config):
    """The compute's PrimFunc scheduled by its template for `config`; returns an IRModule."""
    import tvm
    from tvm import te

    mo, mt, no, nt, kt = config
    if M % (mo * mt) or N % (no * nt) or K % kt:
        raise ValueError(f"configuration {config} does not tile {M}x{N}x{K}")
    sch = tvm.s_tir.Schedule(te.create_prim_func(list(compute(name, M, N, K, config))))
    for stage in ("Wt", "PD", "PW"):  # packing stages: contiguous writes, vectorized when they can be
        try:
            block = sch.get_sblock(stage)
        except Exception:  # noqa: BLE001 - the stage exists only in some computes
            continue
        inner = sch.get_loops(block)[-1]
        ext = int(sch.get(inner).extent)
        lanes = next((v for v in (16, 8, 4) if ext % v == 0), None)
        if lanes:  # at most one vector wide: a whole N-wide vector (TTMM's transpose) takes LLVM minutes
            if ext > lanes:
                inner = sch.split(inner, [None, lanes])[1]
            sch.vectorize(inner)
    block = sch.get_sblock("CC" if name == "DNMM" else "C")
    loops = sch.get_loops(block)
    y, x = loops[0], loops[1]
    yo, ym, yi = sch.split(y, [M // (mo * mt), mo, mt])
    xo, xm, xi = sch.split(x, [N // (no * nt), no, nt])
    if name == "DNMM":  # CC[y, x, ki] with reduction ko: the ki axis is already the K tile
        ki, ko = loops[2], loops[3]
        sch.reorder(yo, xo, ko, ym, xm, yi, xi, ki)  # ki: contiguous in D, W and CC -> vectorized
        sch.vectorize(ki)
        sch.decompose_reduction(block, ko)
        final = sch.get_sblock("C")
        sch.reverse_compute_at(final, xo)
        return sch.mod
    (k,) = loops[2:]
    ko, ki = sch.split(k, [K // kt, kt])
    if name in ("TMM", "LPMM"):  # W[x, k]: k contiguous for both operands -> k innermost
        sch.reorder(yo, xo, ko, ym, xm, yi, xi, ki)
        sch.unroll(xi)
    else:  # TTMM / RPMM / DPMM: x contiguous in the weights -> x innermost, vectorized (RPMMV)
        sch.reorder(yo, xo, ko, ym, xm, ki, yi, xi)
        sch.vectorize(xi)  # before decompose_reduction: afterwards the update block has no init to vectorize with
        sch.decompose_reduction(block, ko)
    return sch.mod
