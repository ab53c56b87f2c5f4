"""QDQ models (ONNX Runtime's quantize_static: u8 activations, per-channel s8 weights) through tvm_ttile's Relax
rewrite: their convolutions become int8 tasks, and the built model reproduces ONNX Runtime's int8 output within one
quantization step; a convolution that cannot be made integer is reported with its reason, not dropped."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

import tvm  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tvm import relax  # noqa: E402

from tvm_ttile.relax import extract_tasks, prepare, quantized  # noqa: E402
from tvm_ttile.relax.bindings import is_op  # noqa: E402
from tvm_ttile.relax.tasks import fuse  # noqa: E402

SHAPE = (1, 3, 20, 20)


def _conv(rng, name, x, cin, cout, k, stride=1, group=1):
    w = (rng.standard_normal((cout, cin // group, k, k)) * (2 / (cin * k * k)) ** 0.5).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    node = helper.make_node("Conv", [x, name + "_w", name + "_b"], [name], strides=[stride] * 2, pads=[k // 2] * 4,
                            group=group)
    return [node], [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(b, name + "_b")]


def _model(kind, rng):
    """conv+relu, a residual block, a depthwise layer (stays fp32, reported), a Gemm head or a linear layer on
    tokens after a conv."""
    nodes, inits = _conv(rng, "c1", "x", 3, 16, 3, stride=2)
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    last = "r1"
    if kind == "residual":
        n, i = _conv(rng, "c2", "r1", 16, 16, 3)
        nodes += n + [helper.make_node("Relu", ["c2"], ["r2"])]
        n2, i2 = _conv(rng, "c3", "r2", 16, 16, 1)
        nodes += n2 + [helper.make_node("Add", ["c3", "r1"], ["s"]), helper.make_node("Relu", ["s"], ["out"])]
        inits += i + i2
        last = "out"
    elif kind == "pool":  # a max pool between two convs, as after ResNet's stem
        n, i = _conv(rng, "c2", "p", 16, 16, 3)
        nodes += [helper.make_node("MaxPool", ["r1"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)]
        nodes += n + [helper.make_node("Relu", ["c2"], ["out"])]
        inits += i
        last = "out"
    elif kind == "depthwise":
        n, i = _conv(rng, "dw", "r1", 16, 16, 3, group=16)
        nodes += n
        inits += i
        last = "dw"
    elif kind == "grouped":  # ResNeXt's: 4 groups of 4 input and 6 output channels
        n, i = _conv(rng, "g", "r1", 16, 24, 3, group=4)
        nodes += n + [helper.make_node("Relu", ["g"], ["out"])]
        inits += i
        last = "out"
    elif kind == "tokens":  # a linear layer on [1, 100 tokens, 16 channels], as a transformer's
        w = rng.standard_normal((16, 24)).astype(np.float32) * 0.2
        inits += [numpy_helper.from_array(w, "lin_w"), numpy_helper.from_array(np.array([1, 16, 100], np.int64), "t")]
        nodes += [helper.make_node("Reshape", ["r1", "t"], ["f"]),
                  helper.make_node("Transpose", ["f"], ["ft"], perm=[0, 2, 1]),
                  helper.make_node("MatMul", ["ft", "lin_w"], ["out"])]
        last = "out"
    elif kind == "dense":
        w = rng.standard_normal((10, 16 * 10 * 10)).astype(np.float32) * 0.05  # Gemm's transB: [N, K]
        inits.append(numpy_helper.from_array(w, "fc_w"))
        inits.append(numpy_helper.from_array(np.array([1, -1], np.int64), "flat"))
        nodes += [helper.make_node("Reshape", ["r1", "flat"], ["f"]),
                  helper.make_node("Gemm", ["f", "fc_w"], ["out"], transB=1)]
        last = "out"
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _quantized(tmp_path, kind, seed=0, fmt="QDQ", reduce_range=False, model=None, shape=SHAPE):
    """`kind`'s model (or `model`, input "x" of `shape`) quantized as ONNX Runtime users do."""
    rng = np.random.default_rng(seed)
    fp32, int8 = tmp_path / f"{kind}.onnx", tmp_path / f"{kind}_int8.onnx"
    onnx.save(_model(kind, rng) if model is None else model, fp32)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    quantization.quantize_static(str(fp32), str(int8), Reader(), quant_format=getattr(quantization.QuantFormat, fmt),
                                 per_channel=True, activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8, reduce_range=reduce_range)
    return onnx.load(int8)


