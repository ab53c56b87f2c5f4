"""Lowering: every sampled scheme's generated code matches numpy, on many seeded random small shapes
(primes, strides, dilations, padding, C = 3, K and N not multiples of the vector lanes, Lambdas)."""
import dataclasses
import random

import numpy as np
import pytest
import tvm

from kernels import conv_kept, depthwise_kept, matmul_kept
from tvm_ttile.lowering import LoweringOptions, lower, problem_of, scheme_of_schedule
from tvm_ttile.microkernels.no_init import NO_INIT
from tvm_ttile.tails import register_by_name
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import Conv2d, Depthwise, Matmul, run_against_reference
from tvm_ttile.samplers import make_sampler
from tvm_ttile.scheme import Scheme
from tvm_ttile.space import Problem, Space


def run(op, mod, target):
    return run_against_reference(op, mod, target, seed=1)


def random_conv(rng, lanes):
    from tvm_ttile.errors import ShapeError

    while True:
        R = rng.choice([1, 3, 5])
        try:
            return Conv2d(K=rng.choice([lanes, 2 * lanes, 3 * lanes, 2 * lanes - 3]), C=rng.choice([3, 5, 16]),
                          H=rng.choice([5, 7, 11, 13, 17, 19]), W=rng.choice([4, 7, 9, 13]), R=R, S=R,
                          stride=rng.choice([1, 1, 2]), pad=rng.choice([0, 1, 2]), dilation=rng.choice([1, 1, 2]))
        except ShapeError:  # an empty output: draw again
            continue


def random_depthwise(rng, lanes):
    from tvm_ttile.errors import ShapeError

    while True:
        R = rng.choice([1, 3, 5])
        try:
            return Depthwise(C=rng.choice([lanes, 2 * lanes, 3 * lanes - 5, 7]), H=rng.choice([5, 7, 11, 13, 17]),
                             W=rng.choice([4, 7, 9, 13]), R=R, S=rng.choice([R, 3]), stride=rng.choice([1, 1, 2]),
                             pad=rng.choice([0, 1, 2]), dilation=rng.choice([1, 1, 2]))
        except ShapeError:  # an empty output: draw again
            continue


def random_matmul(rng, lanes):
    return Matmul(M=rng.choice([1, 7, 13, 17, 24]), N=rng.choice([lanes, 3 * lanes, 5 * lanes - 1, 37]),
                  K=rng.choice([3, 16, 31]), dense=rng.random() < 0.3)


CASES = [("conv2d", i) for i in range(14)] + [("matmul", i) for i in range(10)] + [("depthwise", i) for i in range(8)]
MAKE = {"conv2d": (random_conv, conv_kept), "matmul": (random_matmul, matmul_kept),
        "depthwise": (random_depthwise, depthwise_kept)}


@pytest.mark.parametrize("kind,case", CASES)
def test_sampled_schemes_are_correct(host, kind, case):
    rng = random.Random(1000 + case)
    make, kept_of = MAKE[kind]
    op = make(rng, host.lanes)
    kept = kept_of(host.isa.name, host.lanes)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    space = Space(problem, kept)
    for sampler in ("ttile", "levels", "nondivisible"):
        if not make_sampler(sampler).choices(space):
            continue
        for scheme in make_sampler(sampler, seed=case).sample_many(space, 3):
            func = op.prim_func(host.lanes)
            if case % 2:  # weights marked layout-free (as Relax marks constants): packed inside the function
                func = func.with_attr("layout_free_buffers", [1])
            lowered = lower(problem, scheme, func)
            got, ref = run(op, lowered.sch.mod, host.target())
            scale = max(float(np.abs(ref).max()), 1.0)
            assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * scale), (op, scheme.text)


@pytest.mark.parametrize("case", range(6))
def test_padded_schemes_are_correct(host, case):
    """Pad specifiers (zero-padded copies, inside the function) on random prime and odd matmuls: every padded
    dimension, with weights in place, marked layout-free (packed where no padding copies them) and dense."""
    rng = random.Random(2000 + case)
    lanes = host.lanes
    op = Matmul(M=rng.choice([23, 37, 41, 47]), N=rng.choice([lanes * 7, lanes * 11 - 3, 5 * lanes + 1]),
                K=rng.choice([521, 523, 541]), dense=case % 3 == 2)
    kept = matmul_kept(host.isa.name, lanes)
    problem = Problem.from_operator(op, lanes, host.isa.name)
    space = Space(problem, kept)
    assert "k" in space.padding and "i" in space.padding
    for scheme in make_sampler("ttile", seed=case, pad=1.0).sample_many(space, 2):
        assert scheme.pads
        func = op.prim_func(lanes)
        if case % 2:
            func = func.with_attr("layout_free_buffers", [1])
        lowered = lower(problem, scheme, func)
        assert scheme_of_schedule(lowered.sch) == scheme.text
        got, ref = run(op, lowered.sch.mod, host.target())
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * max(float(np.abs(ref).max()), 1.0))


