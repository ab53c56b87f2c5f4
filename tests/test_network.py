"""Whole networks through Relax: model zoo and import, task extraction, tvm_ttile's own network tuning and
its policy inside MetaSchedule's tune_relax, each build checked against the untuned build."""
import json
import time
import os

import numpy as np
import pytest

from tvm_ttile.scheme import Scheme


@pytest.mark.parametrize("name", ["resnet18", "darknet19", "tiny_resnet", "micro_resnet", "mobilenet_v2", "transformer",
                                  "dcgan"])
def test_zoo_models_are_valid_onnx_and_split_into_tasks(name, host):
    import onnx

    from tvm_ttile import network as nw
    from tvm_ttile.models import zoo
    from tvm_ttile.models.importers import load_model

    onnx.checker.check_model(zoo.to_onnx(name))
    net = load_model(name)
    tasks = nw.extract_tasks(nw.prepare(net.mod), cpu=host)
    convs = [t for t in tasks if t.policy == "tvm_ttile" and t.shape.startswith("conv2d")]
    depthwise = [t for t in tasks if t.policy == "tvm_ttile" and t.shape.startswith("depthwise")]
    dense = [t for t in tasks if t.policy == "tvm_ttile" and not t.shape.startswith(("conv2d", "depthwise"))]
    # A dense layer is tvm_ttile's, its outputs padded to whole vectors where they are not (1000 classes, 16 lanes)
    assert all(t.shape.startswith("matmul") for t in dense)
    if name == "resnet18":
        assert len(dense) == 1
    others = [t for t in tasks if t.policy == "metaschedule"]
    assert all(t.reason for t in others)  # every task left to MetaSchedule says why
    if name == "resnet18":
        # 7x7/2 stem (C=3), 3x3 stride 1 and 2, 1x1/2 shortcuts; residual add + ReLU fused into the conv task
        assert len(convs) == 15 and sum(t.weight for t in convs) == 20
        assert any("add" in t.name and t.name.count("add") == 2 and "relu" in t.name for t in convs)
        assert any("c3,r7,s7 stride2" in t.shape for t in convs)
    if name == "micro_resnet":  # the stem and two tasks of one 16-channel convolution (the tests' twins)
        assert len(convs) == 3 and len({t.shape for t in convs}) == 2
    if name == "darknet19":
        assert sum(t.weight for t in convs) == 18
    if name == "mobilenet_v2":
        # 17 depthwise convolutions (Relax: grouped, one channel per group) tuned by tvm_ttile, ReLU6 fused;
        # ReLU6 (ONNX Clip) fused into its convolution in NHWC, no layout transposes around it
        assert sum(t.weight for t in depthwise) == 17
        assert all("maximum" in t.name and "minimum" in t.name for t in depthwise)
        assert not any("transpose" in t.name and ("maximum" in t.name or "minimum" in t.name) for t in tasks)
        assert sum("maximum" in t.name and "minimum" in t.name for t in convs) >= 8
        # the 24-channel projections and the 1000-class head too, their outputs padded to whole vectors
        assert not any("conv2d" in t.name or "matmul" in t.name for t in others)
    if name == "transformer":
        # per layer: the scores Q K^T, their softmax and the context P V over the 12 heads as one fused task
        # (attention.py); Q, K, V, the output and the feed-forward dense layers tuned by tvm_ttile
        fused = [t for t in tasks if t.policy == "attention"]
        assert [t.shape for t in fused] == ["attention m128,n128,d64 x12"] and fused[0].weight == 2
        assert not [t for t in dense if t.shape.endswith(" x12")] and sum(t.weight for t in dense) == 12
        unfused = nw.extract_tasks(nw.prepare(net.mod, fused_attention=False), cpu=host)
        batched = [t for t in unfused if t.policy == "tvm_ttile" and t.shape.endswith(" x12")]  # as batch matmuls
        assert sorted(t.shape for t in batched) == ["matmul i128,j128,k64 x12", "matmul i128,j64,k128 x12"]
    if name == "dcgan":
        # each transposed convolution is 4 phase convolutions of 2 x 2 taps, one task per layer; the last one's 3
        # output channels are left to MetaSchedule (padding them to whole vectors would more than double the work)
        assert sorted(t.weight for t in convs) == [4, 4, 4] and all(",r2,s2" in t.shape for t in convs)


@pytest.mark.parametrize("name,shape", [("mobilenet_v2", (1, 3, 224, 224)), ("transformer", (128, 768)),
                                        ("dcgan", (1, 512, 4, 4))])
def test_torch_and_onnx_agree(name, shape):
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    from tvm_ttile.models import zoo

    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    sess = ort.InferenceSession(zoo.to_onnx(name).SerializeToString(), providers=["CPUExecutionProvider"])
    a = sess.run(None, {"input": x})[0]
    b = zoo.to_torch(name)(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3 * float(np.abs(b).max()))


