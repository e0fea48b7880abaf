"""Vision and recurrent graphs with the structure ``torch.onnx.export`` writes
for torchvision's ResNet, MobileNet-V2 and DenseNet and for ``nn.LSTM``,
built in code with random weights.

What the exporter writes in eval mode, and what these builders copy:

* a BatchNormalization that follows a convolution is folded into it: the
  Conv gets a bias and no BatchNormalization node remains (DenseNet keeps
  the ones that come first in its layers, after a Concat);
* ResNet: stem Conv 7x7/2, Relu, MaxPool 3x3/2 pad 1; bottleneck blocks
  (Conv 1x1, 3x3 with the stride, 1x1 to 4x the width, the projection
  shortcut a strided Conv 1x1), Add, Relu; GlobalAveragePool, Flatten,
  Gemm (``transB=1``);
* MobileNet-V2: ReLU6 is ``Clip`` with min 0 and max 6 as inputs; inverted
  residual blocks (Conv 1x1 expand, Clip, depthwise Conv 3x3 with
  ``group`` = channels, Clip, Conv 1x1 project, Add when the shapes allow);
  Conv 1x1 to 1280, Clip, GlobalAveragePool, Flatten, Gemm;
* DenseNet: every layer concatenates all earlier features (one Concat per
  layer), then BatchNormalization, Relu, Conv 1x1, Relu, Conv 3x3; the
  transitions are BatchNormalization, Relu, Conv 1x1, AveragePool 2x2/2;
* LSTM encoder: per layer one ``LSTM`` node (``direction`` bidirectional,
  initial states sliced from ``h0``/``c0``), its ``Y`` [T, 2, B, H] made
  [T, B, 2H] by Transpose and Reshape for the next layer.

``Config.tiny`` sizes run in the test suite; the real ones (ResNet-50,
MobileNet-V2, DenseNet-121 at 224x224, LSTMs of hidden 128 and 512) in the
benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
IR_VERSION = 10


class _Graph:
    """Nodes and initializers of one graph, names as the exporter writes them."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.constants: dict[str, str] = {}

    def node(self, op_type: str, inputs: list[str], name: str, outputs: int = 1,
             **attrs) -> str | list[str]:
        names = [f"{name}/output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, name=name, **attrs))
        return names[0] if outputs == 1 else names

    def init(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def const(self, value, dtype=np.int64) -> str:
        """An initializer holding a small constant, made once per value."""
        key = f"{np.dtype(dtype).name}:{value}"
        if key not in self.constants:
            self.constants[key] = self.init(f"onnx::const_{len(self.constants)}",
                                            np.array(value, dtype=dtype))
        return self.constants[key]

    def conv(self, name: str, x: str, c_in: int, c_out: int, k: int, stride: int = 1,
             group: int = 1, bias: bool = True) -> str:
        """A Conv with He-scaled random weights (and a folded BatchNorm's bias)."""
        fan_in = c_in // group * k * k
        w = self.rng.standard_normal((c_out, c_in // group, k, k), dtype=np.float32)
        inputs = [x, self.init(f"{name}.weight", w * np.float32(np.sqrt(2.0 / fan_in)))]
        if bias:
            b = self.rng.standard_normal(c_out, dtype=np.float32) * np.float32(0.1)
            inputs.append(self.init(f"{name}.bias", b))
        return self.node("Conv", inputs, f"/{name}/Conv", dilations=[1, 1], group=group,
                         kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride])

    def batch_norm(self, name: str, x: str, c: int) -> str:
        params = [1.0 + 0.1 * self.rng.standard_normal(c), 0.1 * self.rng.standard_normal(c),
                  0.1 * self.rng.standard_normal(c), self.rng.uniform(0.5, 1.5, c)]
        names = [self.init(f"{name}.{p}", v.astype(np.float32)) for p, v in
                 zip(("weight", "bias", "running_mean", "running_var"), params)]
        return self.node("BatchNormalization", [x, *names], f"/{name}/BatchNormalization",
                         epsilon=1e-5, momentum=0.9)

    def relu6(self, name: str, x: str) -> str:
        return self.node("Clip", [x, self.const(0.0, np.float32), self.const(6.0, np.float32)],
                         f"/{name}/Clip")

    def head(self, x: str, c: int, classes: int) -> str:
        """GlobalAveragePool, Flatten, Gemm: the classifier every model ends with."""
        x = self.node("GlobalAveragePool", [x], "/GlobalAveragePool")
        x = self.node("Flatten", [x], "/Flatten", axis=1)
        w = self.rng.standard_normal((classes, c), dtype=np.float32) / np.float32(np.sqrt(c))
        b = np.zeros(classes, dtype=np.float32)
        return self.node("Gemm", [x, self.init("fc.weight", w), self.init("fc.bias", b)],
                         "/fc/Gemm", alpha=1.0, beta=1.0, transB=1)

    def model(self, name: str, inputs: list, output: str, shape: list) -> onnx.ModelProto:
        self.nodes.append(helper.make_node("Identity", [output], ["output"], name="/output"))
        outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)]
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                 ir_version=IR_VERSION, producer_name="benchmarks.vision")


