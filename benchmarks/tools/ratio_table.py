"""tvm_ttile against every other system of one or more finished `tvm-ttile compare` runs: per layer the ratio
of the side-by-side re-timed GFLOPS (median over seeds; > 1: tvm_ttile faster), its geometric mean per system,
% of each run's own peak and tuning seconds. Ratios are only formed inside one run (timed side by side).

    python benchmarks/tools/ratio_table.py benchmarks/results/templates_zen5/part1 benchmarks/results/templates_zen5/part2 \
        --out benchmarks/results/templates_zen5/ratios
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from tvm_ttile.evaluation import command_line


def load(run_dir: str) -> dict:
    with open(os.path.join(run_dir, "compare.json")) as f:
        return json.load(f)


def best(runs) -> dict | None:
    """Median over seeds of the re-timed GFLOPS, tuning seconds and whether every seed's best was verified."""
    runs = [r for r in runs if isinstance(r, dict) and "retimed_gflops" in r] if isinstance(runs, list) else []
    if not runs:
        return None
    return {"gflops": statistics.median(r["retimed_gflops"] for r in runs),
            "seconds": statistics.median(r["seconds"] for r in runs), "verified": all(r["verified"] for r in runs)}


def table(run_dirs, ours="tvm_ttile") -> dict:
    rows, systems = [], []
    for d in run_dirs:
        data = load(d)
        for layer, by_system in data["results"].items():
            row = {"run": d, "layer": layer, "peak": data["peak_gflops"], "systems": {}}
            for system, runs in by_system.items():
                b = best(runs)
                if b:
                    row["systems"][system] = b
                    if system not in systems:
                        systems.append(system)
            rows.append(row)
    others = [s for s in systems if s != ours]
    geo = {}
    for s in others:
        ratios = [r["systems"][ours]["gflops"] / r["systems"][s]["gflops"] for r in rows
                  if ours in r["systems"] and s in r["systems"]]
        if ratios:
            geo[s] = {"geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)), "layers": len(ratios),
                      "min": min(ratios), "max": max(ratios)}
    return {"ours": ours, "systems": systems, "rows": rows, "geomean": geo}


def markdown(t: dict, command: str) -> str:
    ours, others = t["ours"], [s for s in t["systems"] if s != t["ours"]]
    lines = [f"# {ours} against each system, side by side within each run", "", f"Command: `{command}`", "",
             f"Ratio of re-timed GFLOPS, {ours} / system (> 1: {ours} faster; median over seeds), per layer; "
             "then % of that run's measured peak and tuning seconds of each system. Runs: "
             + ", ".join(sorted({r['run'] for r in t['rows']})) + ".", "",
             "| layer | " + " | ".join(others) + " |", "|---|" + "---:|" * len(others)]
    for r in t["rows"]:
        mine = r["systems"].get(ours)
        cells = [f"{mine['gflops'] / r['systems'][s]['gflops']:.3f}" if mine and s in r["systems"] else "-"
                 for s in others]
        lines.append(f"| {r['layer']} | " + " | ".join(cells) + " |")
    lines.append("| geometric mean | " + " | ".join(
        f"**{t['geomean'][s]['geomean']:.3f}** ({t['geomean'][s]['layers']} layers)" if s in t["geomean"] else "-"
        for s in others) + " |")
    lines += ["", "| layer | " + " | ".join(f"{s} % of peak (tuning s)" for s in t["systems"]) + " |",
              "|---|" + "---:|" * len(t["systems"])]
    for r in t["rows"]:
        cells = [f"{100 * r['systems'][s]['gflops'] / r['peak']:.1f} ({r['systems'][s]['seconds']:.0f})"
                 + ("" if r["systems"][s]["verified"] else " NOT VERIFIED") if s in r["systems"] else "-"
                 for s in t["systems"]]
        lines.append(f"| {r['layer']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="directories of finished compare runs (with compare.json)")
    p.add_argument("--ours", default="tvm_ttile")
    p.add_argument("--out", help="OUT.md and OUT.json (default: print only)")
    args = p.parse_args(argv)
    t = table(args.runs, args.ours)
    text = markdown(t, command_line([sys.argv[0]] + (argv or sys.argv[1:])))
    print(text)
    if args.out:
        with open(args.out + ".md", "w") as f:
            f.write(text)
        with open(args.out + ".json", "w") as f:
            json.dump(t, f, indent=1)


if __name__ == "__main__":
    main()
