"""bias_gelu: Add(X, bias[N]) + exact Gelu -> com.microsoft BiasGelu."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

from fusion_cases import (
    MS,
    assert_fused_same,
    assert_left_alone,
    branches,
    if_model,
    make_model,
    op_types,
    run_ort,
)

F, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
K, N = 8, 16


def _feeds(dtype=np.float32, rows=3):
    return {"X": np.random.default_rng(0).standard_normal((rows, K)).astype(dtype)}


def _weights(dtype=np.float32, bias_shape=(N,), name="bias"):
    rng = np.random.default_rng(1)
    return [numpy_helper.from_array(rng.standard_normal((K, N)).astype(dtype), "W"),
            numpy_helper.from_array(rng.standard_normal(bias_shape).astype(dtype), name)]


def _gelu(domain="", **attrs):
    return oh.make_node("Gelu", ["s"], ["Y"], name="gelu", domain=domain, **attrs)


def _model(*, gelu=None, add=("h", "bias"), dtype=F, bias_shape=(N,), outputs=None,
           extra=(), opset=20):
    """X [n, K] -> MatMul(W) -> h -> Add(h, bias) -> s -> Gelu -> Y."""
    np_dtype = np.float16 if dtype == F16 else np.float32
    nodes = [oh.make_node("MatMul", ["X", "W"], ["h"]),
             oh.make_node("Add", list(add), ["s"]), gelu or _gelu(), *extra]
    outputs = outputs or [("Y", dtype, ["n", N])]
    return make_model(nodes, [("X", dtype, ["n", K])], outputs,
                      _weights(np_dtype, bias_shape), opset=opset)


@pytest.mark.parametrize("spelling", [
    pytest.param({}, id="onnx-gelu"),
    pytest.param({"gelu": _gelu(approximate="none")}, id="approximate-none"),
    pytest.param({"gelu": _gelu(MS)}, id="microsoft-gelu"),
    pytest.param({"add": ("bias", "h")}, id="bias-first"),
])
def test_fused_matches_unfused(spelling):
    model = _model(**spelling)
    fused = assert_fused_same(model, _feeds(), "BiasGelu", counts={"bias_gelu": 1})
    assert op_types(fused.graph) == ["MatMul", "BiasGelu"]
    node = fused.graph.node[1]
    assert list(node.input) == ["h", "bias"] and list(node.output) == ["Y"]
    assert node.domain == MS and node.name == "gelu"
    assert (MS, 1) in {(o.domain, o.version) for o in fused.opset_import}


def test_float16():
    model = _model(dtype=F16)
    fused = assert_fused_same(model, _feeds(np.float16), "BiasGelu", tol=2e-3)
    assert op_types(fused.graph) == ["MatMul", "BiasGelu"]


def test_rank_three_and_symbolic_bias_length():
    """The last dimension and the bias's length are the same symbolic name."""
    nodes = [oh.make_node("Add", ["X", "b"], ["s"]), _gelu()]
    model = make_model(nodes, [("X", F, ["batch", "seq", "hidden"]), ("b", F, ["hidden"])],
                       [("Y", F, ["batch", "seq", "hidden"])], opset=20)
    rng = np.random.default_rng(2)
    feeds = {"X": rng.standard_normal((2, 3, 5)).astype(np.float32),
             "b": rng.standard_normal(5).astype(np.float32)}
    fused = assert_fused_same(model, feeds, "BiasGelu")
    assert op_types(fused.graph) == ["BiasGelu"]


# -- left alone -------------------------------------------------------------------