def _output_step(model) -> float:
    return quantized.output_step(model) or 0.0


def _run_both(model, cpu_target="llvm", cpu=None, shape=SHAPE):
    from tvm.relax.frontend.onnx import from_onnx

    report = quantized.IntegerReport()
    mod = prepare(from_onnx(model, keep_params_in_input=False), cpu, quantized_report=report)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    ex = tvm.compile(mod, target=cpu_target)
    got = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return mod, report, got, ref


@pytest.mark.parametrize("kind", ["conv_relu", "residual", "pool", "grouped"])
def test_qdq_convolutions_become_int8_tasks_and_match_onnxruntime_within_one_step(tmp_path, kind):
    model = _quantized(tmp_path, kind)
    mod, report, got, ref = _run_both(model)
    assert len(report.integer) == {"conv_relu": 1, "residual": 3, "pool": 2, "grouped": 2}[kind]
    assert not report.kept_fp32
    pools = [b.value for f in mod.functions.values() if isinstance(f, relax.Function) for blk in f.body.blocks
             for b in blk.bindings if is_op(b.value, "relax.nn.max_pool2d")]
    assert [str(p.args[0].ty.dtype) for p in pools] == (["uint8"] if kind == "pool" else [])  # pooled as u8
    step = _output_step(model)
    assert step > 0 and got.shape == ref.shape
    off = np.abs(got - ref) / step
    assert off.max() <= 1.0 + 1e-4 and np.mean(off < 1e-3) >= 0.999, off.max()
    # the tasks: int8 convolutions, none computed in fp32
    tasks = extract_tasks(mod)
    kinds = [t.shape for t in tasks if t.policy == "tvm_ttile"]
    assert len(kinds) == len(report.integer)
    fused = fuse(mod, tvm.target.Target({"kind": "llvm"}))
    text = "\n".join(str(f) for f in fused.functions.values() if isinstance(f, tvm.tirx.PrimFunc))
    assert '"uint8"' in text and "float32(pad_temp" not in text


def test_nodes_computed_in_fp32_on_dequantized_values_are_named(tmp_path):
    """A residual Add (ONNX Runtime's QLinearAdd) reads two dequantized tensors: named, as a Softmax would be;
    convolutions, pooling and the reshapes between them are not."""
    assert quantized.float_nodes(_quantized(tmp_path, "residual")) == ["Add 'out_QuantizeLinear_Input'"]
    assert quantized.float_nodes(_quantized(tmp_path, "pool")) == []
    assert quantized.float_nodes(_quantized(tmp_path, "dense")) == []


def test_a_depthwise_layer_becomes_an_int8_task_reading_the_u8_tensor(tmp_path):
    """The depthwise conv2d reads the u8 tensor the layer before writes (operators.QDepthwise: u8 widened in its
    microkernels, padded with the zero point); the output stays within one step of ONNX Runtime's."""
    model = _quantized(tmp_path, "depthwise")
    mod, report, got, ref = _run_both(model)
    assert len(report.integer) == 2 and not report.kept_fp32, report
    tasks = [t for t in extract_tasks(mod) if t.policy == "tvm_ttile"]
    assert sorted(t.shape.split(" ")[0] for t in tasks) == ["conv2d", "depthwise"], [t.shape for t in tasks]
    fused = fuse(mod, tvm.target.Target({"kind": "llvm"}))
    (depthwise,) = [f for gv, f in fused.functions.items() if "qdepthwise" in gv.name_hint]
    assert any(str(p.ty.dtype) == "uint8" for p in depthwise.params if hasattr(p.ty, "dtype")), depthwise.params
    step = _output_step(model)
    off = np.abs(got - ref) / step
    assert off.max() <= 1.0 + 1e-4 and np.mean(off < 1e-3) >= 0.99, off.max()


