"""Layer by layer inside whole networks: tvm_ttile's tuned network (Relax VM instrument hook) against ONNX
Runtime (its own profiler), at one thread count, same input, per conv2d/dense shape (calls of one shape added up).

    python benchmarks/tools/layer_times.py resnet18 benchmarks/results/end_to_end_zen3/work/resnet18
        [--input-shape 1,3,224,224] [--threads 1] [--out FILE.md]   (default: <work dir>/../../layer_times_<model>.md)

`--threads` as the network was tuned with; ONNX Runtime's threads then do not spin between runs, so that they do not
take the cores from tvm_ttile's rounds in the same process.

`--input-shape` as the network was tuned with (tune-model's): another shape makes other tasks, built untuned.

Says where a network's gap to ONNX Runtime comes from: which layer shapes are slower and by how much, and the
rest of each inference by kind of work (pooling, layout changes, element-wise nodes, the VM's builtins).
"""
import argparse
import json
import re
import os
import statistics
import tempfile
from collections import defaultdict

import numpy as np

from tvm_ttile import network as nw
from tvm_ttile.cpu import detect_host
from tvm_ttile.models.importers import load_model
from tvm_ttile.evaluation import command_line

RUNS, ROUNDS = 30, 3


class OrtProfile:
    """ONNX Runtime with its profiler on: run() as often as wanted, then layers()."""

    def __init__(self, net, x, threads: int = 1):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
        self.feed = {net.input_name: x}
        self.sess = ort.InferenceSession(net.onnx_model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        self.sess.run(None, self.feed)  # warm-up (dropped below)

    def run(self, n):
        for _ in range(n):
            self.sess.run(None, self.feed)

    def layers(self):
        """({shape key: ms per inference} of the Conv / Gemm / MatMul nodes (each node's median over the runs,
        nodes of one shape added up), {op type: ms per inference} of the other nodes, the median whole run)."""
        with open(self.sess.end_profiling()) as f:
            events = json.load(f)
        runs = [e["dur"] / 1e3 for e in events if e.get("name") == "model_run"][1:]
        durations, keys = defaultdict(list), {}
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                key = _ort_key(e["args"])
                durations[e["name"]].append(e["dur"] / 1e3)
                keys[e["name"]] = (True, key) if key is not None else (False, e["args"].get("op_name", "?"))
        layers, other = defaultdict(float), defaultdict(float)
        for node, ds in durations.items():
            is_layer, key = keys[node]
            (layers if is_layer else other)[key] += statistics.median(ds[1:] or ds)
        return dict(layers), dict(other), statistics.median(runs)


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


def _kind(symbol: str) -> str:
    """What a compiled function or VM call does, from its name: fused_conv2d3_add3_relu21 -> conv2d_add_relu."""
    if symbol.startswith("vm.builtin."):
        return "VM builtins (allocation, shape checks)"
    return re.sub(r"\d+(?=_|$)", "", re.sub(r"_prepacked$", "", symbol).removeprefix("fused_"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("work_dir")
    ap.add_argument("--input-shape", help="NCHW, e.g. 1,3,224,224 (default: the model's)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="default: <work dir>/../../layer_times_<model>.md")
    args = ap.parse_args()
    model, work_dir = args.model, args.work_dir
    host = detect_host()
    net = load_model(model, tuple(int(d) for d in args.input_shape.split(",")) if args.input_shape else None, seed=0)
    mod = nw.prepare(net.mod)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    tasks = nw.extract_tasks(mod, cpu=host, threads=args.threads)
    vm = nw.build_network(mod, work_dir, cpu=host, threads=args.threads)
    ort = OrtProfile(net, x, args.threads)
    rounds = []
    for _ in range(ROUNDS):  # alternate, so that a disturbed moment of this shared machine hits both
        rounds.append(nw.profile(vm, x, RUNS // ROUNDS))
        ort.run(RUNS // ROUNDS)
    mine, layer_symbols = defaultdict(float), set()
    for t in tasks:
        symbol = nw.task_symbol(rounds[0]["calls"], t.name)
        if symbol is not None and t.policy == "tvm_ttile":
            mine[t.shape] += statistics.median(r["calls"][symbol]["ms"] for r in rounds)
            layer_symbols.add(symbol)
    mine_other = defaultdict(float)
    for symbol in set().union(*(r["calls"] for r in rounds)) - layer_symbols:
        mine_other[_kind(symbol)] += statistics.median(r["calls"].get(symbol, {"ms": 0.0})["ms"] for r in rounds)
    inside_total = statistics.median(r["total_ms"] for r in rounds)
    theirs, theirs_other, ort_total = ort.layers()
    rows, keys = [], sorted(set(mine) | set(theirs), key=lambda k: -max(mine.get(k, 0), theirs.get(k, 0)))
    for k in keys:
        a, b = mine.get(k), theirs.get(k)
        rows.append(f"| {k} | " + (f"{a:.3f}" if a else "-") + " | " + (f"{b:.3f}" if b else "-") + " | "
                    + (f"{a / b:.2f}" if a and b else "-") + " |")
    ours_sum, theirs_sum = sum(mine.values()), sum(theirs.values())
    other_rows = [f"| tvm_ttile | {k} | {v:.3f} |" for k, v in sorted(mine_other.items(), key=lambda kv: -kv[1])]
    other_rows += [f"| ONNX Runtime | {k} | {v:.3f} |" for k, v in sorted(theirs_other.items(), key=lambda kv: -kv[1])]
    ours_rest = inside_total - ours_sum - sum(mine_other.values())
    theirs_rest = ort_total - theirs_sum - sum(theirs_other.values())
    threads = f"{args.threads} thread" + ("s" if args.threads > 1 else "")
    lines = [f"# {model}: layer times inside the network, tvm_ttile vs ONNX Runtime ({threads})", "",
             f"Command: `{command_line()}`; {host.name} ({host.isa.name}); "
             f"{RUNS} inferences each, in {ROUNDS} alternating rounds; medians; tvm_ttile: the database in the work "
             "dir, timed by the Relax VM's instrument hook; ONNX Runtime: its profiler's kernel times (node names differ, so layers are matched by "
             "shape; calls of one shape are added up).", "",
             "| layer shape | tvm_ttile ms | ONNX Runtime ms | ratio |", "|---|---:|---:|---:|", *rows, "",
             f"Conv2d/dense layers: tvm_ttile {ours_sum:.2f} ms, ONNX Runtime {theirs_sum:.2f} ms. Whole inference "
             f"(with the profilers on): tvm_ttile {inside_total:.2f} ms, ONNX Runtime {ort_total:.2f} ms.", "",
             "The rest of an inference, by kind of work (ms per inference, all calls; tvm_ttile: the other "
             "compiled functions, named by what they fuse, and the VM's builtins; ONNX Runtime: its other nodes by "
             "operator type, e.g. ReorderInput/ReorderOutput, its layout changes around NCHWc convolutions):", "",
             "| system | work | ms |", "|---|---|---:|", *other_rows, "",
             f"Other work in all: tvm_ttile {sum(mine_other.values()):.2f} ms, ONNX Runtime "
             f"{sum(theirs_other.values()):.2f} ms; not in any call or node (the profiler's own cost, the runtime "
             f"between calls): tvm_ttile {ours_rest:.2f} ms, ONNX Runtime {theirs_rest:.2f} ms."]
    out = args.out or os.path.join(os.path.dirname(os.path.dirname(os.path.normpath(work_dir))),
                                   f"layer_times_{model}.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
