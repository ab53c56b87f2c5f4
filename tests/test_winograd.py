"""winograd.py: the Winograd functions and every schedule of them compute the convolution numpy computes; the
choice between Winograd and the direct convolution follows the measured times and nothing else; a network's
eligible layers are found, rewritten, tuned and built, and a damaged choices file is reported, not used."""
import json
import logging

import numpy as np
import pytest
import tvm

from tvm_ttile import network as nw
from tvm_ttile import winograd as wg
from tvm_ttile.models.importers import load_model
from tvm_ttile.operators import conv2d_nhwc_reference


def _run(mod, x, u, out_shape):
    lib = tvm.compile(mod, target="llvm")
    out = tvm.runtime.tensor(np.zeros(out_shape, "float32"))
    lib["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(u), out)
    return out.numpy()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m", wg.TILE_SIZES)
@pytest.mark.parametrize("hw,pads", [((10, 10), (1, 1, 1, 1)), ((9, 12), (0, 1, 1, 0)), ((8, 8), (0, 0, 0, 0))])
def test_every_schedule_computes_the_convolution(hw, pads, m, threads):
    # sizes that m does not divide (tiles past the output's edge), asymmetric and no padding
    conv = wg.WinogradConv(1, *hw, 16, 32, pads, m)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, *hw, 16)).astype("float32")
    w = rng.standard_normal((3, 3, 16, 32)).astype("float32")
    want = conv2d_nhwc_reference(x, w, pad=pads)
    mod = tvm.IRModule({"main": conv.prim_func()})
    made = wg.schedules(mod, lanes=16, registers=32, threads=threads)
    assert [n for n, _ in made] == [k.name for k in wg.knob_choices(conv, 16, 32, threads)] and made
    u = conv.transform_weights(w)
    for name, sch in [("as written", tvm.s_tir.Schedule(mod))] + made:
        got = _run(sch.mod, x, u, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(), err_msg=name)