def test_relu6_from_torch_stays_in_nhwc_with_its_conv():
    """torch's relu6 imports as Relax clip, which ConvertLayout leaves in NCHW behind a transpose: prepare makes
    it maximum / minimum, which follow the conv's NHWC."""
    torch = pytest.importorskip("torch")
    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model

    class ConvRelu6(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(8, 16, 3)

        def forward(self, x):
            return torch.nn.functional.relu6(self.conv(x))

    calls = [line.split("= R.")[1].split("(")[0] for line in
             nw.prepare(load_model(ConvRelu6().eval(), input_shape=(1, 8, 9, 9)).mod).script().splitlines()
             if " = R." in line]
    assert "clip" not in calls and calls.index("minimum") == len(calls) - 2  # then only the output's transpose
    assert calls[-1] == "permute_dims"


def test_torch_and_onnx_forms_share_weights():
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    from tvm_ttile.baselines.engines import onnxruntime_runner, torch_runner
    from tvm_ttile.models.importers import load_model

    net = load_model("tiny_resnet")
    x = np.random.default_rng(1).standard_normal(net.input_shape).astype(np.float32)
    a = onnxruntime_runner(net.onnx_model, net.input_name, x)[0]()
    b = torch_runner(net.torch_module, x)[0]()
    assert isinstance(net.torch_module, torch.nn.Module)
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # The torch frontend path (torch.export -> Relax) gives the same network.
    from tvm_ttile import network as nw

    via_torch = load_model(net.torch_module, input_shape=net.input_shape)
    got = nw.run(nw.build_network(nw.prepare(via_torch.mod)), x)
    np.testing.assert_allclose(got, b, rtol=1e-4, atol=1e-4)


def test_a_conv1d_network_is_tuned_by_tvm_ttile_and_correct(small_catalog, host, tmp_path):
    """A 1-d convolution + ReLU from ONNX (NCW, weights KCS): prepare converts it to NWC / WIO, tvm_ttile tunes it as
    a conv2d of height 1 with the ReLU fused, and the build matches numpy."""
    from onnx import TensorProto, helper

    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.operators import conv1d_nwc_reference

    rng = np.random.default_rng(0)
    w = rng.standard_normal((2 * host.lanes, 5, 3), dtype=np.float32)  # K C S
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1], strides=[2]), helper.make_node("Relu", ["c"], ["y"])],
        "tcn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 29])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.flatten())])
    net = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9))
    mod = nw.prepare(net.mod)
    res = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "net"), trials_per_task=2, memory_bound=False, progress=False)
    (task,) = [t for t in res.tasks if t.policy == "tvm_ttile"]
    assert task.shape.startswith("conv2d") and "relu" in task.name
    x = rng.standard_normal((1, 5, 29), dtype=np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "net")), x)
    ref = np.maximum(conv1d_nwc_reference(x.transpose(0, 2, 1), w.transpose(2, 1, 0), 2, 1), 0).transpose(0, 2, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_grouped_and_depthwise_conv1d_networks_are_tuned_by_tvm_ttile_and_correct(small_catalog, host, tmp_path):
    """A Conformer-like 1-d block from ONNX: a grouped conv1d (2 groups) + ReLU, then a depthwise one (groups = C):
    prepare converts both to NWC / WIO, tvm_ttile tunes both (as a conv2d per group and a depthwise conv2d of
    height 1) and the build matches numpy."""
    from onnx import TensorProto, helper

    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.operators import conv1d_nwc_reference

    rng = np.random.default_rng(1)
    k = 2 * host.lanes
    w1 = rng.standard_normal((k, 3, 3), dtype=np.float32)  # K C/groups S
    w2 = rng.standard_normal((k, 1, 5), dtype=np.float32)  # C 1 S
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1], group=2), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Conv", ["r", "w2"], ["y"], pads=[2, 2], group=k)],
        "conformer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 31])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor(n, TensorProto.FLOAT, w.shape, w.flatten()) for n, w in (("w1", w1), ("w2", w2))])
    net = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9))
    mod = nw.prepare(net.mod)
    res = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "net"), trials_per_task=2, memory_bound=False, progress=False)
    shapes = sorted(t.shape.split()[0] for t in res.tasks if t.policy == "tvm_ttile")
    assert shapes == ["conv2d", "depthwise"], [(t.name, t.policy, t.shape) for t in res.tasks]
    x = rng.standard_normal((1, 6, 31), dtype=np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "net")), x)
    hidden = np.maximum(conv1d_nwc_reference(x.transpose(0, 2, 1), w1.transpose(2, 1, 0), 1, 1, 1, 2), 0)
    ref = conv1d_nwc_reference(hidden, w2.transpose(2, 1, 0), 1, 2, 1, k).transpose(0, 2, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_transposed_convolutions_become_phase_convolutions_tuned_by_tvm_ttile_and_correct(small_catalog, host, tmp_path):
    """An ONNX ConvTranspose (kernel 3, stride 2, an output padding) + bias + ReLU: prepare rewrites it into its
    stride^2 phase convolutions (2 x 2, 2 x 1, 1 x 2 and 1 x 1 taps: no product by a stuffed zero), tvm_ttile
    tunes them, and the build matches numpy's transposed convolution. (DCGAN's kernel 4 / stride 2, whose phases
    are one task: the zoo's dcgan; the phase arithmetic on many shapes: test_transposed.py.)"""
    from onnx import TensorProto, helper

    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.relax.transposed import conv2d_transpose_reference

    rng = np.random.default_rng(2)
    k = 2 * host.lanes
    w, b = rng.standard_normal((6, k, 3, 3), dtype=np.float32), rng.standard_normal(k, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("ConvTranspose", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1],
                          output_padding=[1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "upsample", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.flatten()) for n, v in (("w", w), ("b", b))])
    net = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9))
    mod = nw.prepare(net.mod)
    assert "conv2d_transpose" not in str(mod)
    res = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "net"), trials_per_task=2, memory_bound=False, progress=False)
    taps = [("r2" in t.shape.split(","), "s2" in t.shape.split(",")) for t in res.tasks if t.policy == "tvm_ttile"]
    assert sorted(taps) == [(False, False), (False, True), (True, False), (True, True)], \
        [(t.name, t.policy, t.shape) for t in res.tasks]
    x = rng.standard_normal((1, 6, 5, 5), dtype=np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "net")), x)
    ref = np.maximum(conv2d_transpose_reference(x, w, (2, 2), (1, 1), (10, 10)) + b[:, None, None], 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())))


