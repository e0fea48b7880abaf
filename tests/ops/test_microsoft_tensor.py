"""com.microsoft Range, Trilu, Unique, ExpandDims: differential tests against
ONNX Runtime 1.32 (bit for bit) over every dtype it accepts, their
attributes and optional inputs, empty, strided and read-only inputs, at
every SIMD level and 1/2 threads (our kernel must run); bad input, one test
per rejection, with the message."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import THREAD_COUNTS, check_node, layouts, node_model, run_ours, same_bits

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def kernel_name(op: str) -> str:
    """Range, Trilu and Unique are ai.onnx operators too: the com.microsoft
    kernels are named Microsoft<op>."""
    return f"onnx_light_cpu::{'' if op == 'ExpandDims' else 'Microsoft'}{op}"


def ort_run(op, inputs, n_outputs=1, **attrs):
    """The outputs of ONNX Runtime's CPU kernel on one node (1 thread)."""
    model = node_model(op, inputs, n_outputs, domain=MS, **attrs)
    for out in model.graph.output:
        out.ClearField("type")
    model.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    # (np.ascontiguousarray would make a 0-d input 1-d)
    feeds = {f"x{i}": np.array(a, order="C") for i, a in enumerate(inputs) if a is not None}
    return sess.run(None, feeds)


