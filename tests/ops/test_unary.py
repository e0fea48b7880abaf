"""Abs, Exp, Log, Sigmoid, Tanh, Not, Neg, Reciprocal, Clip, Gelu against
NumPy, the built-ins, ONNX Runtime and float64."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level, code_level_name

from differential import (
    THREAD_COUNTS,
    TOLERANCES,
    check_node,
    element_type,
    node_model,
    random_shapes,
    run_builtin,
    run_ours,
    special_values,
    unaligned,
)

FLOATS = [np.float32, np.float16, bfloat16, np.float64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _sigmoid64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


REFERENCE64 = {"Exp": np.exp, "Log": np.log, "Sigmoid": _sigmoid64, "Tanh": np.tanh}


def _random(rng, shape, dtype, op):
    low, high = (1e-3, 50.0) if op == "Log" else (-12.0, 12.0)
    return rng.uniform(low, high, size=shape).astype(dtype)


def _oracle64(op, dtype):
    """float64 result rounded to ``dtype``: the correctly rounded answer."""
    def oracle(x):
        with np.errstate(all="ignore"):
            return [REFERENCE64[op](x.astype(np.float64)).astype(dtype)]
    return oracle


@pytest.mark.parametrize("op", ["Exp", "Log", "Sigmoid", "Tanh"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_transcendental_matches_float64(op, dtype):
    rng = np.random.default_rng(0)
    for shape in random_shapes(rng):
        check_node(op, [_random(rng, shape, dtype, op)], oracle=_oracle64(op, dtype))
    check_node(op, [special_values(dtype)], oracle=_oracle64(op, dtype))
    check_node(op, [unaligned(_random(rng, (1001,), dtype, op))], oracle=_oracle64(op, dtype))


@pytest.mark.parametrize("op", ["Exp", "Log", "Sigmoid", "Tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_transcendental_matches_builtin(op, dtype):
    rng = np.random.default_rng(1)
    check_node(op, [_random(rng, (4, 33), dtype, op)], oracle="builtin")


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: np.dtype(d).name)
def test_abs_matches_builtin(dtype):
    rng = np.random.default_rng(2)
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    for shape in random_shapes(rng, include_large=dtype in (np.float32, np.int8)):
        if info is None:
            x = rng.normal(size=shape).astype(dtype)
        else:
            x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
        check_node("Abs", [x], oracle="builtin")
    if info is not None and info.min < 0:
        # The minimum has no positive twin: it wraps, as in NumPy.
        check_node("Abs", [np.array([info.min, -1, 0, info.max], dtype=dtype)], oracle="builtin")


def test_abs_keeps_nan_payload_and_clears_sign():
    bits = np.array([0xFFC12345, 0x7FA00001, 0x80000000, 0xFF800000], dtype=np.uint32)
    (y,), _, _ = run_ours(node_model("Abs", [bits.view(np.float32)]), [bits.view(np.float32)])
    np.testing.assert_array_equal(y.view(np.uint32), bits & 0x7FFFFFFF)


def test_not():
    rng = np.random.default_rng(3)
    for shape in random_shapes(rng):
        check_node("Not", [rng.integers(0, 2, size=shape).astype(bool)], oracle="builtin")


def test_non_contiguous_and_read_only_inputs():
    base = np.linspace(-5, 5, 64, dtype=np.float32).reshape(8, 8)
    strided = base[:, ::2]
    check_node("Exp", [strided], oracle="builtin")
    frozen = base.copy()
    frozen.flags.writeable = False
    check_node("Tanh", [frozen], oracle="builtin")


@pytest.mark.parametrize(
    "op, x, message",
    [
        ("Abs", np.array(["a", "b"]), "Abs: input 0 ('x0') has element type <U1"),
        ("Exp", np.array([1, 2], dtype=np.int32), "Exp: input 0 ('x0') has element type int32"),
        ("Not", np.array([1.0], dtype=np.float32), "Not: input 0 ('x0') has element type float32"),
    ],
)
def test_wrong_element_type_is_a_clear_type_error(op, x, message):
    model = node_model(op, [np.zeros(1, np.float32)])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    with pytest.raises(TypeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sess.run(None, {"x0": x})


def test_paths_name_the_level_in_use():
    x = np.ones(10, np.float32)
    model = node_model("Exp", [x])
    for level in available_simd_levels():
        with capped_simd_level(level):
            _, _, paths = run_ours(model, [x])
            assert paths == [f"exp_float32_{code_level_name(level)}"]
    _, _, paths = run_ours(node_model("Exp", [x.astype(np.float64)]), [x.astype(np.float64)])
    assert paths == ["exp_float64_scalar"]  # no vector path for double


# ---------------------------------------------------------------- ulp bounds

def _ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in representable float32 values (both finite or equal)."""
    def ordered(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(a) - ordered(b))


