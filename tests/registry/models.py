"""Small models for the registration tests."""

from __future__ import annotations

import contextlib

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as oh

OPSET = oh.make_opsetid("", 18)


def _vi(name, elem=T.FLOAT, shape=(None,)):
    return oh.make_tensor_value_info(name, elem, list(shape))


def chain(*ops: str) -> onnx.ModelProto:
    """x -> ops[0] -> ops[1] ... -> y, float32 1-D."""
    names = ["x"] + [f"t{i}" for i in range(len(ops) - 1)] + ["y"]
    nodes = [oh.make_node(op, [names[i]], [names[i + 1]]) for i, op in enumerate(ops)]
    graph = oh.make_graph(nodes, "chain", [_vi("x")], [_vi("y")])
    return oh.make_model(graph, opset_imports=[OPSET])


def if_model(then_op="Exp", else_op="Abs") -> onnx.ModelProto:
    """y = cond ? then_op(x) : else_op(x); both bodies read x from the outer scope."""
    def body(op, out):
        return oh.make_graph([oh.make_node(op, ["x"], [out])], f"{op}_body", [], [_vi(out)])

    node = oh.make_node("If", ["cond"], ["y"], then_branch=body(then_op, "a"),
                        else_branch=body(else_op, "b"))
    graph = oh.make_graph([node], "if", [_vi("cond", T.BOOL, ()), _vi("x")], [_vi("y")])
    return oh.make_model(graph, opset_imports=[OPSET])


def loop_model() -> onnx.ModelProto:
    """Applies Exp to the carried value `trips` times."""
    body = oh.make_graph(
        [oh.make_node("Identity", ["cond_in"], ["cond_out"]),
         oh.make_node("Exp", ["v_in"], ["v_out"])],
        "loop_body",
        [_vi("i", T.INT64, ()), _vi("cond_in", T.BOOL, ()), _vi("v_in")],
        [_vi("cond_out", T.BOOL, ()), _vi("v_out")],
    )
    node = oh.make_node("Loop", ["trips", "cond", "x"], ["y"], body=body)
    graph = oh.make_graph(
        [node], "loop", [_vi("trips", T.INT64, ()), _vi("cond", T.BOOL, ()), _vi("x")], [_vi("y")]
    )
    return oh.make_model(graph, opset_imports=[OPSET])


def scan_model() -> onnx.ModelProto:
    """Scan over rows of x (2-D), emitting Tanh of each row."""
    body = oh.make_graph(
        [oh.make_node("Identity", ["s_in"], ["s_out"]), oh.make_node("Tanh", ["row"], ["out"])],
        "scan_body",
        [_vi("s_in"), _vi("row")],
        [_vi("s_out"), _vi("out")],
    )
    node = oh.make_node("Scan", ["s", "x"], ["s_final", "y"], body=body, num_scan_inputs=1)
    graph = oh.make_graph([node], "scan", [_vi("s"), _vi("x", shape=(None, None))],
                          [_vi("s_final"), _vi("y", shape=(None, None))])
    return oh.make_model(graph, opset_imports=[OPSET])


def local_function_model() -> onnx.ModelProto:
    """y = custom.SigmoidThenLog(x), a model-local function."""
    fn = oh.make_function(
        "custom", "SigmoidThenLog", ["a"], ["b"],
        [oh.make_node("Sigmoid", ["a"], ["s"]), oh.make_node("Log", ["s"], ["b"])],
        [OPSET],
    )
    graph = oh.make_graph([oh.make_node("SigmoidThenLog", ["x"], ["y"], domain="custom")],
                          "fn", [_vi("x")], [_vi("y")])
    return oh.make_model(graph, opset_imports=[OPSET, oh.make_opsetid("custom", 1)],
                         functions=[fn])


def mish_model() -> onnx.ModelProto:
    """Mish has no onnx.reference implementation: without our kernel (see
    ``without_mish_kernel``) its body (Softplus, Tanh, Mul) is expanded into
    a nested evaluator."""
    graph = oh.make_graph([oh.make_node("Mish", ["x"], ["y"])], "mish", [_vi("x")], [_vi("y")])
    return oh.make_model(graph, opset_imports=[OPSET])


X = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], dtype=np.float32)


@contextlib.contextmanager
def without_mish_kernel():
    """Our Mish kernel out of the inventory (it accepts no opset up to 19),
    so that mish_model runs Mish's function body."""
    from onnx_light_cpu.ops.unary import Mish
    from onnx_light_cpu.registry import hook

    saved = Mish.since_version
    Mish.since_version = 20
    hook._inventory.cache_clear()
    try:
        yield
    finally:
        Mish.since_version = saved
        hook._inventory.cache_clear()
