"""int8 (u8 x s8 -> s32): the precision registry and its one-line refusals, the VNNI microkernels, the int8
matmul operator and every scheme drawn for it, which must equal an exact integer numpy reference bit for bit, at 1
and 2 threads; the int8 peak; work dirs, catalogs and shapes files keyed by precision."""
import dataclasses
import json
import random

import numpy as np
import pytest

from kernels import blocked_weights
from tvm_ttile import cpu as cpu_mod
from tvm_ttile.context import Context
from tvm_ttile.errors import ShapeError, TTileError, UnsupportedISAError
from tvm_ttile.lowering import lower
from tvm_ttile.microkernels import family, intrin
from tvm_ttile.microkernels.spec import Microkernel
from tvm_ttile.operators import Conv2d, Matmul, QConv2d, QMatmul, at_precision, load_shapes, run_against_reference
from tvm_ttile.precision import dot_product, require, tag_for
from tvm_ttile.recognize import recognize
from tvm_ttile.samplers import make_sampler
from tvm_ttile.space import Problem, Space

HOST = cpu_mod.detect_host()
DOT = dot_product("int8", HOST)  # VNNI, or vpmaddubsw where the CPU has none (test_int8_without_vnni.py)
TAG = tag_for("int8", HOST) if DOT else ""
LIMIT = DOT.weight_limit if DOT else 128  # the weights it multiplies exactly
needs_int8 = pytest.mark.skipif(DOT is None, reason="this CPU has no int8 instruction (AVX512_VNNI, AVX-512BW, AVX2)")


def test_a_cpu_without_an_int8_instruction_is_refused_in_one_line():
    bare = dataclasses.replace(cpu_mod.detect_host("avx512") if "avx512f" in HOST.flags else HOST, extensions=(),
                               flags=("avx512f",))  # (AVX-512BW or AVX2 would compute it with vpmaddubsw)
    with pytest.raises(UnsupportedISAError, match="cannot compute int8: it needs avx512_vnni") as e:
        require("int8", bare)
    assert "\n" not in str(e.value)
    with pytest.raises(UnsupportedISAError, match="cannot compute int8"):
        Context.make(cpu=bare, precision="int8")
    with pytest.raises(TTileError, match="precision 'int4' is not supported; choose from fp32, int8"):
        Context.make(cpu=bare, precision="int4")
    assert require("fp32", bare).name.startswith("fma")  # fp32 needs nothing beyond the ISA


def test_int8_microkernels_are_values_with_their_own_names():
    mk = Microkernel.make("matmul", "avx512", 16, 64, precision="int8", i=6, j=4)
    fp32 = Microkernel.make("matmul", "avx512", 16, 64, i=6, j=4)
    assert mk.text == "matmul/avx512x16:int8 [U(6,i),U(4,j),V(j)] red=64" and fp32.text != mk.text
    assert mk.name == "ttile_matmul_avx512x16_int8_i6_j4_red64" and fp32.name == "ttile_matmul_avx512x16_i6_j4_red64"
    assert Microkernel.parse(mk.text) == mk and Microkernel.from_name(mk.name) == mk
    assert Microkernel.from_name(fp32.name) == fp32
    with pytest.raises(ShapeError, match="int8 reduction length 62 is not a multiple of its group 4"):
        Microkernel.make("matmul", "avx512", 16, 62, precision="int8", i=6, j=4)
    with pytest.raises(TTileError, match="int8 microkernels exist for matmul, conv2d, not depthwise"):
        Microkernel.make("depthwise", "avx512", 16, 3, precision="int8", w=6, k=2)
    with pytest.raises(TTileError, match="int8 conv2d microkernels unroll no c, got 4"):
        Microkernel.make("conv2d", "avx512", 16, 64, precision="int8", w=6, c=4, k=2)
    conv = Microkernel.make("conv2d", "avx512", 16, 64, 2, precision="int8", w=6, k=2)
    assert Microkernel.parse(conv.text) == conv and Microkernel.from_name(conv.name) == conv
    # the measured reduction holds as many steps (and weight bytes) as fp32's
    assert family.measurement_red(HOST.isa, HOST.l1d_bytes, "int8") == 4 * family.measurement_red(HOST.isa, HOST.l1d_bytes)