def test_vector_padding_with_a_lambda_on_prime_rows_is_correct(host):
    """N of 25 vectors (no kept width of 2-4 vectors divides it) padded to 26, so that a Lambda of 4- and 5-row
    microkernels 2 vectors wide covers M = 23 rows, the form the space offers a 97 x 1000 GEMM on AVX2."""
    lanes = host.lanes
    op = Matmul(M=23, N=25 * lanes, K=64)
    problem = Problem.from_operator(op, lanes, host.isa.name)
    scheme = Scheme.parse(f"[Pad({26 * lanes},j),T(13,j),Lambda(i,[(2,4),(3,5)]),T(64,k),U(lambda,i),U(2,j),V(j)]")
    for func in (op.prim_func(lanes), op.prim_func(lanes).with_attr("layout_free_buffers", [1])):
        lowered = lower(problem, scheme, func)
        assert scheme_of_schedule(lowered.sch) == scheme.text
        got, ref = run(op, lowered.sch.mod, host.target())
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * max(float(np.abs(ref).max()), 1.0))


@pytest.mark.parametrize("case", range(3))
def test_lambdas_along_the_vector_dimension_are_correct(host, case):
    """Two microkernels combined along the vector dimension (j of matmul, k of conv2d) where no kept width
    divides it: drawn schemes on odd and prime shapes, weights in place or constant, against numpy."""
    lanes, rng = host.lanes, random.Random(3000 + case)
    kept = [Microkernel.make("matmul", host.isa.name, lanes, 16, i=i, j=j) for i, j in ((4, 2), (4, 3), (3, 3), (3, 4))]
    ops = [Matmul(M=rng.choice([12, 24]), N=lanes * rng.choice([13, 17, 19]) - rng.choice([0, 3]), K=rng.choice([23, 40]),
                  prepack=case == 1),
           Conv2d(K=lanes * rng.choice([7, 11]) - 3, C=rng.choice([5, 8]), H=8, W=8, R=3, S=3, pad=1)]
    kept += [Microkernel.make("conv2d", host.isa.name, lanes, 16, h=4, k=k) for k in (2, 3)]
    for op in ops:
        problem = Problem.from_operator(op, lanes, host.isa.name)
        space = Space(problem, kept)
        assert any(c.dim == problem.vector for c in space.choices), op
        drawn = [s for s in make_sampler("ttile", seed=case, pad=0.0).sample_many(space, 40)
                 if f"Lambda({problem.vector}," in s.text][:2]
        assert drawn, op
        for scheme in drawn:
            lowered = lower(problem, scheme, op.prim_func(lanes))
            assert scheme_of_schedule(lowered.sch) == scheme.text
            got, ref = run(op, lowered.sch.mod, host.target())
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3 * max(float(np.abs(ref).max()), 1.0))


def test_paper_example_lowers_and_runs(host):
    """Yolo9000-12's shape family at small C: a Lambda on h (34 = 2 x 11 + 1 x 12) above tile loops. The
    paper's 11-12 x 2-vector microkernels need 24 accumulators: with 16 registers (AVX2) 1 vector along k."""
    lanes = host.lanes
    uk = 2 if host.vector_registers >= 32 else 1
    op = Conv2d(K=4 * lanes, C=8, H=34, W=34, R=3, S=3, pad=1)
    problem = Problem.from_operator(op, lanes, host.isa.name)
    scheme = Scheme.parse(f"[T({4 // uk},k),Lambda(h,[(2,11),(1,12)]),T(17,w),T(3,s),T(3,r),T(2,w),T(8,c),"
                          f"U(lambda,h),U({uk},k),V(k)]")
    lowered = lower(problem, scheme, op.prim_func(lanes))
    got, ref = run(op, lowered.sch.mod, host.target())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
    assert scheme_of_schedule(lowered.sch) == scheme.text
    assert lowered.intrinsics[0].startswith("ttile_tail~")


