"""fuse(model, patterns=None) -> FusionResult(model, counts): the entry point,
the pattern objects, the support inventory and the top-level exports."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh

import onnx_light_cpu as olc
from onnx_light_cpu import fusion, support
from onnx_light_cpu.fusion import (
    BIAS_GELU,
    CDIST,
    PATTERNS,
    FusionPattern,
    FusionResult,
    fuse,
    fuse_matmul_nbits_bias,
)

from fusion_cases import MS, assert_fused_same, make_model, op_types, run_ort, run_ours

F = TensorProto.FLOAT
K, N = 6, 4


def _two_patterns_model():
    """A BiasGelu and a CDist in one graph: A -> Add(bias) -> Gelu -> G;
    distances of G's rows to B's -> Y."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(K).astype(np.float32), "bias"),
             numpy_helper.from_array(np.array([1]), "one"),
             numpy_helper.from_array(np.array([0]), "zero"),
             numpy_helper.from_array(np.array([-1]), "last")]
    nodes = [oh.make_node("Add", ["A", "bias"], ["s"]), oh.make_node("Gelu", ["s"], ["G"]),
             oh.make_node("Unsqueeze", ["G", "one"], ["ug"]),
             oh.make_node("Unsqueeze", ["B", "zero"], ["ub"]),
             oh.make_node("Sub", ["ug", "ub"], ["d"]), oh.make_node("Mul", ["d", "d"], ["d2"]),
             oh.make_node("ReduceSum", ["d2", "last"], ["Y"], keepdims=0)]
    model = make_model(nodes, [("A", F, ["M", K]), ("B", F, [N, K])], [("Y", F, ["M", N])],
                       inits, opset=20)
    feeds = {"A": rng.standard_normal((3, K)).astype(np.float32),
             "B": rng.standard_normal((N, K)).astype(np.float32)}
    return model, feeds


def test_result_is_model_and_counts():
    model, feeds = _two_patterns_model()
    result = fuse(model)
    assert isinstance(result, FusionResult) and isinstance(result, tuple)
    fused, counts = result
    assert isinstance(fused, onnx.ModelProto) and fused is not model
    assert list(counts) == [p.name for p in PATTERNS]  # every pattern asked, in order
    assert counts == {"bias_gelu": 1, "cdist": 1, "fused_conv": 0, "group_query_attention": 0,
                      "linear_attention": 0, "matmul_nbits_bias": 0, "quick_gelu": 0}
    assert result.total == 2
    assert op_types(fused.graph) == ["BiasGelu", "CDist"]
    assert_fused_same(model, feeds, "CDist")


@pytest.mark.parametrize("patterns", [["bias_gelu"], [BIAS_GELU], "bias_gelu", BIAS_GELU,
                                      ("bias_gelu", BIAS_GELU)])
def test_patterns_by_name_or_object(patterns):
    model, _ = _two_patterns_model()
    result = fuse(model, patterns)
    assert result.counts == {"bias_gelu": 1}
    assert op_types(result.model.graph)[:2] == ["BiasGelu", "Unsqueeze"]


def test_order_of_patterns_is_the_callers():
    model, _ = _two_patterns_model()
    assert list(fuse(model, [CDIST, BIAS_GELU]).counts) == ["cdist", "bias_gelu"]


def test_bad_arguments():
    model, _ = _two_patterns_model()
    with pytest.raises(ValueError, match="unknown fusion pattern 'gelu'"):
        fuse(model, ["gelu"])
    with pytest.raises(TypeError, match="FusionPattern or its name"):
        fuse(model, [3])
    with pytest.raises(TypeError, match="ModelProto"):
        fuse(model.graph)
    with pytest.raises(TypeError, match="ModelProto"):
        fuse_matmul_nbits_bias(model.graph)


def test_empty_pattern_list_copies_the_model():
    model, _ = _two_patterns_model()
    result = fuse(model, [])
    assert result.counts == {} and result.model.SerializeToString() == model.SerializeToString()


def test_patterns_are_named_objects():
    names = [p.name for p in PATTERNS]
    assert len(set(names)) == len(names)
    kernels = olc.registered_kernel_names()
    for p in PATTERNS:
        assert isinstance(p, FusionPattern) and p.rules and p.doc
        assert p.produces[0] == MS and p.produces[1] in kernels
        assert p.name in repr(p)
        with pytest.raises(AttributeError):
            p.name = "other"


def test_support_inventory_lists_every_pattern():
    assert support.FUSION_PATTERNS == {p.produces: (p.name,) for p in PATTERNS}
    shown = {(r.domain, r.op_type): r.fusion_patterns for r in olc.operator_support()
             if r.fusion_patterns}
    assert shown == support.FUSION_PATTERNS


def test_top_level_exports():
    assert olc.fuse is fusion.fuse
    assert olc.FusionResult is FusionResult and olc.FusionPattern is FusionPattern
    assert {"fuse", "FusionResult", "FusionPattern"} <= set(olc.__all__)
    with pytest.raises(AttributeError):
        olc.no_such_name  # noqa: B018


