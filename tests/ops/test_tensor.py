"""Concat, Gather, NonZero, ScatterND, Slice, Split, Transpose against the
built-ins.

These operators move elements without arithmetic (but for ScatterND's
reductions), so our outputs must equal the built-in's bit for bit, at every
SIMD level and thread count, for every element type.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.ops import tensor as tensor_ops
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, node_model, run_builtin, run_ours, same_bits

NUMERIC = [np.float32, np.float64, np.float16, bfloat16, np.int8, np.int16, np.int32, np.int64,
           np.uint8, np.uint16, np.uint32, np.uint64]
ALL = NUMERIC + [np.bool_, np.complex64, np.complex128]
INT_MAX, INT_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


@pytest.fixture(autouse=True)
def _small_parallel_threshold(monkeypatch):
    """Two threads from 8 KB, so the parallel split runs on test-sized data
    (and must give the same bytes as one thread)."""
    from onnx_light_cpu.ops import tensor

    monkeypatch.setattr(tensor, "MIN_BYTES_PER_THREAD", 4096)


def _data(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    if dtype.kind == "O":
        return np.array([f"s{v}" for v in rng.integers(0, 1000, size=int(np.prod(shape)))],
                        dtype=object).reshape(shape)
    return rng.normal(size=shape).astype(dtype)


def _same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "OUS":
        np.testing.assert_array_equal(got.astype(object), want.astype(object), err_msg=what)
        return
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert same_bits(got, want), f"{what}: values differ"


def check_exact(op, inputs, expected=None, **kwargs):
    """Our outputs equal ``expected`` (default: the built-in's) bit for bit."""
    model = node_model(op, inputs, **kwargs)
    originals = [a.copy() for a in inputs]
    expected = run_builtin(model, inputs) if expected is None else expected
    for level in available_simd_levels():
        with capped_simd_level(level):
            for threads in THREAD_COUNTS:
                outputs, names, _ = run_ours(model, inputs, threads)
                assert f"onnx_light_cpu::{op}" in names, names
                assert len(outputs) == len(expected)
                for k, (got, want) in enumerate(zip(outputs, expected)):
                    _same(got, want, f"{op} output {k} at {level}, {threads} threads")
    for a, original in zip(inputs, originals):
        _same(a, original, f"{op} modified its input")


def _ints(*values, dtype=np.int64):
    return np.array(values, dtype=dtype)


# ---------------------------------------------------------------- Transpose

@pytest.mark.parametrize("shape,perm", [
    ((1, 128, 96), [0, 2, 1]), ((1, 14, 16, 64), [0, 2, 1, 3]), ((2, 3, 4), None), ((5,), None),
    ((), None), ((0, 3), [1, 0]), ((2, 3, 4, 5, 6), [4, 0, 3, 1, 2]), ((37, 53), [1, 0]),
    ((3, 17, 33), [0, 2, 1]), ((2, 40, 3, 20), [0, 2, 3, 1]), ((1, 70, 1, 90), [3, 1, 0, 2]),
    ((4, 5, 6), [2, 0, 1]), ((2, 3, 4, 5), [1, 0, 2, 3])], ids=str)
def test_transpose(shape, perm):
    """Batches of matrix transposes (the tiled core: edges that fill no
    tile, splits between threads) and row moves (NumPy), at every level."""
    x = _data(np.random.default_rng(0), shape, np.float32)
    check_exact("Transpose", [x], **({"perm": perm} if perm is not None else {}))


@pytest.mark.parametrize("dtype", ALL + [object, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                         ml_dtypes.int4, ml_dtypes.uint4],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("opset", [1, 13, 21])
def test_transpose_types_and_opsets(dtype, opset):
    x = _data(np.random.default_rng(1), (3, 19, 21), dtype) if np.dtype(dtype) not in (
        np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)) else \
        np.random.default_rng(1).integers(0, 7, (3, 19, 21)).astype(dtype)
    for perm in ([0, 2, 1], [2, 0, 1], [1, 0, 2]):
        (y,), names, _ = run_ours(node_model("Transpose", [x], opset=opset, perm=perm), [x], 2)
        assert "onnx_light_cpu::Transpose" in names
        _same(y, np.ascontiguousarray(x.transpose(perm)), f"Transpose {perm}")
        assert y.flags.c_contiguous and not np.shares_memory(y, x)


def test_matrices_of_a_transpose():
    # (batch, rows, columns) of the input's matrices
    assert tensor_ops._matrices((7, 9), (1, 0)) == (1, 7, 9)
    assert tensor_ops._matrices((2, 7, 9), (0, 2, 1)) == (2, 7, 9)
    assert tensor_ops._matrices((2, 7, 3, 9), (0, 2, 3, 1)) == (2, 7, 27)  # [S, N*H] -> [N*H, S]
    assert tensor_ops._matrices((4, 5, 6), (2, 0, 1)) == (1, 20, 6)
    assert tensor_ops._matrices((1, 7, 1, 9), (3, 1, 0, 2)) == (1, 7, 9)
    assert tensor_ops._matrices((7, 9), (0, 1)) is None        # a copy
    assert tensor_ops._matrices((2, 7, 9, 4), (0, 2, 1, 3)) is None  # whole rows move
    assert tensor_ops._matrices((2, 3, 4), (2, 1, 0)) is None  # three axes reversed


# ------------------------------------------------------------------- Concat

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_concat_types_and_axes(dtype):
    rng = np.random.default_rng(0)
    for shape, axis in [((3,), 0), ((2, 3), 0), ((2, 3), 1), ((2, 3), -1), ((2, 3, 4), 1),
                        ((2, 0, 4), 2), ((1, 5, 1, 3), -2)]:
        parts = []
        for size in (2, 0, 3):
            s = list(shape)
            s[axis] = size
            parts.append(_data(rng, tuple(s), dtype))
        check_exact("Concat", parts, axis=axis)


def test_concat_single_input_large_and_versions():
    rng = np.random.default_rng(1)
    x = _data(rng, (3, 4), np.float32)
    check_exact("Concat", [x], axis=1)
    big = [_data(rng, (1, 8, 512, 128), np.float32), _data(rng, (1, 8, 1, 128), np.float32)]
    check_exact("Concat", big, axis=2)  # the KV cache append, above the thread threshold
    check_exact("Concat", [_data(rng, (1 << 17,), np.float32)] * 3, axis=0)  # one long row
    for opset in (4, 11, 13):
        check_exact("Concat", [x, x], axis=0, opset=opset)

def test_concat_opset1_default_axis():
    """Opset 1: axis defaults to 1 (the built-in rejects the node, so only a
    global registration, in place before the evaluator is built, runs it)."""
    h = np.arange(12, dtype=np.float16).reshape(3, 4)
    (y,) = _run_global(node_model("Concat", [h, h], opset=1), {"x0": h, "x1": h})
    _same(y, np.concatenate([h, h], axis=1), "Concat opset 1")


def test_concat_strings_and_non_contiguous():
    rng = np.random.default_rng(2)
    s = _data(rng, (2, 3), object)
    check_exact("Concat", [s, s], axis=1)
    base = _data(rng, (6, 8), np.float32)
    check_exact("Concat", [base[:, ::2], base[::2, :4]], axis=0)


# -------------------------------------------------------------------- Split

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_split_input_attribute_and_equal(dtype):
    rng = np.random.default_rng(3)
    x = _data(rng, (4, 6, 5), dtype)
    check_exact("Split", [x, _ints(1, 0, 5)], n_outputs=3, axis=1)
    check_exact("Split", [x, _ints(2, 2)], n_outputs=2, axis=0, opset=13)
    check_exact("Split", [x], n_outputs=3, axis=-2)  # equal pieces
    check_exact("Split", [x], n_outputs=2, axis=2, opset=11, split=[4, 1])


def test_split_num_outputs_uneven_and_large():
    rng = np.random.default_rng(4)
    x = _data(rng, (2, 7), np.float32)
    check_exact("Split", [x], n_outputs=3, axis=1, num_outputs=3)  # 3, 3, 1
    check_exact("Split", [x], n_outputs=4, axis=1, num_outputs=4)  # 2, 2, 2, 1
    qkv = _data(rng, (1, 128, 3 * 1024), np.float32)
    check_exact("Split", [qkv], n_outputs=3, axis=-1, num_outputs=3)
    check_exact("Split", [_data(rng, (1 << 18,), np.float32)], n_outputs=2, axis=0)


def _run_global(model, feeds):
    """Run with a global registration in place before the evaluator is
    built: for nodes the built-in cannot even construct."""
    olc.register_kernels_global()
    try:
        sess = ReferenceEvaluator(model)
    finally:
        olc.unregister_kernels_global()
    return sess.run(None, feeds)


def test_split_opset1_input_or_attribute():
    h = np.arange(12, dtype=np.float16).reshape(3, 4)
    ys = _run_global(node_model("Split", [h, _ints(1, 3)], n_outputs=2, axis=1, opset=1),
                     {"x0": h, "x1": _ints(1, 3)})
    for y, want in zip(ys, np.split(h, [1], axis=1)):
        _same(y, want, "Split opset 1")
    ys = _run_global(node_model("Split", [h], n_outputs=3, opset=1, split=[1, 1, 1]), {"x0": h})
    for y, want in zip(ys, np.split(h, 3)):
        _same(y, want, "Split opset 1")


def test_split_strings():
    rng = np.random.default_rng(5)
    check_exact("Split", [_data(rng, (4, 3), object)], n_outputs=2, axis=0)


# -------------------------------------------------------------------- Slice

SLICES = [  # starts, ends, axes, steps
    ([0], [2], [0], [1]),
    ([1, 0], [3, -1], [0, 1], [1, 2]),
    ([-1], [INT_MIN], [1], [-1]),  # reverse, INT_MIN end
    ([0, 1], [INT_MAX, INT_MAX], [2, 0], [1, 1]),
    ([10], [-10], [1], [-3]),  # clamped, negative step
    ([-100], [100], [-1], [2]),
    ([2], [1], [0], [1]),  # empty
    ([3], [0], [2], [-1]),
]


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("index_type", [np.int64, np.int32])
def test_slice_inputs(dtype, index_type):
    rng = np.random.default_rng(6)
    x = _data(rng, (4, 5, 6), dtype)
    for starts, ends, axes, steps in SLICES:
        ints = [np.clip(np.array(v, dtype=np.int64), np.iinfo(index_type).min,
                        np.iinfo(index_type).max).astype(index_type)
                for v in (starts, ends, axes, steps)]
        check_exact("Slice", [x] + ints)
        if all(s == 1 for s in steps):
            check_exact("Slice", [x] + ints[:3])  # no steps input
    check_exact("Slice", [x, _ints(1, 2, dtype=index_type), _ints(3, 4, dtype=index_type)])


def test_slice_opset1_attributes_large_and_strings():
    rng = np.random.default_rng(7)
    x = _data(rng, (4, 5, 6), np.float32)
    check_exact("Slice", [x], opset=1, starts=[1, 0], ends=[3, 10], axes=[0, 2])
    check_exact("Slice", [x], opset=1, starts=[1], ends=[-1])
    qkv = _data(rng, (1, 128, 3 * 4096), np.float32)
    check_exact("Slice", [qkv, _ints(4096), _ints(8192), _ints(-1)])
    check_exact("Slice", [qkv, _ints(0), _ints(INT_MAX), _ints(2), _ints(3)])  # strided, threads
    check_exact("Slice", [_data(rng, (3, 4), object), _ints(1), _ints(3), _ints(1)])
    check_exact("Slice", [_data(rng, (0, 4), np.float32), _ints(0), _ints(2), _ints(1)])


# ------------------------------------------------------------------- Gather

@pytest.mark.parametrize("dtype", ALL + [object], ids=lambda d: np.dtype(d).name)
def test_gather_types_axes_and_index_shapes(dtype):
    rng = np.random.default_rng(8)
    x = _data(rng, (5, 4, 3), dtype)
    for axis in (0, 1, 2, -1):
        dim = x.shape[axis]
        for shape in [(), (1,), (4,), (2, 3), (0,)]:
            idx = rng.integers(-dim, dim, size=shape)
            for itype in (np.int64, np.int32):
                check_exact("Gather", [x, idx.astype(itype)], axis=axis)


def test_gather_large_and_versions():
    rng = np.random.default_rng(9)
    table = _data(rng, (3200, 1024), np.float32)
    idx = rng.integers(-3200, 3200, size=128)
    check_exact("Gather", [table, idx])
    check_exact("Gather", [table, idx], opset=1)
    check_exact("Gather", [table, idx.astype(np.int32)], opset=11)
    big = _data(rng, (64, 128, 64), np.float16)
    check_exact("Gather", [big, rng.integers(0, 128, size=(50,))], axis=1)


@pytest.mark.parametrize("bad", [5, -6, 100])
def test_gather_out_of_range_is_a_value_error(bad):
    x = np.zeros((5, 2), np.float32)
    sess = ReferenceEvaluator(node_model("Gather", [x, _ints(0)]))
    olc.register_kernels_for_session(sess)
    with pytest.raises(ValueError, match=r"Gather: input 1 \('x1'\) holds index"):
        sess.run(None, {"x0": x, "x1": _ints(0, bad)})


# ------------------------------------------------------------------ NonZero

@pytest.mark.parametrize("dtype", ALL, ids=lambda d: np.dtype(d).name)
def test_nonzero(dtype):
    rng = np.random.default_rng(10)
    for shape in [(0,), (1,), (7,), (3, 4), (2, 0, 3), (2, 3, 4, 5)]:
        x = _data(rng, shape, dtype)
        if x.size:
            x.reshape(-1)[:: 3] = 0
        check_exact("NonZero", [x])
    if np.dtype(dtype).kind in "fV":
        special = np.array([0.0, -0.0, np.nan, np.inf, 1e-30, -1.0], dtype=np.float32).astype(dtype)
        check_exact("NonZero", [special])
    check_exact("NonZero", [_data(rng, (3, 4), dtype)], opset=9)


# ---------------------------------------------------------------- ScatterND

@pytest.mark.parametrize("dtype", NUMERIC + [np.bool_], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatternd_reductions(dtype, reduction):
    rng = np.random.default_rng(11)
    data = _data(rng, (4, 3, 5), dtype)
    kwargs = {} if reduction == "none" else {"reduction": reduction}
    for k, m in [(1, 3), (2, 4), (3, 6), (1, 0)]:
        idx = np.stack([rng.integers(-s, s, size=m) for s in data.shape[:k]], axis=-1)
        if reduction == "none":  # duplicates: the last write wins in both
            idx = idx.reshape(m, k)
        updates = _data(rng, (m,) + data.shape[k:], dtype)
        check_exact("ScatterND", [data, idx.reshape(m, k).astype(np.int64), updates], **kwargs)


def test_scatternd_versions_nan_and_strings():
    rng = np.random.default_rng(12)
    data = _data(rng, (4, 4), np.float32)
    idx = np.array([[[1], [1]], [[3], [0]]], dtype=np.int64)
    updates = _data(rng, (2, 2, 4), np.float32)
    updates[0, 0, 1] = np.nan
    for opset in (11, 13):
        check_exact("ScatterND", [data, idx[:, :1].reshape(2, 1), updates[:, 0]], opset=opset)
    for reduction in ("add", "max", "min"):
        check_exact("ScatterND", [data, idx, updates], opset=16 if reduction == "add" else 18,
                    reduction=reduction)
    s = _data(rng, (4, 2), object)
    check_exact("ScatterND", [s, _ints(2, 0).reshape(2, 1), _data(rng, (2, 2), object)])
    c = _data(rng, (4, 2), np.complex64)
    check_exact("ScatterND", [c, _ints(2, 2).reshape(2, 1), _data(rng, (2, 2), np.complex64)],
                reduction="add")


def test_scatternd_out_of_range():
    data = np.zeros((3, 2), np.float32)
    inputs = [data, _ints(0, 3).reshape(2, 1), np.ones((2, 2), np.float32)]
    sess = ReferenceEvaluator(node_model("ScatterND", inputs))
    olc.register_kernels_for_session(sess)
    with pytest.raises(ValueError, match=r"ScatterND: input 1 \('x1'\)"):
        sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})


