"""Pad: every mode, opsets 2/11/13/18/19/21/23, negative pads, every type.

Oracles: ONNX Runtime (every mode, negative pads: the built-in refuses
them) and the onnx.reference built-in (np.pad) for non-negative pads.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from tests.differential import (
    THREAD_COUNTS,
    check_node,
    error_message,
    layouts,
    node_model,
    run_ours,
    same_bits,
)

ort = pytest.importorskip("onnxruntime")

KERNEL = "onnx_light_cpu::Pad"
MODES = ("constant", "reflect", "edge", "wrap")


def ort_outputs(model, inputs, threads=1):
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for out in model.graph.output:
        out.type.tensor_type.elem_type = model.graph.input[0].type.tensor_type.elem_type
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {f"x{i}": np.ascontiguousarray(a) for i, a in enumerate(inputs)})


def pad_inputs(x, pads, value=None, axes=None):
    inputs = [x, np.array(pads, dtype=np.int64)]
    if value is not None or axes is not None:
        inputs.append(np.array(0 if value is None else value, dtype=x.dtype))
    if axes is not None:
        inputs.append(np.array(axes, dtype=np.int64))
    return inputs


def ort_oracle(opset, mode):
    def oracle(*inputs):
        return ort_outputs(node_model("Pad", inputs, opset=opset, mode=mode), inputs)
    return oracle


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pads", [
    (0, 0, 1, 2, 0, 0, 3, 1), (1, 0, 0, 1, 0, 2, 2, 0), (0, 1, -1, 2, 0, 0, 2, -2),
    (0, 0, -2, 0, 0, 0, 0, -1), (0, 0, 0, 0, 0, 0, 0, 0), (0, 0, 3, 3, 0, 0, 3, 3)])
def test_modes_against_ort(mode, pads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    check_node("Pad", pad_inputs(x, pads), oracle=ort_oracle(19, mode), opset=19, mode=mode)


@pytest.mark.parametrize("mode", ("constant", "reflect", "edge"))
def test_against_builtin(mode):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 9, 11)).astype(np.float64)
    check_node("Pad", pad_inputs(x, (1, 2, 3, 0, 4, 2)), opset=13, mode=mode)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, bfloat16, np.int8,
                                   np.uint8, np.int16, np.int32, np.int64, np.uint64, np.bool_,
                                   np.complex64, np.complex128])
@pytest.mark.parametrize("mode", MODES)
def test_types(dtype, mode):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 6)) * 10).astype(dtype)
    value = np.array(3).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * (rng.standard_normal((4, 6)) * 10).astype(dtype)
        value = np.array(3 - 2j).astype(dtype)
    inputs = pad_inputs(x, (1, 2, 2, 1), value=value)
    expected = [np.pad(x, ((1, 2), (2, 1)), mode=mode,
                       **({"constant_values": value} if mode == "constant" else {}))]
    if np.dtype(dtype).kind == "c":  # the differential check compares real parts only
        model = node_model("Pad", inputs, opset=19, mode=mode)
        for threads in THREAD_COUNTS:
            got, names, _ = run_ours(model, inputs, threads)
            assert names == [KERNEL]
            assert same_bits(got[0], expected[0])
        return
    check_node("Pad", inputs, oracle=lambda *a: expected, opset=19, mode=mode)


def test_strings():
    x = np.array([["a", "b"], ["c", "d"]], dtype=object)
    model = node_model("Pad", [x, np.array([1, 0, 0, 1], np.int64)], opset=19, mode="constant")
    model.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.STRING
    got, names, _ = run_ours(model, [x, np.array([1, 0, 0, 1], np.int64)])
    assert names == [KERNEL]
    assert got[0].tolist() == [["", "", ""], ["a", "b", ""], ["c", "d", ""]]


@pytest.mark.parametrize("axes", [(1,), (-1, 0), (-2,)])
@pytest.mark.parametrize("mode", MODES)
def test_axes(axes, mode):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    pads = tuple(range(1, len(axes) + 1)) * 2
    check_node("Pad", pad_inputs(x, pads, value=1.5, axes=axes),
               oracle=ort_oracle(19, mode), opset=19, mode=mode)


@pytest.mark.parametrize("opset", [2, 11, 13, 18, 19, 21, 23])
def test_opsets(opset):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    if opset < 11:
        check_node("Pad", [x], oracle=lambda a: [np.pad(a, ((1, 0), (2, 1)),
                                                        constant_values=2.5)],
                   opset=opset, pads=[1, 2, 0, 1], value=2.5)
        check_node("Pad", [x], oracle=lambda a: [np.pad(a, ((1, 0), (2, 1)), mode="reflect")],
                   opset=opset, pads=[1, 2, 0, 1], mode="reflect")
    else:
        check_node("Pad", pad_inputs(x, (1, 2, 0, 1), value=-1.0),
                   oracle=ort_oracle(opset, "constant"), opset=opset)
        check_node("Pad", pad_inputs(x, (1, 2, 0, 1)), oracle=ort_oracle(opset, "edge"),
                   opset=opset, mode="edge")


def test_no_constant_value_and_empty():
    x = np.ones((2, 3), np.float32)
    check_node("Pad", pad_inputs(x, (1, 1, 1, 1)), opset=19)
    empty = np.zeros((2, 0), np.float32)
    check_node("Pad", pad_inputs(empty, (0, 1, 0, 2)), opset=19)
    check_node("Pad", pad_inputs(empty, (1, 0, 1, 0)), opset=19, mode="edge",
               oracle=lambda *a: [np.zeros((4, 0), np.float32)])


def test_large_and_threads():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 64, 112, 112)).astype(np.float32)
    for mode in ("constant", "reflect"):
        check_node("Pad", pad_inputs(x, (0, 0, 1, 3, 0, 0, 2, 1)),
                   oracle=ort_oracle(19, mode), opset=19, mode=mode)


def test_layouts():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    expected = np.pad(x, ((1, 2), (2, 1)), mode="reflect")
    for _name, view in layouts(x):
        check_node("Pad", pad_inputs(view, (1, 2, 2, 1)), oracle=lambda *a: [expected],
                   opset=19, mode="reflect")


def _error(inputs, opset=19, **attrs):
    return error_message("Pad", inputs, opset=opset, **attrs)


def test_bad_input():
    x = np.ones((2, 5), np.float32)
    assert "exceed" in _error(pad_inputs(x, (0, 5, 0, 0)), mode="reflect")
    assert "at least 2" in _error(pad_inputs(np.ones((2, 1), np.float32), (0, 1, 0, 1)),
                                  mode="reflect")
    assert "no element" in _error(pad_inputs(np.ones((2, 0), np.float32), (0, 1, 0, 1)),
                                  mode="edge")
    assert "values" in _error(pad_inputs(x, (1, 2, 3)))
    assert "crop" in _error(pad_inputs(x, (0, -3, 0, -3)))
    assert "axis" in _error(pad_inputs(x, (1, 1), axes=(2,)))
    assert "repeats" in _error(pad_inputs(x, (1, 1, 1, 1), axes=(1, -1)))
    assert "mode" in _error(pad_inputs(x, (1, 1, 1, 1)), mode="wrap", opset=18)
    assert "mode" in _error(pad_inputs(x, (1, 1, 1, 1)), mode="bogus")
    wrong = [x, np.array([1, 1, 1, 1], np.int64), np.array(1.0, np.float64)]
    assert "element type" in _error(wrong)


def test_pads_change_between_runs():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = node_model("Pad", pad_inputs(x, (0, 0, 0, 0)), opset=19, mode="edge")
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    for pads in [(1, 0, 0, 1), (0, 2, 1, 0), (-1, 1, 0, 0)]:
        (got,) = sess.run(None, {"x0": x, "x1": np.array(pads, np.int64)})
        (want,) = ort_outputs(model, [x, np.array(pads, np.int64)])
        np.testing.assert_array_equal(got, want)
    assert set(olc.used_kernel_names(sess)) == {KERNEL}


def test_graph_constant_pads():
    """Pads from an initializer, as exporters write them."""
    x = np.random.default_rng(7).standard_normal((1, 3, 6, 6)).astype(np.float32)
    node = oh.make_node("Pad", ["x", "p"], ["y"], mode="reflect")
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("x", 1, None)],
                          [oh.make_tensor_value_info("y", 1, None)],
                          [onnx.numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1],
                                                                 np.int64), "p")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    (got,) = sess.run(None, {"x": x})
    assert KERNEL in olc.used_kernel_names(sess)
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), "reflect"))
