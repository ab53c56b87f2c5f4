"""The int8 convolution: O[N, OH, OW, K] (s32) = conv2d of I[N, H, W, C] (u8) with W[R, S, C, K] (s8), NHWC.

As for the int8 matmul (qmatmul.py), the weights are a layer's constants packed once at build time in
`vpdpbusd`'s layout, `[R, S, C'/4, K', 4]`: C' is C in whole groups of 4 (the input gets the same zero channels in
its padding copy), K' is K in whole vectors. The spatial padding holds the input's zero point (`input_zero`), as a
quantized model's padding means the real value 0: the compensation term (input_zero x the sum of a channel's
weights) is then the same at every output position, a constant of the layer. The reference is numpy's int64
convolution, and a result must equal it.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ShapeError, check_positive
from ..precision import get as get_precision
from .base import _Operator, _padded, conv2d_nhwc_reference, normalize_pad
from .conv2d import Conv2d
from .qmatmul import pack_grouped

INT8 = get_precision("int8")


@dataclasses.dataclass(frozen=True)
class QConv2d(_Operator):
    """sum over r, s, c of int32(I[n, h * stride + r * dilation - top, w * stride + s * dilation - left, c]) x
    int32(W[r, s, c, k]), the input padded with `input_zero`: u8 activations, s8 weights, s32 output."""

    K: int
    C: int
    H: int
    W: int
    R: int
    S: int
    stride: int = 1
    pad: int | tuple = 0
    dilation: int = 1
    N: int = 1
    name: str = ""
    input_zero: int = 0  # the u8 input's zero point: what its padding holds
    precision: str = "int8"
    prepack = False  # the weights arrive packed (pack_weights), in the layout the microkernels read

    def __post_init__(self):
        check_positive(K=self.K, C=self.C, H=self.H, W=self.W, R=self.R, S=self.S, stride=self.stride,
                       dilation=self.dilation, N=self.N)
        if self.precision != "int8":
            raise ShapeError(f"QConv2d computes int8 (u8 x s8 -> s32), not {self.precision!r}")
        if not 0 <= self.input_zero <= 255:
            raise ShapeError(f"the u8 input's zero point must be in [0, 255], got {self.input_zero}")
        pads = normalize_pad(self.pad)
        object.__setattr__(self, "pad", pads[0] if len(set(pads)) == 1 else pads)
        if self.out_h <= 0 or self.out_w <= 0:
            raise ShapeError(f"int8 conv2d {self} has an empty output ({self.out_h}x{self.out_w})")

    @classmethod
    def of(cls, conv: Conv2d, input_zero: int = 0) -> "QConv2d":
        """The int8 form of an fp32 Conv2d (one group only, for now)."""
        if conv.groups != 1:
            raise ShapeError(f"a grouped conv2d ({conv.groups} groups) has no int8 form yet")
        return cls(K=conv.K, C=conv.C, H=conv.H, W=conv.W, R=conv.R, S=conv.S, stride=conv.stride, pad=conv.pad,
                   dilation=conv.dilation, N=conv.N, name=conv.name, input_zero=input_zero)

    pads = Conv2d.pads
    out_h = Conv2d.out_h
    out_w = Conv2d.out_w

    @property
    def flops(self) -> int:
        """Operations, a multiply and an add each counting one (as fp32's FLOPs)."""
        return 2 * self.N * self.out_h * self.out_w * self.K * self.C * self.R * self.S

    @property
    def group(self) -> int:
        return INT8.group

    @property
    def output_shape(self) -> tuple:
        return (self.N, self.out_h, self.out_w, self.K)

    def padded_c(self) -> int:
        return -(-self.C // self.group) * self.group

    def operand_shapes(self) -> dict:
        return {"input": (self.N, self.H, self.W, self.C), "weights": (self.R, self.S, self.C, self.K),
                "output": self.output_shape}

    @property
    def operand_bytes(self) -> dict:
        return {"input": self.N * self.H * self.W * self.C, "weights": self.R * self.S * self.C * self.K,
                "output": 4 * int(np.prod(self.output_shape))}

    def packed_shape(self, vector_lanes: int | None = None) -> tuple:
        return (self.R, self.S, self.padded_c() // self.group, _padded(self.K, vector_lanes), self.group)

    def pack_weights(self, w, vector_lanes: int | None = None) -> np.ndarray:
        """W [R, S, C, K] s8 in the instruction's layout [R, S, C'/4, K', 4], zeros in the padding."""
        want = (self.R, self.S, self.C, self.K)
        if w.shape != want or w.dtype != np.int8:
            raise ShapeError(f"int8 weights must be int8 {list(want)}, got {w.dtype} {list(w.shape)}")
        return pack_grouped(w, self.packed_shape(vector_lanes))

    def constant_weights(self, weights, shape):
        return self.pack_weights(weights, shape[3])

    def te(self, vector_lanes: int | None = None):
        """I [N, H, W, C] u8, W packed [R, S, C'/4, K', 4] s8 -> O [N, OH, OW, K] s32; a `pad_temp` stage holds
        the spatial padding (the zero point) and the channels up to C' (zeros: their weights are zero), and
        `O_unpad` drops the padded output channels."""
        from tvm import te

        inp = te.placeholder((self.N, self.H, self.W, self.C), INT8.activation, name="I")
        wgt = te.placeholder(self.packed_shape(vector_lanes), INT8.weight, name="W")
        return inp, wgt, self.compute(inp, wgt)

    def compute(self, inp, wgt):
        """The output tensor of `te` from given input and packed-weight tensors (a Relax rewrite's call_te);
        the weights' vector padding is read from their shape."""
        from tvm import te

        g = self.group
        cp, kp = self.padded_c(), int(wgt.shape[3])
        src = inp
        if any(self.pads) or cp != self.C:
            top, left, bottom, right = self.pads
            zero = te.const(self.input_zero, INT8.activation)
            src = te.compute(
                (self.N, self.H + top + bottom, self.W + left + right, cp),
                lambda n, h, w, c: te.if_then_else(
                    c < self.C, te.if_then_else(te.all(h >= top, h < self.H + top, w >= left, w < self.W + left),
                                                inp[n, h - top, w - left, te.min(c, self.C - 1)], zero),
                    te.const(0, INT8.activation)),
                name="pad_temp")
        r = te.reduce_axis((0, self.R), name="r")
        s = te.reduce_axis((0, self.S), name="s")
        c = te.reduce_axis((0, cp), name="c")
        st, dl = self.stride, self.dilation
        acc = INT8.accumulator
        out = te.compute(
            (self.N, self.out_h, self.out_w, kp),
            lambda n, h, w, k: te.sum(src[n, h * st + r * dl, w * st + s * dl, c].astype(acc)
                                      * wgt[r, s, c // g, k, c % g].astype(acc), axis=[r, s, c]),
            name="conv2d_nhwc")
        if kp != self.K:
            out = te.compute(self.output_shape, lambda n, h, w, k: out[n, h, w, k], name="O_unpad")
        return out

    def random_inputs(self, seed: int = 0):
        """(I, W) uniform over the whole u8 and s8 ranges (the extremes included), reproducible."""
        rng = np.random.default_rng(seed)
        return (rng.integers(0, 256, (self.N, self.H, self.W, self.C), dtype=np.uint8),
                rng.integers(-128, 128, (self.R, self.S, self.C, self.K), dtype=np.int8))

    def reference(self, inp, wgt):
        return conv2d_nhwc_reference(inp, wgt, self.stride, self.pad, self.dilation, pad_value=self.input_zero,
                                     exact=True)
