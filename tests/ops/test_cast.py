"""Cast against the onnx.reference conversion, bit for bit.

Every conversion is exact (one correctly defined result per input), so the
outputs are compared with zero tolerance, NaN positions included; float 8
results are also compared as bytes (NaN encodings included).
"""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto as T
from onnx import numpy_helper
from onnx.helper import tensor_dtype_to_np_dtype
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops.op_cast import cast_to

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level, code_level_name

from differential import THREAD_COUNTS, check_node, node_model, random_shapes, run_ours, unaligned

EXACT = (0.0, 0.0)
NATIVE = [T.BOOL, T.UINT8, T.INT8, T.UINT16, T.INT16, T.UINT32, T.INT32, T.UINT64, T.INT64,
          T.FLOAT16, T.BFLOAT16, T.FLOAT, T.DOUBLE]
FLOAT8 = [T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ, T.FLOAT8E8M0]
# 1-byte types NumPy holds through ml_dtypes.
SMALL = FLOAT8 + [T.INT4, T.UINT4, T.INT2, T.UINT2, T.FLOAT4E2M1, T.FLOAT6E2M3, T.FLOAT6E3M2]
FLOATS = {T.FLOAT16, T.BFLOAT16, T.FLOAT, T.DOUBLE}


def _name(t: int) -> str:
    return T.DataType.Name(t)


def _dtype(t: int) -> np.dtype:
    return np.dtype(tensor_dtype_to_np_dtype(t))


def _values(rng, t: int, shape, dst: int | None = None) -> np.ndarray:
    """Random values of type ``t``; floats stay inside ``dst``'s range when
    it is an integer type (out of range is undefined there)."""
    dtype = _dtype(t)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dtype)
    if dst is not None and dst not in FLOATS and _dtype(dst).kind in "iub":
        info = np.iinfo(_dtype(dst)) if dst != T.BOOL else np.iinfo(np.uint8)
        low, high = max(float(info.min), -100.0), min(float(info.max), 100.0)
        if dst == T.BOOL:
            low = -100.0  # any non-zero value is True
        return rng.uniform(low, high, size=shape).astype(dtype)
    return (rng.standard_normal(size=shape) * 1000).astype(dtype)


def _specials(t: int) -> np.ndarray:
    v = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 65504.0, 65520.0,
         3.0e38, -3.0e38, 1e-5, 6e-8, 3e-8, 1e-40, 1e-45, 1e300, 1e-300, 448.0, 464.0, 57344.0]
    with np.errstate(all="ignore"):
        return np.array(v, dtype=np.float64).astype(_dtype(t))


def _check(x: np.ndarray, to: int, **kwargs) -> None:
    check_node("Cast", [x], oracle="builtin", tolerance=EXACT, to=to, **kwargs)


def _oracle(to: int, saturate: bool = True, round_mode: str = "up"):
    def oracle(x):
        with np.errstate(all="ignore"):
            return [cast_to(x, to, saturate, round_mode)]
    return oracle


# ------------------------------------------------------------ native pairs

@pytest.mark.parametrize("src", NATIVE, ids=_name)
def test_native_pairs(src):
    rng = np.random.default_rng(src)
    for dst in NATIVE:
        for shape in [(), (0,), (17,), (3, 5, 7)]:
            _check(_values(rng, src, shape, dst), dst)
        if src in FLOATS and dst in FLOATS:
            _check(_specials(src), dst)


@pytest.mark.parametrize("src, dst", [(T.FLOAT, T.FLOAT16), (T.FLOAT16, T.FLOAT),
                                      (T.FLOAT, T.BFLOAT16), (T.BFLOAT16, T.FLOAT),
                                      (T.INT64, T.FLOAT), (T.INT32, T.FLOAT),
                                      (T.FLOAT, T.INT64), (T.DOUBLE, T.FLOAT16)],
                         ids=lambda t: _name(t))
def test_hot_pairs_every_shape(src, dst):
    rng = np.random.default_rng(7)
    for shape in random_shapes(rng):
        _check(_values(rng, src, shape, dst), dst)
    _check(unaligned(_values(rng, src, (1001,), dst)), dst)


