"""Transposed convolutions as the stride x stride ordinary convolutions they are made of.

A conv2d_transpose of stride s is a convolution over the input stuffed with s - 1 zeros between elements: TVM
legalizes it that way, and (s^2 - 1) / s^2 of its products (3/4 at s = 2) multiply zeros. Output index
o = s m + a only receives the taps k with k = (a + pad) mod s (mod s), so each output phase a is a stride-1
convolution of the input itself with every s-th tap of the kernel, flipped:

    out[s m + a] = sum over t < T_a of x[m + c_a - t] * w[phi_a + s t],
    phi_a = (a + pad) mod s,  c_a = (a + pad) div s,  T_a = ceil((K - phi_a) / s)

(per spatial dimension; x is zero outside the input). `TransposedAsPhases` rewrites a network's
relax.nn.conv2d_transpose by constant weights (NCHW / IOHW, one group, no dilation) into the s^2 phase
convolutions and an interleave of their outputs (stack, permute, reshape): each phase is then a conv2d task
tvm_ttile tunes, and only the real products are computed. Others are left as they are (MetaSchedule tunes
TVM's zero-stuffed form)."""
from __future__ import annotations

import dataclasses

import numpy as np
import tvm
from tvm import relax

from .bindings import binding_of, static_shape


@dataclasses.dataclass(frozen=True)
class Phase:
    """One output phase along one spatial dimension: outputs offset, offset + s, ...; taps first_tap,
    first_tap + s, ... (`taps` of them); the input rows it reads, [lo, hi), padded with `pad` zeros before
    and after so that its stride-1 convolution gives `outputs` rows."""

    offset: int
    first_tap: int
    taps: int
    lo: int
    hi: int
    pad: tuple


