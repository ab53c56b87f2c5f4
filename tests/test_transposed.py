"""The phase decomposition of transposed convolutions (transposed.py), checked in numpy alone: for random
strides, kernels (smaller and larger than the stride), paddings and output sizes, the phase convolutions built
from `phases` and `phase_weights`, interleaved, equal the transposed convolution by its definition."""
import random

import numpy as np
import pytest

from tvm_ttile.relax.transposed import conv2d_transpose_reference, phase_weights, phases


def _by_phases(x, w, stride, pad, out_hw):
    """What the Relax rewrite computes, in numpy: per phase a stride-1 correlation of a window of the input
    (zero-padded) with the phase's flipped taps, then the interleave."""
    ph = phases(x.shape[2], out_hw[0], w.shape[2], stride[0], pad[0])
    pw = phases(x.shape[3], out_hw[1], w.shape[3], stride[1], pad[1])
    assert ph and pw
    rows, cols = -(-out_hw[0] // stride[0]), -(-out_hw[1] // stride[1])
    out = np.zeros((x.shape[0], w.shape[1], rows * stride[0], cols * stride[1]))
    for p in ph:
        for q in pw:
            win = np.pad(x[:, :, p.lo:p.hi, q.lo:q.hi].astype(np.float64),
                         ((0, 0), (0, 0), p.pad, q.pad))
            k = phase_weights(w, (p.first_tap, q.first_tap), (p.taps, q.taps), stride).astype(np.float64)  # OIHW
            y = np.zeros((x.shape[0], w.shape[1], rows, cols))
            for r in range(p.taps):
                for s in range(q.taps):
                    y += np.einsum("nchw,oc->nohw", win[:, :, r:r + rows, s:s + cols], k[:, :, r, s])
            out[:, :, p.offset::stride[0], q.offset::stride[1]] = y
    return out[:, :, :out_hw[0], :out_hw[1]]


@pytest.mark.parametrize("case", range(12))
def test_phase_convolutions_equal_the_transposed_convolution(case):
    rng = random.Random(100 + case)
    stride = (rng.choice([1, 2, 3]), rng.choice([1, 2, 3]))
    kernel = (rng.choice([1, 2, 3, 4, 5]), rng.choice([1, 3, 4]))
    stride = tuple(min(s, k) for s, k in zip(stride, kernel))  # a kernel smaller than the stride: not rewritten
    pad = tuple(rng.randrange(0, k) for k in kernel)
    h, w = rng.choice([1, 4, 7]), rng.choice([3, 5])
    extra = (rng.randrange(0, s) for s in stride)  # output padding
    out_hw = tuple((n - 1) * s - 2 * p + k + e for n, s, p, k, e in zip((h, w), stride, pad, kernel, extra))
    if min(out_hw) <= 0:
        pytest.skip("empty output")
    data = np.random.default_rng(case)
    x = data.standard_normal((2, 3, h, w)).astype(np.float32)
    wt = data.standard_normal((3, 4, *kernel)).astype(np.float32)
    np.testing.assert_allclose(_by_phases(x, wt, stride, pad, out_hw),
                               conv2d_transpose_reference(x, wt, stride, pad, out_hw), rtol=1e-5, atol=1e-5)


def test_a_stride_larger_than_the_kernel_has_phases_without_taps():
    assert phases(5, 9, 1, 2, 0) == []


def test_the_reference_is_torchs_transposed_convolution():
    torch = pytest.importorskip("torch")
    data = np.random.default_rng(0)
    x, w = data.standard_normal((1, 3, 5, 6)).astype(np.float32), data.standard_normal((3, 4, 3, 4)).astype(np.float32)
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), stride=(2, 3), padding=(1, 2),
                                                output_padding=(1, 0)).numpy()
    np.testing.assert_allclose(conv2d_transpose_reference(x, w, (2, 3), (1, 2), want.shape[2:]), want, rtol=1e-4,
                               atol=1e-4)