@pytest.mark.slow
def test_output_channels_padded_to_whole_vectors_are_tvm_ttiles_and_correct(small_catalog, host, tmp_path):
    """A conv2d with 1.5 vectors of output channels + bias + ReLU + a residual add, then a dense layer with 2.5
    vectors of outputs + bias: prepare pads their weights to whole vectors and slices the outputs back after the
    bias and ReLU (which stay fused with the contraction), so tvm_ttile tunes both; the build matches numpy."""
    from onnx import TensorProto, helper

    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.operators import conv2d_nhwc_reference

    rng = np.random.default_rng(0)
    k, n = host.lanes + host.lanes // 2, 2 * host.lanes + host.lanes // 2
    w, b = rng.standard_normal((k, k, 3, 3), dtype=np.float32), rng.standard_normal(k, dtype=np.float32)
    fw, fb = rng.standard_normal((k * 25, n), dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("Add", ["r", "x"], ["s"]), helper.make_node("Flatten", ["s"], ["f"]),
         helper.make_node("Gemm", ["f", "fw", "fb"], ["y"])],
        "padded", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor(name, TensorProto.FLOAT, a.shape, a.flatten())
                     for name, a in (("w", w), ("b", b), ("fw", fw), ("fb", fb))])
    net = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9))
    mod = nw.prepare(net.mod, host)
    calls = [line.split("= R.")[1].split("(")[0] for line in mod.script().splitlines() if " = R." in line]
    # the conv2d reads the NCHW input (a call_tir of its own TE, _InputLayoutIntoConv)
    assert calls.index("strided_slice") > calls.index("nn.relu") > calls.index("call_tir")
    assert "strided_slice" not in nw.prepare(net.mod, host, whole_vectors=False).script()  # as MetaSchedule gets it
    res = nw.tune_network(mod, cpu=host, work_dir=str(tmp_path / "net"), trials_per_task=2, memory_bound=False,
                          progress=False)
    tuned = sorted(t.shape for t in res.tasks if t.policy == "tvm_ttile")
    assert len(tuned) == 2 and f"k{2 * host.lanes}" in tuned[0] and f"j{3 * host.lanes}" in tuned[1], tuned
    assert any("relu" in t.name for t in res.tasks if t.policy == "tvm_ttile" and t.shape.startswith("conv2d"))
    x = rng.standard_normal((1, k, 5, 5), dtype=np.float32)
    got = nw.run(nw.build_network(mod, str(tmp_path / "net")), x)
    conv = conv2d_nhwc_reference(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), 1, 1) + b
    s = (np.maximum(conv, 0) + x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, s.reshape(1, -1) @ fw + fb, rtol=1e-4, atol=1e-3)


