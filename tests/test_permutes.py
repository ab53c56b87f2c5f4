"""Permutes moved below elementwise ops (relax/permutes.py): two ConvNeXt blocks exported channels-first (depthwise
conv, permute to NHWC, LayerNorm, the MLP with GELU, permute back, layer scale, residual add) keep no permute of an
activation between the blocks, every task stays channels-last, GELU's division by sqrt(2) is a product, and the
output is ONNX Runtime's; an elementwise op
whose operands are not all the same permute keeps it."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvm_ttile.models.importers import load_model  # noqa: E402

C, HW = 16, 8


def _convnext_blocks(blocks: int = 2):
    rng = np.random.default_rng(0)
    inits = []

    def init(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    # the stem: a 2x2 stride-2 conv, then LayerNorm over the channels between two permutes (LayerNorm2d)
    nodes = [helper.make_node("Conv", ["x", init("stem", rng.standard_normal((C, 3, 2, 2)) * 0.3)], ["s"],
                              strides=[2, 2]),
             helper.make_node("Transpose", ["s"], ["st"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["st", init("sg", np.ones(C)), init("sb", np.zeros(C))], ["sl"],
                              axis=-1, epsilon=1e-6),
             helper.make_node("Transpose", ["sl"], ["stem_out"], perm=[0, 3, 1, 2])]
    x = "stem_out"

    for b in range(blocks):
        p = f"b{b}_"
        nodes += [
            helper.make_node("Conv", [x, init(p + "dw", rng.standard_normal((C, 1, 7, 7)) * 0.2),
                                      init(p + "dwb", rng.standard_normal(C))], [p + "d"], group=C, pads=[3] * 4),
            helper.make_node("Transpose", [p + "d"], [p + "t"], perm=[0, 2, 3, 1]),
            helper.make_node("LayerNormalization", [p + "t", init(p + "g", 1 + 0.1 * rng.standard_normal(C)),
                                                    init(p + "be", 0.1 * rng.standard_normal(C))], [p + "ln"],
                             axis=-1, epsilon=1e-6),
            helper.make_node("MatMul", [p + "ln", init(p + "w1", rng.standard_normal((C, 4 * C)) * 0.2)], [p + "m1"]),
            helper.make_node("Add", [p + "m1", init(p + "b1", rng.standard_normal(4 * C))], [p + "a1"]),
            helper.make_node("Div", [p + "a1", init(p + "sqrt2", np.sqrt(2.0))], [p + "s"]),
            helper.make_node("Erf", [p + "s"], [p + "e"]),
            helper.make_node("Add", [p + "e", init(p + "one", 1.0)], [p + "e1"]),
            helper.make_node("Mul", [p + "a1", p + "e1"], [p + "g1"]),
            helper.make_node("Mul", [p + "g1", init(p + "half", 0.5)], [p + "gelu"]),
            helper.make_node("MatMul", [p + "gelu", init(p + "w2", rng.standard_normal((4 * C, C)) * 0.2)], [p + "m2"]),
            helper.make_node("Add", [p + "m2", init(p + "b2", rng.standard_normal(C))], [p + "a2"]),
            helper.make_node("Transpose", [p + "a2"], [p + "back"], perm=[0, 3, 1, 2]),
            helper.make_node("Mul", [p + "back", init(p + "scale", rng.standard_normal((C, 1, 1)))], [p + "ls"]),
            helper.make_node("Add", [p + "ls", x], [p + "out"])]
        x = p + "out"
    graph = helper.make_graph(nodes, "convnext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 3, 2 * HW, 2 * HW))],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, (1, C, HW, HW))], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _activation_permutes(mod) -> list:
    """The permute_dims calls in `mod`'s main function on a tensor of more than one dimension above 1 (not a
    constant, nor a bias's (1, C, 1, 1) reshaped constant: their permutes fold at build time)."""
    import tvm
    from tvm import relax

    found = []

    def visit(expr):
        if (isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.permute_dims"
                and not isinstance(expr.args[0], tvm.ir.expr.Constant)
                and sum(int(d) > 1 for d in expr.args[0].ty.shape.values) > 1):
            found.append(expr)

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return found


def test_convnext_blocks_keep_no_permute_between_them_and_match_onnxruntime(tmp_path):
    from tvm_ttile import network as nw

    path = tmp_path / "convnext.onnx"
    onnx.save(_convnext_blocks(), path)
    net = load_model(str(path))
    import tvm

    before = len(_activation_permutes(tvm.relax.transform.ConvertLayout(
        {"relax.nn.conv2d": ["NHWC", "HWIO"]})(net.mod)))
    mod = nw.prepare(net.mod)
    # the network's output back to NCHW, and nothing else (each block had two more; the stem conv reads its
    # NCHW input in place)
    assert len(_activation_permutes(mod)) == 1 < before
    tasks = nw.extract_tasks(mod)
    names = [t.name for t in tasks]
    assert len([n for n in names if "transpose" in n]) == 1, names  # the output's
    # the layer scale and the residual add fused into the second matmul, channels-last
    assert any("matmul" in n and "multiply" in n and n.count("add") >= 2 for n in names), names
    # GELU's x / sqrt(2) is a product by 1 / sqrt(2) (rewrites._DivisionsAsProducts)
    assert not [n for n in names if "divide" in n], names
    x = np.random.default_rng(1).standard_normal((1, 3, 2 * HW, 2 * HW)).astype(np.float32)
    got = nw.run(nw.build_network(mod, None), x)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.shape == ref.shape and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_an_op_whose_operands_are_not_the_same_permute_keeps_it():
    import tvm
    from tvm import relax
    from tvm.script import relax as R

    from tvm_ttile.relax.permutes import sink_permutes

    @tvm.script.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((1, 4, 5, 6), "float32"), y: R.Tensor((1, 5, 6, 4), "float32"),
                 z: R.Tensor((1, 5, 6, 4), "float32")):
            with R.dataflow():
                a = R.permute_dims(x, axes=[0, 2, 3, 1])
                b = R.add(a, y)  # y is not a permute: stays
                c = R.permute_dims(z, axes=[0, 2, 3, 1])  # a permute, but another one than a's
                d = R.multiply(c, R.permute_dims(x, axes=[0, 3, 1, 2]))
                e = R.multiply(a, R.const(2.0, "float32"))  # sinks: (x * 2) permuted
                f = R.permute_dims(e, axes=[0, 3, 1, 2])  # cancels against a: x * 2
                R.output(b, d, f)
            return (b, d, f)

    out = relax.transform.DeadCodeElimination()(relax.transform.CanonicalizeBindings()(sink_permutes(Mod)))
    args = [np.random.default_rng(i).standard_normal(s).astype(np.float32)
            for i, s in enumerate([(1, 4, 5, 6), (1, 5, 6, 4), (1, 5, 6, 4)])]
    run = lambda m: [o.numpy() for o in relax.VirtualMachine(  # noqa: E731
        tvm.compile(m, target="llvm"), tvm.cpu())["main"](*[tvm.runtime.tensor(a) for a in args])]
    for got, want in zip(run(out), run(Mod)):
        np.testing.assert_array_equal(got, want)
    assert len(_activation_permutes(out)) == 3  # a (for b), c and the permute of x for d; f's cancelled
