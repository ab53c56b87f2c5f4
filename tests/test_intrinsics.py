"""Every microkernel of the catalog families is a TensorIntrin whose tensorized code matches numpy."""
import numpy as np
import pytest
import tvm

from conftest import runnable_isas
from tvm_ttile.cpu import detect_host, get_isa
from tvm_ttile.microkernels import family, intrin
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import run_against_reference

RED = 8  # a short reduction loop: correctness does not need a long one


def run(mod, prob, target):
    return run_against_reference(prob, mod, target, seed=3)


@pytest.mark.parametrize("isa", runnable_isas())
@pytest.mark.parametrize("op", ["conv2d", "matmul"])
def test_every_family_member_is_correct(isa, op):
    """The whole candidate family of each ISA the host runs: tensorize one tile, run, compare."""
    isa_obj = get_isa(isa)
    target = detect_host(isa).target()
    failures = []
    for mk in family.candidates(op, isa_obj, RED):
        got, ref = run(intrin.tensorized_tile(mk), intrin.tile_problem(mk), target)
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-4):
            failures.append(mk.text)
    assert not failures


@pytest.mark.parametrize("isa", runnable_isas())
@pytest.mark.parametrize("factors", [dict(h=2, w=3, k=1, c=2, stride=2), dict(h=1, w=4, k=2, r=3, s=3, dilation=2),
                                     dict(h=3, w=1, k=2, stride=2, dilation=3)])
def test_strided_dilated_and_c_unrolled(isa, factors):
    lanes = get_isa(isa).lanes
    mk = Microkernel.make("conv2d", isa, lanes, 16, **factors)
    got, ref = run(intrin.tensorized_tile(mk), intrin.tile_problem(mk), detect_host(isa).target())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,factors", [("matmul", dict(i=4, j=2)), ("depthwise", dict(s=3, w=4, h=2, k=1))])
def test_repeated_tile_accumulates_every_round(host, op, factors):
    """The timed tile repeats the update, not the init: rounds that each recomputed the same output could be
    folded into one by LLVM (it did so for depthwise tiles), so the output is 5x the operator's."""
    mk = Microkernel.make(op, host.isa.name, host.lanes, 32 if op == "matmul" else 3, **factors)
    got, ref = run(intrin.tensorized_tile(mk, repeat=5), intrin.tile_problem(mk), host.target())
    np.testing.assert_allclose(got, 5 * ref, rtol=1e-4, atol=1e-3)


def _tiled(prob, mk, tiles):
    """A whole small operator tensorized with `mk`: every dimension split into outer tiles x microkernel."""
    sch = tvm.s_tir.Schedule(prob.prim_func())
    if mk.op == "conv2d":
        block = sch.get_sblock("conv2d_nhwc")
        n, h, w, k, r, s, c = sch.get_loops(block)
        ho, hi = sch.split(h, [None, mk.get("h")])
        wo, wi = sch.split(w, [None, mk.get("w")])
        ko, ki = sch.split(k, [None, mk.tile["k"]])
        co, ci = sch.split(c, [None, mk.red])
        sch.reorder(n, ko, ho, wo, co, r, s, ci, wi, hi, ki)
        intrin.tensorize_nest(sch, block, mk, {"c_o": ci, "w": wi, "h": hi, "k": ki}, init_loop=co)
    else:
        block = sch.get_sblock("matmul")
        i, j, k = sch.get_loops(block)
        io, ii = sch.split(i, [None, mk.get("i")])
        jo, ji = sch.split(j, [None, mk.tile["j"]])
        ko, ki = sch.split(k, [None, mk.red])
        sch.reorder(jo, io, ko, ki, ii, ji)
        intrin.tensorize_nest(sch, block, mk, {"k": ki, "i": ii, "j": ji}, init_loop=ko)
    return sch.mod


@pytest.mark.parametrize("pad", [0, 1])
def test_tensorized_conv2d_layer(host, pad):
    from tvm_ttile.operators import Conv2d

    mk = Microkernel.make("conv2d", host.isa.name, host.lanes, 8, h=2, w=3, k=2)
    prob = Conv2d(K=4 * host.lanes, C=24, H=4 + 2 - 2 * pad, W=6 + 2 - 2 * pad, R=3, S=3, pad=pad)
    got, ref = run(_tiled(prob, mk, None), prob, host.target())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_tensorized_matmul(host):
    from tvm_ttile.operators import Matmul

    mk = Microkernel.make("matmul", host.isa.name, host.lanes, 16, i=3, j=2)
    prob = Matmul(M=9, N=4 * host.lanes, K=48)
    got, ref = run(_tiled(prob, mk, None), prob, host.target())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("isa,pattern", [("avx2", "vfmadd"), ("avx512", "zmm"), ("neon", "fmla")])
@pytest.mark.parametrize("op", ["conv2d", "matmul"])
def test_compiles_for_every_isa(isa, pattern, op):
    """Compile-only on ISAs this machine may not run: the code must hold that ISA's vector FMAs."""
    isa_obj = get_isa(isa)
    f = dict(h=2, w=2, k=2) if op == "conv2d" else dict(i=4, j=2)
    mk = Microkernel.make(op, isa, isa_obj.lanes, 16, **f)
    lib = tvm.compile(intrin.tensorized_tile(mk), target=tvm.target.Target(isa_obj.target))
    asm = lib.mod.inspect_source("asm")
    assert pattern in asm
    if isa == "neon":
        assert "fmla\tv" in asm and ".4s" in asm


def test_registration_is_idempotent_and_rejects_spilling_kernels():
    from tvm.s_tir import TensorIntrin

    from tvm_ttile.errors import RegisterPressureError

    mk = Microkernel.make("matmul", "avx2", 8, 16, i=2, j=2)
    assert intrin.register(mk) == intrin.register(mk) == mk.name
    assert TensorIntrin.get(mk.name) is not None
    with pytest.raises(RegisterPressureError):
        intrin.register(Microkernel.make("matmul", "avx2", 8, 16, i=8, j=2))