def test_the_int8_product_is_recognized_and_others_refused_in_one_line():
    c = recognize(QMatmul(M=9, N=20, K=30).prim_func(16))
    assert (c.kind, c.precision, dict(c.extents)) == ("matmul", "int8", {"i": 9, "j": 32, "k": 32})
    assert recognize(Matmul(M=9, N=20, K=30).prim_func(16)).precision == "fp32"
    from tvm import te

    a = te.placeholder((8, 8), "uint8", name="A")
    b = te.placeholder((8, 8), "uint8", name="B")
    k = te.reduce_axis((0, 8), name="k")
    c = te.compute((8, 8), lambda i, j: te.sum(a[i, k].astype("int32") * b[k, j].astype("int32"), axis=k))
    with pytest.raises(TTileError, match="computes uint8 x uint8 -> int32; tvm_ttile's microkernels compute float32"):
        recognize(te.create_prim_func([a, b, c]))


def test_int8_weights_are_packed_in_the_instruction_layout_with_zero_padding():
    op = QMatmul(M=3, N=20, K=6)
    a, w = op.random_inputs(0)
    packed = op.pack_weights(w, 16)
    assert packed.shape == (2, 32, 4) and packed.dtype == np.int8
    assert packed[0, 5, 2] == w[2, 5] and packed[1, 19, 1] == w[5, 19]
    assert not packed[1, :, 2:].any() and not packed[:, 20:, :].any()  # K and N padding: zeros
    with pytest.raises(ShapeError, match=r"int8 weights must be int8 \[6, 20\]"):
        op.pack_weights(w.astype(np.int16), 16)
    assert a.min() >= 0 and w.dtype == np.int8


def isas_computing(precision: str):
    """The ISAs this host computes `precision` on (int8: AVX512_VNNI on AVX-512, AVX-VNNI on AVX2), as forced CPU
    models."""
    found = []
    for isa in ("avx512", "avx2"):
        try:
            model = cpu_mod.detect_host(isa)
        except UnsupportedISAError:
            continue
        if dot_product(precision, model) is not None:
            found.append(model)
    return found


def _int8_isas():
    return isas_computing("int8")


@pytest.mark.parametrize("unroll", [(1, 1), (6, 4), (14, 2), (2, 6), (9, 3)])
def test_int8_microkernels_match_an_exact_integer_reference(unroll):
    """Every ISA's instruction the host has: 512-bit AVX512_VNNI and 256-bit AVX-VNNI."""
    models = _int8_isas()
    if not models:
        pytest.skip("this CPU has no int8 dot-product instruction")
    ui, uj = unroll
    for model in models:
        mk = Microkernel.make("matmul", model.isa.name, model.lanes, 32, precision="int8",
                              dot=tag_for("int8", model), i=ui, j=uj)
        if mk.min_registers > model.vector_registers:
            continue
        target = Context.make(cpu=model, precision="int8").target
        got, ref = run_against_reference(intrin.tile_problem(mk), intrin.tensorized_tile(mk), target, seed=3)
        assert got.dtype == np.int32 and np.array_equal(got, ref), mk.text


def _random_qmatmul(rng, lanes):
    return QMatmul(M=rng.choice([1, 7, 13, 29, 48, 97]), N=rng.choice([5, lanes, 3 * lanes + 1, 4 * lanes]),
                   K=rng.choice([1, 3, 30, 64, 131]), weight_limit=LIMIT)


@needs_int8
@pytest.mark.parametrize("threads", [1, 2])
def test_drawn_int8_schemes_match_numpy_bit_for_bit(threads):
    """Random shapes (primes, K not a multiple of 4, N not whole vectors) and every sampler's schemes over the
    family's candidates, lowered and run against the integer reference: equal, element for element."""
    rng = random.Random(7 + threads)
    ops = [_random_qmatmul(rng, HOST.lanes) for _ in range(6)]
    assert all(Problem.from_operator(op, HOST.lanes, HOST.isa.name).size["k"] % 4 == 0 for op in ops)
    kept = [dataclasses.replace(mk, dot=TAG) for mk in family.candidates("matmul", HOST.isa, 16, "int8")]
    assert _drawn_schemes_match(ops, kept, threads) >= 12


