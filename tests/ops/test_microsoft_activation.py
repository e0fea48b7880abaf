"""com.microsoft Gelu, FastGelu and QuickGelu: differential tests against
ONNX Runtime 1.32 (float32, float16, and double where it has it), bfloat16
against ONNX Runtime's float32 on the rounded inputs, double Gelu against
math.erf; at every SIMD level and 1/2 threads (our kernel must run), empty,
strided, read-only and unaligned inputs, special values; bad input, one test
per rejection, with the message."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ml_dtypes import bfloat16

from differential import check_node, layouts, node_model, ort_microsoft_node, run_ours

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
KERNELS = {"Gelu": "onnx_light_cpu::MicrosoftGelu", "FastGelu": "onnx_light_cpu::FastGelu",
           "QuickGelu": "onnx_light_cpu::QuickGelu"}
# Below zero ONNX Runtime subtracts nearly equal numbers (x/2 + x/2 tanh,
# 1 + erf): its error is absolute, about |x| ulp(1).  Ours is relative there
# (x / (1 + e^z), erfc; test_relative_error_below_zero).
TOL = {
    np.dtype(np.float32): (1e-5, 2e-6),
    np.dtype(np.float16): (2e-3, 2e-4),
    np.dtype(bfloat16): (1.6e-2, 2e-3),
    np.dtype(np.float64): (1e-12, 1e-14),
}
SHAPES = [(0,), (2, 0, 5), (1,), (7,), (3, 15), (2, 16), (5, 17), (3, 33), (2, 3, 64),
          (4, 1000), (3, 70001)]
_ERF = np.vectorize(math.erf, otypes=[np.float64])


def erf_gelu(x):
    """float64 Gelu on math.erf (ONNX Runtime has no double Gelu)."""
    v = x.astype(np.float64)
    return [(v * 0.5 * (1.0 + _ERF(v / math.sqrt(2.0))) if v.size else v).astype(x.dtype)]


def tanh_gelu(x, bias=None):
    """float64 FastGelu on libm's tanh.  ONNX Runtime's double FastGelu is
    within about 2e-7 of it (relative, as if part of it ran in float32);
    ours follows the formula (test_fast_gelu_double_near_ort)."""
    v = x.astype(np.float64) + (0.0 if bias is None else bias.astype(np.float64))
    c = math.sqrt(2.0 / math.pi)
    return [(0.5 * v * (1.0 + np.tanh(c * (v + 0.044715 * v ** 3)))).astype(x.dtype)]


def check(op, inputs, oracle=None, **attrs):
    want = (oracle or (lambda *a: ort_microsoft_node(op, list(a), **attrs)))(*inputs)
    check_node(op, inputs, oracle=lambda *_: want, domain=MS, kernel=KERNELS[op],
               tolerance=TOL[inputs[0].dtype], **attrs)


def ours(op, inputs, **attrs):
    outputs, names, _ = run_ours(node_model(op, inputs, domain=MS, **attrs), inputs)
    assert names == [KERNELS[op]], names
    return outputs


def values(rng, shape, dtype, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


# ------------------------------------------------------------------ vs ONNX Runtime

@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_gelu(dtype, shape):
    check("Gelu", [values(np.random.default_rng(sum(shape) + 1), shape, dtype)])


@pytest.mark.parametrize("shape", [(0,), (), (7,), (3, 33), (2, 3, 64)], ids=str)
def test_gelu_double_vs_erf(shape):
    x = values(np.random.default_rng(3), shape, np.float64)
    check("Gelu", [x], oracle=erf_gelu)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("with_bias", [False, True], ids=["x", "x+bias"])
def test_fast_gelu(dtype, shape, with_bias):
    rng = np.random.default_rng(sum(shape) + 2)
    inputs = [values(rng, shape, dtype)]
    if with_bias:
        inputs.append(values(rng, shape[-1:], dtype, 0.5))
    check("FastGelu", inputs, oracle=tanh_gelu if dtype == np.float64 else None)


def test_fast_gelu_double_near_ort():
    rng = np.random.default_rng(8)
    x, bias = values(rng, (5, 33), np.float64), values(rng, (33,), np.float64, 0.5)
    want = ort_microsoft_node("FastGelu", [x, bias])
    check_node("FastGelu", [x, bias], oracle=lambda *_: want, domain=MS,
               kernel=KERNELS["FastGelu"], tolerance=(1e-6, 5e-7))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_quick_gelu(dtype, shape):
    check("QuickGelu", [values(np.random.default_rng(sum(shape) + 3), shape, dtype)])


@pytest.mark.parametrize("alpha", [1.0, -1.0, 0.0, 2.5, 1e-3], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_quick_gelu_alpha(alpha, dtype):
    check("QuickGelu", [values(np.random.default_rng(4), (3, 77), dtype)], alpha=alpha)


# Below zero: the float64 formulas without cancellation, and the largest
# relative error allowed down to the lower end (the kernels' headers give
# the exhaustive figures: 62, 55 and 69 ulp there).
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])
BELOW_ZERO = {
    "Gelu": (-5.5, 8e-6, lambda v: v * 0.5 * _ERFC(-v / math.sqrt(2.0))),
    "FastGelu": (-6.0, 8e-6, lambda v: v / (1.0 + np.exp(
        -2.0 * math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))),
    "QuickGelu": (-50.0, 8e-6, lambda v: v / (1.0 + np.exp(-float(np.float32(1.702)) * v))),
}


@pytest.mark.parametrize("op", sorted(BELOW_ZERO))
def test_relative_error_below_zero(op):
    """Ours keeps a relative error below zero, where
    ONNX Runtime's (and the former forms') error is absolute."""
    lo, rtol, formula = BELOW_ZERO[op]
    x = np.linspace(lo, 0.0, 20001, dtype=np.float32)[:-1]
    want = formula(x.astype(np.float64))
    got = ours(op, [x])[0].astype(np.float64)
    assert np.all(np.abs(got - want) <= rtol * np.abs(want)), op


def test_quick_gelu_scalar():
    check("QuickGelu", [np.array(1.5, np.float32)])
    check("Gelu", [np.array(-0.5, np.float32)])


@pytest.mark.parametrize("op", ["Gelu", "FastGelu", "QuickGelu"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_special_values(op, dtype):
    """NaN, +-inf (-inf gives NaN: -inf * 0), +-0, large and tiny values,
    bit patterns as ONNX Runtime's where it is exact."""
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 30.0, -30.0, 1e-30, -1e-30, 1e4, -1e4,
                  6.0, -6.0], np.float32).astype(dtype)
    check(op, [x])


