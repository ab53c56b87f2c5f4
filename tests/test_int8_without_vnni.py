"""int8 on a CPU without VNNI (`vpmaddubsw` + `vpmaddwd`, precision.PairedDotProduct): which instruction a CPU
computes int8 with, its microkernels and drawn schemes against the exact integer reference at 1 and 2 threads,
weights limited to |w| <= 64 (beyond it the s16 pair sum saturates: shown, then refused in one line), the code
built for a target without VNNI on any x86 host, and a QDQ model's layers made int8 only where their weights fit.
Measured on this host by taking its VNNI away from the CPU model (a target without it does the same)."""
import dataclasses
import random

import numpy as np
import pytest

from tvm_ttile import cpu as cpu_mod
from tvm_ttile.context import Context
from tvm_ttile.errors import ShapeError, UnsupportedISAError
from tvm_ttile.lowering import lower
from tvm_ttile.microkernels import family, intrin
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import QConv2d, QMatmul, run_against_reference
from tvm_ttile.precision import PMADD_256, PMADD_512, VNNI_256, VNNI_512, dot_product, require, tag_for
from tvm_ttile.samplers import make_sampler
from tvm_ttile.space import Problem, Space

HOST = cpu_mod.detect_host()


def _without_vnni(isa: str):
    """The host at `isa` with no dot-product extension: what a CPU without VNNI is (None: not runnable here)."""
    try:
        return dataclasses.replace(cpu_mod.detect_host(isa), extensions=())
    except UnsupportedISAError:
        return None


MODELS = [m for m in (_without_vnni("avx512"), _without_vnni("avx2")) if m is not None and dot_product("int8", m)]
needs_x86 = pytest.mark.skipif(not MODELS, reason="this host runs neither AVX-512BW nor AVX2 code")


def _model(isa: str, flags=(), extensions=()):
    return cpu_mod.CPUModel(name=f"test {isa}", isa=cpu_mod.get_isa(isa), flags=flags, extensions=extensions)


def test_each_cpu_computes_int8_with_the_best_instruction_it_has():
    cases = [(_model("avx512", ("avx512f", "avx512bw"), ("avx512_vnni",)), VNNI_512),
             (_model("avx512", ("avx512f", "avx512bw")), PMADD_512),
             (_model("avx2", ("avx2", "fma"), ("avx_vnni",)), VNNI_256),
             (_model("avx2", ("avx2", "fma")), PMADD_256)]
    for model, dot in cases:
        assert require("int8", model) is dot, model
    assert tag_for("int8", cases[1][0]) == "pmadd" and tag_for("int8", cases[0][0]) == ""
    assert PMADD_512.weight_limit == 64 and VNNI_512.weight_limit == 128
    with pytest.raises(UnsupportedISAError, match="cannot compute int8: it needs avx512_vnni or avx_vnni or "
                                                  "avx512bw or avx2") as e:
        require("int8", _model("avx512", ("avx512f",)))  # AVX-512F without BW has no byte multiply
    assert "\n" not in str(e.value)


def test_a_target_without_vnni_computes_int8_without_it():
    """The target decides: code for a Skylake-X runs on a host with VNNI, and must not use it."""
    if "avx512f" not in HOST.flags:
        pytest.skip("an AVX-512 host")
    skylake = cpu_mod.from_target('{"kind": "llvm", "mcpu": "skylake-avx512"}')
    assert "avx512_vnni" not in skylake.extensions and require("int8", skylake) is PMADD_512
    assert skylake.cache_dir != HOST.cache_dir  # its peak and catalogs are its own


