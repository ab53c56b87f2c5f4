"""How far a quantized model's tvm_ttile build is from ONNX Runtime's int8 output, in quantization steps, over many
random inputs: the untuned build (a tuned one equals it element for element, each task verified) against ONNX
Runtime on the same QDQ file. Nothing is timed, so it runs beside other work.

    python benchmarks/tools/int8_agreement.py model_int8.onnx --inputs 40 --out agreement.md
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def agreement(path: str, inputs: int) -> dict:
    """{"elements", "within_one_step", "equal", "beyond_one_step", "max_steps"} over `inputs` seeded inputs."""
    import onnxruntime as ort

    from tvm_ttile import network
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.relax import prepare, quantized

    net = load_model(path)
    step = quantized.output_step(net.onnx_model)
    if not step:
        sys.exit(f"{path}: its output is not quantized (no QuantizeLinear before it): nothing to count in steps")
    vm = network.build_network(prepare(net.mod), None)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    got, ref = [], []
    for seed in range(inputs):
        x = np.random.default_rng(seed).standard_normal(net.input_shape).astype(np.float32)
        got.append(network.run(vm, x).ravel())
        ref.append(session.run(None, {name: x})[0].ravel())
    got, ref = np.concatenate(got), np.concatenate(ref)
    share = quantized.agreement(got, ref, step)
    beyond = int(np.sum(np.abs(got.astype(np.float64) - ref) / step > 1 + 1e-3))
    return {"elements": got.size, "within_one_step": share["within_one_step"], "equal": share["equal"],
            "beyond_one_step": beyond, "max_steps": share["max_steps"]}


def main(argv=None) -> None:
    from tvm_ttile.cpu import detect_host
    from tvm_ttile.evaluation import provenance, publish

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a quantized (QDQ) ONNX file")
    parser.add_argument("--inputs", type=int, default=40, help="random inputs (seeds 0..N-1; default 40)")
    parser.add_argument("--out", help="markdown file to write (default: print)")
    args = parser.parse_args(argv)
    a = agreement(args.model, args.inputs)
    text = "\n".join([provenance(detect_host()), "",
                      f"{args.model}: {a['elements']} output elements over {args.inputs} inputs against ONNX "
                      f"Runtime's int8: {a['within_one_step']:.3%} within one step, {a['equal']:.2%} equal, "
                      f"{a['beyond_one_step']} beyond one step (at most {a['max_steps']:.2f} steps).", ""])
    publish(text, args.out)


if __name__ == "__main__":
    main()