@pytest.mark.parametrize("name", ["fortran", "strided", "read-only", "byte offset 1",
                                  "odd byte strides", "stride 0"])
@pytest.mark.parametrize("op", ["Gelu", "FastGelu", "QuickGelu"])
def test_layouts(op, name):
    rng = np.random.default_rng(5)
    x = values(rng, (6, 37), np.float32)
    if name == "stride 0":
        x[:] = x[:1]
    laid = dict(layouts(x))[name]
    inputs = [laid]
    if op == "FastGelu":
        bias = dict(layouts(np.tile(values(rng, (1, 37), np.float32, 0.5), (1, 1))[0]))
        inputs.append(bias.get(name, bias["read-only"]))
    check(op, inputs)


def test_fast_gelu_bias_broadcast_rows():
    """Rows shorter than a vector, longer, and one row of the whole size."""
    rng = np.random.default_rng(6)
    for shape in [(50, 3), (7, 31), (1, 3072), (2, 129, 3)]:
        check("FastGelu", [values(rng, shape, np.float32), values(rng, shape[-1:], np.float32)])


# ------------------------------------------------------------------ bad input

def test_fast_gelu_rejects_a_scalar():
    with pytest.raises(ValueError, match=r"FastGelu: input 0 .*must have rank >= 1"):
        ours("FastGelu", [np.array(1.0, np.float32)])


@pytest.mark.parametrize("shape", [(1,), (3,), (5,)], ids=str)
def test_fast_gelu_bias_length(shape):
    with pytest.raises(ValueError, match=r"FastGelu: input 1 .*must have shape \(4,\)"):
        ours("FastGelu", [np.ones((3, 4), np.float32), np.ones(shape, np.float32)])


@pytest.mark.parametrize("shape", [(1, 4), (3, 4), ()], ids=str)
def test_fast_gelu_bias_rank(shape):
    with pytest.raises(ValueError, match=r"FastGelu: input 1 .*has rank \d .*expected rank 1"):
        ours("FastGelu", [np.ones((3, 4), np.float32), np.ones(shape, np.float32)])


def test_fast_gelu_bias_type():
    with pytest.raises(TypeError, match=r"FastGelu: input 1 .*float16, expected float32 like"):
        ours("FastGelu", [np.ones((3, 4), np.float32), np.ones(4, np.float16)])


@pytest.mark.parametrize("op", ["Gelu", "FastGelu", "QuickGelu"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_input(op, dtype):
    with pytest.raises(TypeError, match=rf"{op}: input 0 .*has element type "):
        ours(op, [np.ones((2, 3), dtype)])


def test_quick_gelu_alpha_kind():
    with pytest.raises(ValueError, match=r"QuickGelu: attribute alpha must be of kind float"):
        ours("QuickGelu", [np.ones((2, 3), np.float32)], alpha="x")