def _broken_models():
    yield "approximate-tanh", _model(gelu=_gelu(approximate="tanh"))
    yield "extra-consumer", _model(extra=[oh.make_node("Relu", ["s"], ["R"])],
                                   outputs=[("Y", F, ["n", N]), ("R", F, ["n", N])])
    yield "intermediate-graph-output", _model(outputs=[("Y", F, ["n", N]), ("s", F, ["n", N])])
    yield "bias-rank-2", _model(bias_shape=(1, N))
    yield "bias-length-1", _model(bias_shape=(1,))
    yield "gelu-before-opset-20", _model(opset=19,
                                         gelu=oh.make_node("Gelu", ["s"], ["Y"], domain="custom"))
    yield "not-gelu", _model(gelu=oh.make_node("Relu", ["s"], ["Y"]))
    # X's last axis unknown: the bias might broadcast against a length 1
    nodes = [oh.make_node("Add", ["X", "b"], ["s"]), _gelu()]
    yield "last-axis-unknown", make_model(nodes, [("X", F, ["n", None]), ("b", F, [N])],
                                          [("Y", F, ["n", N])], opset=20)
    yield "last-axis-other-name", make_model(nodes, [("X", F, ["n", "h1"]), ("b", F, ["h2"])],
                                             [("Y", F, ["n", None])], opset=20)


@pytest.mark.parametrize("name,model", list(_broken_models()),
                         ids=[name for name, _ in _broken_models()])
def test_broken_patterns_left_alone(name, model):
    assert_left_alone(model)


def test_read_by_a_subgraph_left_alone():
    """An If branch reads the intermediate through the outer scope."""
    inner = oh.make_graph([oh.make_node("Identity", ["s"], ["t"])], "b", [],
                          [oh.make_tensor_value_info("t", F, ["n", N])])
    node = oh.make_node("If", ["cond"], ["I"], then_branch=inner, else_branch=inner)
    model = _model(extra=[node], outputs=[("Y", F, ["n", N]), ("I", F, ["n", N])])
    model.graph.input.append(oh.make_tensor_value_info("cond", TensorProto.BOOL, []))
    assert_left_alone(model)


# -- subgraphs and functions -------------------------------------------------------


def test_inside_if_branches():
    nodes = [oh.make_node("MatMul", ["X", "W"], ["h"]), oh.make_node("Add", ["h", "bias"], ["s"]),
             _gelu()]
    model = if_model(nodes, ("Y", F, ["n", N]), [("X", F, ["n", K])], _weights(), opset=20)
    feeds = {**_feeds(), "cond": np.array(True)}
    fused = assert_fused_same(model, feeds, "BiasGelu", counts={"bias_gelu": 2})
    for graph in branches(fused):
        assert op_types(graph) == ["MatMul", "BiasGelu"]
    feeds["cond"] = np.array(False)
    np.testing.assert_allclose(run_ort(fused, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5,
                               atol=1e-5)


def test_inside_model_local_function():
    """Shapes inside a function come from its value_info only."""
    body = [oh.make_node("Add", ["x", "b"], ["s"]), _gelu()]
    value_info = [oh.make_tensor_value_info("x", F, ["n", N]),
                  oh.make_tensor_value_info("b", F, [N])]
    function = oh.make_function("local", "Act", ["x", "b"], ["Y"], body,
                                [oh.make_opsetid("", 20)], value_info=value_info)
    call = oh.make_node("Act", ["X", "bias"], ["Y"], domain="local")
    model = make_model([call], [("X", F, ["n", N])], [("Y", F, ["n", N])],
                       _weights()[1:], opset=20, functions=[function])
    feeds = {"X": np.random.default_rng(3).standard_normal((4, N)).astype(np.float32)}
    fused = assert_fused_same(model, feeds, "BiasGelu", counts={"bias_gelu": 1})
    assert op_types(fused.functions[0]) == ["BiasGelu"]
    assert {o.domain for o in fused.functions[0].opset_import} == {"", MS}
    assert {v.name for v in fused.functions[0].value_info} == {"x", "b"}  # kept
    # without the function's value_info the bias's length is unknown: left alone
    del function.value_info[:]
    assert_left_alone(make_model([call], [("X", F, ["n", N])], [("Y", F, ["n", N])],
                                 _weights()[1:], opset=20, functions=[function]))