@pytest.mark.parametrize("act", ["relu", "leaky"])
def test_fused_bias_activation_epilogue_stays_fused(host, act):
    """bias add -> ReLU (a chain) and bias add -> max(x, 0.1 x) (a DAG, as Relax makes leaky ReLU) both end as
    one block inside the tile loops."""
    from tvm import te

    lanes = host.lanes
    conv = Conv2d(K=2 * lanes, C=8, H=8, W=8, R=3, S=3, pad=1)
    inp, wgt, out = conv.te(lanes)
    bias = te.placeholder((conv.K,), name="bias")
    add = te.compute(out.shape, lambda n, h, w, k: out[n, h, w, k] + bias[k], name="T_add")
    if act == "relu":
        relu = te.compute(out.shape, lambda *i: te.max(add(*i), 0.0), name="relu")
    else:
        scaled = te.compute(out.shape, lambda *i: add(*i) * 0.1, name="scaled")
        relu = te.compute(out.shape, lambda *i: te.max(add(*i), scaled(*i)), name="relu")
    func = te.create_prim_func([inp, wgt, bias, relu])
    problem = problem_of(func, host.isa.name, lanes)
    scheme = Scheme.parse("[T(2,h),T(8,w),T(3,r),T(3,s),T(8,c),U(4,h),U(2,k),V(k)]")
    lowered = lower(problem, scheme, func)
    assert lowered.notes == []
    text = lowered.sch.mod.script()
    add_line = next(line for line in text.splitlines() if 'sblock("relu")' in line)
    conv_line = next(line for line in text.splitlines() if 'sblock("conv2d_nhwc_init")' in line)
    assert 'sblock("T_add"' not in text and 'sblock("scaled"' not in text  # inlined into the last stage
    assert len(add_line) - len(add_line.lstrip()) > 16  # which sits inside the tile loops, not at the root
    assert len(conv_line) - len(conv_line.lstrip()) > 16
    lib = tvm.compile(lowered.sch.mod, target=host.target())
    x, w = conv.random_inputs()
    b = np.random.default_rng(0).standard_normal(conv.K).astype(np.float32)
    dev = tvm.cpu()
    res = tvm.runtime.tensor(np.zeros((1, 8, 8, conv.K), np.float32), dev)
    lib(*(tvm.runtime.tensor(v, dev) for v in (x, w, b)), res)
    ref = conv.reference(x, w) + b
    ref = np.maximum(ref, 0 if act == "relu" else 0.1 * ref)
    np.testing.assert_allclose(res.numpy(), ref, rtol=1e-4, atol=1e-4)


def test_problem_of_reads_strides_and_rejects_unpadded(host):
    from tvm_ttile.errors import TTileError

    p = problem_of(Conv2d(K=16, C=3, H=13, W=13, R=3, S=3, stride=2, dilation=2, pad=2).prim_func(16), "avx512", 16)
    assert (p.stride, p.dilation, p.size["h"]) == (2, 2, 7)
    with pytest.raises(TTileError, match="padded"):
        problem_of(Matmul(M=4, N=1000, K=8).prim_func(), "avx512", 16)
    with pytest.raises(TTileError, match="no contraction"):
        problem_of(tvm.te.create_prim_func([tvm.te.placeholder((4,), name="x")]), "avx512", 16)


def test_intrinsics_register_from_their_names(host):
    uj = 2 if host.vector_registers >= 32 else 1  # 11-12 rows x 2 vectors need 24 accumulators
    op = Matmul(M=34, N=2 * host.lanes, K=16)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    scheme = Scheme.parse(f"[Lambda(i,[(2,11),(1,12)]),T({2 // uj},j),T(16,k),U(lambda,i),U({uj},j),V(j)]")
    lowered = lower(problem, scheme, op.prim_func(host.lanes))
    from tvm.s_tir import TensorIntrin

    name = lowered.intrinsics[0]
    register_by_name(name)  # idempotent
    assert TensorIntrin.get(name) is not None
    register_by_name(f"ttile_matmul_{host.isa.name}x{host.lanes}_i3_j2_red8")
    with pytest.raises(Exception, match="not a tvm_ttile"):
        register_by_name("ttile_bogus")


