"""int8 depthwise (operators.QDepthwise): a u8 input padded with its zero point and s8 weights, computed in fp32 lanes
by the depthwise microkernels reading u8, must equal numpy's integer convolution bit for bit for every drawn scheme
(random shapes, primes, zero points, strides, pads, 1 and 2 threads) and read the u8 input in place; a window too
wide for fp32's exact integers is refused in one line; the shapes-file and command-line precision reach it."""
import json
import random

import numpy as np
import pytest

from kernels import depthwise_kept
from tvm_ttile.context import Context
from tvm_ttile.errors import ShapeError, TTileError
from tvm_ttile.lowering import lower
from tvm_ttile.operators import Depthwise, QDepthwise, at_precision, load_shapes, run_against_reference
from tvm_ttile.operators.qdepthwise import EXACT_TAPS
from tvm_ttile.samplers import make_sampler
from tvm_ttile.space import Problem, Space


def _random_qdepthwise(rng, lanes):
    r = rng.choice([1, 3, 5])
    return QDepthwise(C=rng.choice([5, lanes, 2 * lanes + 3]), H=rng.choice([7, 11]), W=rng.choice([5, 13, 17]),
                      R=r, S=r, stride=rng.choice([1, 2]), pad=rng.choice([0, r // 2, (r // 2, 0, 0, r // 2)]),
                      input_zero=rng.choice([0, 1, 128, 255]))


@pytest.mark.parametrize("threads", [1, 2])
def test_drawn_int8_depthwise_schemes_equal_the_integer_reference(host, threads):
    rng = random.Random(5 + threads)
    target = Context.make(threads=threads).target
    checked = 0
    for n in range(5):
        op = _random_qdepthwise(rng, host.lanes)
        problem = Problem.from_operator(op, host.lanes, host.isa.name)
        space = Space(problem, depthwise_kept(host.isa.name, host.lanes, red=op.R), threads=threads)
        for sampler in ("ttile", "nondivisible"):
            if not make_sampler(sampler).choices(space):
                continue
            for scheme in make_sampler(sampler, seed=n).sample_many(space, 2):
                lowered = lower(problem, scheme, op.prim_func(host.lanes), threads=threads)
                got, ref = run_against_reference(op, lowered.sch.mod, target, seed=n)
                assert np.array_equal(got, ref), (op, scheme.text)
                checked += 1
    assert checked >= 10


def test_the_reference_is_the_integer_convolution_of_the_input_padded_with_its_zero_point():
    op = QDepthwise(C=2, H=3, W=3, R=3, S=3, pad=1, input_zero=10)
    inp = np.full((1, 3, 3, 2), 10, np.uint8)  # every value the zero point: the real input is 0
    inp[0, 1, 1] = (11, 255)
    w = np.ones((3, 3, 2), np.float32)
    w[:, :, 1] = -128
    out = op.reference(inp, w)
    assert out.dtype == np.float32 and np.array_equal(out[0, :, :, 0], np.full((3, 3), 8 * 10 + 11.0))
    assert np.array_equal(out[0, :, :, 1], np.full((3, 3), -128.0 * (8 * 10 + 255)))
    # less the compensation (the zero point x the channel's weights), the window of the real values
    real = out - 10 * w.sum(axis=(0, 1))
    assert np.array_equal(real[0, :, :, 0], np.ones((3, 3))) and np.array_equal(real[0, :, :, 1],
                                                                              np.full((3, 3), -128.0 * 245))


def test_int8_depthwise_microkernels_read_the_u8_input_in_place_and_widen_it(host):
    """The copy of an interior tile's window is skipped: the microkernels load u8 vectors of the input itself."""
    from tvm_ttile import read_in_place

    op = QDepthwise(C=2 * host.lanes, H=16, W=16, R=3, S=3, pad=1, input_zero=7)
    problem = Problem.from_operator(op, host.lanes, host.isa.name)
    assert problem.input == "u8"
    space = Space(problem, depthwise_kept(host.isa.name, host.lanes, red=3))
    scheme = make_sampler("ttile", seed=0).sample(space)
    lowered = lower(problem, scheme, op.prim_func(host.lanes))
    # its microkernels', or its Lambda region's tail intrinsic (tails.tail_name)
    assert any("_u8in_" in n or "<u8~" in n for n in lowered.intrinsics), lowered.intrinsics
    script = lowered.sch.mod.script()
    assert read_in_place.ANNOTATION in script and f"T.Cast(\"float32x{host.lanes}\", buffer" in script, scheme.text
    got, ref = run_against_reference(op, lowered.sch.mod, Context.make().target)
    assert np.array_equal(got, ref)


def test_bad_int8_depthwise_input_is_refused_in_one_line():
    assert EXACT_TAPS == 514 and 514 * 255 * 128 < 2 ** 24 < 515 * 255 * 128
    with pytest.raises(ShapeError, match=r"23x23 taps .* exactly \(at most 514 taps\)"):
        QDepthwise(C=16, H=30, W=30, R=23, S=23)
    with pytest.raises(ShapeError, match="zero point must be in"):
        QDepthwise(C=16, H=8, W=8, R=3, S=3, input_zero=256)
    with pytest.raises(ShapeError, match="must be s8 values"):
        QDepthwise(C=1, H=4, W=4, R=3, S=3).reference(np.zeros((1, 4, 4, 1), np.uint8), np.full((3, 3, 1), 0.5))


def test_the_int8_precision_reaches_the_depthwise_operator(tmp_path):
    op = at_precision(Depthwise(C=24, H=9, W=9, R=3, S=3, pad=1, name="d"), "int8")
    assert isinstance(op, QDepthwise) and op.exact and op.precision == "fp32"  # its microkernels: fp32 lanes
    assert at_precision(op, "int8") is op
    with pytest.raises(TTileError, match="depthwise has no bf16 form"):
        at_precision(Depthwise(C=24, H=9, W=9, R=3, S=3), "bf16")
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"layers": [{"name": "dw", "op": "depthwise", "C": 32, "H": 14, "W": 14, "R": 3,
                                            "S": 3, "pad": 1, "precision": "int8"}]}))
    (loaded,) = load_shapes(path)
    assert isinstance(loaded, QDepthwise) and loaded.name == "dw"


def test_tuning_an_int8_depthwise_verifies_it_exactly(host, tmp_path):
    from tvm_ttile.tune import tune

    op = at_precision(Depthwise(C=host.lanes + 4, H=10, W=10, R=3, S=3, stride=2, pad=1, name="d"), "int8")
    res = tune(op, host, trials=3, kept=depthwise_kept(host.isa.name, host.lanes), work_dir=str(tmp_path / "d"),
               progress=False)
    assert res.verified and res.max_abs_error == 0.0 and res.gflops > 0