@pytest.mark.parametrize("dst", [T.FLOAT, T.DOUBLE], ids=_name)
def test_int64_to_float_small_and_large_magnitudes(dst):
    """The AVX2 loop converts groups within +-2^51 through double and the
    others one by one: both must give the single rounding of (float)x."""
    rng = np.random.default_rng(5)
    small = rng.integers(-(1 << 51), 1 << 51, size=4000)
    large = rng.integers(-(1 << 63), (1 << 63) - 1, size=4000, dtype=np.int64)
    edges = np.array([(1 << 51) - 1, 1 << 51, -(1 << 51), -(1 << 51) - 1, (1 << 24) + 1,
                      (1 << 53) + 1, -(1 << 63), (1 << 63) - 1, 0, -1], dtype=np.int64)
    x = np.concatenate([small, large, small[:7], edges, rng.permutation(np.r_[small, large])])
    _check(x, dst)


@pytest.mark.parametrize("src", [T.FLOAT16, T.BFLOAT16], ids=_name)
@pytest.mark.parametrize("dst", [T.FLOAT, T.DOUBLE, T.FLOAT16, T.BFLOAT16], ids=_name)
def test_every_half_code(src, dst):
    x = np.arange(1 << 16, dtype=np.uint16).view(_dtype(src))
    with np.errstate(invalid="ignore"):  # bfloat16 NaN to float64 in the comparison
        _check(x, dst)


def test_float32_to_half_types_on_bit_patterns():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 1 << 32, size=1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for dst in (T.FLOAT16, T.BFLOAT16):
        _check(x, dst)


def test_double_to_float16_rounds_once():
    # Just above a tie of float16 but a tie once rounded to float: going
    # through float would round down.
    x = np.array([1.0 + 2.0**-11 + 2.0**-40, -(1.0 + 2.0**-11 + 2.0**-40), 65519.99, 65520.0,
                  2.0**-25, 2.0**-25 * 1.0000001, 2.0**-24 * 1.5], dtype=np.float64)
    (y,), _, _ = run_ours(node_model("Cast", [x], to=T.FLOAT16), [x])
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    np.testing.assert_array_equal(y.view(np.uint16), want.view(np.uint16))


def test_integers_wrap_and_bool_is_nonzero():
    x = np.array([200, -56, 0, 1, 2**40 + 3, -(2**40)], dtype=np.int64)
    for dst in (T.INT8, T.UINT8, T.INT16, T.UINT32, T.BOOL, T.FLOAT16, T.BFLOAT16):
        _check(x, dst)
    _check(np.array([0.0, -0.0, np.nan, 0.1, -np.inf], dtype=np.float32), T.BOOL)


def test_float_to_integer_out_of_range_does_not_crash():
    """Undefined in ONNX: only the dtype, shape and the in-range values count."""
    x = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.7, -3.7], dtype=np.float32)
    for dst in (T.INT8, T.UINT8, T.INT16, T.UINT16, T.INT32, T.UINT32, T.INT64, T.UINT64):
        for level in available_simd_levels():
            with capped_simd_level(level):
                (y,), names, _ = run_ours(node_model("Cast", [x], to=dst), [x])
            assert y.dtype == _dtype(dst) and y.shape == x.shape
            want = x[5:].astype(_dtype(dst))
            np.testing.assert_array_equal(y[5:], want)


# ---------------------------------------------------------------- float 8

def _check_bytes(x, to, opset=None, **attrs):
    """Our result equals the built-in conversion byte for byte at every level."""
    saturate = bool(attrs.get("saturate", 1))
    round_mode = attrs.get("round_mode", "up")
    want = _oracle(to, saturate, round_mode)(x)[0]
    model = node_model("Cast", [x], opset=opset, to=to, **attrs)
    for level in available_simd_levels():
        with capped_simd_level(level):
            for threads in THREAD_COUNTS:
                (y,), names, _ = run_ours(model, [x], threads)
                assert "onnx_light_cpu::Cast" in names
                assert y.dtype == want.dtype, (y.dtype, want.dtype)
                np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8),
                                              err_msg=f"{_name(to)} at {level}")


@pytest.mark.parametrize("dst", FLOAT8[:4], ids=_name)
@pytest.mark.parametrize("saturate", [1, 0])
def test_float8_from_every_half_code(dst, saturate):
    for src in (T.FLOAT16, T.BFLOAT16):
        x = np.arange(1 << 16, dtype=np.uint16).view(_dtype(src))
        _check_bytes(x, dst, saturate=saturate)