def test_no_vnni_microkernels_are_values_with_their_own_names():
    mk = Microkernel.make("matmul", "avx512", 16, 64, precision="int8", dot="pmadd", i=6, j=2)
    vnni = dataclasses.replace(mk, dot="")
    assert mk.text == "matmul/avx512x16:int8.pmadd [U(6,i),U(2,j),V(j)] red=64" and vnni.text != mk.text
    assert mk.name == "ttile_matmul_avx512x16_int8_pmadd_i6_j2_red64" and mk.name != vnni.name
    assert Microkernel.parse(mk.text) == mk and Microkernel.from_name(mk.name) == mk
    assert mk.instruction is PMADD_512 and vnni.instruction is VNNI_512
    with pytest.raises(UnsupportedISAError, match="no bf16 instruction tagged 'pmadd' for avx512"):
        Microkernel.make("matmul", "avx512", 16, 64, precision="bf16", dot="pmadd", i=6, j=2)


def test_the_no_vnni_code_is_built_for_its_target_on_any_host():
    """Compiled only (any x86 host): the asm multiplies with vpmaddubsw and vpmaddwd, never vpdpbusd."""
    import tvm

    cpu = cpu_mod.CPUModel(name="skylake", isa=cpu_mod.get_isa("avx512"), flags=("avx512f", "avx512bw"))
    mk = Microkernel.make("conv2d", "avx512", 16, 32, precision="int8", dot=tag_for("int8", cpu), w=4, k=2)
    lib = tvm.compile(intrin.tensorized_tile(mk), target=Context.make(cpu=cpu, precision="int8").target)
    asm = lib.mod.inspect_source("asm")
    assert "vpmaddubsw" in asm and "vpmaddwd" in asm and "vpdpbusd" not in asm


@needs_x86
@pytest.mark.parametrize("unroll", [dict(i=1, j=1), dict(i=6, j=4), dict(i=14, j=2), dict(i=3, j=6)])
def test_no_vnni_matmul_microkernels_match_an_exact_integer_reference(unroll):
    for model in MODELS:
        mk = Microkernel.make("matmul", model.isa.name, model.lanes, 32, precision="int8",
                              dot=tag_for("int8", model), **unroll)
        if mk.min_registers > model.vector_registers:
            continue
        target = Context.make(cpu=model, precision="int8").target
        op = intrin.tile_problem(mk)
        assert op.weight_limit == 64
        got, ref = run_against_reference(op, intrin.tensorized_tile(mk), target, seed=3)
        assert got.dtype == np.int32 and np.array_equal(got, ref), mk.text


@needs_x86
@pytest.mark.parametrize("unroll,stride", [(dict(w=6, k=2), 1), (dict(w=4, h=2, k=1, r=3, s=3), 2),
                                           (dict(w=14, k=1), 1)])
def test_no_vnni_conv2d_microkernels_match_an_exact_integer_reference(unroll, stride):
    from test_int8 import conv2d_microkernels_match

    conv2d_microkernels_match(MODELS, unroll, stride)


@needs_x86
def test_weights_beyond_64_would_saturate_the_pair_sum_and_are_refused_in_one_line():
    model = MODELS[0]
    mk = Microkernel.make("matmul", model.isa.name, model.lanes, 64, precision="int8", dot="pmadd", i=4, j=1)
    wide = dataclasses.replace(intrin.tile_problem(mk), weight_limit=128)  # the whole s8 range
    target = Context.make(cpu=model, precision="int8").target
    a = np.full((4, 64), 255, np.uint8)
    w = np.full((64, model.lanes), 127, np.int8)  # 255 x 127 x 2 = 64770 > 32767 in each pair
    got, ref = run_against_reference(wide, intrin.tensorized_tile(mk), target, inputs=(a, w))
    assert not np.array_equal(got, ref)  # saturated: why the limit exists
    with pytest.raises(ShapeError, match=r"int8 weights must be in \[-64, 64\] for this operator \(weight_limit "
                                         r"64\), got values in \[127, 127\]") as e:
        intrin.tile_problem(mk).pack_weights(w)
    assert "\n" not in str(e.value)
    with pytest.raises(ShapeError, match=r"weight_limit must be in \[1, 128\] for int8 \(128 for bf16\), got 64"):
        QMatmul(M=2, N=16, K=8, precision="bf16", weight_limit=64)


