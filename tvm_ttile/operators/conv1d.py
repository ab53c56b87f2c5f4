"""1-d convolutions: conv1d (NWC, WIO) and depthwise1d."""
from __future__ import annotations

import dataclasses

from ..errors import check_dtype, check_positive
from .base import _Operator, _padded, _padded_input_1d, _pads_1d, check_groups, conv1d_nwc_reference
from .conv2d import Conv2d


@dataclasses.dataclass(frozen=True)
class Conv1d(_Operator):
    """A 1-d convolution, NWC x WIO (taps, input channels, outputs) -> NWC, as Relax's conv1d in NWC / WIO and
    Ansor's conv1d_nlc write it: tuned as a conv2d of height 1 (Problem.from_operator) on its own 3-d buffers.
    Groups as Conv2d's: weights [S, C / groups, K], output channel k reads its group's inputs."""
    K: int
    C: int
    W: int  # input length before padding
    S: int
    stride: int = 1
    pad: int | tuple = 0  # one int or (left, right); kept as an int when both agree
    dilation: int = 1
    N: int = 1
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False  # weights are a layer's constants (_prim_func)
    groups: int = 1
    BLOCK = "conv1d_nwc"

    def __post_init__(self):
        check_positive(K=self.K, C=self.C, W=self.W, S=self.S, stride=self.stride, dilation=self.dilation, N=self.N,
                       groups=self.groups)
        check_dtype(self.dtype)
        _pads_1d(self)
        check_groups(self, "conv1d", 'the depthwise1d operator (op "depthwise1d", tvm-ttile tune depthwise1d)')

    @property
    def pads(self) -> tuple:
        """(left, right)."""
        return (self.pad, self.pad) if isinstance(self.pad, int) else self.pad

    @property
    def out_w(self) -> int:
        left, right = self.pads
        return (self.W + left + right - self.dilation * (self.S - 1) - 1) // self.stride + 1

    @property
    def flops(self) -> int:
        return 2 * self.N * self.out_w * self.K * (self.C // self.groups) * self.S

    @property
    def output_shape(self) -> tuple:
        return (self.N, self.out_w, self.K)

    def te(self, vector_lanes: int | None = None):
        """(input, weight, output) TE tensors; K (per group) padded to whole vectors as Conv2d.te does (W_pad,
        O_unpad)."""
        from tvm import te

        inp = te.placeholder((self.N, self.W, self.C), self.dtype, name="I")
        g, kg, cg = self.groups, self.K // self.groups, self.C // self.groups
        kgp = _padded(kg, vector_lanes)
        kp = g * kgp
        wgt_in = te.placeholder((self.S, cg, kp if self.prepack else self.K), self.dtype, name="W")
        source = (lambda k: k // kgp * kg + te.min(k % kgp, kg - 1)) if g > 1 else (lambda k: te.min(k, kg - 1))  # noqa: E731
        wgt = wgt_in if kp == self.K or self.prepack else te.compute(
            (self.S, cg, kp), lambda s, c, k: wgt_in[s, c, source(k)], name="W_pad")
        src = _padded_input_1d(self, inp, self.C)
        s = te.reduce_axis((0, self.S), name="s")
        c = te.reduce_axis((0, cg), name="c")
        st, dl = self.stride, self.dilation
        chan = (lambda k: k // kgp * cg + c) if g > 1 else (lambda k: c)  # noqa: E731 - the group's input channels
        out = te.compute((self.N, self.out_w, kp), lambda n, w, k: te.sum(
            src[n, w * st + s * dl, chan(k)] * wgt[s, c, k], axis=[s, c]), name=self.BLOCK if g == 1 else "group_conv1d_nwc")
        if kp != self.K:
            at = (lambda k: k // kg * kgp + k % kg) if g > 1 else (lambda k: k)  # noqa: E731
            out = te.compute(self.output_shape, lambda n, w, k: out[n, w, at(k)], name="O_unpad")
        return inp, wgt_in, out

    def operand_shapes(self) -> dict:
        return {"input": (self.N, self.W, self.C), "weights": (self.S, self.C // self.groups, self.K),
                "output": self.output_shape}

    def reference(self, inp, wgt):
        return conv1d_nwc_reference(inp, wgt, self.stride, self.pad, self.dilation, self.groups)

    constant_weights = Conv2d.constant_weights


@dataclasses.dataclass(frozen=True)
class Depthwise1d(_Operator):
    """Depthwise 1-d convolution: out[n, w, c] = sum over s of in[n, w * stride + s * dilation, c] x W[s, c];
    NWC, weights [S, C] (WIO of a conv1d with groups = C, the unit I left out): tuned as a depthwise conv2d of
    height 1 on its own 3-d buffers (Problem.from_operator)."""

    C: int
    W: int  # input length before padding
    S: int
    stride: int = 1
    pad: int | tuple = 0  # one int or (left, right)
    dilation: int = 1
    N: int = 1
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False
    BLOCK = "depthwise_conv1d_nwc"

    def __post_init__(self):
        check_positive(C=self.C, W=self.W, S=self.S, stride=self.stride, dilation=self.dilation, N=self.N)
        check_dtype(self.dtype)
        _pads_1d(self)

    pads = Conv1d.pads
    out_w = Conv1d.out_w

    @property
    def K(self) -> int:  # the output channels, as for a Conv1d
        return self.C

    @property
    def flops(self) -> int:
        return 2 * self.N * self.out_w * self.C * self.S

    @property
    def output_shape(self) -> tuple:
        return (self.N, self.out_w, self.C)

    def te(self, vector_lanes: int | None = None):
        """(input, weight, output) TE tensors; channels padded to whole vectors as Depthwise.te does (pad_temp,
        W_pad, O_unpad)."""
        from tvm import te

        cp = _padded(self.C, vector_lanes)
        inp = te.placeholder((self.N, self.W, self.C), self.dtype, name="I")
        wgt_in = te.placeholder((self.S, cp if self.prepack else self.C), self.dtype, name="W")
        wgt = wgt_in if cp == self.C or self.prepack else te.compute(
            (self.S, cp), lambda s, c: te.if_then_else(c < self.C, wgt_in[s, c], 0.0), name="W_pad")
        src = _padded_input_1d(self, inp, cp)
        s = te.reduce_axis((0, self.S), name="s")
        st, dl = self.stride, self.dilation
        out = te.compute((self.N, self.out_w, cp), lambda n, w, c: te.sum(src[n, w * st + s * dl, c] * wgt[s, c], axis=s),
                         name=self.BLOCK)
        if cp != self.C:
            out = te.compute(self.output_shape, lambda n, w, c: out[n, w, c], name="O_unpad")
        return inp, wgt_in, out

    def operand_shapes(self) -> dict:
        return {"input": (self.N, self.W, self.C), "weights": (self.S, self.C), "output": self.output_shape}

    def reference(self, inp, wgt):
        return conv1d_nwc_reference(inp, wgt[:, None, :], self.stride, self.pad, self.dilation, groups=self.C)
