"""Is a microkernel slow inside a layer because the input pixels it reads at one channel offset share L1 sets? One
3x3 convolution (17x17, 1024 output channels: Yolo9000-18's shape) with several input channel counts C: at C = 512 a
pixel is 2 KiB and every pixel falls in one of two L1 set groups; at C = 448 or 576 they spread over 16. Per C, the
same two schemes (their channel tiles scaled to C): the 17-row, one-vector microkernel the rankers pick at zero
trials and the 8/9-row, two-vector one of the best of 200 random draws (C: multiples of 64). Each lowered, checked against numpy, timed
side by side, round-robin; weights prepacked.

    python benchmarks/paper/l1_conflicts.py [--channels 448 512 576] [--rounds 7] --out FILE.md
"""
import argparse
import json
import os
import statistics
import sys
import time
from tvm_ttile.evaluation import command_line

# {c tile}: the factor that makes the channel tiles multiply to C (C = 64 x {c tile} in both schemes)
SCHEMES = {
    "U(17,h),U(1,k): 57 pixels per step, 1 broadcast per FMA":
        "[T(64,k),T(2,c),T({c},c),T(17,w),T(32,c),U(3,s),U(3,r),U(17,h),V(k)]",
    "U(8|9,h),U(2,k): 33 pixels per step, 1/2 broadcast per FMA":
        "[Lambda(h,[(1,8),(1,9)]),T(2,c),T(2,k),T(8,k),T(17,w),T(2,c),T(2,k),T({c},c),T(16,c),T(1,c),U(3,s),U(3,r),"
        "U(lambda,h),U(2,k),V(k)]",
}


def set_groups(channels: int, way_bytes: int = 4096, line: int = 64) -> int:
    """How many L1 set groups the pixels of one channel offset fall in (a pixel: channels x 4 bytes)."""
    import math

    return way_bytes // max(math.gcd(channels * 4, way_bytes), line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", nargs="+", type=int, default=[448, 512, 576])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    bad = [c for c in args.channels if c % 64]
    if bad:
        sys.exit(f"--channels: each a multiple of 64 (the schemes' channel tiles), got {bad}")

    import tvm

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.lowering import lower
    from tvm_ttile.measure import MeasureSettings, measure_modules
    from tvm_ttile.metaschedule import cpu_tensor_intrinsics_only
    from tvm_ttile.operators import Conv2d
    from tvm_ttile.scheme import Scheme
    from tvm_ttile.space import Problem
    from tvm_ttile.tune import verify

    cpu = cpu_mod.detect_host()
    cpu_tensor_intrinsics_only()
    target = cpu.target(1)
    peak = cpu_mod.peak(cpu)["peak_gflops"]
    from tvm_ttile.costmodel.working_sets import l1_pixels_per_set
    from tvm_ttile.space import microkernel_of

    cases, mods = [], []
    for c in args.channels:
        op = Conv2d(K=1024, C=c, H=17, W=17, R=3, S=3, pad=1, name=f"17x17-C{c}", prepack=True)
        problem = Problem.from_operator(op, cpu.lanes, cpu.isa.name)
        for label, template in SCHEMES.items():
            text = template.format(c=c // 64)
            sch = tvm.s_tir.Schedule(tvm.IRModule({"main": op.prim_func(cpu.lanes)}))
            lower(problem, Scheme.parse(text), sch)
            ok, err = verify(op, sch.mod, target)
            per_set = l1_pixels_per_set(problem, microkernel_of(problem, Scheme.parse(text)))[1]
            cases.append({"channels": c, "set_groups": set_groups(c), "microkernel": label, "scheme": text,
                          "pixels_in_one_set": per_set, "verified": ok, "max_abs_error": err, "flops": op.flops})
            mods.append(sch.mod)
    timed = measure_modules(mods, target, MeasureSettings(), rounds=args.rounds)
    for case, m in zip(cases, timed):
        case["gflops"] = case["flops"] / statistics.median(m.seconds) / 1e9 if not m.error else None
        case["error"] = m.error
    command = command_line()
    base = os.path.splitext(args.out)[0]
    with open(base + ".json", "w") as f:
        json.dump({"command": command, "machine": cpu.name, "isa": cpu.isa.name, "threads": 1, "peak_gflops": peak,
                   "date": time.strftime("%Y-%m-%d %H:%M"), "cases": cases}, f, indent=1)
    lines = [f"# L1 set conflicts of a 17-row microkernel, {cpu.name} ({cpu.isa.name}), 1 thread, peak {peak:.1f} "
             "GFLOPS", "", f"Command: `{command}` ({time.strftime('%Y-%m-%d %H:%M')}); {args.rounds} rounds "
             "round-robin, medians.", "",
             "Most pixels in one L1 set: of the pixels one call reads per reduction step (the larger Lambda part).", "",
             "| input channels | L1 set groups of a channel offset | " + " | ".join(SCHEMES) + " | first / second |"
             " most pixels in one set | verified |", "|---:|---:|" + "---:|" * len(SCHEMES) + "---:|---|---|"]
    for c in args.channels:
        row = [x for x in cases if x["channels"] == c]
        g = [x["gflops"] for x in row]
        ratio = f"{g[0] / g[1]:.2f}" if all(g) else "-"
        lines.append(f"| {c} | {row[0]['set_groups']} | " + " | ".join(
            f"{v:.1f} ({100 * v / peak:.0f}%)" if v else "failed" for v in g) + f" | {ratio} | "
            + " / ".join(str(x["pixels_in_one_set"]) for x in row)
            + f" | {'yes' if all(x['verified'] for x in row) else 'NO'} |")
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
