import numpy as np
import pytest

from tvm_ttile.errors import ShapeError, UnsupportedDtypeError
from tvm_ttile.operators import (BatchMatmul, Conv1d, Conv2d, Depthwise1d, Matmul, conv2d_layers, conv2d_nhwc_reference,
                                 get_layer, load_shapes, matmul_shapes)


def naive_conv(x, w, stride, pad, dil):
    n, h, wd, c = x.shape
    r, s, _, k = w.shape
    top, left, bottom, right = (pad,) * 4 if isinstance(pad, int) else pad
    xp = np.zeros((n, h + top + bottom, wd + left + right, c))
    xp[:, top:top + h, left:left + wd] = x
    oh = (h + top + bottom - dil * (r - 1) - 1) // stride + 1
    ow = (wd + left + right - dil * (s - 1) - 1) // stride + 1
    out = np.zeros((n, oh, ow, k))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for ri in range(r):
                    for si in range(s):
                        out[b, i, j] += xp[b, i * stride + ri * dil, j * stride + si * dil] @ w[ri, si]
    return out


@pytest.mark.parametrize("stride,pad,dil", [(1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 1, 1), (1, (0, 3, 1, 2), 1),
                                            (2, (2, 0, 3, 1), 2)])
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
    with pytest.raises(ShapeError, match="3 groups needs C and K divisible by them"):
        Conv2d(K=6, C=4, H=8, W=8, R=3, S=3, groups=3)
    with pytest.raises(ShapeError, match="groups = C = K = 8 is a depthwise convolution: use the depthwise operator"):
        Conv2d(K=8, C=8, H=8, W=8, R=3, S=3, groups=8)
    with pytest.raises(ShapeError, match="layout must be one of nn, nt, tn"):
        BatchMatmul(B=2, M=4, N=4, K=4, layout="tt")
    with pytest.raises(ShapeError, match="B=0"):
        BatchMatmul(B=0, M=4, N=4, K=4)


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


@pytest.mark.parametrize("vector_lanes", [None, 8])
def test_grouped_and_depthwise_conv1d_te_match_plain_loops(vector_lanes):
    """Their TE definitions (outputs padded to whole vectors per group, channels padded for the depthwise one)
    against their references, which are checked against plain loops."""
    import tvm

    for op in (Conv1d(K=6, C=9, W=13, S=3, stride=2, pad=(2, 1), dilation=2, groups=3),
               Depthwise1d(C=5, W=14, S=3, stride=2, pad=(1, 0), dilation=2)):
        lib = tvm.compile(tvm.IRModule({"main": op.prim_func(vector_lanes)}), target=tvm.target.Target({"kind": "llvm"}))
        x, w = op.random_inputs()
        out = tvm.runtime.tensor(np.zeros(op.output_shape, np.float32))
        lib(tvm.runtime.tensor(x), tvm.runtime.tensor(w), out)
        ref = op.reference(x, w)
        left, right = op.pads
        xp = np.pad(x, ((0, 0), (left, right), (0, 0)))
        w3 = w[:, None, :] if isinstance(op, Depthwise1d) else w
        kg, cg = op.K // (op.C if isinstance(op, Depthwise1d) else op.groups), w3.shape[1]
        loops = np.array([[[sum(xp[0, l * 2 + s * 2, k // kg * cg + c] * w3[s, c, k] for s in range(3) for c in range(cg))
                            for k in range(op.K)] for l in range(op.out_w)]])
        np.testing.assert_allclose(ref, loops, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ShapeError, match="depthwise1d"):
        Conv1d(K=8, C=8, W=9, S=3, groups=8)


@pytest.mark.parametrize("vector_lanes", [None, 8])
def test_conv1d_te_matches_reference(vector_lanes):
    """Its TE definition (with K padded to whole vectors: the W_pad and O_unpad copies) against the reference,
    which is checked against plain loops."""
    import tvm

    cv = Conv1d(K=5, C=3, W=13, S=3, stride=2, pad=(2, 1), dilation=2)
    lib = tvm.compile(tvm.IRModule({"main": cv.prim_func(vector_lanes)}), target=tvm.target.Target({"kind": "llvm"}))
    x, w = cv.random_inputs()
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros(cv.output_shape, np.float32), dev)
    lib(tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev), out)
    ref = cv.reference(x, w)
    xp = np.pad(x, ((0, 0), (2, 1), (0, 0)))
    loops = np.array([[[sum(xp[0, l * 2 + s * 2, c] * w[s, c, k] for s in range(3) for c in range(3))
                        for k in range(5)] for l in range(cv.out_w)]])
    np.testing.assert_allclose(ref, loops, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_pad_takes_one_int_height_width_or_four_sides():
    base = dict(K=4, C=3, H=9, W=8, R=1, S=7)
    assert Conv2d(**base, pad=(2, 2, 2, 2)).pad == 2  # one canonical form: equal pads are an int
    assert Conv2d(**base, pad=[0, 3]).pad == (0, 3, 0, 3) == Conv2d(**base, pad=(0, 3, 0, 3)).pad
    asym = Conv2d(**base, pad=(1, 3, 0, 2))
    assert asym.pads == (1, 3, 0, 2) and (asym.out_h, asym.out_w) == (10, 7)
    for bad in ((1, 2, 3), (-1, 0), "1", (1.5, 0), True):
        with pytest.raises(ShapeError, match="pad must be"):
            Conv2d(**base, pad=bad)


def test_conv_te_with_asymmetric_padding_and_a_non_square_kernel_matches_reference():
    import tvm

    cv = Conv2d(K=4, C=3, H=7, W=9, R=1, S=5, stride=2, pad=(0, 3, 1, 1))
    lib = tvm.compile(tvm.IRModule({"main": cv.prim_func()}), target=tvm.target.Target({"kind": "llvm"}))
    x, w = cv.random_inputs()
    dev = tvm.cpu()
    out = tvm.runtime.tensor(np.zeros(cv.output_shape, np.float32), dev)
    lib(tvm.runtime.tensor(x, dev), tvm.runtime.tensor(w, dev), out)
    np.testing.assert_allclose(out.numpy(), naive_conv(x, w, 2, (0, 3, 1, 1), 1), rtol=1e-4, atol=1e-4)


def _lowered_matches_numpy(op, host, seed):
    """The operator's function at the host's vector width (padded to whole vectors), lowered with one drawn
    scheme, checked against its numpy reference."""
    from kernels import conv_kept, matmul_kept
    from tvm_ttile.lowering import lower, problem_of
    from tvm_ttile.operators import run_against_reference
    from tvm_ttile.samplers import make_sampler
    from tvm_ttile.space import Problem, Space

    func = op.prim_func(host.lanes)
    problem = problem_of(func, host.isa.name, host.lanes)
    declared = Problem.from_operator(op, host.lanes, host.isa.name)
    assert (problem.sizes, problem.batch) == (declared.sizes, declared.batch)  # recognition agrees with the operator
    kept = (conv_kept if problem.op == "conv2d" else matmul_kept)(host.isa.name, host.lanes)
    (scheme,) = make_sampler("ttile", seed=seed).sample_many(Space(problem, kept), 1)
    out, ref = run_against_reference(op, lower(problem, scheme, func).sch.mod, host.target())
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())), err_msg=scheme.text)
    return declared