# ---------------------------------------------------------------- bad input

def _run(op, inputs, **kwargs):
    sess = ReferenceEvaluator(node_model(op, inputs, **kwargs))
    olc.register_kernels_for_session(sess)
    return sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})


@pytest.mark.parametrize("op, inputs, kwargs, error, message", [
    ("Concat", [np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)], {"axis": 1},
     ValueError, r"Concat: input 1 \('x1'\) has shape \(3, 3\)"),
    ("Concat", [np.zeros((2,), np.float32), np.zeros((2,), np.int32)], {"axis": 0},
     TypeError, r"Concat: input 1 \('x1'\) has element type int32"),
    ("Concat", [np.zeros((2,), np.float32)], {"axis": 1}, ValueError, "has no axis 1"),
    ("Split", [np.zeros((4,), np.float32), _ints(1, 2)], {"n_outputs": 2},
     ValueError, r"Split: input 1 \('x1'\) split sizes \[1, 2\]"),
    ("Slice", [np.zeros((4,), np.float32), _ints(0), _ints(2), _ints(0), _ints(0)], {},
     ValueError, r"Slice: input 4 \('x4'\) has a step of 0"),
    ("Slice", [np.zeros((4,), np.float32), _ints(0), _ints(2), _ints(3)], {},
     ValueError, r"Slice: input 3 \('x3'\) of rank 1 has no axis 3"),
    ("Slice", [np.zeros((4,), np.float32), np.zeros(1, np.float32), _ints(2)], {},
     TypeError, r"Slice: input 1 \('x1'\) has element type float32, expected one of int32, int64"),
    ("Gather", [np.zeros((4,), np.float32), np.zeros(1, np.float32)], {},
     TypeError, r"Gather: input 1 \('x1'\) has element type float32, expected one of int32, "
                r"int64"),
    ("ScatterND", [np.zeros((4,), np.float32), _ints(1).reshape(1, 1), np.zeros((2,), np.float32)],
     {}, ValueError, r"ScatterND: input 2 \('x2'\) has shape \(2,\), expected \(1,\)"),
    ("Transpose", [np.zeros((2, 3), np.float32)], {"perm": [0]},
     ValueError, r"Transpose: input 0 \('x0'\) of rank 2 cannot be transposed by perm \[0\]"),
    ("Transpose", [np.zeros((2, 3), np.float32)], {"perm": [0, 0]},
     ValueError, r"Transpose: input 0 \('x0'\) \(perm\) repeats axis 0"),
])
def test_bad_input_is_a_clear_error(op, inputs, kwargs, error, message):
    originals = [a.copy() for a in inputs]
    with pytest.raises(error, match=message):
        _run(op, inputs, **kwargs)
    for a, original in zip(inputs, originals):
        assert same_bits(a, original)