def test_without_vnni_only_layers_whose_weights_fit_become_int8(tmp_path):
    """A CPU without VNNI multiplies |w| <= 64 exactly: a model quantized with the whole s8 range keeps its layers
    fp32, each reported with why and how to fix it; quantized with reduce_range=True (ONNX Runtime's advice for
    such CPUs), its layers are int8 and within one step of ONNX Runtime."""
    import dataclasses

    from tvm_ttile import cpu as cpu_mod

    from tvm_ttile.precision import dot_product

    no_vnni = dataclasses.replace(cpu_mod.detect_host(), extensions=())
    if dot_product("int8", no_vnni) is None:
        pytest.skip("an x86 host (AVX2 or AVX-512BW)")
    full = _quantized(tmp_path, "dense")
    _, report, got, ref = _run_both(full, cpu=no_vnni)
    assert not report.integer and len(report.kept_fp32) == 2
    assert all("no VNNI" in why and "reduce_range=True" in why for _, why in report.kept_fp32), report.kept_fp32
    assert np.abs(got - ref).max() <= _output_step(full) * (1.0 + 1e-4)
    seven = _quantized(tmp_path, "dense", reduce_range=True)
    _, report, got, ref = _run_both(seven, cpu=no_vnni)
    assert len(report.integer) == 2 and not report.kept_fp32, report
    assert np.abs(got - ref).max() <= _output_step(seven) * (1.0 + 1e-4)


@pytest.mark.parametrize("kind", ["dense", "tokens"])
def test_quantized_dense_and_token_matmuls_become_int8(tmp_path, kind):
    """A Gemm head (weights [N, K], transB) and a MatMul on 3-d activations (weights [K, N], leading dimensions
    folded into rows): int8 tasks beside the conv, within one step of ONNX Runtime."""
    model = _quantized(tmp_path, kind)
    mod, report, got, ref = _run_both(model)
    assert len(report.integer) == 2 and not report.kept_fp32, report
    assert report.integer[1].startswith("matmul [1, 1600]" if kind == "dense" else "matmul [1, 100, 16]")
    assert np.abs(got - ref).max() <= _output_step(model) * (1.0 + 1e-4)
    assert sum(t.policy == "tvm_ttile" for t in extract_tasks(mod)) == 2


@pytest.mark.parametrize("vnni", [True, False], ids=["host", "without_vnni"])
def test_a_tuned_qdq_network_runs_int8_microkernels_and_still_matches(tmp_path, small_catalog, vnni):
    """On the host's int8 instruction, and on a CPU without VNNI (the host's extensions taken away: vpmaddubsw,
    the model quantized with reduce_range as such a CPU needs)."""
    import dataclasses

    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.metaschedule import register_intrinsics_in
    from tvm_ttile.precision import dot_product, tag_for

    cpu = cpu_mod.detect_host()
    cpu = cpu if vnni else dataclasses.replace(cpu, extensions=())
    dot = dot_product("int8", cpu)
    if dot is None:
        pytest.skip("this CPU has no int8 instruction")
    from tvm.relax.frontend.onnx import from_onnx

    model = _quantized(tmp_path, "residual", seed=1, reduce_range=dot.weight_limit < 128)
    mod = prepare(from_onnx(model, keep_params_in_input=False), cpu)
    assert quantized.precision_of(mod) == "int8"
    work = str(tmp_path / "net")
    res = nw.tune_network(mod, work_dir=work, trials_per_task=2, memory_bound=False, progress=False, cpu=cpu)
    ours = [t for t in res.tasks if t.policy == "tvm_ttile"]
    assert len(ours) == 3 and all(t.verified for t in ours)
    # the microkernels are of the CPU's instruction: vpmaddubsw ones (named pmadd) exactly where it has no VNNI
    int8 = [n for n in register_intrinsics_in(work) if "int8" in n]
    assert int8 and all(("pmadd" in n) == bool(tag_for("int8", cpu)) for n in int8), int8
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    got = nw.run(nw.build_network(mod, work, cpu=cpu), x)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(got - ref).max() <= _output_step(model) * (1.0 + 1e-4)


