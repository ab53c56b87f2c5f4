"""bf16 (bf16 x bf16 -> fp32 on `vdpbf16ps`): the bits and their rounding, the one-line refusals, the microkernels
and every scheme drawn for them against a numpy reference on the same bf16 values (fp32 accumulation's tolerance),
at 1 and 2 threads; the code built for an AVX512_BF16 target on any host; the bf16 peak; work dirs kept apart."""
import dataclasses
import random

import numpy as np
import pytest

from kernels import blocked_weights
from tvm_ttile import bfloat16
from tvm_ttile import cpu as cpu_mod
from tvm_ttile.context import Context
from tvm_ttile.errors import ShapeError, TTileError, UnsupportedISAError
from tvm_ttile.lowering import lower
from tvm_ttile.microkernels import family, intrin
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import Conv2d, QConv2d, QMatmul, at_precision, run_against_reference
from tvm_ttile.precision import dot_product, require
from tvm_ttile.recognize import recognize
from tvm_ttile.samplers import make_sampler
from tvm_ttile.space import Problem, Space
from test_int8 import isas_computing

HOST = cpu_mod.detect_host()
needs_bf16 = pytest.mark.skipif(dot_product("bf16", HOST) is None,
                                reason="this CPU has no AVX512_BF16: bf16 code is built, not run, here")
RTOL = 1e-5  # of the output's scale: the reference multiplies the same bf16 values, only the sum order differs


def _close(got, ref) -> bool:
    return got.dtype == np.float32 and float(np.max(np.abs(got - ref))) <= RTOL * float(np.max(np.abs(ref)))


def test_bf16_bits_round_to_nearest_even_and_back_exactly():
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38, 1e-40, np.inf, np.nan], np.float32)
    b = bfloat16.bits(x)
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even one (1); 1 + 3 * 2^-8 goes up
    assert list(b[:4]) == [0x3F80, 0x3F80, 0x3F82, 0xC020] and b[6] == 0x7F80 and np.isnan(bfloat16.values(b)[7])
    assert np.array_equal(bfloat16.values(bfloat16.bits(bfloat16.values(b[:7]))), bfloat16.values(b[:7]))


def test_a_cpu_without_bf16_is_refused_in_one_line():
    bare = dataclasses.replace(HOST, extensions=())
    with pytest.raises(UnsupportedISAError, match="cannot compute bf16: it needs avx512_bf16") as e:
        require("bf16", bare)
    assert "\n" not in str(e.value)
    with pytest.raises(UnsupportedISAError, match="cannot compute bf16"):
        Context.make(cpu=bare, precision="bf16")
    with pytest.raises(TTileError, match="precision 'fp16' is not supported; choose from fp32, int8, bf16"):
        Context.make(cpu=bare, precision="fp16")


def test_bf16_operators_pack_pairs_and_are_recognized():
    op = QMatmul(M=3, N=20, K=5, precision="bf16")
    a, w = op.random_inputs(0)
    packed = op.pack_weights(w, 16)
    assert packed.shape == (3, 32, 2) and packed.dtype == np.uint16 and packed[2, 19, 0] == w[4, 19]
    assert not packed[2, :, 1].any() and not packed[:, 20:, :].any()  # K and N padding: zeros (+0.0)
    assert np.array_equal(op.pack_weights(bfloat16.values(w), 16), packed)  # fp32 weights are rounded to bf16
    with pytest.raises(ShapeError, match=r"bf16 weights must be uint16 \[5, 20\]"):
        op.pack_weights(w.astype(np.int16), 16)
    c = recognize(op.prim_func(16))
    assert (c.kind, c.precision, dict(c.extents)["k"]) == ("matmul", "bf16", 6)
    conv = at_precision(Conv2d(K=20, C=3, H=5, W=6, R=3, S=3, pad=1), "bf16")
    assert isinstance(conv, QConv2d) and conv.packed_shape(16) == (3, 3, 2, 32, 2)
    c = recognize(conv.prim_func(16))
    assert (c.kind, c.precision, dict(c.extents)["c"]) == ("conv2d", "bf16", 4)
    with pytest.raises(ShapeError, match="zero point must be in"):
        QConv2d(K=16, C=16, H=8, W=8, R=1, S=1, input_zero=3, precision="bf16")
    with pytest.raises(ShapeError, match="not 'fp32'; the fp32 operator is Matmul"):
        QMatmul(M=1, N=1, K=1, precision="fp32")