def _packed(w, block, op):
    """numpy's version of the layout lowering.pack_weights makes (the runner's and Relax's packed weights)."""
    if op == "conv2d":  # [r, s, c, k] -> [k // block, r, s, c, k % block]
        R, S, C, K = w.shape
        return np.ascontiguousarray(w.reshape(R, S, C, K // block, block).transpose(3, 0, 1, 2, 4))
    K, N = w.shape  # matmul [k, j] -> [j // block, k, j % block]
    return np.ascontiguousarray(w.reshape(K, N // block, block).transpose(1, 0, 2))


@pytest.mark.parametrize("kind,text", [
    ("conv2d", "[T(2,k),T(4,w),T(3,s),T(3,r),T(32,c),U(7,h),U(2,k),V(k)]"),  # a microkernel, block 2 vectors
    ("conv2d", "[T(2,k),Lambda(h,[(1,3),(1,4)]),T(4,w),T(3,s),T(3,r),T(32,c),U(lambda,h),U(2,k),V(k)]"),  # a tail
    ("matmul", "[T(2,j),T(16,k),U(6,i),U(2,j),V(j)]"),
])
def test_layout_free_weights_are_packed(host, kind, text):
    """A function whose weights are marked layout-free (as Relax marks constants) gets a packing block that
    MetaSchedule's builder drops: with it the function is right on plain weights, without it on weights
    packed as numpy packs them; the intrinsic names carry the block size so a fresh process re-registers them."""
    from tvm_ttile.packing import LAYOUT_REWRITE, pack_block
    from tvm_ttile.measure import build_module

    L = host.lanes
    op = (Conv2d(K=4 * L, C=32, H=7, W=4, R=3, S=3, pad=1) if kind == "conv2d" else Matmul(M=6, N=4 * L, K=16))
    problem = Problem.from_operator(op, L, host.isa.name)
    scheme = Scheme.parse(text)
    func = op.prim_func(L).with_attr("layout_free_buffers", [1])
    lowered = lower(problem, scheme, func)
    block = pack_block(problem, scheme)
    assert block == 2 * L and f"_pkw{block}" in lowered.intrinsics[0]
    assert LAYOUT_REWRITE in lowered.sch.mod.script()
    got, ref = run(op, lowered.sch.mod, host.target())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))

    a, w = op.random_inputs(seed=1)
    lib = build_module(lowered.sch.mod, host.target())
    out = tvm.runtime.tensor(np.zeros(ref.shape, np.float32))
    lib(tvm.runtime.tensor(a), tvm.runtime.tensor(_packed(w, block, kind)), out)
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
    register_by_name(lowered.intrinsics[0])
    # Unmarked weights stay in place.
    assert "_pkw" not in lower(problem, scheme, op.prim_func(L)).intrinsics[0]


@pytest.mark.parametrize("text", ["[T(2,j),T(16,k),U(6,i),U(2,j),V(j)]",  # a microkernel
                                  "[T(2,j),Lambda(i,[(1,2),(1,4)]),T(16,k),U(lambda,i),U(2,j),V(j)]"])  # a tail
def test_weight_prefetch(host, text):
    """Matmul microkernels prefetch their weights `prefetch` steps ahead (default WEIGHT_PREFETCH): the generated
    code holds llvm.prefetch calls (none with prefetch=0), stays right, and its intrinsic names carry the
    distance, so that a fresh process registers the same code from a database."""
    from tvm_ttile.lowering import WEIGHT_PREFETCH
    from tvm_ttile.tails import _parse_tail_name
    from tvm_ttile.measure import build_module
    from tvm_ttile.microkernels import intrin

    L = host.lanes
    op = Matmul(M=6, N=4 * L, K=16)
    problem = Problem.from_operator(op, L, host.isa.name)
    scheme = Scheme.parse(text)
    func = op.prim_func(L).with_attr("layout_free_buffers", [1])
    ir = {}
    for distance in (None, 16, 0):
        lowered = lower(problem, scheme, func, options=LoweringOptions(prefetch=distance))
        got, ref = run(op, lowered.sch.mod, host.target())
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
        lib = build_module(lowered.sch.mod, host.target())
        ir[distance] = "".join(_llvm_ir(m) for m in [lib, *lib.imports])
        name = lowered.intrinsics[0]
        want = WEIGHT_PREFETCH["matmul"] if distance is None else distance
        parsed = _parse_tail_name(name)[4] if "Lambda" in text else intrin.parse_suffix(name)[2]
        assert parsed == want and ("_pf" in name) == bool(want)
        register_by_name(name)
    assert "llvm.prefetch" in ir[16] and "llvm.prefetch" not in ir[0]
    assert ("llvm.prefetch" in ir[None]) == bool(WEIGHT_PREFETCH["matmul"])


def test_conv2d_weight_prefetch_covers_every_tap(host):
    """A conv2d microkernel that unrolls its 3x3 window reads one weight stream per tap: with prefetch, each
    reduction step prefetches every tap's lines, not the first tap's only, and stays right."""
    from tvm_ttile.measure import build_module

    L = host.lanes
    op = Conv2d(K=2 * L, C=8, H=6, W=6, R=3, S=3, pad=1, prepack=True)
    problem = Problem.from_operator(op, L, host.isa.name)
    scheme = Scheme.parse("[T(6,h),T(8,c),U(3,s),U(3,r),U(6,w),U(2,k),V(k)]")
    counts = {}
    for distance in (4, 0):
        lowered = lower(problem, scheme, op.prim_func(L), options=LoweringOptions(prefetch=distance))
        got, ref = run(op, lowered.sch.mod, host.target())
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
        lib = build_module(lowered.sch.mod, host.target())
        counts[distance] = "".join(_llvm_ir(m) for m in [lib, *lib.imports]).count("call void @llvm.prefetch")
    assert counts[0] == 0 and counts[4] > 0 and counts[4] % 9 == 0, counts


@pytest.mark.parametrize("text,zero", [
    ("[T(2,j),T(16,k),U(6,i),U(2,j),V(j)]", True),  # the whole reduction in each call
    ("[T(2,j),T(4,k),T(4,k),U(6,i),U(2,j),V(j)]", False),  # a reduction level above the call
    ("[T(2,j),Lambda(i,[(1,2),(1,4)]),T(16,k),U(lambda,i),U(2,j),V(j)]", True),
    ("[T(2,j),Lambda(i,[(1,2),(1,4)]),T(2,k),T(8,k),U(lambda,i),U(2,j),V(j)]", False),  # inside the tail
    ("[T(4,k),T(2,j),Lambda(i,[(1,2),(1,4)]),T(4,k),U(lambda,i),U(2,j),V(j)]", False)])  # above the tail
def test_accumulators_start_at_zero_only_where_a_call_holds_the_whole_reduction(host, text, zero):
    """The zero-start variant (no load of the output tile the init has just zeroed) is chosen exactly where each
    tensorized call covers the whole reduction; either way the result is right (the output starts as NaN), and
    a fresh process registers the variant from its name."""
    from tvm_ttile.tails import _parse_tail_name
    from tvm_ttile.microkernels import intrin

    L = host.lanes
    op = Matmul(M=6, N=4 * L, K=16)
    problem = Problem.from_operator(op, L, host.isa.name)
    for allowed in (True, False):
        lowered = lower(problem, Scheme.parse(text), op.prim_func(L), options=LoweringOptions(zero_start=allowed))
        got, ref = run(op, lowered.sch.mod, host.target())
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
        name = lowered.intrinsics[0]
        parsed = _parse_tail_name(name)[5] if "Lambda" in text else intrin.parse_suffix(name)[3]
        assert parsed == (zero and allowed) == name.endswith(intrin.ZERO_START)
        register_by_name(name)


@pytest.mark.parametrize("kind,case", [("conv2d", 0), ("conv2d", 1), ("matmul", 0), ("matmul", 1), ("depthwise", 0)])
def test_vector_init_stores_whole_vectors_and_stays_right(host, kind, case):
    """With vector_init the reduction's init loop over the vector dimension is vectorized wherever it runs over
    whole vectors (whole-vector stores of the zeros) and the result still matches numpy, on drawn schemes of
    random odd shapes; without it the loop is left to LLVM. (The init kept: skip_dead_init would drop it.)"""
    rng = random.Random(3000 + case)
    make, kept_of = MAKE[kind]
    op = make(rng, host.lanes)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    for scheme in make_sampler("ttile", seed=case).sample_many(Space(problem, kept_of(host.isa.name, host.lanes)), 2):
        for vector_init in (False, True):
            lowered = lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(vector_init=vector_init, skip_dead_init=False))
            got, ref = run(op, lowered.sch.mod, host.target())
            assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), scheme.text
            sch = lowered.sch
            init = [b for b in sch.get_child_blocks(sch.get_sblock("root")) if sch.get(b).name_hint.endswith("_init")]
            inner = sch.get(sch.get_loops(init[0])[-1])
            whole = int(inner.extent) % host.lanes == 0
            assert (inner.kind == tvm.tirx.ForKind.VECTORIZED) == (vector_init and whole), scheme.text


