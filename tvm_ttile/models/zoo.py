"""Built-in networks with random weights (no downloads), each defined once against a small builder interface and
emitted as an ONNX model (always) or a torch.nn.Module (when torch is installed) with the same weights.

Batch norm is folded into the convolutions' bias, as inference engines do.
"""
from __future__ import annotations

import numpy as np

from ..errors import TTileError


def resnet18(b, x):
    """ResNet-18 (He et al. 2016), 224x224 input, 1000 classes."""
    x = b.conv(x, 64, 7, stride=2, pad=3, act="relu")
    x = b.maxpool(x, 3, stride=2, pad=1)
    for stage, k in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and not block else 1
            y = b.conv(x, k, 3, stride=stride, pad=1, act="relu")
            y = b.conv(y, k, 3, pad=1)
            skip = b.conv(x, k, 1, stride=stride) if stride != 1 else x
            x = b.relu(b.add(y, skip))
    return b.dense(b.global_avgpool(x), 1000)


def darknet19(b, x):
    """The Yolo9000 backbone (Darknet-19's 18 convolutions, layers 0-22 of Yolo9000), leaky ReLU 0.1."""
    plan = [[32], [64], [128, 64, 128], [256, 128, 256], [512, 256, 512, 256, 512], [1024, 512, 1024, 512, 1024]]
    for stage, widths in enumerate(plan):
        if stage:
            x = b.maxpool(x, 2, stride=2)
        for i, k in enumerate(widths):
            x = b.conv(x, k, 1 if i % 2 else 3, pad=0 if i % 2 else 1, act="leaky")
    return x


def tiny_resnet(b, x):
    """A two-block residual net on 32x32 inputs: seconds to tune, for tests and first tries."""
    x = b.conv(x, 16, 3, pad=1, act="relu")
    y = b.conv(b.conv(x, 16, 3, pad=1, act="relu"), 16, 3, pad=1)
    x = b.relu(b.add(y, x))
    y = b.conv(b.conv(x, 32, 3, stride=2, pad=1, act="relu"), 32, 3, pad=1)
    x = b.relu(b.add(y, b.conv(x, 32, 1, stride=2)))
    return b.dense(b.global_avgpool(x), 10)


def micro_resnet(b, x):
    """One residual block on 16x16 inputs: the smallest network with a stem, two tasks sharing one convolution
    (another epilogue each), pooling and a dense head; for tests."""
    x = b.conv(x, 16, 3, pad=1, act="relu")
    y = b.conv(b.conv(x, 16, 3, pad=1, act="relu"), 16, 3, pad=1)
    x = b.relu(b.add(y, x))
    return b.dense(b.global_avgpool(x), 10)


def mobilenet_v2(b, x):
    """MobileNet-v2 (Sandler et al. 2018), width 1.0, 224x224 input: inverted residual blocks of a 1x1 expansion,
    a 3x3 depthwise convolution and a linear 1x1 projection, ReLU6."""
    x = b.conv(x, 32, 3, stride=2, pad=1, act="relu6")
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            y = b.conv(x, b.channels(x) * t, 1, act="relu6") if t != 1 else x
            y = b.conv(y, b.channels(y), 3, stride=stride, pad=1, act="relu6", groups=b.channels(y))
            y = b.conv(y, c, 1)
            x = b.add(y, x) if stride == 1 and b.channels(x) == c else y
    x = b.conv(x, 1280, 1, act="relu6")
    return b.dense(b.global_avgpool(x), 1000)


def dcgan(b, x):
    """DCGAN's generator (Radford et al. 2016) from its projected latent (4x4, 512 channels here, as Ansor's T2D
    set): four transposed convolutions of kernel 4, stride 2, pad 1 up to a 64x64 RGB image, ReLU between
    (batch norm folded; the final tanh left out)."""
    for k in (256, 128, 64):
        x = b.conv_transpose(x, k, 4, stride=2, pad=1, act="relu")
    return b.conv_transpose(x, 3, 4, stride=2, pad=1)


def mlp(b, x):
    """A fully connected classifier, 784-2048-2048-10 with ReLU (the kind of network AutoMCL's dense layers
    come from); batch 16 by default."""
    x = b.relu(b.dense(x, 2048))
    x = b.relu(b.dense(x, 2048))
    return b.dense(x, 10)