def test_bf16_microkernels_build_for_an_avx512_bf16_target_on_any_host():
    """What runs nowhere here still compiles: the instruction is in the code built for a BF16 target."""
    import tvm

    mk = Microkernel.make("conv2d", "avx512", 16, 8, precision="bf16", w=4, k=2)
    target = tvm.target.Target({"kind": "llvm", "mcpu": "znver4", "mattr": ["+avx512bf16"]})
    lib = tvm.compile(intrin.tensorized_tile(mk), target=target)
    assert "vdpbf16ps" in lib.mod.inspect_source("asm")


@needs_bf16
@pytest.mark.parametrize("op,unroll", [("matmul", dict(i=6, j=4)), ("matmul", dict(i=1, j=1)),
                                       ("matmul", dict(i=9, j=3)), ("conv2d", dict(w=6, k=2)),
                                       ("conv2d", dict(w=4, h=2, k=1, r=3, s=3))])
def test_bf16_microkernels_match_numpy_on_the_same_bf16_values(op, unroll):
    """On each ISA's form the host has (512-bit; 256-bit on AVX512VL)."""
    for model in isas_computing("bf16"):
        mk = Microkernel.make(op, model.isa.name, model.lanes, 32, precision="bf16", **unroll)
        if mk.output_registers + mk.weight_vectors > model.vector_registers:
            continue
        target = Context.make(cpu=model, precision="bf16").target
        got, ref = run_against_reference(intrin.tile_problem(mk), intrin.tensorized_tile(mk), target, seed=3)
        assert _close(got, ref), mk.text


def _drawn_schemes_match(ops, kept_of, threads) -> int:
    target = Context.make(threads=threads, precision="bf16").target
    checked = 0
    for n, op in enumerate(ops):
        problem = Problem.from_operator(op, HOST.lanes, HOST.isa.name)
        assert problem.precision == "bf16"
        space = Space(problem, kept_of(op), threads=threads)
        for sampler in ("ttile", "nondivisible"):
            if not make_sampler(sampler).choices(space):
                continue
            for scheme in make_sampler(sampler, seed=n).sample_many(space, 2):
                lowered = lower(problem, scheme, op.prim_func(HOST.lanes), threads=threads)
                assert blocked_weights(lowered), scheme.text
                got, ref = run_against_reference(op, lowered.sch.mod, target, seed=n)
                assert _close(got, ref), (op, scheme.text)
                checked += 1
    return checked