@pytest.mark.slow
def test_a_first_conv_reads_the_nchw_input_in_its_padding_copy(small_catalog, host, tmp_path):
    """ConvertLayout's permute of the NCHW input to NHWC is no pass of its own: the first conv2d (stride 2,
    asymmetric padding, bias, ReLU) reads the NCHW input in its padding stage and is tuned by tvm_ttile, and so
    do two convolutions that both read the input. Both builds match numpy; without input_layout_in_conv the
    permute is a task of its own."""
    from onnx import TensorProto, helper

    from tvm_ttile import network as nw
    from tvm_ttile.metaschedule import measured_schemes, open_database, records_of
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.operators import conv2d_nhwc_reference

    rng = np.random.default_rng(0)
    c, k = 3, 2 * host.lanes
    w, b = rng.standard_normal((k, c, 3, 3), dtype=np.float32), rng.standard_normal(k, dtype=np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[0, 0, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    value_info = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa: E731
    for second_reader in (False, True):  # a second conv2d reading x
        graph = helper.make_graph(
            nodes + ([helper.make_node("Conv", ["x", "w"], ["d"], strides=[2, 2], pads=[0, 0, 1, 1]),
                      helper.make_node("Add", ["y", "d"], ["z"])] if second_reader else []),
            "stem", [value_info("x", [1, c, 15, 13])], [value_info("z" if second_reader else "y", None)],
            initializer=[helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.flatten()) for n, a in (("w", w), ("b", b))])
        net = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9))
        mod = nw.prepare(net.mod, host)
        assert "R.permute_dims(x" not in mod.script()  # both convolutions read x itself
        tasks = nw.extract_tasks(mod, cpu=host)
        permutes_x = lambda ts: [t for t in ts if t.shape.startswith(f"1x{c}x15x13,")]  # noqa: E731
        assert not permutes_x(tasks), [(t.name, t.shape) for t in tasks]  # (the output's permute stays)
        assert any(t.policy == "tvm_ttile" and t.shape.startswith("conv2d") and "stride2" in t.shape for t in tasks)
        mod_apart = nw.prepare(net.mod, host, input_layout_in_conv=False)
        assert permutes_x(nw.extract_tasks(mod_apart, cpu=host))
        work = str(tmp_path / f"net{int(second_reader)}")
        if not second_reader:  # tuned in its earlier form first: the new form starts from that form's best scheme
            nw.tune_network(mod_apart, cpu=host, work_dir=work, trials_per_task=2, memory_bound=False, progress=False)
            database = open_database(work)
            conv_apart = next(t for t in nw.extract_tasks(mod_apart, cpu=host) if t.policy == "tvm_ttile")
            best_apart = measured_schemes(database, conv_apart.mod, 1)
            i, conv_task = next((i, t) for i, t in enumerate(tasks) if t.policy == "tvm_ttile")
            # Where the new form's task directory is the earlier form's (same place, same name: the order of the
            # tasks is the extraction's, which differs with the vector lanes), its asked.json says its 2 trials
            # were asked: they were, for the earlier function, whose directory is moved aside.
            task_dir = f"{work}/tasks/{i:02d}-{conv_task.name}"
            collides = os.path.exists(f"{task_dir}/asked.json")
        nw.tune_network(mod, cpu=host, work_dir=work, trials_per_task=2, memory_bound=False, progress=False)
        if not second_reader:
            with open(f"{task_dir}/ttile_trials.jsonl") as f:
                assert [t["scheme"] for t in map(json.loads, f) if t["scheme"]][:1] == best_apart
            assert len(records_of(open_database(work), conv_task.mod)) == 2
            assert bool([d for d in os.listdir(f"{work}/tasks") if ".earlier-" in d]) == collides
        x = rng.standard_normal((1, c, 15, 13), dtype=np.float32)
        got = nw.run(nw.build_network(mod, work), x)
        xt = np.pad(x.transpose(0, 2, 3, 1), ((0, 0), (0, 1), (0, 1), (0, 0)))
        conv = conv2d_nhwc_reference(xt, w.transpose(2, 3, 1, 0), 2, 0)
        ref = np.maximum(conv + b, 0) + (conv if second_reader else 0)
        np.testing.assert_allclose(got, ref.transpose(0, 3, 1, 2), rtol=1e-4, atol=1e-4 * float(np.abs(ref).max()))


@pytest.mark.slow
@pytest.mark.parametrize("strategy, options, named", [("model", ["--strategy-option", "pool=100"], "model pool=100"),
                                                      ("ttile", [], "random")])
def test_tune_model_strategies_reach_every_task_between_metaschedule_tasks(small_catalog, tmp_path, capsys, strategy,
                                                                           options, named):
    """Either strategy (model, the default, or the paper's draws) reaches every conv2d/matmul task, also those
    tuned after a MetaSchedule task, and the report names it."""
    from tvm_ttile import cli

    args = ["tune-model", "micro_resnet", "--trials-per-task", "2", "--other-trials", "1", "--strategy", strategy,
            *options, "--in-network-top", "0", "--libraries", "", "--work-dir", str(tmp_path / "w"), "--json"]
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert f"(strategy {named}; sampler " in (tmp_path / "w" / "report.md").read_text()
    tuned = [t for t in report["tasks"] if t["policy"] == "tvm_ttile"]
    assert report["correct"] and tuned and all(t["trials"] == 2 and t["verified"] for t in tuned)
    # the other tasks: MetaSchedule's trial beside tvm_ttile's memory-bound schedules, the maker of the best named
    others = [t for t in report["tasks"] if t["policy"] == "metaschedule"]
    assert others and all(t["made_by"] and t["trials"] >= 2 for t in others)
    assert f"| {others[0]['name']} | metaschedule: best {others[0]['made_by']} |" in (tmp_path / "w" / "report.md").read_text()


