"""Does timing a TVM build right after ONNX Runtime in the same process disturb it? A tuned network's latency
measured alone, then in bursts of 5 inferences each right after 5 ONNX Runtime inferences (as the round-robin
timers of tune-model and network_ab interleave them), with ONNX Runtime's thread spinning on and off.

    python benchmarks/tools/ort_interference.py resnet18 WORK_DIR --threads 2 --out FILE.md
"""
import argparse
import statistics
import time

import numpy as np
from tvm_ttile.evaluation import command_line


def stats(seconds):
    ms = [1e3 * s for s in seconds]
    q = statistics.quantiles(ms, n=10)
    quart = statistics.quantiles(ms, n=4)
    return f"{statistics.median(ms):.2f} | {quart[2] - quart[0]:.2f} | {q[8]:.2f}"


def main():
    import tvm
    import onnxruntime as ort

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("work_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bursts", type=int, default=60)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    cpu_mod.use_threads(args.threads)
    cpu = cpu_mod.detect_host()
    net = load_model(args.model, None, seed=0)
    mod = nw.prepare(net.mod)
    vm = nw.build_network(mod, args.work_dir, cpu=cpu, threads=args.threads)
    xn = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    x = tvm.runtime.tensor(xn, tvm.cpu())

    def tvm_burst(n):
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            vm["main"](x)
            out.append(time.perf_counter() - t0)
        return out

    tvm_burst(20)
    rows = [("alone", stats(tvm_burst(5 * args.bursts)))]
    for spin in ("1", "0"):
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
        so.add_session_config_entry("session.intra_op.allow_spinning", spin)
        sess = ort.InferenceSession(net.onnx_model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        times = []
        for _ in range(args.bursts):
            for _ in range(5):
                sess.run(None, {net.input_name: xn})
            times += tvm_burst(5)
        rows.append((f"right after ONNX Runtime (allow_spinning={spin})", stats(times)))
        del sess
    lines = [f"# {args.model} (tvm_ttile build) timed alone and right after ONNX Runtime, {args.threads} threads", "",
             f"Command: `{command_line()}` "
             f"({time.strftime('%Y-%m-%d %H:%M')}); {cpu.name} ({cpu.isa.name}).", "",
             "| tvm_ttile timed | median ms | IQR | 90th percentile |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {s} |" for name, s in rows]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
