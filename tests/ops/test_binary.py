"""Binary (Add ... PRelu) and variadic (Sum, Mean, Min, Max) element-wise
kernels against the onnx.reference built-ins, on broadcast patterns, every
element type, special values, edge sizes and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh

from differential import check_node, node_model, run_ours, special_values, unaligned

FLOATS = [np.float32, np.float16, bfloat16, np.float64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
NUMERIC = FLOATS + INTS

# (shape of A, shape of B): same shape, scalars either side, row and column
# broadcasts, both-sided and general N-d broadcasts, empty tensors.
PATTERNS = [
    ((7,), (7,)),
    ((5, 33), ()),
    ((), (5, 33)),
    ((4, 17), (17,)),
    ((4, 17), (4, 1)),
    ((4, 1), (1, 17)),
    ((2, 3, 4, 5), (3, 1, 5)),
    ((1, 3, 1), (2, 1, 6)),
    ((2, 0, 3), (3,)),
    ((0,), ()),
]
LARGE = [((3, 70001), (70001,)), ((70001, 3), (70001, 1)), ((1 << 17,), ())]


def _ids(d):
    return np.dtype(d).name


def _random(rng, shape, dtype, low=-20, high=20):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(low, info.min), min(high, info.max), size=shape,
                            endpoint=True, dtype=dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids)
def test_arithmetic_matches_builtin(op, dtype):
    rng = np.random.default_rng(0)
    for sa, sb in PATTERNS:
        a, b = _random(rng, sa, dtype), _random(rng, sb, dtype)
        if op == "Div" and np.dtype(dtype).kind == "f":
            b = np.where(b == 0, 1, b).astype(dtype)
        check_node(op, [a, b])


@pytest.mark.parametrize("op", ["Add", "Mul", "Div", "Sub"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.int32, np.int64,
                                   np.int8, np.uint8], ids=_ids)
def test_fast_paths_large(op, dtype):
    """The sizes that go parallel, for the SIMD fast-path types."""
    rng = np.random.default_rng(1)
    for sa, sb in LARGE:
        a = _random(rng, sa, dtype)
        b = _random(rng, sb, dtype, 1, 9)
        check_node(op, [a, b])
        check_node(op, [b, a])


@pytest.mark.parametrize("dtype", INTS, ids=_ids)
def test_integer_overflow_wraps(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max, 3], dtype=dtype)
    b = np.array([1, 1, info.max, info.max], dtype=dtype)
    with np.errstate(all="ignore"):
        for op in ("Add", "Sub", "Mul"):
            check_node(op, [a, b])


@pytest.mark.parametrize("dtype", INTS, ids=_ids)
def test_integer_division_edges_do_not_trap(dtype):
    """Truncation toward zero, x / 0 = 0 and MIN / -1 wraps, never SIGFPE."""
    info = np.iinfo(dtype)
    signed = info.min < 0
    a = np.array([7, 7, 0, info.max, info.min] + ([-7, -7, info.min] if signed else []),
                 dtype=dtype)
    b = np.array([2, 0, 0, 0, 3] + ([2, -2, -1] if signed else []), dtype=dtype)
    with np.errstate(all="ignore"):
        check_node("Div", [a, b])
        for fmod in (0, 1):
            check_node("Mod", [a, b], fmod=fmod)
    (y,), _, _ = run_ours(node_model("Div", [a, b]), [a, b])
    expected = [3, 0, 0, 0, info.min // 3 + (1 if signed and info.min % 3 else 0)]
    if signed:
        expected += [-3, 3, info.min]
    np.testing.assert_array_equal(y, np.array(expected).astype(dtype))


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids)
def test_mod_matches_builtin(dtype, fmod):
    rng = np.random.default_rng(2)
    for sa, sb in PATTERNS:
        a, b = _random(rng, sa, dtype), _random(rng, sb, dtype, 1, 9)
        if np.dtype(dtype).kind == "i":
            b = np.where(rng.random(b.shape) < 0.5, b, -b).astype(dtype)
        check_node("Mod", [a, b], fmod=fmod)


def test_mod_floats_python_sign():
    a = np.array([5.5, -5.5, 5.5, -5.5, 4.0, -4.0], dtype=np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, 2.0, -2.0], dtype=np.float32)
    (y,), _, _ = run_ours(node_model("Mod", [a, b], fmod=0), [a, b])
    np.testing.assert_array_equal(y, np.mod(a, b))
    (y,), _, _ = run_ours(node_model("Mod", [a, b], fmod=1), [a, b])
    np.testing.assert_array_equal(y, np.fmod(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.float64], ids=_ids)
def test_pow_float_matches_builtin(dtype):
    rng = np.random.default_rng(3)
    for sa, sb in PATTERNS:
        a = _random(rng, sa, dtype, 0, 4)
        b = _random(rng, sb, dtype, -3, 3)
        check_node("Pow", [a, b])
    check_node("Pow", [special_values(dtype), np.array(2, dtype=dtype)])


@pytest.mark.parametrize("base", [np.int32, np.int64, np.float32, np.float16, bfloat16,
                                  np.float64], ids=_ids)
@pytest.mark.parametrize("exponent", NUMERIC, ids=_ids)
def test_pow_mixed_types(base, exponent):
    """Pow's T and T1 differ: the output has the base's type."""
    rng = np.random.default_rng(4)
    a = _random(rng, (3, 5), base, 0, 5)
    b = _random(rng, (5,), exponent, 0, 4)
    check_node("Pow", [a, b])


def test_pow_integer_wraps():
    a = np.array([3, -3, 2, 7], dtype=np.int32)
    b = np.array([40, 41, 31, 0], dtype=np.int32)
    with np.errstate(all="ignore"):
        check_node("Pow", [a, b])


@pytest.mark.parametrize("op", ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids)
def test_comparisons_match_builtin(op, dtype):
    rng = np.random.default_rng(5)
    for sa, sb in PATTERNS:
        check_node(op, [_random(rng, sa, dtype, -3, 3), _random(rng, sb, dtype, -3, 3)])
    if np.dtype(dtype).kind == "f":
        s = special_values(dtype)
        check_node(op, [s, s[::-1].copy()])


def test_comparisons_large():
    rng = np.random.default_rng(6)
    for dtype in (np.int64, np.float32, np.float16):
        a, b = _random(rng, (1 << 17,), dtype, -3, 3), _random(rng, (1 << 17,), dtype, -3, 3)
        for op in ("Equal", "Less", "Greater"):
            check_node(op, [a, b])


def test_equal_bool_and_strings():
    rng = np.random.default_rng(7)
    check_node("Equal", [rng.random((4, 9)) < 0.5, rng.random((9,)) < 0.5])
    a = np.array(["a", "bb", "c"], dtype=object)
    b = np.array(["a", "b", "c"], dtype=object)
    (y,), names, paths = run_ours(node_model("Equal", [a, b]), [a, b])
    np.testing.assert_array_equal(y, [True, False, True])
    assert paths == ["equal_string_builtin"]


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical_match_builtin(op):
    rng = np.random.default_rng(8)
    for sa, sb in PATTERNS + LARGE[:1]:
        check_node(op, [_random(rng, sa, np.bool_), _random(rng, sb, np.bool_)])


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", INTS, ids=_ids)
def test_bitwise_match_builtin(op, dtype):
    rng = np.random.default_rng(9)
    info = np.iinfo(dtype)
    for sa, sb in PATTERNS:
        check_node(op, [_random(rng, sa, dtype, info.min, info.max),
                        _random(rng, sb, dtype, info.min, info.max)])


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", INTS, ids=_ids)
def test_bitshift_matches_builtin(dtype, direction):
    rng = np.random.default_rng(10)
    info = np.iinfo(dtype)
    bits = info.bits
    for sa, sb in PATTERNS:
        a = _random(rng, sa, dtype, info.min, info.max)
        b = _random(rng, sb, dtype, 0, bits - 1)
        check_node("BitShift", [a, b], direction=direction)
    # Counts outside [0, bits): 0, or -1 for a negative value shifted right.
    a = np.array([1, 5, info.max, info.min, info.min], dtype=dtype)
    counts = [bits, bits + 1, 0, bits - 1, 1] if info.min == 0 else [bits, -1, 0, bits + 3, 1]
    check_node("BitShift", [a, np.array(counts).astype(dtype)], direction=direction)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.float64, np.int32,
                                   np.int64, np.uint32, np.uint64], ids=_ids)
def test_prelu_matches_builtin(dtype):
    rng = np.random.default_rng(11)
    for sx, ss in [((7,), (7,)), ((3, 4, 5), (5,)), ((3, 4, 5), (4, 1)), ((2, 3), ()),
                   ((0, 3), (3,)), ((2, 70001), (1,))]:
        check_node("PRelu", [_random(rng, sx, dtype), _random(rng, ss, dtype, -3, 3)])


def test_prelu_channel_slope_like_builtin():
    """A 1-D slope matching exactly one dimension of X applies along it."""
    rng = np.random.default_rng(12)
    check_node("PRelu", [_random(rng, (2, 3, 4, 5), np.float32), _random(rng, (3,), np.float32)])


@pytest.mark.parametrize("op", ["Sum", "Mean", "Min", "Max"])
@pytest.mark.parametrize("dtype", NUMERIC, ids=_ids)
def test_variadic_match_builtin(op, dtype):
    if op in ("Sum", "Mean") and np.dtype(dtype).kind != "f" and dtype is not bfloat16:
        pytest.skip("Sum and Mean take floats only")
    rng = np.random.default_rng(13)
    shape_sets = [[(5,)], [(4, 6), (4, 6)], [(3, 4, 6), (6,), (4, 1)],
                  [(2, 1, 5), (2, 3, 5), (5,), ()], [(0, 3), (3,)]]
    if op == "Mean":  # the built-in's Mean needs its first input at full shape
        shape_sets = [s for s in shape_sets if np.broadcast_shapes(*s) == s[0]]
    for shapes in shape_sets:
        check_node(op, [_random(rng, s, dtype, -5, 5) for s in shapes])


_NUMPY_VARIADIC = {"Sum": np.add, "Min": np.fmin, "Max": np.fmax}


@pytest.mark.parametrize("op", ["Sum", "Mean", "Min", "Max"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=_ids)
def test_variadic_later_input_widens_the_output(op, dtype):
    """Regression: when the first two inputs broadcast to less than the
    output shape, every output element is still written (it was read from
    uninitialised memory)."""
    if op in ("Sum", "Mean") and dtype is np.int32:
        pytest.skip("Sum and Mean take floats only")
    rng = np.random.default_rng(21)
    for shapes in [[(1,), (1,), (4,), (4,)], [(2, 1, 1), (2, 1, 1), (2, 4, 1), (1, 4, 3)],
                   [(), (3,), (2, 3)], [(1, 5), (1, 1), (6, 1)]]:
        xs = [_random(rng, s, dtype, -5, 5) for s in shapes]

        def oracle(*xs):
            total = xs[0]
            for x in xs[1:]:
                total = (np.add if op == "Mean" else _NUMPY_VARIADIC[op])(total, x)
            if op == "Mean":
                total = total / np.array(len(xs), dtype=dtype)
            return [np.asarray(total, dtype=dtype)]

        check_node(op, xs, oracle=oracle)


@pytest.mark.parametrize("op", ["Min", "Max"])
@pytest.mark.parametrize("dtype", FLOATS, ids=_ids)
def test_min_max_propagate_nan(op, dtype):
    s = special_values(dtype)
    check_node(op, [s, s[::-1].copy()])
    check_node(op, [s, np.array(np.nan, dtype=dtype), s])


def test_unaligned_and_noncontiguous_inputs():
    rng = np.random.default_rng(14)
    a = unaligned(_random(rng, (1001,), np.float32))
    b = unaligned(_random(rng, (1001,), np.float32))
    check_node("Add", [a, b])
    big = _random(rng, (40, 66), np.float16)
    check_node("Mul", [big[:, ::2], big[:, 1::2]])


def test_fast_path_labels():
    rng = np.random.default_rng(15)
    x = _random(rng, (8, 64), np.float32)
    cases = {((8, 64), (8, 64)): "add_float32_", ((8, 64), ()): "add_scalar_float32_",
             ((8, 64), (64,)): "add_broadcast_row_float32_",
             ((8, 64), (8, 1)): "add_broadcast_col_float32_",
             ((2, 4, 64), (4, 1)): "add_broadcast_float32_"}
    for (sa, sb), prefix in cases.items():
        a, b = x.ravel()[: int(np.prod(sa))].reshape(sa), _random(rng, sb, np.float32)
        _, names, paths = run_ours(node_model("Add", [a, b]), [a, b])
        assert names == ["onnx_light_cpu::Add"]
        assert paths[0].startswith(prefix), paths


def test_legacy_broadcast_axis():
    """Opset 6: broadcast=1 with axis lines B up with A from that axis."""
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([10, 20, 30], dtype=np.float32)
    model = node_model("Add", [a, b], opset=6, broadcast=1, axis=1)
    (y,), names, _ = run_ours(model, [a, b])
    np.testing.assert_array_equal(y, a + b.reshape(1, 3, 1))
    assert names == ["onnx_light_cpu::Add"]


def test_outputs_do_not_alias_inputs():
    a = np.ones((4,), dtype=np.float32)
    for op, inputs in [("Sum", [a]), ("Max", [a]), ("Add", [a, np.zeros((), np.float32)])]:
        (y,), _, _ = run_ours(node_model(op, inputs), inputs)
        assert not np.shares_memory(y, a)


# -- bad input -----------------------------------------------------------------


def _evaluator(op, inputs, **attrs):
    from onnx.reference import ReferenceEvaluator

    import onnx_light_cpu as olc

    sess = ReferenceEvaluator(node_model(op, inputs, **attrs))
    olc.register_kernels_for_session(sess)
    return sess


def test_mismatched_types_raise():
    a, b = np.ones(3, np.float32), np.ones(3, np.float64)
    with pytest.raises(TypeError, match=r"Add: input 1 .* float64"):
        _evaluator("Add", [a, a]).run(None, {"x0": a, "x1": b})


def test_unsupported_type_raises():
    a = np.ones(3, np.bool_)
    with pytest.raises(TypeError, match=r"Add: input 0 .*bool"):
        _evaluator("Add", [a, a]).run(None, {"x0": a, "x1": a})
    f = np.ones(3, np.float32)
    with pytest.raises(TypeError, match=r"BitwiseAnd: input 0"):
        _evaluator("BitwiseAnd", [f, f]).run(None, {"x0": f, "x1": f})


def test_shapes_that_do_not_broadcast_raise():
    a, b = np.ones((3, 4), np.float32), np.ones((5,), np.float32)
    with pytest.raises(ValueError, match=r"Mul: input 1 .*\(5,\)"):
        _evaluator("Mul", [a, b]).run(None, {"x0": a, "x1": b})
    c = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"Max: input 2"):
        _evaluator("Max", [a, c, b]).run(None, {"x0": a, "x1": c, "x2": b})
    with pytest.raises(ValueError, match=r"PRelu: input 1"):
        _evaluator("PRelu", [a, b]).run(None, {"x0": a, "x1": b})


def test_bad_attributes_raise():
    a = np.ones(3, np.uint8)
    with pytest.raises(ValueError, match="direction"):  # the built-in's constructor
        _evaluator("BitShift", [a, a], direction="UP")
    sess = _evaluator("Mod", [a, a], fmod=2)  # kept, raised by every run
    for _ in range(2):
        with pytest.raises(ValueError, match=r"Mod: attribute fmod must be 0 or 1, got 2"):
            sess.run(None, {"x0": a, "x1": a})
    f, g = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    sess = _evaluator("Add", [f, g], opset=6, broadcast=1, axis=1)
    with pytest.raises(ValueError, match=r"Add: input 1 .*axis 1"):
        sess.run(None, {"x0": f, "x1": g})


def test_node_with_empty_inputs():
    a = np.ones((0, 5), np.float32)
    for op in ("Add", "Less", "Max"):
        check_node(op, [a, np.ones((5,), np.float32)])


def test_models_from_helper_run():
    """A two-node graph mixing the families (Mul then Greater)."""
    from onnx import TensorProto
    from onnx.reference import ReferenceEvaluator

    import onnx_light_cpu as olc

    graph = oh.make_graph(
        [oh.make_node("Mul", ["x", "y"], ["m"]), oh.make_node("Greater", ["m", "y"], ["z"])],
        "g", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [None]),
              oh.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
        [oh.make_tensor_value_info("z", TensorProto.BOOL, [None])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    x, y = np.array([1, 2, 3], np.float32), np.array([2, 2, 2], np.float32)
    np.testing.assert_array_equal(sess.run(None, {"x": x, "y": y})[0], x * y > y)


def test_pow_float32_special_grid_and_accuracy():
    """The AVX2 pow: every special pair as powf, random pairs within 1 ulp
    of the correctly rounded float64 result."""
    values = np.array([0, -0.0, 1, -1, 2, -2, 0.5, -0.5, 3, -3, np.inf, -np.inf, np.nan, 1e-40,
                       3e38, 1e-30, 100, 130, -130, 1e10], dtype=np.float32)
    a, b = (m.ravel().copy() for m in np.meshgrid(values, values))
    with np.errstate(all="ignore"):
        check_node("Pow", [a, b])
    rng = np.random.default_rng(16)
    a = rng.uniform(0, 50, 20001).astype(np.float32)
    b = rng.uniform(-20, 20, 20001).astype(np.float32)

    def oracle(x, y):
        with np.errstate(all="ignore"):
            return [np.power(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)]

    check_node("Pow", [a, b], oracle=oracle, tolerance=(1.2e-7, 0))


def test_random_broadcast_shapes_match_numpy():
    """The C broadcast planner on random shape pairs, against NumPy."""
    from onnx_light_cpu._kernels import binary as core

    rng = np.random.default_rng(17)
    for _ in range(300):
        rank = int(rng.integers(0, 5))
        out = tuple(int(d) for d in rng.integers(0, 4, size=rank))
        shapes = []
        for _ in range(2):
            r = int(rng.integers(0, rank + 1))
            shapes.append(tuple(1 if rng.random() < 0.4 else d for d in out[rank - r:]))
        a, b = (np.zeros(s, np.float32) for s in shapes)
        assert core.broadcast_shape((a, b)) == np.broadcast_shapes(*shapes)
        a = rng.normal(size=shapes[0]).astype(np.float32)
        b = rng.normal(size=shapes[1]).astype(np.float32)
        (y,), _, _ = run_ours(node_model("Sub", [a, b]), [a, b])
        np.testing.assert_array_equal(y, a - b)
    assert core.broadcast_shape((np.zeros((2, 3)), np.zeros((4, 3)))) == 1