@pytest.mark.parametrize("dst", FLOAT8[:4], ids=_name)
@pytest.mark.parametrize("saturate", [1, 0])
def test_float8_from_float_and_double(dst, saturate):
    rng = np.random.default_rng(dst)
    bits = rng.integers(0, 1 << 32, size=1 << 15, dtype=np.uint64).astype(np.uint32)
    # Dense around the float 8 range and its subnormals.
    near = rng.integers(0x3A000000, 0x48000000, size=1 << 15, dtype=np.uint32)
    x = np.concatenate([bits, near, near | np.uint32(1 << 31)]).view(np.float32)
    x = np.concatenate([x, _specials(T.FLOAT)])
    _check_bytes(x, dst, saturate=saturate)
    with np.errstate(invalid="ignore"):
        _check_bytes(x.astype(np.float64) * (1 + 2.0**-35), dst, saturate=saturate)


def test_double_to_float8_rounds_once():
    """Regression: through float, 464 * (1 + 2^-35) first rounds to the tie
    464, which then rounds to even (448, 0x7e); rounded once it lies above
    the tie and overflows (0x7f, NaN, without saturation)."""
    x = np.array([464 * (1 + 2.0**-35), -464 * (1 + 2.0**-35), 464.0], dtype=np.float64)
    for saturate, want in [(0, [0x7F, 0xFF, 0x7E]), (1, [0x7E, 0xFE, 0x7E])]:
        model = node_model("Cast", [x], to=T.FLOAT8E4M3FN, saturate=saturate)
        for level in available_simd_levels():
            with capped_simd_level(level):
                (y,), names, _ = run_ours(model, [x])
            assert "onnx_light_cpu::Cast" in names
            np.testing.assert_array_equal(y.view(np.uint8), np.array(want, dtype=np.uint8))


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_float8e8m0_round_modes(round_mode, saturate):
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 1 << 32, size=1 << 15, dtype=np.uint64).astype(np.uint32)
    ties = np.array([0x3FC00000, 0x3FC00001, 0x3FBFFFFF, 0x7F7FFFFF, 0x7F000000, 0x7F400000,
                     0x00400000, 0x00600000, 0x00200000, 0, 0x80000000, 0x7F800000, 0x7FC00000],
                    dtype=np.uint32)
    x = np.concatenate([bits, ties]).view(np.float32)
    _check_bytes(x, T.FLOAT8E8M0, saturate=saturate, round_mode=round_mode)
    for src in (T.FLOAT16, T.BFLOAT16):
        codes = np.arange(1 << 16, dtype=np.uint16).view(_dtype(src))
        _check_bytes(codes, T.FLOAT8E8M0, saturate=saturate, round_mode=round_mode)
    with np.errstate(invalid="ignore"):
        _check_bytes(x.astype(np.float64), T.FLOAT8E8M0, saturate=saturate, round_mode=round_mode)


def test_saturate_before_opset_24_and_default_at_19():
    x = np.array([1e6, -1e6, np.inf, np.nan, 3.3], dtype=np.float32)
    _check_bytes(x, T.FLOAT8E4M3FN, opset=19)
    _check_bytes(x, T.FLOAT8E5M2, opset=21, saturate=0)
    _check_bytes(x, T.FLOAT8E8M0, opset=24)


# -------------------------------------------- tables and delegated pairs

@pytest.mark.parametrize("src", SMALL, ids=_name)
def test_every_code_of_small_types(src):
    x = np.arange(256, dtype=np.uint8).view(_dtype(src))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dst in NATIVE + SMALL:
            try:
                _oracle(dst)(x)
            except TypeError:  # ml_dtypes has no such cast: neither have we
                with pytest.raises(TypeError, match=r"Cast: input 0 \('x0'\) cannot be cast"):
                    run_ours(node_model("Cast", [x], to=dst), [x])
                continue
            # The table holds the reference's own results, NaN to integer
            # included: every code must match.
            if dst in SMALL:
                _check_bytes(x, dst)
            else:
                _check(x, dst)


@pytest.mark.parametrize("dst", [T.INT4, T.UINT4, T.INT2, T.UINT2, T.FLOAT4E2M1, T.FLOAT6E2M3],
                         ids=_name)
def test_to_narrow_types(dst):
    rng = np.random.default_rng(dst)
    for src in NATIVE:
        x = _values(rng, src, (57,), T.INT8) if src not in FLOATS else (
            rng.uniform(-20, 20, 57).astype(_dtype(src)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _oracle(dst)(x)[0]
            (y,), names, paths = run_ours(node_model("Cast", [x], to=dst), [x])
        assert "onnx_light_cpu::Cast" in names
        np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))
        expected_kind = "lut" if _dtype(src).itemsize <= 2 else "builtin"
        assert paths[0].endswith(expected_kind), paths


