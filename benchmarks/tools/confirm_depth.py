"""How many of a workload's fastest records does re-timing need (confirm.confirm_top)? Read every confirmation log
(confirmed.jsonl) under the given dirs: each first pass that re-timed 5 records, all of which ran. Per depth k, the
fastest of the first k (MetaSchedule's order by tuning time) against the fastest of all 5, both as re-timed
together: what confirming only k would have lost. No timing.

    python benchmarks/tools/confirm_depth.py [DIR ...] [--out benchmarks/results/confirm_depth.md]
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys
from collections import Counter
from tvm_ttile.evaluation import command_line

DEPTH = 5


def passes(dirs):
    """(log path, the candidates' re-timed means in tuning order) of every usable first pass."""
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "**", "confirmed.jsonl"), recursive=True)):
            seen = set()
            with open(path) as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    c = entry.get("candidates", [])
                    if entry.get("workload") in seen or len(c) != DEPTH or any(x.get("error") for x in c):
                        continue
                    seen.add(entry["workload"])  # later passes re-time records already confirmed once
                    yield path, [statistics.fmean(x["round_medians"]) for x in c]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", default=["benchmarks/results"])
    ap.add_argument("--out", default="benchmarks/results/confirm_depth.md")
    args = ap.parse_args()
    rows = list(passes(args.dirs))
    if not rows:
        sys.exit(f"no confirmation log with {DEPTH} re-timed records under {' '.join(args.dirs)}")
    winner = Counter(min(range(DEPTH), key=t.__getitem__) for _, t in rows)
    lines = ["# Confirmation depth: what re-timing only the k fastest records would lose",
             "", f"Command: `{command_line()}` (no timing: reads the confirmation logs).", "",
             f"{len(rows)} first confirmation passes of {DEPTH} records, from "
             f"{len({os.path.dirname(p) for p, _ in rows})} work dirs (every CPU the results hold). The fastest after "
             "re-timing was the record ranked "
             + ", ".join(f"{r + 1}: {winner[r]}" for r in range(DEPTH)) + " by its tuning time.", "",
             f"| confirm the first k | geometric mean slowdown against all {DEPTH} | 90th percentile | 99th "
             "percentile | share over 2% slower |", "|---:|---:|---:|---:|---:|"]
    for k in range(1, DEPTH):
        loss = sorted(min(t[:k]) / min(t) for _, t in rows)
        geo = math.exp(statistics.fmean(math.log(x) for x in loss))
        lines.append(f"| {k} | {geo:.4f} | {loss[int(0.9 * len(loss))]:.4f} | {loss[int(0.99 * len(loss))]:.4f} | "
                     f"{sum(x > 1.02 for x in loss) / len(loss):.1%} |")
    lines += ["", "The slowdown of depth k includes the noise of re-timing near-equal candidates (the fastest of 5 "
              "noisy times is a low draw), so it is an upper bound of what depth k loses."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