def _dynamic_mlp(tmp_path):
    """Two linear layers on [1, 50 tokens, 64] (bias, ReLU between), quantized as transformers usually are:
    onnxruntime's quantize_dynamic (DynamicQuantizeLinear on the activations per inference, MatMulInteger)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.1, n)
             for n, s in (("w1", (64, 96)), ("b1", (96,)), ("w2", (96, 32)))]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r1"]), helper.make_node("MatMul", ["r1", "w2"], ["out"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 50, 64))],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializer=inits)
    fp32, int8 = tmp_path / "mlp.onnx", tmp_path / "mlp_dynamic.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), fp32)
    quantization.quantize_dynamic(str(fp32), str(int8), weight_type=quantization.QuantType.QInt8)
    return onnx.load(int8)


def test_dynamically_quantized_matmuls_become_int8_tasks_and_equal_onnxruntime(tmp_path, small_catalog):
    """MatMulInteger by constant s8 weights (the activations' zero point a tensor computed per inference): int8
    tasks with the elementwise ops after them fused, tuned, and equal to ONNX Runtime's output."""
    from tvm.relax.frontend.onnx import from_onnx

    from tvm_ttile import network as nw

    model = _dynamic_mlp(tmp_path)
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= {n.op_type for n in model.graph.node}
    report = quantized.IntegerReport()
    mod = prepare(from_onnx(model, keep_params_in_input=False), quantized_report=report)
    assert report.integer == ["matmul [1, 50, 64] x [64, 96]", "matmul [1, 50, 96] x [96, 32]"], report
    tasks = extract_tasks(mod)
    assert sorted(t.shape for t in tasks if t.policy == "tvm_ttile") == ["matmul i50,j32,k96", "matmul i50,j96,k64"]
    fused = fuse(mod, tvm.target.Target({"kind": "llvm"}))
    names = [gv.name_hint for gv, f in fused.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert any(n.startswith("fused_qmatmul") and "add" in n for n in names), names  # the bias fused in
    work = str(tmp_path / "net")
    res = nw.tune_network(mod, work_dir=work, trials_per_task=2, memory_bound=False, progress=False)
    assert all(t.verified for t in res.tasks if t.policy == "tvm_ttile")
    x = np.random.default_rng(5).standard_normal((1, 50, 64)).astype(np.float32)
    got = nw.run(nw.build_network(mod, work), x)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_agreement_with_the_fp32_model_counts_top1_and_relative_error():
    from tvm_ttile.network.fidelity import against_fp32, format_lines

    weights = np.random.default_rng(3).standard_normal((12, 5))
    fp32 = lambda x: x.reshape(1, -1) @ weights  # noqa: E731
    flipped = lambda x: -fp32(x)  # noqa: E731 - the top class becomes the bottom one
    result = against_fp32({"same": fp32, "flipped": flipped}, fp32, (1, 12), inputs=20, seed=1)
    assert result["inputs"] == 20
    assert result["systems"]["same"] == {"top1_agreement": 1.0, "max_error_over_scale": 0.0,
                                         "median_error_over_scale": 0.0}
    assert result["systems"]["flipped"]["top1_agreement"] == 0.0
    assert result["systems"]["flipped"]["max_error_over_scale"] == pytest.approx(2.0)
    tokens = lambda x: fp32(x).reshape(1, 1, 5)  # noqa: E731 - [batch, tokens, features]: no class to agree on
    result = against_fp32({"same": tokens}, tokens, (1, 12), inputs=3)
    assert result["systems"]["same"]["top1_agreement"] is None
    line, = format_lines(result, "m.onnx")
    assert "top-1" not in line and "same error / scale median 0.000" in line


@pytest.mark.parametrize("kind", ["residual", "dense"])
def test_quantized_operators_are_read_as_their_qdq_form_and_match_onnxruntime(tmp_path, kind):
    """ONNX Runtime's QOperator format (QLinearConv, QLinearAdd, QGemm, QLinearGlobalAveragePool ...), which TVM's
    importer lacks: imported in QDQ form, its products int8, within one step of ONNX Runtime on the file as given."""
    from tvm_ttile.models.importers import load_model

    model = _quantized(tmp_path, kind, fmt="QOperator")
    assert "QLinearConv" in {n.op_type for n in model.graph.node}
    net = load_model(model)
    report = quantized.IntegerReport()
    mod = prepare(net.mod, quantized_report=report)
    assert len(report.integer) == (3 if kind == "residual" else 2) and not report.kept_fp32, report
    x = np.random.default_rng(3).standard_normal(SHAPE).astype(np.float32)
    got = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    off = np.abs(got - ref) / _output_step(model)
    assert off.max() <= 1.0 + 1e-4 and np.mean(off < 1e-3) >= 0.99, (off.max(), np.mean(off < 1e-3))


def _conv_integer(x_zero, w_zero=None, pads=(1, 0, 2, 1), strides=(2, 2)):
    """x (float) quantized with a constant scale and zero point, then ConvInteger(x_q, W, x_zero[, w_zero]) over
    5 channels, cast to float: ONNX's int32 result as it is, asymmetric pads."""
    rng = np.random.default_rng(7)
    w = rng.integers(-128, 128, (6, 5, 3, 3)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0.02, np.float32), "s"),
             numpy_helper.from_array(np.array(x_zero, np.uint8), "z")]
    inputs = ["xq", "w", "z"]
    if w_zero is not None:
        inits.append(numpy_helper.from_array(np.array(w_zero, np.int8), "wz"))
        inputs.append("wz")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("ConvInteger", inputs, ["acc"], name="conv_int", pads=list(pads), strides=list(strides)),
             helper.make_node("Cast", ["acc"], ["out"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "ci", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 5, 11, 13))],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


