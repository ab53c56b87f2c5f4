"""Export a torchvision classification model (its definition, seeded random weights) to ONNX, opset 17, batch 1,
224x224: the form users hand to ONNX Runtime, OpenVINO and `tvm-ttile tune-model`. A weight matrix that the
definition initializes to zeros (ViT's classifier head) is drawn instead (normal, std 0.02), so that the outputs
compared across engines are not all zero.

    python benchmarks/tools/torchvision_onnx.py resnet50 resnet50.onnx
    python benchmarks/tools/quantize_model.py resnet50.onnx resnet50_int8.onnx

Needs torch and torchvision (`pip install 'tvm-ttile[libs]' torchvision`). Only the model definitions are used: a
torchvision whose compiled ops do not match the installed torch ("operator torchvision::nms does not exist") is
imported with torch.library.register_fake replaced by a no-op decorator.
"""
from __future__ import annotations

import argparse
import sys


def _torchvision():
    import torch

    try:
        import torchvision
    except RuntimeError as e:  # compiled ops of another torch build: definitions only
        if "does not exist" not in str(e):
            raise
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        real = torch.library.register_fake
        torch.library.register_fake = lambda *a, **k: (lambda f: f)
        try:
            import torchvision
        finally:
            torch.library.register_fake = real
    return torchvision


def export(name: str, out: str, seed: int = 0, size: int = 224) -> str:
    import torch

    torchvision = _torchvision()
    if name not in torchvision.models.list_models(module=torchvision.models):
        sys.exit(f"torchvision_onnx: no classification model {name!r} in torchvision {torchvision.__version__}")
    torch.manual_seed(seed)
    model = torchvision.models.get_model(name, weights=None).eval()
    with torch.no_grad():  # a weight matrix initialized to zeros (ViT's head) would make every output 0
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.normal_(std=0.02)
    x = torch.randn(1, 3, size, size)
    torch.onnx.export(model, (x,), out, input_names=["input"], output_names=["logits"], opset_version=17,
                      dynamo=False)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="a torchvision classification model, e.g. resnet50, mobilenet_v2, convnext_tiny")
    p.add_argument("out", help="the .onnx file to write")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", type=int, default=224, help="input height and width")
    args = p.parse_args(argv)
    print(export(args.model, args.out, args.seed, args.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
