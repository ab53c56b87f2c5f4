"""The int8 depthwise convolution, NHWC: O[N, OH, OW, C] = sum over r, s of I[n, h, w, c] x W[r, s, c] for a u8
input padded with its zero point and s8 weights, computed exactly in fp32 lanes.

A dot-product instruction has nothing to fold here: each output channel reduces over its own R x S window, not
over groups of input channels. So the depthwise microkernels read the u8 input itself and widen each vector as they
load it (microkernels.spec.WIDENED_INPUTS; a tile inside the input reads it in place) and multiply it by the s8
weights held as floats, the layer's constants. Every product and partial sum is an integer below 2^24 in magnitude
(`EXACT_TAPS`), so fp32 holds it exactly: the result equals the integer convolution. As for QConv2d, the
padding holds the input's zero point, so the compensation (zero point x the sum of a channel's weights) is the same
at every output position: the caller's constant. The layer before writes u8, a quarter of fp32's bytes. Rates are
fp32's: they count the fp32 lanes the microkernels use.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ShapeError
from .base import _pad_at_end, conv2d_nhwc_reference
from .conv2d import Depthwise

# The most window taps whose sum of (u8 - zero point) x s8 products fp32 holds exactly: 255 x 128 x taps < 2^24
EXACT_TAPS = (1 << 24) // (255 * 128)


@dataclasses.dataclass(frozen=True)
class QDepthwise(Depthwise):
    """Depthwise of a u8 input padded with its zero point `input_zero` and s8 weights [R, S, C], the result
    exact (module doc)."""

    input_zero: int = 0
    prepack: bool = True  # weights are a quantized layer's constants
    input_dtype = "uint8"
    widened_input = "u8"
    data_precision = "int8"

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.input_zero <= 255:
            raise ShapeError(f"the u8 input's zero point must be in [0, 255], got {self.input_zero}")
        if self.R * self.S > EXACT_TAPS:
            raise ShapeError(f"an int8 depthwise window of {self.R}x{self.S} taps sums beyond what fp32 holds "
                             f"exactly (at most {EXACT_TAPS} taps)")

    @classmethod
    def of(cls, op: Depthwise, input_zero: int = 0) -> "QDepthwise":
        return cls(C=op.C, H=op.H, W=op.W, R=op.R, S=op.S, stride=op.stride, pad=op.pad, dilation=op.dilation,
                   N=op.N, name=op.name, input_zero=input_zero)

    def widen(self, value):
        return value.astype("float32")

    def padding_value(self):
        from tvm import te

        return te.const(self.input_zero, "uint8")

    def compensated(self, inp, wgt, compensation):
        """The output of `compute` less `compensation[c]` (the zero point x channel c's weight sum: the integer
        convolution of I - input_zero, exact), as a quantized network's task computes it."""
        from tvm import te

        out = self.compute(inp, wgt)
        return te.compute(out.shape, lambda n, h, w, c: out[n, h, w, c] - compensation[c], name="compensated")

    @property
    def operand_bytes(self) -> dict:
        """The u8 input's bytes; the weights and the output are floats."""
        return {**super().operand_bytes, "input": int(np.prod(self.operand_shapes()["input"]))}

    def constant_weights(self, weights, shape):
        """s8 weights [R, S, C] as the floats the kernel multiplies, zeros up to `shape` (whole vectors)."""
        return _pad_at_end(check_int8(weights).astype(np.float32), shape)

    def random_inputs(self, seed: int = 0):
        """(I, W): u8 over its whole range, s8 values over theirs (the extremes included) as the floats the kernel
        takes; reproducible."""
        rng = np.random.default_rng(seed)
        shapes = self.operand_shapes()
        return (rng.integers(0, 256, shapes["input"], dtype=np.uint8),
                rng.integers(-128, 128, shapes["weights"]).astype(np.float32))

    def reference(self, inp, wgt):
        """numpy's int64 convolution of I padded with input_zero, as the fp32 the kernel writes."""
        out = conv2d_nhwc_reference(inp, check_int8(wgt)[:, :, None, :], self.stride, self.pad, self.dilation,
                                    groups=self.C, pad_value=self.input_zero, exact=True)
        return out.astype(np.float32)


def check_int8(weights) -> np.ndarray:
    weights = np.asarray(weights)
    if weights.dtype != np.int8 and (weights.size and (np.any(weights != np.round(weights))
                                                       or weights.min() < -128 or weights.max() > 127)):
        raise ShapeError(f"int8 depthwise weights must be s8 values, got {weights.dtype} in "
                         f"[{weights.min()}, {weights.max()}]")
    return weights