def test_strings_both_ways():
    x = np.array(["1.5", "-2", "INF", "-inf", "NaN", "1e-5", "1E8"])
    for dst in (T.FLOAT, T.DOUBLE, T.FLOAT16):
        (y,), names, paths = run_ours(node_model("Cast", [np.zeros(1, np.float32)], to=dst), [x])
        want = ReferenceEvaluator(node_model("Cast", [np.zeros(1, np.float32)], to=dst)).run(
            None, {"x0": x})[0]
        np.testing.assert_array_equal(y, want)
        assert paths == ["cast_string_builtin"]
    x = np.array([1.5, -2.0, 0.25], dtype=np.float32)
    model = node_model("Cast", [x], to=T.STRING)
    (y,), _, paths = run_ours(model, [x])
    np.testing.assert_array_equal(y, ReferenceEvaluator(model).run(None, {"x0": x})[0])
    assert paths == ["cast_string_builtin"]


# --------------------------------------------------------------- the rest

def test_paths_name_the_conversion():
    x = np.ones(10, np.float32)
    for level in available_simd_levels():
        with capped_simd_level(level):
            _, _, paths = run_ours(node_model("Cast", [x], to=T.FLOAT16), [x])
            assert paths == [f"cast_float32_float16_{code_level_name(level)}"]
    cases = {T.FLOAT: "cast_copy", T.FLOAT8E4M3FN: "cast_float32_float8_e4m3fn_scalar",
             T.INT4: "cast_float32_int4_builtin"}
    for to, label in cases.items():
        assert run_ours(node_model("Cast", [x], to=to), [x])[2] == [label]
    y = x.astype(ml_dtypes.float8_e5m2)
    assert run_ours(node_model("Cast", [y], to=T.FLOAT), [y])[2] == [
        "cast_float8_e5m2_float32_lut"]


def test_output_never_aliases_input():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for to in (T.FLOAT, T.FLOAT16, T.INT4, T.STRING):
        (y,), _, _ = run_ours(node_model("Cast", [x], to=to), [x])
        assert not np.shares_memory(x, y)


def test_non_contiguous_and_numpy_scalars():
    base = np.linspace(-5, 5, 64, dtype=np.float32).reshape(8, 8)
    _check(base[:, ::2], T.FLOAT16)
    _check(base[::3, 1::2], T.FLOAT8E4M3FN)
    model = node_model("Cast", [np.zeros((), np.float32)], to=T.INT64)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    (y,) = sess.run(None, {"x0": np.float32(3.7)})
    assert y.dtype == np.int64 and int(y) == 3


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21, 23, 24, 25])
def test_older_opsets(opset):
    x = np.array([1.5, -2.5, 300.0], dtype=np.float32)
    for to in (T.INT32, T.FLOAT16, T.DOUBLE, T.UINT8):
        _check(x, to, opset=opset)
    if opset >= 13:
        _check(x, T.BFLOAT16, opset=opset)


def test_opset_1_names_the_type():
    x = np.array([1.5, -2.5], dtype=np.float32)
    model = node_model("Cast", [x], opset=1, to="FLOAT16")
    (y,), names, _ = run_ours(model, [x])
    assert y.dtype == np.float16 and names == ["onnx_light_cpu::Cast"]
    np.testing.assert_array_equal(y, x.astype(np.float16))


def _session(x, opset=None, **attrs):
    sess = ReferenceEvaluator(node_model("Cast", [x], opset=opset, **attrs))
    olc.register_kernels_for_session(sess)
    return sess