def test_importing_the_package_does_not_load_the_rewriter():
    code = ("import sys, onnx_light_cpu as olc; assert 'onnxscript' not in sys.modules; "
            "olc.fuse; assert 'onnxscript' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_loop_body_inside_if_branch():
    """A Loop body inside an If branch is rewritten (outer names read two
    levels up)."""
    gelu = [oh.make_node("Add", ["x", "b"], ["s"]), oh.make_node("Gelu", ["s"], ["y"])]
    body = oh.make_graph(
        [oh.make_node("Identity", ["c_in"], ["c_out"]), *gelu], "body",
        [oh.make_tensor_value_info("i", TensorProto.INT64, []),
         oh.make_tensor_value_info("c_in", TensorProto.BOOL, [])],
        [oh.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         oh.make_tensor_value_info("y", F, [2, K])])
    loop = oh.make_node("Loop", ["n", "cond"], ["ys"], body=body)
    then = oh.make_graph([loop], "then", [], [oh.make_tensor_value_info("ys", F, None)])
    other = oh.make_graph([oh.make_node("Identity", ["x"], ["z"])], "else", [],
                          [oh.make_tensor_value_info("z", F, None)])
    node = oh.make_node("If", ["cond"], ["out"], then_branch=then, else_branch=other)
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal(K).astype(np.float32), "b"),
             numpy_helper.from_array(np.array(2), "n")]
    model = make_model([node], [("x", F, [2, K]), ("cond", TensorProto.BOOL, [])],
                       [("out", F, None)], inits, opset=20)
    result = fuse(model)
    assert result.counts["bias_gelu"] == 1
    then = next(a.g for a in result.model.graph.node[0].attribute if a.name == "then_branch")
    loop_body = then.node[0].attribute[0].g
    assert op_types(loop_body) == ["Identity", "BiasGelu"]
    feeds = {"x": rng.standard_normal((2, K)).astype(np.float32), "cond": np.array(True)}
    want = run_ort(model, feeds)[0]
    np.testing.assert_allclose(run_ort(result.model, feeds)[0], want, rtol=1e-5, atol=1e-5)
    got, names = run_ours(result.model, feeds)
    assert "onnx_light_cpu::BiasGelu" in names
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)


def test_if_inside_model_local_function():
    """A subgraph of a function: rewritten, and the function (not only the
    model) imports com.microsoft."""
    branch = oh.make_graph([oh.make_node("Add", ["x", "b"], ["s"]),
                            oh.make_node("Gelu", ["s"], ["y"])], "branch", [],
                           [oh.make_tensor_value_info("y", F, [2, K])])
    body = [oh.make_node("If", ["c"], ["Y"], then_branch=branch, else_branch=branch)]
    value_info = [oh.make_tensor_value_info("x", F, [2, K]),
                  oh.make_tensor_value_info("b", F, [K])]
    function = oh.make_function("local", "Act", ["x", "b", "c"], ["Y"], body,
                                [oh.make_opsetid("", 20)], value_info=value_info)
    call = oh.make_node("Act", ["X", "bias", "cond"], ["Y"], domain="local")
    rng = np.random.default_rng(5)
    model = make_model([call], [("X", F, [2, K]), ("cond", TensorProto.BOOL, [])],
                       [("Y", F, [2, K])],
                       [numpy_helper.from_array(rng.standard_normal(K).astype(np.float32),
                                                "bias")],
                       opset=20, functions=[function])
    feeds = {"X": rng.standard_normal((2, K)).astype(np.float32), "cond": np.array(False)}
    fused = assert_fused_same(model, feeds, "BiasGelu", counts={"bias_gelu": 2})
    assert {(o.domain, o.version) for o in fused.functions[0].opset_import} == {("", 20), (MS, 1)}


def test_large_weights_pass_through_unread():
    """Weights of LARGE_BYTES and more go through the rewrite as placeholders
    and come back in the result byte for byte; the input keeps its own."""
    from onnx_light_cpu.fusion import _engine

    rng = np.random.default_rng(3)
    k, n = 512, 1024                      # W: 2 MiB, bias: 4 KiB
    weight = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias")
    assert weight.ByteSize() >= _engine.LARGE_BYTES > bias.ByteSize()
    nodes = [oh.make_node("MatMul", ["X", "W"], ["h"]), oh.make_node("Add", ["h", "bias"], ["s"]),
             oh.make_node("Gelu", ["s"], ["Y"])]
    model = make_model(nodes, [("X", F, ["m", k])], [("Y", F, ["m", n])], [weight, bias],
                       opset=20)
    before = model.SerializeToString()
    fused = assert_fused_same(model, {"X": rng.standard_normal((2, k)).astype(np.float32)},
                              "BiasGelu", counts={"bias_gelu": 1})
    assert model.SerializeToString() == before
    out = {t.name: t for t in fused.graph.initializer}
    assert out["W"].SerializeToString() == weight.SerializeToString()
    assert not out["W"].external_data and out["W"].data_location == TensorProto.DEFAULT