@pytest.mark.parametrize("x_zero", [0, 3, 200])
def test_conv_integer_becomes_an_int8_task_equal_to_onnx_runtimes_int32_result(x_zero):
    """ConvInteger, which TVM's importer lacks, read as the int32 convolution it defines: an int8 task padded
    with the input's zero point, the result element for element ONNX Runtime's."""
    from tvm_ttile.models.importers import load_model

    model = _conv_integer(x_zero)
    report = quantized.IntegerReport()
    mod = prepare(load_model(model).mod, quantized_report=report)
    assert report.integer == ["conv2d [1, 11, 13, 5] x [3, 3, 5, 6]"] and not report.kept_fp32, report
    assert [t.shape for t in extract_tasks(mod) if t.policy == "tvm_ttile"] == ["conv2d h6,w6,k16,c8,r3,s3 stride2"]
    x = np.random.default_rng(1).standard_normal(SHAPE[:1] + (5, 11, 13)).astype(np.float32) * 2
    got = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.shape == ref.shape and np.array_equal(got, ref)


def test_dynamically_quantized_convolutions_become_int8_tasks_and_equal_onnxruntime(tmp_path):
    """quantize_dynamic on a CNN: DynamicQuantizeLinear per inference, then ConvInteger. Its zero point is a
    tensor, so the input is padded with 0 and z_x x the weights over each pixel's taps inside the image is
    subtracted: equal to ONNX Runtime's output, borders included."""
    from tvm_ttile.models.importers import load_model

    fp32, int8 = tmp_path / "residual.onnx", tmp_path / "residual_dynamic.onnx"
    onnx.save(_model("residual", np.random.default_rng(0)), fp32)
    quantization.quantize_dynamic(str(fp32), str(int8), weight_type=quantization.QuantType.QInt8)
    model = onnx.load(int8)
    assert {"DynamicQuantizeLinear", "ConvInteger"} <= {n.op_type for n in model.graph.node}
    report = quantized.IntegerReport()
    mod = prepare(load_model(model).mod, quantized_report=report)
    assert len(report.integer) == 3 and not report.kept_fp32, report
    ex = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed in range(2):
        x = np.random.default_rng(seed).standard_normal(SHAPE).astype(np.float32)
        got, ref = ex["main"](tvm.runtime.tensor(x)).numpy(), session.run(None, {"x": x})[0]
        assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()


def test_a_conv_integer_with_a_weight_zero_point_is_refused_in_one_line_naming_the_node():
    from tvm_ttile.errors import TTileError
    from tvm_ttile.models.importers import load_model

    with pytest.raises(TTileError, match=r"^node 'conv_int' \(ConvInteger\): its weights' zero point is not a "
                                         r"constant 0; quantize the weights symmetrically$"):
        load_model(_conv_integer(3, w_zero=2))


