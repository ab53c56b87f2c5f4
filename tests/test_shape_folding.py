"""Shape computations at import (models/shape_folding.py): a channel shuffle written with Shape / Gather / Div /
Concat / Reshape, as exporters write ShuffleNet's, imports and runs as ONNX Runtime does; a shape that depends on the
input's values is refused in one line naming the node."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tvm_ttile.errors import TTileError  # noqa: E402
from tvm_ttile.models.importers import load_model  # noqa: E402

SHAPE = (1, 8, 6, 6)


def _shuffle_model():
    """conv, then torch's chunk(2, dim=1) as its exporter writes it (Slices whose bounds are computed from the
    conv's Shape, with Constant nodes), then a channel shuffle (Reshape through shapes of the graph, Transpose),
    as in ShuffleNet-v2."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 8, 1, 1)).astype(np.float32)

    def const(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, np.int64)))

    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), const("one", [1]), const("two", [2]), const("zero", [0]),
             helper.make_node("Shape", ["c"], ["s"]),
             helper.make_node("Gather", ["s", "one"], ["ch"], axis=0),
             helper.make_node("Add", ["ch", "one"], ["ch1"]), helper.make_node("Div", ["ch1", "two"], ["half"]),
             helper.make_node("Mul", ["half", "one"], ["end0"]), helper.make_node("Mul", ["half", "two"], ["end1"]),
             helper.make_node("Slice", ["c", "zero", "end0", "one"], ["a"]),
             helper.make_node("Slice", ["c", "end0", "end1", "one"], ["b"]),
             helper.make_node("Relu", ["b"], ["rb"]),
             helper.make_node("Concat", ["a", "rb"], ["cat"], axis=1),
             helper.make_node("Shape", ["cat"], ["s2"]),
             helper.make_node("Gather", ["s2", "zero"], ["n"], axis=0),
             helper.make_node("Gather", ["s2", "two"], ["h"], axis=0),
             const("three", [3]), helper.make_node("Gather", ["s2", "three"], ["wd"], axis=0),
             const("four", [4]), helper.make_node("Div", ["ch", "two"], ["per"]),
             helper.make_node("Concat", ["n", "two", "per", "h", "wd"], ["shape5"], axis=0),
             helper.make_node("Reshape", ["cat", "shape5"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
             const("minus1", [-1]), helper.make_node("Concat", ["n", "minus1", "h", "wd"], ["shape4"], axis=0),
             helper.make_node("Reshape", ["t", "shape4"], ["y"])]
    graph = helper.make_graph(nodes, "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_a_channel_shuffle_through_computed_shapes_imports_and_matches_onnxruntime(tmp_path):
    from tvm_ttile import network as nw

    path = tmp_path / "shuffle.onnx"
    onnx.save(_shuffle_model(), path)
    net = load_model(str(path))
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    mod = nw.prepare(net.mod)
    assert nw.extract_tasks(mod)  # (without the folding, TVM's task extraction died in an assertion here)
    got = nw.run(nw.build_network(mod, None), x)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.shape == ref.shape == (1, 8, 6, 6) and np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_a_shape_from_the_inputs_values_is_refused_in_one_line(tmp_path):
    """NonZero's count depends on the data: no input shape makes it static."""
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Shape", ["nz"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["y"])]
    graph = helper.make_graph(nodes, "dynamic", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "dynamic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), path)
    with pytest.raises(TTileError, match=r"node 'Reshape' \(Reshape\) takes its input 's' as a shape computed from "
                                         "the input's values") as e:
        load_model(str(path))
    assert "\n" not in str(e.value)
