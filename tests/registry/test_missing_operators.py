"""Operators nobody runs: one error lists them all, and ``check_model``
reports the same resolution without raising."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import RuntimeImplementationError

import onnx_light_cpu as olc
from onnx_light_cpu import MicrosoftKernelImplementation as Policy
from onnx_light_cpu.registry import hook
from onnx_light_cpu.registry.check import check_model
from onnx_light_cpu.registry.hook import MissingOperatorsError, Provider

import models
from models import X

MS = oh.make_opsetid("com.microsoft", 1)
CUSTOM = oh.make_opsetid("my.domain", 3)


def _vi(name, elem=T.FLOAT):
    return oh.make_tensor_value_info(name, elem, [None])


def unknown_model() -> onnx.ModelProto:
    """Two com.microsoft operators nobody runs (one of them twice, once in an
    If branch) and one of a custom domain, between nodes we run."""
    then_branch = oh.make_graph(
        [oh.make_node("FancyGelu", ["x"], ["t"], domain="com.microsoft", name="gelu_then")],
        "then", [], [_vi("t")])
    else_branch = oh.make_graph([oh.make_node("Abs", ["x"], ["e"])], "else", [], [_vi("e")])
    nodes = [
        oh.make_node("Exp", ["x"], ["a"]),
        oh.make_node("FancyGelu", ["a"], ["b"], domain="com.microsoft", name="gelu_0"),
        oh.make_node("FancyNorm", ["b"], ["c"], domain="com.microsoft", name="norm_0"),
        oh.make_node("If", ["cond"], ["d"], then_branch=then_branch, else_branch=else_branch,
                     name="branch"),
        oh.make_node("Widget", ["c", "d"], ["y"], domain="my.domain"),
    ]
    graph = oh.make_graph(nodes, "unknown", [_vi("x"), _vi("cond", T.BOOL)], [_vi("y")])
    return oh.make_model(graph, opset_imports=[models.OPSET, MS, CUSTOM])


EXPECTED = [
    "  com.microsoft::FancyGelu (opset 1): 2 nodes: 'gelu_0', "
    "'gelu_then' in If node 'branch' > graph 'then'",
    "  com.microsoft::FancyNorm (opset 1): 1 node: 'norm_0'",
    "  my.domain::Widget (opset 3): 1 node: #4",
]


def _error(model, **kwargs) -> MissingOperatorsError:
    with pytest.raises(MissingOperatorsError) as info:
        ReferenceEvaluator(model, **kwargs)
    return info.value


@pytest.mark.parametrize("registration", ["none", "global", "naive global"])
def test_one_error_lists_every_missing_operator(registration):
    if registration != "none":
        olc.register_kernels_global(microsoft_implementation=Policy.NAIVE
                                    if registration.startswith("naive") else Policy.OPTIMIZED)
    error = _error(unknown_model())
    lines = str(error).splitlines()
    assert lines[0] == ("neither onnx_light_cpu nor onnx.reference can run 3 operators "
                        "of this model (4 nodes):")
    assert lines[1:4] == EXPECTED
    # onnx.reference's own words are kept: callers matching them still match
    assert lines[4] == ("onnx.reference said first: Node type 'FancyGelu' from domain "
                        "'com.microsoft' is unknown, known functions: [].")
    assert [(r.domain, r.op_type, r.opset, r.node_name) for r in error.missing] == [
        ("com.microsoft", "FancyGelu", 1, "gelu_0"), ("com.microsoft", "FancyNorm", 1, "norm_0"),
        ("com.microsoft", "FancyGelu", 1, "gelu_then"), ("my.domain", "Widget", 3, "#4")]
    assert error.missing[2].location == "If node 'branch' > graph 'then'"


def test_the_error_is_what_onnx_reference_raises():
    """Callers catching onnx's exception (or its bases) still catch it."""
    for kind in (RuntimeImplementationError, NotImplementedError, RuntimeError):
        with pytest.raises(kind, match="is unknown"):
            ReferenceEvaluator(unknown_model())


