"""How much bf16 Winograd would lose against direct bf16 (numpy only, nothing timed): one 3x3 layer's tiles (C input
channels, He-scaled random weights, standard-normal input), computed exactly in float64, as a direct bf16 convolution
(input and weights rounded to bf16, exact sums) and as F(m, 3) with its transformed operands V and U rounded to bf16
(the transforms in fp32 and the (m+2)^2 GEMMs in bf16, the form a bf16 Winograd would take). Errors over the exact
output's scale.

    python benchmarks/experiments/winograd_bf16_error.py --out benchmarks/results/bf16_zen4/winograd_bf16_error.md
"""
from __future__ import annotations

import argparse

import numpy as np

from tvm_ttile import bfloat16
from tvm_ttile.winograd import TILE_SIZES, transform_matrices


def _bf16(x):
    return bfloat16.values(bfloat16.bits(x.astype(np.float32))).astype(np.float64)


def errors(m: int, channels: int, tiles: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    A, B, G = transform_matrices(m)
    d = rng.standard_normal((tiles, channels, m + 2, m + 2))
    g = rng.standard_normal((channels, 3, 3)) / np.sqrt(9 * channels)

    def conv(d, g, round_transformed=False):
        U = np.einsum("ij,cjk,lk->cil", G, g, G)
        V = np.einsum("ji,tcjk,kl->tcil", B, d, B)
        if round_transformed:
            U, V = _bf16(U), _bf16(V)
        return np.einsum("ji,tjk,kl->til", A, (U[None] * V).sum(1), A)

    exact = conv(d, g)
    scale = float(np.abs(exact).max())
    out = {}
    for name, got in (("direct bf16", conv(_bf16(d), _bf16(g))), (f"F({m},3) bf16", conv(d, g, True))):
        err = got - exact
        out[name] = (float(np.abs(err).max()) / scale, float(np.sqrt((err ** 2).mean())) / scale)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--channels", type=int, default=128)
    ap.add_argument("--tiles", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = [f"Command: `python benchmarks/experiments/winograd_bf16_error.py --channels {args.channels} --tiles "
             f"{args.tiles} --seed {args.seed}` (numpy, no timing: machine-independent)", "",
             "| form | max error / scale | rms error / scale |", "|---|---:|---:|"]
    for m in TILE_SIZES:
        for name, (mx, rms) in errors(m, args.channels, args.tiles, args.seed).items():
            lines.append(f"| {name} (tiles of F({m},3)) | {mx:.4f} | {rms:.5f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
