"""How many threads a tuned kernel gets while tuning and when timed again: a work dir's best timed through
MetaSchedule's LocalRunner (as candidates are timed while tuning) and in this process with TVM's pool at 1 and
at 2 threads. A schedule with a parallel loop (MetaSchedule adds one at any thread count) runs faster wherever
the pool has more threads than the comparison says.

    python benchmarks/experiments/runner_threads.py --gemm 1024 --work-dir DIR [--system metaschedule]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from tvm_ttile.evaluation import command_line


def in_process(args) -> dict:
    """Times in this process (the pool sized by $TVM_NUM_THREADS as this process started)."""

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile.baselines import get_system
    from tvm_ttile.measure import MeasureSettings, build_module, measure_modules, timing_args
    from tvm_ttile.operators import Matmul
    from tvm_ttile.tune import verify

    cpu = cpu_mod.detect_host()
    op = Matmul(args.gemm, args.gemm, args.gemm, name=f"gemm{args.gemm}")
    mod = get_system(args.system).best_module(op, args.work_dir, cpu)
    target = cpu.target(1)
    ok, _ = verify(op, mod, target)
    settings = MeasureSettings()
    from tvm_ttile.timing import kernel_timer

    timer = kernel_timer(build_module(mod, target), timing_args(mod), number=settings.number, repeat=settings.repeat,
                         min_repeat_ms=settings.min_repeat_ms)
    here = [timer() for _ in range(5)]
    out = {"TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS"), "verified": ok,
           "in_process_gflops": op.flops / statistics.median(here) / 1e9,
           "parallel_loop": " parallel" in mod.script() or "T.parallel" in mod.script()}
    if args.runner:
        (m,) = measure_modules([mod], target, settings, progress=False, rounds=5)
        out["local_runner_gflops"] = op.flops / statistics.median(m.seconds) / 1e9
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gemm", type=int, required=True, help="the square GEMM size the work dir tuned")
    p.add_argument("--work-dir", required=True)
    p.add_argument("--system", default="metaschedule")
    p.add_argument("--runner", action="store_true", help=argparse.SUPPRESS)  # the child's part
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help="JSON file for the results")
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(in_process(args)))
        return
    rows = []
    for threads in (None, "1", "2"):  # a fresh process each: TVM sizes its pool once
        env = dict(os.environ)
        env.pop("TVM_NUM_THREADS", None)
        if threads:
            env["TVM_NUM_THREADS"] = threads
        cmd = [sys.executable, __file__, "--gemm", str(args.gemm), "--work-dir", args.work_dir, "--system",
               args.system, "--child"] + (["--runner"] if threads is None else [])
        res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
                         .strip().splitlines()[-1])
        rows.append(res)
        print(res, flush=True)
    report = {"command": command_line([sys.argv[0]] + (argv or sys.argv[1:])), "rows": rows,
              "cpus": os.cpu_count()}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
