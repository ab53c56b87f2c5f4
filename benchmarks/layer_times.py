"""Layer by layer inside whole networks: tvm_ttile's tuned network (Relax VM instrument hook) against ONNX
Runtime (its own profiler), 1 thread, same input, per conv2d/dense shape (calls of one shape added up).

    python benchmarks/layer_times.py resnet18 benchmarks/results/end_to_end_zen3/work/resnet18
        -> <work dir>/../../layer_times_<model>.md

Says where a network's gap to ONNX Runtime comes from: which layer shapes are slower and by how much.
"""
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict

import numpy as np

from tvm_ttile import network as nw
from tvm_ttile.cpu import detect_host
from tvm_ttile.models.importers import load_model

RUNS, ROUNDS = 30, 3


class OrtProfile:
    """ONNX Runtime with its profiler on: run() as often as wanted, then layers()."""

    def __init__(self, net, x):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
        self.feed = {net.input_name: x}
        self.sess = ort.InferenceSession(net.onnx_model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.sess.run(None, self.feed)  # warm-up (dropped below)

    def run(self, n):
        for _ in range(n):
            self.sess.run(None, self.feed)

    def layers(self):
        """{shape key: ms per inference} of the Conv / Gemm / MatMul nodes (each node's median over the runs,
        nodes of one shape added up), and the median whole run."""
        with open(self.sess.end_profiling()) as f:
            events = json.load(f)
        runs = [e["dur"] / 1e3 for e in events if e.get("name") == "model_run"][1:]
        durations, keys = defaultdict(list), {}
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                key = _ort_key(e["args"])
                if key is not None:
                    durations[e["name"]].append(e["dur"] / 1e3)
                    keys[e["name"]] = key
        out = defaultdict(float)
        for node, ds in durations.items():
            out[keys[node]] += statistics.median(ds[1:] or ds)
        return dict(out), statistics.median(runs)


def _ort_key(args):
    op = args.get("op_name")
    if op not in ("Conv", "FusedConv", "NchwcConv", "Gemm", "MatMul", "FusedGemm", "FusedMatMul"):
        return None
    shapes = [list(d.values())[0] for d in args.get("input_type_shape", [])]
    outs = [list(d.values())[0] for d in args.get("output_type_shape", [])]
    if op in ("Gemm", "MatMul", "FusedGemm", "FusedMatMul"):
        (m, k), n = shapes[0][-2:], outs[0][-1]
        return f"matmul j{n},k{k}" + (f",i{m}" if m > 1 else "")
    x, (k, c, r, s), y = shapes[0], shapes[1], outs[0]  # the profiler reports the model's NCHW / OIHW shapes
    h, wd = y[2], y[3]
    stride = x[2] // h if h else 1
    return _key(h, wd, k, c, r, s, stride)


def _key(h, w, k, c, r, s, stride):
    dims = ",".join(f"{d}{e}" for d, e in (("h", h), ("w", w), ("k", k), ("c", c), ("r", r), ("s", s)) if e > 1)
    return f"conv2d {dims}" + (f" stride{stride}" if stride > 1 else "")


def main(model, work_dir):
    host = detect_host()
    net = load_model(model)
    mod = nw.prepare(net.mod)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    tasks = nw.extract_tasks(mod, host)
    vm = nw.build_network(mod, work_dir, host)
    ort = OrtProfile(net, x)
    rounds = []
    for _ in range(ROUNDS):  # alternate, so that a disturbed moment of this shared machine hits both
        rounds.append(nw.profile(vm, x, RUNS // ROUNDS))
        ort.run(RUNS // ROUNDS)
    mine = defaultdict(float)
    for t in tasks:
        symbol = nw.task_symbol(rounds[0]["calls"], t.name)
        if symbol is not None and t.policy == "tvm_ttile":
            mine[t.shape] += statistics.median(r["calls"][symbol]["ms"] for r in rounds)
    inside_total = statistics.median(r["total_ms"] for r in rounds)
    theirs, ort_total = ort.layers()
    rows, keys = [], sorted(set(mine) | set(theirs), key=lambda k: -max(mine.get(k, 0), theirs.get(k, 0)))
    for k in keys:
        a, b = mine.get(k), theirs.get(k)
        rows.append(f"| {k} | " + (f"{a:.3f}" if a else "-") + " | " + (f"{b:.3f}" if b else "-") + " | "
                    + (f"{a / b:.2f}" if a and b else "-") + " |")
    ours_sum, theirs_sum = sum(mine.values()), sum(theirs.values())
    lines = [f"# {model}: layer times inside the network, tvm_ttile vs ONNX Runtime (1 thread)", "",
             f"Command: `python benchmarks/layer_times.py {' '.join(sys.argv[1:])}`; {host.name} ({host.isa.name}); "
             f"{RUNS} inferences each, in {ROUNDS} alternating rounds; medians; tvm_ttile: the database in the work "
             "dir, timed by the Relax VM's instrument hook; ONNX Runtime: its profiler's kernel times (node names differ, so layers are matched by "
             "shape; calls of one shape are added up).", "",
             "| layer shape | tvm_ttile ms | ONNX Runtime ms | ratio |", "|---|---:|---:|---:|", *rows, "",
             f"Conv2d/dense layers: tvm_ttile {ours_sum:.2f} ms, ONNX Runtime {theirs_sum:.2f} ms. Whole inference "
             f"(with the profilers on): tvm_ttile {inside_total:.2f} ms, ONNX Runtime {ort_total:.2f} ms."]
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.normpath(work_dir))), f"layer_times_{model}.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
