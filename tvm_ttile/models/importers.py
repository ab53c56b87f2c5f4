"""From an ONNX file, an onnx.ModelProto, a built-in model name or a torch.nn.Module to a Relax module."""
from __future__ import annotations

import dataclasses
import os

from ..errors import TTileError


@dataclasses.dataclass
class Network:
    name: str
    mod: object  # tvm.IRModule (Relax, NCHW as imported; weights bound as constants)
    input_name: str
    input_shape: tuple
    onnx_model: object = None  # onnx.ModelProto when the network came through ONNX (for ONNX Runtime)
    torch_module: object = None  # torch.nn.Module when there is one (built-in models with torch installed)


def load_model(source, input_shape=None, seed: int = 0) -> Network:
    """`source`: a built-in model name (see models.zoo.MODELS), a path to an .onnx file, an onnx.ModelProto,
    or a torch.nn.Module (then `input_shape` is required)."""
    from . import zoo

    if isinstance(source, str) and source in zoo.MODELS:
        torch_module = None
        try:
            torch_module = zoo.to_torch(source, seed)
        except ImportError:
            pass  # torch is optional: the ONNX path does not need it
        return _from_onnx(zoo.to_onnx(source, seed, input_shape), source, None, torch_module)
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not os.path.isfile(path):
            what = "a directory" if os.path.isdir(path) else "no such file"
            raise TTileError(f"no model {path!r} ({what}): give an .onnx file or one of {', '.join(zoo.MODELS)}")
        import onnx
        from google.protobuf.message import DecodeError

        try:
            model = onnx.load(path)
        except (DecodeError, ValueError, UnicodeDecodeError) as e:
            raise TTileError(f"{path} is not an ONNX model ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
        return _from_onnx(model, os.path.splitext(os.path.basename(path))[0], input_shape)
    if type(source).__name__ == "ModelProto":
        return _from_onnx(source, source.graph.name or "onnx", input_shape)
    if hasattr(source, "forward"):
        return _from_torch(source, input_shape)
    raise TTileError(f"cannot import a {type(source).__name__}: give an .onnx path, an onnx.ModelProto, "
                     f"a torch.nn.Module or one of {', '.join(zoo.MODELS)}")


def _from_onnx(model, name, input_shape=None, torch_module=None) -> Network:
    from tvm.relax.frontend.onnx import from_onnx

    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise TTileError(f"{name}: tvm_ttile handles networks with one input; this one has {len(inputs)}")
    inp = inputs[0]
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    shape = tuple(input_shape) if input_shape else tuple(dims)
    if input_shape and len(shape) != len(dims):
        raise TTileError(f"{name}: input {inp.name!r} has {len(dims)} dimensions {dims}; the input shape given has "
                         f"{len(shape)}: {list(shape)}")
    if None in shape or not shape:
        raise TTileError(f"{name}: input {inp.name!r} has dynamic shape {dims}; pass input_shape (--input-shape)")
    from . import qoperators, shape_folding

    # TVM's importer has no QLinearConv and the like: it reads their QDQ form (the libraries run the model as given)
    readable = qoperators.as_qdq(model) if qoperators.has_qoperators(model) else model
    if shape_folding.needs_folding(readable):  # shapes computed in the graph, which TVM's importer cannot follow
        readable = shape_folding.fold(readable, inp.name, shape, name)
    mod = from_onnx(readable, shape_dict={inp.name: list(shape)}, keep_params_in_input=False)
    return Network(name, mod, inp.name, shape, onnx_model=model, torch_module=torch_module)


def _from_torch(module, input_shape) -> Network:
    if not input_shape:
        raise TTileError("a torch.nn.Module needs input_shape (e.g. (1, 3, 224, 224))")
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    example = (torch.randn(*input_shape),)
    with torch.no_grad():
        exported = torch.export.export(module.eval(), example)
    mod = from_exported_program(exported, keep_params_as_input=False)
    return Network(type(module).__name__, mod, "input", tuple(input_shape), torch_module=module)
