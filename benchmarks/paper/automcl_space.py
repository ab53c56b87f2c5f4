"""How much AutoMCL's space construction shrinks the tiling space (issue #6, section 3 of the paper) on the
matmul shapes of shared/benchmarks, with this machine's L1d as the ideal cache. Counting only: no timing.

    python benchmarks/paper/automcl_space.py      -> benchmarks/results/automcl_space.md
"""
import os
import platform

from tvm_ttile.automcl.space import COMPUTES, CacheModel, build_space
from tvm_ttile.cpu import detect_host
from tvm_ttile.operators import matmul_shapes

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "automcl_space.md")


def main():
    cpu = detect_host()
    cache = CacheModel.of(cpu)
    threads = (1, os.cpu_count()) if (os.cpu_count() or 1) > 1 else (1,)
    lines = ["# AutoMCL space construction: factor -> pfactor (Algorithm 1) -> ideal-cache filter", "",
             "Command: `python benchmarks/paper/automcl_space.py`.", "",
             f"Machine: {cpu.name} ({platform.machine()}, {cpu.isa.name}); ideal cache = L1d {cache.cache_bytes // 1024} "
             f"KiB = {cache.lines} lines of {cache.line_bytes} B; vector {cache.vector_words} fp32. Filter: keep a "
             "configuration when T_m (Table 2) < Z_w / C_w and N_t >= min(N, V_w). Counts of configurations "
             "(M_o, M_t, N_o, N_t, K_t); DNMM is the two-level DNMM332 template.", ""]
    for p in threads:
        lines += [f"## {p} thread(s)", "", "| shape | " + " | ".join(f"{c} factor / pfactor / kept" for c in COMPUTES)
                  + " |", "|---|" + "---:|" * len(COMPUTES)]
        totals = {c: [0, 0, 0] for c in COMPUTES}
        for name, op in matmul_shapes().items():
            cells = []
            for c in COMPUTES:
                s = build_space(c, op.M, op.N, op.K, cache, p)
                cells.append(f"{s['factor']} / {s['pfactor']} / {s['filtered']}")
                for i, key in enumerate(("factor", "pfactor", "filtered")):
                    totals[c][i] += s[key]
            lines.append(f"| {name} ({op.M}x{op.N}x{op.K}) | " + " | ".join(cells) + " |")
        lines.append("| **kept / factor, all shapes** | " + " | ".join(
            f"{100 * t[2] / t[0]:.1f}% (pfactor {100 * t[1] / t[0]:.1f}%)" for t in totals.values()) + " |")
        lines.append("")
    with open(OUT, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