def transformer(b, x):
    """Two encoder layers at BERT-base's sizes (768 features, 12 heads of 64, a 3072-wide ReLU feed-forward) on a
    sequence of 128 tokens (the input is [tokens, features]): per layer four 768 x 768 dense layers, the attention
    scores Q K^T and context P V as batch matmuls over the heads, a softmax, two feed-forward dense layers and
    the residual adds. Layer norm is left out (ONNX opset 13 has none; it is a small memory-bound step)."""
    for _ in range(2):
        x = b.add(b.attention(x, heads=12), x)
        x = b.add(b.dense(b.relu(b.dense(x, 4 * b.channels(x))), b.channels(x)), x)
    return x


MODELS = {"resnet18": (resnet18, (1, 3, 224, 224)), "darknet19": (darknet19, (1, 3, 544, 544)),
          "tiny_resnet": (tiny_resnet, (1, 3, 32, 32)),
          "micro_resnet": (micro_resnet, (1, 3, 16, 16)), "mlp": (mlp, (16, 784)),
          "mobilenet_v2": (mobilenet_v2, (1, 3, 224, 224)), "transformer": (transformer, (128, 768)),
          "dcgan": (dcgan, (1, 512, 4, 4))}


def get_model(name: str):
    """(definition, NCHW input shape) of a built-in model."""
    if name not in MODELS:
        raise TTileError(f"unknown model {name!r}; built-in models: {', '.join(MODELS)} (or give an .onnx path)")
    return MODELS[name]