def phases(size_in: int, size_out: int, kernel: int, stride: int, pad: int) -> list:
    """The `stride` phases of a transposed convolution along one dimension (input `size_in`, output
    `size_out`, the padding `pad` it removes before); each gives ceil(size_out / stride) outputs (the last
    phases' extra ones are cut after the interleave). Empty when a phase gets no tap (stride > kernel)."""
    outputs = -(-size_out // stride)
    found = []
    for a in range(stride):
        first, c = (a + pad) % stride, (a + pad) // stride
        taps = -(-(kernel - first) // stride)
        if taps <= 0:
            return []
        start = c - taps + 1  # the input row output 0 reads with its first (flipped) tap
        end = start + outputs + taps - 1  # one past the last row the last output reads
        lo, hi = max(0, start), min(size_in, end)
        if lo >= hi:  # it reads no input row: nothing to convolve
            return []
        found.append(Phase(a, first, taps, lo, hi, (lo - start, end - hi)))
    return found


def phase_weights(weights, first: tuple, taps: tuple, stride: tuple):
    """OIHW weights of one phase from the transposed convolution's IOHW ones: every stride-th tap from
    `first`, flipped (the convolution runs over the input in order)."""
    (fh, fw), (th, tw), (sh, sw) = first, taps, stride
    sub = weights[:, :, fh::sh, fw::sw][:, :, :th, :tw]
    return np.ascontiguousarray(sub[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))


def conv2d_transpose_reference(x, weights, stride, pad, out_hw):
    """numpy transposed convolution, NCHW x IOHW, by its definition: input pixel i adds weights[k] to output
    i * stride + k - pad; `pad` (top, left), `out_hw` the output's size; accumulated in float64."""
    n, ci, h, w = x.shape
    _, co, kh, kw = weights.shape
    (sh, sw), (ph, pw), (oh, ow) = stride, pad, out_hw
    full = np.zeros((n, co, (h - 1) * sh + kh + oh, (w - 1) * sw + kw + ow))
    for r in range(kh):
        for s in range(kw):
            contrib = np.einsum("nchw,cd->ndhw", x.astype(np.float64), weights[:, :, r, s].astype(np.float64))
            full[:, :, r:r + (h - 1) * sh + 1:sh, s:s + (w - 1) * sw + 1:sw] += contrib
    return full[:, :, ph:ph + oh, pw:pw + ow].astype(np.float32)


def _constant(mutator, expr):
    """The numpy value of a constant `expr` is (bound to), else None."""
    expr = binding_of(mutator, expr)
    return expr.value.numpy() if isinstance(expr, tvm.ir.expr.Constant) else None


@relax.expr_functor.mutator
class TransposedAsPhases(relax.PyExprMutator):
    """relax.nn.conv2d_transpose (NCHW / IOHW, groups 1, dilation 1, constant weights, static shapes) as its
    stride^2 phase convolutions and an interleave; `rewritten` counts the calls rewritten."""

    def __init__(self, mod=None):
        super().__init__(mod)
        self.rewritten = 0

    def visit_call_(self, call):
        call = super().visit_call_(call)
        if not isinstance(call.op, tvm.ir.Op) or call.op.name != "relax.nn.conv2d_transpose":
            return call
        a = call.attrs
        x, weights = call.args
        in_shape, out_shape, w = static_shape(x), static_shape(call), _constant(self, weights)
        if (w is None or in_shape is None or out_shape is None or a.data_layout != "NCHW" or a.kernel_layout != "IOHW"
                or a.out_layout not in ("NCHW", "") or int(a.groups) != 1 or any(int(d) != 1 for d in a.dilation)):
            return call
        stride = tuple(int(s) for s in a.strides)
        top, left = (int(p) for p in a.padding[:2])
        ph = phases(in_shape[2], out_shape[2], w.shape[2], stride[0], top)
        pw = phases(in_shape[3], out_shape[3], w.shape[3], stride[1], left)
        if not ph or not pw:
            return call
        dtype = str(x.ty.dtype)
        # The input padded once for every phase; each phase's convolution reads a window of it without padding
        # of its own, so that phases with as many taps are one task (tuned once, timed once per call).
        lo = (max(p.pad[0] for p in ph), max(q.pad[0] for q in pw))
        hi = (max(p.pad[1] for p in ph), max(q.pad[1] for q in pw))
        padded = x if lo + hi == (0, 0, 0, 0) else self.builder_.emit(
            relax.op.nn.pad(x, [0, 0, 0, 0, lo[0], hi[0], lo[1], hi[1]]))
        outs = []
        for p in ph:
            for q in pw:
                begin = [p.lo - p.pad[0] + lo[0], q.lo - q.pad[0] + lo[1]]
                end = [p.hi + p.pad[1] + lo[0], q.hi + q.pad[1] + lo[1]]
                src = self.builder_.emit(relax.op.strided_slice(padded, axes=[2, 3], begin=begin, end=end,
                                                                assume_inbound=True))
                wt = phase_weights(w, (p.first_tap, q.first_tap), (p.taps, q.taps), stride).astype(dtype)
                outs.append(self.builder_.emit(relax.op.nn.conv2d(src, relax.const(wt, dtype))))
        n, co = out_shape[:2]
        rows, cols = -(-out_shape[2] // stride[0]), -(-out_shape[3] // stride[1])
        # (relax.op.stack would do; ConvertLayout fails on it in TVM 0.27)
        outs = [self.builder_.emit(relax.op.reshape(o, (n, co, 1, rows, cols))) for o in outs]
        y = self.builder_.emit(relax.op.reshape(relax.op.concat(outs, axis=2), (n, co, *stride, rows, cols)))
        y = self.builder_.emit(relax.op.reshape(relax.op.permute_dims(y, [0, 1, 4, 2, 5, 3]),
                                                (n, co, rows * stride[0], cols * stride[1])))
        if (rows * stride[0], cols * stride[1]) != tuple(out_shape[2:]):
            y = self.builder_.emit(relax.op.strided_slice(y, axes=[2, 3], begin=[0, 0], end=list(out_shape[2:]),
                                                          assume_inbound=True))
        self.rewritten += 1
        return y


def rewrite(mod):
    """`mod` with its transposed convolutions rewritten (TransposedAsPhases), and how many were."""
    mod = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    count = 0
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mutator = TransposedAsPhases(mod)
            mod[gv] = mutator.visit_expr(func)
            count += mutator.rewritten
    return mod, count
