"""linear_attention: ai.onnx LinearAttention-27 -> com.microsoft LinearAttention-1 (float)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

from onnx_light_cpu.fusion import fuse

from fusion_cases import (
    MS,
    assert_fused_same,
    assert_left_alone,
    branches,
    if_model,
    make_model,
    op_types,
)

F, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
B, T, HQ, HKV, DK, DV = 2, 4, 4, 2, 8, 6
SLOTS = ("query", "key", "value", "past_state", "decay", "beta")
SHAPES = {"query": (B, T, HQ * DK), "key": (B, T, HKV * DK), "value": (B, T, HKV * DV),
          "past_state": (B, HKV, DK, DV), "decay": (B, T, HKV), "beta": (B, T, HKV)}
NEEDS = {"linear": (), "gated": ("decay",), "delta": ("beta",),
         "gated_delta": ("decay", "beta")}


def _feeds(names, dtype=np.float32):
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(SHAPES[name]) for name in names}
    if "key" in feeds:  # normalised keys, as the delta rules expect
        key = feeds["key"].reshape(B, T, HKV, DK)
        feeds["key"] = (key / np.linalg.norm(key, axis=-1, keepdims=True)).reshape(SHAPES["key"])
    if "decay" in feeds:
        feeds["decay"] = -np.abs(feeds["decay"]) * 0.3
    if "beta" in feeds:
        feeds["beta"] = np.abs(feeds["beta"]) / (1 + np.abs(feeds["beta"]))
    return {k: v.astype(dtype) for k, v in feeds.items()}


def _node(rule="gated_delta", past=True, outputs=("output", "present_state"), slots=None,
          **attrs):
    given = slots or ("query", "key", "value") + (("past_state",) if past else ()) + NEEDS[rule]
    inputs = [name if name in given else "" for name in SLOTS]
    while not inputs[-1]:
        inputs.pop()
    attrs = {"q_num_heads": HQ, "kv_num_heads": HKV, "update_rule": rule, **attrs}
    return oh.make_node("LinearAttention", inputs, list(outputs), name="la", **attrs), given


def _model(rule="gated_delta", dtype=F, outputs=("output", "present_state"), extra=(),
           graph_outputs=None, **kwargs):
    node, given = _node(rule, outputs=outputs, **kwargs)
    out_shapes = {"output": [None] * 3, "present_state": [None] * 4}
    graph_outputs = graph_outputs or [(o, dtype, out_shapes[o]) for o in outputs if o]
    model = make_model([node, *extra], [(n, dtype, list(SHAPES[n])) for n in given],
                       graph_outputs, opset=27)
    return model, _feeds(given, np.float16 if dtype == F16 else np.float32)


@pytest.mark.parametrize("rule", list(NEEDS))
def test_fused_matches_unfused(rule):
    model, feeds = _model(rule, scale=0.3, chunk_size=16)
    fused = assert_fused_same(model, feeds, "MicrosoftLinearAttention",
                              counts={"linear_attention": 1})
    (node,) = fused.graph.node
    (original,) = model.graph.node
    assert node.domain == MS and node.name == "la"
    assert list(node.input) == list(original.input)
    assert list(node.output) == ["output", "present_state"]
    assert sorted(a.SerializeToString() for a in node.attribute) == sorted(
        a.SerializeToString() for a in original.attribute)
    assert {(o.domain, o.version) for o in fused.opset_import} == {("", 27), (MS, 1)}


@pytest.mark.parametrize("case", [
    pytest.param({"past": False}, id="no-past"),
    pytest.param({"rule": "delta", "slots": ("query", "key", "value", "beta")},
                 id="empty-slots-kept"),
])
def test_input_and_output_slots_kept(case):
    model, feeds = _model(**case)
    fused = assert_fused_same(model, feeds, "MicrosoftLinearAttention")
    (node,), (original,) = fused.graph.node, model.graph.node
    assert list(node.input) == list(original.input)
    assert [o for o in node.output if o] == [o for o in original.output if o]


def test_omitted_present_state_gets_a_name():
    """present_state is required by both schemas: an empty output name (an
    invalid ai.onnx node) becomes a named, unread one."""
    model, _ = _model(outputs=("output", ""), graph_outputs=[("output", F, [None] * 3)])
    fused = fuse(model).model
    onnx.checker.check_model(fused)
    assert fused.graph.node[0].output[0] == "output" and fused.graph.node[0].output[1]


def test_present_state_read_by_another_node():
    """An output of the node, not an intermediate: any reader may keep it."""
    model, feeds = _model(extra=[oh.make_node("Neg", ["present_state"], ["N"])],
                          graph_outputs=[("output", F, [None] * 3), ("N", F, [None] * 4)])
    fused = assert_fused_same(model, feeds, "MicrosoftLinearAttention")
    assert op_types(fused.graph) == ["LinearAttention", "Neg"]


def _broken_models():
    yield "float16", _model(dtype=F16)[0]
    yield "heads-not-multiple", _model(q_num_heads=3)[0]
    yield "decay-without-gate", _model("delta", slots=("query", "key", "value", "decay",
                                                       "beta"))[0]
    yield "unknown-attribute", _model(state_window=2)[0]
    model, _ = _model()
    model.opset_import[0].version = 26  # no LinearAttention before 27: a custom node
    yield "opset-26", model


@pytest.mark.parametrize("name,model", list(_broken_models()),
                         ids=[name for name, _ in _broken_models()])
def test_broken_patterns_left_alone(name, model):
    assert_left_alone(model)


def test_inside_if_branches():
    node, given = _node()
    model = if_model([node], ("output", F, [None] * 3),
                     [(n, F, list(SHAPES[n])) for n in given], opset=27)
    feeds = {**_feeds(given), "cond": np.array(False)}
    fused = assert_fused_same(model, feeds, "MicrosoftLinearAttention",
                              counts={"linear_attention": 2})
    assert [op_types(g) for g in branches(fused)] == [["LinearAttention"]] * 2
    assert {n.domain for g in branches(fused) for n in g.node} == {MS}


def test_inside_model_local_function():
    node, given = _node()
    value_info = [oh.make_tensor_value_info(n, F, list(SHAPES[n])) for n in given]
    function = oh.make_function("local", "Mix", list(given), ["output"], [node],
                                [oh.make_opsetid("", 27)], value_info=value_info)
    model = make_model([oh.make_node("Mix", list(given), ["output"], domain="local")],
                       [(n, F, list(SHAPES[n])) for n in given], [("output", F, [None] * 3)],
                       opset=27, functions=[function])
    fused = assert_fused_same(model, _feeds(given), "MicrosoftLinearAttention",
                              counts={"linear_attention": 1})
    assert [(n.op_type, n.domain) for n in fused.functions[0].node] == [("LinearAttention", MS)]
