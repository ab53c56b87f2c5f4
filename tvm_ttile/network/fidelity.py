"""A quantized network against the fp32 model it was quantized from: over many random inputs, how often each
int8 system's top class is the fp32 model's, and how far its outputs are, relative to the fp32 output's scale.

Quantization, not the integer kernels, decides this: tvm_ttile's int8 output equals ONNX Runtime's to a step
(quantized.agreement), so each library running the same QDQ file is measured beside it on the same inputs.
"""
from __future__ import annotations

import numpy as np

FP32_INPUTS = 100  # the and the usual count for a top-1 agreement on random inputs


def against_fp32(systems: dict, fp32_run, input_shape, *, inputs: int = FP32_INPUTS, seed: int = 0) -> dict:
    """`systems`: {name: run(x) -> output} of the quantized model; `fp32_run(x)`: the fp32 model's. Returns
    {"inputs", "seed", "systems": {name: {"top1_agreement", "max_error_over_scale", "median_error_over_scale"}}}
    over `inputs` standard-normal inputs drawn from `seed` (the error of one input: max |out - fp32| over
    max |fp32|; top1_agreement None when the output is not [batch, classes])."""
    rng = np.random.default_rng(seed)
    top1 = {name: 0 for name in systems}
    errors = {name: [] for name in systems}
    classes = True  # a top class only where the output is [batch, classes] (not a transformer's tokens)
    for _ in range(inputs):
        x = rng.standard_normal(input_shape).astype(np.float32)
        ref = np.asarray(fp32_run(x), np.float64)
        classes = classes and ref.ndim == 2
        scale = float(np.max(np.abs(ref))) or 1.0
        for name, run in systems.items():
            out = np.asarray(run(x), np.float64)
            if classes:
                top1[name] += int(np.argmax(out, 1).tolist() == np.argmax(ref, 1).tolist())
            errors[name].append(float(np.max(np.abs(out - ref))) / scale)
    return {"inputs": inputs, "seed": seed, "systems": {
        name: {"top1_agreement": top1[name] / inputs if classes else None, "max_error_over_scale": max(errors[name]),
               "median_error_over_scale": float(np.median(errors[name]))} for name in systems}}


def format_lines(result: dict, fp32_source: str) -> list:
    """The report's lines for `against_fp32`'s result."""
    return [f"Against the fp32 model ({fp32_source}, {result.get('reference', 'its untuned TVM build')}) over {result['inputs']} random inputs: "
            + "; ".join(f"{name} " + _system_line(v) for name, v in result["systems"].items()) + "."]


def _system_line(v: dict) -> str:
    top1 = f"top-1 {100 * v['top1_agreement']:.0f}% agree, " if v["top1_agreement"] is not None else ""
    return f"{top1}error / scale median {v['median_error_over_scale']:.3f}, max {v['max_error_over_scale']:.3f}"
