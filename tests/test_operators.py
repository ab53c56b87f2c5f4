import numpy as np
import pytest

from tvm_ttile.errors import ShapeError, UnsupportedDtypeError
from tvm_ttile.operators import Conv2d, Matmul, conv2d_layers, conv2d_nhwc_reference, get_layer, matmul_shapes


def naive_conv(x, w, stride, pad, dil):
    n, h, wd, c = x.shape
    r, s, _, k = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh = (h + 2 * pad - dil * (r - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (s - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, k))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for ri in range(r):
                    for si in range(s):
                        out[b, i, j] += xp[b, i * stride + ri * dil, j * stride + si * dil] @ w[ri, si]
    return out


@pytest.mark.parametrize("stride,pad,dil", [(1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 1, 1)])
def test_conv_reference_matches_naive_loops(stride, pad, dil):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 9, 8, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(conv2d_nhwc_reference(x, w, stride, pad, dil), naive_conv(x, w, stride, pad, dil),
                               rtol=1e-5, atol=1e-5)


def test_layers_ship_with_the_package():
    layers = conv2d_layers()
    assert len(layers) == 23 and len(matmul_shapes()) == 10
    l2 = get_layer("ResNet18-2")
    assert (l2.K, l2.C, l2.H, l2.R, l2.stride, l2.pad, l2.out_h) == (64, 64, 56, 3, 1, 1, 56)
    assert get_layer("Yolo9000-23").K == 28269
    assert get_layer("ResNet18-1").out_h == 112
    assert get_layer("bert-qkv").flops == 2 * 128 * 768 * 768


def test_bad_input_is_named():
    with pytest.raises(ShapeError, match="K=0"):
        Conv2d(K=0, C=3, H=8, W=8, R=3, S=3)
    with pytest.raises(ShapeError, match="pad"):
        Conv2d(K=4, C=3, H=8, W=8, R=3, S=3, pad=-1)
    with pytest.raises(ShapeError, match="empty output"):
        Conv2d(K=4, C=3, H=2, W=2, R=3, S=3)
    with pytest.raises(UnsupportedDtypeError, match="float16"):
        Matmul(M=4, N=4, K=4, dtype="float16")
    with pytest.raises(ShapeError, match="unknown layer"):
        get_layer("ResNet18-99")


@pytest.mark.parametrize("dense", [False, True])
def test_te_definitions_match_references(dense):
    import tvm

    mm = Matmul(M=5, N=7, K=3, dense=dense)
    lib = tvm.compile(tvm.IRModule({"main": mm.prim_func()}), target=tvm.target.Target({"kind": "llvm"}))
    a, b = mm.random_inputs()
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros((5, 7), np.float32), dev)
    lib(tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), out)
    np.testing.assert_allclose(out.numpy(), mm.reference(a, b), rtol=1e-5, atol=1e-5)


def test_conv_te_matches_reference():
    import tvm

    cv = Conv2d(K=4, C=3, H=7, W=6, R=3, S=2, stride=2, pad=1, dilation=1)
    lib = tvm.compile(tvm.IRModule({"main": cv.prim_func()}), target=tvm.target.Target({"kind": "llvm"}))
    x, w = cv.random_inputs()
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros((1, cv.out_h, cv.out_w, 4), np.float32), dev)
    lib(tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev), out)
    np.testing.assert_allclose(out.numpy(), cv.reference(x, w), rtol=1e-4, atol=1e-4)
