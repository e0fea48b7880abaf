"""Helpers of the fusion tests: running a model by our kernels and by ONNX
Runtime, comparing a fused model with the original, checking a model was
left alone."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.fusion import fuse

MS = "com.microsoft"


def run_ours(model: onnx.ModelProto, feeds: dict) -> tuple[list, list[str]]:
    """Outputs and used kernel names of ``model`` run by our kernels."""
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds), olc.used_kernel_names(sess)


def run_ort(model: onnx.ModelProto, feeds: dict) -> list:
    """Outputs of ONNX Runtime with its own fusions off (it must run the
    graph as written)."""
    ort = pytest.importorskip("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def op_types(graph) -> list[str]:
    return [n.op_type for n in graph.node]


def assert_topological(graph) -> None:
    """Every node input exists before the node runs (outer names aside)."""
    known = {""} | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        missing = [name for name in node.input if name not in known]
        assert not missing, f"{node.op_type} reads {missing} before they are produced"
        known.update(node.output)


def assert_fused_same(model, feeds, kernel, *, counts=None, tol=1e-5, ort=True):
    """Fuses ``model``, checks the report (``counts``: pattern -> rewrites)
    and the input left untouched, then runs both models by our kernels (the
    fused one running ``kernel``) and by ONNX Runtime: same outputs.
    Returns the fused model."""
    before = model.SerializeToString()
    result = fuse(model)
    assert model.SerializeToString() == before, "fuse modified its input"
    if counts is not None:
        assert {k: v for k, v in result.counts.items() if v} == counts, result.counts
    fused = result.model
    assert_topological(fused.graph)
    onnx.checker.check_model(fused)
    want, _ = run_ours(model, feeds)
    got, names = run_ours(fused, feeds)
    assert f"onnx_light_cpu::{kernel}" in names, names
    _assert_close(got, want, tol, "ours")
    if ort:
        _assert_close(run_ort(fused, feeds), run_ort(model, feeds), tol, "onnxruntime")
        _assert_close(got, run_ort(model, feeds), tol, "ours fused vs onnxruntime")
    return fused


def _assert_close(got, want, tol, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, i, g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                   atol=tol, err_msg=f"{what}: output {i}")


def assert_left_alone(model):
    """No pattern rewrites ``model``: the result is an exact copy."""
    before = model.SerializeToString()
    result = fuse(model)
    assert result.total == 0, result.counts
    assert result.model.SerializeToString() == before
    assert model.SerializeToString() == before


def make_model(nodes, inputs, outputs, initializers=(), opset=21, functions=(),
               value_info=()):
    """A model of ``nodes``: inputs and outputs as (name, elem_type, shape)."""
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info(*i) for i in inputs],
        [oh.make_tensor_value_info(*o) for o in outputs], initializer=list(initializers),
        value_info=list(value_info))
    opsets = [oh.make_opsetid("", opset)]
    if any(n.domain == MS for n in nodes):
        opsets.append(oh.make_opsetid(MS, 1))
    if functions:
        opsets.append(oh.make_opsetid("local", 1))
    return oh.make_model(graph, opset_imports=opsets, ir_version=10,
                         functions=list(functions))


def if_model(branch_nodes, branch_output, inputs, initializers=(), opset=21):
    """A model whose If runs ``branch_nodes`` in both branches (reading the
    main graph's names from the outer scope); ``branch_output`` is
    (name, elem_type, shape) of their output."""
    name, elem, shape = branch_output
    branches = {}
    for key in ("then_branch", "else_branch"):
        nodes = []
        for node in branch_nodes:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            nodes.append(copy)
        branches[key] = oh.make_graph(nodes, key, [],
                                      [oh.make_tensor_value_info(name, elem, shape)])
    node = oh.make_node("If", ["cond"], ["out"], **branches)
    return make_model([node], list(inputs) + [("cond", onnx.TensorProto.BOOL, [])],
                      [("out", elem, shape)], initializers, opset)


def branches(model):
    """The then and else branches of the If of ``model``."""
    return [a.g for a in model.graph.node[0].attribute]