@pytest.mark.parametrize("text,dead", [
    ("[T(2,j),T(16,k),U(6,i),U(2,j),V(j)]", True),  # the whole reduction in each call
    ("[T(2,j),T(4,k),T(4,k),U(6,i),U(2,j),V(j)]", False),  # a reduction level above the call: the init is live
    ("[T(2,j),Lambda(i,[(1,2),(1,4)]),T(16,k),U(lambda,i),U(2,j),V(j)]", True),
    ("[T(4,k),T(2,j),Lambda(i,[(1,2),(1,4)]),T(4,k),U(lambda,i),U(2,j),V(j)]", False)])
def test_dead_init_skipped_only_where_zero_start_calls_write_its_whole_tile(host, text, dead):
    """skip_dead_init replaces the reduction's init by nothing exactly where zero-start microkernels overwrite
    its whole tile; the output starts as NaN, so an element left unwritten would show."""

    L = host.lanes
    op = Matmul(M=6, N=4 * L, K=16)
    problem = Problem.from_operator(op, L, host.isa.name)
    lowered = lower(problem, Scheme.parse(text), op.prim_func(L))  # skip_dead_init is the default
    got, ref = run(op, lowered.sch.mod, host.target())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))
    skipped = [n for n in lowered.intrinsics if n.startswith(NO_INIT)]
    assert bool(skipped) == dead, lowered.intrinsics
    for name in skipped:
        register_by_name(name)


@pytest.mark.parametrize("threads", (1, 2))
def test_dead_init_skipped_where_the_output_index_is_offset(host, threads):
    """A grouped conv2d writes output channel group * K/G + k: the init's tile is still a plain tile (each loop
    moves one index by 1), so its dead init is dropped, with and without a parallel loop above it."""

    L = host.lanes
    op = Conv2d(K=4 * L, C=6, H=6, W=6, R=3, S=3, pad=1, groups=2)
    problem = Problem.from_operator(op, L, host.isa.name)
    text = "[Par(6,w),T(2,k),T(3,h),T(3,c),U(3,s),U(3,r),U(2,h),V(k)]" if threads > 1 else \
        "[T(6,w),T(2,k),T(3,h),T(3,c),U(3,s),U(3,r),U(2,h),V(k)]"
    lowered = lower(problem, Scheme.parse(text), op.prim_func(L), threads=threads)
    assert not lowered.notes and any(n.startswith(NO_INIT) for n in lowered.intrinsics), lowered
    got, ref = run_against_reference(op, lowered.sch.mod, host.target(threads), seed=1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0))


@pytest.mark.parametrize("kind,case", [("conv2d", 2), ("conv2d", 3), ("depthwise", 1), ("matmul", 2)])
def test_dead_init_skipped_on_drawn_schemes_stays_right(host, kind, case):
    """skip_dead_init on drawn schemes of random odd shapes (conv2d with padding, strides, dilations, depthwise,
    Lambdas): the result matches numpy whether the init was skipped or kept."""
    rng = random.Random(4000 + case)
    make, kept_of = MAKE[kind]
    op = make(rng, host.lanes)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    for scheme in make_sampler("ttile", seed=case).sample_many(Space(problem, kept_of(host.isa.name, host.lanes)), 3):
        lowered = lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(skip_dead_init=True))
        got, ref = run(op, lowered.sch.mod, host.target())
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), scheme.text


