"""cdist: Unsqueeze/Unsqueeze/Sub/Mul/ReduceSum(/Sqrt) -> com.microsoft CDist."""

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
)

F, D, F16 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16
K = 5


def _axes(**values):
    return [numpy_helper.from_array(np.array(v, dtype=np.int64), k) for k, v in values.items()]


def _nodes(*, sqrt=False, swap_sub=False, rows_axis=1, cols_axis=0, reduce_axes="last",
           keepdims=0, old_opset=False, extra=()):
    """A [M, K], B [N, K] -> distances Y [M, N] (through s and Sqrt with ``sqrt``)."""
    if old_opset:  # axes as attributes (opset < 13)
        unsqueeze = [oh.make_node("Unsqueeze", ["A"], ["ua"], axes=[rows_axis]),
                     oh.make_node("Unsqueeze", ["B"], ["ub"], axes=[cols_axis])]
        reduce = oh.make_node("ReduceSum", ["d2"], ["s" if sqrt else "Y"], name="reduce",
                              axes=[-1], keepdims=keepdims)
    else:
        unsqueeze = [oh.make_node("Unsqueeze", ["A", "rows_axis"], ["ua"]),
                     oh.make_node("Unsqueeze", ["B", "cols_axis"], ["ub"])]
        reduce = oh.make_node("ReduceSum", ["d2", reduce_axes], ["s" if sqrt else "Y"],
                              name="reduce", keepdims=keepdims)
    sub = oh.make_node("Sub", ["ub", "ua"] if swap_sub else ["ua", "ub"], ["d"])
    nodes = [*unsqueeze, sub, oh.make_node("Mul", ["d", "d"], ["d2"]), reduce]
    if sqrt:
        nodes.append(oh.make_node("Sqrt", ["s"], ["Y"], name="sqrt"))
    return nodes + list(extra)


REDUCE_AXES = {"last": [-1], "two": [2], "middle": [1]}


def _model(dtype=F, a_shape=("M", K), b_shape=("N", K), outputs=None, old_opset=False,
           rows_axis=1, cols_axis=0, reduce_axes="last", **spelling):
    nodes = _nodes(old_opset=old_opset, rows_axis=rows_axis, cols_axis=cols_axis,
                   reduce_axes=reduce_axes, **spelling)
    inits = [] if old_opset else _axes(rows_axis=[rows_axis], cols_axis=[cols_axis],
                                       **{reduce_axes: REDUCE_AXES[reduce_axes]})
    return make_model(nodes, [("A", dtype, list(a_shape)), ("B", dtype, list(b_shape))],
                      outputs or [("Y", dtype, ["M", "N"])], inits,
                      opset=11 if old_opset else 18)


def _feeds(dtype=np.float32, m=3, n=4):
    rng = np.random.default_rng(0)
    return {"A": rng.standard_normal((m, K)).astype(dtype),
            "B": rng.standard_normal((n, K)).astype(dtype)}


@pytest.mark.parametrize("spelling", [
    pytest.param({}, id="sqeuclidean"),
    pytest.param({"sqrt": True}, id="euclidean"),
    pytest.param({"swap_sub": True}, id="sub-swapped"),
    pytest.param({"rows_axis": -2, "cols_axis": -3}, id="negative-axes"),
    pytest.param({"reduce_axes": "two"}, id="reduce-axis-2"),
    pytest.param({"old_opset": True, "sqrt": True}, id="opset-11-attributes"),
    pytest.param({"dtype": D}, id="double"),
])
def test_fused_matches_unfused(spelling):
    dtype = spelling.get("dtype", F)
    model = _model(**spelling)
    feeds = _feeds(np.float64 if dtype == D else np.float32)
    fused = assert_fused_same(model, feeds, "CDist", counts={"cdist": 1})
    (node,) = fused.graph.node
    assert (node.op_type, node.domain, list(node.input), list(node.output)) == (
        "CDist", MS, ["A", "B"], ["Y"])
    metric = "euclidean" if spelling.get("sqrt") else "sqeuclidean"
    assert {a.name: a.s.decode() for a in node.attribute} == {"metric": metric}
    assert node.name == ("sqrt" if spelling.get("sqrt") else "reduce")
    assert not fused.graph.initializer  # the axes constants went with their readers


def test_rows_unsqueezed_second():
    """The operand unsqueezed at axis 1 gives the rows, whatever the order."""
    model = _model(rows_axis=0, cols_axis=1)  # A gives the columns now
    fused = assert_fused_same(model, _feeds(), "CDist")
    assert list(fused.graph.node[0].input) == ["B", "A"]