def test_missing_operators_in_functions_and_undeclared_domains():
    """A model-local function's body, a domain the model does not import, and
    an opset onnx.reference has no implementation for (Dropout before 7)."""
    fn = oh.make_function("local", "Wrap", ["a"], ["b"],
                          [oh.make_node("Inner", ["a"], ["b"], domain="com.microsoft")],
                          [models.OPSET, MS])
    nodes = [oh.make_node("Wrap", ["x"], ["a"], domain="local"),
             oh.make_node("Orphan", ["a"], ["b"], domain="nowhere", name="orphan"),
             oh.make_node("Dropout", ["b"], ["y"], name="dropout")]
    graph = oh.make_graph(nodes, "g", [_vi("x")], [_vi("y")])
    model = oh.make_model(graph, functions=[fn], opset_imports=[
        oh.make_opsetid("", 5), oh.make_opsetid("local", 1)])
    lines = str(_error(model)).splitlines()
    assert lines[1:4] == [
        "  ai.onnx::Dropout (opset 5): 1 node: 'dropout'",
        "  com.microsoft::Inner (opset 1): 1 node: #0 in function local::Wrap",
        "  nowhere::Orphan (domain not imported by the model): 1 node: 'orphan'",
    ]


def test_another_error_after_a_missing_operator_still_names_it():
    """onnx.reference would have stopped at the missing operator first."""
    nodes = [oh.make_node("FancyGelu", ["x"], ["a"], domain="com.microsoft"),
             oh.make_node("Constant", [], ["c"]),  # no value: onnx.reference refuses it
             oh.make_node("Add", ["a", "c"], ["y"])]
    model = oh.make_model(oh.make_graph(nodes, "g", [_vi("x")], [_vi("y")]),
                          opset_imports=[models.OPSET, MS])
    error = _error(model)
    assert "com.microsoft::FancyGelu (opset 1): 1 node: #0" in str(error)
    assert "then the construction stopped at AttributeError" in str(error)
    assert isinstance(error.__cause__, AttributeError)


@pytest.mark.parametrize("build", [models.chain("Abs", "Exp"), models.if_model(),
                                   models.loop_model(), models.local_function_model(),
                                   models.mish_model()], ids=lambda m: m.graph.name)
def test_models_that_load_are_unaffected(build):
    olc.register_kernels_global()
    sess = ReferenceEvaluator(build)
    assert getattr(hook._building, "report", None) is None  # nothing left behind
    assert not any(isinstance(n, hook.Missing) for e in hook.iter_evaluators(sess)
                   for n in e.rt_nodes_)


def test_an_error_leaves_no_state_behind():
    _error(unknown_model())
    assert getattr(hook._building, "report", None) is None
    assert hook._stack() == []
    sess = ReferenceEvaluator(models.chain("Exp"))
    np.testing.assert_allclose(sess.run(None, {"x": X})[0], np.exp(X), rtol=1e-6)


def test_operators_only_we_run_still_build_without_registration():
    """SkipSimplifiedLayerNormalization has a kernel of ours: not missing,
    even unregistered; FancyGelu beside it is."""
    node = oh.make_node("SkipSimplifiedLayerNormalization", ["x", "x", "g"], ["y"],
                        domain="com.microsoft", epsilon=1e-5)
    model = oh.make_model(oh.make_graph([node], "g", [_vi("x"), _vi("g")], [_vi("y")]),
                          opset_imports=[models.OPSET, MS])
    ReferenceEvaluator(model)
    model.graph.node.append(oh.make_node("FancyGelu", ["y"], ["z"], domain="com.microsoft"))
    model.graph.output[0].name = "z"
    (missing,) = _error(model).missing
    assert missing.op_type == "FancyGelu"