@pytest.mark.parametrize("case", [0, 1, 2])
def test_depthwise_input_copy_in_whole_vectors_stays_right(host, case):
    """vector_copy on drawn depthwise schemes of random odd shapes (padding, strides, dilations, channels padded
    to whole vectors): each tile's input copy is vectorized, and the result matches numpy."""
    op = random_depthwise(random.Random(5000 + case), host.lanes)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    space = Space(problem, depthwise_kept(host.isa.name, host.lanes))
    for scheme in make_sampler("ttile", seed=case).sample_many(space, 3):
        lowered = lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(vector_copy=True))
        assert not any("not vectorized" in n for n in lowered.notes), lowered.notes
        got, ref = run(op, lowered.sch.mod, host.target())
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), scheme.text


@pytest.mark.parametrize("kind,copy_at", [("depthwise", "pass"), ("depthwise", "h"), ("depthwise", "w"),
                                          ("depthwise", "inner"), ("conv2d", "inner"), ("conv2d", "k")])
def test_input_copy_made_anywhere_stays_right(host, kind, copy_at):
    """The input copy (padding, channels padded to whole vectors) made before the operator, under the innermost
    tile loop over a dimension, or under the innermost tile loop of all: drawn schemes of random odd shapes match
    numpy; a place that is not one gets a one-line error."""
    from tvm_ttile.errors import TTileError
    make, kept = MAKE[kind]
    op = make(random.Random(5100 + sum(map(ord, kind + copy_at))), host.lanes)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    for scheme in make_sampler("ttile", seed=7).sample_many(Space(problem, kept(host.isa.name, host.lanes)), 2):
        lowered = lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(copy_at=copy_at))
        got, ref = run(op, lowered.sch.mod, host.target())
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), scheme.text
    with pytest.raises(TTileError, match="copy_at='c'"):
        lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(copy_at="c"))


def _llvm_ir(module) -> str:
    try:
        return module.inspect_source("ll")
    except Exception:  # noqa: BLE001 - a module with no LLVM source (e.g. the host wrapper)
        return ""


