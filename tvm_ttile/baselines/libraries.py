"""Library references, measured in this process with the same thread count: oneDNN through PyTorch's CPU
build and ONNX Runtime's CPU kernels (optional extras) for conv2d and conv1d (grouped too), depthwise 2-d and
1-d and matmul, ONNX Runtime and numpy's BLAS for batch matmul, numpy for matmul. Weights are the libraries'
constants (packed at set-up, as in a network); a batch matmul's second operand is one only when the operator
says so (prepack), otherwise an input as in attention. Each output is checked against the operator's numpy
reference before its time is reported."""
from __future__ import annotations

import statistics
import time

import numpy as np


def _repeats(fn, repeat=5, seconds_each=0.04) -> list:
    """Seconds per call in each of `repeat` repeats, each calling `fn` for at least `seconds_each`."""
    fn()  # warm-up
    runs = []
    for _ in range(repeat):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            el = time.perf_counter() - t0
            if el >= seconds_each:
                break
        runs.append(el / n)
    return runs


def _time(fn, min_seconds=0.2, repeat=5):
    return statistics.median(_repeats(fn, repeat, min_seconds / repeat))


def numpy_matmul(op, threads=1):
    from threadpoolctl import threadpool_limits

    a, b = op.random_inputs()
    bb = b.T if op.dense else b
    with threadpool_limits(limits=threads):
        out = a @ bb
        secs = _time(lambda: a @ bb)
    return out, secs, "numpy " + np.__version__


def onednn_conv2d(op, threads=1):
    import torch

    torch.set_num_threads(threads)
    x, w = op.random_inputs()
    xt = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    wt = torch.from_numpy(w).permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # K (C/groups) RS

    top, left, bottom, right = op.pads
    F = torch.nn.functional
    if (top, left) == (bottom, right):  # symmetric per axis: the convolution pads
        conv = lambda x: F.conv2d(x, wt, stride=op.stride, padding=(top, left), dilation=op.dilation,  # noqa: E731
                                  groups=op.groups)
    else:  # torch's convolution pads both sides alike: an explicit pad first, timed with it
        conv = lambda x: F.conv2d(F.pad(x, (left, right, top, bottom)), wt, stride=op.stride,  # noqa: E731
                                  dilation=op.dilation, groups=op.groups)

    def run():
        with torch.no_grad():
            return conv(xt)

    out = run().permute(0, 2, 3, 1).contiguous().numpy()
    return out, _time(run), f"torch {torch.__version__} (oneDNN)"


def onnxruntime_conv2d(op, threads=1):
    from onnx import helper

    x, w = op.random_inputs()
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[op.stride] * 2, pads=list(op.pads),  # t, l, b, r
                            dilations=[op.dilation] * 2, group=op.groups)
    xn = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    run, version = _onnxruntime_node(node, xn, np.ascontiguousarray(w.transpose(3, 2, 0, 1)), threads)  # KCRS
    return run().transpose(0, 2, 3, 1), _time(run), version


def _conv1d_weights(op, w):
    """A 1-d operator's weights in torch's and ONNX's layout, K x C/groups x S, and its groups (a depthwise
    one's [S, C]: C x 1 x S, groups = C)."""
    if w.ndim == 2:
        return np.ascontiguousarray(w.T[:, None, :]), op.C
    return np.ascontiguousarray(w.transpose(2, 1, 0)), op.groups


def onednn_conv1d(op, threads=1):
    """torch's conv1d (oneDNN) on NCW data, the layout torch keeps 1-d activations in (grouped and depthwise
    too)."""
    import torch

    torch.set_num_threads(threads)
    x, w = op.random_inputs()
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 1)))  # NCW
    w, groups = _conv1d_weights(op, w)
    wt = torch.from_numpy(w)
    left, right = op.pads
    F = torch.nn.functional
    pad = (lambda x: x) if left == right else (lambda x: F.pad(x, (left, right)))  # noqa: E731 - timed with it

    def run():
        with torch.no_grad():
            return F.conv1d(pad(xt), wt, stride=op.stride, padding=left if left == right else 0, dilation=op.dilation,
                            groups=groups)

    out = run().permute(0, 2, 1).contiguous().numpy()
    return out, _time(run), f"torch {torch.__version__} (oneDNN)"


def onnxruntime_conv1d(op, threads=1):
    """ONNX's Conv on NCW data (grouped and depthwise too)."""
    from onnx import helper

    x, w = op.random_inputs()
    w, groups = _conv1d_weights(op, w)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[op.stride], pads=list(op.pads),  # left, right
                            dilations=[op.dilation], group=groups)
    xn = np.ascontiguousarray(x.transpose(0, 2, 1))
    run, version = _onnxruntime_node(node, xn, w, threads)
    return run().transpose(0, 2, 1), _time(run), version


