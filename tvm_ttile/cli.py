"""The `tvm-ttile` command line."""
from __future__ import annotations

import argparse
import json
import sys

from .errors import TTileError


def _cpu(args):
    from . import cpu

    if getattr(args, "target", None):
        return cpu.from_target(args.target)
    return cpu.detect_host(getattr(args, "isa", None))


def cmd_peak(args) -> int:
    from . import cpu as cpu_mod

    cpu = _cpu(args)
    res = cpu_mod.peak(cpu, rebuild=args.rebuild)
    res["cache"] = str(cpu.cache_dir / "peak.json")
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        print(f"CPU      {res['cpu']}  ({res['isa']}, {res['lanes_fp32']} fp32 lanes, "
              f"{res['vector_registers']} vector registers)")
        print(f"caches   L1d {res['l1d_bytes'] // 1024} KiB, L2 {res['l2_bytes'] // 1024} KiB, "
              f"L3 {res['l3_bytes'] // 1024 // 1024} MiB")
        print(f"peak     {res['peak_gflops']:.1f} GFLOPS fp32, 1 thread (median repeat {res['median_gflops']:.1f}; "
              f"{res['accumulators']} FMA chains built through TVM, target {json.dumps(res['target'])})")
        print(f"cached   {res['cache']}")
    return 0


def cmd_microkernels(args) -> int:
    from .microkernels.catalog import build_catalog, catalog_path
    from .microkernels.heatmap import write_heatmap

    cpu = _cpu(args)
    ops = ["conv2d", "matmul"] if args.op == "all" else [args.op]
    report = {}
    for op in ops:
        cat = build_catalog(cpu, op, threshold=args.threshold, rebuild=args.rebuild)
        path = catalog_path(cpu, op)
        heat = write_heatmap(cat, path.with_suffix(".png"))
        data = cat.to_json()
        data.pop("entries")
        data.update(catalog=str(path), heatmap=heat)
        report[op] = data
    if args.json:
        print(json.dumps(report if len(ops) > 1 else report[ops[0]], indent=1))
        return 0
    for op, data in report.items():
        _print_catalog(op, data, args.top)
    return 0


def _print_catalog(op, data, top):
    kept = data["kept"]
    print(f"\n== {op} microkernels on {data['cpu']['cpu']} ({data['cpu']['isa']}), 1 thread ==")
    print(f"peak {data['peak_gflops']:.1f} GFLOPS; {data['candidates']} candidates measured in {data['seconds']:.0f} s; "
          f"{len(kept)} kept at >= {100 * data['threshold']:.0f}% of peak; reduction loop {data['reduction_length']}")
    print(f"{'microkernel':58s} {'GFLOPS':>8s} {'% peak':>7s}")
    for e in kept[:top]:
        print(f"{e['text'].split(' ', 1)[1]:58s} {e['gflops']:8.1f} {e['percent_of_peak']:7.1f}")
    if len(kept) > top:
        print(f"... {len(kept) - top} more (--top N, or --json)")
    print(f"{len(data['classes'])} classes (kept kernels differing only along one dimension):")
    for c in data["classes"][:top]:
        fixed = ",".join(f"{d}{f}" for d, f in c["fixed"].items() if f != 1) or "-"
        print(f"  along {c['dim']}: sizes {c['sizes']} with {fixed}")
    for dim, cov in data["coverage"].items():
        print(f"two-microkernel combinations cover every {dim} from {cov['all_sizes_from']} to {cov['up_to']}"
              + (f"; not {cov['uncovered_at_or_above_8']}" if cov["uncovered_at_or_above_8"] else ""))
    print(f"catalog {data['catalog']}\nheat map {data['heatmap']}")


def _add_cpu_args(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--isa", choices=["avx2", "avx512", "neon"], help="force a narrower ISA of the host")
    g.add_argument("--target", help='a TVM llvm target as JSON, e.g. \'{"kind":"llvm","mcpu":"x86-64-v3"}\'')


def make_parser():
    parser = argparse.ArgumentParser(prog="tvm-ttile", description="TTile's structured autotuning space for TVM")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("peak", help="measure (once, then cached) the single-thread fp32 peak")
    p.add_argument("--json", action="store_true")
    p.add_argument("--rebuild", action="store_true", help="measure again instead of reading the cache")
    _add_cpu_args(p)
    p.set_defaults(func=cmd_peak)
    p = sub.add_parser("microkernels", help="build (once, then cached) and show the microkernel catalog")
    p.add_argument("--op", choices=["conv2d", "matmul", "all"], default="all")
    p.add_argument("--rebuild", action="store_true", help="measure every candidate again")
    p.add_argument("--threshold", type=float, default=0.80, help="keep kernels at >= this fraction of peak")
    p.add_argument("--top", type=int, default=15, help="rows of the kept list to print")
    p.add_argument("--json", action="store_true")
    _add_cpu_args(p)
    p.set_defaults(func=cmd_microkernels)
    return parser


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except TTileError as e:
        print(f"tvm-ttile: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