def _drawn_schemes_match(ops, kept, threads) -> int:
    """Lower schemes of every sampler drawn over `kept` for each int8 operator of `ops` and run them against the
    integer reference: equal element for element. Returns how many were checked."""
    target = Context.make(threads=threads, precision="int8").target
    checked = 0
    for n, op in enumerate(ops):
        problem = Problem.from_operator(op, HOST.lanes, HOST.isa.name, TAG)
        assert problem.precision == "int8"
        space = Space(problem, kept, threads=threads)
        for sampler in ("ttile", "nondivisible"):
            if not make_sampler(sampler).choices(space):
                continue
            for scheme in make_sampler(sampler, seed=n).sample_many(space, 2):
                assert all(size % 4 == 0 for size in space.reuse_sizes(space.choices[0]))
                lowered = lower(problem, scheme, op.prim_func(HOST.lanes), threads=threads)
                assert blocked_weights(lowered), scheme.text
                got, ref = run_against_reference(op, lowered.sch.mod, target, seed=n)
                assert np.array_equal(got, ref), (op, scheme.text)
                checked += 1
    return checked


@needs_int8
def test_the_int8_peak_is_measured_on_its_instruction():
    peak = cpu_mod.measure_peak(HOST, repeat=1, precision="int8")
    fp32 = cpu_mod.measure_peak(HOST, repeat=1)
    assert peak["instruction"] == DOT.name and peak["precision"] == "int8"
    assert set(DOT.mattr) <= set(peak["target"].get("mattr", [])) and "mattr" not in fp32["target"]
    assert peak["peak_gflops"] > 0 and fp32["peak_gflops"] > 0  # (their ratio is a benchmark's: int8_zen4/)


@needs_int8
def test_int8_work_dirs_catalogs_and_peaks_are_kept_apart(tmp_path):
    from tvm_ttile.microkernels.catalog import catalog_path
    from tvm_ttile.workdir import WorkDirMismatch

    Context.make(work_dir=str(tmp_path / "w")).claim()
    with pytest.raises(WorkDirMismatch, match="precision"):
        Context.make(work_dir=str(tmp_path / "w"), precision="int8").claim()
    assert catalog_path(HOST, "matmul", "int8").name == "catalog_matmul_int8.json"
    assert catalog_path(HOST, "matmul").name == "catalog_matmul.json"
    assert cpu_mod.peak_path(HOST, 2, "int8").name == "peak_int8_2threads.json"


def test_shapes_files_name_a_precision(tmp_path):
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps({"layers": [{"name": "q", "op": "matmul", "M": 8, "N": 16, "K": 12,
                                            "precision": "int8"}, {"name": "f", "op": "matmul", "M": 8, "N": 16,
                                                                   "K": 12}]}))
    q, f = load_shapes(path)
    assert isinstance(q, QMatmul) and (q.M, q.N, q.K, q.name) == (8, 16, 12, "q") and isinstance(f, Matmul)
    path.write_text(json.dumps({"layers": [{"name": "c", "op": "conv2d", "K": 16, "C": 16, "H": 8, "W": 8, "R": 3,
                                            "S": 3, "pad": 1, "precision": "int8"}]}))
    (c,) = load_shapes(path)
    assert isinstance(c, QConv2d) and (c.K, c.C, c.pad, c.input_zero) == (16, 16, 1, 0)
    path.write_text(json.dumps({"layers": [{"name": "g", "op": "conv2d", "K": 16, "C": 16, "H": 8, "W": 8, "R": 3,
                                            "S": 3, "groups": 2, "precision": "int8"}]}))
    (g,) = load_shapes(path)
    assert isinstance(g, QConv2d) and g.groups == 2
    path.write_text(json.dumps({"layers": [{"name": "d", "op": "depthwise", "C": 16, "H": 8, "W": 8, "R": 3,
                                            "S": 3, "precision": "bf16"}]}))
    with pytest.raises(ShapeError, match=r"layer 1 \(d\): depthwise has no bf16 form yet"):
        load_shapes(path)
    assert at_precision(f, "fp32") is f


