"""How far a quantized model's tvm_ttile build is from ONNX Runtime's int8 output, in quantization steps, over many
random inputs: the untuned build (or a tuned one: --work-dir) against ONNX Runtime on the same QDQ file, both as it
runs by default (its graph optimizations fuse quantized kernels, a softmax's among them) and running the graph as
written (optimizations off: every node as ONNX defines it), and ONNX Runtime's two runs against each other. Nothing
is timed, so it runs beside other work.

    python benchmarks/tools/int8_agreement.py model_int8.onnx [--work-dir TUNED] --inputs 40 --out agreement.md
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def agreement(path: str, inputs: int, work_dir: str | None = None) -> dict:
    """{comparison: {"elements", "within_one_step", "equal", "beyond_one_step", "max_steps"}} over `inputs` seeded
    inputs, for "tvm_ttile vs onnxruntime", "tvm_ttile vs onnxruntime as written" and "onnxruntime vs onnxruntime
    as written"."""
    import onnxruntime as ort

    from tvm_ttile import network
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.relax import prepare, quantized

    net = load_model(path)
    step = quantized.output_step(net.onnx_model)
    if not step:
        sys.exit(f"{path}: its output is not quantized (no QuantizeLinear before it): nothing to count in steps")
    vm = network.build_network(prepare(net.mod), work_dir)
    written = ort.SessionOptions()
    written.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sessions = [ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
                for options in (ort.SessionOptions(), written)]
    name = sessions[0].get_inputs()[0].name
    got, ref, ref_written = [], [], []
    for seed in range(inputs):
        x = np.random.default_rng(seed).standard_normal(net.input_shape).astype(np.float32)
        got.append(network.run(vm, x).ravel())
        ref.append(sessions[0].run(None, {name: x})[0].ravel())
        ref_written.append(sessions[1].run(None, {name: x})[0].ravel())
    got, ref, ref_written = (np.concatenate(v) for v in (got, ref, ref_written))

    def counted(a, b):
        share = quantized.agreement(a, b, step)
        beyond = int(np.sum(np.abs(a.astype(np.float64) - b) / step > 1 + 1e-3))
        return {"elements": a.size, "within_one_step": share["within_one_step"], "equal": share["equal"],
                "beyond_one_step": beyond, "max_steps": share["max_steps"]}

    return {"tvm_ttile vs onnxruntime": counted(got, ref),
            "tvm_ttile vs onnxruntime as written": counted(got, ref_written),
            "onnxruntime vs onnxruntime as written": counted(ref, ref_written)}


def main(argv=None) -> None:
    from tvm_ttile.cpu import detect_host
    from tvm_ttile.evaluation import provenance, publish

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a quantized (QDQ) ONNX file")
    parser.add_argument("--inputs", type=int, default=40, help="random inputs (seeds 0..N-1; default 40)")
    parser.add_argument("--work-dir", help="a tune-model work dir of this model: its tuned build (default: untuned)")
    parser.add_argument("--out", help="markdown file to write (default: print)")
    args = parser.parse_args(argv)
    found = agreement(args.model, args.inputs, args.work_dir)
    build = f"tuned ({args.work_dir})" if args.work_dir else "untuned"
    lines = [provenance(detect_host()), "", f"{args.model}, tvm_ttile's build {build}, {args.inputs} inputs, in steps of "
             "the output's quantization:", "",
             "| comparison | elements | within one step | equal | beyond one step | at most (steps) |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {label} | {a['elements']} | {a['within_one_step']:.3%} | {a['equal']:.2%} | {a['beyond_one_step']} | "
              f"{a['max_steps']:.2f} |" for label, a in found.items()]
    publish("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