class Weights:
    """Deterministic He-scaled random weights, handed out in the order the definition asks for them."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def conv(self, k, c, r):
        w = self.rng.standard_normal((k, c, r, r), dtype=np.float32) * np.float32(np.sqrt(2.0 / (c * r * r)))
        return w, self.rng.standard_normal(k, dtype=np.float32) * np.float32(0.01)

    def dense(self, n, c):
        w = self.rng.standard_normal((n, c), dtype=np.float32) * np.float32(np.sqrt(1.0 / c))
        return w, np.zeros(n, np.float32)


class OnnxBuilder:
    """Emits ONNX nodes (NCHW, opset 13); tensors are (name, channels)."""

    def __init__(self, seed=0):
        self.weights, self.nodes, self.inits, self.count = Weights(seed), [], [], 0
        self.scalars = {}  # shared constants (Clip's bounds): initializers that are not weights

    def _name(self, kind):
        self.count += 1
        return f"{kind}{self.count}"

    def _node(self, op, inputs, channels, **attrs):
        from onnx import helper

        out = self._name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out, channels

    def _const(self, array):
        from onnx import numpy_helper

        name = self._name("w")
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    @staticmethod
    def channels(x) -> int:
        return x[1]

    def conv(self, x, k, r, stride=1, pad=0, act=None, groups=1):
        w, bias = self.weights.conv(k, x[1] // groups, r)
        y = self._node("Conv", [x[0], self._const(w), self._const(bias)], k, kernel_shape=[r, r],
                       strides=[stride] * 2, pads=[pad] * 4, group=groups)
        if act == "relu":
            return self.relu(y)
        if act == "relu6":
            return self._node("Clip", [y[0], self._named("zero", 0.0), self._named("six", 6.0)], k)
        return self._node("LeakyRelu", [y[0]], k, alpha=0.1) if act == "leaky" else y

    def conv_transpose(self, x, k, r, stride=1, pad=0, act=None):
        w, bias = self.weights.conv(k, x[1], r)
        w = np.ascontiguousarray(w.transpose(1, 0, 2, 3))  # ConvTranspose's weights: input channels first
        y = self._node("ConvTranspose", [x[0], self._const(w), self._const(bias)], k, kernel_shape=[r, r],
                       strides=[stride] * 2, pads=[pad] * 4)
        return self.relu(y) if act == "relu" else y

    def _named(self, name, value):
        """A shared scalar constant (not drawn from the weights' random stream)."""
        from onnx import numpy_helper

        self.scalars.setdefault(name, numpy_helper.from_array(np.array(value, np.float32), name))
        return name

    def relu(self, x):
        return self._node("Relu", [x[0]], x[1])

    def add(self, x, y):
        return self._node("Add", [x[0], y[0]], x[1])

    def maxpool(self, x, r, stride, pad=0):
        return self._node("MaxPool", [x[0]], x[1], kernel_shape=[r, r], strides=[stride] * 2, pads=[pad] * 4)

    def global_avgpool(self, x):
        return self._node("Flatten", [self._node("GlobalAveragePool", [x[0]], x[1])[0]], x[1])

    def dense(self, x, n):
        w, bias = self.weights.dense(n, x[1])
        return self._node("Gemm", [x[0], self._const(w), self._const(bias)], n, transB=1)

    def attention(self, x, heads):
        """Multi-head self-attention of a [tokens, features] tensor, as a model exports it: Q, K, V dense
        layers, heads split by Reshape + Transpose, MatMul(Q, K^T) scaled, Softmax, MatMul(P, V), heads merged,
        an output dense layer."""
        from onnx import numpy_helper

        d = x[1]
        split = self.scalars.setdefault(f"heads{heads}x{d // heads}", numpy_helper.from_array(
            np.array([0, heads, d // heads], np.int64), f"heads{heads}x{d // heads}")).name
        merged = self.scalars.setdefault(f"merge{d}", numpy_helper.from_array(np.array([0, d], np.int64),
                                                                              f"merge{d}")).name
        q, k, v = (self._node("Transpose", [self._node("Reshape", [self.dense(x, d)[0], split], d)[0]], d,
                              perm=perm)[0] for perm in ([1, 0, 2], [1, 2, 0], [1, 0, 2]))  # [h, t, e], K: [h, e, t]
        scores = self._node("Mul", [self._node("MatMul", [q, k], d)[0], self._named(f"scale{d // heads}",
                                                                                   1.0 / np.sqrt(d // heads))], d)
        probs = self._node("Softmax", [scores[0]], d, axis=-1)
        context = self._node("Transpose", [self._node("MatMul", [probs[0], v], d)[0]], d, perm=[1, 0, 2])
        return self.dense(self._node("Reshape", [context[0], merged], d), d)


def to_onnx(name: str, seed: int = 0, input_shape=None):
    """The built-in model as an onnx.ModelProto (IR version 9, which ONNX Runtime 1.31 reads)."""
    import onnx
    from onnx import TensorProto, helper

    definition, default_shape = get_model(name)
    shape = tuple(input_shape or default_shape)
    if len(shape) != len(default_shape) or shape[1] != default_shape[1]:
        raise TTileError(f"{name} takes inputs shaped like {list(default_shape)} ({len(default_shape)} dimensions, "
                         f"{default_shape[1]} channels or features); got {list(shape)}")
    b = OnnxBuilder(seed)
    out = definition(b, ("input", shape[1]))
    graph = helper.make_graph(b.nodes, name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(out[0], TensorProto.FLOAT, None)], initializer=b.inits + list(b.scalars.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    return onnx.shape_inference.infer_shapes(model)  # fills in the output's shape


def to_torch(name: str, seed: int = 0):
    """The built-in model as a torch.nn.Module with the same weights as to_onnx(name, seed)."""
    import torch
    import torch.nn.functional as F

    definition, default_shape = get_model(name)

    class TorchBuilder:
        def __init__(self, params):
            self.params, self.i = params, 0

        def _take(self):
            self.i += 2
            return self.params[self.i - 2], self.params[self.i - 1]

        @staticmethod
        def channels(x) -> int:
            return x.shape[1]

        def conv(self, x, k, r, stride=1, pad=0, act=None, groups=1):
            w, bias = self._take()
            y = F.conv2d(x, w, bias, stride=stride, padding=pad, groups=groups)
            if act == "relu6":
                return F.relu6(y)
            return F.relu(y) if act == "relu" else F.leaky_relu(y, 0.1) if act == "leaky" else y

        def conv_transpose(self, x, k, r, stride=1, pad=0, act=None):
            w, bias = self._take()
            y = F.conv_transpose2d(x, w, bias, stride=stride, padding=pad)
            return F.relu(y) if act == "relu" else y

        relu = staticmethod(F.relu)

        def add(self, x, y):
            return x + y

        def maxpool(self, x, r, stride, pad=0):
            return F.max_pool2d(x, r, stride, pad)

        def global_avgpool(self, x):
            return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)

        def dense(self, x, n):
            w, bias = self._take()
            return F.linear(x, w, bias)

        def attention(self, x, heads):
            t, d = x.shape
            q, k, v = (self.dense(x, d).reshape(t, heads, d // heads).transpose(0, 1) for _ in range(3))
            probs = torch.softmax(q @ k.transpose(1, 2) * (1.0 / np.sqrt(d // heads)), dim=-1)
            return self.dense((probs @ v).transpose(0, 1).reshape(t, d), d)

    from onnx import numpy_helper

    b = OnnxBuilder(seed)  # the same random stream as to_onnx: initializers come in definition order
    definition(b, ("input", default_shape[1]))
    arrays = [numpy_helper.to_array(t) for t in b.inits]

    class ZooModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = torch.nn.ParameterList([torch.nn.Parameter(torch.from_numpy(a.copy()), requires_grad=False)
                                                  for a in arrays])

        def forward(self, x):
            return definition(TorchBuilder(list(self.weights)), x)

    return ZooModel().eval()
