"""Quantize an fp32 ONNX model to a QDQ int8 model as ONNX Runtime users do (quantize_static: QDQ format,
per-channel s8 weights, u8 activations), calibrated on random inputs or on .npy files of real ones.

    python benchmarks/tools/quantize_model.py resnet18 resnet18_int8.onnx            # a built-in model
    python benchmarks/tools/quantize_model.py model.onnx model_int8.onnx --calibration a.npy,b.npy
    python benchmarks/tools/quantize_model.py resnet18 r18_int8_rr.onnx --reduce-range   # a CPU without VNNI
    python benchmarks/tools/quantize_model.py transformer tr_dyn.onnx --dynamic   # quantize_dynamic, as for BERT
    tvm-ttile tune-model resnet18_int8.onnx --libraries onnxruntime

The calibration inputs decide the activation scales; random normal inputs give scales that are not a trained
model's, which is enough to time the model and check it against ONNX Runtime on the same file.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np


def quantize(source: str, out: str, calibration=(), batches: int = 8, seed: int = 0, fmt: str = "QDQ",
             reduce_range: bool = False) -> str:
    """Write the quantized model of `source` (a built-in model name or an .onnx path) to `out` in `fmt` ("QDQ",
    "QOperator": QLinearConv, QLinearMatMul, ...; or "dynamic": quantize_dynamic's MatMulInteger); with
    `reduce_range`, weights within +-64 (what a CPU without VNNI multiplies exactly: ONNX Runtime's advice for those
    CPUs, and what tvm_ttile's int8 needs there); returns `out`."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    from tvm_ttile.models import zoo

    if source in zoo.MODELS:
        model = zoo.to_onnx(source, seed)
    elif os.path.isfile(source):
        model = onnx.load(source)
    else:
        sys.exit(f"quantize_model: no model {source!r}: give an .onnx file or one of {', '.join(zoo.MODELS)}")
    inp = model.graph.input[0]
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    data = [np.load(p).astype(np.float32) for p in calibration] or \
        [rng.standard_normal(shape).astype(np.float32) for _ in range(batches)]
    for d in data:
        if list(d.shape) != shape:
            sys.exit(f"quantize_model: a calibration input is shaped {list(d.shape)}, the model takes {shape}")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{inp.name: d} for d in data])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = os.path.join(tmp, "fp32.onnx")
        onnx.save(model, fp32)
        if fmt == "dynamic":  # activations quantized per inference (DynamicQuantizeLinear, MatMulInteger)
            quantize_dynamic(fp32, out, weight_type=QuantType.QInt8, reduce_range=reduce_range)
            return out
        quantize_static(fp32, out, Reader(), quant_format=getattr(QuantFormat, fmt), per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, reduce_range=reduce_range)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="a built-in model name (tvm-ttile tune-model's) or an fp32 .onnx file")
    p.add_argument("out", help="the QDQ .onnx file to write")
    p.add_argument("--calibration", default="", help="comma-separated .npy inputs (default: random normal ones)")
    p.add_argument("--batches", type=int, default=8, help="random calibration inputs (without --calibration)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", choices=["QDQ", "QOperator"], default="QDQ",
                   help="QDQ (Quantize/DequantizeLinear pairs, the default) or QOperator (QLinearConv, ...)")
    p.add_argument("--dynamic", action="store_true",
                   help="quantize_dynamic: activations quantized per inference (no calibration), as for transformers")
    p.add_argument("--reduce-range", action="store_true",
                   help="weights within +-64 (7 bits): what a CPU without VNNI multiplies exactly")
    args = p.parse_args(argv)
    files = [f for f in args.calibration.split(",") if f]
    fmt = "dynamic" if args.dynamic else args.format
    print(quantize(args.model, args.out, files, args.batches, args.seed, fmt, args.reduce_range))
    return 0


if __name__ == "__main__":
    sys.exit(main())
