"""ReduceSum and Softmax against the built-ins and float64 answers."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level, code_level_name

from differential import check_node, node_model, run_builtin, run_ours, same_bits

FLOATS = [np.float32, np.float64, np.float16, bfloat16]


@pytest.fixture(autouse=True)
def _small_parallel_thresholds(monkeypatch):
    """Parallel splits on test-sized data (results must not change)."""
    from onnx_light_cpu.ops.reduce import ReduceSum, Softmax

    monkeypatch.setattr(ReduceSum, "min_work_per_thread", 1024)
    monkeypatch.setattr(Softmax, "min_work_per_thread", 256)
INTS = [np.int32, np.int64, np.uint32, np.uint64]


def _axes(*values):
    return np.array(values, dtype=np.int64)


def _sum64(axes, keepdims=1, dtype=None):
    """float64 sum rounded to the input's type: the accurate answer."""
    def oracle(x, *rest):
        a = tuple(axes) if axes else None
        with np.errstate(over="ignore"):  # float16 sums of 70001 elements overflow
            return [np.sum(x.astype(np.float64), axis=a, keepdims=bool(keepdims)).astype(x.dtype)]
    return oracle


# ---------------------------------------------------------------- ReduceSum

REDUCTIONS = [  # shape, axes
    ((7,), [0]), ((5, 33), [1]), ((5, 33), [0]), ((5, 33), [-1]), ((3, 4, 5), [1]),
    ((3, 4, 5), [0, 2]), ((2, 3, 4, 5), [1, 3]), ((3, 1, 5), [1]), ((2, 0, 3), [1]),
    ((2, 0, 3), [0]), ((3, 70001), [1]), ((128, 4096), [0]), ((1, 20000), [1]),
    ((4, 5), []),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reducesum_floats(dtype, keepdims):
    rng = np.random.default_rng(0)
    for shape, axes in REDUCTIONS:
        x = rng.uniform(0.5, 1.5, size=shape).astype(dtype)
        check_node("ReduceSum", [x, _axes(*axes)], oracle=_sum64(axes, keepdims),
                   keepdims=keepdims)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_reducesum_integers_wrap_as_the_builtin(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    for shape, axes in REDUCTIONS:
        x = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
        check_node("ReduceSum", [x, _axes(*axes)], oracle="builtin")


def test_reducesum_options_and_versions():
    rng = np.random.default_rng(2)
    x = rng.uniform(0.5, 1.5, size=(3, 4, 5)).astype(np.float32)
    empty = _axes()
    check_node("ReduceSum", [x, empty], oracle="builtin", noop_with_empty_axes=1)
    check_node("ReduceSum", [x], oracle="builtin", noop_with_empty_axes=1)
    check_node("ReduceSum", [x], oracle="builtin")
    check_node("ReduceSum", [x, empty], oracle="builtin", keepdims=0)
    for opset in (1, 11):
        check_node("ReduceSum", [x], oracle="builtin", opset=opset, axes=[0, -1])
        check_node("ReduceSum", [x], oracle="builtin", opset=opset, keepdims=0)
    check_node("ReduceSum", [np.array(3.5, dtype=np.float32)], oracle="builtin")
    check_node("ReduceSum", [x.astype(np.float64), _axes(-2)], oracle="builtin", keepdims=0)


def test_reducesum_same_bits_at_every_level():
    """Lane order is fixed: the levels differ only in register width."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 20001)).astype(np.float32)
    model = node_model("ReduceSum", [x, _axes(1)])
    results = []
    for level in available_simd_levels():
        with capped_simd_level(level):
            (y,), _, _ = run_ours(model, [x, _axes(1)], threads=2)
            results.append(y)
    assert all(same_bits(results[0], r) for r in results[1:])


# ------------------------------------------------------------------ Softmax

# float16/bfloat16 round where the built-in rounds (x - max, exp, sum,
# quotient), but the built-in's float16 sums run in another order (pairwise,
# or per step in float16 along an outer axis): up to 2 units in the last place.
NARROW = {np.dtype(np.float16): (2e-3, 1e-6), np.dtype(bfloat16): (1.6e-2, 1e-6)}

SHAPES = [(1,), (7,), (3, 17), (4, 33), (2, 3, 40), (5, 1000), (2, 0, 4), (64, 3001)]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_softmax_last_axis(dtype):
    rng = np.random.default_rng(4)
    for shape in SHAPES:
        x = rng.normal(scale=3.0, size=shape).astype(dtype)
        check_node("Softmax", [x], oracle="builtin", tolerance=NARROW.get(np.dtype(dtype)))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("axis", [0, 1, -2])
def test_softmax_other_axes(dtype, axis):
    rng = np.random.default_rng(5)
    for shape in [(3, 4, 5), (2, 600, 3), (2, 7, 1100)]:
        x = rng.normal(scale=3.0, size=shape).astype(dtype)
        oracle = "builtin"
        if np.dtype(dtype) == np.float16:
            # the built-in sums float16 along an outer axis rounding every
            # step (1% off here): take its last-axis answer, axis moved
            oracle = _builtin_on_last_axis(axis)
        check_node("Softmax", [x], oracle=oracle, axis=axis,
                   tolerance=NARROW.get(np.dtype(dtype)))


def _builtin_on_last_axis(axis):
    def oracle(x):
        moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
        (y,) = ReferenceEvaluator(node_model("Softmax", [moved])).run(None, {"x0": moved})
        return [np.moveaxis(y, -1, axis)]
    return oracle


def _softmax_2d(axis):
    """Opsets 1 and 11: softmax of [prod(dims[:axis]), prod(dims[axis:])]."""
    def oracle(x):
        a = axis + x.ndim if axis < 0 else axis
        flat = x.astype(np.float64).reshape(int(np.prod(x.shape[:a])), -1)
        e = np.exp(flat - flat.max(axis=1, keepdims=True))
        return [(e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(x.dtype)]
    return oracle


@pytest.mark.parametrize("opset", [1, 11])
def test_softmax_old_opsets_flatten(opset):
    rng = np.random.default_rng(6)
    for dtype in (np.float32, np.float64):
        x = rng.normal(size=(2, 3, 4, 5)).astype(dtype)
        for axis in (0, 1, 2, -1):
            check_node("Softmax", [x], oracle=_softmax_2d(axis), opset=opset, axis=axis)
        check_node("Softmax", [x], oracle=_softmax_2d(1), opset=opset)  # default axis 1


def test_softmax_special_values():
    x = np.array([[0.0, 1.0, np.nan], [np.inf, 1.0, 2.0], [-np.inf, -np.inf, -np.inf],
                  [-np.inf, 0.0, 1.0], [1e30, -1e30, 0.0]], dtype=np.float32)
    check_node("Softmax", [x], oracle="builtin")
    with np.errstate(over="ignore"):  # 1e30 is inf in float16
        x16 = x.astype(np.float16)
    check_node("Softmax", [x16], oracle="builtin",
               tolerance=NARROW[np.dtype(np.float16)])


# ---------------------------------------------------------------- bad input

def _run(op, inputs, **kwargs):
    sess = ReferenceEvaluator(node_model(op, inputs, **kwargs))
    olc.register_kernels_for_session(sess)
    return sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})


@pytest.mark.parametrize("op, inputs, kwargs, error, message", [
    ("ReduceSum", [np.zeros((2, 3), np.float32), _axes(2)], {}, ValueError,
     r"ReduceSum: input 1 \('x1'\) axis 2 is out of range"),
    ("ReduceSum", [np.zeros((2, 3), np.float32), _axes(1, -1)], {}, ValueError, "repeats axis 1"),
    ("ReduceSum", [np.zeros((2, 3), np.int8), _axes(1)], {}, TypeError,
     r"ReduceSum: input 0 \('x0'\) has element type int8"),
    ("ReduceSum", [np.zeros((2, 3), np.float32), np.array([1], np.int32)], {}, TypeError,
     r"ReduceSum: input 1 \('x1'\) has element type int32, expected one of int64"),
    ("Softmax", [np.zeros((2, 3), np.int32)], {}, TypeError,
     r"Softmax: input 0 \('x0'\) has element type int32"),
    ("Softmax", [np.zeros((2, 3), np.float32)], {"axis": 2}, ValueError, "has no axis 2"),
])
def test_bad_input_is_a_clear_error(op, inputs, kwargs, error, message):
    with pytest.raises(error, match=message):
        _run(op, inputs, **kwargs)


def test_paths_and_no_aliasing():
    x = np.ones((2, 3), np.float32)
    for level in available_simd_levels():
        with capped_simd_level(level):
            (y,), _, paths = run_ours(node_model("Softmax", [x]), [x])
            assert paths == [f"softmax_float32_{code_level_name(level)}"]
            assert not np.shares_memory(x, y)
    (y,), _, paths = run_ours(node_model("ReduceSum", [x], noop_with_empty_axes=1), [x])
    assert not np.shares_memory(x, y) and paths == ["reducesum_noop_float32_scalar"]


# ---------------- ReduceMean, Max, Min, Prod, L1, L2, SumSquare, LogSumExp

def _lse64(x, axis, keepdims):
    m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
    shift = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
    return r if keepdims else np.squeeze(r, axis=axis if axis is not None else None)


# op -> float64 formula of (x, axis tuple or None, keepdims)
OTHER_REDUCTIONS = {
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k, initial=-np.inf),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k, initial=np.inf),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(x * x, axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(x * x, axis=a, keepdims=k),
    "ReduceLogSumExp": _lse64,
}


def _other64(op, axes, keepdims=1):
    def oracle(x, *rest):
        a = tuple(axes) if axes else None
        with np.errstate(all="ignore"):
            return [np.asarray(OTHER_REDUCTIONS[op](x.astype(np.float64), a, bool(keepdims))
                               ).astype(x.dtype)]
    return oracle


def _reduce_input(rng, shape, dtype, op):
    if op == "ReduceProd":  # products of many values stay in range near 1
        return rng.uniform(0.99, 1.01, size=shape).astype(dtype)
    if op in ("ReduceMax", "ReduceMin"):
        return rng.uniform(-2, 2, size=shape).astype(dtype)
    return rng.uniform(0.5, 1.5, size=shape).astype(dtype)  # sums without cancellation


@pytest.mark.parametrize("op", sorted(OTHER_REDUCTIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.filterwarnings("ignore:Mean of empty slice")  # the oracle's
def test_other_reductions_floats(op, dtype, keepdims):
    """Every layout (last axes, first axes, middle, non-consecutive, size-1,
    empty sets, all axes) at every level and 1 and 2 threads."""
    rng = np.random.default_rng(20)
    for shape, axes in REDUCTIONS:
        if op != "ReduceMax" and op != "ReduceMin" and np.prod(shape) > 100000:
            shape = (3, 7001) if len(shape) == 2 and shape[0] == 3 else (16, 512)
        x = _reduce_input(rng, shape, dtype, op)
        check_node(op, [x, _axes(*axes)], oracle=_other64(op, axes, keepdims),
                   keepdims=keepdims)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
                                   np.bool_], ids=lambda d: np.dtype(d).name)
def test_max_min_integers_and_bool(op, dtype):
    rng = np.random.default_rng(21)
    for shape, axes in REDUCTIONS[:9] + [((3, 4, 5), [])]:
        if dtype == np.bool_:
            x = rng.integers(0, 2, size=shape).astype(bool)
        else:
            info = np.iinfo(dtype)
            x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
        check_node(op, [x, _axes(*axes)], oracle="builtin", opset=20)


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceMean", "ReduceL1", "ReduceSumSquare",
                                "ReduceL2"])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_integer_reductions_as_the_builtin(op, dtype):
    rng = np.random.default_rng(22)
    for shape, axes in [((5, 33), [1]), ((5, 33), [0]), ((3, 4, 5), [0, 2]), ((4, 5), [])]:
        x = rng.integers(0, 5, size=shape).astype(dtype)
        model = node_model(op, [x, _axes(*axes)])
        # the built-in's ReduceSumSquare widens 32-bit integers to 64 bits:
        # ONNX keeps the input's type
        want = [y.astype(dtype) for y in run_builtin(model, [x, _axes(*axes)])]
        check_node(op, [x, _axes(*axes)], oracle=lambda *a: want)


def test_integer_mean_truncates_toward_zero():
    x = np.array([[-7, 2], [7, 2], [-1, 0]], dtype=np.int32)
    check_node("ReduceMean", [x, _axes(1)],
               oracle=lambda a, _: [np.array([[-2], [4], [0]], np.int32)])


@pytest.mark.parametrize("op", sorted(OTHER_REDUCTIONS))
def test_other_reductions_nan_and_inf(op):
    x = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 2.0], [-np.inf, -1.0, 0.0],
                  [np.inf, np.inf, 1.0], [-np.inf, -np.inf, 3.0]] * 7, np.float32)
    check_node(op, [x, _axes(1)], oracle=_other64(op, [1]))
    check_node(op, [np.ascontiguousarray(x.T), _axes(0)], oracle=_other64(op, [0]))


@pytest.mark.parametrize("op", sorted(OTHER_REDUCTIONS))
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_other_reductions_axes_attribute_and_input(op, opset):
    """``axes`` an attribute before opset 18, an input from it; no axes:
    every axis, or the input as it is with noop_with_empty_axes."""
    rng = np.random.default_rng(23)
    x = _reduce_input(rng, (3, 4, 5), np.float32, op)
    if opset < 18:
        check_node(op, [x], oracle=_other64(op, [0, 2]), opset=opset, axes=[0, 2])
        check_node(op, [x], oracle=_other64(op, [-1], keepdims=0), opset=opset, axes=[-1],
                   keepdims=0)
        check_node(op, [x], oracle=_other64(op, None), opset=opset)
    else:
        check_node(op, [x, _axes(0, 2)], oracle=_other64(op, [0, 2]), opset=opset)
        check_node(op, [x], oracle=_other64(op, None), opset=opset)
        noop = {"ReduceL1": np.abs, "ReduceL2": np.abs, "ReduceSumSquare": lambda a: a * a}
        check_node(op, [x, _axes()], oracle=lambda a, _: [noop.get(op, np.copy)(a)],
                   opset=opset, noop_with_empty_axes=1)
        check_node(op, [x, _axes()], oracle=_other64(op, None), opset=opset)


@pytest.mark.parametrize("op", sorted(OTHER_REDUCTIONS))
def test_other_reductions_match_onnxruntime(op):
    """The CNN shapes: the spatial axes and the last axis of 8x1280x7x7
    (float32, opset 18), and the channel axis."""
    import onnxruntime as ort

    rng = np.random.default_rng(24)
    x = _reduce_input(rng, (8, 64, 7, 7), np.float32, op)
    for axes in ([2, 3], [-1], [1], [0, 2]):
        model = node_model(op, [x, _axes(*axes)])
        model.ir_version = 10
        model.graph.output[0].type.tensor_type.elem_type = 1
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        check_node(op, [x, _axes(*axes)],
                   oracle=lambda a, ax: sess.run(None, {"x0": a, "x1": ax}),
                   tolerance=(1e-5, 1e-6))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceProd", "ReduceMean"])
def test_other_reductions_same_bits_at_every_level_and_strided(op):
    rng = np.random.default_rng(25)
    base = _reduce_input(rng, (6, 40, 66), np.float32, op)
    x = base[:, :, ::2]  # strided
    x.flags.writeable = False
    for axes in ([2], [0], [1, 2], [0, 2]):
        model = node_model(op, [x, _axes(*axes)])
        results = []
        for level in available_simd_levels():
            with capped_simd_level(level):
                (y,), names, paths = run_ours(model, [x, _axes(*axes)])
                assert names == [f"onnx_light_cpu::{op}"]
                assert paths == [f"{op.lower()}_float32_{code_level_name(level)}"]
                results.append(y)
        assert all(same_bits(r, results[0]) for r in results)


@pytest.mark.parametrize("op", sorted(OTHER_REDUCTIONS))
def test_other_reductions_bad_axes(op):
    x = np.zeros((2, 3), np.float32)
    for axes, message in (([2], "axis 2 is out of range"), ([1, -1], "repeats axis 1")):
        model = node_model(op, [x, _axes(*axes)])
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        with pytest.raises(ValueError, match=f"{op}: input 1.*{message}"):
            sess.run(None, {"x0": x, "x1": _axes(*axes)})