def test_bad_input_and_attributes():
    x = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match=r"Cast: input 0 \('x0'\) has element type complex64"):
        _session(x, to=T.FLOAT).run(None, {"x0": np.zeros(3, np.complex64)})
    with pytest.raises(TypeError, match=r"Cast: input 0 \('x0'\) has element type bfloat16, "
                                         r"Cast-9 accepts"):
        _session(x, opset=9, to=T.FLOAT).run(None, {"x0": np.zeros(3, bfloat16)})
    with pytest.raises(TypeError, match="must be a tensor"):
        _session(x, to=T.FLOAT).run(None, {"x0": [1.0, 2.0]})
    # attribute errors are kept and raised by every run
    for attrs, message in [
            ({"opset": 13, "to": T.FLOAT8E4M3FNUZ},
             r"Cast: attribute to must be an element type Cast-13 accepts \(.*\), got 18"),
            ({"to": T.FLOAT8E8M0, "round_mode": "sideways"},
             "Cast: attribute round_mode must be one of up, down, nearest, got 'sideways'"),
            ({"opset": 1, "to": "FLOT"}, "Cast: attribute to must be an element type, got 'FLOT'")]:
        sess = _session(x, **attrs)
        for _ in range(2):
            with pytest.raises(ValueError, match=message):
                sess.run(None, {"x0": x})


# ------------------------------------------------------- backend cases

def _cast_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    for case in cases:
        nodes = list(case.model.graph.node) + [n for f in case.model.functions for n in f.node]
        if case.name.startswith(("test_cast_", "test_castlike_")) and any(
                n.op_type == "Cast" for n in nodes):
            yield pytest.param(case, id=case.name)


def _array(t):
    return numpy_helper.to_array(t) if isinstance(t, onnx.TensorProto) else t


@pytest.mark.parametrize("case", list(_cast_cases()))
def test_backend_case_with_tensors_converted(case):
    """The Cast backend cases store TensorProto; converted, ours matches
    every one (tests/conformance feeds them as they are)."""
    sess = ReferenceEvaluator(case.model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    for inputs, outputs in case.data_sets:
        with np.errstate(all="ignore"):
            got = sess.run(None, dict(zip(sess.input_names, map(_array, inputs))))
        for g, w in zip(got, map(_array, outputs)):
            assert g.dtype == w.dtype and g.shape == w.shape
            if w.dtype.kind in "OUS":
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                           rtol=case.rtol, atol=case.atol, err_msg=case.name)
    assert "onnx_light_cpu::Cast" in olc.used_kernel_names(sess)


def test_attributes_linked_to_a_function():
    from onnx import helper as oh

    body = oh.make_node("Cast", ["a"], ["b"])
    for name, ref in (("to", "t"), ("saturate", "sat")):
        body.attribute.add(name=name, ref_attr_name=ref, type=onnx.AttributeProto.INT)
    opset = oh.make_opsetid("", onnx.defs.onnx_opset_version())
    fn = oh.make_function("custom", "MyCast", ["a"], ["b"], [body], [opset],
                          attributes=["t", "sat"])
    calls = [oh.make_node("MyCast", ["x"], ["y"], domain="custom", t=T.FLOAT8E5M2, sat=0),
             oh.make_node("MyCast", ["x"], ["z"], domain="custom", t=T.FLOAT8E5M2, sat=1)]
    graph = oh.make_graph(calls, "g", [oh.make_tensor_value_info("x", T.FLOAT, [None])],
                          [oh.make_tensor_value_info("y", T.FLOAT8E5M2, [None]),
                           oh.make_tensor_value_info("z", T.FLOAT8E5M2, [None])])
    model = oh.make_model(graph, functions=[fn],
                          opset_imports=[opset, oh.make_opsetid("custom", 1)])
    x = np.array([1e6, -1e6, np.inf, 3.3], dtype=np.float32)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    y, z = sess.run(None, {"x": x})
    assert "onnx_light_cpu::Cast" in olc.used_kernel_names(sess)
    np.testing.assert_array_equal(y.view(np.uint8), cast_to(x, T.FLOAT8E5M2, False).view(np.uint8))
    np.testing.assert_array_equal(z.view(np.uint8), cast_to(x, T.FLOAT8E5M2, True).view(np.uint8))


def test_empty_tensors_on_every_path():
    x = np.zeros((2, 0, 3), np.float32)
    for to in (T.FLOAT, T.FLOAT16, T.FLOAT8E4M3FN, T.FLOAT8E8M0, T.INT4, T.STRING):
        (y,), names, _ = run_ours(node_model("Cast", [x], to=to), [x])
        assert y.shape == (2, 0, 3) and names == ["onnx_light_cpu::Cast"]
    e = np.zeros((0, 4), ml_dtypes.float8_e5m2)
    (y,), _, paths = run_ours(node_model("Cast", [e], to=T.FLOAT16), [e])
    assert y.shape == (0, 4) and y.dtype == np.float16 and paths[0].endswith("_lut")