def onednn_depthwise(op, threads=1):
    """A convolution with groups = C (torch's depthwise), channels-last as onednn_conv2d."""
    import torch

    torch.set_num_threads(threads)
    x, w = op.random_inputs()
    xt = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)
    wt = torch.from_numpy(w).permute(2, 0, 1).unsqueeze(1).contiguous(memory_format=torch.channels_last)  # C1RS
    top, left, bottom, right = op.pads
    F = torch.nn.functional

    def run():
        with torch.no_grad():
            return F.conv2d(F.pad(xt, (left, right, top, bottom)), wt, stride=op.stride, dilation=op.dilation,
                            groups=op.C)

    out = run().permute(0, 2, 3, 1).contiguous().numpy()
    return out, _time(run), f"torch {torch.__version__} (oneDNN)"


def onnxruntime_depthwise(op, threads=1):
    from onnx import helper

    x, w = op.random_inputs()
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[op.stride] * 2, pads=list(op.pads),
                            dilations=[op.dilation] * 2, group=op.C)
    xn = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    run, version = _onnxruntime_node(node, xn, np.ascontiguousarray(w.transpose(2, 0, 1)[:, None]), threads)  # C1RS
    return run().transpose(0, 2, 3, 1), _time(run), version


def _onnxruntime_node(node, x, weights, threads, constant=True):
    """(run, version): one ONNX node (or a list of nodes ending in the one writing "y") on input "x" = `x` with
    its weights "w" as an initializer (a constant ONNX Runtime may prepack), or with `constant` False as a second
    input fed at each run, in a session of `threads` threads."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape)
              for n, v in (("x", x),) + ((() if constant else (("w", weights),)))]
    nodes = node if isinstance(node, list) else [node]
    graph = helper.make_graph(nodes, nodes[-1].op_type, inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("w", TensorProto.FLOAT, weights.shape, weights.flatten())]
                              if constant else [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {"x": x} if constant else {"x": x, "w": weights}
    return (lambda: sess.run(None, feed)[0]), f"onnxruntime {ort.__version__}, onnx {onnx.__version__}"


def onednn_matmul(op, threads=1):
    """oneDNN's inner product (torch.utils.mkldnn's Linear) on operands already in oneDNN's layout, as between
    the layers of a oneDNN network; torch.matmul would call MKL's BLAS instead."""
    import torch
    from torch.utils import mkldnn

    torch.set_num_threads(threads)
    a, b = op.random_inputs()
    linear = torch.nn.Linear(op.K, op.N, bias=False)
    with torch.no_grad():
        linear.weight.copy_(torch.from_numpy(b if op.dense else np.ascontiguousarray(b.T)))  # [N, K]
    linear = mkldnn.to_mkldnn(linear)
    x = torch.from_numpy(a).to_mkldnn()

    def run():
        with torch.no_grad():
            return linear(x)

    out = run().to_dense().numpy()
    return out, _time(run), f"torch {torch.__version__} (oneDNN inner product)"


def onnxruntime_matmul(op, threads=1):
    from onnx import helper

    a, b = op.random_inputs()
    run, version = _onnxruntime_node(helper.make_node("MatMul", ["x", "w"], ["y"]), a,
                                     np.ascontiguousarray(b.T if op.dense else b), threads)  # [K, N]
    return run(), _time(run), version


def numpy_batch_matmul(op, threads=1):
    """np.matmul on the operands as stored: a transposed one is a strided view, which numpy hands to BLAS with
    its transpose flag (no copy)."""
    from threadpoolctl import threadpool_limits

    a, b = op.random_inputs()
    a = np.swapaxes(a, 1, 2) if op.layout == "tn" else a
    b = np.swapaxes(b, 1, 2) if op.layout == "nt" else b
    with threadpool_limits(limits=threads):
        out = np.matmul(a, b)
        secs = _time(lambda: np.matmul(a, b))
    return out, secs, "numpy " + np.__version__


def onnxruntime_batch_matmul(op, threads=1):
    """MatMul on the operands as stored, a transposed one through a Transpose node, as a model exports it (ONNX
    Runtime's graph optimizer folds it into its FusedMatMul)."""
    from onnx import helper

    a, b = op.random_inputs()
    nodes, x, w = [], "x", "w"
    if op.layout == "tn":
        nodes, x = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1])], "xt"
    if op.layout == "nt":
        nodes, w = [helper.make_node("Transpose", ["w"], ["wt"], perm=[0, 2, 1])], "wt"
    run, version = _onnxruntime_node(nodes + [helper.make_node("MatMul", [x, w], ["y"])], a, b, threads,
                                     constant=op.prepack)
    return run(), _time(run), version