@pytest.mark.slow
def test_tune_model_cli_builds_a_correct_network_and_resumes(small_catalog, tmp_path, capsys):
    from tvm_ttile import cli
    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model

    work = tmp_path / "micro"
    args = ["tune-model", "micro_resnet", "--trials-per-task", "2", "--memory-bound", "off", "--work-dir", str(work),
            "--sampler-option", "min_reuse=4", "--confirm-top", "5", "--in-network-top", "5", "--libraries", "onnxruntime",
            "--json"]
    started = time.perf_counter()
    assert cli.main(args) == 0
    called = time.perf_counter() - started
    report = json.loads(capsys.readouterr().out)
    # Where the run's wall time went: the phases add up to the run's wall time within 5%, in the report, its
    # markdown and the work dir's journal of runs.
    phases = report["phases"]
    assert phases["wall_seconds"] >= 0.95 * called
    assert sum(phases["phases"].values()) >= 0.95 * phases["wall_seconds"]
    assert {"import", "extraction", "tuning tvm_ttile", "confirm-top", "verification", "final build",
            "in-network picks", "reference build", "library timings"} <= set(phases["phases"])
    assert "Where this run's wall time went" in (work / "report.md").read_text()
    with open(work / "phases.jsonl") as f:
        assert [json.loads(line)["run"] for line in f] == ["tune_model"]
    # the network's defaults (weights-first, reduction-innermost, row bands) stay unless the command line overrides them
    assert report["sampler_options"] == {"min_reuse": 4, "parallel_dims": "rows", "reduction_inner": 0.5,
                                         "weights_first": 0.5}
    assert "min_reuse=4, parallel_dims=rows, reduction_inner=0.5, weights_first=0.5" in (work / "report.md").read_text()
    # ... and so does its search strategy (a pool ranked first), named in the report with the options given
    assert report["strategy"] == nw.NETWORK_STRATEGY == "model" and report["strategy_options"] == {}
    assert "(strategy model; sampler min_reuse=4," in (work / "report.md").read_text()
    # where the tuning time went: per policy in the summary, per task in the table
    spent = sum(t["tuning_seconds"] for t in report["tasks"] if t["policy"] == "tvm_ttile")
    assert spent > 0 and f"tvm_ttile {spent:.0f} s over 3 tasks" in (work / "report.md").read_text()
    assert report["correct"] and report["max_abs_error"]["tvm_ttile vs untuned"] <= 1e-3 * report["output_scale"]
    tuned = [t for t in report["tasks"] if t["policy"] == "tvm_ttile"]
    assert len(tuned) == 3 and all(t["trials"] == 2 and t["verified"] and t["gflops"] > 0 for t in tuned)
    assert all(t["trials"] == 0 and t["notes"] for t in report["tasks"] if t["policy"] != "tvm_ttile")
    assert report["latency"]["tvm_ttile"]["median_ms"] > 0 and (work / "report.md").exists()
    # Each task's candidates were timed again together before the build (confirm.py): one entry per task.
    with open(work / "confirmed.jsonl") as f:
        confirmed = [json.loads(line) for line in f]
    assert report["confirm_top"] == 5 and len({e["workload"] for e in confirmed}) == len(tuned)
    assert all(len(e["candidates"]) == 2 and all(len(c["round_medians"]) == 3 for c in e["candidates"])
               for e in confirmed)
    # Where the time goes inside the running network: every tuned task is found among the VM's calls.
    assert set(report["in_network"]["tasks_ms"]) >= {t["name"] for t in tuned}
    assert "ms in network" in (work / "report.md").read_text()
    # ... and each alone, hot and with flushed caches, on the arguments it gets there (the cause breakdown).
    causes = report["in_network"]["causes"]
    assert set(causes) >= {t["name"] for t in tuned}
    assert all(c["alone_hot_ms"] > 0 and c["alone_flushed_ms"] > 0 and c["alone_weights_flushed_ms"] > 0
               and c["weight_bytes"] > 0 for n, c in causes.items() if n in {t["name"] for t in tuned})
    assert "weights and output cold" in (work / "report.md").read_text()
    # A task with the same conv2d as one tuned before it (another epilogue) first measures that one's schemes.
    seen, twins = {}, 0
    for i, t in enumerate(report["tasks"]):
        if t["policy"] == "tvm_ttile":
            with open(work / "tasks" / f"{i:02d}-{t['name']}" / "ttile_trials.jsonl") as f:
                drawn = [e["scheme"] for e in map(json.loads, f) if e["scheme"]]
            if t["shape"] in seen:
                twins += 1
                assert drawn[0] in seen[t["shape"]]
            seen.setdefault(t["shape"], []).extend(drawn)
    assert twins >= 1
    # Each task's candidates were timed inside the running network (in_network.py), the build took the fastest
    # there: its record is the one in the picks database, and it is the candidate with the least in-network time.
    picks = report["in_network_picks"]
    assert set(picks) == {t["name"] for t in tuned}
    for e in picks.values():
        times = [c["in_network_s"] for c in e["candidates"]]
        assert len(times) == 2 and e["picked"] == times.index(min(times)) and e["weight_bytes"] > 0
        assert all(c["in_network_samples"] == 5 * e["calls"] and c["alone_hot_s"] > 0 and c["alone_flushed_s"] > 0
                   and c["alone_weights_flushed_s"] > 0 for c in e["candidates"])
    assert (work / "in_network" / "database_tuning_record.json").exists() and (work / "in_network.jsonl").exists()
    assert "picks the in-network fastest" in (work / "report.md").read_text()
    # Resumed: the database already holds 2 trials per task, so nothing is measured again (the picks stay).
    mod = nw.prepare(load_model("micro_resnet").mod)
    again = nw.tune_network(mod, work_dir=str(work), trials_per_task=2, memory_bound=False, progress=False)
    assert [t.trials for t in again.tasks if t.policy == "tvm_ttile"] == [2] * 3
    assert (work / "in_network").exists()
    # More trials change the records the picks were made among: the picks are dropped, not silently reused.
    nw.tune_network(mod, work_dir=str(work), trials_per_task=3, memory_bound=False, progress=False)
    assert not (work / "in_network").exists()
    assert cli.main(["tune-model", str(tmp_path / "missing.onnx")]) == 2
    assert "missing.onnx" in capsys.readouterr().err
    assert cli.main(["tune-model", "micro_resnet", "--work-dir", str(tmp_path / "bad"), "--sampler-option", "depth=3"]) == 2
    assert "no option(s) ['depth']" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["random", "model"])