@dataclass(frozen=True)
class CnnConfig:
    name: str
    kind: str             # resnet, mobilenet_v2, densenet
    batch: int
    image: int            # height = width
    width: int            # the stem's output channels
    blocks: tuple         # per stage: blocks (resnet, densenet) or (t, c, n, s) rows
    classes: int = 1000
    growth: int = 32      # densenet


#: Real models: ResNet-50, MobileNet-V2 and DenseNet-121 as torchvision defines them.
RESNET50 = CnnConfig("resnet50", "resnet", 1, 224, 64, (3, 4, 6, 3))
MOBILENET_V2 = CnnConfig("mobilenet_v2", "mobilenet_v2", 1, 224, 32, (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
    (6, 160, 3, 2), (6, 320, 1, 1)))
DENSENET121 = CnnConfig("densenet121", "densenet", 1, 224, 64, (6, 12, 24, 16))
#: Tiny ones of the same structure for the tests.
TINY_CNNS = (
    CnnConfig("resnet-tiny", "resnet", 2, 32, 8, (1, 2), classes=10),
    CnnConfig("mobilenet_v2-tiny", "mobilenet_v2", 2, 32, 8,
              ((1, 8, 1, 1), (6, 12, 2, 2), (6, 16, 2, 2)), classes=10),
    CnnConfig("densenet-tiny", "densenet", 2, 32, 8, (2, 3), classes=10, growth=4),
)


def _resnet(g: _Graph, c: CnnConfig, x: str) -> tuple[str, int]:
    x = g.node("Relu", [g.conv("conv1", x, 3, c.width, 7, stride=2)], "/relu/Relu")
    x = g.node("MaxPool", [x], "/maxpool/MaxPool", ceil_mode=0, kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[2, 2])
    c_in = c.width
    for stage, blocks in enumerate(c.blocks):
        width = c.width * 2 ** stage
        for b in range(blocks):
            name = f"layer{stage + 1}.{b}"
            stride = 2 if b == 0 and stage > 0 else 1
            y = g.node("Relu", [g.conv(f"{name}.conv1", x, c_in, width, 1)], f"/{name}/Relu")
            y = g.node("Relu", [g.conv(f"{name}.conv2", y, width, width, 3, stride)],
                       f"/{name}/Relu_1")
            y = g.conv(f"{name}.conv3", y, width, 4 * width, 1)
            if b == 0:
                x = g.conv(f"{name}.downsample.0", x, c_in, 4 * width, 1, stride)
            x = g.node("Relu", [g.node("Add", [y, x], f"/{name}/Add")], f"/{name}/Relu_2")
            c_in = 4 * width
    return x, c_in


def _mobilenet_v2(g: _Graph, c: CnnConfig, x: str) -> tuple[str, int]:
    x = g.relu6("features.0", g.conv("features.0.0", x, 3, c.width, 3, stride=2))
    c_in, index = c.width, 1
    for t, c_out, n, s in c.blocks:
        for i in range(n):
            name, hidden = f"features.{index}", c_in * t
            y = x
            if t != 1:
                y = g.relu6(f"{name}.conv.0", g.conv(f"{name}.conv.0.0", y, c_in, hidden, 1))
            y = g.relu6(f"{name}.conv.1", g.conv(f"{name}.conv.1.0", y, hidden, hidden, 3,
                                                 stride=s if i == 0 else 1, group=hidden))
            y = g.conv(f"{name}.conv.2", y, hidden, c_out, 1)
            x = g.node("Add", [x, y], f"/{name}/Add") if i > 0 or (s == 1 and c_in == c_out) \
                else y
            c_in, index = c_out, index + 1
    last = 1280 if c.classes == 1000 else 4 * c_in
    x = g.relu6(f"features.{index}", g.conv(f"features.{index}.0", x, c_in, last, 1))
    return x, last