@needs_int8
def test_tuning_an_int8_matmul_verifies_it_exactly(tmp_path):
    from tvm_ttile.tune import tune
    from tvm_ttile.workdir import WorkDir

    res = tune(QMatmul(M=24, N=40, K=36, name="q"), trials=3, work_dir=str(tmp_path / "q"), progress=False)
    assert res.verified and res.max_abs_error == 0.0 and res.gflops > 0
    assert res.scheme and json.loads((tmp_path / "q" / WorkDir.KEY).read_text())["precision"] == "int8"


def test_int8_conv2d_pads_with_the_input_zero_point_and_packs_channels_in_groups():
    op = QConv2d(K=20, C=3, H=5, W=6, R=3, S=3, pad=(1, 2, 0, 1), input_zero=9)
    a, w = op.random_inputs(1)
    packed = op.pack_weights(w, 16)
    assert packed.shape == (3, 3, 1, 32, 4) and packed[2, 1, 0, 19, 2] == w[2, 1, 2, 19]
    assert not packed[..., 3].any() and not packed[..., 20:, :].any()  # C and K padding: zeros
    ref = op.reference(a, w)
    padded = np.pad(a.astype(np.int64), ((0, 0), (1, 0), (2, 1), (0, 0)), constant_values=9)
    assert ref.dtype == np.int32 and ref[0, 0, 0, 5] == np.sum(padded[0, :3, :3, :] * w[..., 5])
    with pytest.raises(ShapeError, match=r"zero point must be in \[0, 255\], got 300"):
        QConv2d(K=16, C=16, H=8, W=8, R=1, S=1, input_zero=300)
    c = recognize(op.prim_func(16))
    assert (c.kind, c.precision, dict(c.extents)["c"], dict(c.extents)["k"]) == ("conv2d", "int8", 4, 32)
    problem = Problem.from_operator(op, 16, "avx512")
    assert problem.precision == "int8" and problem.size["c"] == 4 and problem.halo


@pytest.mark.parametrize("unroll", [dict(w=6, k=2), dict(w=4, h=2, k=1, r=3, s=3), dict(w=14, k=1)])
@pytest.mark.parametrize("stride", [1, 2])
def test_int8_conv2d_microkernels_match_an_exact_integer_reference(unroll, stride):
    models = _int8_isas()
    if not models:
        pytest.skip("this CPU has no int8 dot-product instruction")
    conv2d_microkernels_match(models, unroll, stride)


def conv2d_microkernels_match(models, unroll, stride) -> None:
    """Each CPU model's int8 conv2d microkernel of `unroll` (its instruction's) against the integer reference."""
    for model in models:
        mk = Microkernel.make("conv2d", model.isa.name, model.lanes, 32, stride, precision="int8",
                              dot=tag_for("int8", model), **unroll)
        if mk.output_registers + mk.weight_vectors > model.vector_registers:
            continue
        target = Context.make(cpu=model, precision="int8").target
        got, ref = run_against_reference(intrin.tile_problem(mk), intrin.tensorized_tile(mk), target, seed=5)
        assert got.dtype == np.int32 and np.array_equal(got, ref), mk.text


