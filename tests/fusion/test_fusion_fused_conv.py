"""fused_conv: Conv [+ residual Add] [+ activation] -> com.microsoft FusedConv."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as nh

from fusion_cases import MS, assert_fused_same, assert_left_alone, make_model, op_types

F = TensorProto.FLOAT
SHAPE = ["n", 4, 6, 6]  # the Conv's output: 3x3, pads 1, 4 channels


def _weights(bias=True):
    rng = np.random.default_rng(1)
    inits = [nh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")]
    if bias:
        inits.append(nh.from_array(rng.standard_normal(4).astype(np.float32), "B"))
    return inits


def _conv(bias=True, out="c"):
    return oh.make_node("Conv", ["X", "W", "B"] if bias else ["X", "W"], [out], name="conv",
                        kernel_shape=[3, 3], pads=[1, 1, 1, 1])


def _feeds(residual=False):
    rng = np.random.default_rng(0)
    feeds = {"X": rng.standard_normal((2, 3, 6, 6)).astype(np.float32) * 3}
    if residual:
        feeds["Z"] = rng.standard_normal((2, 4, 6, 6)).astype(np.float32) * 3
    return feeds


def _activation(name, value, out="Y", opset=21):
    """(nodes, initializers) of activation ``name`` reading ``value``."""
    if name == "Clip" and opset >= 11:
        bounds = [nh.from_array(np.array(0.0, np.float32), "lo"),
                  nh.from_array(np.array(6.0, np.float32), "hi")]
        return [oh.make_node("Clip", [value, "lo", "hi"], [out])], bounds
    attrs = {"Clip": {"min": -1.0, "max": 1.5}, "LeakyRelu": {"alpha": 0.2},
             "HardSigmoid": {"alpha": 0.3, "beta": 0.4}}.get(name, {})
    return [oh.make_node(name, [value], [out], **attrs)], []


ACTIVATIONS = ("Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid")
EXPECTED_PARAMS = {"Clip": [0.0, 6.0], "LeakyRelu": [0.2], "HardSigmoid": [0.3, 0.4]}


def _attrs(node):
    return {a.name: oh.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_conv_activation(act, bias):
    nodes, inits = _activation(act, "c")
    model = make_model([_conv(bias), *nodes], [("X", F, ["n", 3, 6, 6])], [("Y", F, SHAPE)],
                       _weights(bias) + inits)
    fused = assert_fused_same(model, _feeds(), "FusedConv", counts={"fused_conv": 1})
    assert op_types(fused.graph) == ["FusedConv"]
    node = fused.graph.node[0]
    attrs = _attrs(node)
    assert node.domain == MS and node.name == "conv" and len(node.input) == (3 if bias else 2)
    assert attrs["activation"] == act.encode()
    assert attrs.get("activation_params", []) == pytest.approx(EXPECTED_PARAMS.get(act, []))
    assert attrs["kernel_shape"] == [3, 3] and attrs["pads"] == [1, 1, 1, 1]


def test_clip_of_opset_6_and_open_bounds():
    nodes, _ = _activation("Clip", "c", opset=6)
    model = make_model([_conv(), *nodes], [("X", F, ["n", 3, 6, 6])], [("Y", F, SHAPE)],
                       _weights(), opset=10)
    fused = assert_fused_same(model, _feeds(), "FusedConv", counts={"fused_conv": 1})
    assert _attrs(fused.graph.node[0])["activation_params"] == pytest.approx([-1.0, 1.5])
    # Clip-11 without max: the float32 limit stands in
    lo = nh.from_array(np.array(0.0, np.float32), "lo")
    clip = oh.make_node("Clip", ["c", "lo"], ["Y"])
    model = make_model([_conv(), clip], [("X", F, ["n", 3, 6, 6])], [("Y", F, SHAPE)],
                       _weights() + [lo])
    fused = assert_fused_same(model, _feeds(), "FusedConv", counts={"fused_conv": 1})
    params = _attrs(fused.graph.node[0])["activation_params"]
    assert params[0] == 0.0 and params[1] == pytest.approx(float(np.finfo(np.float32).max))


@pytest.mark.parametrize("conv_first", [True, False], ids=["conv-first", "residual-first"])
@pytest.mark.parametrize("act", [None, "Relu", "Clip"])
def test_residual_add(act, conv_first):
    add_inputs = ["c", "Z"] if conv_first else ["Z", "c"]
    nodes = [_conv(), oh.make_node("Add", add_inputs, ["s" if act else "Y"])]
    inits = []
    if act:
        act_nodes, inits = _activation(act, "s")
        nodes += act_nodes
    model = make_model(nodes, [("X", F, ["n", 3, 6, 6]), ("Z", F, SHAPE)], [("Y", F, SHAPE)],
                       _weights() + inits)
    fused = assert_fused_same(model, _feeds(residual=True), "FusedConv",
                              counts={"fused_conv": 1})
    assert op_types(fused.graph) == ["FusedConv"]
    node = fused.graph.node[0]
    assert list(node.input) == ["X", "W", "B", "Z"]
    assert _attrs(node).get("activation", b"") == (act or "").encode()


def test_residual_without_bias_keeps_the_slot_empty():
    nodes = [_conv(bias=False), oh.make_node("Add", ["c", "Z"], ["s"]),
             oh.make_node("Relu", ["s"], ["Y"])]
    model = make_model(nodes, [("X", F, ["n", 3, 6, 6]), ("Z", F, SHAPE)], [("Y", F, SHAPE)],
                       _weights(bias=False))
    fused = assert_fused_same(model, _feeds(residual=True), "FusedConv",
                              counts={"fused_conv": 1})
    assert list(fused.graph.node[0].input) == ["X", "W", "", "Z"]


@pytest.mark.parametrize("case", ["conv-output-read-twice", "conv-output-is-output",
                                  "broadcast-residual", "clip-bound-not-constant", "double",
                                  "unknown-residual-shape"])
def test_left_alone(case):
    x = ("X", F, ["n", 3, 6, 6])
    inits = _weights()
    if case == "conv-output-read-twice":
        nodes = [_conv(), oh.make_node("Relu", ["c"], ["Y"]), oh.make_node("Neg", ["c"], ["t"])]
        model = make_model(nodes, [x], [("Y", F, SHAPE), ("t", F, SHAPE)], inits)
    elif case == "conv-output-is-output":
        nodes = [_conv(), oh.make_node("Relu", ["c"], ["Y"])]
        model = make_model(nodes, [x], [("Y", F, SHAPE), ("c", F, SHAPE)], inits)
    elif case == "broadcast-residual":  # FusedConv's Z does not broadcast
        nodes = [_conv(), oh.make_node("Add", ["c", "Z"], ["Y"])]
        model = make_model(nodes, [x, ("Z", F, [1, 4, 1, 1])], [("Y", F, SHAPE)], inits)
    elif case == "clip-bound-not-constant":
        nodes = [_conv(), oh.make_node("Clip", ["c", "lo"], ["Y"])]
        model = make_model(nodes, [x, ("lo", F, [])], [("Y", F, SHAPE)], inits)
    elif case == "double":  # FusedConv is float32 only
        w = nh.from_array(np.ones((4, 3, 3, 3)), "W")
        nodes = [_conv(bias=False), oh.make_node("Relu", ["c"], ["Y"])]
        model = make_model(nodes, [("X", TensorProto.DOUBLE, ["n", 3, 6, 6])],
                           [("Y", TensorProto.DOUBLE, SHAPE)], [w])
    else:  # the residual's shape is unknown: it might broadcast
        nodes = [_conv(), oh.make_node("Add", ["c", "Z"], ["Y"])]
        model = make_model(nodes, [x, ("Z", F, None)], [("Y", F, SHAPE)], inits)
    assert_left_alone(model)
