"""Operators (TE definitions + numpy references) and the benchmark layer/matrix sizes shipped as data.

Layouts follow the paper: conv2d input NHWC, weights RSCK (= TVM's HWIO), output NHWK; the vectorized
dimension is the innermost one of the output (k for conv2d, j for matmul).
"""
from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from importlib import resources

import numpy as np

from .errors import ShapeError, check_dtype, check_positive


class _Operator:
    """What every operator does alike: its PrimFunc from its TE definition (`te`), and its constant weights
    padded to the shape that function takes."""
    groups = 1  # independent convolutions in one (Conv2d's field; 1 for every other operator)

    def prim_func(self, vector_lanes: int | None = None):
        return _prim_func(self, vector_lanes)

    def constant_weights(self, weights, shape):
        """Weights padded with zeros to `shape` (whole vectors), as a network's build pads them."""
        return _pad_at_end(weights, shape)

    def random_inputs(self, seed: int = 0):
        """(input, weights) in the operand_shapes() the user stores them in, standard normal, reproducible."""
        rng = np.random.default_rng(seed)
        shapes = self.operand_shapes()
        return (rng.standard_normal(shapes["input"], dtype=np.float32),
                rng.standard_normal(shapes["weights"], dtype=np.float32))

    @property
    def operand_bytes(self) -> dict:
        """Bytes of each operand as the user stores it (fp32): what one call must at least read and write."""
        return {name: 4 * int(np.prod(shape)) for name, shape in self.operand_shapes().items()}


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
        if self.C % self.groups or self.K % self.groups:
            raise ShapeError(f"conv2d with {self.groups} groups needs C and K divisible by them (C={self.C}, "
                             f"K={self.K})")
        if self.groups > 1 and self.groups == self.C == self.K:
            raise ShapeError(f"a conv2d with groups = C = K = {self.C} is a depthwise convolution: use the depthwise "
                             'operator (op "depthwise", tvm-ttile tune depthwise)')

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
        inp = te.placeholder((self.N, self.H, self.W, self.C), self.dtype, name="I")
        wgt_in = te.placeholder((self.R, self.S, cp if self.prepack else self.C), self.dtype, name="W")
        wgt = wgt_in if cp == self.C or self.prepack else te.compute(
            (self.R, self.S, cp), lambda r, s, c: te.if_then_else(c < self.C, wgt_in[r, s, c], 0.0), name="W_pad")
        src = inp
        if any(self.pads) or cp != self.C:
            top, left, bottom, right = self.pads
            src = te.compute(
                (self.N, self.H + top + bottom, self.W + left + right, cp),
                lambda n, h, w, c: te.if_then_else(
                    te.all(h >= top, h < self.H + top, w >= left, w < self.W + left, c < self.C),
                    inp[n, h - top, w - left, te.min(c, self.C - 1)], 0.0),
                name="pad_temp",
            )
        r = te.reduce_axis((0, self.R), name="r")
        s = te.reduce_axis((0, self.S), name="s")
        st, dl = self.stride, self.dilation
        out = te.compute(
            (self.N, self.out_h, self.out_w, cp),
            lambda n, h, w, c: te.sum(src[n, h * st + r * dl, w * st + s * dl, c] * wgt[r, s, c], axis=[r, s]),
            name=self.BLOCK,
        )
        if cp != self.C:
            out = te.compute((self.N, self.out_h, self.out_w, self.C), lambda n, h, w, c: out[n, h, w, c],
                             name="O_unpad")
        return inp, wgt_in, out

    def operand_shapes(self) -> dict:
        return {"input": (self.N, self.H, self.W, self.C), "weights": (self.R, self.S, self.C),
                "output": self.output_shape}

    def reference(self, inp, wgt):
        return conv2d_nhwc_reference(inp, wgt[:, :, None, :], self.stride, self.pad, self.dilation, groups=self.C)


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
        if self.C % self.groups or self.K % self.groups:
            raise ShapeError(f"conv1d with {self.groups} groups needs C and K divisible by them (C={self.C}, "
                             f"K={self.K})")
        if self.groups > 1 and self.groups == self.C == self.K:
            raise ShapeError(f"a conv1d with groups = C = K = {self.C} is a depthwise convolution: use the "
                             'depthwise1d operator (op "depthwise1d", tvm-ttile tune depthwise1d)')

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


