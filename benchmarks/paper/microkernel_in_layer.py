"""Do microkernels run inside a layer at the rate the catalog measured them? Per layer of `ranking_eval.py`'s ground
truth (200 random schemes measured), or of each conv2d task of a tuned work dir, the measured schemes grouped by
microkernel: how many, their best and median
GFLOPS inside the layer as a share of the catalog's rate for that microkernel, and what each call reads per
reduction step: input pixels (rows x columns of the window its unrolled taps cover), vectors of output channels
(weights loads), and how many of those pixels share one L1 set (NHWC: a pixel is C x 4 bytes, a row (W + padding)
pixels; addresses modulo the 4 KiB an L1 way spans). No timing: reads the work dirs and the catalog.

    python benchmarks/paper/microkernel_in_layer.py DIR/<layer> ... [--out FILE.md]
"""
import argparse
import collections
import math
import os
import statistics
from tvm_ttile.evaluation import command_line, publish

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out")
    args = ap.parse_args()
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.costmodel import CostContext
    from tvm_ttile.costmodel.records import measured_layers
    from tvm_ttile.costmodel.working_sets import l1_pixels_per_set
    from tvm_ttile.space import microkernel_of

    cpu = cpu_mod.detect_host()
    ctx = CostContext.for_cpu(cpu, "conv2d", 1)
    lines = [f"# Microkernels inside the layer against the catalog, {cpu.name} ({cpu.isa.name}), 1 thread", "",
             f"Command: `{command_line()}` (no timing)", ""]
    layers = []  # (name, problem, measured) of every conv2d workload; a work dir's own name when it holds one
    for d in args.dirs:
        found = measured_layers(d)
        name = os.path.basename(os.path.normpath(d))
        layers += [(name if len(found) == 1 else f"{name} {key}", problem, measured)
                   for key, problem, measured in found if problem.op == "conv2d"]
    for name, problem, measured in layers:
        flops = 2.0 * problem.batch * math.prod(v for _, v in problem.sizes)
        groups = collections.defaultdict(list)
        for scheme, secs in measured:
            groups[microkernel_of(problem, scheme).scheme].append((scheme, flops / secs / 1e9))
        lines += [f"## {name}: {dict(problem.sizes)}, stride {problem.stride}", "",
                  "| microkernel | schemes | best GFLOPS | best / catalog | median / catalog | pixels per step | "
                  "most in one L1 set | output-channel vectors |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for text, rows in sorted(groups.items(), key=lambda kv: -max(g for _, g in kv[1])):
            mk = microkernel_of(problem, rows[0][0])
            rate = ctx.rate(mk)
            g = [x for _, x in rows]
            pixels, per_set = l1_pixels_per_set(problem, mk)
            lines.append(f"| `{text}` | {len(g)} | {max(g):.1f} | {max(g) / rate:.2f} | "
                         f"{statistics.median(g) / rate:.2f} | {pixels} | {per_set} | {dict(mk.unroll).get('k', 1)} |")
        lines.append("")
    text = "\n".join(lines) + "\n"
    publish(text, args.out)


if __name__ == "__main__":
    main()