def test_ttile_policy_inside_tune_relax(small_catalog, host, tmp_path, strategy):
    """A TVM user hands the tvm_ttile search to tune_relax (default space), with either strategy (the README's
    example passes network.NETWORK_STRATEGY); tasks that are not conv2d/matmul go to MetaSchedule's evolutionary
    search inside the same plug-in."""
    from tvm.s_tir import meta_schedule as ms

    from tvm_ttile import network as nw
    from tvm_ttile.lowering import SCHEME_ANNOTATION
    from tvm_ttile.measure import PooledBuilder, build_module
    from tvm_ttile.metaschedule import TTileSearch, TTileSpaceGenerator, prepare_logging
    from tvm_ttile.models.importers import load_model

    net = load_model("micro_resnet")
    mod = nw.prepare(net.mod)
    target = host.target(1)
    prepare_logging()
    n_tasks = len(nw.extract_tasks(mod, cpu=host))
    db = ms.relax_integration.tune_relax(
        nw.fuse(mod, target), None, target, str(tmp_path), max_trials_global=2 * n_tasks, max_trials_per_task=2,
        num_trials_per_iter=2, strategy=TTileSearch(seed=0, strategy=strategy, strategy_options={"pool": 100}
                                                    if strategy == "model" else None),
        builder=PooledBuilder(f_build=build_module), cost_model="random", task_scheduler="round-robin")
    records = db.get_all_tuning_records()
    ttile = [r for r in records if SCHEME_ANNOTATION in str(r.trace)]
    assert ttile and len(ttile) < len(records)  # both policies produced records
    with pytest.raises(Exception, match="post-order-apply"):  # the tvm_ttile space cannot serve other tasks
        ms.relax_integration.tune_relax(
            nw.fuse(mod, target), None, target, str(tmp_path / "x"), max_trials_global=2, op_names=["mean"],
            space=TTileSpaceGenerator(), strategy=TTileSearch(seed=0), cost_model="random")
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    got = nw.run(nw.build_network(mod, db, cpu=host), x)
    ref = nw.run(nw.build_network(mod, None, cpu=host), x)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3 * float(np.max(np.abs(ref))))


@pytest.mark.slow
def test_dense_layers_tuned_by_automcl_inside_a_network(host, tmp_path):
    """dense="automcl": every dense shape is tuned by AutoMCL (verified against numpy), the network calls the
    tuned kernels (epilogues left as elementwise tasks), the build matches the untuned one, and a rerun resumes."""
    from tvm_ttile import network as nw
    from tvm_ttile.automcl.network import apply_dense, dense_shapes
    from tvm_ttile.errors import TTileError
    from tvm_ttile.models.importers import load_model

    net = load_model("mlp", input_shape=(2, 784))
    mod = nw.prepare(net.mod)
    assert dense_shapes(mod) == {(2, 784, 2048): 1, (2, 2048, 2048): 1, (2, 2048, 10): 1}
    work = str(tmp_path / "mlp")
    res = nw.tune_network(mod, cpu=host, work_dir=work, trials_per_task=6, memory_bound=False, progress=False, dense="automcl")
    dense = [t for t in res.tasks if t.policy == "automcl"]
    assert len(dense) == 3 and all(t.verified and t.gflops > 0 and t.trials == 6 for t in dense)
    assert not [t for t in res.tasks if "matmul" in t.name]  # no matmul left for the other policies
    rewritten, count = apply_dense(mod, work)
    assert count == 3 and "automcl_dense_2x2048x2048" in [gv.name_hint for gv in rewritten.functions]
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    got = nw.run(nw.build_network(mod, work, cpu=host), x)
    ref = nw.run(nw.build_network(mod, None, cpu=host), x)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3 * float(np.max(np.abs(ref))))
    again = nw.tune_network(mod, cpu=host, work_dir=work, trials_per_task=6, memory_bound=False, progress=False, dense="automcl")
    assert [t.tuning_seconds for t in again.tasks if t.policy == "automcl"] == [t.tuning_seconds for t in dense]
    with pytest.raises(TTileError, match="dense-layer policy 'blas'"):
        nw.tune_network(mod, cpu=host, work_dir=work, dense="blas")