def _pads_1d(op) -> None:
    """A 1-d operator's pad in its canonical form (one int when both sides agree); ShapeError when bad or when
    the output is empty."""
    pads = (op.pad, op.pad) if isinstance(op.pad, int) else tuple(op.pad)
    if len(pads) != 2 or any(not isinstance(p, int) or p < 0 for p in pads):
        raise ShapeError(f"{type(op).__name__.lower()} pad must be one int or [left, right] of ints >= 0, got {op.pad!r}")
    object.__setattr__(op, "pad", pads[0] if pads[0] == pads[1] else pads)
    if op.out_w <= 0:
        raise ShapeError(f"{type(op).__name__.lower()} {op} has an empty output (length {op.out_w})")


def _padded_input_1d(op, inp, channels: int):
    """The input padded along w (op.pads) and, with `channels` > op.C, to whole vectors of channels (zeros): a
    `pad_temp` stage, timed with the function; the input itself when nothing is padded."""
    from tvm import te

    left, right = op.pads
    if not (left or right or channels != op.C):
        return inp
    if channels == op.C:
        return te.compute((op.N, op.W + left + right, channels), lambda n, w, c: te.if_then_else(
            te.all(w >= left, w < op.W + left), inp[n, w - left, c], 0.0), name="pad_temp")
    return te.compute((op.N, op.W + left + right, channels), lambda n, w, c: te.if_then_else(
        te.all(w >= left, w < op.W + left, c < op.C), inp[n, w - left, te.min(c, op.C - 1)], 0.0), name="pad_temp")


def normalize_pad(pad) -> tuple:
    """(top, left, bottom, right) from one int, (h, w) or (top, left, bottom, right); ShapeError otherwise."""
    values = (pad,) if isinstance(pad, int) else tuple(pad) if isinstance(pad, (tuple, list)) else ()
    if len(values) not in (1, 2, 4) or any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in values):
        raise ShapeError(f"pad must be one non-negative integer, (h, w) or (top, left, bottom, right), got {pad!r}")
    return values * 4 if len(values) == 1 else values * 2 if len(values) == 2 else values


def conv1d_nwc_reference(inp, wgt, stride=1, pad=0, dilation=1, groups=1):
    """numpy 1-d convolution, NWC x WIO (taps, input channels / groups, outputs) -> NWC; `pad` one int or
    (left, right): the conv2d of height 1 it is tuned as."""
    left, right = (pad, pad) if isinstance(pad, int) else pad
    return conv2d_nhwc_reference(inp[:, None], wgt[None], stride, (0, left, 0, right), dilation, groups)[:, 0]