# Per library, the operators it times (by class name).
def onnxruntime_qmatmul(op, threads=1):
    """ONNX Runtime's MatMulInteger (u8 x s8 -> s32, zero points 0) with the weights an initializer, as a QDQ
    model's quantized MatMul holds them."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    a, w = op.random_inputs()
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["x", "w"], ["y"])], "qmatmul",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, a.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        initializer=[helper.make_tensor("w", TensorProto.INT8, w.shape, w.flatten())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    run = lambda: sess.run(None, {"x": a})[0]  # noqa: E731
    return run(), _time(run), f"onnxruntime {ort.__version__}, onnx {onnx.__version__}"


def onnxruntime_qconv2d(op, threads=1):
    """ONNX Runtime's int8 convolution as a QDQ model runs it: QLinearConv (u8 x s8, the layer's input zero point,
    weights an initializer, requantized to u8), the one timed. Its u8 output must be within one step of the exact
    convolution requantized the same way, else TTileError. The returned result is ConvInteger's on the same data
    (sum (x - zero point) x w, s32) plus the compensation term (zero point x each output channel's weight sum):
    what tvm_ttile's int8 conv2d computes, checked against the same exact reference."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from ..errors import TTileError

    x, w = op.random_inputs()
    xn, wn = np.ascontiguousarray(x.transpose(0, 3, 1, 2)), np.ascontiguousarray(w.transpose(3, 2, 0, 1))  # KCRS
    compensation = op.input_zero * w.astype(np.int64).sum(axis=(0, 1, 2))
    acc = op.reference(x, w).astype(np.int64) - compensation  # the real-valued product, x and w of scale 1
    y_scale = max(float(acc.max() - acc.min()), 1.0) / 255
    y_zero = int(np.clip(np.round(-acc.min() / y_scale), 0, 255))
    geometry = dict(strides=[op.stride] * 2, pads=list(op.pads), dilations=[op.dilation] * 2)
    scalars = [helper.make_tensor("xs", TensorProto.FLOAT, [], [1.0]),
               helper.make_tensor("xz", TensorProto.UINT8, [], [op.input_zero]),
               helper.make_tensor("ws", TensorProto.FLOAT, [], [1.0]),
               helper.make_tensor("wz", TensorProto.INT8, [], [0]),
               helper.make_tensor("ys", TensorProto.FLOAT, [], [y_scale]),
               helper.make_tensor("yz", TensorProto.UINT8, [], [y_zero])]
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1

    def session(node, out_type):
        graph = helper.make_graph(
            [node], "qconv2d", [helper.make_tensor_value_info("x", TensorProto.UINT8, xn.shape)],
            [helper.make_tensor_value_info("y", out_type, None)],
            initializer=[helper.make_tensor("w", TensorProto.INT8, wn.shape, wn.flatten()),
                         *(t for t in scalars if t.name in node.input)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
        return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])

    linear = session(helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                                      **geometry), TensorProto.UINT8)
    run = lambda: linear.run(None, {"x": xn})[0]  # noqa: E731
    expected = np.clip(np.round(acc / y_scale) + y_zero, 0, 255).transpose(0, 3, 1, 2)
    off = np.abs(run().astype(np.int64) - expected).max()
    if off > 1:
        raise TTileError(f"ONNX Runtime's QLinearConv is {off} steps from the exact convolution requantized")
    integer = session(helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], **geometry), TensorProto.INT32)
    result = (integer.run(None, {"x": xn})[0].transpose(0, 2, 3, 1) + compensation).astype(np.int32)
    return (result, _time(run), f"onnxruntime {ort.__version__} QLinearConv (u8 output, within 1 step; result "
                                f"checked through ConvInteger), onnx {onnx.__version__}")


LIBRARIES = {"onednn": {"Conv2d": onednn_conv2d, "Matmul": onednn_matmul, "Depthwise": onednn_depthwise,
                        "Conv1d": onednn_conv1d, "Depthwise1d": onednn_conv1d},
             "onnxruntime": {"Conv2d": onnxruntime_conv2d, "Matmul": onnxruntime_matmul,
                             "Depthwise": onnxruntime_depthwise, "BatchMatmul": onnxruntime_batch_matmul,
                             "Conv1d": onnxruntime_conv1d, "Depthwise1d": onnxruntime_conv1d,
                             "QMatmul": onnxruntime_qmatmul, "QConv2d": onnxruntime_qconv2d},
             "numpy": {"Matmul": numpy_matmul, "BatchMatmul": numpy_batch_matmul}}
# The precision each reference computes, fp32 unless listed: a QMatmul / QConv2d of another precision (bf16) has
# none here, rather than being run through an int8 kernel.
REFERENCE_PRECISION = {onnxruntime_qmatmul: "int8", onnxruntime_qconv2d: "int8"}


def reference_for(library: str, operator):
    """`library`'s function timing `operator` at its precision, or None."""
    fn = LIBRARIES[library].get(type(operator).__name__)
    return fn if fn is not None and REFERENCE_PRECISION.get(fn, "fp32") == operator.precision else None