def _float32_sweep(step: int) -> np.ndarray:
    """Every ``step``-th float32 bit pattern, both signs, plus the edges."""
    bits = np.arange(0, 1 << 31, step, dtype=np.uint32)
    edges = np.array([0, 1, 2, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x7F800000], dtype=np.uint32)
    bits = np.concatenate([bits, edges])
    return np.concatenate([bits, bits | np.uint32(0x80000000)]).view(np.float32)


def _max_ulp(op, x, level):
    with capped_simd_level(level):
        (y,), _, _ = run_ours(node_model(op, [x]), [x])
    with np.errstate(all="ignore"):
        want = REFERENCE64[op](x.astype(np.float64)).astype(np.float32)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(y), nan, err_msg=f"{op} NaN positions at {level}")
    inf = np.isinf(want)
    np.testing.assert_array_equal(y[inf], want[inf], err_msg=f"{op} infinities at {level}")
    ok = ~nan & ~inf
    return int(_ulp_distance(y[ok], want[ok]).max(initial=0))


@pytest.mark.parametrize("op", ["Exp", "Log", "Sigmoid", "Tanh"])
def test_float32_within_2_ulp_sampled(op):
    x = _float32_sweep(step=4099)  # ~1M values spread over the whole range
    for level in available_simd_levels():
        assert _max_ulp(op, x, level) <= 2, f"{op} at {level}"


@pytest.mark.slow
@pytest.mark.parametrize("op", ["Exp", "Log", "Sigmoid", "Tanh"])
def test_float32_within_2_ulp_exhaustive(op):
    for level in available_simd_levels():
        # Chunks of 2^26 inputs keep the float64 reference near 2 GB: the
        # whole --runslow suite runs in one process on a 23 GB machine.
        for start in range(0, 1 << 32, 1 << 26):
            bits = np.arange(start, start + (1 << 26), dtype=np.uint64).astype(np.uint32)
            assert _max_ulp(op, bits.view(np.float32), level) <= 2, f"{op} at {level}"


@pytest.mark.parametrize("op", ["Exp", "Log", "Sigmoid", "Tanh"])
@pytest.mark.parametrize("dtype", [np.float16, bfloat16], ids=lambda d: np.dtype(d).name)
def test_narrow_types_exhaustive(op, dtype):
    """All 65536 inputs: the result is the float64 answer rounded, give or
    take one unit in the last place of the narrow type."""
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    with np.errstate(all="ignore"):
        want = REFERENCE64[op](x.astype(np.float64)).astype(dtype)
    for level in available_simd_levels():
        with capped_simd_level(level):
            (y,), _, _ = run_ours(node_model(op, [x]), [x])
        nan = np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(y.astype(np.float32)), nan)
        a = y.view(np.int16).astype(np.int32)[~nan]
        b = want.view(np.int16).astype(np.int32)[~nan]
        a = np.where(a < 0, -(a & 0x7FFF), a)
        b = np.where(b < 0, -(b & 0x7FFF), b)
        assert np.abs(a - b).max() <= 1, f"{op} {np.dtype(dtype).name} at {level}"