def test_a_residual_blocks_epilogue_is_fused_into_the_int8_tile_with_its_dequantized_skip(tmp_path):
    """The conv2d before a quantized residual Add dequantizes the skip tensor in its own function: that stage is
    inlined into the epilogue, which then moves into the tile loops (left over the whole tensor after them, the
    layer ran 2.4x slower in MobileNet-v2); every drawn scheme still equals the untuned function."""
    import dataclasses

    from tvm.relax.frontend.onnx import from_onnx

    from tvm_ttile.context import Context
    from tvm_ttile.cpu import detect_host
    from tvm_ttile.lowering import lower, problem_of
    from tvm_ttile.microkernels import family
    from tvm_ttile.network import verify_against_untuned
    from tvm_ttile.precision import dot_product, tag_for
    from tvm_ttile.samplers import make_sampler
    from tvm_ttile.space import Space

    cpu = detect_host()
    if dot_product("int8", cpu) is None:
        pytest.skip("this CPU has no int8 instruction")
    model = _quantized(tmp_path, "residual")
    mod = prepare(from_onnx(model, keep_params_in_input=False), cpu)
    ctx = quantized.context_for(mod, Context.make(cpu=cpu))
    kept = [dataclasses.replace(mk, dot=tag_for("int8", cpu))
            for mk in family.candidates("conv2d", cpu.isa, cpu.lanes, "int8")]
    residual = 0
    for task in (t for t in extract_tasks(mod, ctx) if t.policy == "tvm_ttile"):
        func = task.mod["main"]
        residual += not task.name.startswith("fused_qconv2d")  # the skip dequantized before the conv2d
        problem = problem_of(func, cpu.isa.name, cpu.lanes, cpu)
        for scheme in make_sampler("ttile", seed=1).sample_many(Space(problem, kept), 2):
            low = lower(problem, scheme, func)
            assert not [n for n in low.notes if "unfused" in n or "not inlined" in n], (scheme.text, low.notes)
            ok, err = verify_against_untuned(task.mod, low.sch.mod, ctx.target)
            assert ok, (scheme.text, err)
    assert residual == 1


@pytest.mark.parametrize("tokens", [197, 13])
def test_quantized_attention_products_of_two_activations_become_int8_tasks(tmp_path, tokens):
    """A QDQ self-attention (ONNX Runtime's quantizer dequantizes both of Q K^T's and P V's u8 operands): both
    products are int8 tvm_ttile tasks on the u8 tensors, the right one shifted to s8 in the task and the zero
    points' corrections in the epilogue; the softmax between stays fp32, named. The output is held to ONNX
    Runtime running the graph as written (optimizations off: each node as ONNX defines it): its optimized run swaps
    QDQ groups for its own quantized kernels and moves up to 3 steps from the graph's arithmetic at 197 tokens."""
    import onnxruntime
    from test_attention import HEAD, HEADS, _attention

    shape = (1, tokens, HEADS * HEAD)
    model = _quantized(tmp_path, "attention", model=_attention(tokens, tokens == 197), shape=shape)
    mod, report, got, ref = _run_both(model, shape=shape)
    products = [layer for layer in report.integer if f", {HEADS}, " in layer]
    assert len(products) == 2 and not report.kept_fp32, report
    ours = [t for t in extract_tasks(mod) if t.policy == "tvm_ttile" and t.shape.endswith(f" x{HEADS}")]
    assert len(ours) == 2 and all("int8_matmul" in t.name for t in ours), [t.name for t in extract_tasks(mod)]
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    written = onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    ref = written.run(None, {"x": x})[0]
    step = _output_step(model)
    assert step > 0 and got.shape == ref.shape
    off = np.abs(got - ref) / step
    assert off.max() <= 1.0 + 1e-4 and np.mean(off < 1e-3) >= quantized.WITHIN_ONE_STEP, off.max()
    assert any(node.startswith("Softmax") for node in quantized.float_nodes(model))


def test_a_tuned_quantized_attention_verifies_its_int8_products_and_equals_the_untuned_build(tmp_path, small_catalog):
    """The two int8 products of two activations, tuned (drawn schemes on the CPU's int8 microkernels): each task
    verified against its untuned function, the build within one step of the untuned build everywhere."""
    from tvm.relax.frontend.onnx import from_onnx

    from test_attention import HEAD, HEADS, _attention
    from tvm_ttile import cpu as cpu_mod
    from tvm_ttile import network as nw
    from tvm_ttile.precision import dot_product

    if dot_product("int8", cpu_mod.detect_host()) is None:
        pytest.skip("this CPU has no int8 instruction")
    shape = (1, 29, HEADS * HEAD)
    model = _quantized(tmp_path, "attention", model=_attention(29, True), shape=shape)
    mod = prepare(from_onnx(model, keep_params_in_input=False))
    work = str(tmp_path / "net")
    res = nw.tune_network(mod, work_dir=work, trials_per_task=3, memory_bound=False, progress=False)
    products = [t for t in res.tasks if t.shape.endswith(f" x{HEADS}")]
    assert len(products) == 2 and all(t.policy == "tvm_ttile" and t.verified and t.trials for t in products), products
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    got = nw.run(nw.build_network(mod, work), x)
    untuned = nw.run(nw.build_network(mod, None), x)
    assert np.abs(got - untuned).max() <= _output_step(model) * (1.0 + 1e-4)
