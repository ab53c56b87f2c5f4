"""Is any of a network's time spent between its functions? Each function of a tuned build is called once more
inside the VM's instrument hook, on its real arguments, just before the VM runs it, and timed; the sum over an
inference is set against the plain inference (no hook), alternating, and the minor page faults per plain
inference are counted (getrusage).

    python benchmarks/experiments/between_calls.py MODEL WORK_DIR --input-shape 1,3,224,224 --threads 1 --out FILE.md
"""
import argparse
import platform
import resource
import statistics
import time

import numpy as np
from tvm_ttile.evaluation import command_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("work_dir")
    ap.add_argument("--input-shape", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--inferences", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import tvm

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.network.in_network import run_instrumented
    from tvm_ttile.models.importers import load_model

    cpu_mod.use_threads(args.threads)
    shape = tuple(int(v) for v in args.input_shape.split(","))
    mod = nw.prepare(load_model(args.model, shape).mod)
    vm = nw.build_network(mod, args.work_dir, threads=args.threads)
    x = tvm.runtime.tensor(np.random.default_rng(0).standard_normal(shape).astype("float32"), tvm.cpu())
    for _ in range(5):
        vm["main"](x)
    called = {}

    def again(func, symbol, before_run, ret, *a):
        if before_run and not symbol.startswith("vm."):
            start = time.perf_counter()
            func(*a)
            called["s"] = called.get("s", 0.0) + time.perf_counter() - start
        return 0

    rows = []
    for _ in range(args.rounds):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        plain = []
        for _ in range(args.inferences):
            start = time.perf_counter()
            vm["main"](x)
            plain.append(time.perf_counter() - start)
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / args.inferences
        sums = []
        for _ in range(args.inferences):
            called.clear()
            run_instrumented(vm, again, x)
            sums.append(called["s"])
        rows.append((1e3 * statistics.median(plain), 1e3 * statistics.median(sums), faults))
    lines = [f"# {args.model}: time between a network's functions ({args.threads} thread(s))", "",
             f"Command: `{command_line()}` ({time.strftime('%Y-%m-%d %H:%M')}); "
             f"{cpu_mod.detect_host().name} ({platform.machine()}); medians of {args.inferences} inferences per round.",
             "", "| round | plain inference ms | its functions, called again in the hook, summed ms | minor page faults "
                 "per plain inference |", "|---:|---:|---:|---:|"]
    lines += [f"| {i + 1} | {p:.2f} | {s:.2f} | {f:.1f} |" for i, (p, s, f) in enumerate(rows)]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
