"""quick_gelu: X * Sigmoid(X) (SiLU) -> com.microsoft QuickGelu(alpha=1)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
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

F, F16, D = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE


def _feeds(dtype=np.float32):
    x = np.random.default_rng(0).standard_normal((3, 16)) * 4
    return {"X": x.astype(dtype)}


def _model(mul=("X", "s"), dtype=F, outputs=None, extra=()):
    """X -> Sigmoid -> s -> Mul -> Y (the SwiGLU gate of the builder's MLP)."""
    nodes = [oh.make_node("Sigmoid", ["X"], ["s"]), oh.make_node("Mul", list(mul), ["Y"],
                                                                 name="gate"), *extra]
    return make_model(nodes, [("X", dtype, ["n", 16])], outputs or [("Y", dtype, ["n", 16])])


@pytest.mark.parametrize("mul", [("X", "s"), ("s", "X")], ids=["x-first", "sigmoid-first"])
@pytest.mark.parametrize("dtype,np_dtype", [(F, np.float32), (F16, np.float16),
                                            (D, np.float64)], ids=["float", "float16", "double"])
def test_fused_matches_unfused(mul, dtype, np_dtype):
    tol = 2e-3 if np_dtype == np.float16 else 1e-6
    fused = assert_fused_same(_model(mul, dtype), _feeds(np_dtype), "QuickGelu",
                              counts={"quick_gelu": 1}, tol=tol)
    assert op_types(fused.graph) == ["QuickGelu"]
    node = fused.graph.node[0]
    assert node.domain == MS and node.name == "gate"
    assert [(a.name, a.f) for a in node.attribute] == [("alpha", 1.0)]


def test_in_an_if_branch():
    nodes = [oh.make_node("Sigmoid", ["X"], ["s"]), oh.make_node("Mul", ["X", "s"], ["z"])]
    model = if_model(nodes, ("z", F, ["n", 16]), [("X", F, ["n", 16])])
    fused = assert_fused_same(model, {**_feeds(), "cond": np.array(True)}, "QuickGelu",
                              counts={"quick_gelu": 2})    # both branches
    assert [op_types(b) for b in branches(fused)] == [["QuickGelu"]] * 2


@pytest.mark.parametrize("case", ["sigmoid-read-twice", "sigmoid-output", "other-operand",
                                  "integer"])
def test_left_alone(case):
    if case == "sigmoid-read-twice":
        model = _model(extra=[oh.make_node("Neg", ["s"], ["t"])],
                       outputs=[("Y", F, ["n", 16]), ("t", F, ["n", 16])])
    elif case == "sigmoid-output":
        model = _model(outputs=[("Y", F, ["n", 16]), ("s", F, ["n", 16])])
    elif case == "other-operand":
        nodes = [oh.make_node("Sigmoid", ["X"], ["s"]), oh.make_node("Neg", ["X"], ["x2"]),
                 oh.make_node("Mul", ["x2", "s"], ["Y"])]
        model = make_model(nodes, [("X", F, ["n", 16])], [("Y", F, ["n", 16])])
    else:  # Sigmoid has no integer kernel: an int graph cannot exist; Mul of ints alone
        nodes = [oh.make_node("Mul", ["X", "X"], ["Y"])]
        model = make_model(nodes, [("X", TensorProto.INT32, ["n"])],
                           [("Y", TensorProto.INT32, ["n"])])
    assert_left_alone(model)