@pytest.mark.parametrize("make,text", [
    (lambda L: Matmul(M=5, N=3 * L + 2, K=24, prepack=True), "[T(4,j),T(24,k),U(5,i),V(j)]"),
    (lambda L: Matmul(M=5, N=3 * L + 2, K=24, dense=True, prepack=True), "[T(4,j),T(24,k),U(5,i),V(j)]"),
    (lambda L: Matmul(M=5, N=4 * L, K=24, dense=True, prepack=True), "[T(4,j),T(24,k),U(5,i),V(j)]"),
    (lambda L: Conv2d(K=L + 4, C=8, H=6, W=6, R=3, S=3, prepack=True), "[T(4,h),T(8,c),U(4,w),U(2,k),V(k)]"),
])
def test_constant_weights_padded_and_transposed_at_build_time(host, make, text):
    """Constants (prepack) that are not whole vectors come padded with zeros, as a network's build pads them, and
    a dense layer's transpose is a plain copy: both are packed at build time (the timed function takes the packed
    layout), none is a copy per call; verification pads the operator's weights the same way (weights_for)."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    from tvm_ttile.operators import weights_for

    L = host.lanes
    op = make(L)
    problem = Problem.from_operator(op, L, host.isa.name)
    lowered = lower(problem, Scheme.parse(text), op.prim_func(L))
    timed = [tuple(int(x) for x in a.shape) for a in ArgInfo.from_entry_func(lowered.sch.mod, remove_preproc=True)]
    assert len(timed[1]) == len(op.random_inputs()[1].shape) + 1  # [vector blocks, ..., block]
    assert np.prod(timed[1]) == np.prod(weights_for(op, op.random_inputs()[1], op.prim_func(L)).shape)
    assert timed[2] == op.output_shape
    got, ref = run(op, lowered.sch.mod, host.target())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0))


@pytest.mark.parametrize("op,text", [
    # stride 2, prime input, channels padded to whole vectors: most tiles inside, a border row/column outside
    (lambda L: Depthwise(C=2 * L - 3, H=23, W=19, R=3, S=3, stride=2, pad=1), "[T(2,k),T(6,h),T(5,w),T(3,r),U(3,s),U(2,w),U(2,h),V(k)]"),
    # asymmetric padding, 5x3 window, stride 1
    (lambda L: Depthwise(C=L, H=17, W=13, R=5, S=3, pad=(2, 1, 1, 0)), "[T(16,h),T(6,w),T(5,r),U(3,s),U(2,w),V(k)]"),
    # dilation 2 and a Lambda: its tail covers whole rows, never inside: guarded throughout
    (lambda L: Depthwise(C=2 * L, H=11, W=11, R=3, S=3, pad=2, dilation=2),
     "[T(11,h),Lambda(w,[(2,4),(1,3)]),T(3,r),U(3,s),U(lambda,w),U(2,k),V(k)]"),
    # stride 2, 7-wide output rows one microkernel wide (Ansor's DEP-2): every tile touches the left padding
    (lambda L: Depthwise(C=4 * L, H=14, W=14, R=3, S=3, stride=2, pad=1), "[T(2,k),T(7,h),T(2,k),T(3,r),U(3,s),U(7,w),V(k)]"),
])
def test_depthwise_tiles_inside_the_input_read_it_in_place(host, op, text):
    """read_in_place: a depthwise tile whose window lies inside the input skips its padded copy and its
    microkernels read the input itself; border tiles read it too, each load guarded by the copy's condition, where
    channels are whole vectors (else, and with border="copy", they copy their window). The result matches numpy
    every way, the rewrite is applied once whatever the number of passes, lower(options=LoweringOptions(read_in_place=False)) marks
    nothing, and by default the copy goes where it copies the fewest elements (per channel tile or per tensorized
    region): none with guarded borders."""
    import re

    from tvm_ttile import read_in_place

    op = op(host.lanes)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    scheme = Scheme.parse(text)
    for border in ("guard", "copy"):
        copied = {at: read_in_place.copied_elements(lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(copy_at=at, border=border)).sch.mod["main"])
                  for at in ("k", "inner", None)}
        assert copied[None] == min(copied["k"], copied["inner"]), (border, copied)  # the place that copies least
        assert (copied[None] == 0) == (border == "guard" and not problem.vector_pad), (border, copied)
    whole_rows = "Lambda" in text or "U(7,w)" in text  # no tile inside the input
    marked = lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(copy_at="inner", border="copy")).sch.mod
    assert read_in_place.ANNOTATION in marked.script()
    once = read_in_place.apply(marked)
    branches = len(re.findall(r"^\s+if .*:$", once.script(), re.M))
    assert whole_rows == (branches == 0), once.script()
    assert read_in_place.apply(once).same_as(once)  # nothing marked is left: a second pass changes nothing
    guarded = read_in_place.apply(lower(problem, scheme, op.prim_func(host.lanes)).sch.mod)
    # a guarded load (or a constant zero: wholly in the padding) feeds an FMA
    assert bool(re.search(r"T\.fma\(T\.(if_then_else|Broadcast)", guarded["main"].script())) == (not problem.vector_pad)
    assert read_in_place.apply(guarded).same_as(guarded)
    for mod in (marked, lower(problem, scheme, op.prim_func(host.lanes)).sch.mod,
                lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(read_in_place=False)).sch.mod):
        got, ref = run(op, mod, host.target())  # tvm.compile: the pass is in TVM's pipeline
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), text
    assert read_in_place.ANNOTATION not in lower(problem, scheme, op.prim_func(host.lanes), options=LoweringOptions(read_in_place=False)).sch.mod.script()


def _conv_with_identity_copy(op):
    """op's conv2d as TOPI writes it for an unpadded layer: a `pad_temp` stage copying the input unchanged."""
    from tvm import te

    inp = te.placeholder((op.N, op.H, op.W, op.C), "float32", name="I")
    wgt = te.placeholder((op.R, op.S, op.C, op.K), "float32", name="W")
    copy = te.compute(inp.shape, lambda *i: inp(*i), name="pad_temp")
    r, s, c = (te.reduce_axis((0, n), name=x) for n, x in ((op.R, "r"), (op.S, "s"), (op.C, "c")))
    out = te.compute(op.output_shape, lambda n, h, w, k: te.sum(
        copy[n, h * op.stride + r, w * op.stride + s, c] * wgt[r, s, c, k], axis=[r, s, c]), name="conv2d_nhwc")
    return te.create_prim_func([inp, wgt, out])


@pytest.mark.parametrize("seed", range(3))
def test_a_copy_that_pads_nothing_is_inlined(host, seed):
    """A padding stage that pads nothing (TOPI's, for 1x1 or unpadded layers of Relax networks) is inlined: the
    convolution reads its input where it lies, no pass copies it, and drawn schemes of odd shapes match numpy. A
    stage that does pad stays."""
    rng = random.Random(6100 + seed)
    op = Conv2d(K=rng.choice([host.lanes, 2 * host.lanes]), C=rng.choice([3, 5, 16]), H=rng.choice([7, 11, 13]),
                W=rng.choice([7, 9, 13]), R=rng.choice([1, 3]), S=1, stride=rng.choice([1, 2]))
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    for scheme in make_sampler("ttile", seed=seed).sample_many(Space(problem, conv_kept(host.isa.name, host.lanes)), 2):
        lowered = lower(problem, scheme, _conv_with_identity_copy(op))
        assert "pad_temp" not in lowered.sch.mod.script(), scheme.text
        got, ref = run(op, lowered.sch.mod, host.target())
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), scheme.text
    padded = dataclasses.replace(op, pad=1)
    problem = Problem.from_operator(padded, host.lanes, host.isa.name)
    scheme = make_sampler("ttile", seed=seed).sample_many(Space(problem, conv_kept(host.isa.name, host.lanes)), 1)[0]
    assert "pad_temp" in lower(problem, scheme, padded.prim_func(host.lanes)).sch.mod.script()