def _densenet(g: _Graph, c: CnnConfig, x: str) -> tuple[str, int]:
    x = g.node("Relu", [g.conv("features.conv0", x, 3, c.width, 7, stride=2)],
               "/features/relu0/Relu")
    x = g.node("MaxPool", [x], "/features/pool0/MaxPool", ceil_mode=0, kernel_shape=[3, 3],
               pads=[1, 1, 1, 1], strides=[2, 2])
    channels = c.width
    for block, layers in enumerate(c.blocks):
        features = [x]
        for i in range(layers):
            name = f"features.denseblock{block + 1}.denselayer{i + 1}"
            cat = features[0] if len(features) == 1 else g.node(
                "Concat", features, f"/{name}/Concat", axis=1)
            y = g.node("Relu", [g.batch_norm(f"{name}.norm1", cat, channels)], f"/{name}/Relu")
            y = g.node("Relu", [g.conv(f"{name}.conv1", y, channels, 4 * c.growth, 1)],
                       f"/{name}/Relu_1")
            features.append(g.conv(f"{name}.conv2", y, 4 * c.growth, c.growth, 3, bias=False))
            channels += c.growth
        x = g.node("Concat", features, f"/features/denseblock{block + 1}/Concat", axis=1)
        name = f"features.transition{block + 1}"
        if block + 1 < len(c.blocks):
            x = g.node("Relu", [g.batch_norm(f"{name}.norm", x, channels)], f"/{name}/Relu")
            x = g.conv(f"{name}.conv", x, channels, channels // 2, 1, bias=False)
            x = g.node("AveragePool", [x], f"/{name}/pool/AveragePool", ceil_mode=0,
                       count_include_pad=1, kernel_shape=[2, 2], pads=[0, 0, 0, 0],
                       strides=[2, 2])
            channels //= 2
    x = g.node("Relu", [g.batch_norm("features.norm5", x, channels)], "/Relu")
    return x, channels


BUILDERS = {"resnet": _resnet, "mobilenet_v2": _mobilenet_v2, "densenet": _densenet}


def build_cnn(config: CnnConfig, seed: int = 0) -> onnx.ModelProto:
    """The classifier ``config`` describes: input ``input`` [N, 3, H, W],
    output ``output`` [N, classes]."""
    g = _Graph(seed)
    x, channels = BUILDERS[config.kind](g, config, "input")
    x = g.head(x, channels, config.classes)
    inputs = [helper.make_tensor_value_info(
        "input", TensorProto.FLOAT, ["batch", 3, config.image, config.image])]
    return g.model(config.name, inputs, x, ["batch", config.classes])


def cnn_feeds(config: CnnConfig, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (config.batch, 3, config.image, config.image)
    return {"input": rng.standard_normal(shape, dtype=np.float32)}


@dataclass(frozen=True)
class LstmConfig:
    name: str
    layers: int
    input_size: int
    hidden: int
    batch: int
    sequence: int


LSTMS = (
    LstmConfig("bilstm-h128-s32", 2, 128, 128, 1, 32),
    LstmConfig("bilstm-h128-s256", 2, 128, 128, 1, 256),
    LstmConfig("bilstm-h512-s32", 2, 512, 512, 1, 32),
    LstmConfig("bilstm-h512-s256", 2, 512, 512, 1, 256),
)
TINY_LSTM = LstmConfig("bilstm-tiny", 2, 5, 7, 3, 6)


def build_lstm(config: LstmConfig, seed: int = 0) -> onnx.ModelProto:
    """``nn.LSTM(input_size, hidden, num_layers, bidirectional=True)`` as
    exported: inputs ``input`` [T, B, I], ``h0`` and ``c0`` [2 layers, B, H];
    output ``output`` [T, B, 2H]."""
    c, g = config, _Graph(seed)
    x, size, scale = "input", c.input_size, np.float32(1.0 / np.sqrt(c.hidden))
    for layer in range(c.layers):
        def param(name, shape):
            w = g.rng.uniform(-1.0, 1.0, shape).astype(np.float32) * scale
            return g.init(f"onnx::LSTM_{name}_{layer}", w)
        states = []
        for s in ("h0", "c0"):
            states.append(g.node("Slice", [s, g.const([2 * layer]), g.const([2 * layer + 2]),
                                           g.const([0])], f"/lstm/Slice_{s}_{layer}"))
        y, _, _ = g.node("LSTM", [x, param("W", (2, 4 * c.hidden, size)),
                                  param("R", (2, 4 * c.hidden, c.hidden)),
                                  param("B", (2, 8 * c.hidden)), "", *states],
                         f"/lstm/LSTM_{layer}", outputs=3, direction="bidirectional",
                         hidden_size=c.hidden)
        y = g.node("Transpose", [y], f"/lstm/Transpose_{layer}", perm=[0, 2, 1, 3])
        x = g.node("Reshape", [y, g.const([0, 0, -1])], f"/lstm/Reshape_{layer}")
        size = 2 * c.hidden
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                            ["sequence", "batch", c.input_size])]
    inputs += [helper.make_tensor_value_info(s, TensorProto.FLOAT,
                                             [2 * c.layers, "batch", c.hidden])
               for s in ("h0", "c0")]
    return g.model(c.name, inputs, x, ["sequence", "batch", 2 * c.hidden])


def lstm_feeds(config: LstmConfig, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = config
    return {"input": rng.standard_normal((c.sequence, c.batch, c.input_size), dtype=np.float32),
            "h0": rng.standard_normal((2 * c.layers, c.batch, c.hidden), dtype=np.float32),
            "c0": rng.standard_normal((2 * c.layers, c.batch, c.hidden), dtype=np.float32)}