@pytest.mark.slow
def test_tune_model_at_two_threads_tunes_every_task_with_parallel_schemes(small_catalog, tmp_path, capsys):
    from tvm_ttile import cli

    work = tmp_path / "micro2"
    args = ["tune-model", "micro_resnet", "--threads", "2", "--trials-per-task", "2", "--memory-bound", "off",
            "--work-dir", str(work), "--libraries", "onnxruntime", "--json"]
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["threads"] == 2 and report["correct"]
    assert report["cache_flush"]  # candidates are timed with flushed caches (network.COLD_SETTINGS)
    tuned = [t for t in report["tasks"] if t["policy"] == "tvm_ttile"]
    assert tuned and all(t["trials"] == 2 and t["verified"] for t in tuned)
    for i, t in enumerate(report["tasks"]):
        if t["policy"] == "tvm_ttile":
            with open(work / "tasks" / f"{i:02d}-{t['name']}" / "ttile_trials.jsonl") as f:
                drawn = [e for e in map(json.loads, f) if e["scheme"]]
            assert all(not e["error"] for e in drawn)
            assert all(Scheme.parse(e["scheme"]).parallel_levels for e in drawn)
    # the same work dir at another thread count is refused, in one line
    assert cli.main(["tune-model", "micro_resnet", "--work-dir", str(work), "--trials-per-task", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "threads" in err[0] and "differ" in err[0]


def test_a_network_whose_tasks_all_fail_is_an_error(small_catalog, tmp_path, monkeypatch):
    from tvm_ttile import network as nw
    from tvm_ttile.errors import TTileError
    from tvm_ttile.metaschedule import search
    from tvm_ttile.models.importers import load_model

    def broken(*args, **kwargs):
        raise RuntimeError("ScheduleError: a lowering that always fails")

    monkeypatch.setattr(search, "lower", broken)
    mod = nw.prepare(load_model("micro_resnet").mod)
    with pytest.raises(TTileError, match="every conv2d/matmul task failed"):
        nw.tune_network(mod, work_dir=str(tmp_path / "w"), trials_per_task=2, memory_bound=False, progress=False)


def test_network_tasks_measure_no_in_place_variants_unless_asked():
    """Network tuning turns every strategy's in-place variants off (they cost Darknet-19 7-12% end to end); a
    caller's option wins."""
    from tvm_ttile.network import network_strategy_options
    from tvm_ttile.strategies import STRATEGIES, make_strategy

    assert network_strategy_options() == {"in_place_variants": 0.0, "pool": 1000}  # (the model strategy's pool)
    assert network_strategy_options({"in_place_variants": 0.2}) == {"in_place_variants": 0.2, "pool": 1000}
    assert network_strategy_options({"pool": 100}) == {"in_place_variants": 0.0, "pool": 100}
    assert network_strategy_options(strategy="random") == {"in_place_variants": 0.0}
    for name in STRATEGIES:
        assert make_strategy(name, **network_strategy_options(strategy=name)).options["in_place_variants"] == 0.0


def test_tune_model_names_an_unknown_cache_state(tmp_path):
    from tvm_ttile.network.model import tune_model
    from tvm_ttile.errors import TTileError

    with pytest.raises(TTileError, match=r"cache_flush='cold': one of 'on', 'weights', 'off'"):
        tune_model("micro_resnet", work_dir=str(tmp_path / "w"), cache_flush="cold")
    assert not (tmp_path / "w").exists()  # refused before anything was loaded or tuned


def test_search_and_comparison_values_refuse_bad_options_in_one_line(tmp_path):
    """NetworkSearch and Comparisons are checked when made; tune_model and tune_network take them whole or field by
    field, and name an option they do not know before doing any work."""
    from tvm_ttile.errors import TTileError
    from tvm_ttile.network import tune_network
    from tvm_ttile.network.model import tune_model
    from tvm_ttile.network.search import Comparisons, NetworkSearch, take

    for bad in ({"trials_per_task": -1}, {"other_trials": 1.5}, {"in_network_top": True}):
        with pytest.raises(TTileError, match=next(iter(bad))):
            NetworkSearch(**bad)
    with pytest.raises(TTileError, match="unknown libraries numpy"):
        Comparisons(libraries=("numpy",))
    with pytest.raises(TTileError, match="metaschedule_trials"):
        Comparisons(metaschedule_trials="all")
    search = NetworkSearch(sampler_options={"min_reuse": 8})
    assert take(NetworkSearch, search, {"trials_per_task": 3, "threads": 2}).trials_per_task == 3
    assert dict(take(NetworkSearch, search, {"trials_per_task": None}).sampler_options) == {"min_reuse": 8}
    with pytest.raises(TypeError):  # frozen, its options too
        search.sampler_options["min_reuse"] = 1
    with pytest.raises(TTileError, match=r"tune_model\(\) got unknown option\(s\) trails_per_task"):
        tune_model("micro_resnet", work_dir=str(tmp_path / "m"), trails_per_task=4)
    with pytest.raises(TTileError, match=r"tune_network\(\) got unknown option\(s\) libraries"):
        tune_network(None, work_dir=str(tmp_path / "n"), libraries=("torch",))
    assert not (tmp_path / "m").exists() and not (tmp_path / "n").exists()


def test_a_task_check_allows_a_requantized_output_one_step_and_no_more():
    """verify_against_untuned: an 8-bit output one step off (an fp32 rescale rounded at a tie) passes, two steps
    fail, and the difference is counted in real numbers (u8 158 against 159 is 1, not 255); the same for a float
    output of whole numbers (a requantized value kept in fp32)."""
    import tvm
    from tvm import te

    from tvm_ttile.network.build import verify_against_untuned

    def shifted(step, dtype="uint8"):
        x = te.placeholder((64,), dtype, name="x")
        y = te.compute((64,), lambda i: tvm.te.min(x[i], tvm.tirx.const(100, dtype)) + tvm.tirx.const(step, dtype))
        return tvm.IRModule({"main": te.create_prim_func([x, y])})

    target = tvm.target.Target("llvm")
    assert verify_against_untuned(shifted(1), shifted(0), target) == (True, 1.0)
    assert verify_against_untuned(shifted(2), shifted(0), target) == (False, 2.0)
    assert verify_against_untuned(shifted(1, "int32"), shifted(0, "int32"), target)[0] is False  # exact for s32

    def rounded(step):  # a requantized value the next layer reads in fp32: whole numbers in a float buffer
        x = te.placeholder((64,), "float32", name="x")
        y = te.compute((64,), lambda i: tvm.te.round(x[i] * 100.0) + tvm.tirx.const(step, "float32"))
        return tvm.IRModule({"main": te.create_prim_func([x, y])})

    assert verify_against_untuned(rounded(1), rounded(0), target) == (True, 1.0)
    assert verify_against_untuned(rounded(2), rounded(0), target)[0] is False


def test_an_engine_computing_in_bf16_is_reported_beside_an_fp32_build_not_held_to():
    """OpenVINO's default on an AVX512_BF16 CPU computes float layers in bf16: an fp32 build's check reports its
    distance but does not fail on it; an engine in fp32 as far away fails the check."""
    import types

    from tvm_ttile.baselines.engines import reduced_float_precision
    from tvm_ttile.network.model import accuracy

    assert reduced_float_precision("openvino 2026.4.1 (float layers in <Type: 'bfloat16'>)")
    assert not reduced_float_precision("openvino 2026.4.1 (float layers in <Type: 'float32'>)")
    assert not reduced_float_precision("onnxruntime 1.32.0")
    ref = np.linspace(-1, 1, 100, dtype=np.float32)
    outputs = {"untuned": ref, "tvm_ttile": ref + 1e-6, "onnxruntime": ref, "openvino": ref + 1e-2}
    tuned = types.SimpleNamespace(tasks=[])
    held = accuracy(outputs, tuned, beside={"openvino"})
    assert held["correct"] and "openvino" not in held["held_to"], held
    assert not accuracy(outputs, tuned)["correct"]


def test_an_output_that_does_not_vary_is_not_called_correct():
    """ViT-B/16 as torchvision initializes it has a classifier head of zeros: every engine's output is 0 and
    agrees with every other, which checks nothing."""
    import types

    from tvm_ttile.network.model import accuracy

    zeros = np.zeros(10, np.float32)
    res = accuracy({"untuned": zeros, "tvm_ttile": zeros, "onnxruntime": zeros}, types.SimpleNamespace(tasks=[]))
    assert res["constant_output"] and not res["correct"]


def test_the_fp32_reference_of_a_reduced_precision_build_is_onnxruntime_where_it_runs_the_model():
    """An untuned TVM build of ViT-B/16 takes tens of seconds an inference; ONNX Runtime runs the same fp32 model in
    a fraction of one. The result names its reference."""
    pytest.importorskip("onnxruntime")
    from tvm_ttile import network as nw
    from tvm_ttile.context import resolve
    from tvm_ttile.models.importers import load_model
    from tvm_ttile.network.model import fp32_agreement

    net = load_model("micro_resnet")
    ctx = resolve(None)
    vm = nw.build_network(nw.prepare(net.mod), None, ctx)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    res = fp32_agreement(net, net, ctx, vm, x, ())
    assert res["reference"] == "onnxruntime fp32"
    ours = res["systems"]["tvm_ttile"]
    assert ours["top1_agreement"] == 1.0 and ours["max_error_over_scale"] < 1e-4


def test_a_quantized_output_is_held_to_onnx_runtime_for_a_share_of_its_elements_and_to_its_build_exactly():
    """Rounding to a step at each layer may put a few output elements of a deep network two steps from ONNX
    Runtime's: 99.9% within one step agree; 1% two steps off does not; the untuned build stays within one."""
    import types

    from tvm_ttile.network.model import accuracy

    step = 0.5
    ref = np.linspace(-100, 100, 2000).astype(np.float32)
    tuned = types.SimpleNamespace(tasks=[])
    few, many = ref.copy(), ref.copy()
    few[7] += 2 * step
    many[:20] += 2 * step
    assert accuracy({"untuned": few, "tvm_ttile": few, "onnxruntime": ref}, tuned, step)["correct"]
    assert not accuracy({"untuned": many, "tvm_ttile": many, "onnxruntime": ref}, tuned, step)["correct"]
    assert not accuracy({"untuned": ref, "tvm_ttile": few, "onnxruntime": ref}, tuned, step)["correct"]