def test_knob_choices_fit_the_registers_and_the_tiles():
    conv = wg.WinogradConv(1, 56, 56, 64, 64, (1, 1, 1, 1), 4)
    nH, nW = conv.tiles
    assert (nH, nW) == (14, 14)
    for registers in (16, 32):
        knobs = wg.knob_choices(conv, 16, registers)
        assert knobs
        for k in knobs:
            assert 8 <= k.rows * k.vecs and k.rows * k.vecs + k.vecs + 1 <= registers
            assert nH % k.tile_rows == 0 and (nW % k.rows == 0 or k.rows % nW == 0)
            assert (64 // 16) % k.vecs == 0 and 2 <= k.rows and k.vecs <= 4
    assert wg.Knobs(1, 7, 4) not in wg.knob_choices(conv, 16, 32)  # 28 accumulators + 4 weights + 1: spills
    assert all(14 // k.tile_rows >= 2 for k in wg.knob_choices(conv, 16, 32, threads=2))  # a block per thread
    # sizes that allow neither 8 accumulators nor a block per thread still get schedules
    small = wg.WinogradConv(1, 10, 10, 16, 32, (1, 1, 1, 1), 4)
    assert wg.knob_choices(small, 16, 32, threads=2)


def test_keys_read_back():
    conv = wg.WinogradConv(2, 9, 12, 16, 32, (0, 1, 1, 0), 4)
    assert wg.conv_from_key(conv.key) == conv
    assert conv.layer == "conv3x3 N2 H9 W12 C16 K32 out8x11"
    with pytest.raises(Exception, match="not a Winograd function"):
        wg.conv_from_key(None)


def test_choice_follows_the_measured_times():
    a, b, c = "conv3x3 A", "conv3x3 B", "conv3x3 C"
    timed = [(a, 0, 1.0, True), (a, 0, 2.0, True), (a, 2, 1.5, True), (a, 2, 1.0, True), (a, 4, 0.5, True),
             (a, 4, 0.4, True),
             (b, 0, 1.0, True), (b, 4, 1.2, True),
             (c, 0, 1.0, True), (c, 4, 0.1, False), (c, 2, 0.2, True), (c, 2, float("nan"), True)]
    got = wg.choose(timed)
    assert got[a]["m"] == 4 and got[a]["direct_ms"] == 3.0 and got[a]["winograd_ms"] == {"2": 2.5, "4": 0.9}
    assert got[b]["m"] == 0  # slower than direct
    assert got[c]["m"] == 0 and got[c]["winograd_ms"] == {}  # unverified or unmeasured forms are never chosen
    # a form missing one of the layer's tasks does not compare
    assert wg.choose([(a, 0, 1.0, True), (a, 0, 1.0, True), (a, 4, 0.1, True)])[a]["m"] == 0


def test_network_layers_rewritten_tuned_and_built(tmp_path, host, small_catalog, caplog):
    net = load_model("micro_resnet")
    mod = nw.prepare(net.mod, host)
    layers = wg.layers(mod)
    assert layers == {"conv3x3 N1 H16 W16 C16 K16 out16x16": 2}  # the stem (3 channels) is not eligible
    work = str(tmp_path / "w")
    res = nw.tune_network(mod, cpu=host, work_dir=work, trials_per_task=2, memory_bound=False, progress=False,
                          winograd=True)
    by_policy = {}
    for t in res.tasks:
        by_policy.setdefault(t.policy, []).append(t)
    assert len(by_policy["winograd"]) == 2 * len(wg.TILE_SIZES)  # two epilogues x tile sizes
    assert all(t.verified and t.trials for t in by_policy["winograd"])
    with open(f"{work}/{wg.CHOICES}") as f:
        choice = json.load(f)["conv3x3 N1 H16 W16 C16 K16 out16x16"]
    # what the build runs follows the saved choice: the direct tasks of the layer, or one form's tasks
    direct = [t for t in by_policy["tvm_ttile"] if "conv2d1" in t.name]
    assert len(direct) == 2 and all(t.built == (choice["m"] == 0) for t in direct)
    built = [t for t in by_policy["winograd"] if t.built]
    assert len(built) == (2 if choice["m"] else 0)
    assert all(t.name.startswith(f"fused_winograd{choice['m']}_") for t in built)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    want = nw.run(nw.build_network(mod, None, cpu=host), x)
    # every form, forced, computes the network's output
    for m in (2, 4):
        wg.save_choices(work, {"conv3x3 N1 H16 W16 C16 K16 out16x16": {"m": m}})
        assert wg.apply(mod, work)[1] == 2
        np.testing.assert_allclose(nw.run(nw.build_network(mod, work, cpu=host), x), want, rtol=1e-4,
                                   atol=1e-4 * np.abs(want).max())
    with open(f"{work}/{wg.CHOICES}", "w") as f:
        f.write("{not json")
    with caplog.at_level(logging.WARNING):
        assert wg.apply(mod, work)[1] == 0
    assert "damaged" in caplog.text and wg.CHOICES in caplog.text


def test_direct_task_maps_to_its_layer(host):
    mod = nw.prepare(load_model("micro_resnet").mod, host)
    target = host.target(1)
    from tvm_ttile.metaschedule import ttile_problem

    found = {wg.layer_of(t.mod["main"], ttile_problem(t.mod, target)[0]) for t in nw.extract_tasks(mod, cpu=host)}
    assert found == {None, "conv3x3 N1 H16 W16 C16 K16 out16x16"}


def test_epilogues_that_read_the_convolution_twice_are_fused(host):
    # Darknet's leaky ReLU, max(y, 0.1 y): the output block's value is read twice
    from tvm import relax
    from tvm.script import relax as R

    rng = np.random.default_rng(2)
    w = rng.standard_normal((3, 3, 16, 32)).astype("float32")
    bias = rng.standard_normal((1, 1, 1, 32)).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor((1, 12, 12, 16), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), padding=1, data_layout="NHWC", kernel_layout="HWIO"))
            z = bb.emit(relax.op.add(y, relax.const(bias)))
            out = bb.emit_output(relax.op.maximum(z, relax.op.multiply(z, relax.const(np.float32(0.1)))))
        bb.emit_func_output(out)
    mod, count = wg.rewrite(bb.get(), lambda conv: 4)
    assert count == 1
    (task,) = [t for t in nw.extract_tasks(mod, cpu=host) if t.policy == "winograd"]
    errors = []
    made = wg.schedules(task.mod, host.lanes, host.vector_registers, 1, errors)
    assert made and not errors, errors
    assert all(name.endswith("_packed") for name, _ in made)  # U is a constant: packed once, at build time
    xv = rng.standard_normal((1, 12, 12, 16)).astype("float32")
    ref = conv2d_nhwc_reference(xv, w, pad=1) + bias
    want = np.maximum(ref, 0.1 * ref)
    got = nw.run(nw.build_network(mod, None, cpu=host), xv)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    for name, sch in made:
        ok, err = nw.verify_against_untuned(task.mod, sch.mod, host.target(1))
        assert ok, (name, err)


def test_report_lists_each_layers_forms():
    from tvm_ttile.network.report import _winograd_lines

    r = {"winograd": {"conv3x3 A": {"m": 4, "direct_ms": 3.0, "winograd_ms": {"2": 2.5, "4": 0.9}},
                      "conv3x3 B": {"m": 0, "direct_ms": 1.0, "winograd_ms": {"4": 1.2}}}}
    lines = _winograd_lines(r)
    assert "| conv3x3 A | 3.000 | 2.500 | 0.900 | F(4,3) |" in lines
    assert "| conv3x3 B | 1.000 | - | 1.200 | direct |" in lines
    assert _winograd_lines({"winograd": {"conv3x3 B": {"m": 0, "direct_ms": 1.0, "winograd_ms": {}}}}) == []
