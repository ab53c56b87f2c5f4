"""Writes a two-layer ONNX model of Inception-v3's factorized 7x7 (a 1x7 then a 7x1 convolution, 64 channels on
17 x 17, ReLUs), to check that whole networks tuned with `tune-model` draw the window microkernels:

    python benchmarks/tools/factorized7_onnx.py /tmp/factorized7.onnx
    tvm-ttile tune-model /tmp/factorized7.onnx --threads 1 --trials-per-task 16 --libraries onnxruntime --work-dir DIR
"""
import argparse


def factorized7(channels: int):
    import torch  # (after parsing: --help needs no torch)

    class Factorized7(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.row = torch.nn.Conv2d(channels, channels, (1, 7), padding=(0, 3))
            self.column = torch.nn.Conv2d(channels, channels, (7, 1), padding=(3, 0))

        def forward(self, x):
            return torch.relu(self.column(torch.relu(self.row(x))))

    return Factorized7()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the .onnx file to write")
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--hw", type=int, default=17)
    args = ap.parse_args()
    import torch

    torch.manual_seed(0)
    torch.onnx.export(factorized7(args.channels).eval(), torch.randn(1, args.channels, args.hw, args.hw), args.out,
                      opset_version=17, dynamo=False)
    print(args.out)


if __name__ == "__main__":
    main()
