"""matmul_nbits_bias: MatMulNBits + Add(constant bias[N]) -> one MatMulNBits.

Fused and unfused models give the same result (ONNX Runtime, and our kernel
once it is registered); every pattern that does not match is left alone; the
input model is never modified.  ``fuse_matmul_nbits_bias(model)`` is
``fuse(model, ["matmul_nbits_bias"]).model``.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.fusion import fuse, fuse_matmul_nbits_bias

MS = "com.microsoft"
K, N, BLOCK = 80, 24, 32  # K not a multiple of the block
BLOCKS = -(-K // BLOCK)
FLOAT = TensorProto.FLOAT


def _weights(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "B": rng.integers(0, 256, (N, BLOCKS, BLOCK // 2), dtype=np.uint8),
        "scales": (rng.uniform(0.5, 1.5, (N, BLOCKS)) * 0.05).astype(dtype),
        "zp": rng.integers(0, 256, (N, (BLOCKS + 1) // 2), dtype=np.uint8),
        "bias": rng.standard_normal(N).astype(dtype),
    }


def _matmul(inputs=("A", "B", "scales"), output="y", **extra):
    return oh.make_node("MatMulNBits", list(inputs), [output], domain=MS, name="mm",
                        K=K, N=N, bits=4, block_size=BLOCK, **extra)


def _model(nodes, initializers, inputs=None, outputs=("Y",), elem=FLOAT, rank=2,
           value_info=(), functions=()):
    a_shape = ["batch", 3, K][-rank:] if rank != 2 else ["M", K]
    inputs = inputs if inputs is not None else [oh.make_tensor_value_info("A", elem, a_shape)]
    graph = oh.make_graph(
        nodes, "g", inputs, [oh.make_tensor_value_info(name, elem, None) for name in outputs],
        initializer=initializers, value_info=list(value_info),
    )
    opsets = [oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)]
    if functions:
        opsets.append(oh.make_opsetid("local", 1))
    return oh.make_model(graph, opset_imports=opsets, ir_version=10, functions=list(functions))


def _inits(w, *names):
    return [numpy_helper.from_array(w[name], name) for name in names]


def _bias_model(*, dtype=np.float32, bias_first=False, constant=None, zero_points=False,
                rank=2, value_info=False, constant_late=False):
    """A -> MatMulNBits -> y -> Add(y, bias) -> Y, in the requested spelling
    (``constant_late``: the bias Constant node between MatMulNBits and Add)."""
    w = _weights(dtype)
    elem = oh.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inputs = ["A", "B", "scales"] + (["zp"] if zero_points else [])
    nodes, inits = [], _inits(w, "B", "scales") + (_inits(w, "zp") if zero_points else [])
    if constant == "value":
        nodes.append(oh.make_node("Constant", [], ["bias"],
                                  value=numpy_helper.from_array(w["bias"])))
    elif constant == "value_floats":
        nodes.append(oh.make_node("Constant", [], ["bias"], value_floats=w["bias"].tolist()))
    else:
        inits += _inits(w, "bias")
    nodes.insert(len(nodes) if constant_late else 0, _matmul(inputs))
    nodes.append(oh.make_node("Add", ["bias", "y"] if bias_first else ["y", "bias"], ["Y"],
                              name="add"))
    vi = [oh.make_tensor_value_info("y", elem, None)] if value_info else []
    return _model(nodes, inits, elem=elem, rank=rank, value_info=vi)


def _activation(model, dtype=np.float32, seed=1):
    shape = [d.dim_value or 2 for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def _assert_topological(graph):
    """Every node input exists before the node runs."""
    known = {""} | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        missing = [name for name in node.input if name not in known]
        assert not missing, f"{node.op_type} reads {missing} before they are produced"
        known.update(node.output)


def _run_ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ours_registered() -> bool:
    return "MatMulNBits" in olc.registered_kernel_names()


def _run_ours(model, feeds):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    out = sess.run(None, feeds)
    assert "onnx_light_cpu::MatMulNBits" in olc.used_kernel_names(sess)
    return out


SPELLINGS = [
    pytest.param({}, id="initializer"),
    pytest.param({"bias_first": True}, id="bias-first"),
    pytest.param({"constant": "value"}, id="constant-node"),
    pytest.param({"constant": "value_floats", "bias_first": True}, id="constant-floats"),
    pytest.param({"constant": "value", "constant_late": True}, id="constant-after-matmul"),
    pytest.param({"zero_points": True}, id="zero-points"),
    pytest.param({"rank": 3, "value_info": True}, id="rank3-value-info"),
    pytest.param({"dtype": np.float16}, id="float16"),
]


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_fused_matches_unfused(spelling):
    dtype = spelling.get("dtype", np.float32)
    model = _bias_model(**spelling)
    fused = fuse_matmul_nbits_bias(model)

    ops = [n.op_type for n in fused.graph.node]
    assert ops == (["Constant", "MatMulNBits"] if "constant" in spelling else ["MatMulNBits"])
    _assert_topological(fused.graph)
    node = fused.graph.node[-1]
    assert node.output == ["Y"] and node.name == "mm"
    assert list(node.input[5:]) == ["bias"] and len(node.input) == 6
    assert node.input[3] == ("zp" if spelling.get("zero_points") else "") and node.input[4] == ""
    assert {a.name: a.i for a in node.attribute}["N"] == N
    assert "y" not in {v.name for v in fused.graph.value_info}
    assert [o.name for o in fused.graph.output] == ["Y"]

    feeds = {"A": _activation(model, dtype)}
    tol = 2e-3 if dtype == np.float16 else 1e-5
    expected = _run_ort(model, feeds)[0]
    np.testing.assert_allclose(_run_ort(fused, feeds)[0].astype(np.float64),
                               expected.astype(np.float64), rtol=tol, atol=tol)
    if _ours_registered():
        np.testing.assert_allclose(_run_ours(fused, feeds)[0].astype(np.float64),
                                   _run_ours(model, feeds)[0].astype(np.float64),
                                   rtol=tol, atol=tol)


def test_ours_runs_the_fused_model():
    if not _ours_registered():
        pytest.skip("MatMulNBits is not registered in onnx_light_cpu yet")
    model = fuse_matmul_nbits_bias(_bias_model())
    feeds = {"A": _activation(model)}
    np.testing.assert_allclose(_run_ours(model, feeds)[0], _run_ort(model, feeds)[0],
                               rtol=1e-5, atol=1e-5)


def test_empty_bias_slot_is_filled():
    w = _weights()
    nodes = [_matmul(["A", "B", "scales", "", "", ""]), oh.make_node("Add", ["y", "bias"], ["Y"])]
    fused = fuse_matmul_nbits_bias(_model(nodes, _inits(w, "B", "scales", "bias")))
    (node,) = fused.graph.node
    assert list(node.input) == ["A", "B", "scales", "", "", "bias"]


def test_input_model_not_modified():
    for spelling in ({}, {"constant": "value"}, {"value_info": True, "zero_points": True}):
        model = _bias_model(**spelling)
        before = model.SerializeToString()
        fused = fuse_matmul_nbits_bias(model)
        assert model.SerializeToString() == before
        assert fused is not model and fused.SerializeToString() != before


# -- patterns left alone ---------------------------------------------------------


def _no_match_models():
    w = _weights()
    base = _inits(w, "B", "scales")
    add = oh.make_node("Add", ["y", "bias"], ["Y"])
    bias_2d = numpy_helper.from_array(w["bias"].reshape(1, N), "bias")
    yield "bias-2d", _model([_matmul(), add], base + [bias_2d])
    short = numpy_helper.from_array(w["bias"][:1], "bias")
    yield "bias-length-1", _model([_matmul(), add], base + [short])
    used_twice = [_matmul(), add, oh.make_node("Relu", ["y"], ["R"])]
    yield "output-used-twice", _model(used_twice, base + _inits(w, "bias"), outputs=("Y", "R"))
    bias_input = [oh.make_tensor_value_info("A", FLOAT, ["M", K]),
                  oh.make_tensor_value_info("bias", FLOAT, [N])]
    yield "bias-graph-input", _model([_matmul(), add], base, inputs=bias_input)
    # An initializer that is also a graph input can be fed: not a constant.
    yield "bias-overridable", _model([_matmul(), add], base + _inits(w, "bias"),
                                     inputs=bias_input)
    computed = [_matmul(), oh.make_node("Relu", ["c"], ["bias"]), add]
    yield "bias-computed", _model(computed, base + [numpy_helper.from_array(w["bias"], "c")])
    has_bias = _matmul(["A", "B", "scales", "", "", "b0"])
    yield "already-has-bias", _model([has_bias, add],
                                     base + _inits(w, "bias")
                                     + [numpy_helper.from_array(w["bias"], "b0")])
    yield "graph-output", _model([_matmul(), add], base + _inits(w, "bias"),
                                 outputs=("Y", "y"))
    yield "add-y-twice", _model([_matmul(), oh.make_node("Add", ["y", "y"], ["Y"])], base)
    yield "not-add", _model([_matmul(), oh.make_node("Sub", ["y", "bias"], ["Y"])],
                            base + _inits(w, "bias"))
    f16_bias = numpy_helper.from_array(w["bias"].astype(np.float16), "bias")
    yield "bias-other-type", _model([_matmul(), add], base + [f16_bias])
    # The outer value read inside an If branch: a second consumer.
    branch = oh.make_graph([oh.make_node("Identity", ["y"], ["t"])], "then", [],
                           [oh.make_tensor_value_info("t", FLOAT, None)])
    if_node = oh.make_node("If", ["cond"], ["I"], then_branch=branch, else_branch=branch)
    inputs = [oh.make_tensor_value_info("A", FLOAT, ["M", K]),
              oh.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    yield "read-by-subgraph", _model([_matmul(), add, if_node], base + _inits(w, "bias"),
                                     inputs=inputs, outputs=("Y", "I"))


@pytest.mark.parametrize("name,model", list(_no_match_models()),
                         ids=[name for name, _ in _no_match_models()])
def test_non_matching_left_alone(name, model):
    before = model.SerializeToString()
    fused = fuse_matmul_nbits_bias(model)
    assert fused.SerializeToString() == before
    assert model.SerializeToString() == before


# -- subgraphs and functions -------------------------------------------------------


def test_inside_if_branches():
    w = _weights()
    branch_nodes = [_matmul(), oh.make_node("Add", ["y", "bias"], ["Y"])]
    # The branch's own initializers: constants of the branch.
    then = oh.make_graph(branch_nodes, "then", [], [oh.make_tensor_value_info("Y", FLOAT, None)],
                         initializer=_inits(w, "B", "scales", "bias"))
    other = oh.make_graph([oh.make_node("Identity", ["A"], ["Z"])], "else", [],
                          [oh.make_tensor_value_info("Z", FLOAT, None)])
    if_node = oh.make_node("If", ["cond"], ["out"], then_branch=then, else_branch=other)
    inputs = [oh.make_tensor_value_info("A", FLOAT, ["M", K]),
              oh.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    model = _model([if_node], [], inputs=inputs, outputs=("out",))
    fused = fuse_matmul_nbits_bias(model)
    then_fused = next(a.g for a in fused.graph.node[0].attribute if a.name == "then_branch")
    assert [n.op_type for n in then_fused.node] == ["MatMulNBits"]
    assert list(then_fused.node[0].input) == ["A", "B", "scales", "", "", "bias"]
    assert then_fused.node[0].output == ["Y"]

    feeds = {"A": np.random.default_rng(3).uniform(-1, 1, (2, K)).astype(np.float32),
             "cond": np.array(True)}
    np.testing.assert_allclose(_run_ort(fused, feeds)[0], _run_ort(model, feeds)[0],
                               rtol=1e-5, atol=1e-5)


def test_inside_model_local_function():
    w = _weights()
    body = [
        oh.make_node("Constant", [], ["B"], value=numpy_helper.from_array(w["B"])),
        oh.make_node("Constant", [], ["scales"], value=numpy_helper.from_array(w["scales"])),
        oh.make_node("Constant", [], ["bias"], value=numpy_helper.from_array(w["bias"])),
        _matmul(),
        oh.make_node("Add", ["bias", "y"], ["Y"]),
    ]
    function = oh.make_function("local", "Proj", ["A"], ["Y"], body,
                                [oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])
    model = _model([oh.make_node("Proj", ["A"], ["Y"], domain="local")], [],
                   functions=[function])
    fused = fuse_matmul_nbits_bias(model)
    ops = [n.op_type for n in fused.functions[0].node]
    assert ops == ["Constant"] * 3 + ["MatMulNBits"]
    assert list(fused.functions[0].node[-1].input) == ["A", "B", "scales", "", "", "bias"]
    assert model.functions[0].node[-1].op_type == "Add"  # the input is untouched

    feeds = {"A": _activation(model)}
    np.testing.assert_allclose(_run_ort(fused, feeds)[0], _run_ort(model, feeds)[0],
                               rtol=1e-5, atol=1e-5)


def test_two_projections_and_unrelated_nodes():
    """Two matches in one graph; a Relu in between stays where it is."""
    w = _weights()
    w2 = _weights(seed=5)
    nodes = [
        _matmul(),
        oh.make_node("Add", ["y", "bias"], ["h"]),
        oh.make_node("Relu", ["h"], ["r"]),
        oh.make_node("Slice", ["r", "starts", "ends", "axes"], ["r2"]),
        _matmul(["A", "B2", "scales2"], output="y2"),
        oh.make_node("Add", ["bias2", "y2"], ["h2"]),
        oh.make_node("Add", ["h2", "r"], ["Y"]),
    ]
    nodes[4].name = "mm2"
    inits = _inits(w, "B", "scales", "bias") + [
        numpy_helper.from_array(w2["B"], "B2"), numpy_helper.from_array(w2["scales"], "scales2"),
        numpy_helper.from_array(w2["bias"], "bias2"),
        numpy_helper.from_array(np.array([0]), "starts"),
        numpy_helper.from_array(np.array([N]), "ends"),
        numpy_helper.from_array(np.array([-1]), "axes"),
    ]
    model = _model(nodes, inits, outputs=("Y", "r2"))
    fused = fuse_matmul_nbits_bias(model)
    _assert_topological(fused.graph)
    assert [(n.op_type, list(n.output)) for n in fused.graph.node] == [
        ("MatMulNBits", ["h"]), ("Relu", ["r"]), ("Slice", ["r2"]),
        ("MatMulNBits", ["h2"]), ("Add", ["Y"])]
    feeds = {"A": _activation(model)}
    for got, want in zip(_run_ort(fused, feeds), _run_ort(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_wrapper_is_fuse_with_the_pattern():
    model = _bias_model(zero_points=True)
    result = fuse(model, ["matmul_nbits_bias"])
    assert result.counts == {"matmul_nbits_bias": 1}
    assert result.model.SerializeToString() == fuse_matmul_nbits_bias(model).SerializeToString()
    assert fuse(model).counts["matmul_nbits_bias"] == 1


def test_rejects_non_model():
    with pytest.raises(TypeError, match="ModelProto"):
        fuse_matmul_nbits_bias(_bias_model().graph)
