"""Do conv2d microkernels gain from unrolling the input channels (the paper's c unroll)? Times the catalog's best
microkernels as they are (one channel per step of the intrinsic's reduction loop) and with 2 and 4 channels per
step (the same register tile, the loop body repeated), side by side, each a tensorized tile on a hot cache.

    python benchmarks/paper/c_unroll.py [--top 16] [--unrolls 1 2 4] [--rounds 7] --out benchmarks/results/R.md

The microkernels are the `--top` fastest kept ones of this CPU's catalog (measured once per CPU: run `tvm-ttile
catalog` first). 1 thread; nothing else heavy may run meanwhile.
"""
import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from tvm_ttile.evaluation import command_line


def host():
    """This CPU (with only tvm_ttile's tensor intrinsics registered) and its cached peak GFLOPS at 1 thread."""
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.metaschedule import cpu_tensor_intrinsics_only

    cpu_tensor_intrinsics_only()
    cpu = cpu_mod.detect_host()
    return cpu, cpu_mod.peak(cpu)["peak_gflops"]


def time_tiles(mks, cpu, rounds: int):
    """({text: GFLOPS or None}, {text: error}) of each microkernel as a tensorized tile on a hot cache, as the
    catalog times them (the tile repeated to ~2 MFLOP per timed call), `rounds` rounds round-robin, medians."""
    from tvm_ttile.measure import MeasureSettings, measure_modules
    from tvm_ttile.microkernels import intrin

    reps = [max(1, -(-2_000_000 // mk.flops)) for mk in mks]
    timed = measure_modules([intrin.tensorized_tile(mk, r) for mk, r in zip(mks, reps)], cpu.target(1),
                            MeasureSettings(), rounds=rounds)
    gflops = {mk.text: (mk.flops * r / statistics.median(m.seconds) / 1e9 if m.seconds else None)
              for mk, r, m in zip(mks, reps, timed)}
    return gflops, {mk.text: m.error for mk, m in zip(mks, timed) if m.error}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument("--unrolls", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from tvm_ttile.microkernels.catalog import build_catalog
    from tvm_ttile.microkernels.spec import Microkernel

    cpu, peak = host()
    catalog = build_catalog(cpu, "conv2d")
    base = [Microkernel.parse(e["text"]) for e in catalog.to_json()["kept"][:args.top]]
    rows, mks = [], []
    for mk in base:
        row = []
        for uc in args.unrolls:
            unroll = tuple((d, uc if d == "c" else f) for d, f in mk.unroll)
            row.append(dataclasses.replace(mk, unroll=unroll))
        rows.append(row)
        mks += row
    start = time.time()
    gflops, errors = time_tiles(mks, cpu, args.rounds)
    cmd = command_line()
    lines = [f"# Input-channel unrolls of conv2d microkernels, {cpu.name} ({cpu.isa.name}), 1 thread", "",
             f"Command: `{cmd}` ({time.strftime('%Y-%m-%d %H:%M')}, {time.time() - start:.0f} s). Peak "
             f"{peak:.1f} GFLOPS (this CPU's cached measurement).", "",
             f"The {args.top} fastest kept microkernels of the catalog, each timed with 1, 2 and 4 input channels per "
             f"step of its reduction loop (red = {base[0].red} channels), {args.rounds} rounds round-robin, medians, "
             "% of peak. A tensorized tile on a hot cache, as the catalog times them.", "",
             "| microkernel | " + " | ".join(f"c x {u}" for u in args.unrolls) + " | " +
             " | ".join(f"c x {u} / c x 1" for u in args.unrolls[1:]) + " |",
             "|---|" + "---:|" * (2 * len(args.unrolls) - 1)]
    ratios = {u: [] for u in args.unrolls[1:]}
    for row in rows:
        g = [gflops[mk.text] for mk in row]
        cells = [f"{100 * x / peak:.1f}" if x else "failed" for x in g]
        rel = []
        for u, x in zip(args.unrolls[1:], g[1:]):
            if x and g[0]:
                ratios[u].append(x / g[0])
                rel.append(f"{x / g[0]:.3f}")
            else:
                rel.append("-")
        lines.append(f"| `{row[0].scheme}` | " + " | ".join(cells + rel) + " |")
    from tvm_ttile.evaluation import geomean as geo

    lines += ["", "Geometric mean against c x 1: " + ", ".join(f"c x {u} {geo(v):.3f} ({len(v)} microkernels)"
                                                             for u, v in ratios.items())]
    if errors:
        lines += ["", "Failures: " + "; ".join(f"`{t}`: {e[:120]}" for t, e in errors.items())]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"command": cmd, "machine": cpu.name, "isa": cpu.isa.name, "threads": 1, "peak_gflops": peak,
                   "python": platform.python_version(), "gflops": gflops, "errors": errors}, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