def _random_qconv2d(rng, lanes):
    R = rng.choice([1, 3, 5])
    return QConv2d(K=rng.choice([5, lanes, 2 * lanes + 3]), C=rng.choice([1, 3, 8, 13]), H=rng.choice([7, 11]),
                   W=rng.choice([5, 13, 17]), R=R, S=R, stride=rng.choice([1, 2]),
                   pad=rng.choice([0, R // 2, (R // 2, 0, 0, R // 2)]), input_zero=rng.choice([0, 1, 128, 255]),
                   weight_limit=LIMIT)


@needs_int8
@pytest.mark.parametrize("threads", [1, 2])
def test_drawn_int8_conv2d_schemes_match_numpy_bit_for_bit(threads):
    """Random convolutions (primes, C not a multiple of 4, K not whole vectors, zero points, strides, asymmetric
    pads) and schemes drawn over a few int8 microkernels, lowered and run against the integer reference."""
    rng = random.Random(11 + threads)
    kept = [Microkernel.make("conv2d", HOST.isa.name, HOST.lanes, 16, precision="int8", dot=TAG, **u)
            for u in (dict(w=5, k=1), dict(w=3, k=2), dict(w=2, h=2, k=1, r=3, s=3), dict(w=1, k=1))]
    assert _drawn_schemes_match([_random_qconv2d(rng, HOST.lanes) for _ in range(6)], kept, threads) >= 12


@needs_int8
@pytest.mark.parametrize("threads", [1, 2])
def test_drawn_int8_grouped_conv2d_schemes_match_numpy_bit_for_bit(threads):
    """Grouped convolutions (ResNeXt's: 2 to 8 groups, a group's input channels not a multiple of 4 and its outputs
    not whole vectors, each padded on its own; zero points, strides, pads) with schemes drawn over a few int8
    microkernels, the groups a loop above them: equal to numpy's grouped integer convolution."""
    rng = random.Random(13 + threads)
    kept = [Microkernel.make("conv2d", HOST.isa.name, HOST.lanes, 16, precision="int8", dot=TAG, **u)
            for u in (dict(w=5, k=1), dict(w=3, k=2), dict(w=1, k=1))]
    ops = []
    for groups in (2, 3, 8):
        R = rng.choice([1, 3])
        ops.append(QConv2d(K=groups * rng.choice([4, HOST.lanes, HOST.lanes + 3]), C=groups * rng.choice([3, 4, 9]),
                           H=rng.choice([7, 9]), W=rng.choice([5, 11]), R=R, S=R, stride=rng.choice([1, 2]),
                           pad=rng.choice([0, R // 2, (R // 2, 0, 0, R // 2)]), groups=groups,
                           input_zero=rng.choice([0, 3, 255]), weight_limit=LIMIT))
    assert _drawn_schemes_match(ops, kept, threads) >= 6


def test_a_grouped_int8_conv2d_packs_each_group_and_refuses_a_depthwise_one():
    op = QConv2d(K=6, C=4, H=5, W=5, R=1, S=1, groups=2)
    w = np.arange(1 * 1 * 2 * 6, dtype=np.int8).reshape(1, 1, 2, 6)
    packed = op.pack_weights(w, 16)  # [R, S, C'/4, groups x 16, 4]: each group's 3 outputs, then zeros
    assert packed.shape == (1, 1, 1, 32, 4)
    assert np.array_equal(packed[0, 0, 0, :3, :2], w[0, 0, :, :3].T) and not packed[0, 0, 0, 3:16].any()
    assert np.array_equal(packed[0, 0, 0, 16:19, :2], w[0, 0, :, 3:].T) and not packed[..., 2:].any()
    with pytest.raises(ShapeError, match="depthwise"):
        QConv2d(K=8, C=8, H=5, W=5, R=3, S=3, groups=8)
    with pytest.raises(ShapeError, match="divisible"):
        QConv2d(K=6, C=5, H=5, W=5, R=3, S=3, groups=2)


@needs_int8
def test_tuning_an_int8_conv2d_verifies_it_exactly(tmp_path):
    from tvm_ttile.tune import tune

    op = at_precision(Conv2d(K=24, C=8, H=9, W=9, R=3, S=3, pad=1, name="c"), "int8")
    kept = [Microkernel.make("conv2d", HOST.isa.name, HOST.lanes, 64, precision="int8", dot=TAG, w=3, k=1)]
    res = tune(op, trials=3, kept=kept, work_dir=str(tmp_path / "c"), progress=False)
    assert res.verified and res.max_abs_error == 0.0 and res.gflops > 0


@needs_int8
def test_a_zero_trial_int8_pick_is_built_for_its_instruction_and_rated_against_its_peak(small_catalog):
    """`tune --strategy model --trials 0`: the top-ranked scheme built with the int8 instruction's target,
    verified exactly, its rate a share of the int8 peak (not fp32's)."""
    from tvm_ttile.tune import tune

    res = tune(QMatmul(M=29, N=48, K=64, weight_limit=LIMIT), trials=0, strategy="model", progress=False)
    assert res.verified and res.max_abs_error == 0.0
    assert res.peak_gflops == cpu_mod.run_peak(HOST, precision="int8")["peak_gflops"]
