"""Inference engines a whole network is compared with (ONNX Runtime, OpenVINO, torch): each an Engine that knows
the form of the model it runs, how that form is saved for timing in a process of its own (tvm_ttile.isolated),
and how it opens a saved model into one inference, `run(x=the input given) -> numpy array`.

    engine = create("openvino")
    path = engine.save(engine.model_of(net), x, tmp_dir)  # the file the timing process reads
    run, version = engine.open(path, net.input_name, x, threads=1)

OpenVINO is two engines: "openvino" at its default inference precision (bf16 on a CPU with AVX512_BF16, what a
user of it gets) and "openvino-fp32" with fp32 forced; the version string says the precision it compiled for.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

import numpy as np

from ..errors import TTileError


@dataclasses.dataclass(frozen=True)
class ModelForm:
    """A form of a network a library runs: the models.importers.Network attribute holding it, and its file."""
    attribute: str  # "onnx_model" or "torch_module"
    file_name: str
    save: Callable  # (model, x, path) -> None
    load: Callable  # path -> what an engine opens


def _save_onnx(model, x, path):
    with open(path, "wb") as f:
        f.write(model.SerializeToString())


def _save_torch(module, x, path):
    import torch

    torch.export.save(torch.export.export(module, (torch.from_numpy(x),)), path)


def _load_torch(path):
    import torch

    return torch.export.load(path).module()


ONNX = ModelForm("onnx_model", "model.onnx", _save_onnx, lambda path: path)
TORCH = ModelForm("torch_module", "model.pt2", _save_torch, _load_torch)


def onnxruntime_runner(model, input_name, x, threads=1):
    """(run, version): `run()` is one inference of ONNX Runtime's CPU provider on `x` (or `run(other)`),
    returning the first output; `model` is an onnx.ModelProto or an .onnx path."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    source = model if isinstance(model, str) else model.SerializeToString()
    sess = ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    return (lambda inp=x: sess.run(None, {input_name: inp})[0]), f"onnxruntime {ort.__version__}"


def openvino_runner(model, input_name, x, threads=1, precision=None):
    """(run, version) of OpenVINO's CPU plugin on an .onnx path or onnx.ModelProto, latency mode on `threads`
    threads; `precision` an INFERENCE_PRECISION_HINT ("f32") or None for the plugin's default. A QDQ model's
    quantized layers run in int8 either way (the hint is for the float ones)."""
    import openvino as ov

    core = ov.Core()
    source = model if isinstance(model, str) else model.SerializeToString()
    config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}
    if precision:
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = core.compile_model(core.read_model(source), "CPU", config)
    request, output = compiled.create_infer_request(), compiled.output(0)
    used = compiled.get_property("INFERENCE_PRECISION_HINT")
    return (lambda inp=x: np.array(request.infer({input_name: inp})[output])), \
        f"openvino {ov.__version__} ({FLOAT_LAYERS}{used})"


FLOAT_LAYERS = "float layers in "  # how a runner's version names the precision of its float layers


def reduced_float_precision(version: str) -> bool:
    """Whether a runner's version says its float layers compute in less than fp32 (OpenVINO's default on an
    AVX512_BF16 CPU: bf16)."""
    used = version.split(FLOAT_LAYERS, 1)[1] if FLOAT_LAYERS in version else ""
    return any(name in used for name in ("bf16", "bfloat16", "f16", "float16"))  # "<Type: 'bfloat16'>" in 2026.4


def torch_runner(module, x, threads=1):
    """(run, version): `run()` is one inference of a torch.nn.Module (or an exported program's module) in
    inference mode (oneDNN), returning a numpy array."""
    import torch

    torch.set_num_threads(threads)
    xt = torch.from_numpy(x)

    def run(inp=None):
        with torch.inference_mode():
            return module(xt if inp is None else torch.from_numpy(inp)).numpy()

    return run, f"torch {torch.__version__}"


@dataclasses.dataclass(frozen=True)
class Engine:
    """A library that runs a whole network: its name, the model form it runs, and `runner(model, input_name, x,
    threads) -> (run, version)` on that form (a file's loaded content or the model itself)."""
    name: str
    form: ModelForm
    runner: Callable
    module: str  # the Python module it needs (for the one-line "not installed" note)

    def model_of(self, net):
        """The network in this engine's form, or None when the network has none."""
        return getattr(net, self.form.attribute, None)

    def save(self, model, x: np.ndarray, directory: str) -> str:
        """Writes `model` (in this engine's form; `x` the input a torch export traces) to `directory`: its path."""
        path = os.path.join(directory, f"{self.name}_{self.form.file_name}")
        self.form.save(model, x, path)
        return path

    def open(self, path: str, input_name: str, x: np.ndarray, threads: int = 1) -> tuple:
        return self.runner(self.form.load(path), input_name, x, threads)

    def runner_for(self, net, x: np.ndarray, threads: int = 1) -> tuple:
        """(run, version) on the network in memory (no file)."""
        return self.runner(self.model_of(net), net.input_name, x, threads)


ENGINES = {e.name: e for e in (
    Engine("onnxruntime", ONNX, onnxruntime_runner, "onnxruntime"),
    Engine("openvino", ONNX, openvino_runner, "openvino"),
    Engine("openvino-fp32", ONNX, lambda m, n, x, t=1: openvino_runner(m, n, x, t, precision="f32"), "openvino"),
    Engine("torch", TORCH, lambda m, n, x, t=1: torch_runner(m, x, t), "torch"),
)}


def latency_ms(run, repeat=5, min_seconds=0.2) -> list:
    """Milliseconds per inference in each of `repeat` repeats of at least `min_seconds` each."""
    from .libraries import _repeats

    return [1e3 * t for t in _repeats(run, repeat, min_seconds)]


def create(name: str) -> Engine:
    if name not in ENGINES:
        raise TTileError(f"unknown library {name!r}; choose from {', '.join(ENGINES)}")
    return ENGINES[name]