def test_outputs_never_alias_inputs():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (y,) = _run("Concat", [x], axis=0)
    assert not np.shares_memory(x, y)
    (y,) = _run("Slice", [x, _ints(0), _ints(3)])
    assert not np.shares_memory(x, y)
    ys = _run("Split", [x], n_outputs=1, axis=0)
    assert not np.shares_memory(x, ys[0])


def test_paths_are_recorded():
    x = np.ones((2, 3), np.float32)
    _, names, paths = run_ours(node_model("Gather", [x, _ints(1)]), [x, _ints(1)])
    assert names == ["onnx_light_cpu::Gather"] and paths == ["gather_float32"]
    s = np.array(["a", "b"], dtype=object)
    _, _, paths = run_ours(node_model("Concat", [s, s], axis=0), [s, s])
    assert paths == ["concat_string_builtin"]


def test_empty_and_scalar_edges():
    rng = np.random.default_rng(13)
    check_exact("Split", [np.zeros((0, 4), np.float32)], n_outputs=2, axis=1)
    check_exact("Split", [np.zeros((3, 4), np.float32), _ints(0, 3)], n_outputs=2, axis=0)
    check_exact("Gather", [_data(rng, (5,), np.float32), np.array(-2, dtype=np.int64)])
    check_exact("Gather", [np.zeros((0, 3), np.float32), np.zeros((0,), np.int64)])
    check_exact("NonZero", [np.array(["a", "", "b"], dtype=object)])
    check_exact("Concat", [np.zeros((0, 3), np.int8), np.zeros((0, 3), np.int8)], axis=0)