@needs_bf16
@pytest.mark.parametrize("threads", [1, 2])
def test_drawn_bf16_schemes_match_numpy(threads):
    """Random matmuls and convolutions (primes, odd K and C, N and K not whole vectors, strides, asymmetric
    pads, a grouped one) and schemes of every sampler, lowered and run against the reference."""
    rng = random.Random(5 + threads)
    L = HOST.lanes
    ops = [QMatmul(M=rng.choice([1, 13, 29, 97]), N=rng.choice([5, L, 3 * L + 1]), K=rng.choice([1, 31, 64, 131]),
                   precision="bf16") for _ in range(3)]
    ops += [QConv2d(K=rng.choice([5, L, 2 * L + 3]), C=rng.choice([1, 3, 13]), H=rng.choice([7, 11]),
                    W=rng.choice([5, 13]), R=R, S=R, stride=rng.choice([1, 2]),
                    pad=rng.choice([0, R // 2, (R // 2, 0, 0, R // 2)]), precision="bf16")
            for R in (rng.choice([1, 3]), 3, 5)]
    ops.append(QConv2d(K=2 * (L + 3), C=2 * 5, H=7, W=9, R=3, S=3, pad=1, groups=2, precision="bf16"))  # grouped
    convs = [Microkernel.make("conv2d", HOST.isa.name, L, 16, precision="bf16", **u)
             for u in (dict(w=5, k=1), dict(w=3, k=2), dict(w=2, h=2, k=1, r=3, s=3), dict(w=1, k=1))]
    matmuls = family.candidates("matmul", HOST.isa, 16, "bf16")
    assert _drawn_schemes_match(ops, lambda op: convs if isinstance(op, QConv2d) else matmuls, threads) >= 18


@needs_bf16
def test_the_bf16_peak_is_measured_on_its_instruction():
    peak = cpu_mod.measure_peak(HOST, repeat=1, precision="bf16")
    assert peak["instruction"] == "avx512_bf16" and "+avx512bf16" in peak["target"]["mattr"]
    assert peak["peak_gflops"] > 0  # (how it compares with fp32's is a benchmark's: results/bf16_zen4/peaks.md)


@needs_bf16
def test_bf16_work_dirs_are_not_reused_as_fp32_and_tuning_verifies(tmp_path):
    from tvm_ttile.tune import tune
    from tvm_ttile.workdir import WorkDirMismatch

    op = at_precision(Conv2d(K=24, C=8, H=9, W=9, R=3, S=3, pad=1, name="c"), "bf16")
    kept = [Microkernel.make("conv2d", HOST.isa.name, HOST.lanes, 64, precision="bf16", w=3, k=1)]
    res = tune(op, trials=3, kept=kept, work_dir=str(tmp_path / "c"), progress=False)
    assert res.verified and res.gflops > 0
    with pytest.raises(WorkDirMismatch, match="precision"):
        Context.make(work_dir=str(tmp_path / "c")).claim()


@pytest.mark.parametrize("kind", ["residual", "depthwise", "tokens", "dense", "grouped"])
def test_a_bf16_network_computes_its_products_in_bf16_and_names_what_stays_fp32(kind):
    """The rewrite on small models (a residual block, a depthwise layer, a linear layer on tokens, a Gemm head, a
    grouped conv2d): each conv2d / matmul by constant weights a bf16 task, a depthwise one kept fp32 with its
    reason; where the CPU has AVX512_BF16, the untuned bf16 build is within bf16's rounding of the fp32 build."""
    pytest.importorskip("onnx")
    import tvm
    from test_qdq import SHAPE, _model
    from tvm.relax.frontend.onnx import from_onnx

    from tvm_ttile.network import build_network, run
    from tvm_ttile.relax import prepare, quantized
    from tvm_ttile.relax.bf16 import Bf16Report

    mod = from_onnx(_model(kind, np.random.default_rng(0)), keep_params_in_input=False)
    report = Bf16Report()
    bf16 = prepare(mod, HOST, precision="bf16", bf16_report=report)
    want = {"residual": (3, 0), "depthwise": (1, 1), "tokens": (2, 0), "dense": (2, 0), "grouped": (2, 0)}[kind]
    assert (len(report.bf16), len(report.kept_fp32)) == want, report
    if kind == "depthwise":
        assert "16 groups" in report.kept_fp32[0][1]
    assert quantized.precision_of(bf16) == "bf16"
    text = "\n".join(str(f) for f in bf16.functions.values() if isinstance(f, tvm.tirx.PrimFunc))
    assert '"uint16"' in text  # weights and rounded inputs as bf16 bits
    if dot_product("bf16", HOST) is None:
        with pytest.raises(UnsupportedISAError, match="cannot compute bf16"):
            quantized.context_for(bf16, Context.make())
        return
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    got = run(build_network(bf16, None, Context.make(precision="bf16")), x)
    ref = run(build_network(prepare(mod, HOST), None, Context.make()), x)
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 2e-2 * np.abs(ref).max()


def test_a_precision_the_model_cannot_take_is_refused_in_one_line():
    from tvm_ttile.network.model import check_precision
    from tvm_ttile.relax.quantized import IntegerReport

    with pytest.raises(TTileError, match="no quantized .QDQ. conv2d or matmul: int8 needs a model quantized first"):
        check_precision("int8", IntegerReport(), "resnet18")
    with pytest.raises(TTileError, match="is a quantized .QDQ. model: it runs in int8, not bf16"):
        check_precision("bf16", IntegerReport(integer=["conv2d"]), "r18_int8")
    check_precision("bf16", IntegerReport(), "resnet18")


def test_libraries_time_only_the_precisions_they_compute():
    from tvm_ttile.baselines import handles

    assert handles("onnxruntime", QConv2d(K=16, C=16, H=8, W=8, R=3, S=3))  # int8: QLinearConv
    assert not handles("onnxruntime", QConv2d(K=16, C=16, H=8, W=8, R=3, S=3, precision="bf16"))
    assert handles("onnxruntime", Conv2d(K=16, C=16, H=8, W=8, R=3, S=3))
