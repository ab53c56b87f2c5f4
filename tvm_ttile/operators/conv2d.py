"""2-d convolutions: conv2d (NHWC input, RSCK weights, NHWK output; grouped and dilated) and depthwise."""
from __future__ import annotations

import dataclasses


from ..errors import ShapeError, check_dtype, check_positive
from .base import _Operator, _pad_at_end, _padded, check_groups, conv2d_nhwc_reference, normalize_pad


@dataclasses.dataclass(frozen=True)
class Conv2d(_Operator):
    K: int
    C: int
    H: int  # input height before padding
    W: int  # input width before padding
    R: int
    S: int
    stride: int = 1
    pad: int | tuple = 0  # one int, (h, w) or (top, left, bottom, right); kept as an int when all four agree
    dilation: int = 1
    N: int = 1
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False  # weights are a layer's constants (_prim_func)
    groups: int = 1  # a grouped convolution: C / groups input channels per group of K / groups outputs

    def __post_init__(self):
        check_positive(K=self.K, C=self.C, H=self.H, W=self.W, R=self.R, S=self.S, stride=self.stride,
                       dilation=self.dilation, N=self.N, groups=self.groups)
        check_dtype(self.dtype)
        pads = normalize_pad(self.pad)
        object.__setattr__(self, "pad", pads[0] if len(set(pads)) == 1 else pads)  # one canonical form
        if self.out_h <= 0 or self.out_w <= 0:
            raise ShapeError(f"conv2d {self} has an empty output ({self.out_h}x{self.out_w})")
        check_groups(self, "conv2d", 'the depthwise operator (op "depthwise", tvm-ttile tune depthwise)')

    @property
    def pads(self) -> tuple:
        """(top, left, bottom, right), as ONNX orders its pads."""
        return normalize_pad(self.pad)

    @property
    def out_h(self) -> int:
        top, _, bottom, _ = self.pads
        return (self.H + top + bottom - self.dilation * (self.R - 1) - 1) // self.stride + 1

    @property
    def out_w(self) -> int:
        _, left, _, right = self.pads
        return (self.W + left + right - self.dilation * (self.S - 1) - 1) // self.stride + 1

    @property
    def flops(self) -> int:
        return 2 * self.N * self.out_h * self.out_w * self.K * (self.C // self.groups) * self.R * self.S

    @property
    def output_shape(self) -> tuple:
        return (self.N, self.out_h, self.out_w, self.K)

    def te(self, vector_lanes: int | None = None):
        """(input, weight, output) TE tensors; a `pad_temp` stage exists only when pad > 0.
        With `vector_lanes` and K (per group: K / groups) not a multiple of it, K is padded to whole vectors
        (stage `W_pad`, repeating the last channel's weights: the extra channels are dropped by stage `O_unpad`):
        both copies are part of the timed function, so the padding's cost shows in every result. Constant
        weights (prepack) come padded with zeros instead, as a network's build would make them (`weights_for`),
        and only O_unpad remains. Groups: weights [R, S, C / groups, K] (TVM's HWIO), output channel k reads
        the input channels of its group, k // (K / groups)."""
        from tvm import te

        inp = te.placeholder((self.N, self.H, self.W, self.C), self.dtype, name="I")
        g, kg, cg = self.groups, self.K // self.groups, self.C // self.groups
        kgp = _padded(kg, vector_lanes)
        kp = g * kgp
        wgt_in = te.placeholder((self.R, self.S, cg, kp if self.prepack else self.K), self.dtype, name="W")
        source = (lambda k: k // kgp * kg + te.min(k % kgp, kg - 1)) if g > 1 else (lambda k: te.min(k, kg - 1))  # noqa: E731
        wgt = wgt_in if kp == self.K or self.prepack else te.compute(
            (self.R, self.S, cg, kp), lambda r, s, c, k: wgt_in[r, s, c, source(k)], name="W_pad")
        src = inp
        if any(self.pads):
            top, left, bottom, right = self.pads
            src = te.compute(
                (self.N, self.H + top + bottom, self.W + left + right, self.C),
                lambda n, h, w, c: te.if_then_else(
                    te.all(h >= top, h < self.H + top, w >= left, w < self.W + left), inp[n, h - top, w - left, c],
                    0.0),
                name="pad_temp",
            )
        r = te.reduce_axis((0, self.R), name="r")
        s = te.reduce_axis((0, self.S), name="s")
        c = te.reduce_axis((0, cg), name="c")
        st, dl = self.stride, self.dilation
        chan = (lambda k: k // kgp * cg + c) if g > 1 else (lambda k: c)  # noqa: E731 - the group's input channels
        out = te.compute(
            (self.N, self.out_h, self.out_w, kp),
            lambda n, h, w, k: te.sum(src[n, h * st + r * dl, w * st + s * dl, chan(k)] * wgt[r, s, c, k],
                                      axis=[r, s, c]),
            name="conv2d_nhwc" if g == 1 else "group_conv2d_nhwc",
        )
        if kp != self.K:  # (a grouped one's padded groups: a copy its conv cannot take in as its epilogue)
            at = (lambda k: k // kg * kgp + k % kg) if g > 1 else (lambda k: k)  # noqa: E731
            out = te.compute((self.N, self.out_h, self.out_w, self.K), lambda n, h, w, k: out[n, h, w, at(k)],
                             name="O_unpad")
        return inp, wgt_in, out

    def operand_shapes(self) -> dict:
        return {"input": (self.N, self.H, self.W, self.C), "weights": (self.R, self.S, self.C // self.groups, self.K),
                "output": self.output_shape}

    def reference(self, inp, wgt):
        return conv2d_nhwc_reference(inp, wgt, self.stride, self.pad, self.dilation, self.groups)

    def constant_weights(self, weights, shape):
        """Weights padded with zeros to `shape` (whole vectors per group), as a network's build pads them."""
        if self.groups == 1 or list(weights.shape) == list(shape):
            return _pad_at_end(weights, shape)
        *lead, k = weights.shape
        split = weights.reshape(*lead, self.groups, k // self.groups)
        return _pad_at_end(split, (*lead, self.groups, shape[-1] // self.groups)).reshape(shape)


@dataclasses.dataclass(frozen=True)
class Depthwise(_Operator):
    """Depthwise conv2d: out[n, h, w, c] = sum over r, s of in[n, h * stride + r * dilation, w * stride +
    s * dilation, c] x W[r, s, c]; NHWC, weights RSC (TVM's HWIO of a conv with groups = C, the unit I
    dimension left out); the vectorized dimension is the channel, read by input, weights and output alike."""

    C: int
    H: int  # input height before padding
    W: int  # input width before padding
    R: int
    S: int
    stride: int = 1
    pad: int | tuple = 0
    dilation: int = 1
    N: int = 1
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False  # weights are a layer's constants (_prim_func)

    BLOCK = "depthwise_conv2d_nhwc"

    def __post_init__(self):
        check_positive(C=self.C, H=self.H, W=self.W, R=self.R, S=self.S, stride=self.stride,
                       dilation=self.dilation, N=self.N)
        check_dtype(self.dtype)
        pads = normalize_pad(self.pad)
        object.__setattr__(self, "pad", pads[0] if len(set(pads)) == 1 else pads)
        if self.out_h <= 0 or self.out_w <= 0:
            raise ShapeError(f"depthwise conv2d {self} has an empty output ({self.out_h}x{self.out_w})")

    pads = Conv2d.pads
    out_h = Conv2d.out_h
    out_w = Conv2d.out_w

    @property
    def K(self) -> int:  # the output channels, as for a Conv2d
        return self.C

    @property
    def flops(self) -> int:
        return 2 * self.N * self.out_h * self.out_w * self.C * self.R * self.S

    @property
    def output_shape(self) -> tuple:
        return (self.N, self.out_h, self.out_w, self.C)

    def te(self, vector_lanes: int | None = None):
        """(input, weight, output) TE tensors. With `vector_lanes` and C not a multiple of it, the channels are
        padded to whole vectors with zeros: in the input copy (`pad_temp`, which also holds the spatial
        padding), the weights (`W_pad`; constant weights come padded, as a network's build makes them) and
        dropped again by `O_unpad`; all timed with the function."""
        from tvm import te

        cp = _padded(self.C, vector_lanes)
        inp = te.placeholder((self.N, self.H, self.W, self.C), self.input_dtype, name="I")
        wgt = te.placeholder((self.R, self.S, cp if self.prepack else self.C), self.dtype, name="W")
        return inp, wgt, self.compute(inp, wgt, cp)

    input_dtype = property(lambda self: self.dtype)
    widened_input = ""  # microkernels.spec.WIDENED_INPUTS: an input narrower than the lanes (QDepthwise's u8)

    def widen(self, value):
        """What the convolution multiplies for one input element (QDepthwise: a u8 converted to fp32)."""
        return value

    def padding_value(self):
        """What the input's padding holds (QDepthwise: the zero point)."""
        from tvm import te

        return te.const(0, self.input_dtype)

    def compute(self, inp, wgt_in, channels: int | None = None):
        """The output tensor of `te` from given input and weight tensors (a Relax rewrite's call_te); `channels`:
        C padded to whole vectors (default: the weights' last extent, constants come padded)."""
        from tvm import te

        cp = int(wgt_in.shape[2]) if channels is None else channels
        wgt = wgt_in if cp == int(wgt_in.shape[2]) else te.compute(
            (self.R, self.S, cp), lambda r, s, c: te.if_then_else(c < self.C, wgt_in[r, s, c], 0.0), name="W_pad")
        src = inp
        if any(self.pads) or cp != self.C:
            top, left, bottom, right = self.pads
            src = te.compute(
                (self.N, self.H + top + bottom, self.W + left + right, cp),
                lambda n, h, w, c: te.if_then_else(
                    te.all(h >= top, h < self.H + top, w >= left, w < self.W + left, c < self.C),
                    inp[n, h - top, w - left, te.min(c, self.C - 1)], self.padding_value()),
                name="pad_temp",
            )
        r = te.reduce_axis((0, self.R), name="r")
        s = te.reduce_axis((0, self.S), name="s")
        st, dl = self.stride, self.dilation
        out = te.compute(
            (self.N, self.out_h, self.out_w, cp),
            lambda n, h, w, c: te.sum(self.widen(src[n, h * st + r * dl, w * st + s * dl, c]) * wgt[r, s, c],
                                      axis=[r, s]),
            name=self.BLOCK,
        )
        if cp != self.C:
            out = te.compute((self.N, self.out_h, self.out_w, self.C), lambda n, h, w, c: out[n, h, w, c],
                             name="O_unpad")
        return out

    def operand_shapes(self) -> dict:
        return {"input": (self.N, self.H, self.W, self.C), "weights": (self.R, self.S, self.C),
                "output": self.output_shape}

    def reference(self, inp, wgt):
        return conv2d_nhwc_reference(inp, wgt[:, :, None, :], self.stride, self.pad, self.dilation, groups=self.C)
