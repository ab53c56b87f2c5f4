"""Do microkernels wider than the catalog's (more than 4 output-channel vectors for conv2d, more than 6 column
vectors for matmul) reach the rate of the kept ones? Times every register tile of 5 to `--k-max` vectors that fits
the register model's bounds (accumulators within [out_min, out_max], accumulators + one step's weights within the
footprint; 1x1 windows for conv2d) side by side with the `--top` fastest kept microkernels of this CPU's catalog,
each a tensorized tile on a hot cache as the catalog times them.

    python benchmarks/paper/wide_k.py [--k-max 8] [--top 8] [--rounds 7] --out benchmarks/results/R.md

1 thread; nothing else heavy may run meanwhile. Run `tvm-ttile catalog` first (measured once per CPU).
"""
import argparse
import json
import os
import platform
import time
from tvm_ttile.evaluation import command_line


def wide_candidates(op, isa, red, k_min, k_max):
    """The family's register tiles (family.py: its bounds on accumulators and footprint) with k_min to k_max
    vectors: conv2d's on a 1x1 window, matmul's with at least out_min accumulators (as conv2d's)."""
    from tvm_ttile.microkernels import family

    if op == "conv2d":
        return family._conv2d_unrolled(isa, red, ((1, 1),), k_sizes=range(k_min, k_max + 1))
    out_min = family.bounds(isa)["out_min"]
    return [mk for mk in family.matmul_candidates(isa, red, j_max=k_max)
            if mk.get("j") >= k_min and mk.get("i") * mk.get("j") >= out_min]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k-max", type=int, default=8)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from c_unroll import host, time_tiles  # the same timing as the c-unroll comparison's
    from tvm_ttile.microkernels import family
    from tvm_ttile.microkernels.catalog import build_catalog
    from tvm_ttile.microkernels.spec import Microkernel

    cpu, peak = host()

    groups, in_family = {}, {}  # op -> (kept top, wide); op -> the family's candidates (the catalog's)
    for op, k_min in (("conv2d", 5), ("matmul", 7)):
        catalog = build_catalog(cpu, op)
        top = [Microkernel.parse(e["text"]) for e in catalog.to_json()["kept"][:args.top]]
        known = {mk.text for mk in top}
        wide = [mk for mk in wide_candidates(op, cpu.isa, catalog.red, k_min, args.k_max) if mk.text not in known]
        in_family[op] = {mk.text for mk in family.candidates(op, cpu.isa, catalog.red)}
        groups[op] = (top, wide)
    mks = [mk for top, wide in groups.values() for mk in top + wide]
    start = time.time()
    gflops, errors = time_tiles(mks, cpu, args.rounds)
    cmd = command_line()
    lines = [f"# Microkernels wider than the catalog's, {cpu.name} ({cpu.isa.name}), 1 thread", "",
             f"Command: `{cmd}` ({time.strftime('%Y-%m-%d %H:%M')}, {time.time() - start:.0f} s). Peak "
             f"{peak:.1f} GFLOPS (this CPU's cached measurement). {args.rounds} rounds round-robin, medians, % of "
             "peak; a tensorized tile on a hot cache, as the catalog times them.", ""]
    summary = {}
    for op, (top, wide) in groups.items():
        lines += [f"## {op}: the catalog's {len(top)} fastest kept against {len(wide)} wider tiles", "",
                  "kind: kept (among the catalog's fastest), wide (in the family already: the heat map's w = 1 "
                  "slice), wide, new (not in the family)", "",
                  "| microkernel | kind | vectors | % of peak |", "|---|---|---:|---:|"]
        vec = "k" if op == "conv2d" else "j"
        for kind, group in (("kept", top), ("wide", wide)):
            for mk in sorted(group, key=lambda m: -(gflops[m.text] or 0)):
                g = gflops[mk.text]
                label = kind if kind == "kept" or mk.text in in_family[op] else "wide, new"
                lines.append(f"| `{mk.scheme}` | {label} | {mk.get(vec)} | {100 * g / peak:.1f} |" if g else
                             f"| `{mk.scheme}` | {label} | {mk.get(vec)} | failed |")
        best = {kind: max((gflops[m.text] or 0 for m in group), default=0) for kind, group in
                (("kept", top), ("wide", wide))}
        above = sum(1 for m in wide if (gflops[m.text] or 0) >= 0.8 * peak)
        new = [m for m in wide if m.text not in in_family[op]]
        summary[op] = {"best_kept_gflops": best["kept"], "best_wide_gflops": best["wide"],
                       "wide_at_or_above_80pct": above, "wide": len(wide), "new": len(new)}
        lines += ["", f"Best wide / best kept: {best['wide'] / best['kept']:.3f}; {above} of {len(wide)} wide tiles "
                      "at or above the catalog's 80% threshold; "
                      f"{len(new)} of them not in the family.", ""]
    if errors:
        lines += ["Failures: " + "; ".join(f"`{t}`: {e[:120]}" for t, e in errors.items()), ""]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"command": cmd, "machine": cpu.name, "isa": cpu.isa.name, "threads": 1, "peak_gflops": peak,
                   "python": platform.python_version(), "gflops": gflops, "errors": errors, "summary": summary},
                  f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
