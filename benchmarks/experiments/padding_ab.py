"""What padding and weight prefetch do to one fixed scheme: the same loops lowered on awkward matmuls with and
without Pad specifiers, and with the weights prefetched 0 or 16 reduction steps ahead, each checked against numpy,
then timed in-process round-robin (median of rounds, each a median of 5 repeats). The loops are a good scheme
for 1024^3 found by tvm_ttile; the awkward shapes are padded to 1024 where a dimension is prime.

    python benchmarks/experiments/padding_ab.py [--rounds 5] [--out benchmarks/results/awkward_zen4/padding_ab]

Single thread. Weights in the operator's layout (not prepacked), as `tvm-ttile compare` times by default.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time
from tvm_ttile.evaluation import command_line

LOOPS = "T(2,j),T(2,i),T(2,i),T(2,j),T(2,i),Lambda(i,[(1,8),(12,10)]),T(2,j),T(4,j),T(1024,k),U(lambda,i),U(2,j),V(j)"
# (label, M, N, K, pads): N is padded to whole vectors by the operator itself (B_pad, C_unpad).
CASES = [
    ("1024^3 (friendly)", 1024, 1024, 1024, ""),
    ("1009^3, Pad i and k", 1009, 1009, 1009, "Pad(1024,i),Pad(1024,k),"),
    ("M=1009, Pad i (weights in place)", 1009, 1024, 1024, "Pad(1024,i),"),
    ("N=1009 (vector padding copy)", 1024, 1009, 1024, ""),
    ("K=1009, Pad k (weights copied)", 1024, 1024, 1009, "Pad(1024,k),"),
    ("K=1009, unpadded (reduction of 1009)", 1024, 1024, 1009, None),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prefetch", default="0,16")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results", "awkward_zen4", "padding_ab"))
    args = ap.parse_args()

    import numpy as np
    import tvm

    from tvm_ttile.timing import kernel_timer, round_robin

    from tvm_ttile.cpu import detect_host, peak
    from tvm_ttile.lowering import LoweringOptions, lower
    from tvm_ttile.operators import Matmul
    from tvm_ttile.scheme import Scheme
    from tvm_ttile.space import Problem

    host = detect_host()
    dev = tvm.cpu()
    timers, rows = [], []
    for label, M, N, K, pads in CASES:
        for pf in [int(x) for x in args.prefetch.split(",")]:
            op = Matmul(M, N, K)
            text = "[" + (pads or "") + (LOOPS if pads is not None else LOOPS.replace("T(1024,k)", f"T({K},k)")) + "]"
            problem = Problem.from_operator(op, host.lanes, host.isa.name)
            lib = tvm.compile(lower(problem, Scheme.parse(text), op.prim_func(host.lanes), options=LoweringOptions(prefetch=pf)).sch.mod,
                              target=host.target())
            a, b = op.random_inputs()
            out = tvm.runtime.tensor(np.zeros(op.output_shape, np.float32), dev)
            call = [tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out]
            (lib.mod if hasattr(lib, "mod") else lib)["main"](*call)
            ref = op.reference(a, b)
            err = float(np.abs(out.numpy() - ref).max())
            if err > 1e-3 * float(np.abs(ref).max()):
                sys.exit(f"{label}, prefetch {pf}: wrong result (max error {err})")
            timers.append(kernel_timer(lib.mod if hasattr(lib, "mod") else lib, call, number=3, repeat=5, min_repeat_ms=0))
            rows.append({"case": label, "scheme": text, "prefetch": pf, "flops": op.flops, "secs": []})
    for row, secs in zip(rows, round_robin(timers, args.rounds)):
        row["secs"] = secs
    p = peak(host)["peak_gflops"]
    for row in rows:
        row["gflops"] = row["flops"] / statistics.median(row["secs"]) / 1e9
        row["percent_of_peak"] = 100 * row["gflops"] / p
    data = {"command": command_line(), "machine": platform.node(), "cpu": host.name,
            "isa": host.isa.name, "peak_gflops": p, "rounds": args.rounds, "date": time.strftime("%Y-%m-%d %H:%M"),
            "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as fh:
        json.dump(data, fh, indent=1)
    lines = [f"# One scheme, padded or not, weights prefetched or not: {host.name} ({host.isa.name}), 1 thread", "",
             f"Command: `{data['command']}` ({data['date']}); peak {p:.1f} GFLOPS (cached measurement of this CPU); "
             f"{args.rounds} round-robin rounds, medians. Every result checked against numpy first. Loops: `[{LOOPS}]` "
             "(the reduction loop covers K when K is not padded). Weights in the operator's layout.", "",
             "| case | prefetch | GFLOPS | % of peak |", "|---|---:|---:|---:|"]
    lines += [f"| {r['case']} | {r['prefetch']} | {r['gflops']:.1f} | {r['percent_of_peak']:.1f} |" for r in rows]
    with open(args.out + ".md", "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
