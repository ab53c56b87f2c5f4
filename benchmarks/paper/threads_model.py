"""A model of what the parallel level gives at 1-64 threads on ResNet-18's conv2d layers (no timing: plain Python).

    python benchmarks/paper/threads_model.py --out benchmarks/results/threads_model.md [--batch 1] [--l2-kib 1024]

For each layer and thread count T it walks every parallel level the structured space offers (space.parallel_levels
over every candidate microkernel of the ISA's family: exact = TTile's reservation, a multiple of T, or >= 4T
chunks) and keeps the one a scheduler should take: the highest efficiency (chunks / (T x rounds): the share of the
threads' time spent working when chunks cost the same), then the least traffic. For it the model reports
- chunks, kind, efficiency: the load-imbalance loss, visible before anything is measured;
- the per-core footprint of one chunk (input + weights + output, KiB) against the core's own L2;
- the bytes that cross the shared L3 / memory per inference when every chunk loads its input slice and weights
  once and writes its output (a lower bound), and the bandwidth that would need at T x the 1-thread rate;
- the predicted speedup: T x efficiency, capped by that bandwidth against `--bandwidth-gbs` (memory bandwidth of
  the server argued about; the 2-core machine here measures its own with `tvm-ttile peak --threads 2`).
It argues the choices for a large server; it is not a measurement. benchmarks/paper/threads_layers.py measures the same
layers at any thread count on a real host.
"""
import argparse
import math
import statistics

THREADS = (1, 2, 4, 8, 16, 32, 64)


def main(argv=None):
    from tvm_ttile.cpu import get_isa
    from tvm_ttile.microkernels.family import candidates
    from tvm_ttile.operators import get_layer
    from tvm_ttile.scheme import conv2d_footprint
    from tvm_ttile.space import Problem, Space

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--isa", default="avx512")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--layers", default=",".join(f"ResNet18-{i}" for i in range(1, 13)))
    p.add_argument("--threads", default=",".join(map(str, THREADS)))
    p.add_argument("--l2-kib", type=int, default=1024, help="L2 per core (Zen 4: 1024, Ice Lake SP: 1280)")
    p.add_argument("--core-gflops", type=float, default=110.0, help="one core's sustained rate (about 0.95 x peak)")
    p.add_argument("--bandwidth-gbs", type=float, default=200.0, help="memory bandwidth of the server argued about")
    p.add_argument("--l3-gbs-per-core", type=float, default=50.0, help="shared L3 bandwidth per core")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    isa = get_isa(args.isa)
    threads = [int(t) for t in args.threads.split(",")]
    rows = {}
    for name in args.layers.split(","):
        import dataclasses

        op = dataclasses.replace(get_layer(name), N=args.batch)
        problem = Problem.from_operator(op, isa.lanes, isa.name)
        kept = candidates("conv2d", isa, 16)
        fp = conv2d_footprint(op.stride, op.dilation)
        for t in threads:
            space = Space(problem, kept, threads=t)
            best = None
            for choice in space.choices:
                for kind, levels in (space.parallel_levels(choice, 1) or {"serial": [()]}).items():
                    for level in levels:
                        cand = dict(model(problem, op, level, t, fp, args), kind=kind)
                        if best is None or cand["seconds"] < best["seconds"]:
                            best = cand
            rows[(name, t)] = best
    write(rows, args, threads)


def model(problem, op, level, t, fp, args):
    """One parallel level's predicted time: the slowest of compute (T cores x efficiency), the layer's own bytes
    from memory (once), and the bytes chunks read again from the shared L3 (an input slice read by the chunks
    of every output-channel block, a weight block by every pixel block)."""
    size = problem.size
    chunk = dict(size)
    for d, n in level:
        chunk[d] //= n
    chunks = math.prod(n for _, n in level) if level else 1
    rounds = -(-chunks // t)
    eff = chunks / (t * rounds) if level else 1.0 / t
    f = fp(chunk)
    per_chunk = 4 * (f["input"] + f["weights"] + f["output"])
    whole = fp(size)
    unique = 4 * (whole["input"] + whole["weights"] + whole["output"])
    again = max(chunks * per_chunk - unique, 0)
    compute_s = op.flops / (min(t, chunks) * (eff if chunks >= t else 1.0) * args.core_gflops * 1e9)
    memory_s = unique / (args.bandwidth_gbs * 1e9)
    l3_s = again / (t * args.l3_gbs_per_core * 1e9)
    bound = max((compute_s, "compute"), (memory_s, "memory"), (l3_s, "L3"))
    return {"chunks": chunks, "level": level, "efficiency": eff if chunks >= t else chunks / t,
            "per_chunk_kib": per_chunk / 1024, "seconds": bound[0], "bound": bound[1],
            "speedup": op.flops / (args.core_gflops * 1e9) / bound[0]}


def write(rows, args, threads):
    layers = list(dict.fromkeys(name for name, _ in rows))
    lines = ["# Parallel level at 1-64 threads on ResNet-18's conv2d layers: a model", "",
             f"Command: `python benchmarks/paper/threads_model.py --isa {args.isa} --batch {args.batch} --l2-kib "
             f"{args.l2_kib} --core-gflops {args.core_gflops} --bandwidth-gbs {args.bandwidth_gbs} --l3-gbs-per-core "
             f"{args.l3_gbs_per_core} --out {args.out}`",
             "", "Plain Python over the structured space (benchmarks/paper/threads_model.py explains the model); no timing. "
             f"Batch {args.batch}, ISA {args.isa}, L2 {args.l2_kib} KiB per core, one core sustaining "
             f"{args.core_gflops:.0f} GFLOPS, memory {args.bandwidth_gbs:.0f} GB/s, the shared L3 "
             f"{args.l3_gbs_per_core:.0f} GB/s per core.", "",
             "Per layer and thread count, the parallel level with the lowest predicted time: chunks (kind), "
             "efficiency = chunks / (threads x rounds), one chunk's footprint in KiB (* = over the core's L2), "
             "and the predicted speedup over 1 thread (m = memory-bound: the layer's own bytes; L3 = bound by "
             "slices the chunks read again from the shared L3).", "",
             "| layer | " + " | ".join(f"{t} threads" for t in threads) + " |",
             "|---|" + "---|" * len(threads)]
    speed = {t: [] for t in threads}
    for name in layers:
        cells = []
        for t in threads:
            r = rows[(name, t)]
            speed[t].append(r["speedup"])
            star = "*" if r["per_chunk_kib"] > args.l2_kib else ""
            tag = {"compute": "", "memory": " m", "L3": " L3"}[r["bound"]]
            cells.append(f"{r['chunks']} ({r['kind']}), {r['efficiency']:.2f}, {r['per_chunk_kib']:.0f}{star} KiB, "
                         f"{r['speedup']:.1f}x{tag}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Geometric mean of the predicted speedup over the layers: " + ", ".join(
        f"{t} threads {statistics.geometric_mean(speed[t]):.1f}x" for t in threads) + ".", ""]
    worst = {t: min(zip(speed[t], layers)) for t in threads}
    lines += ["Lowest per thread count: " + ", ".join(f"{t}: {worst[t][1]} {worst[t][0]:.1f}x" for t in threads) + "."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