def check(op, inputs, n_outputs=1, **attrs):
    """Ours against ONNX Runtime at every SIMD level and thread count, then
    bit for bit (signed zeros and NaN payloads included)."""
    want = ort_run(op, inputs, n_outputs, **attrs)
    check_node(op, inputs, oracle=lambda *_: want, domain=MS, kernel=kernel_name(op),
               n_outputs=n_outputs, tolerance=(0.0, 0.0), **attrs)
    got = ours(op, inputs, n_outputs, **attrs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert same_bits(np.asarray(g), np.asarray(w)), f"{op} output {k}: {g} != {w}"


def ours(op, inputs, n_outputs=1, **attrs):
    model = node_model(op, inputs, n_outputs, domain=MS, **attrs)
    outputs, names, paths = run_ours(model, inputs)
    assert names == [kernel_name(op)], names
    return outputs


def scalar(value, dtype, shape=()):
    return np.array(value, dtype=dtype).reshape(shape)


# ------------------------------------------------------------------ Range

RANGE_DTYPES = [np.float32, np.float64, np.int16, np.int32, np.int64]
RANGE_CASES = [  # start, limit, delta (None: absent)
    (1, 5, None), (0, 10, 3), (10, 0, -3), (5, 1, None), (5, 1, 2), (1, 5, -1), (3, 3, 1),
    (-7, 20, 4), (0, 1, 5), (20, -7, -1),
]


@pytest.mark.parametrize("dtype", RANGE_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", RANGE_CASES, ids=str)
@pytest.mark.parametrize("shape", [(), (1,)], ids=str)
def test_range(dtype, case, shape):
    start, limit, delta = case
    inputs = [scalar(start, dtype, shape), scalar(limit, dtype, shape)]
    if delta is not None:
        inputs.append(scalar(delta, dtype, shape))
    check("Range", inputs)


@pytest.mark.parametrize("case", [(0.1, 1.0, 0.1), (0.0, 1.0, 0.1), (-1e-8, 1.0, 1.0),
                                  (0.0, 5.0, np.inf), (0.0, 5.0, -np.inf), (-0.0, 3.5, 0.5),
                                  (1e-3, 100.0, 7e-3), (1.0, -1.0, -1e-4)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_range_float_steps(case, dtype):
    """The values accumulate start += delta in the element type (float32
    rounds at each step), and the count is computed in double."""
    check("Range", [scalar(v, dtype) for v in case])


def test_range_accumulates_in_float32():
    start, delta = np.float32(0.1), np.float32(0.1)
    y = ours("Range", [scalar(0.1, np.float32), scalar(5000, np.float32),
                       scalar(0.1, np.float32)])[0]
    steps = np.empty(y.size, np.float32)
    value = start
    for i in range(y.size):
        steps[i] = value
        value = np.float32(value + delta)
    assert same_bits(y, steps)
    assert not same_bits(y, (start + np.arange(y.size) * delta).astype(np.float32))


@pytest.mark.parametrize("dtype,case", [
    (np.int32, (-2**31, 2**31 - 1, 2**30)),        # limit - start overflows int32
    (np.int32, (2**31 - 1, -2**31, -3 * 2**29)),
    (np.int16, (-30000, 30000, 20000)),
    (np.int16, (-32768, 32767, 4096)),
    (np.int64, (2**60, 2**60 + 1, 1)),              # both ends round to one double
    (np.int64, (I64_MIN, I64_MAX, 3 * 2**61)),
    (np.int64, (I64_MAX - 5, I64_MAX, 2)),
    (np.int64, (5, I64_MIN, I64_MIN)),
    (np.int64, (0, 2**62 + 3, 2**61 + 2**60 + 1)),
], ids=str)
def test_range_integer_extremes(dtype, case):
    check("Range", [scalar(v, dtype) for v in case])


@pytest.mark.parametrize("name", ["read-only", "byte offset 1", "fortran"])
def test_range_layouts(name):
    inputs = [scalar(2, np.int64, (1,)), scalar(40, np.int64, (1,)), scalar(3, np.int64, (1,))]
    laid = [dict(layouts(a))[name] for a in inputs]
    check("Range", laid)


@pytest.mark.parametrize("delta", [0.0, -0.0])
def test_range_zero_delta(delta):
    with pytest.raises(ValueError, match=r"Range: input 2 .*\(delta\) must not be zero"):
        ours("Range", [scalar(0, np.float32), scalar(4, np.float32), scalar(delta, np.float32)])
    with pytest.raises(ValueError, match=r"Range: input 2 .*\(delta\) must not be zero"):
        ours("Range", [scalar(0, np.int32), scalar(4, np.int32), scalar(0, np.int32)])


@pytest.mark.parametrize("case", [(np.nan, 5.0, 1.0), (0.0, np.inf, 1.0), (0.0, 5.0, np.nan),
                                  (-1e308, 1e308, 1.0)], ids=str)
def test_range_count_not_finite(case):
    inputs = [scalar(v, np.float64) for v in case]
    with pytest.raises(ValueError, match=r"Range: the number of elements .* is not finite"):
        ours("Range", inputs)
    with pytest.raises(Exception, match="not a finite value"):
        ort_run("Range", inputs)


@pytest.mark.parametrize("dtype,case", [
    (np.float32, (0, 1, 1e-45)), (np.float32, (-3.4e38, 3.4e38, 1)),
    (np.int64, (I64_MIN, I64_MAX, 1)), (np.int64, (I64_MAX, I64_MIN, -1))], ids=str)
def test_range_count_beyond_int64(dtype, case):
    inputs = [scalar(v, dtype) for v in case]
    with pytest.raises(ValueError, match=r"Range: the number of elements .* exceeds the int64"):
        ours("Range", inputs)
    with pytest.raises(Exception, match="exceeds the supported range"):
        ort_run("Range", inputs)


def test_range_float_count_in_double():
    """float ends: limit - start in double (it rounds, and overflows to
    infinity); integer ends: exact."""
    check("Range", [scalar(-1e-17, np.float64), scalar(1, np.float64), scalar(1, np.float64)])
    assert ours("Range", [scalar(-1e-17, np.float64), scalar(1, np.float64)])[0].size == 1
    with pytest.raises(ValueError, match="is not finite"):
        ours("Range", [scalar(0, np.float64), scalar(1e300, np.float64),
                       scalar(1e-300, np.float64)])
    assert ours("Range", [scalar(2**60, np.int64), scalar(2**60 + 1, np.int64)])[0].size == 1


@pytest.mark.parametrize("case", [(0, 2**62, 1), (0, I64_MAX, 3), (I64_MIN, I64_MAX, 5)],
                         ids=str)
def test_range_too_large_is_refused_before_allocating(case):
    count = -((case[0] - case[1]) // case[2])
    with pytest.raises(MemoryError, match=rf"Range: output 0 of {count} elements"):
        ours("Range", [scalar(v, np.int64) for v in case])


@pytest.mark.parametrize("index,shape", [(0, (2,)), (0, (0,)), (1, (2,)), (2, (0,))], ids=str)
def test_range_not_scalar(index, shape):
    inputs = [scalar(0, np.float32), scalar(4, np.float32), scalar(1, np.float32)]
    inputs[index] = np.ones(shape, np.float32)
    name = ("start", "limit", "delta")[index]
    with pytest.raises(ValueError, match=rf"Range: input {index} .*\({name}\) must be a scalar "
                                         rf"or of shape \(1,\), got shape \({shape[0]},\)"):
        ours("Range", inputs)


def test_range_rank_2():
    with pytest.raises(ValueError, match=r"Range: input 0 .*has rank 2 .*expected one of ranks"):
        ours("Range", [np.ones((1, 1), np.float32), scalar(4, np.float32)])


def test_range_mixed_types():
    with pytest.raises(TypeError, match=r"Range: input 1 .*float64, expected float32 like input"):
        ours("Range", [scalar(0, np.float32), scalar(4, np.float64)])


@pytest.mark.parametrize("dtype", [np.float16, np.uint8, np.int8, np.uint64, bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_range_unsupported_type(dtype):
    with pytest.raises(TypeError, match=r"Range: input 0 .*has element type .*expected one of "
                                        r"float32, float64, int16, int32, int64"):
        ours("Range", [scalar(0, dtype), scalar(4, dtype)])


def test_range_missing_limit():
    model = node_model("Range", [scalar(0, np.float32)], domain=MS)
    model.graph.node[0].input.append("")
    with pytest.raises(ValueError, match=r"Range: input 1 .*is required but missing"):
        run_ours(model, [scalar(0, np.float32)])


# ------------------------------------------------------------------ Trilu

TRILU_DTYPES = [np.float32, np.float64, np.int64, np.float16]
TRILU_SHAPES = [(3, 4), (4, 3), (1, 1), (5, 5), (1, 17), (17, 1), (0, 3), (3, 0), (2, 0, 3),
                (2, 3, 5), (2, 2, 3, 4), (33, 65)]


def matrix(rng, shape, dtype):
    return (rng.standard_normal(shape) * 10).astype(dtype)


@pytest.mark.parametrize("dtype", TRILU_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", TRILU_SHAPES, ids=str)
@pytest.mark.parametrize("upper", [None, 0, 1])
def test_trilu(dtype, shape, upper):
    rng = np.random.default_rng(sum(shape))
    attrs = {} if upper is None else {"upper": upper}
    check("Trilu", [matrix(rng, shape, dtype)], **attrs)


@pytest.mark.parametrize("k", [0, 1, -1, 2, -2, 3, -3, 4, 5, -5, 100, -100, 2**62, -2**62,
                               I64_MAX, I64_MIN])
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k_shape", [(), (1,)], ids=str)
def test_trilu_k(k, upper, k_shape):
    rng = np.random.default_rng(5)
    check("Trilu", [matrix(rng, (2, 4, 5), np.float32), scalar(k, np.int64, k_shape)],
          upper=upper)


@pytest.mark.parametrize("upper", [2, -1, 7])
def test_trilu_upper_any_nonzero(upper):
    """ONNX Runtime reads every non-zero ``upper`` as 1."""
    x = matrix(np.random.default_rng(1), (4, 4), np.float64)
    check("Trilu", [x, scalar(1, np.int64)], upper=upper)
    assert same_bits(ours("Trilu", [x], upper=upper)[0], ours("Trilu", [x], upper=1)[0])


def test_trilu_special_values():
    x = np.array([[np.nan, -0.0, np.inf], [np.nan, -np.inf, -0.0], [1.0, np.nan, 2.0]],
                 np.float32)
    for upper in (0, 1):
        for k in (-1, 0, 1):
            check("Trilu", [x, scalar(k, np.int64)], upper=upper)


@pytest.mark.parametrize("name", ["fortran", "strided", "read-only", "byte offset 1",
                                  "odd byte strides"])
def test_trilu_layouts(name):
    x = matrix(np.random.default_rng(2), (3, 5, 6), np.float32)
    check("Trilu", [dict(layouts(x))[name], scalar(-1, np.int64)], upper=0)


@pytest.mark.parametrize("shape", [(4,), ()], ids=str)
def test_trilu_rank_below_2(shape):
    with pytest.raises(ValueError, match=r"Trilu: input 0 .*must have rank >= 2"):
        ours("Trilu", [np.ones(shape, np.float32)])


@pytest.mark.parametrize("shape", [(2,), (0,)], ids=str)
def test_trilu_k_not_scalar(shape):
    with pytest.raises(ValueError, match=r"Trilu: input 1 .*\(k\) must be a scalar or of shape"):
        ours("Trilu", [np.ones((2, 2), np.float32), np.ones(shape, np.int64)])
    with pytest.raises(ValueError, match=r"Trilu: input 1 .*has rank 2"):
        ours("Trilu", [np.ones((2, 2), np.float32), np.ones((1, 1), np.int64)])


def test_trilu_k_int32():
    with pytest.raises(TypeError, match=r"Trilu: input 1 .*has element type int32, expected "
                                        r"one of int64"):
        ours("Trilu", [np.ones((2, 2), np.float32), scalar(1, np.int32)])


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.bool_, bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_trilu_unsupported_type(dtype):
    with pytest.raises(TypeError, match=r"Trilu: input 0 .*has element type .*expected one of "
                                        r"float32, float16, float64, int64"):
        ours("Trilu", [np.ones((2, 2), dtype)])


def test_trilu_upper_of_another_kind():
    with pytest.raises(ValueError, match=r"Trilu: attribute upper must be of kind int, got float"):
        ours("Trilu", [np.ones((2, 2), np.float32)], upper=1.0)


# ------------------------------------------------------------------ Unique

def repeats(rng, n, dtype, distinct=7):
    return rng.integers(-distinct, distinct, n).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("n", [0, 1, 2, 7, 33, 1000, 100_000])
def test_unique(dtype, n):
    rng = np.random.default_rng(n)
    check("Unique", [repeats(rng, n, dtype)], n_outputs=3)
    check("Unique", [(rng.standard_normal(n) * 100).astype(dtype)], n_outputs=3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_unique_special_values(dtype):
    """Signed zeros are one value, written as the first seen; every NaN is
    a value of its own."""
    nan, inf = np.nan, np.inf
    for values in ([0.0, -0.0, 1.0, -0.0], [-0.0, 0.0, 1.0, -0.0], [nan, 1.0, nan, 1.0, nan],
                   [inf, -inf, inf, nan, -0.0, 0.0], [nan], [-0.0]):
        check("Unique", [np.array(values, dtype)], n_outputs=3)
    y, idx, counts = ours("Unique", [np.array([-0.0, 0.0, nan, nan], dtype)], 3)
    assert np.signbit(y[0]) and y.size == 3 and idx.tolist() == [0, 0, 1, 2]
    assert counts.tolist() == [2, 1, 1]


@pytest.mark.parametrize("name", ["strided", "read-only", "byte offset 1", "odd byte strides"])
def test_unique_layouts(name):
    x = repeats(np.random.default_rng(3), 300, np.float32)
    check("Unique", [dict(layouts(x))[name]], n_outputs=3)


@pytest.mark.parametrize("shape", [(), (2, 3), (0, 2)], ids=str)
def test_unique_not_1d(shape):
    with pytest.raises(ValueError, match=r"Unique: input 0 .*has rank \d .*expected rank 1"):
        ours("Unique", [np.ones(shape, np.float32)], 3)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.bool_, bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_unique_unsupported_type(dtype):
    with pytest.raises(TypeError, match=r"Unique: input 0 .*has element type .*expected one of "
                                        r"float32, float16"):
        ours("Unique", [np.ones(3, dtype)], 3)


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_unique_needs_three_outputs(n_outputs):
    with pytest.raises(ValueError, match=rf"Unique: the node must have 3 outputs .*got "
                                         rf"{n_outputs}"):
        ours("Unique", [np.ones(3, np.float32)], n_outputs)


# ------------------------------------------------------------------ ExpandDims

EXPAND_DTYPES = [np.float32, np.float16, np.float64, np.int8, np.int16, np.int32, np.int64,
                 np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def values(rng, shape, dtype):
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return (rng.standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("dtype", EXPAND_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (3,), (0, 4), (2, 3, 5)], ids=str)
def test_expand_dims(dtype, shape):
    rng = np.random.default_rng(len(shape))
    x = values(rng, shape, dtype)
    for axis in range(-len(shape) - 1, len(shape) + 1):
        check("ExpandDims", [x, scalar(axis, np.int32)])
    check("ExpandDims", [x, scalar(0, np.int32, (1,))])


def test_expand_dims_strings():
    x = np.array([["a", "bc"], ["", "xyz"]], dtype=object)
    for axis in (-3, -1, 0, 2):
        inputs = [x, scalar(axis, np.int32)]
        (want,) = ort_run("ExpandDims", inputs)
        model = node_model("ExpandDims", inputs, domain=MS)
        for threads in THREAD_COUNTS:
            (got,), names, _ = run_ours(model, inputs, threads)
            assert names == ["onnx_light_cpu::ExpandDims"], names
            assert got.shape == want.shape and got.dtype == want.dtype
            assert got.tolist() == want.tolist()
    y = ours("ExpandDims", [np.array(["a", "bc"]), scalar(1, np.int32)])[0]
    assert y.shape == (2, 1) and y.ravel().tolist() == ["a", "bc"]


@pytest.mark.parametrize("name", ["fortran", "strided", "read-only", "byte offset 1",
                                  "odd byte strides"])
def test_expand_dims_layouts_and_copy(name):
    x = dict(layouts(values(np.random.default_rng(4), (3, 4), np.float32)))[name]
    check("ExpandDims", [x, scalar(-2, np.int32)])
    y = ours("ExpandDims", [x, scalar(1, np.int32)])[0]
    assert not np.shares_memory(y, x) and y.flags.writeable


@pytest.mark.parametrize("shape,axis", [((2, 3), 3), ((2, 3), -4), ((), 1), ((), -2)], ids=str)
def test_expand_dims_axis_out_of_range(shape, axis):
    with pytest.raises(ValueError, match=rf"ExpandDims: input 1 .*\(axis\) must be in "
                                         rf"\[{-len(shape) - 1}, {len(shape)}\] .*got {axis}"):
        ours("ExpandDims", [np.ones(shape, np.float32), scalar(axis, np.int32)])


def test_expand_dims_axis_not_scalar():
    with pytest.raises(ValueError, match=r"ExpandDims: input 1 .*\(axis\) must be a scalar"):
        ours("ExpandDims", [np.ones(2, np.float32), np.zeros(2, np.int32)])
    with pytest.raises(ValueError, match=r"ExpandDims: input 1 .*has rank 2"):
        ours("ExpandDims", [np.ones(2, np.float32), np.zeros((1, 1), np.int32)])


def test_expand_dims_axis_int64():
    with pytest.raises(TypeError, match=r"ExpandDims: input 1 .*has element type int64, "
                                        r"expected one of int32"):
        ours("ExpandDims", [np.ones(2, np.float32), scalar(0, np.int64)])


@pytest.mark.parametrize("dtype", [bfloat16, np.complex64, np.complex128],
                         ids=lambda d: np.dtype(d).name)
def test_expand_dims_unsupported_type(dtype):
    with pytest.raises(TypeError, match=r"ExpandDims: input 0 .*has element type .*expected "
                                        r"one of float32, float16, float64, int8, .*, bool, "
                                        r"string$"):
        ours("ExpandDims", [np.ones(2, dtype), scalar(0, np.int32)])


# ------------------------------------------------------------------ all four

def test_huge_broadcast_input_is_refused():
    """A stride-0 view of 2**33 elements is refused, never densified."""
    huge = np.broadcast_to(np.zeros(1, np.float32), (1 << 33,))
    with pytest.raises(MemoryError, match=r"Unique: input 0 .* as a dense copy"):
        ours("Unique", [huge], 3)
    with pytest.raises(MemoryError, match=r"ExpandDims: "):
        ours("ExpandDims", [huge, scalar(0, np.int32)])
    with pytest.raises(MemoryError, match=r"Trilu: "):
        ours("Trilu", [huge.reshape(1 << 16, 1 << 17)])


ELEMENT_TYPES = {
    "Range": {"float", "double", "int16", "int32", "int64"},
    "Trilu": {"float", "float16", "double", "int64"},
    "Unique": {"float", "float16"},
    "ExpandDims": {"float", "float16", "double", "int8", "int16", "int32", "int64", "uint8",
                   "uint16", "uint32", "uint64", "bool", "string"},
}


@pytest.mark.parametrize("policy", list(olc.MicrosoftKernelImplementation))
def test_inventory_one_kernel_whatever_the_policy(policy):
    records = {r.op_type: r for r in olc.registered_kernels(policy)
               if r.domain == MS and r.op_type in ELEMENT_TYPES}
    assert sorted(records) == sorted(ELEMENT_TYPES)
    for op, types in ELEMENT_TYPES.items():
        r = records[op]
        assert (r.name, r.registrar, r.implementation) == (
            kernel_name(op), "RegisterMicrosoftKernels", "optimized")
        assert set(r.element_types) == {f"tensor({t})" for t in types}
    inputs = [np.array([2.0, 1.0, 2.0], np.float32)]
    sess = ReferenceEvaluator(node_model("Unique", inputs, 3, domain=MS))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_kernel_usage_recording(sess, True)
    y, idx, counts = sess.run(None, {"x0": inputs[0]})
    assert olc.used_kernel_names(sess) == ["onnx_light_cpu::MicrosoftUnique"]
    assert y.tolist() == [2.0, 1.0] and idx.tolist() == [0, 1, 0] and counts.tolist() == [2, 1]