def _random_ops(rng, lanes):
    ops = [QMatmul(M=rng.choice([1, 7, 13, 29]), N=rng.choice([5, lanes, 3 * lanes + 1]), K=rng.choice([3, 30, 131]),
                   weight_limit=64) for _ in range(3)]
    R = rng.choice([1, 3])
    ops += [QConv2d(K=rng.choice([5, lanes + 3]), C=rng.choice([3, 13]), H=9, W=rng.choice([7, 13]), R=R, S=R,
                    stride=rng.choice([1, 2]), pad=rng.choice([0, (R // 2, 0, 0, R // 2)]),
                    input_zero=rng.choice([0, 128, 255]), weight_limit=64) for _ in range(3)]
    return ops


@needs_x86
@pytest.mark.parametrize("threads", [1, 2])
def test_drawn_no_vnni_schemes_match_numpy_bit_for_bit(threads):
    """Random matmuls and convolutions (primes, reductions not a multiple of 4, zero points, strides, asymmetric
    pads), schemes of every sampler over the family's candidates, on the no-VNNI instruction of each ISA."""
    checked = 0
    for model in MODELS:
        rng = random.Random(5 + threads)
        tag = tag_for("int8", model)
        target = Context.make(cpu=model, threads=threads, precision="int8").target
        for n, op in enumerate(_random_ops(rng, model.lanes)):
            problem = Problem.from_operator(op, model.lanes, model.isa.name, tag)
            kept = [dataclasses.replace(mk, dot=tag) for mk in family.candidates(problem.op, model.isa, 16, "int8")
                    if mk.output_registers <= 12]
            space = Space(problem, kept, threads=threads)
            for scheme in make_sampler("ttile", seed=n).sample_many(space, 1):
                lowered = lower(problem, scheme, op.prim_func(model.lanes), threads=threads)
                got, ref = run_against_reference(op, lowered.sch.mod, target, seed=n)
                assert np.array_equal(got, ref), (model.isa.name, op, scheme.text)
                checked += 1
    assert checked >= 6


@needs_x86
def test_tuning_int8_without_vnni_takes_weights_within_64_and_verifies_exactly(tmp_path, caplog):
    from tvm_ttile.tune import tune

    model = MODELS[0]
    kept = [Microkernel.make("matmul", model.isa.name, model.lanes, 64, precision="int8", dot="pmadd", i=4, j=1)]
    with caplog.at_level("WARNING"):
        res = tune(QMatmul(M=24, N=40, K=36, name="q"), cpu=model, trials=3, kept=kept,
                   work_dir=str(tmp_path / "q"), progress=False)
    assert res.verified and res.max_abs_error == 0.0 and res.gflops > 0
    assert "avx" in caplog.text and "|weight| <= 64" in caplog.text


def test_the_no_vnni_peak_kernel_multiplies_in_its_loop():
    """Compiled only: with loop-invariant operands LLVM would hoist vpmaddubsw and vpmaddwd out of the peak's loop
    and time the adds alone (a peak twice VNNI's was measured so): one of each per chain must stay in the loop."""
    import tvm

    from tvm_ttile.precision import get as get_precision

    cpu = cpu_mod.CPUModel(name="skylake", isa=cpu_mod.get_isa("avx512"), flags=("avx512f", "avx512bw"))
    func = cpu_mod._peak_primfunc(16, 24, 100, 1, PMADD_512, get_precision("int8"))
    asm = tvm.compile(tvm.IRModule({"fma_peak": func}), target=cpu.target(1, PMADD_512.mattr)).mod.inspect_source("asm")
    assert asm.count("vpmaddubsw") >= 24 and asm.count("vpmaddwd") >= 24


@needs_x86
def test_the_no_vnni_peak_is_measured_on_its_instruction():
    peak = cpu_mod.measure_peak(MODELS[0], repeat=1, precision="int8")
    assert peak["instruction"] == require("int8", MODELS[0]).name and "pmaddubsw" in peak["instruction"]
    assert peak["peak_gflops"] > 0