def test_outputs_are_reused_only_when_nobody_holds_them():
    import models  # tests/registry

    sess = ReferenceEvaluator(models.chain("Abs", "Exp", "Tanh"))
    olc.register_kernels_for_session(sess)
    x1 = np.linspace(-2, 2, 100, dtype=np.float32)
    x2 = -2 * x1
    (y1,) = sess.run(None, {"x": x1})
    kept = y1.copy()
    (y2,) = sess.run(None, {"x": x2})
    np.testing.assert_array_equal(y1, kept)  # the user's output was not reused
    assert y2 is not y1
    np.testing.assert_allclose(y2, np.tanh(np.exp(np.abs(x2))), rtol=1e-6)
    pool = sess._olc_context.buffers
    held = pool.nbytes
    (y3,) = sess.run(None, {"x": x1})
    assert pool.nbytes == held  # the intermediates' buffers were taken again
    np.testing.assert_array_equal(y1, kept)


# ------------------------------------------------ Neg, Reciprocal, Clip, Gelu

SIGNED_INTS = [np.int8, np.int16, np.int32, np.int64]


def _bit_exact(op, inputs, want, **model_kwargs):
    """Our output equals ``want`` bit for bit (NaN payloads included) at
    every SIMD level and thread count, our kernel ran, inputs unchanged."""
    model = node_model(op, inputs, **model_kwargs)
    originals = [a.copy() for a in inputs]
    want = np.asarray(want).astype(inputs[0].dtype)  # NumPy's clip widens bfloat16
    for level in available_simd_levels():
        with capped_simd_level(level):
            for threads in THREAD_COUNTS:
                (y,), names, _ = run_ours(model, inputs, threads)
                assert f"onnx_light_cpu::{op}" in names
                assert y.dtype == want.dtype and y.shape == want.shape
                assert y.tobytes() == want.tobytes(), f"{op} {want.dtype} at {level}"
    for a, original in zip(inputs, originals):
        assert a.tobytes() == original.tobytes()


