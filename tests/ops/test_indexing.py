"""TopK, GatherElements, ScatterElements against the built-ins, NumPy and
ONNX Runtime.

These operators select or move elements, so our outputs must equal the
oracle's bit for bit, at every SIMD level and thread count, for every
element type.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import check_node, element_type, node_model, run_builtin, run_ours, same_bits

NUMERIC = [np.float32, np.float64, np.float16, bfloat16, np.int8, np.int16, np.int32, np.int64,
           np.uint8, np.uint16, np.uint32, np.uint64]
ALL = NUMERIC + [np.bool_, np.complex64, np.complex128]


def _data(rng, shape, dtype, distinct=1000):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -distinct), min(info.max, distinct), size=shape,
                            endpoint=True).astype(dtype)
    return rng.integers(-distinct, distinct, size=shape).astype(dtype) / dtype.type(8)


def _session(model):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    return sess


def _exact(op, inputs, **model_kwargs):
    """Our outputs equal the built-in's bit for bit (check_node with a zero
    tolerance also runs every SIMD level and thread count)."""
    check_node(op, inputs, oracle="builtin", tolerance=(0, 0), **model_kwargs)
    model = node_model(op, inputs, **model_kwargs)
    want = run_builtin(model, inputs)
    got, names, _ = run_ours(model, inputs)
    assert f"onnx_light_cpu::{op}" in names
    for g, w in zip(got, want):
        assert same_bits(g, np.asarray(w)), op


# ------------------------------------------------------------------- TopK

def _topk(x, k, **attrs):
    return [x, np.array([k], np.int64)], dict(n_outputs=2, **attrs)


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_matches_builtin_with_ties(dtype, largest):
    rng = np.random.default_rng(0)
    # few distinct values: many ties, resolved to the lower index
    for shape, axis, k in [((40,), 0, 7), ((3, 50), 1, 50), ((6, 5, 4), 0, 3),
                           ((6, 5, 4), -2, 2), ((2, 9), -1, 0), ((0, 4), 1, 2), ((1, 1), 0, 1)]:
        x = _data(rng, shape, dtype, distinct=5)
        inputs, kw = _topk(x, k, axis=axis, largest=largest)
        _exact("TopK", inputs, **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.float64],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_nan_inf_and_signed_zeros_as_builtin(dtype, largest):
    x = np.array([1.0, np.nan, -np.inf, 0.0, -0.0, np.inf, -np.nan, 2.0, 0.0, -1.0, np.nan],
                 dtype=np.float64).astype(dtype)
    for k in (1, 3, 6, x.size):
        inputs, kw = _topk(x, k, largest=largest)
        _exact("TopK", inputs, **kw)


def test_topk_large_row_partial_selection():
    # The decoder case: k = 50 of a vocabulary-sized row, with ties at the cut.
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2000, size=(2, 151936)).astype(np.float32)
    inputs, kw = _topk(x, 50)
    _exact("TopK", inputs, **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, bfloat16, np.int32,
                                   np.uint8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("largest", [1, 0])
def test_topk_long_rows_with_ties_nan_and_zeros(dtype, largest):
    # rows long enough for the cut at the k-th value (CUT_MIN_LENGTH)
    rng = np.random.default_rng(8)
    x = _data(rng, (3, 2500), dtype, distinct=7)
    if np.dtype(dtype).kind == "f" or dtype == bfloat16:
        x[0, rng.integers(0, 2500, 40)] = np.nan
        x[1, rng.integers(0, 2500, 40)] = -0.0
        x[2, :] = np.nan  # fewer than k numbers: NaN fill the top (or the end)
        x[2, 5:9] = 1.0
    for k in (1, 50, 2500):
        inputs, kw = _topk(x, k, largest=largest)
        _exact("TopK", inputs, **kw)


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_long_row_whose_sample_misleads(largest):
    # The sampled elements (every 16th) are the extremes: the guessed cut
    # leaves fewer than k elements and the exact cut must take over.
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 4096)).astype(np.float32)
    x[:, ::16] = (1 if largest else -1) * (100 + np.arange(256, dtype=np.float32))
    x[1, ::16] = x[1, 0]  # and all equal: ties to the lower index
    for k in (3, 50, 300):
        inputs, kw = _topk(x, k, largest=largest)
        _exact("TopK", inputs, **kw)


def test_topk_opset_1_and_10_and_unsorted():
    rng = np.random.default_rng(2)
    x = _data(rng, (4, 9), np.float32, distinct=4)
    _exact("TopK", [x], n_outputs=2, opset=1, k=3, axis=1)
    _exact("TopK", [x, np.array([4], np.int64)], n_outputs=2, opset=10, axis=0)
    # sorted=0 leaves the order free; ours (and the built-in's) is sorted
    _exact("TopK", [x, np.array([5], np.int64)], n_outputs=2, sorted=0)


def test_topk_matches_onnxruntime():
    import onnxruntime as ort

    rng = np.random.default_rng(3)
    x = _data(rng, (3, 1000), np.float32, distinct=50)
    for largest in (1, 0):
        model = node_model("TopK", [x, np.array([20], np.int64)], n_outputs=2, largest=largest)
        model.ir_version = 10
        model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        model.graph.output[1].type.tensor_type.elem_type = onnx.TensorProto.INT64
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        want = session.run(None, {"x0": x, "x1": np.array([20], np.int64)})
        got, names, _ = run_ours(model, [x, np.array([20], np.int64)])
        assert "onnx_light_cpu::TopK" in names
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_topk_strided_and_read_only():
    rng = np.random.default_rng(4)
    base = _data(rng, (8, 16), np.float32, distinct=6)
    _exact("TopK", *_topk(base[:, ::2], 3)[:1], n_outputs=2)
    frozen = base.copy()
    frozen.flags.writeable = False
    _exact("TopK", *_topk(frozen, 3)[:1], n_outputs=2)


@pytest.mark.parametrize("k, message", [(9, r"asks for k=9 elements of an axis of 8"),
                                        (-1, r"must not be negative")])
def test_topk_rejects_bad_k(k, message):
    x = np.zeros((2, 8), np.float32)
    sess = _session(node_model("TopK", [x, np.array([1], np.int64)], n_outputs=2))
    with pytest.raises(ValueError, match=r"TopK: input 1 \('x1'\) " + message):
        sess.run(None, {"x0": x, "x1": np.array([k], np.int64)})


def test_topk_rejects_bad_axis():
    x = np.zeros((2, 8), np.float32)
    sess = _session(node_model("TopK", [x, np.array([1], np.int64)], n_outputs=2, axis=2))
    with pytest.raises(ValueError, match=r"TopK: input 0 \('x0'\) of rank 2 has no axis 2"):
        sess.run(None, {"x0": x, "x1": np.array([1], np.int64)})


# --------------------------------------------------------- GatherElements

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("index_type", [np.int64, np.int32], ids=["int64", "int32"])
def test_gather_elements_matches_builtin(dtype, index_type):
    rng = np.random.default_rng(5)
    # (the built-in fails on a negative axis: see the next test)
    for shape, axis, extent in [((7,), 0, 11), ((4, 5), 0, 3), ((4, 5), 1, 9), ((3, 4, 5), 2, 2),
                                ((3, 4, 5), 1, 6)]:
        data = _data(rng, shape, dtype)
        ishape = list(shape)
        ishape[axis] = extent
        dim = shape[axis]
        # negative indices count from the end
        indices = rng.integers(-dim, dim, size=ishape).astype(index_type)
        _exact("GatherElements", [data, indices], axis=axis)


def test_gather_elements_negative_axis():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[[3, 0, -1]], [[1, 2, 2]]], np.int64).repeat(3, axis=1)
    model = node_model("GatherElements", [x, idx], axis=-1)
    (y,), names, _ = run_ours(model, [x, idx])
    assert names == ["onnx_light_cpu::GatherElements"]
    np.testing.assert_array_equal(y, np.take_along_axis(x, idx % 4, axis=-1))


def test_gather_elements_strings_empty_and_smaller_indices():
    data = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    indices = np.array([[2, 0], [1, 1]], np.int64)
    sess = _session(node_model("GatherElements", [np.zeros((2, 3), np.float32), indices],
                               axis=1))
    (y,) = sess.run(None, {"x0": data, "x1": indices})
    assert y.tolist() == [["c", "a"], ["e", "e"]]
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::GatherElements"]
    # indices smaller than data on the other axes read the leading block (ORT)
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    idx = np.array([[3, 0], [1, 2]], np.int64)
    (y,) = _session(node_model("GatherElements", [x, idx], axis=0)).run(None, {"x0": x, "x1": idx})
    np.testing.assert_array_equal(y, np.take_along_axis(x[:, :2], idx, axis=0))
    empty = np.zeros((0, 5), np.int64)
    _exact("GatherElements", [x, empty], axis=0)


@pytest.mark.parametrize("bad", [4, -5])
def test_gather_elements_out_of_range_is_a_value_error(bad):
    x = np.zeros((4, 3), np.float32)
    idx = np.array([[0, bad, 1]], np.int64)
    sess = _session(node_model("GatherElements", [x, idx]))
    with pytest.raises(ValueError, match=rf"GatherElements: input 1 \('x1'\) holds index {bad}"):
        sess.run(None, {"x0": x, "x1": idx})


def test_gather_elements_rank_mismatch_is_a_value_error():
    x = np.zeros((4, 3), np.float32)
    idx = np.zeros((4,), np.int64)
    sess = _session(node_model("GatherElements", [x, idx]))
    with pytest.raises(ValueError, match=r"GatherElements: input 1 \('x1'\) has rank 1"):
        sess.run(None, {"x0": x, "x1": idx})


# -------------------------------------------------------- ScatterElements

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_scatter_elements_matches_builtin(dtype):
    rng = np.random.default_rng(6)
    for shape, axis in [((9,), 0), ((4, 5), 0), ((4, 5), 1), ((3, 4, 5), -1)]:
        data = _data(rng, shape, dtype)
        dim = shape[axis]
        ishape = list(shape)
        ishape[axis] = min(dim, 3)
        # distinct positions along the axis: without a reduction, repeated
        # indices leave the result to the implementation
        perm = np.argsort(rng.random(size=shape), axis=axis)
        indices = np.take(perm, np.arange(ishape[axis]), axis=axis) - dim  # from the end
        updates = _data(rng, indices.shape, dtype)
        _exact("ScatterElements", [data, indices, updates], axis=axis)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_], ids=lambda d: np.dtype(d).name)
def test_scatter_elements_reductions_with_repeated_indices(reduction, dtype):
    rng = np.random.default_rng(7)
    data = _data(rng, (5, 4), dtype, distinct=4)
    indices = rng.integers(-5, 5, size=(7, 4)).astype(np.int32)  # repeats on purpose
    updates = _data(rng, (7, 4), dtype, distinct=4)
    with np.errstate(all="ignore"):
        _exact("ScatterElements", [data, indices, updates], axis=0, reduction=reduction)


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_elements_indices_shorter_than_data(reduction):
    # indices shorter than data on another axis address its leading block (ORT)
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    idx = np.array([[3, 0, 1], [1, 2, 3]], np.int64)
    upd = -np.arange(6, dtype=np.float32).reshape(2, 3)
    model = node_model("ScatterElements", [x, idx, upd], axis=0, reduction=reduction)
    (y,), names, _ = run_ours(model, [x, idx, upd])
    assert names == ["onnx_light_cpu::ScatterElements"]
    want = x.copy()
    for i in range(2):
        for j in range(3):
            want[idx[i, j], j] = upd[i, j] + (want[idx[i, j], j] if reduction == "add" else 0)
    np.testing.assert_array_equal(y, want)


def test_scatter_elements_opset_11_and_empty():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.array([[1, 0, 2, 0]], np.int64)
    upd = -np.ones((1, 4), np.float32)
    _exact("ScatterElements", [x, idx, upd], opset=11)
    _exact("ScatterElements", [x, np.zeros((0, 4), np.int64), np.zeros((0, 4), np.float32)])


def test_scatter_elements_never_modifies_data():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    x.flags.writeable = False
    idx = np.array([[1, 0, 2, 0]], np.int64)
    _exact("ScatterElements", [x, idx, np.ones((1, 4), np.float32)], reduction="add")


@pytest.mark.parametrize("bad", [3, -4])
def test_scatter_elements_out_of_range_is_a_value_error(bad):
    x = np.zeros((3, 2), np.float32)
    idx = np.array([[bad, 0]], np.int64)
    upd = np.ones((1, 2), np.float32)
    sess = _session(node_model("ScatterElements", [x, idx, upd]))
    with pytest.raises(ValueError, match=rf"ScatterElements: input 1 \('x1'\) holds index {bad}"):
        sess.run(None, {"x0": x, "x1": idx, "x2": upd})


def test_scatter_elements_updates_shape_must_match_indices():
    x = np.zeros((3, 2), np.float32)
    idx = np.zeros((1, 2), np.int64)
    upd = np.ones((2, 2), np.float32)
    sess = _session(node_model("ScatterElements", [x, idx, upd]))
    with pytest.raises(ValueError, match=r"ScatterElements: input 2 \('x2'\) has shape"):
        sess.run(None, {"x0": x, "x1": idx, "x2": upd})


def test_scatter_elements_reduction_needs_its_opset():
    x = np.zeros((3, 2), np.float32)
    idx = np.zeros((1, 2), np.int64)
    upd = np.ones((1, 2), np.float32)
    sess = _session(node_model("ScatterElements", [x, idx, upd], opset=16, reduction="max"))
    with pytest.raises(ValueError, match=r"ScatterElements: reduction 'max' needs opset 18"):
        sess.run(None, {"x0": x, "x1": idx, "x2": upd})


def test_index_types_are_checked():
    x = np.zeros((3, 2), np.float32)
    idx = np.zeros((1, 2), np.float32)
    sess = _session(node_model("GatherElements", [x, idx]))
    with pytest.raises(TypeError, match=r"GatherElements: input 1 \('x1'\) has element type"):
        sess.run(None, {"x0": x, "x1": idx})
    assert element_type(np.int64) == onnx.TensorProto.INT64
