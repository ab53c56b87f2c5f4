"""AutoMCL's analytic tiling-size space for matmul (section 3 of the paper): plain Python, no TVM.

- `factor_space`: TVM's factor strategy, every tiling whose sizes multiply to the dimension.
- `pfactor_space`: Algorithm 1 - the M and N tiles are factors of ceil(M / p_y) and ceil(N / p_x) over the
  ways p = p_y * p_x to spread p threads, K tiles are factors of K; plus the TVM limits the paper lists
  (M_t | M for LPMM, N_t | N for RPMM, both for DPMM).
- `cache_fit`: Table 2's T_m (cache lines a tile touches, ideal cache model) per compute; `keep` applies the
  filter T_m < Z_w / C_w, with the vectorized tile at least a vector (N_t >= min(N, V_w)).
A configuration is (M_o, M_t, N_o, N_t, K_t); single-level computes have M_o = N_o = 1.
"""
from __future__ import annotations

import dataclasses
from math import ceil

COMPUTES = {  # name: tiling levels of its schedule template (DNMM332 tiles M and N twice)
    "TMM": 1, "TTMM": 1, "DNMM": 2, "LPMM": 1, "RPMM": 1, "DPMM": 1,
}


def factors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def _pairs(n: int) -> list:
    """(outer, inner) with outer * inner dividing n: the two inner levels of a 2-level tiling."""
    return [(o, t) for t in factors(n) for o in factors(n // t)]


def factor_space(compute: str, M: int, N: int, K: int) -> list:
    if COMPUTES[compute] == 1:
        return [(1, m, 1, n, k) for m in factors(M) for n in factors(N) for k in factors(K)]
    return [(mo, mt, no, nt, k) for mo, mt in _pairs(M) for no, nt in _pairs(N) for k in factors(K)]


def pfactor_space(compute: str, M: int, N: int, K: int, threads: int = 1) -> list:
    out = set()
    for py in factors(threads):
        px = threads // py
        my, nx = ceil(M / py), ceil(N / px)
        if COMPUTES[compute] == 1:
            yx = [(1, m, 1, n) for m in factors(my) for n in factors(nx)]
        else:
            yx = [(mo, mt, no, nt) for mo, mt in _pairs(my) for no, nt in _pairs(nx)]
        out.update((*c, k) for c in yx for k in factors(K))
    needs_m = compute in ("LPMM", "DPMM")
    needs_n = compute in ("RPMM", "DPMM")
    return sorted(c for c in out if (not needs_m or M % c[1] == 0) and (not needs_n or N % c[3] == 0))


def cache_fit(compute: str, Mt: int, Kt: int, Nt: int, Cw: int) -> int:
    """Table 2: T_m(M_t, K_t, N_t) in cache lines of Cw words."""
    def lines(n):
        return ceil(n / Cw) + 1

    if compute == "TMM":
        return Mt * lines(Kt) + Nt * lines(Kt) + Mt * lines(Nt)
    if compute == "TTMM":
        return Kt * lines(Nt) + max(Nt * lines(Kt), Mt * lines(Kt) + Mt * lines(Nt))
    if compute == "DNMM":
        return Mt * lines(Nt * Kt) + max(Mt * lines(Nt), (Mt + Nt) * lines(Kt))
    if compute == "LPMM":
        return 1 + max(ceil(Mt / Cw) + Mt, ceil(Mt * Nt / Cw) + max(Mt * lines(Nt), Nt * lines(Kt) + lines(Kt * Mt)))
    if compute == "RPMM":
        return 1 + max(ceil(Nt / Cw) + Nt, ceil(Mt * Nt / Cw) + max(Mt * lines(Nt), Mt * lines(Kt) + lines(Kt * Nt)))
    if compute == "DPMM":
        return 1 + max(ceil(Mt / Cw) + Mt, ceil(Nt / Cw) + Nt,
                       ceil(Mt * Nt / Cw) + max(Mt * lines(Nt), ceil(Kt * Mt / Cw) + ceil(Kt * Nt / Cw) + 2))
    raise ValueError(f"unknown compute {compute!r}; choose from {', '.join(COMPUTES)}")


@dataclasses.dataclass(frozen=True)
class CacheModel:
    """The ideal cache the filter assumes: Z bytes, lines of C bytes, V-byte vectors, D-byte elements."""

    cache_bytes: int
    line_bytes: int = 64
    vector_bytes: int = 64
    dtype_bytes: int = 4

    @classmethod
    def of(cls, cpu, level: str = "l1d") -> CacheModel:
        return cls(getattr(cpu, f"{level}_bytes"), 64, cpu.lanes * 4)

    @property
    def lines(self) -> int:  # Z_w / C_w
        return self.cache_bytes // self.line_bytes

    @property
    def line_words(self) -> int:  # C_w
        return self.line_bytes // self.dtype_bytes

    @property
    def vector_words(self) -> int:  # V_w
        return self.vector_bytes // self.dtype_bytes


def keep(compute: str, config, N: int, cache: CacheModel) -> bool:
    _, mt, _, nt, kt = config
    return nt >= min(N, cache.vector_words) and cache_fit(compute, mt, kt, nt, cache.line_words) < cache.lines


def build_space(compute: str, M: int, N: int, K: int, cache: CacheModel, threads: int = 1) -> dict:
    """The space after each step, and the sizes: factor -> pfactor -> cache filter."""
    base = factor_space(compute, M, N, K)
    init = pfactor_space(compute, M, N, K, threads)
    kept = [c for c in init if keep(compute, c, N, cache)]
    return {"compute": compute, "factor": len(base), "pfactor": len(init), "filtered": len(kept), "configs": kept}
