"""The convolution on a dot-product instruction, NHWC: int8, O[N, OH, OW, K] (s32) = conv2d of I[N, H, W, C] (u8)
with W[R, S, C, K] (s8); bf16, the same of bf16 input and weights into fp32.

As for the matmul (qmatmul.py), the weights are a layer's constants packed once at build time in the instruction's
layout, `[R, S, C'/g, K', g]`: C' is C in whole groups of g (the input gets the same zero channels in its padding
copy), K' is K in whole vectors; a grouped convolution (`groups`, as Conv2d's) pads each group's input channels and
outputs on their own, and output channel k reads its group's inputs. For int8 the spatial padding holds the input's
zero point (`input_zero`), as a quantized model's padding means the real value 0: the compensation term (input_zero
x the sum of a channel's weights) is then the same at every output position, a constant of the layer. The int8
reference is numpy's int64 convolution, and a result must equal it; bf16's is the float64 convolution of the same
bf16 values.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .. import bfloat16
from ..errors import ShapeError, check_positive
from .base import _Operator, _padded, check_groups, conv2d_nhwc_reference, normalize_pad
from .conv2d import Conv2d
from .qmatmul import (QMatmul, bf16_values, check_float_input, check_grouped, check_weight_limit, input_dtype,
                      pack_grouped, random_operands, weights_of)


@dataclasses.dataclass(frozen=True)
class QConv2d(_Operator):
    """sum over r, s, c of wide(I[n, h * stride + r * dilation - top, w * stride + s * dilation - left, c]) x
    wide(W[r, s, c, k]), the input padded with `input_zero`: int8's u8 activations and s8 weights to s32, or bf16's
    to fp32 (`precision`)."""

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
    groups: int = 1  # C / groups input channels per group of K / groups outputs (Conv2d's)
    # bf16: the input arrives in fp32 and is rounded to bf16 in the kernel's input copy (a network's activations)
    float_input: bool = False
    weight_limit: int = 128  # int8: the largest |weight| (as QMatmul's)
    # the weights are constants (_prim_func marks them layout-free), given in the instruction's layout
    # (pack_weights) and blocked by lowering at build time (packing.pack_weights)
    prepack = True

    def __post_init__(self):
        check_positive(K=self.K, C=self.C, H=self.H, W=self.W, R=self.R, S=self.S, stride=self.stride,
                       dilation=self.dilation, N=self.N, groups=self.groups)
        check_groups(self, f"{self.precision} conv2d", "operators.QDepthwise")
        check_grouped(self)
        check_float_input(self)
        check_weight_limit(self)
        if not 0 <= self.input_zero <= (255 if self.kind.exact else 0):
            raise ShapeError(f"the {self.precision} input's zero point must be in "
                             f"[0, {255 if self.kind.exact else 0}], got {self.input_zero}")
        pads = normalize_pad(self.pad)
        object.__setattr__(self, "pad", pads[0] if len(set(pads)) == 1 else pads)
        if self.out_h <= 0 or self.out_w <= 0:
            raise ShapeError(f"int8 conv2d {self} has an empty output ({self.out_h}x{self.out_w})")

    @classmethod
    def of(cls, conv: Conv2d, input_zero: int = 0, precision: str = "int8", float_input: bool = False) -> "QConv2d":
        """The `precision` form of an fp32 Conv2d."""
        return cls(K=conv.K, C=conv.C, H=conv.H, W=conv.W, R=conv.R, S=conv.S, stride=conv.stride, pad=conv.pad,
                   dilation=conv.dilation, N=conv.N, name=conv.name, input_zero=input_zero, precision=precision,
                   float_input=float_input, groups=conv.groups)

    pads = Conv2d.pads
    out_h = Conv2d.out_h
    out_w = Conv2d.out_w

    @property
    def flops(self) -> int:
        """Operations, a multiply and an add each counting one (as fp32's FLOPs)."""
        return 2 * self.N * self.out_h * self.out_w * self.K * (self.C // self.groups) * self.R * self.S

    kind = QMatmul.kind

    @property
    def group(self) -> int:
        return self.kind.group

    @property
    def output_shape(self) -> tuple:
        return (self.N, self.out_h, self.out_w, self.K)

    def padded_c(self) -> int:
        """A group's input channels in whole groups of the instruction's g."""
        return -(-(self.C // self.groups) // self.group) * self.group

    def operand_shapes(self) -> dict:
        return {"input": (self.N, self.H, self.W, self.C), "weights": self._weight_shape, "output": self.output_shape}

    @property
    def _weight_shape(self) -> tuple:
        return (self.R, self.S, self.C // self.groups, self.K)

    @property
    def operand_bytes(self) -> dict:
        size = np.dtype(self.kind.activation).itemsize
        return {"input": (4 if self.float_input else size) * self.N * self.H * self.W * self.C,
                "weights": size * int(np.prod(self._weight_shape)),
                "output": 4 * int(np.prod(self.output_shape))}

    def packed_shape(self, vector_lanes: int | None = None) -> tuple:
        kg = _padded(self.K // self.groups, vector_lanes)
        return (self.R, self.S, self.padded_c() // self.group, self.groups * kg, self.group)

    def pack_weights(self, w, vector_lanes: int | None = None) -> np.ndarray:
        """W [R, S, C / groups, K] (int8: s8; bf16: its bits, or fp32 rounded to them) in the instruction's layout
        [R, S, C'/g, K', g] (C' a group's input channels in whole g, K' each group's outputs in whole vectors),
        zeros in the padding."""
        w = weights_of(self, w, self._weight_shape)
        shape = self.packed_shape(vector_lanes)
        if self.groups > 1:  # each group's outputs padded on their own
            r, s, cg, k = w.shape
            split = np.zeros((r, s, cg, self.groups, shape[3] // self.groups), w.dtype)
            split[..., :k // self.groups] = w.reshape(r, s, cg, self.groups, k // self.groups)
            w = split.reshape(r, s, cg, shape[3])
        return pack_grouped(w, shape)

    def constant_weights(self, weights, shape):
        return self.pack_weights(weights, shape[3] // self.groups)

    def te(self, vector_lanes: int | None = None):
        """I [N, H, W, C], W packed [R, S, C'/g, K', g] -> O [N, OH, OW, K]; a `pad_temp` stage holds the spatial
        padding (the zero point) and the channels up to C' (zeros: their weights are zero), and `O_unpad` drops
        the padded output channels."""
        from tvm import te

        inp = te.placeholder((self.N, self.H, self.W, self.C), input_dtype(self), name="I")
        wgt = te.placeholder(self.packed_shape(vector_lanes), self.kind.weight, name="W")
        return inp, wgt, self.compute(inp, wgt)

    def compute(self, inp, wgt):
        """The output tensor of `te` from given input and packed-weight tensors (a Relax rewrite's call_te);
        the weights' vector padding is read from their shape."""
        from tvm import te

        g, p, groups = self.group, self.kind, self.groups
        cp, kp, cg, kg = self.padded_c(), int(wgt.shape[3]), self.C // groups, self.K // groups
        kgp = kp // groups
        src = inp
        read = bfloat16.te_bits if self.float_input else (lambda v: v)
        # a group's input channels padded to whole g on their own (zeros: their weights are zero)
        channel = (lambda c: te.min(c, self.C - 1)) if groups == 1 else \
            (lambda c: c // cp * cg + te.min(c % cp, cg - 1))  # noqa: E731
        if any(self.pads) or cp != cg or self.float_input:
            top, left, bottom, right = self.pads
            zero = te.const(self.input_zero, p.activation)
            src = te.compute(
                (self.N, self.H + top + bottom, self.W + left + right, groups * cp),
                lambda n, h, w, c: te.if_then_else(
                    (c if groups == 1 else c % cp) < cg,
                    te.if_then_else(te.all(h >= top, h < self.H + top, w >= left, w < self.W + left),
                                    read(inp[n, h - top, w - left, channel(c)]), zero),
                    te.const(0, p.activation)),
                name="pad_temp")
        r = te.reduce_axis((0, self.R), name="r")
        s = te.reduce_axis((0, self.S), name="s")
        c = te.reduce_axis((0, cp), name="c")
        st, dl = self.stride, self.dilation
        chan = (lambda k: c) if groups == 1 else (lambda k: k // kgp * cp + c)  # noqa: E731 - the group's inputs
        out = te.compute(
            (self.N, self.out_h, self.out_w, kp),
            lambda n, h, w, k: te.sum(p.widen(src[n, h * st + r * dl, w * st + s * dl, chan(k)])
                                      * p.widen(wgt[r, s, c // g, k, c % g]), axis=[r, s, c]),
            name="conv2d_nhwc" if groups == 1 else "group_conv2d_nhwc")
        if kp != self.K:
            at = (lambda k: k) if groups == 1 else (lambda k: k // kg * kgp + k % kg)  # noqa: E731
            out = te.compute(self.output_shape, lambda n, h, w, k: out[n, h, w, at(k)], name="O_unpad")
        return out

    def random_inputs(self, seed: int = 0):
        """(I, W): int8 uniform over the whole u8 range and the weights' (the extremes included); bf16 normal values
        rounded to bf16; reproducible."""
        return random_operands(self, seed, (self.N, self.H, self.W, self.C), self._weight_shape)

    def reference(self, inp, wgt):
        if not self.kind.exact:
            return conv2d_nhwc_reference(bf16_values(inp), bfloat16.values(wgt), self.stride, self.pad,
                                         self.dilation, self.groups)
        return conv2d_nhwc_reference(inp, wgt, self.stride, self.pad, self.dilation, self.groups,
                                     pad_value=self.input_zero, exact=True)