def test_kept_outputs_are_reused_only_when_nobody_holds_them():
    rng = np.random.default_rng(14)
    x1, x2 = _data(rng, (256, 512), np.float32), _data(rng, (256, 512), np.float32)
    sess = ReferenceEvaluator(node_model("Slice", [x1, _ints(1), _ints(255)]))
    olc.register_kernels_for_session(sess)
    feeds = {"x1": _ints(1), "x2": _ints(255)}
    (y1,) = sess.run(None, {"x0": x1, **feeds})
    kept = y1.copy()
    (y2,) = sess.run(None, {"x0": x2, **feeds})
    _same(y1, kept, "held output")  # the user's output was not overwritten
    assert y2 is not y1
    _same(y2, x2[1:255], "second output")
    address = y2.__array_interface__["data"][0]
    del y1, y2
    (y3,) = sess.run(None, {"x0": x1, **feeds})
    assert y3.__array_interface__["data"][0] == address  # the freed output came back
    _same(y3, x1[1:255], "third output")


def test_nonzero_of_a_scalar_is_one_row_as_onnxruntime():
    for value, count in ((3.0, 1), (0.0, 0)):
        x = np.array(value, dtype=np.float32)
        (y,), names, _ = run_ours(node_model("NonZero", [x]), [x])
        assert names == ["onnx_light_cpu::NonZero"]
        _same(y, np.zeros((1, count), np.int64), "NonZero of a scalar")
