"""Recognition by structure: hand-written variants (renamed blocks, permuted iterators, transposed operands,
batch matmuls, depthwise, grouped and 1-d convolutions, blocks that are not contractions) get the right
dimensions or a one-line refusal, and every variant tvm_ttile tunes matches numpy after lowering with sampled
schemes."""
import random

import numpy as np
import pytest
import tvm
from tvm import te
from tvm.tirx import IndexMap

from kernels import conv_kept, depthwise_kept, matmul_kept
from tvm_ttile.errors import TTileError
from tvm_ttile.lowering import lower, problem_of
from tvm_ttile.operators import conv1d_nwc_reference, conv2d_nhwc_reference
from tvm_ttile.recognize import recognize, recognize_all
from tvm_ttile.samplers import make_sampler
from tvm_ttile.space import Space


def matmul_variant(M, N, K, a_t=False, b_t=False, batch=(), name="mm", order="ijk", weights_first=False):
    """C[batch..., i, j] = sum_k A * B with A [.., M, K] or [.., K, M], B [.., K, N] or [.., N, K], written by
    hand in TE with the given block name and iterator order (its numpy reference beside it)."""
    a = te.placeholder((*batch, *((K, M) if a_t else (M, K))), name="A")
    b = te.placeholder((*batch, *((N, K) if b_t else (K, N))), name="B")
    k = te.reduce_axis((0, K), name="k")

    def body(*idx):
        bi, (i, j) = idx[:-2], idx[-2:]
        x = a[(*bi, k, i)] if a_t else a[(*bi, i, k)]
        y = b[(*bi, j, k)] if b_t else b[(*bi, k, j)]
        return te.sum(y * x if weights_first else x * y, axis=k)

    c = te.compute((*batch, M, N), body, name=name)
    func = te.create_prim_func([a, b, c])
    if order != "ijk":  # the block's iterators in another order: the loops follow
        sch = tvm.s_tir.Schedule(func)
        nb = len(batch)
        perm = [nb + "ijk".index(d) for d in order]
        sch.transform_block_layout(sch.get_sblock(name), IndexMap.from_func(
            lambda *v: (*v[:nb], *(v[p] for p in perm)), ndim=nb + 3))
        func = sch.mod["main"]

    def reference(x, y):
        x = np.swapaxes(x, -1, -2) if a_t else x
        y = np.swapaxes(y, -1, -2) if b_t else y
        return x @ y

    return func, reference


