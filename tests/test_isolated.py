"""Whole-network timing in processes of their own (tvm_ttile.isolated): a build and ONNX Runtime are saved,
timed in fresh processes, and a process that fails is one error naming the system."""
import numpy as np
import pytest


def test_a_build_and_onnx_runtime_are_timed_each_in_its_own_process(tmp_path):
    from tvm_ttile import network as nw
    from tvm_ttile.isolated import IsolatedTimer, Saved
    from tvm_ttile.models.importers import load_model

    net = load_model("tiny_resnet")
    mod = nw.prepare(net.mod)
    ex = nw.build_executable(mod, None)
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    timer = IsolatedTimer(x, 1, str(tmp_path))
    timer.add("untuned", Saved.tvm(ex, str(tmp_path), "untuned"))
    timer.add("onnxruntime", Saved.onnx(net.onnx_model, net.input_name, str(tmp_path)))
    latencies = timer.run(rounds=2, repeats=3)
    assert {k: len(v) for k, v in latencies.items()} == {"untuned": 6, "onnxruntime": 6}
    assert all(ms > 0 for v in latencies.values() for ms in v)
    assert nw.run(nw.vm_of(ex), x).shape == (1, 10)  # the saved executable is the one that ran here


def test_a_system_that_cannot_be_timed_is_one_error_naming_it(tmp_path):
    from tvm_ttile.errors import TTileError
    from tvm_ttile.isolated import IsolatedTimer, Saved

    timer = IsolatedTimer(np.zeros((1, 3, 8, 8), np.float32), 1, str(tmp_path))
    timer.add("broken", Saved("tvm", str(tmp_path / "missing.so")))
    with pytest.raises(TTileError, match=r"^timing broken in its own process failed \(exit code 1\): .+"):
        timer.run(rounds=1)


def test_an_environment_given_to_one_system_reaches_its_processes_only(tmp_path):
    from tvm_ttile.errors import TTileError
    from tvm_ttile.isolated import IsolatedTimer, Saved

    timer = IsolatedTimer(np.zeros((1, 3, 8, 8), np.float32), 1, str(tmp_path))
    timer.add("plain", Saved("tvm", str(tmp_path / "missing.so")))
    timer.add("no python", Saved("tvm", str(tmp_path / "missing.so")), env={"PYTHONHOME": str(tmp_path / "none")})
    with pytest.raises(TTileError, match=r"^timing plain in its own process failed \(exit code 1\): .+missing"):
        timer._time("plain", timer.systems["plain"], 1)
    with pytest.raises(TTileError, match=r"^timing no python in its own process failed") as e:
        timer._time("no python", timer.systems["no python"], 1)
    assert "missing" not in str(e.value)  # the interpreter did not start: the variable reached that process


def test_a_torch_module_is_exported_and_timed_in_its_own_process(tmp_path):
    pytest.importorskip("torch")
    from tvm_ttile.isolated import IsolatedTimer, Saved
    from tvm_ttile.models import zoo

    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    timer = IsolatedTimer(x, 1, str(tmp_path))
    timer.add("torch", Saved.torch(zoo.to_torch("tiny_resnet"), x, str(tmp_path)))
    assert len(timer.run(rounds=1, repeats=2)["torch"]) == 2


@pytest.fixture(scope="module")
def tiny_network():
    """tiny_resnet, an input, and its untuned TVM build's output: built once for every engine."""
    from tvm_ttile import network as nw
    from tvm_ttile.models.importers import load_model

    net = load_model("tiny_resnet")
    x = np.random.default_rng(0).standard_normal(net.input_shape).astype(np.float32)
    return net, x, nw.run(nw.vm_of(nw.build_executable(nw.prepare(net.mod), None)), x)


@pytest.mark.parametrize("name", ["onnxruntime", "openvino", "openvino-fp32", "torch"])
def test_every_engine_runs_its_saved_model_like_the_build_and_is_timed_in_its_own_process(name, tmp_path,
                                                                                          tiny_network):
    """The engines' conformance: each saves a network in its form, opens the saved file into one inference that
    agrees with TVM's untuned build, and is timed from that file in a process of its own."""
    from tvm_ttile.baselines.engines import create
    from tvm_ttile.isolated import IsolatedTimer, Saved

    engine = create(name)
    pytest.importorskip(engine.module)
    net, x, ref = tiny_network
    saved = Saved.library(name, net, x, str(tmp_path))
    run, version = engine.open(saved.path, saved.input_name, x, threads=1)
    # OpenVINO's default on an AVX512_BF16 CPU is bf16 (its version says so): 8 significant bits per product
    tolerance = 3e-2 if "bfloat16" in version else 1e-3
    assert version and np.abs(run() - ref).max() <= tolerance * np.abs(ref).max()
    timer = IsolatedTimer(x, 1, str(tmp_path))
    timer.add(name, saved)
    assert len(timer.run(rounds=1, repeats=2)[name]) == 2


def test_an_unknown_engine_is_one_line_naming_the_known_ones():
    from tvm_ttile.baselines.engines import create
    from tvm_ttile.errors import TTileError

    with pytest.raises(TTileError, match=r"^unknown library 'tensorrt'; choose from onnxruntime, openvino"):
        create("tensorrt")