def conv2d_nhwc_reference(inp, wgt, stride=1, pad=0, dilation=1, groups=1):
    """numpy conv2d, NHWC x RSCK -> NHWK, accumulated in float64; pad as Conv2d takes it. With `groups`, the
    weights hold C / groups input channels and each group of K / groups outputs reads its own slice of inputs
    (groups = C: depthwise)."""
    n, h, w, c = inp.shape
    r, s, c2, k = wgt.shape
    if groups > 1:
        if c % groups or k % groups or c // groups != c2:
            raise ShapeError(f"{groups} groups need C and K divisible by them and weights of C/groups channels; "
                             f"got C={c}, K={k}, weights of {c2}")
        kg = k // groups
        return np.concatenate([conv2d_nhwc_reference(inp[..., g * c2:(g + 1) * c2], wgt[..., g * kg:(g + 1) * kg],
                                                     stride, pad, dilation) for g in range(groups)], axis=-1)
    if c != c2:
        raise ShapeError(f"input has C={c} but weights have C={c2}")
    top, left, bottom, right = normalize_pad(pad)
    x = np.pad(inp.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    oh = (h + top + bottom - dilation * (r - 1) - 1) // stride + 1
    ow = (w + left + right - dilation * (s - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, k))
    for ri in range(r):
        for si in range(s):
            patch = x[:, ri * dilation: ri * dilation + stride * (oh - 1) + 1: stride,
                      si * dilation: si * dilation + stride * (ow - 1) + 1: stride, :]
            out += patch @ wgt[ri, si].astype(np.float64)
    return out.astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Matmul(_Operator):
    """C[M,N] = A[M,K] x B[K,N]; with dense=True the weights are stored W[N,K] (TVM's dense layout)."""

    M: int
    N: int
    K: int
    dense: bool = False
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False  # weights are a layer's constants (_prim_func)

    def __post_init__(self):
        check_positive(M=self.M, N=self.N, K=self.K)
        check_dtype(self.dtype)
        if not isinstance(self.dense, bool):
            raise ShapeError(f"dense must be true or false, got {self.dense!r}")

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    @property
    def output_shape(self) -> tuple:
        return (self.M, self.N)

    def te(self, vector_lanes: int | None = None):
        """With `vector_lanes`, N is padded to whole vectors (B_pad, C_unpad; as for conv2d's K, the last column
        repeated), and the dense form is computed from a [K, N] copy of W (`W_packed`) so that j is contiguous."""
        from tvm import te

        a = te.placeholder((self.M, self.K), self.dtype, name="A")
        k = te.reduce_axis((0, self.K), name="k")
        np_ = _padded(self.N, vector_lanes)
        n = np_ if self.prepack else self.N  # constants come padded with zeros, as a network's build makes them
        if self.dense:
            b_in = te.placeholder((n, self.K), self.dtype, name="W")
            if vector_lanes is None:
                c = te.compute((self.M, self.N), lambda i, j: te.sum(a[i, k] * b_in[j, k], axis=k), name="dense")
                return a, b_in, c
        else:
            b_in = te.placeholder((self.K, n), self.dtype, name="B")
        last = lambda j: j if n == np_ else te.min(j, n - 1)  # noqa: E731  (plain indices: prepacking folds the copy)
        if self.dense:
            b = te.compute((self.K, np_), lambda kk, j: b_in[last(j), kk], name="W_packed")
        elif n != np_:
            b = te.compute((self.K, np_), lambda kk, j: b_in[kk, last(j)], name="B_pad")
        else:
            b = b_in
        c = te.compute((self.M, np_), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="matmul")
        if np_ != self.N:
            c = te.compute((self.M, self.N), lambda i, j: c[i, j], name="C_unpad")
        return a, b_in, c

    def operand_shapes(self) -> dict:
        return {"input": (self.M, self.K), "weights": (self.N, self.K) if self.dense else (self.K, self.N),
                "output": self.output_shape}

    def reference(self, a, b):
        b64 = b.astype(np.float64)
        return (a.astype(np.float64) @ (b64.T if self.dense else b64)).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class BatchMatmul(_Operator):
    """C[b, M, N] = A[b, M, K] x B[b, K, N] for b < B independent instances (a transformer's attention).
    `layout` says how the operands are stored: "nn" as above, "nt" B[b, N, K] (Q x K^T), "tn" A[b, K, M]."""

    B: int
    M: int
    N: int
    K: int
    layout: str = "nn"
    name: str = ""
    dtype: str = "float32"
    prepack: bool = False  # the second operand is a constant (_prim_func); in attention both are activations

    LAYOUTS = ("nn", "nt", "tn")

    def __post_init__(self):
        check_positive(B=self.B, M=self.M, N=self.N, K=self.K)
        check_dtype(self.dtype)
        if self.layout not in self.LAYOUTS:
            raise ShapeError(f"batch matmul layout must be one of {', '.join(self.LAYOUTS)} (nt: the second operand "
                             f"stored [B, N, K]; tn: the first stored [B, K, M]), got {self.layout!r}")

    @property
    def flops(self) -> int:
        return 2 * self.B * self.M * self.N * self.K

    @property
    def output_shape(self) -> tuple:
        return (self.B, self.M, self.N)

    def _shapes(self, n=None):
        n = self.N if n is None else n
        a = (self.B, self.K, self.M) if self.layout == "tn" else (self.B, self.M, self.K)
        b = (self.B, n, self.K) if self.layout == "nt" else (self.B, self.K, n)
        return a, b

    def te(self, vector_lanes: int | None = None):
        """Operands in their stored layouts (recognition finds them; lowering copies a transposed one into
        the microkernels' layout, timed). With `vector_lanes` and N not a multiple of it, N is padded to whole
        vectors: a copy B_pad[b, K, N'] (the last column repeated; constants come padded with zeros instead)
        and C_unpad drops the extra columns, both timed with the function."""
        from tvm import te

        np_ = _padded(self.N, vector_lanes)
        a_shape, b_shape = self._shapes(np_ if self.prepack else self.N)
        a = te.placeholder(a_shape, self.dtype, name="A")
        b_in = te.placeholder(b_shape, self.dtype, name="B")
        k = te.reduce_axis((0, self.K), name="k")
        nt = self.layout == "nt"
        at = (lambda bb, i: a[bb, k, i]) if self.layout == "tn" else (lambda bb, i: a[bb, i, k])  # noqa: E731
        if np_ == self.N or self.prepack:
            bt = (lambda bb, j: b_in[bb, j, k]) if nt else (lambda bb, j: b_in[bb, k, j])  # noqa: E731
        else:
            last = lambda j: te.min(j, self.N - 1)  # noqa: E731
            b_pad = te.compute((self.B, self.K, np_), (lambda bb, kk, j: b_in[bb, last(j), kk]) if nt else
                               (lambda bb, kk, j: b_in[bb, kk, last(j)]), name="B_pad")
            bt = lambda bb, j: b_pad[bb, k, j]  # noqa: E731
        c = te.compute((self.B, self.M, np_), lambda bb, i, j: te.sum(at(bb, i) * bt(bb, j), axis=k),
                       name="batch_matmul")
        if np_ != self.N:
            c = te.compute((self.B, self.M, self.N), lambda bb, i, j: c[bb, i, j], name="C_unpad")
        return a, b_in, c

    def operand_shapes(self) -> dict:
        a_shape, b_shape = self._shapes()
        return {"input": a_shape, "weights": b_shape, "output": self.output_shape}

    def random_inputs(self, seed: int = 0):
        rng = np.random.default_rng(seed)
        a_shape, b_shape = self._shapes()
        return rng.standard_normal(a_shape, dtype=np.float32), rng.standard_normal(b_shape, dtype=np.float32)

    def reference(self, a, b):
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        a64 = np.swapaxes(a64, 1, 2) if self.layout == "tn" else a64
        b64 = np.swapaxes(b64, 1, 2) if self.layout == "nt" else b64
        return (a64 @ b64).astype(np.float32)

    def constant_weights(self, weights, shape):
        if self.layout != "nt":
            return _pad_at_end(weights, shape)
        return np.pad(weights, [(0, 0), (0, shape[1] - weights.shape[1]), (0, 0)])  # [B, N, K]: pad N


def _prim_func(operator, vector_lanes):
    """With operator.prepack the weights are marked layout-free, as Relax marks a network's constant weights
    (AttachAttrLayoutFreeBuffers): a tuned kernel may then read them in a packed layout made once at build
    time (tvm_ttile's lowering.pack_weights, MetaSchedule's RewriteLayout) and timing leaves that packing out,
    as in a compiled network. Verification still runs the packing, on weights in the operator's layout (padded
    to whole vectors with zeros when the function takes them so, see weights_for)."""
    from tvm import te

    func = te.create_prim_func(list(operator.te(vector_lanes)))
    return func.with_attr("layout_free_buffers", [1]) if operator.prepack else func


def run_against_reference(operator, mod, target, seed: int = 7):
    """Compile `mod` (the operator's function, scheduled), run it once on random inputs and return
    (output, numpy reference). It does not compare them: tune.verify does."""
    import tvm

    from . import read_in_place  # noqa: F401 - its pass joins TVM's pipeline: the code tuning timed

    lib = tvm.compile(mod, target=target)
    a, b = operator.random_inputs(seed=seed)
    ref = operator.reference(a, b)
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.full(ref.shape, np.nan, np.float32), dev)
    func = mod["main"] if isinstance(mod, tvm.IRModule) else mod
    lib(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(weights_for(operator, b, func), dev), out)
    return out.numpy(), ref