def test_sqrt_also_read_elsewhere_keeps_squared_form():
    """A Sqrt that is not the only reader: the squared distances fuse and
    the Sqrt stays."""
    model = _model(sqrt=True, extra=[oh.make_node("Neg", ["s"], ["S"])],
                   outputs=[("Y", F, ["M", "N"]), ("S", F, ["M", "N"])])
    fused = assert_fused_same(model, _feeds(), "CDist")
    assert op_types(fused.graph) == ["CDist", "Sqrt", "Neg"]
    assert fused.graph.node[0].attribute[0].s == b"sqeuclidean"


# -- left alone -------------------------------------------------------------------


def _broken_models():
    yield "keepdims-1", _model(keepdims=1, outputs=[("Y", F, ["M", "N", 1])])
    yield "reduce-wrong-axis", _model(reduce_axes="middle", outputs=[("Y", F, ["M", K])])
    yield "same-unsqueeze-axes", _model(rows_axis=1, cols_axis=1)
    yield "a-rank-3", _model(a_shape=(2, "M", K), outputs=[("Y", F, None)])
    yield "a-rank-unknown", make_model(_nodes(), [("A", F, None), ("B", F, ["N", K])],
                                       [("Y", F, ["M", "N"])],
                                       _axes(rows_axis=[1], cols_axis=[0], last=[-1]), 18)
    yield "k-not-provably-equal", _model(a_shape=("M", "k1"), b_shape=("N", "k2"))
    yield "k-broadcast", _model(a_shape=("M", 1))
    yield "float16", _model(dtype=F16, outputs=[("Y", F16, ["M", "N"])])
    yield "extra-consumer", _model(extra=[oh.make_node("Neg", ["d"], ["E"])],
                                   outputs=[("Y", F, ["M", "N"]), ("E", F, ["M", "N", K])])
    yield "graph-output-in-middle", _model(outputs=[("Y", F, ["M", "N"]),
                                                    ("d2", F, ["M", "N", K])])
    nodes = _nodes()
    nodes[3] = oh.make_node("Mul", ["d", "ua"], ["d2"])  # not a square
    yield "not-a-square", make_model(nodes, [("A", F, ["M", K]), ("B", F, ["N", K])],
                                     [("Y", F, None)],
                                     _axes(rows_axis=[1], cols_axis=[0], last=[-1]), 18)
    # axes fed at run time: unknown
    nodes = _nodes()
    yield "axes-not-constant", make_model(
        nodes, [("A", F, ["M", K]), ("B", F, ["N", K]), ("rows_axis", TensorProto.INT64, [1])],
        [("Y", F, None)], _axes(cols_axis=[0], last=[-1]), 18)


@pytest.mark.parametrize("name,model", list(_broken_models()),
                         ids=[name for name, _ in _broken_models()])
def test_broken_patterns_left_alone(name, model):
    assert_left_alone(model)


# -- subgraphs and functions -------------------------------------------------------


def test_inside_if_branches():
    model = if_model(_nodes(sqrt=True), ("Y", F, ["M", "N"]),
                     [("A", F, ["M", K]), ("B", F, ["N", K])],
                     _axes(rows_axis=[1], cols_axis=[0], last=[-1]), opset=18)
    fused = assert_fused_same(model, {**_feeds(), "cond": np.array(True)}, "CDist",
                              counts={"cdist": 2})
    for graph in branches(fused):
        assert op_types(graph) == ["CDist"]
    # the outer axes initializers are still read by the other branch until
    # both are fused; then nothing reads them
    assert not fused.graph.initializer


def test_inside_model_local_function():
    body = [oh.make_node("Constant", [], ["rows_axis"], value_ints=[1]),
            oh.make_node("Constant", [], ["cols_axis"], value_ints=[0]),
            oh.make_node("Constant", [], ["last"], value_ints=[-1]),
            *_nodes()]
    value_info = [oh.make_tensor_value_info("A", F, ["M", K]),
                  oh.make_tensor_value_info("B", F, ["N", K])]
    function = oh.make_function("local", "Dist", ["A", "B"], ["Y"], body,
                                [oh.make_opsetid("", 18)], value_info=value_info)
    model = make_model([oh.make_node("Dist", ["A", "B"], ["Y"], domain="local")],
                       [("A", F, ["M", K]), ("B", F, ["N", K])], [("Y", F, ["M", "N"])],
                       opset=18, functions=[function])
    fused = assert_fused_same(model, _feeds(), "CDist", counts={"cdist": 1})
    assert op_types(fused.functions[0]) == ["CDist"]  # the axes Constants went too
