"""Dense layers inside a network (issue #6, item 4): the built-in MLP (784-2048-2048-10, ReLU) with its dense
layers tuned by tvm_ttile's matmul space (`--dense tvm_ttile`, weights prepacked at build time) and by AutoMCL
(`--dense automcl`, the classifier's compute when this CPU has one), both built with Relax, checked against the
untuned build, and timed side by side with ONNX Runtime (round-robin, each in a process of its own, 1 thread).

    python benchmarks/paper/dense_network.py [--batch 16] [--trials 50]  -> benchmarks/results/dense_network/mlp.{md,json}
Databases: benchmarks/work/dense_network/<policy> (resumable).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from tvm_ttile import network as nw
from tvm_ttile.baselines.engines import onnxruntime_runner
from tvm_ttile.cpu import detect_host, peak as measured_peak
from tvm_ttile.network.report import TOLERANCE
from tvm_ttile.isolated import IsolatedTimer, Saved
from tvm_ttile.models.importers import load_model
from tvm_ttile.evaluation import command_line

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--trials", type=int, default=50, help="trials per dense shape")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cpu = detect_host()
    net = load_model("mlp", input_shape=(args.batch, 784))
    mod = nw.prepare(net.mod)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    ref = nw.run(nw.build_network(mod, None, cpu=cpu), x)
    scale = float(np.max(np.abs(ref)))
    tmp = tempfile.TemporaryDirectory(prefix="dense_network_")
    rows, timer, tasks = {}, IsolatedTimer(x, 1, tmp.name), {}
    for policy in ("tvm_ttile", "automcl"):
        work = os.path.join(HERE, "work", "dense_network", policy)
        tuned = nw.tune_network(mod, cpu=cpu, work_dir=work, trials_per_task=args.trials, other_trials=0, dense=policy)
        ex = nw.build_executable(mod, work, cpu=cpu)
        err = float(np.max(np.abs(nw.run(nw.vm_of(ex), x) - ref)))
        if err > TOLERANCE * scale:
            sys.exit(f"{policy}: the tuned MLP differs from the untuned build by {err:.3g} (scale {scale:.3g})")
        tasks[policy] = [vars(t) for t in tuned.tasks]
        rows[policy] = {"max_abs_error": err, "tuning_seconds": sum(t.tuning_seconds for t in tuned.tasks)}
        timer.add(policy, Saved.tvm(ex, tmp.name, policy))
    run, version = onnxruntime_runner(net.onnx_model, net.input_name, x)
    out = run()
    rows["onnxruntime"] = {"max_abs_error": float(np.max(np.abs(out - ref))), "version": version}
    timer.add("onnxruntime", Saved.onnx(net.onnx_model, net.input_name, tmp.name))
    lat = timer.run(args.rounds)  # round-robin: a disturbed moment hits every system alike
    tmp.cleanup()
    flops = sum(2 * args.batch * k * n for k, n in ((784, 2048), (2048, 2048), (2048, 10)))
    peak = measured_peak(cpu)["peak_gflops"]
    for k, v in lat.items():
        med = float(np.median(v))
        rows[k].update(median_ms=med, iqr_ms=float(np.subtract(*np.percentile(v, [75, 25]))),
                       percent_of_peak=100 * flops / (med / 1e3) / 1e9 / peak)
    data = {"command": command_line(), "machine": cpu.describe(),
            "peak_gflops": peak, "threads": 1, "batch": args.batch, "trials": args.trials, "systems": rows,
            "tasks": tasks, "date": time.strftime("%Y-%m-%d %H:%M")}
    res = os.path.join(HERE, "results", "dense_network")
    os.makedirs(res, exist_ok=True)
    with open(os.path.join(res, "mlp.json"), "w") as f:
        json.dump(data, f, indent=1)
    base = rows["onnxruntime"]["median_ms"]
    lines = [f"# MLP 784-2048-2048-10, batch {args.batch}: dense layers by tvm_ttile's space vs AutoMCL", "",
             f"Command: `{data['command']}` ({data['date']}); {cpu.name}, 1 thread, peak {peak:.1f} GFLOPS; "
             f"{args.trials} trials per dense shape; latencies from {args.rounds} round-robin rounds.", "",
             "| system | median ms | IQR ms | % of peak | ONNX Runtime / system | tuning s | max abs error |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for k, r in rows.items():
        lines.append(f"| {k} | {r['median_ms']:.3f} | {r['iqr_ms']:.3f} | {r['percent_of_peak']:.1f} | "
                     f"{base / r['median_ms']:.2f} | {r.get('tuning_seconds', 0):.0f} | {r['max_abs_error']:.1e} |")
    lines += ["", "Dense layers (GFLOPS as tuned; AutoMCL's note names its compute):", "",
              "| policy | task | shape | GFLOPS | trials | note |", "|---|---|---|---:|---:|---|"]
    for policy, ts in tasks.items():
        lines += [f"| {policy} | {t['name']} | {t['shape']} | {t['gflops']:.1f} | {t['trials']} | "
                  f"{'; '.join(t['notes'])} |" for t in ts if t["trials"]]
    with open(os.path.join(res, "mlp.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
