"""Where finished tune-model runs spent their wall time: one column per run's report.json, one row per phase
(tvm_ttile.phases), with the time to the tuned build, the trials measured, the tasks taken from the record library
and the latency the run itself timed (compare latencies only side by side: network_ab.py). Nothing is timed.

    python benchmarks/tools/phases_table.py RUN/report.json ... [--out FILE.md]
"""
import argparse
import json
import os
import sys

from tvm_ttile.evaluation import command_line
from tvm_ttile.phases import PHASES, build_seconds


def table(reports: dict) -> list:
    """Markdown lines: {label: report} side by side."""
    labels = list(reports)
    lines = ["| | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]

    def row(name, values):
        lines.append(f"| {name} | " + " | ".join(values) + " |")

    phases = {k: r.get("phases") or {"phases": {}, "wall_seconds": 0.0} for k, r in reports.items()}
    row("**to the tuned build, s**", [f"**{build_seconds(p):.1f}**" for p in phases.values()])
    row("whole run, s", [f"{p['wall_seconds']:.1f}" for p in phases.values()])
    for name in PHASES:
        if any(name in p["phases"] for p in phases.values()):
            row(name, [f"{p['phases'].get(name, 0.0):.1f}" for p in phases.values()])
    row("untracked", [f"{p.get('untracked_seconds', 0.0):.1f}" for p in phases.values()])
    tuned = {k: [t for t in r["tasks"] if t["policy"] == "tvm_ttile"] for k, r in reports.items()}
    row("conv2d/matmul tasks", [str(len(t)) for t in tuned.values()])
    row("their trials", [str(sum(x["trials"] for x in t)) for t in tuned.values()])
    row("tasks from the record library", [str(r.get("from_library", 0)) for r in reports.values()])
    row("verified tasks", [f"{sum(x['verified'] for x in r['tasks'])} of {len(r['tasks'])}" for r in reports.values()])
    row("latency this run timed, ms (median)", [f"{r['latency']['tvm_ttile']['median_ms']:.2f}"
                                                if r.get("latency", {}).get("tvm_ttile") else "-"
                                                for r in reports.values()])
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", help="report.json files of tune-model runs")
    ap.add_argument("--out")
    args = ap.parse_args()
    reports = {}
    for path in args.reports:
        with open(path) as f:
            label = os.path.basename(path)[:-5] if os.path.basename(path) != "report.json" else \
                os.path.basename(os.path.dirname(os.path.abspath(path)))
            reports[label] = json.load(f)
    first = next(iter(reports.values()))
    text = "\n".join([f"# Where each run's wall time went ({first['machine']['cpu']}, {first['threads']} thread(s))",
                      "", f"Command: `{command_line()}`", ""] + table(reports)) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