def conv_variant(N, H, W, C, K, R, stride=1, dilation=1, weights="HWIO", name="cv", groups=1, depthwise=False):
    oh = (H - dilation * (R - 1) - 1) // stride + 1
    ow = (W - dilation * (R - 1) - 1) // stride + 1
    x = te.placeholder((N, H, W, C), name="X")
    r = te.reduce_axis((0, R), name="r")
    s = te.reduce_axis((0, R), name="s")
    if depthwise:
        w = te.placeholder((R, R, C), name="Wt")
        out = te.compute((N, oh, ow, C), lambda n, h, w_, c: te.sum(
            x[n, h * stride + r * dilation, w_ * stride + s * dilation, c] * w[r, s, c], axis=[r, s]), name=name)
        return te.create_prim_func([x, w, out]), None
    cg = C // groups
    c = te.reduce_axis((0, cg), name="c")
    shape = {"HWIO": (R, R, cg, K), "OHWI": (K, R, R, cg)}[weights]
    w = te.placeholder(shape, name="Wt")

    def at(k, rr, ss, cc):
        return w[rr, ss, cc, k] if weights == "HWIO" else w[k, rr, ss, cc]

    chan = (lambda k: k // (K // groups) * cg + c) if groups > 1 else (lambda k: c)
    out = te.compute((N, oh, ow, K), lambda n, h, w_, k: te.sum(
        x[n, h * stride + r * dilation, w_ * stride + s * dilation, chan(k)] * at(k, r, s, c), axis=[r, s, c]),
        name=name)

    def reference(xv, wv):
        wv = wv if weights == "HWIO" else wv.transpose(1, 2, 3, 0)
        return conv2d_nhwc_reference(xv, wv, stride, 0, dilation, groups)

    return te.create_prim_func([x, w, out]), reference


def test_recognizes_matmuls_by_structure():
    for a_t, b_t, order in [(False, False, "ijk"), (False, True, "kji"), (True, False, "jik"), (True, True, "kij")]:
        func, _ = matmul_variant(13, 48, 7, a_t, b_t, name="anything", order=order)
        c = recognize(func)
        assert (c.kind, c.block, dict(c.extents)) == ("matmul", "anything", {"i": 13, "j": 48, "k": 7})
        assert set(c.transposed) == {n for n, t in (("input", a_t), ("weights", b_t)) if t}
    c = recognize(matmul_variant(5, 32, 9, batch=(3, 2), b_t=True)[0])
    assert (c.kind, c.batch_size, dict(c.extents), c.transposed) == ("batch_matmul", 6, {"i": 5, "j": 32, "k": 9},
                                                                      ("weights",))


def test_recognizes_convolutions_by_structure():
    c = recognize(conv_variant(1, 9, 11, 5, 32, 3, stride=2, dilation=1, weights="OHWI", name="x")[0])
    assert (c.kind, c.stride, c.dilation, c.transposed) == ("conv2d", 2, 1, ("weights",))
    assert dict(c.extents) == {"n": 1, "h": 4, "w": 5, "k": 32, "r": 3, "s": 3, "c": 5}
    c = recognize(conv_variant(1, 9, 9, 32, 32, 3, stride=2, depthwise=True)[0])
    assert (c.kind, c.op, c.stride, c.transposed) == ("depthwise_conv2d", "depthwise", 2, ())
    assert dict(c.extents) == {"n": 1, "h": 4, "w": 4, "k": 32, "r": 3, "s": 3}
    # Relax's form: a grouped conv of one channel per group (a unit reduction iterator, HWIO weights [r, s, 1, k])
    c = recognize(te.create_prim_func(_relax_depthwise()))
    assert (c.kind, c.transposed, dict(c.layouts)["weights"]) == ("depthwise_conv2d", ("weights",), ("r", "s", "1", "k"))
    c = recognize(conv_variant(1, 9, 9, 8, 64, 3, groups=4)[0])
    assert (c.kind, c.groups, c.batch_size, dict(c.extents)["k"], dict(c.extents)["c"]) == ("grouped_conv2d", 4, 4, 16, 2)


def conv1d(N, L, C, K, S, stride=1, pad=0, dilation=1, groups=1, layout="NWC"):
    """A 1-d convolution as Ansor's suite writes it (te_workload.conv1d_nlc: NWC input and output, WIO weights),
    or in PyTorch's NCW / OIW layouts."""
    from tvm.s_tir.meta_schedule.testing.te_workload import conv1d_nlc

    if layout == "NWC":
        return te.create_prim_func(list(conv1d_nlc(N, L, C, K, S, stride, pad, dilation, groups)))
    x, w = te.placeholder((N, C, L), name="x"), te.placeholder((K, C, S), name="w")
    c, s = te.reduce_axis((0, C), "c"), te.reduce_axis((0, S), "s")
    return te.create_prim_func([x, w, te.compute((N, K, (L - dilation * (S - 1) - 1) // stride + 1), lambda n, k, l:
                                                 te.sum(x[n, c, l * stride + s * dilation] * w[k, c, s], axis=[c, s]))])


def test_recognizes_a_1d_convolution_as_a_conv2d_of_height_1():
    c = recognize(conv1d(1, 37, 5, 32, 3, stride=2, pad=1))
    assert (c.kind, c.op, c.one_d, c.stride, c.dilation, c.transposed) == ("conv1d", "conv2d", True, 2, 1, ())
    assert dict(c.extents) == {"n": 1, "h": 1, "w": 19, "k": 32, "r": 1, "s": 3, "c": 5}
    c = recognize(conv1d(2, 29, 16, 16, 1, dilation=2))  # one tap: a unit reduction iterator in the window
    assert (c.kind, dict(c.extents)["w"], dict(c.extents)["s"], dict(c.extents)["n"]) == ("conv1d", 29, 1, 2)


def _depthwise_1d(L=23, C=16, S=3, stride=1, dilation=1, weights="sk", layout="NWC"):
    """A depthwise 1-d convolution written by hand, weights [s, k] or [k, s], input NWC or NCW."""
    x = te.placeholder((1, L, C) if layout == "NWC" else (1, C, L), name="x")
    w = te.placeholder((S, C) if weights == "sk" else (C, S), name="w")
    s = te.reduce_axis((0, S), "s")
    out = (L - dilation * (S - 1) - 1) // stride + 1
    return te.create_prim_func([x, w, te.compute((1, out, C), lambda n, l, k: te.sum(
        (x[n, l * stride + s * dilation, k] if layout == "NWC" else x[n, k, l * stride + s * dilation])
        * (w[s, k] if weights == "sk" else w[k, s]), axis=s), name="dw1d")])


def test_recognizes_grouped_and_depthwise_1d_convolutions():
    """Ansor's conv1d_nlc with groups (grouped; groups = C = K: depthwise, WIO weights [s, 1, k]), the form Relax
    legalizes conv1d(groups=) to (topi.nn.conv, NWC / WIO), and a depthwise one by hand ([s, k] or [k, s])."""
    from tvm import topi

    c = recognize(conv1d(1, 37, 16, 32, 3, pad=1, groups=2))
    assert (c.kind, c.op, c.one_d, c.groups, c.batch_size, c.transposed) == ("grouped_conv1d", "conv2d", True, 2, 2, ())
    assert dict(c.extents) == {"n": 1, "h": 1, "w": 37, "k": 16, "r": 1, "s": 3, "c": 8}
    c = recognize(conv1d(1, 37, 16, 16, 5, stride=2, groups=16))
    assert (c.kind, c.op, c.one_d, c.groups, c.transposed) == ("depthwise_conv1d", "depthwise", True, 1, ("weights",))
    assert dict(c.extents) == {"n": 1, "h": 1, "w": 17, "k": 16, "r": 1, "s": 5}
    x, w = te.placeholder((1, 40, 12), name="x"), te.placeholder((3, 4, 24), name="w")
    c = recognize(te.create_prim_func([x, w, topi.nn.conv(x, w, 1, 1, 1, 3, "NWC", "WIO")]))
    assert (c.kind, c.groups, dict(c.extents)["k"], dict(c.extents)["c"]) == ("grouped_conv1d", 3, 8, 4)
    c = recognize(_depthwise_1d())
    assert (c.kind, c.transposed, dict(c.layouts)["weights"]) == ("depthwise_conv1d", (), ("s", "k"))
    c = recognize(_depthwise_1d(weights="ks", stride=2, dilation=3))
    assert (c.kind, c.transposed, c.stride, c.dilation) == ("depthwise_conv1d", ("weights",), 2, 3)


def _nchw():
    x, w = te.placeholder((1, 8, 9, 9), name="x"), te.placeholder((16, 8, 3, 3), name="w")
    c, r, s = te.reduce_axis((0, 8), "c"), te.reduce_axis((0, 3), "r"), te.reduce_axis((0, 3), "s")
    return [x, w, te.compute((1, 16, 7, 7), lambda n, k, h, w_: te.sum(x[n, c, h + r, w_ + s] * w[k, c, r, s],
                                                                        axis=[c, r, s]))]


def _relax_depthwise(H=9, W=9, C=32, R=3, stride=1):
    """A depthwise convolution as Relax legalizes one: a grouped conv whose groups have one channel each."""
    x, w = te.placeholder((1, H, W, C), name="x"), te.placeholder((R, R, 1, C), name="w")
    c, r, s = te.reduce_axis((0, 1), "c"), te.reduce_axis((0, R), "r"), te.reduce_axis((0, R), "s")
    oh, ow = (H - R) // stride + 1, (W - R) // stride + 1
    return [x, w, te.compute((1, oh, ow, C), lambda n, h, w_, k: te.sum(
        x[n, h * stride + r, w_ * stride + s, k // 1 + c] * w[r, s, c, k], axis=[r, s, c]))]


@pytest.mark.parametrize("func,why", [
    (lambda: te.create_prim_func(_nchw()), "NCHW"),
    (lambda: matmul_variant(4, 32, 8, weights_first=True)[0], "weights first"),
    (lambda: te.create_prim_func([a := te.placeholder((8, 8), name="a"), te.compute(
        (8,), lambda i: te.sum(a[i, k := te.reduce_axis((0, 8), "k")], axis=k), name="rowsum")]),
     "does not accumulate a product"),
    (lambda: te.create_prim_func([a := te.placeholder((8,), name="a"), te.compute((8,), lambda i: a[i] * 2.0)]),
     "no reduction block"),
    (lambda: conv1d(1, 17, 8, 16, 3, layout="NCW"), "1-d convolution whose output is not NWC"),
    (lambda: _depthwise_1d(layout="NCW"), "1-d convolution whose input is not NWC"),
])
def test_refuses_with_one_line(func, why):
    with pytest.raises(TTileError, match=why) as e:
        recognize(func())
    assert "\n" not in str(e.value)


def _lower_and_check(host, func, reference, inputs, kept, seed):
    problem = problem_of(func, host.isa.name, host.lanes)
    space = Space(problem, kept)
    target = host.target()
    for scheme in make_sampler("ttile", seed=seed).sample_many(space, 2):
        mod = lower(problem, scheme, func).sch.mod
        lib = tvm.compile(mod, target=target)
        out = np.zeros([int(d) for d in func.params[-1].shape], np.float32)
        args = [tvm.runtime.tensor(v) for v in (*inputs, out)]
        lib["main"](*args)
        ref = reference(*inputs)
        assert np.allclose(args[-1].numpy(), ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max()))), \
            scheme.text


@pytest.mark.parametrize("case", range(6))
def test_matmul_variants_match_numpy(host, case):
    rng = random.Random(2000 + case)
    M, K = rng.choice([1, 7, 13, 17]), rng.choice([3, 16, 31])
    N = host.lanes * rng.choice([1, 2, 3])
    batch = rng.choice([(), (1,), (3,), (2, 2)])
    a_t, b_t = rng.random() < 0.5, rng.random() < 0.5
    func, reference = matmul_variant(M, N, K, a_t, b_t, batch, name=f"v{case}", order=rng.choice(["ijk", "kji", "jki"]))
    data = np.random.default_rng(case)
    inputs = [data.standard_normal([int(d) for d in p.shape], dtype=np.float32) for p in func.params[:2]]
    _lower_and_check(host, func, reference, inputs, matmul_kept(host.isa.name, host.lanes), case)


@pytest.mark.parametrize("case", range(5))
def test_conv_variants_match_numpy(host, case):
    rng = random.Random(3000 + case)
    groups = 1 if case < 2 else rng.choice([2, 3])
    func, reference = conv_variant(1, rng.choice([7, 11, 13]), rng.choice([7, 9]), groups * rng.choice([3, 5, 16]),
                                   groups * host.lanes * rng.choice([1, 2]), rng.choice([1, 3]),
                                   stride=rng.choice([1, 2]), weights=rng.choice(["HWIO", "OHWI"]), name=f"c{case}",
                                   groups=groups)
    data = np.random.default_rng(case)
    inputs = [data.standard_normal([int(d) for d in p.shape], dtype=np.float32) for p in func.params[:2]]
    _lower_and_check(host, func, reference, inputs, conv_kept(host.isa.name, host.lanes), case)


@pytest.mark.parametrize("case", range(4))
def test_depthwise_variants_match_numpy(host, case):
    """Depthwise as written by hand (weights [r, s, k]), as Relax legalizes it ([r, s, 1, k], a unit reduction
    iterator) and as Ansor's suite writes it ([1, r, s, k]), on prime sizes and strides."""
    from tvm.s_tir.meta_schedule.testing.te_workload import depthwise_conv2d_nhwc

    rng = random.Random(4000 + case)
    H, W, C, R, stride = rng.choice([7, 11, 13]), rng.choice([9, 17]), host.lanes * rng.choice([1, 2]), \
        rng.choice([1, 3]), rng.choice([1, 2])
    form = ("hand", "relax", "ansor", "relax")[case]
    if form == "hand":
        func = conv_variant(1, H, W, C, C, R, stride=stride, depthwise=True, name=f"d{case}")[0]
    elif form == "relax":
        func = te.create_prim_func(_relax_depthwise(H, W, C, R, stride))
    else:
        func = te.create_prim_func(list(depthwise_conv2d_nhwc(1, H, W, C, R, stride=stride, padding=1)))
    assert recognize(func).op == "depthwise"
    data = np.random.default_rng(case)
    inputs = [data.standard_normal([int(d) for d in p.shape], dtype=np.float32) for p in func.params[:2]]
    pad = 1 if form == "ansor" else 0

    def reference(x, w):
        return conv2d_nhwc_reference(x, w.reshape(R, R, 1, C), stride, pad, 1, groups=C)

    _lower_and_check(host, func, reference, inputs, depthwise_kept(host.isa.name, host.lanes), case)


@pytest.mark.parametrize("case", range(4))
def test_conv1d_matches_numpy(host, case):
    """1-d convolutions on prime lengths, odd channel counts, strides, dilations and padding, tuned as conv2d of
    height 1 through their 3-d buffers (intrin.ONE_D), divisible and partial-tile schemes, weights in place and
    marked constant (packed), 1 and 2 threads; the output starts as NaN, so an element left unwritten would show."""
    rng = random.Random(5000 + case)
    L, C, S = rng.choice([29, 37, 61]), rng.choice([5, 13, 16]), rng.choice([1, 3, 5])
    stride, pad, dilation = rng.choice([1, 2]), rng.choice([0, 1, 2]), rng.choice([1, 1, 2])
    func = conv1d(1, L, C, host.lanes * rng.choice([1, 2]), S, stride, pad, dilation)
    if case % 2:
        func = func.with_attr("layout_free_buffers", [1])
    threads = 2 if case == 3 else 1
    problem = problem_of(func, host.isa.name, host.lanes)
    data = np.random.default_rng(case)
    inputs = [data.standard_normal([int(d) for d in p.shape], dtype=np.float32) for p in func.params[:2]]
    ref = conv1d_nwc_reference(*inputs, stride, pad, dilation)
    _lower_1d_and_check(host, problem, func, inputs, ref, conv_kept(host.isa.name, host.lanes), threads, case)


def _lower_1d_and_check(host, problem, func, inputs, ref, kept, threads, seed):
    """Divisible and partial-tile schemes of a 1-d convolution, each lowered through its 3-d buffers (intrin.ONE_D)
    and run from an output of NaN (an element left unwritten would show) against `ref`."""
    from tvm_ttile.microkernels.intrin import ONE_D

    space = Space(problem, kept, threads=threads)
    for sampler in ("ttile", "nondivisible"):
        for scheme in make_sampler(sampler, seed=seed).sample_many(space, 2):
            lowered = lower(problem, scheme, func, threads=threads)
            assert all(n.endswith(ONE_D) for n in lowered.intrinsics if not n.startswith("ttile_noinit")), lowered
            lib = tvm.compile(lowered.sch.mod, target=host.target(threads))
            args = [tvm.runtime.tensor(v) for v in (*inputs, np.full(ref.shape, np.nan, np.float32))]
            lib["main"](*args)
            assert np.allclose(args[-1].numpy(), ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max()))), \
                scheme.text


@pytest.mark.parametrize("case", range(4))
def test_grouped_and_depthwise_conv1d_match_numpy(host, case):
    """Grouped and depthwise 1-d convolutions (Ansor's form, Relax's, by hand) on prime lengths, strides,
    dilations and padding, tuned as their 2-d operator of height 1 through their 3-d buffers (intrin.ONE_D),
    divisible and partial-tile schemes, weights in place and marked constant (packed), 1 and 2 threads; the
    output starts as NaN, so an element left unwritten would show."""
    from tvm import topi

    rng = random.Random(6000 + case)
    L, S = rng.choice([29, 37, 61]), rng.choice([3, 5])
    stride, pad, dilation = rng.choice([1, 2]), rng.choice([0, 1, 2]), rng.choice([1, 2])
    lanes = host.lanes
    if case in (0, 1):  # grouped: Ansor's conv1d_nlc, then Relax's topi.nn.conv
        groups, C = rng.choice([2, 3]), rng.choice([3, 5])
        K, C = groups * lanes, groups * C
        if case == 0:
            func = conv1d(1, L, C, K, S, stride, pad, dilation, groups)
        else:
            x, w = te.placeholder((1, L, C), name="x"), te.placeholder((S, C // groups, K), name="w")
            func = te.create_prim_func([x, w, topi.nn.conv(x, w, stride, pad, dilation, groups, "NWC", "WIO")])
        kept = conv_kept(host.isa.name, lanes)
    else:  # depthwise: Ansor's (weights [s, 1, k]), then by hand ([s, k], no padding)
        C = lanes * rng.choice([1, 2])
        func = conv1d(1, L, C, C, S, stride, pad, dilation, C) if case == 2 else \
            _depthwise_1d(L, C, S, stride, dilation)
        groups, pad = C, pad if case == 2 else 0
        kept = depthwise_kept(host.isa.name, lanes)
    if case % 2:
        func = func.with_attr("layout_free_buffers", [1])
    threads = 2 if case == 3 else 1
    problem = problem_of(func, host.isa.name, lanes)
    data = np.random.default_rng(case)
    inputs = [data.standard_normal([int(d) for d in p.shape], dtype=np.float32) for p in func.params[:2]]
    wgt = inputs[1].reshape(S, 1, C) if case >= 2 else inputs[1]  # a depthwise one's as WIO
    ref = conv1d_nwc_reference(inputs[0], wgt, stride, pad, dilation, groups)
    _lower_1d_and_check(host, problem, func, inputs, ref, kept, threads, case)
