"""Build the microkernel catalogs and record them in benchmarks/results/.

    python benchmarks/paper/microkernel_catalog.py [--isa avx2 avx512] [--rebuild] [--tag zen3]

For each ISA the host can run: the measured peak, every candidate's GFLOPS and % of peak (1 thread),
the kept microkernels, their classes, two-microkernel coverage, and the Fig. 6-style heat maps.
"""
import argparse
import json
import os
import platform
import shutil
import time

from tvm_ttile import cpu as cpu_mod
from tvm_ttile.microkernels.catalog import build_catalog, catalog_path
from tvm_ttile.microkernels.heatmap import write_heatmap
from tvm_ttile.evaluation import command_line

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


def table(cat, limit=40):
    data = cat.to_json()
    lines = ["| microkernel | GFLOPS | % of peak |", "|---|---:|---:|"]
    for e in data["kept"][:limit]:
        lines.append(f"| `{e['text'].split(' ', 1)[1]}` | {e['gflops']:.1f} | {e['percent_of_peak']:.1f} |")
    return data, "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", nargs="*", default=None, help="ISAs to measure (default: every one the host runs)")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--tag", default="", help="suffix of the result files, e.g. the machine (microkernels_avx2_zen3.md)")
    args = ap.parse_args()
    isas = args.isa or [i for i in ("avx2", "avx512", "neon") if cpu_mod._runs_here(i)]
    os.makedirs(RESULTS, exist_ok=True)
    command = command_line()
    suffix = f"_{args.tag}" if args.tag else ""
    for isa in isas:
        cpu = cpu_mod.detect_host(isa)
        peak = cpu_mod.peak(cpu, rebuild=args.rebuild)
        md = [f"# Microkernel catalog, {isa}", "",
              f"Command: `{command.strip()}` ({time.strftime('%Y-%m-%d')})", "",
              f"Machine: {cpu.name}, {platform.machine()}, {os.cpu_count()} cores; "
              f"L1d {cpu.l1d_bytes // 1024} KiB, L2 {cpu.l2_bytes // 1024} KiB, L3 {cpu.l3_bytes >> 20} MiB; "
              f"TVM target `{json.dumps(cpu.target_dict())}`. Single thread.", "",
              f"Measured peak (FMA chains built and timed through TVM): **{peak['peak_gflops']:.1f} GFLOPS** "
              f"(best of 9 repeats; median {peak['median_gflops']:.1f}).", ""]
        for op in ("conv2d", "matmul"):
            cat = build_catalog(cpu, op, rebuild=args.rebuild)
            data, tab = table(cat)
            best = cat.best()
            base = f"microkernels_{op}_{isa}{suffix}"
            write_heatmap(cat, os.path.join(RESULTS, base + ".png"))
            shutil.copy(catalog_path(cpu, op), os.path.join(RESULTS, base + ".json"))
            md += [f"## {op}", "",
                   f"{data['candidates']} candidates measured in {data['seconds']:.0f} s (reduction loop "
                   f"{data['reduction_length']}, MetaSchedule LocalBuilder x2 + LocalRunner, {data['settings']}).",
                   f"Best: `{best['text'].split(' ', 1)[1]}` at **{best['gflops']:.1f} GFLOPS = "
                   f"{best['percent_of_peak']:.1f}% of peak**. Kept (>= {100 * cat.threshold:.0f}%): "
                   f"{len(data['kept'])}; classes: {len(data['classes'])}.", ""]
            for dim, cov in data["coverage"].items():
                md.append(f"- two-microkernel combinations cover every {dim} from {cov['all_sizes_from']} to "
                          f"{cov['up_to']}" + (f" (not: {cov['uncovered_at_or_above_8']})"
                                               if cov["uncovered_at_or_above_8"] else ""))
            md += ["", f"![heat map]({base}.png)", "", tab, "",
                   f"Full data (every candidate, classes): `{base}.json`.", ""]
        with open(os.path.join(RESULTS, f"microkernels_{isa}{suffix}.md"), "w") as f:
            f.write("\n".join(md))
        print("\n".join(md))


if __name__ == "__main__":
    main()
