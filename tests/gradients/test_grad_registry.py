"""GradRegistry, register_custom_gradients and gradient_model's contract:
independent registries, the errors that name the operator, user rules,
the backward model's interface, the support inventory's gradient flags."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as oh

import onnx_light_cpu as olc
from onnx_light_cpu.gradients import GRAD_OPSET, default_registry

from gradcheck import one_node_model, ours

FOUR = {("com.microsoft", "BiasGelu"), ("com.microsoft", "CDist"),
        ("com.microsoft", "GroupQueryAttention"), ("com.microsoft", "MatMulNBits")}


def neg_rule(ctx):
    return {0: ctx.add("Neg", [ctx.grad(0)])}


def test_public_names():
    for name in ("GradRegistry", "register_custom_gradients", "gradient_model"):
        assert name in olc.__all__ and hasattr(olc, name)


def test_register_custom_gradients_makes_independent_registries():
    first, second = olc.register_custom_gradients(), olc.register_custom_gradients()
    assert isinstance(first, olc.GradRegistry) and first is not second
    assert set(first) == set(second) == FOUR and len(first) == 4
    first.register("", "Neg", neg_rule)
    assert ("", "Neg") in first and ("ai.onnx", "Neg") in first
    assert ("", "Neg") not in second and ("", "Neg") not in default_registry()


def test_register_custom_gradients_fills_the_given_registry():
    mine = olc.GradRegistry()
    mine.register("", "Neg", neg_rule)
    assert olc.register_custom_gradients(mine) is mine
    assert set(mine) == FOUR | {("", "Neg")}
    assert olc.register_custom_gradients(mine) is mine   # again: the four are replaced
    with pytest.raises(TypeError, match="GradRegistry"):
        olc.register_custom_gradients({})


def test_register_refuses_a_second_rule_unless_replace():
    registry = olc.GradRegistry()
    registry.register("", "Neg", neg_rule)
    with pytest.raises(ValueError, match=r"ai\.onnx::Neg already has a gradient rule"):
        registry.register("ai.onnx", "Neg", neg_rule)
    registry.register("", "Neg", neg_rule, replace=True)
    with pytest.raises(TypeError, match="callable"):
        registry.register("", "Abs", "not a rule")


def test_support_inventory_flags_the_four_operators():
    flagged = {(r.domain, r.op_type) for r in olc.operator_support() if r.gradient}
    assert flagged == FOUR


def test_a_user_rule_builds_a_backward_model():
    """A rule for ai.onnx Neg in a registry of one's own; the rule's last
    node output becomes grad_x."""
    model = one_node_model("Neg", {"x": (T.FLOAT, [2, 3])}, {"y": (T.FLOAT, [2, 3])}, domain="")
    registry = olc.GradRegistry()
    registry.register("", "Neg", neg_rule)
    backward = olc.gradient_model(model, registry)
    onnx.checker.check_model(backward, full_check=True)
    assert [i.name for i in backward.graph.input] == ["x", "grad_y"]
    assert [o.name for o in backward.graph.output] == ["grad_x"]
    assert [n.op_type for n in backward.graph.node] == ["Neg"]
    assert {o.domain: o.version for o in backward.opset_import}[""] == GRAD_OPSET
    x, dy = np.ones((2, 3), np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ours(backward).run(None, {"x": x, "grad_y": dy})[0], -dy)
    with pytest.raises(NotImplementedError, match=r"no gradient rule for ai\.onnx::Neg"):
        olc.gradient_model(model)


def test_a_gradient_that_is_an_input_goes_through_identity():
    model = one_node_model("Identity", {"x": (T.FLOAT, [3])}, {"y": (T.FLOAT, [3])}, domain="")
    registry = olc.GradRegistry()
    registry.register("", "Identity", lambda ctx: {0: ctx.grad(0)})
    backward = olc.gradient_model(model, registry)
    onnx.checker.check_model(backward, full_check=True)
    assert [(n.op_type, list(n.input), list(n.output)) for n in backward.graph.node] == [
        ("Identity", ["grad_y"], ["grad_x"])]


def test_more_than_one_node_is_refused():
    model = one_node_model("Neg", {"x": (T.FLOAT, [2])}, {"y": (T.FLOAT, [2])}, domain="")
    model.graph.node.append(oh.make_node("Abs", ["y"], ["z"]))
    with pytest.raises(ValueError, match=r"single-node model, got 2 nodes \(ai\.onnx::Neg, "
                                         r"ai\.onnx::Abs\)"):
        olc.gradient_model(model)
    del model.graph.node[:]
    with pytest.raises(ValueError, match="single-node model, got 0 nodes"):
        olc.gradient_model(model)
    with pytest.raises(TypeError, match="ModelProto"):
        olc.gradient_model(model.graph)


def test_operator_without_rule_is_named():
    model = one_node_model("FastGelu", {"x": (T.FLOAT, [2])}, {"y": (T.FLOAT, [2])})
    with pytest.raises(NotImplementedError, match=r"no gradient rule for com\.microsoft::FastGelu"):
        olc.gradient_model(model)


def test_unknown_attribute_is_named():
    model = one_node_model("BiasGelu", {"A": (T.FLOAT, [2, 3]), "B": (T.FLOAT, [3])},
                           {"C": (T.FLOAT, [2, 3])}, approximate="tanh")
    with pytest.raises(NotImplementedError,
                       match=r"com\.microsoft::BiasGelu: attribute\(s\) \['approximate'\]"):
        olc.gradient_model(model)


def test_untyped_outputs_take_the_inferred_type():
    """An output declared without a type gets the one shape inference gives
    (the schemas of the com.microsoft operators are registered)."""
    model = one_node_model("CDist", {"A": (T.DOUBLE, [2, 3]), "B": (T.DOUBLE, [4, 3])},
                           {"C": (T.UNDEFINED, None)}, metric="euclidean")
    backward = olc.gradient_model(model)
    onnx.checker.check_model(backward, full_check=True)
    grad_c = backward.graph.input[-1]
    assert grad_c.name == "grad_C" and grad_c.type.tensor_type.elem_type == T.DOUBLE
    assert [d.dim_value for d in grad_c.type.tensor_type.shape.dim] == [2, 4]


def test_gradient_output_name_clash_is_refused():
    model = one_node_model("CDist", {"A": (T.FLOAT, [2, 3]), "grad_A": (T.FLOAT, [2, 3])},
                           {"C": (T.FLOAT, [2, 2])})
    with pytest.raises(ValueError, match="'grad_A' is already a name of the model"):
        olc.gradient_model(model)
