"""The share of a network's FLOPs in tasks tvm_ttile tunes, and why the others fall to MetaSchedule: import, prepare
and extract the tasks only (nothing is tuned or timed, so it runs on a busy machine).

    python benchmarks/tools/flop_shares.py convnext_tiny vit_b_16 resnet50 --out shares.md
    python benchmarks/tools/flop_shares.py my_model.onnx

A name that is not an .onnx file is exported from torchvision first (benchmarks/tools/torchvision_onnx.py).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile


def shares(source: str, work: str) -> dict:
    """{"model", "gflop", "tvm_ttile": share, "tasks": counts per policy, "others": [(GFLOP, shape, reason)]}."""
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.network.policy import create
    from tvm_ttile.relax import extract_tasks, prepare

    path = source
    if not source.endswith(".onnx"):
        sys.path.insert(0, os.path.dirname(__file__))
        from torchvision_onnx import export

        path = os.path.join(work, f"{source}.onnx")
        if not os.path.isfile(path):
            export(source, path)
    net = load_model(path)
    tasks = extract_tasks(prepare(net.mod))
    flops = collections.Counter()
    counts = collections.Counter()
    for t in tasks:
        flops[t.policy] += t.flops * t.weight
        counts[t.policy] += 1
    total = sum(flops.values()) or 1.0
    others = sorted(((t.flops * t.weight / 1e9, t.shape, t.reason) for t in tasks if not create(t.policy).structured),
                    reverse=True)
    ours = sum(f for policy, f in flops.items() if create(policy).structured)  # tvm_ttile's forms (policy.py)
    return {"model": source, "gflop": total / 1e9, "tvm_ttile": ours / total, "tasks": dict(counts), "others": others}


def table(results: list) -> str:
    from tvm_ttile.network.policy import create

    lines = ["| model | GFLOP | tvm_ttile's share | tasks (tvm_ttile / MetaSchedule) | MetaSchedule's largest |",
             "|---|---:|---:|---|---|"]
    for r in results:
        top = "; ".join(f"{g:.3f} GFLOP {shape}: {reason[:90]}" for g, shape, reason in r["others"][:2])
        lines.append(f"| {r['model']} | {r['gflop']:.2f} | {100 * r['tvm_ttile']:.1f}% | "
                     f"{sum(n for p, n in r['tasks'].items() if create(p).structured)} / "
                     f"{sum(n for p, n in r['tasks'].items() if not create(p).structured)} | {top} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", help="torchvision model names or .onnx files")
    p.add_argument("--out", help="also write the table (with the command) to this Markdown file")
    p.add_argument("--work", default=tempfile.gettempdir(), help="where exported models are kept")
    args = p.parse_args(argv)
    text = table([shares(m, args.work) for m in args.models])
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"Command: `python benchmarks/tools/flop_shares.py {' '.join(args.models)}`\n\n{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