def _values(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return np.asarray(rng.integers(info.min, info.max, size=shape, endpoint=True,
                                       dtype=dtype))
    return np.asarray((rng.normal(size=shape) * 10).astype(dtype))


@pytest.mark.parametrize("dtype", FLOATS + SIGNED_INTS, ids=lambda d: np.dtype(d).name)
def test_neg_bit_exact_with_numpy(dtype):
    rng = np.random.default_rng(4)
    for shape in random_shapes(rng, include_large=dtype in (np.float32, np.int8)):
        x = _values(rng, shape, dtype)
        _bit_exact("Neg", [x], np.negative(x))
    if np.dtype(dtype).kind == "i":  # the minimum wraps, as in NumPy
        info = np.iinfo(dtype)
        x = np.array([info.min, -1, 0, info.max], dtype=dtype)
    else:
        x = special_values(dtype)
    _bit_exact("Neg", [x], np.negative(x))
    x = unaligned(_values(rng, (1001,), dtype))
    _bit_exact("Neg", [x], np.negative(x))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_reciprocal_bit_exact_with_numpy(dtype):
    rng = np.random.default_rng(5)
    with np.errstate(all="ignore"):
        for shape in random_shapes(rng, include_large=dtype == np.float32):
            x = _values(rng, shape, dtype)
            _bit_exact("Reciprocal", [x], np.reciprocal(x))
        for x in (special_values(dtype), unaligned(_values(rng, (1001,), dtype))):
            _bit_exact("Reciprocal", [x], np.reciprocal(x))


@pytest.mark.parametrize("op", ["Neg", "Reciprocal"])
def test_neg_reciprocal_match_builtin_and_old_opsets(op):
    x = np.linspace(-3, 3, 40, dtype=np.float32).reshape(5, 8) + np.float32(0.05)
    for opset in (6, 13):
        check_node(op, [x], oracle="builtin", opset=opset)


# Clip: every numeric type of opset 13, bounds as inputs.
CLIP_TYPES = FLOATS + INTS


def _clip_bounds(dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        span = min(int(info.max), 100)
        low = max(int(info.min), -span)
        return np.array(low // 2, dtype), np.array(span // 2, dtype)
    return np.array(-1.5, dtype), np.array(2.25, dtype)


@pytest.mark.parametrize("dtype", CLIP_TYPES, ids=lambda d: np.dtype(d).name)
def test_clip_bit_exact_with_numpy(dtype):
    rng = np.random.default_rng(6)
    lo, hi = _clip_bounds(dtype)
    for shape in random_shapes(rng, include_large=dtype in (np.float32, np.uint8)):
        x = _values(rng, shape, dtype)
        _bit_exact("Clip", [x, lo, hi], np.clip(x, lo, hi))
    x = _values(rng, (1001,), dtype)
    _bit_exact("Clip", [unaligned(x), lo, hi], np.clip(x, lo, hi))
    # lo > hi: every element is hi, as the operator says and NumPy does
    _bit_exact("Clip", [x, hi, lo], np.clip(x, hi, lo))
    if np.dtype(dtype).kind not in "iu":
        x = special_values(dtype)
        _bit_exact("Clip", [x, lo, hi], np.clip(x, lo, hi))
        zeros = np.array([-0.0, 0.0, -0.0, 0.0], dtype)
        _bit_exact("Clip", [zeros, np.array(0.0, dtype), np.array(-0.0, dtype)],
                   np.clip(zeros, np.array(0.0, dtype), np.array(-0.0, dtype)))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
def test_clip_optional_bounds(dtype):
    rng = np.random.default_rng(7)
    x = _values(rng, (6, 7), dtype)
    lo, hi = _clip_bounds(dtype)
    check_node("Clip", [x, lo], oracle="builtin")
    check_node("Clip", [x], oracle="builtin")
    # max given, min left out (an empty input name)
    model = node_model("Clip", [x, lo, hi])
    model.graph.node[0].input[1] = ""
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    (y,) = sess.run(None, {"x0": x, "x2": hi})
    np.testing.assert_array_equal(y, np.minimum(x, hi))
    assert "onnx_light_cpu::Clip" in olc.used_kernel_names(sess)


@pytest.mark.parametrize("opset", [1, 6])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_clip_attribute_bounds_before_opset_11(opset, dtype):
    x = np.linspace(-4, 4, 33).astype(dtype)
    # The built-in has no Clip-1: NumPy is the oracle.
    check_node("Clip", [x], oracle=lambda a: [np.clip(a, -1.0, 2.5).astype(dtype)],
               opset=opset, min=-1.0, max=2.5)
    check_node("Clip", [x], oracle=lambda a: [np.minimum(a, dtype(0.5))], opset=opset, max=0.5)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_clip_nan_bound_makes_nan_as_numpy(dtype):
    x = np.linspace(-2, 2, 9).astype(dtype)
    for lo, hi in ((np.nan, 1.0), (-1.0, np.nan)):
        lo, hi = np.array(lo, dtype), np.array(hi, dtype)
        want = np.clip(x.astype(np.float32), lo.astype(np.float32), hi.astype(np.float32))
        assert np.isnan(want).all()
        _bit_exact("Clip", [x, lo, hi], np.clip(x, lo, hi))


def test_clip_bound_with_several_values_is_rejected():
    x = np.zeros(4, np.float32)
    model = node_model("Clip", [x, np.zeros(2, np.float32)])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    with pytest.raises(ValueError, match=r"Clip: input 1 \('x1'\) must hold one value"):
        sess.run(None, {"x0": x, "x1": np.zeros(2, np.float32)})


def test_clip_strided_and_read_only():
    base = np.linspace(-5, 5, 64, dtype=np.float32).reshape(8, 8)
    lo, hi = np.array(-1, np.float32), np.array(1, np.float32)
    check_node("Clip", [base[:, ::2], lo, hi], oracle="builtin")
    frozen = base.copy()
    frozen.flags.writeable = False
    check_node("Clip", [frozen, lo, hi], oracle="builtin")


# Gelu: the float64 definition, rounded.  Below zero ONNX Runtime and the
# built-in subtract nearly equal numbers in float32: their error there is
# absolute, below 1e-6 for |x| <= 12 (ours is relative: unary/olc_unary.h).
GELU_ATOL = 1e-6


def _gelu64(x, approximate):
    import math

    x = x.astype(np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return x * 0.5 * (1 + erf(x / math.sqrt(2)))


def _gelu_oracle(dtype, approximate):
    def oracle(x):
        with np.errstate(all="ignore"):
            return [_gelu64(x, approximate).astype(dtype)]
    return oracle


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_gelu_matches_float64(approximate, dtype):
    rng = np.random.default_rng(8)
    rtol = TOLERANCES[np.dtype(dtype)][0]
    atol = 1e-15 if dtype == np.float64 else GELU_ATOL
    oracle = _gelu_oracle(dtype, approximate)
    for shape in random_shapes(rng, include_large=dtype == np.float32):
        check_node("Gelu", [_random(rng, shape, dtype, "Gelu")], oracle=oracle, opset=20,
                   approximate=approximate, tolerance=(rtol, atol))
    for x in (special_values(dtype), unaligned(_random(rng, (1001,), dtype, "Gelu"))):
        check_node("Gelu", [x], oracle=oracle, opset=20, approximate=approximate,
                   tolerance=(rtol, atol))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_gelu_matches_builtin_and_onnxruntime(approximate, dtype):
    import onnxruntime as ort

    x = np.linspace(-12, 12, 4001).astype(dtype)
    rtol = TOLERANCES[np.dtype(dtype)][0]
    # The built-in computes float16 step by step in float16: 1 + erf(x) below
    # -2 cancels to a few float16 units, hence its absolute error.
    builtin_atol = 1e-3 if dtype == np.float16 else GELU_ATOL
    check_node("Gelu", [x], oracle="builtin", opset=20, approximate=approximate,
               tolerance=(rtol, builtin_atol))
    model = node_model("Gelu", [x], opset=20, approximate=approximate)
    model.ir_version = 10
    model.graph.output[0].type.tensor_type.elem_type = element_type(dtype)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    check_node("Gelu", [x], oracle=lambda a: session.run(None, {"x0": a}), opset=20,
               approximate=approximate, tolerance=(rtol, GELU_ATOL))


def test_gelu_levels_return_the_same_bits():
    x = np.concatenate([np.linspace(-12, 12, 20001), special_values(np.float32)]).astype(
        np.float32)
    for approximate in ("none", "tanh"):
        model = node_model("Gelu", [x], opset=20, approximate=approximate)
        results = []
        for level in available_simd_levels():
            with capped_simd_level(level):
                (y,), _, paths = run_ours(model, [x])
                results.append(y.tobytes())
                name = "gelu_tanh" if approximate == "tanh" else "gelu"
                assert paths == [f"{name}_float32_{code_level_name(level)}"]
        assert len(set(results)) == 1, approximate


def test_gelu_rejects_unknown_approximation():
    x = np.zeros(3, np.float32)
    sess = ReferenceEvaluator(node_model("Gelu", [x], opset=20, approximate="sigmoid"))
    olc.register_kernels_for_session(sess)
    with pytest.raises(ValueError, match="Gelu: attribute approximate must be one of none, tanh"):
        sess.run(None, {"x0": x})


# ---------------------------------------------------------------- activations
# Relu, LeakyRelu, HardSigmoid, HardSwish, Elu, Selu, Celu, Mish, Sign, Erf,
# Softplus, Softsign, ThresholdedRelu, Sqrt.


def _softplus64(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _hard_sigmoid64(x, alpha=0.2, beta=0.5):
    return np.maximum(0, np.minimum(1, alpha * x + beta))


def _erf64(x):
    from math import erf
    return np.vectorize(erf, otypes=[np.float64])(x) if x.size else x


# op -> (attributes, float64 formula of x and the float32-rounded attributes)
ACTIVATIONS = {
    "Relu": ({}, lambda x: np.maximum(x, 0)),
    "LeakyRelu": ({"alpha": 0.1}, lambda x: np.where(x > 0, x, x * np.float64(np.float32(0.1)))),
    "HardSigmoid": ({"alpha": 0.3, "beta": 0.4},
                    lambda x: _hard_sigmoid64(x, np.float64(np.float32(0.3)),
                                              np.float64(np.float32(0.4)))),
    "HardSwish": ({}, lambda x: x * _hard_sigmoid64(x, np.float64(np.float32(1 / 6)), 0.5)),
    "Elu": ({"alpha": 0.7},
            lambda x: np.where(x < 0, np.expm1(x) * np.float64(np.float32(0.7)), x)),
    "Selu": ({}, lambda x: np.where(x > 0, x, np.expm1(x) * 1.67326319217681884765625)
             * 1.05070102214813232421875),
    "Celu": ({"alpha": 1.5}, lambda x: np.maximum(0, x) + np.minimum(0, 1.5 * np.expm1(x / 1.5))),
    "Mish": ({}, lambda x: x * np.tanh(_softplus64(x))),
    "Sign": ({}, np.sign),
    "Erf": ({}, _erf64),
    "Softplus": ({}, _softplus64),
    "Softsign": ({}, lambda x: x / (1 + np.abs(x))),
    "ThresholdedRelu": ({"alpha": 0.5}, lambda x: np.where(x > 0.5, x, 0)),
    "Sqrt": ({}, np.sqrt),
}
# Exact in float32: one rounding per NumPy operation, ours in the same order.
EXACT = {"Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Sign", "Softsign", "ThresholdedRelu",
         "Sqrt"}
# Absolute tolerance of the transcendental ones (float32): Mish and Erf are
# within a few ulp of the float64 result; expm1 and log1p keep tiny values.
ACT_ATOL = 1e-7
ACT_OPSET = {"Celu": 12, "Mish": 18}


def _act_input(rng, shape, dtype, op):
    low, high = (0.0, 50.0) if op == "Sqrt" else (-12.0, 12.0)
    return rng.uniform(low, high, size=shape).astype(dtype)


def _act_oracle(op, dtype):
    def oracle(x):
        with np.errstate(all="ignore"):
            return [np.asarray(ACTIVATIONS[op][1](x.astype(np.float64))).astype(dtype)]
    return oracle


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_activation_matches_float64(op, dtype):
    """Every shape (empty, odd, off the vector width, large, unaligned) and
    the special values, against the float64 formula rounded once."""
    rng = np.random.default_rng(10)
    attrs = ACTIVATIONS[op][0]
    rtol, atol = TOLERANCES[np.dtype(dtype)]
    tolerance = (rtol, max(atol, ACT_ATOL if dtype == np.float32 else atol))
    if np.dtype(dtype) in (np.dtype(np.float16), np.dtype(bfloat16)):
        tolerance = (rtol, 1e-3 if dtype == np.float16 else 1e-2)
    for shape in random_shapes(rng, include_large=dtype == np.float32):
        check_node(op, [_act_input(rng, shape, dtype, op)], oracle=_act_oracle(op, dtype),
                   tolerance=tolerance, **attrs)
    for x in (special_values(dtype), unaligned(_act_input(rng, (1001,), dtype, op))):
        check_node(op, [x], oracle=_act_oracle(op, dtype), tolerance=tolerance, **attrs)


@pytest.mark.parametrize("op", sorted(EXACT))
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_exact_activations_bit_exact_with_builtin(op, dtype):
    rng = np.random.default_rng(11)
    x = np.concatenate([_act_input(rng, (2001,), dtype, op),
                        special_values(dtype)]).astype(dtype)
    x = x[x != 0] if op == "Relu" else x  # the built-in's Relu(-0) is +0, ours -0 (as ORT's)
    model = node_model(op, [x], **ACTIVATIONS[op][0])
    with np.errstate(all="ignore"):
        (want,) = run_builtin(model, [x])
    _bit_exact(op, [x], want, **ACTIVATIONS[op][0])


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_activation_matches_builtin(op, dtype):
    rng = np.random.default_rng(12)
    high = 80.0
    x = (rng.uniform(0, high, (7, 101)) if op == "Sqrt"
         else rng.uniform(-high, high, (7, 101))).astype(dtype)
    x[0, :40] = np.linspace(-3, 3, 40) if op != "Sqrt" else np.linspace(0, 3, 40)
    # the built-in rounds float16 after each step (alpha x, + beta, ...)
    tolerance = (2e-3, 2e-3) if dtype == np.float16 else (2e-6, ACT_ATOL)
    with np.errstate(all="ignore"):
        check_node(op, [x], oracle="builtin", tolerance=tolerance,
                   opset=ACT_OPSET.get(op), **ACTIVATIONS[op][0])


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activation_matches_onnxruntime(op):
    import onnxruntime as ort

    x = np.concatenate([np.linspace(-20, 20, 4001), special_values(np.float32)]).astype(
        np.float32)
    if op == "Sqrt":
        x = np.abs(x)
    if op == "Softsign":  # inf / inf: NaN in the built-in and ours, +-1 in ORT
        x = x[np.isfinite(x)]
    attrs = ACTIVATIONS[op][0]
    model = node_model(op, [x], **attrs)
    model.ir_version = 10
    model.graph.output[0].type.tensor_type.elem_type = element_type(np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    # ORT's Elu, Selu and Celu compute exp(x) - 1: absolute error near 0
    atol = 1e-6 if op in ("Elu", "Selu", "Celu") else ACT_ATOL
    tolerance = (2e-6, atol) if op not in EXACT else (1.2e-7, 0.0)
    check_node(op, [x], oracle=lambda a: session.run(None, {"x0": a}), tolerance=tolerance,
               **attrs)


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_activation_levels_return_the_same_bits(op, dtype):
    x = np.concatenate([np.linspace(-30, 30, 20001), special_values(np.float32),
                        np.geomspace(1e-30, 1e3, 999), -np.geomspace(1e-30, 1e3, 999)]
                       ).astype(dtype)
    model = node_model(op, [x], **ACTIVATIONS[op][0])
    results = []
    for level in available_simd_levels():
        with capped_simd_level(level):
            (y,), _, paths = run_ours(model, [x])
            assert paths == [f"{op.lower()}_{np.dtype(dtype).name}_{code_level_name(level)}"]
            results.append(y)
    for y in results[1:]:
        assert y.tobytes() == results[0].tobytes(), f"{op} {np.dtype(dtype).name}"


@pytest.mark.parametrize("dtype", SIGNED_INTS, ids=lambda d: np.dtype(d).name)
def test_relu_integers(dtype):
    rng = np.random.default_rng(13)
    for shape in random_shapes(rng, include_large=dtype == np.int8):
        check_node("Relu", [_values(rng, shape, dtype)], oracle="builtin")


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_sign_integers(dtype):
    rng = np.random.default_rng(14)
    for shape in random_shapes(rng, include_large=dtype == np.int8):
        check_node("Sign", [_values(rng, shape, dtype)], oracle="builtin")


@pytest.mark.parametrize("op, opset", [("Relu", 6), ("Relu", 13), ("LeakyRelu", 6),
                                       ("HardSigmoid", 6), ("Elu", 6), ("Selu", 6),
                                       ("HardSwish", 14), ("Mish", 18), ("Sign", 9),
                                       ("Erf", 9), ("Sqrt", 6), ("ThresholdedRelu", 10),
                                       ("Softplus", 1), ("Softsign", 1)])
def test_activation_old_opsets(op, opset):
    x = np.linspace(-5, 5, 101).astype(np.float32)
    x = np.abs(x) if op == "Sqrt" else x
    check_node(op, [x], oracle=_act_oracle(op, np.float32), opset=opset,
               tolerance=(2e-6, ACT_ATOL), **ACTIVATIONS[op][0])


def test_activation_default_attributes():
    x = np.linspace(-5, 5, 101).astype(np.float32)
    f = np.float64
    check_node("LeakyRelu", [x], oracle=lambda a: [np.where(a > 0, a, a * np.float32(0.01))])
    check_node("HardSigmoid", [x], oracle=lambda a: [np.maximum(0, np.minimum(
        1, a * np.float32(0.2) + np.float32(0.5)))])
    check_node("Elu", [x], oracle=lambda a: [np.where(a < 0, np.expm1(a.astype(f)), a)
                                              .astype(np.float32)], tolerance=(2e-6, ACT_ATOL))
    check_node("ThresholdedRelu", [x], oracle=lambda a: [np.where(a > 1, a, 0).astype(a.dtype)])
    check_node("Celu", [x], opset=12, oracle=lambda a: [(np.maximum(0, a.astype(f)) + np.minimum(
        0, np.expm1(a.astype(f)))).astype(np.float32)], tolerance=(2e-6, ACT_ATOL))


def test_activations_strided_read_only_and_not_aliased():
    base = np.linspace(-4, 4, 400).astype(np.float32).reshape(20, 20)
    strided = base[:, ::3]
    check_node("Relu", [strided], oracle="builtin")
    frozen = base.copy()
    frozen.flags.writeable = False
    check_node("HardSwish", [frozen], oracle="builtin")
    model = node_model("Relu", [base])
    (y,), _, _ = run_ours(model, [base])
    assert not np.shares_memory(y, base)


@pytest.mark.parametrize("op, x", [("Relu", np.array([1], dtype=np.uint8)),
                                   ("Erf", np.array([1], dtype=np.int32)),
                                   ("Sqrt", np.array([True]))])
def test_activation_wrong_element_type(op, x):
    model = node_model(op, [np.zeros(1, np.float32)])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    with pytest.raises(TypeError, match=f"{op}: input 0"):
        sess.run(None, {"x0": x})


@pytest.mark.parametrize("threads", [1, 2])
def test_outputs_at_every_offset_in_a_cache_line(threads):
    """The core runs the elements before the output's first cache line
    boundary alone, then the rest (unary.pyx ``_head``): an output at each
    float32 offset within a line, and lengths shorter than the head, around
    a chunk and over several chunks, give the values of one aligned run.
    Abs (a bit loop), Exp (``apply``), Relu (``activate``) and Clip."""
    from onnx_light_cpu import simd
    from onnx_light_cpu._kernels import unary as core
    from onnx_light_cpu.ops._base import ELEMENT_TYPES

    level, f32 = simd.state.level, ELEMENT_TYPES[np.dtype(np.float32)]
    lo, hi = np.array(-0.5, np.float32), np.array(0.75, np.float32)
    calls = {
        "abs": lambda x, y: core.apply(x, y, core.ABS, f32, level, threads),
        "exp": lambda x, y: core.apply(x, y, core.EXP, f32, level, threads),
        "relu": lambda x, y: core.activate(x, y, core.RELU, f32, level, threads, 0, 0, 0),
        "clip": lambda x, y: core.clip(x, y, lo, hi, f32, level, threads),
    }
    rng = np.random.default_rng(0)
    for n in (0, 3, 15, 16_400, 70_001):
        x = rng.standard_normal(n).astype(np.float32)
        for name, call in calls.items():
            raw = np.empty(n + 16 + 64, np.float32)
            base = (-raw.ctypes.data % 64) // 4  # raw[base] starts a line
            want = raw[base:base + n]  # no head: one aligned run
            call(x, want)
            want = want.copy()
            for offset in range(1, 16):
                y = raw[base + offset:base + offset + n]
                call(x, y)
                assert y.tobytes() == want.tobytes(), (name, n, offset)
            if name == "relu":
                assert want.tobytes() == np.maximum(x, 0).tobytes()
            elif name == "abs":
                assert want.tobytes() == np.abs(x).tobytes()