def weights_for(operator, weights, func):
    """The weights as `func` (the operator's PrimFunc) takes them: constants it declares padded to whole
    vectors get zeros, as a network's build pads them (operator.constant_weights)."""
    shape = [int(x) for x in func.params[1].shape]
    return weights if list(weights.shape) == shape else operator.constant_weights(weights, shape)


def _pad_at_end(weights, shape):
    return np.pad(weights, [(0, want - have) for have, want in zip(weights.shape, shape)])


def _padded(n: int, lanes: int | None) -> int:
    return n if not lanes else -(-n // lanes) * lanes


@lru_cache(maxsize=None)
def _data(fname):
    return json.loads(resources.files("tvm_ttile.data").joinpath(fname).read_text())


def conv2d_layers() -> dict:
    """The paper's conv2d layers by name (batch 1, fp32), from the package data."""
    out = {}
    for d in _data("conv2d_layers.json")["layers"]:
        out[d["name"]] = Conv2d(K=d["K"], C=d["C"], H=d["in_hw"], W=d["in_hw"], R=d["R"], S=d["R"],
                                stride=d["stride"], pad=d["pad"], name=d["name"])
    return out


def matmul_shapes() -> dict:
    return {d["name"]: Matmul(M=d["M"], N=d["N"], K=d["K"], name=d["name"])
            for d in _data("matmul_shapes.json")["shapes"]}


def get_layer(name: str):
    """A conv2d layer or matmul shape by name, e.g. 'ResNet18-2' or 'bert-qkv'."""
    table = {**conv2d_layers(), **matmul_shapes()}
    if name not in table:
        raise ShapeError(f"unknown layer {name!r}; known: {', '.join(table)}")
    return table[name]


SHAPE_FIELDS = {"conv2d": {"required": ("K", "C", "H", "W", "R", "S"),
                           "optional": ("stride", "pad", "dilation", "N", "groups")},
                "depthwise": {"required": ("C", "H", "W", "R", "S"), "optional": ("stride", "pad", "dilation", "N")},
                "conv1d": {"required": ("K", "C", "W", "S"), "optional": ("stride", "pad", "dilation", "N", "groups")},
                "depthwise1d": {"required": ("C", "W", "S"), "optional": ("stride", "pad", "dilation", "N")},
                "matmul": {"required": ("M", "N", "K"), "optional": ("dense",)},
                "batch_matmul": {"required": ("B", "M", "N", "K"), "optional": ("layout",)}}


OPERATORS = {"conv2d": Conv2d, "depthwise": Depthwise, "conv1d": Conv1d, "depthwise1d": Depthwise1d,
             "matmul": Matmul, "batch_matmul": BatchMatmul}


def kind_of(operator) -> str:
    """The shapes-file "op" of an operator (a key of OPERATORS)."""
    return next(kind for kind, cls in OPERATORS.items() if isinstance(operator, cls))


def load_shapes(path) -> list:
    """Operators from a JSON shapes file: {"layers": [{"name": ..., "op": "conv2d" | "depthwise" | "conv1d" |
    "depthwise1d" | "matmul" | "batch_matmul", <fields>}, ...]} with the fields of SHAPE_FIELDS (conv2d: K, C, H,
    W, R, S, stride, pad, dilation, N = batch, groups; depthwise: the same without K and groups; conv1d: K, C, W,
    S, stride, pad, dilation, N, groups; depthwise1d: the same without K and groups; matmul: M, N, K, dense;
    batch_matmul: B, M, N, K, layout nn / nt / tn). pad is one int, [h, w] or
    [top, left, bottom, right] ([left, right] for conv1d). Every problem is a ShapeError naming the file, the entry
    and the field."""
    import os
    import re

    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ShapeError(f"shapes file {path} does not exist") from None
    except IsADirectoryError:
        raise ShapeError(f"shapes file {path} is a directory, not a JSON file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ShapeError(f"shapes file {path} is not valid JSON: {e}") from None
    entries = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ShapeError(f'shapes file {path} needs a non-empty list under "layers", e.g. {{"layers": [{{"name": '
                         f'"my-conv", "op": "conv2d", "K": 64, "C": 64, "H": 56, "W": 56, "R": 3, "S": 3, "pad": 1}}]}}')
    ops, seen = [], set()
    for i, entry in enumerate(entries):
        where = f"shapes file {os.fspath(path)}, layer {i + 1}"
        if not isinstance(entry, dict):
            raise ShapeError(f"{where}: expected an object, got {entry!r}")
        name, kind = entry.get("name"), entry.get("op")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", name):
            raise ShapeError(f'{where}: "name" must be letters, digits, ".", "_" or "-" (it names a work dir), '
                             f"got {name!r}")
        if name in seen:
            raise ShapeError(f"{where}: the name {name!r} is used twice")
        seen.add(name)
        if kind not in SHAPE_FIELDS:
            raise ShapeError(f'{where} ({name}): "op" must be one of {", ".join(SHAPE_FIELDS)}, got {kind!r}')
        fields = {k: v for k, v in entry.items() if k not in ("name", "op")}
        allowed = SHAPE_FIELDS[kind]["required"] + SHAPE_FIELDS[kind]["optional"]
        unknown = sorted(set(fields) - set(allowed))
        missing = [k for k in SHAPE_FIELDS[kind]["required"] if k not in fields]
        if unknown or missing:
            raise ShapeError(f"{where} ({name}): " + "; ".join(
                ([f"unknown field(s) {', '.join(unknown)}"] if unknown else []) +
                ([f"missing field(s) {', '.join(missing)}"] if missing else [])) + f" (a {kind} takes {', '.join(allowed)})")
        try:
            ops.append(OPERATORS[kind](name=name, **fields))
        except ShapeError as e:
            raise ShapeError(f"{where} ({name}): {e}") from None
    return ops