def test_an_opset_none_of_our_kernels_accepts_is_missing(monkeypatch):
    from onnx_light_cpu.ops.skip_norm import SkipSimplifiedLayerNormalization

    monkeypatch.setattr(SkipSimplifiedLayerNormalization, "since_version", 2)
    hook._inventory.cache_clear()
    try:
        node = oh.make_node("SkipSimplifiedLayerNormalization", ["x", "x", "g"], ["y"],
                            domain="com.microsoft", epsilon=1e-5)
        model = oh.make_model(oh.make_graph([node], "g", [_vi("x"), _vi("g")], [_vi("y")]),
                              opset_imports=[models.OPSET, MS])
        (missing,) = _error(model).missing
        assert missing.op_type == "SkipSimplifiedLayerNormalization"
        assert not check_model(model).ok
    finally:
        monkeypatch.undo()
        hook._inventory.cache_clear()


def test_check_model_agrees_with_the_error():
    result = check_model(unknown_model())
    assert not result.ok and not result.error
    error = _error(unknown_model())
    assert [r.where for r in result.missing] == [r.where for r in error.missing]
    rows = {(o.domain, o.op_type): o for o in result.operators}
    assert rows["ai.onnx", "Exp"].provider is Provider.KERNEL
    assert rows["ai.onnx", "Exp"].runner == "onnx_light_cpu::Exp (optimized)"
    assert rows["ai.onnx", "Abs"].nodes == 1  # the else branch
    assert rows["ai.onnx", "If"].runner == "onnx_light_cpu::If (optimized)"
    assert (rows["com.microsoft", "FancyGelu"].nodes, rows["com.microsoft", "FancyGelu"].runner) \
        == (2, "nothing")
    assert result.lines()[-4:-3] == ["3 of 6 operators (4 of 7 nodes) cannot run:"]
    assert result.lines()[-3:] == EXPECTED


def test_check_model_runs_nothing_and_reports_each_provider():
    """A model-local function and an expanded function body (Mish) are
    reported as such; the body's own nodes are not the model's."""
    for model, expected in [
        (models.local_function_model(),
         {("custom", "SigmoidThenLog"): "model-local function",
          ("ai.onnx", "Sigmoid"): "onnx_light_cpu::Sigmoid (optimized)",
          ("ai.onnx", "Log"): "onnx_light_cpu::Log (optimized)"}),
        (models.mish_model(), {("ai.onnx", "Mish"): "onnx.reference, function body"}),
    ]:
        with models.without_mish_kernel():
            result = check_model(model)
        assert result.ok
        assert {(o.domain, o.op_type): o.runner for o in result.operators} == expected
        assert result.lines()[-1].startswith("all ")


def test_check_model_policy_picks_the_family():
    node = oh.make_node("SkipSimplifiedLayerNormalization", ["x", "x", "g"], ["y"],
                        domain="com.microsoft", epsilon=1e-5)
    model = oh.make_model(oh.make_graph([node], "g", [_vi("x"), _vi("g")], [_vi("y")]),
                          opset_imports=[models.OPSET, MS])
    (optimized,) = check_model(model).operators
    (naive,) = check_model(model, Policy.NAIVE).operators
    assert optimized.kernel.implementation == "optimized"
    assert naive.kernel.implementation == "naive"
    assert naive.runner == f"{naive.kernel.name} (naive)"


def test_context_dependent_function_is_noted_once():
    """Gelu (opset 20) is expanded with its input types: one node, resolved twice."""
    model = oh.make_model(
        oh.make_graph([oh.make_node("Gelu", ["x"], ["y"])], "g",
                      [oh.make_tensor_value_info("x", T.FLOAT, [3])],
                      [oh.make_tensor_value_info("y", T.FLOAT, [3])]),
        opset_imports=[oh.make_opsetid("", 20)])
    with hook.recording(hook._new_root_context()) as report:
        ReferenceEvaluator(model)
    shown = [r for r in report.resolutions if not r.internal]
    assert [(r.op_type, r.provider) for r in shown] == [("Gelu", Provider.EXPANDED)]
    assert all(r.location == "body of Gelu node #0" for r in report.resolutions if r.internal)
