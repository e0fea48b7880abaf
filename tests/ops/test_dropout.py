"""Dropout: the input itself in inference, the mask all true; training mode
as the built-in draws it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import element_type

FLOATS = [np.float32, np.float16, np.float64, bfloat16]


def _model(opset: int, n_inputs: int, mask: bool, dtype=np.float32, ratio_dtype=np.float32,
           **attrs) -> onnx.ModelProto:
    names = ["x", "r", "t"][:n_inputs]
    types = [element_type(dtype), element_type(ratio_dtype), onnx.TensorProto.BOOL]
    outputs = ["y", "m"] if mask else ["y"]
    node = oh.make_node("Dropout", names, outputs, **attrs)
    graph = oh.make_graph(
        [node], "dropout",
        [oh.make_tensor_value_info(n, t, None) for n, t in zip(names, types)],
        [oh.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in outputs])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _run(model, feeds):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds), olc.used_kernel_names(sess), olc.used_kernel_paths(sess)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("opset", [7, 10, 12, 13, 22])
@pytest.mark.parametrize("mask", [False, True])
def test_inference_is_the_input_itself(dtype, opset, mask):
    x = np.arange(12, dtype=np.float32).reshape(3, 4).astype(dtype)[:, ::2]  # strided
    x.flags.writeable = False
    feeds = {"x": x}
    n_inputs = 1
    if opset >= 12:
        feeds.update(r=np.array(0.3, np.float32), t=np.array(False))
        n_inputs = 3
    outputs, names, paths = _run(_model(opset, n_inputs, mask, dtype, ratio=0.2)
                                 if opset < 12 else _model(opset, n_inputs, mask, dtype), feeds)
    assert names == ["onnx_light_cpu::Dropout"] and paths == ["dropout_view"]
    assert outputs[0] is x
    if mask:
        m = outputs[1]
        assert m.shape == x.shape and m.all()
        assert m.dtype == (np.bool_ if opset >= 10 else x.dtype)


@pytest.mark.parametrize("n_inputs", [1, 2])
def test_optional_ratio_and_training_mode(n_inputs):
    x = np.ones((2, 3), np.float32)
    feeds = {"x": x, "r": np.array(0.9, np.float32)}
    feeds = dict(list(feeds.items())[:n_inputs])
    (y, m), names, _ = _run(_model(22, n_inputs, True), feeds)
    assert y is x and m.all() and names == ["onnx_light_cpu::Dropout"]


@pytest.mark.parametrize("ratio", [0.0, 0.5, 0.75])
@pytest.mark.parametrize("mask", [False, True])
def test_training_mode_draws_as_the_builtin(ratio, mask):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 7)).astype(np.float32)
    feeds = {"x": x, "r": np.array(ratio, np.float32), "t": np.array(True)}
    model = _model(22, 3, mask, seed=3)
    want = ReferenceEvaluator(model).run(None, feeds)
    got, names, paths = _run(model, feeds)
    assert names == ["onnx_light_cpu::Dropout"]
    assert paths == ["dropout_view" if ratio == 0 else "dropout_training_numpy"]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


@pytest.mark.parametrize("feeds, message", [
    ({"r": np.array(1.0, np.float32)}, r"ratio\) is 1.0, outside \[0, 1\)"),
    ({"r": np.array(-0.1, np.float32)}, r"outside \[0, 1\)"),
    ({"r": np.array([0.1, 0.2], np.float32)}, "must hold one value"),
    ({"t": np.array([True, False])}, "must hold one value"),
])
def test_bad_ratio_or_training_mode(feeds, message):
    x = np.ones(3, np.float32)
    full = {"x": x, "r": np.array(0.5, np.float32), "t": np.array(False)}
    full.update(feeds)
    with pytest.raises(ValueError, match="Dropout: input"):
        _run(_model(13, 3, False), full)
    with pytest.raises(ValueError, match=message):
        _run(_model(13, 3, False), full)


@pytest.mark.parametrize("ratio", [-1.0, np.nan, np.inf, -np.inf, 1.0])
@pytest.mark.parametrize("training", [None, False, True])
def test_ratio_outside_the_range_refused_in_every_mode(ratio, training):
    """From opset 12 a ratio outside [0, 1), NaN included, is refused even in
    inference, where it would not be used: as ONNX Runtime refuses it (the
    built-in takes it; fuzz seed 12, case 282)."""
    feeds = {"x": np.ones(3, np.float32), "r": np.array(ratio, np.float32)}
    if training is not None:
        feeds["t"] = np.array(training)
    with pytest.raises(ValueError, match=r"Dropout: input 1 .*\(ratio\) is .*outside \[0, 1\)"):
        _run(_model(13, len(feeds), True), feeds)


@pytest.mark.parametrize("opset", [7, 10])
@pytest.mark.parametrize("ratio", [-1.0, np.nan, np.inf, 1.0, 1.5])
def test_ratio_attribute_unused_before_opset_12(opset, ratio):
    """Dropout-7 and -10 are inference only: their ratio attribute is not
    used and any value of it is taken, as ONNX Runtime and the built-in do."""
    x = np.arange(4, dtype=np.float32)
    (y, *_), names, _ = _run(_model(opset, 1, opset >= 10, ratio=float(ratio)), {"x": x})
    assert y is x and names == ["onnx_light_cpu::Dropout"]


def test_wrong_data_type_is_a_clear_error():
    with pytest.raises(TypeError, match="Dropout: input 0"):
        _run(_model(13, 1, False), {"x": np.ones(3, np.int32)})