@pytest.mark.parametrize("seed", range(3))
def test_in_place_schemes_are_correct(host, seed):
    """InPlace: a conv2d's padded input read where it lies, border tiles guarding their loads or copying their
    window, instead of padded in a pass. Drawn schemes of random padded shapes (odd and prime sizes, strides,
    dilations) match numpy both ways and with the pass; guarded borders copy nothing, bordered copies copy
    something, the pass is not marked for in-place reads; a matmul refuses InPlace in one line."""
    from tvm_ttile import read_in_place
    from tvm_ttile.errors import TTileError

    rng = random.Random(5300 + seed)
    op = random_conv(rng, host.lanes)
    while not any(op.pads):
        op = random_conv(rng, host.lanes)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    assert problem.halo and problem_of(op.prim_func(host.lanes), host.isa.name, host.lanes).halo
    drawn = make_sampler("ttile", seed=seed, in_place=1.0).sample_many(Space(problem, conv_kept(host.isa.name,
                                                                                                  host.lanes)), 2)
    for scheme in [drawn[0].with_in_place(b) for b in ("guard", "copy", "")] + drawn[1:]:
        mod = lower(problem, scheme, op.prim_func(host.lanes)).sch.mod
        assert (read_in_place.ANNOTATION in mod.script()) == bool(scheme.in_place), scheme.text
        copied = read_in_place.copied_elements(mod["main"])
        assert copied is None or (copied == 0) == (scheme.in_place != "copy"), (scheme.text, copied)
        got, ref = run(op, mod, host.target())
        assert np.allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0)), scheme.text
    mm = Matmul(M=7, N=host.lanes, K=16)
    mm_problem = Problem.from_operator(mm, host.lanes, host.isa.name)
    scheme = make_sampler("ttile", seed=0).sample(Space(mm_problem, matmul_kept(host.isa.name, host.lanes)))
    with pytest.raises(TTileError, match="InPlace reads a convolution's padded input; matmul has none"):
        lower(mm_problem, scheme.with_in_place("guard"), mm.prim_func(host.lanes))


@pytest.mark.parametrize("case", range(5))
def test_window_row_and_column_microkernels_are_correct(host, case):
    """Microkernels unrolling one row (1 x S) or one column (R x 1) of a window the base unrolls do not divide
    (Inception's 1x7 and 7x1, a 7x7 over 8 channels, a 1x3 over 5, a 1-d one of 5 taps), drawn from their space on
    odd shapes with strides, padding and layout-free weights, against numpy."""
    from tvm_ttile.microkernels import family

    rng = random.Random(4000 + case)
    lanes, isa = host.lanes, host.isa
    R, S, C = [(1, 7, 5), (7, 1, 16), (7, 7, 8), (1, 3, 5), (1, 5, 16)][case]
    if case == 4:  # a 1-d convolution: the 2-d one of height 1 on its own buffers
        from tvm_ttile.operators import Conv1d

        op = Conv1d(K=lanes, C=C, W=31, S=S, pad=2)
    else:
        op = Conv2d(K=rng.choice([lanes, 2 * lanes - 3]), C=C, H=rng.choice([9, 13]), W=rng.choice([7, 11, 14]), R=R,
                    S=S, stride=rng.choice([1, 2]), pad=(R // 2, S // 2))
    problem = Problem.from_operator(op, lanes, isa.name)
    space = Space(problem, family.window_candidates(isa, 16, R, S))  # these alone, so every scheme uses one
    drawn = make_sampler("ttile", seed=case).sample_many(space, 4)
    assert drawn and all(f"U({R},r)" in s.text or f"U({S},s)" in s.text for s in drawn), [s.text for s in drawn]
    for scheme in drawn:
        func = op.prim_func(lanes)
        if case % 2:
            func = func.with_attr("layout_free_buffers", [1])
        lowered = lower(problem, scheme, func)
        got, ref = run(op, lowered.sch.mod, host.target())
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(float(np.abs(ref).max()), 1.0))


def test_read_in_place_joins_the_pipeline_only_when_installed():
    """Importing tvm_ttile changes nothing in TVM; read_in_place.install() (which mark and tvm_ttile's builders
    call) puts the pass in front of the "s_tir" pipeline once, however often it is called."""
    import subprocess
    import sys

    code = ("from tvm.tirx import compilation_pipeline as c\n"
            "import tvm_ttile.lowering, tvm_ttile.network\n"
            "from tvm_ttile import read_in_place\n"
            "before = getattr(c.PIPELINE_MAP['s_tir'], 'tvm_ttile_read_in_place', False)\n"
            "read_in_place.install(); first = c.PIPELINE_MAP['s_tir']\n"
            "read_in_place.install()\n"
            "print(before, first.tvm_ttile_read_in_place, c.PIPELINE_MAP['s_tir'] is first)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True"], out
