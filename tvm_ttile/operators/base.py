"""What every operator shares: its PrimFunc from its TE definition, its constant weights padded to that
function's shape, running a scheduled function against the numpy reference, and the convolution references."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError


class _Operator:
    """What every operator does alike: its PrimFunc from its TE definition (`te`), and its constant weights
    padded to the shape that function takes."""
    groups = 1  # independent convolutions in one (Conv2d's field; 1 for every other operator)
    precision = "fp32"  # what its microkernels multiply (precision.PRECISIONS; QMatmul's field)
    data_precision = property(lambda self: self.precision)  # what its operands hold (QDepthwise: int8 in fp32)

    def prim_func(self, vector_lanes: int | None = None):
        return _prim_func(self, vector_lanes)

    @property
    def exact(self) -> bool:
        """An integer result: it must equal its reference, not approach it."""
        from ..precision import get as get_precision

        return get_precision(self.data_precision).exact

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


def check_groups(op, kind: str, depthwise: str) -> None:
    """A one-line refusal of `op`'s groups (a `kind` with C, K and groups) when they do not divide C and K, or make
    it a depthwise convolution, which `depthwise` says how to compute."""
    if op.C % op.groups or op.K % op.groups:
        raise ShapeError(f"{kind} with {op.groups} groups needs C and K divisible by them (C={op.C}, K={op.K})")
    if op.groups > 1 and op.groups == op.C == op.K:
        raise ShapeError(f"a {kind} with groups = C = K = {op.C} is a depthwise convolution: use {depthwise}")


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


def conv2d_nhwc_reference(inp, wgt, stride=1, pad=0, dilation=1, groups=1, *, pad_value=0, exact=False):
    """numpy conv2d, NHWC x RSCK -> NHWK, accumulated in float64; pad as Conv2d takes it. With `groups`, the
    weights hold C / groups input channels and each group of K / groups outputs reads its own slice of inputs
    (groups = C: depthwise). `exact`: integers accumulated in int64 and returned as int32 (int8's reference);
    `pad_value`: what the padding holds (a quantized input's zero point)."""
    n, h, w, c = inp.shape
    r, s, c2, k = wgt.shape
    if groups > 1:
        if c % groups or k % groups or c // groups != c2:
            raise ShapeError(f"{groups} groups need C and K divisible by them and weights of C/groups channels; "
                             f"got C={c}, K={k}, weights of {c2}")
        kg = k // groups
        return np.concatenate([conv2d_nhwc_reference(inp[..., g * c2:(g + 1) * c2], wgt[..., g * kg:(g + 1) * kg],
                                                     stride, pad, dilation, pad_value=pad_value, exact=exact)
                               for g in range(groups)], axis=-1)
    if c != c2:
        raise ShapeError(f"input has C={c} but weights have C={c2}")
    top, left, bottom, right = normalize_pad(pad)
    acc = np.int64 if exact else np.float64
    x = np.pad(inp.astype(acc), ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=pad_value)
    oh = (h + top + bottom - dilation * (r - 1) - 1) // stride + 1
    ow = (w + left + right - dilation * (s - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, k), acc)
    for ri in range(r):
        for si in range(s):
            patch = x[:, ri * dilation: ri * dilation + stride * (oh - 1) + 1: stride,
                      si * dilation: si * dilation + stride * (ow - 1) + 1: stride, :]
            out += patch @ wgt[ri, si].astype(acc)
    return out.astype(np.int32 if exact else np.float32)


def _prim_func(operator, vector_lanes):
    """With operator.prepack the weights are marked layout-free, as Relax marks a network's constant weights
    (AttachAttrLayoutFreeBuffers): a tuned kernel may then read them in a packed layout made once at build
    time (tvm_ttile's packing.pack_weights, MetaSchedule's RewriteLayout) and timing leaves that packing out,
    as in a compiled network. Verification still runs the packing, on weights in the operator's layout (padded
    to whole vectors with zeros when the function takes them so, see weights_for)."""
    from tvm import te

    func = te.create_prim_func(list(operator.te(vector_lanes)))
    return func.with_attr("layout_free_buffers", [1]) if operator.prepack else func


def run_against_reference(operator, mod, target, seed: int = 7, inputs=None):
    """Compile `mod` (the operator's function, scheduled), run it once on random inputs (or the given
    (input, weights)) and return (output, numpy reference). It does not compare them: tune.verify does."""
    import tvm

    from .. import read_in_place

    read_in_place.install()  # the code tuning timed
    lib = tvm.compile(mod, target=target)
    a, b = operator.random_inputs(seed=seed) if inputs is None else inputs
    ref = operator.reference(a, b)
    dev = tvm.cpu()
    # Every output element starts as what no kernel computes: NaN, or the most negative integer
    blank = np.nan if np.issubdtype(ref.dtype, np.floating) else np.iinfo(ref.dtype).min
    out = tvm.runtime.tensor(np.full(ref.shape, blank, ref.dtype), dev)
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