@pytest.mark.parametrize("layout,prepack", [("nn", False), ("nt", False), ("tn", False), ("nt", True)])
def test_a_batch_matmul_in_each_layout_is_lowered_and_matches_numpy(host, layout, prepack):
    op = BatchMatmul(B=3, M=7, N=host.lanes + 3, K=9, layout=layout, prepack=prepack)
    problem = _lowered_matches_numpy(op, host, seed=len(layout) + prepack)
    assert (problem.op, problem.batch, problem.size["j"], problem.vector_pad) == ("matmul", 3, 2 * host.lanes, host.lanes - 3)
    assert op.flops == 2 * 3 * 7 * (host.lanes + 3) * 9 and op.output_shape == (3, 7, host.lanes + 3)


@pytest.mark.parametrize("groups,K,C,R,prepack", [(3, 3 * 5, 6, 3, False), (2, 4, 8, 3, True), (4, 8, 4, 1, False)])
def test_a_grouped_convolution_pads_each_group_and_matches_numpy(host, groups, K, C, R, prepack):
    """Groups whose outputs are not whole vectors: each group padded to whole vectors (weights copied or, as
    constants, given padded per group), the group a batch level of the structured space."""
    op = Conv2d(K=K, C=C, H=7, W=6, R=R, S=R, pad=R // 2, groups=groups, prepack=prepack)
    problem = _lowered_matches_numpy(op, host, seed=groups)
    assert (problem.batch, problem.size["k"], problem.size["c"]) == (groups, host.lanes, C // groups)
    assert op.flops == 2 * 7 * 6 * K * (C // groups) * R * R


def test_a_shapes_file_gives_named_operators(tmp_path):
    import json

    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({"layers": [
        {"name": "inc-1x7", "op": "conv2d", "K": 16, "C": 8, "H": 17, "W": 17, "R": 1, "S": 7, "pad": [0, 3]},
        {"name": "stem", "op": "conv2d", "K": 8, "C": 3, "H": 32, "W": 32, "R": 7, "S": 7, "stride": 2,
         "pad": [2, 2, 3, 3], "N": 2},
        {"name": "qkv", "op": "matmul", "M": 8, "N": 32, "K": 16, "dense": True},
        {"name": "resnext", "op": "conv2d", "K": 128, "C": 128, "H": 56, "W": 56, "R": 3, "S": 3, "pad": 1, "groups": 32},
        {"name": "scores", "op": "batch_matmul", "B": 12, "M": 128, "N": 128, "K": 64, "layout": "nt"},
        {"name": "tcn", "op": "conv1d", "K": 64, "C": 40, "W": 101, "S": 5, "stride": 2, "pad": [1, 3]},
        {"name": "posconv", "op": "conv1d", "K": 768, "C": 768, "W": 49, "S": 128, "pad": 64, "groups": 16},
        {"name": "conformer-dw", "op": "depthwise1d", "C": 256, "W": 100, "S": 31, "pad": 15}]}))
    inc, stem, qkv, resnext, scores, tcn, posconv, dw = load_shapes(path)
    assert (posconv.groups, posconv.out_w, posconv.flops) == (16, 50, 2 * 50 * 768 * 48 * 128)
    assert isinstance(dw, Depthwise1d) and (dw.K, dw.out_w, dw.flops) == (256, 100, 2 * 100 * 256 * 31)
    assert isinstance(tcn, Conv1d) and (tcn.pads, tcn.out_w, tcn.flops) == ((1, 3), 51, 2 * 51 * 64 * 40 * 5)
    assert (resnext.groups, resnext.flops) == (32, 2 * 56 * 56 * 128 * 4 * 9)
    assert isinstance(scores, BatchMatmul) and (scores.B, scores.layout, scores.name) == (12, "nt", "scores")
    assert (inc.name, inc.R, inc.S, inc.pads, inc.out_w) == ("inc-1x7", 1, 7, (0, 3, 0, 3), 17)
    assert (stem.N, stem.stride, stem.pads, stem.out_h) == (2, 2, (2, 2, 3, 3), 16)
    assert isinstance(qkv, Matmul) and qkv.dense and qkv.name == "qkv"


@pytest.mark.parametrize("content,words", [
    ("{not json", "not valid JSON"),
    ('{"layers": []}', 'non-empty list under "layers"'),
    ('{"layers": [{"name": "a b", "op": "conv2d"}]}', "layer 1: \"name\" must be"),
    ('{"layers": [{"name": "a", "op": "pool"}]}',
     "layer 1 (a): \"op\" must be one of conv2d, depthwise, conv1d, depthwise1d, matmul, batch_matmul"),
    ('{"layers": [{"name": "a", "op": "conv1d", "K": 4, "C": 3, "W": 8, "S": 3, "pad": [1, 2, 3]}]}',
     "layer 1 (a): conv1d pad must be one int or [left, right]"),
    ('{"layers": [{"name": "a", "op": "batch_matmul", "B": 2, "M": 4, "N": 4, "K": 4, "layout": "x"}]}',
     "layer 1 (a): batch matmul layout must be one of nn, nt, tn"),
    ('{"layers": [{"name": "a", "op": "matmul", "M": 4, "N": 4}]}', "missing field(s) K"),
    ('{"layers": [{"name": "a", "op": "matmul", "M": 4, "N": 4, "K": 4, "Q": 1}]}', "unknown field(s) Q"),
    ('{"layers": [{"name": "a", "op": "matmul", "M": 4, "N": 4, "K": 4}, {"name": "a", "op": "matmul", "M": 4, '
     '"N": 4, "K": 4}]}', "layer 2: the name 'a' is used twice"),
    ('{"layers": [{"name": "a", "op": "conv2d", "K": 4, "C": 3, "H": 8, "W": 8, "R": 3, "S": 3, "pad": [1, 2, 3]}]}',
     "layer 1 (a): pad must be"),
    ('{"layers": [{"name": "a", "op": "matmul", "M": 0, "N": 4, "K": 4}]}', "layer 1 (a): sizes must be positive"),
])
def test_a_bad_shapes_file_is_one_error_naming_file_layer_and_field(tmp_path, content, words):
    path = tmp_path / "shapes.json"
    path.write_text(content)
    with pytest.raises(ShapeError) as e:
        load_shapes(path)
    assert str(path) in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


def test_a_missing_shapes_file_or_a_directory_is_named(tmp_path):
    with pytest.raises(ShapeError, match="does not exist"):
        load_shapes(tmp_path / "nope.json")
    with pytest.raises(ShapeError, match="is a directory"):
        load_shapes(tmp_path)
