"""The rescaling after an int8 task merged (relax/rescaling.py): fewer steps, the same values up to the rounding of a
merged constant; nothing merged where the algebra does not hold (a negative scale through a ReLU, casts that
truncate values that are not integers)."""
import numpy as np
import tvm
from tvm import relax
from tvm.script import relax as R

from tvm_ttile.relax.rescaling import merge_rescaling

SHAPE = (1, 4, 5, 8)


def _const(v):
    return relax.const(np.asarray(v, np.float32), "float32")


def _module(body):
    """main(x: int32 SHAPE) = body(block builder, astype(x, f32))."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", R.Tensor(SHAPE, "int32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(body(bb, bb.emit(relax.op.astype(x, "float32"))))
        bb.emit_func_output(out)
    return bb.get()


def _requantize(bb, acc):
    """An int8 task's rescaling, bias, ReLU, the next QuantizeLinear and a DequantizeLinear after it."""
    rng = np.random.default_rng(0)
    y = bb.emit(relax.op.multiply(acc, _const(rng.uniform(0.01, 0.05, SHAPE[-1]))))
    y = bb.emit(relax.op.add(y, _const(rng.uniform(-1, 1, (1, 1, 1, SHAPE[-1])))))
    y = bb.emit(relax.op.maximum(y, _const(0.0)))
    y = bb.emit(relax.op.round(bb.emit(relax.op.multiply(y, _const(1 / 0.037)))))
    y = bb.emit(relax.op.add(y, _const(3.0)))
    y = bb.emit(relax.op.minimum(bb.emit(relax.op.maximum(y, _const(0.0))), _const(255.0)))
    y = bb.emit(relax.op.astype(bb.emit(relax.op.astype(y, "uint8")), "float32"))
    return relax.op.multiply(bb.emit(relax.op.subtract(y, _const(3.0))), _const(0.037))


def _steps(mod) -> list:
    mod = relax.transform.DeadCodeElimination()(mod)
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)]


def _run(mod, x):
    ex = tvm.compile(mod, target="llvm")
    return relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()


def test_a_requantize_chain_takes_fewer_steps_and_keeps_its_values():
    mod = _module(_requantize)
    merged = merge_rescaling(mod)
    before, after = _steps(mod), _steps(merged)
    assert len(before) == 13 and len(after) == 10, after  # the quantize scale merged; the u8 round trip gone
    assert "relax.subtract" not in after and after.count("relax.astype") == 1  # no u8 round trip
    x = np.random.default_rng(1).integers(-3000, 3000, SHAPE).astype(np.int32)
    got, ref = _run(merged, x), _run(mod, x)
    steps = np.abs(got - ref) / 0.037
    assert steps.max() <= 1 + 1e-4 and np.mean(steps < 1e-3) >= 0.99


def test_a_negative_scale_is_not_moved_through_a_relu():
    mod = _module(lambda bb, a: relax.op.multiply(bb.emit(relax.op.maximum(a, _const(0.0))), _const(-2.0)))
    assert _steps(merge_rescaling(mod)) == _steps(mod)


def test_casts_that_truncate_values_that_are_not_integers_stay():
    def clamp_then_casts(bb, a):
        y = bb.emit(relax.op.minimum(bb.emit(relax.op.maximum(bb.emit(relax.op.multiply(a, _const(0.3))),
                                                              _const(0.0))), _const(255.0)))
        return relax.op.astype(bb.emit(relax.op.astype(y, "uint8")), "float32")

    mod = _module(clamp_then_casts)
    assert _steps(merge_rescaling(mod)).count("relax.astype") == 3


def test_a_per_tensor_scale_on_a_convolution_input_moves_into_its_weights():
    w = np.random.default_rng(2).standard_normal((3, 3, 1, SHAPE[-1])).astype(np.float32)

    def depthwise_of_scaled(bb, a):
        y = bb.emit(relax.op.multiply(a, _const(0.5)))
        return relax.op.nn.conv2d(y, relax.const(w), padding=[1, 1, 1, 1], groups=SHAPE[-1], data_layout="NHWC",
                                  kernel_layout="HWIO")

    mod = _module(depthwise_of_scaled)
    merged = merge_rescaling(mod)
    assert _steps(merged) == ["relax.astype", "relax.nn.conv2d"]
    x = np.random.default_rng(3).integers(-50, 50, SHAPE).astype(np.int32)
    np.testing.assert_allclose(_run(merged, x), _run(mod, x), rtol=1e-6, atol=1e-5)
