"""com.microsoft BiasGelu: differential tests against ONNX Runtime (float32,
float16) and a float64 erf oracle (bfloat16, double), NAIVE against
OPTIMIZED, rows off the vector width and empty dimensions, at every SIMD
level and 1/2 threads; bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, node_model, same_bits, unaligned

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
_ERFC = np.vectorize(math.erfc, otypes=[np.float64])
# The exact Gelu is x * Phi(x); for x << 0 ORT's 1 + erf loses relative
# accuracy to cancellation (ours keeps it down to about -5.5, then gives
# -0), so an absolute floor joins rtol.
TOL = {
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (1e-3, 1e-4),
    np.dtype(bfloat16): (8e-3, 1e-3),
    np.dtype(np.float64): (1e-12, 1e-15),
}
SHAPES = [(0, 3), (2, 0, 5), (1,), (7,), (3, 15), (2, 16), (5, 17), (3, 33), (2, 3, 64),
          (4, 1000), (64, 768)]


def run_ort(a, bias):
    model = node_model("BiasGelu", [a, bias], domain=MS, opset=21)
    for out in model.graph.output:
        out.type.tensor_type.elem_type = model.graph.input[0].type.tensor_type.elem_type
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x0": a, "x1": bias})


def exact(a, bias):
    """float64 erf Gelu of the (float32-rounded for narrow types) sum, Phi
    from erfc (no cancellation below zero)."""
    wide = np.float64 if a.dtype == np.float64 else np.float32
    x = (a.astype(wide) + bias.astype(wide)).astype(np.float64)
    y = x * (0.5 * _ERFC(-x / math.sqrt(2.0))) if x.size else x
    return [y.astype(a.dtype)]


def run_ours(a, bias, threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    model = node_model("BiasGelu", [a, bias], domain=MS, opset=21)
    olc.register_kernels_global(microsoft_implementation=policy)
    try:
        sess = ReferenceEvaluator(model)
    finally:
        olc.unregister_kernels_global()
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, {"x0": a, "x1": bias}), olc.used_kernel_names(sess)


def check(a, bias, oracle):
    originals = (a.copy(), bias.copy())
    want = oracle(a, bias)
    tol = TOL[a.dtype]
    got, names = run_ours(a, bias, naive=True)
    assert names == ["onnx_light_cpu::NaiveBiasGelu"], names
    assert_close(got[0], want[0], f"naive {a.dtype} {a.shape}", tol)
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                got, names = run_ours(a, bias, threads)
                assert names == ["onnx_light_cpu::BiasGelu"], names
                assert_close(got[0], want[0], f"{a.dtype} {a.shape} at {level}, {threads}t", tol)
                results.append(got[0])
            assert same_bits(results[0], results[1]), "thread count changed the result"
    assert same_bits(a, originals[0]) and same_bits(bias, originals[1]), "input modified"


def feeds(rng, shape, dtype, scale=3.0):
    a = (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)
    bias = (rng.standard_normal(shape[-1]) * 0.5).astype(np.float32).astype(dtype)
    return a, bias


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_bias_gelu_vs_ort(dtype, shape):
    rng = np.random.default_rng(len(shape) * 100 + sum(shape))
    check(*feeds(rng, shape, dtype), run_ort)


@pytest.mark.parametrize("dtype", [bfloat16, np.float64, np.float32])
@pytest.mark.parametrize("shape", [(0, 4), (3, 17), (5, 64), (2, 3, 129)], ids=str)
def test_bias_gelu_vs_exact(dtype, shape):
    rng = np.random.default_rng(7)
    check(*feeds(rng, shape, dtype), exact)


def test_bias_gelu_erf_accuracy_dense_grid():
    """The float32 erf over [-6, 6] stays within a few ulp of math.erf
    (checked through Gelu: y / x - 0.5 = erf / 2 away from zero crossings)."""
    x = np.linspace(-6, 6, 40001, dtype=np.float32)
    bias = np.zeros(x.size, np.float32)
    want = exact(x[None], bias)[0][0].astype(np.float64)
    for level in available_simd_levels():
        with capped_simd_level(level):
            got = run_ours(x[None], bias)[0][0][0].astype(np.float64)
            spacing = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
            ulp = np.abs(got - want) / spacing
            big = np.abs(x) > 0.5
            assert ulp[big & (x > 0)].max() <= 4, (level, ulp[big & (x > 0)].max())
            assert_close(got, want, f"grid {level}", (1e-5, 1e-7))


def test_bias_gelu_special_values():
    x = np.array([[0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 20.0, -20.0, 3.0e38]],
                 np.float32)
    bias = np.zeros(x.shape[1], np.float32)
    for level in available_simd_levels():
        with capped_simd_level(level):
            y = run_ours(x, bias)[0][0][0]
            # -inf * Phi(-inf) = -inf * 0: NaN, as ONNX Runtime 1.32 gives
            assert y[0] == 0 and y[2] == np.inf and np.isnan(y[3]) and np.isnan(y[4]), (level, y)
            assert y[7] == 20.0 and y[8] == 0 and y[9] == np.float32(3.0e38), (level, y)


def test_bias_gelu_inf_minus_inf_is_nan():
    """Regression: at AVX-512, erf of a NaN was finite, and Gelu's guard for
    Phi == 0 turned inf + (-inf) into -0."""
    a = np.ones((5, 64), np.float32)
    a[:, 24] = np.inf
    bias = np.zeros(64, np.float32)
    bias[24] = -np.inf
    for level in available_simd_levels():
        with capped_simd_level(level):
            y = run_ours(a, bias)[0][0]
            assert np.isnan(y[:, 24]).all(), level
            assert np.isfinite(np.delete(y, 24, axis=1)).all(), level
    assert np.isnan(run_ours(a, bias, naive=True)[0][0][:, 24]).all()


def test_bias_gelu_unaligned_and_strided():
    rng = np.random.default_rng(3)
    a, bias = feeds(rng, (9, 37), np.float32)
    check(unaligned(a), unaligned(bias), run_ort)
    base = rng.standard_normal((9, 74)).astype(np.float32)
    strided = base[:, ::2]
    want = run_ort(np.ascontiguousarray(strided), bias)[0]
    got = run_ours(strided, bias)[0][0]
    assert_close(got, want, "strided", TOL[np.dtype(np.float32)])


@pytest.mark.parametrize("naive", [False, True])
def test_bias_gelu_bad_input(naive):
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"BiasGelu: input 1 .*shape \(3,\)"):
        run_ours(a, np.ones(4, np.float32), naive=naive)
    with pytest.raises(ValueError, match=r"BiasGelu: input 1"):
        run_ours(a, np.ones((1, 3), np.float32), naive=naive)
    with pytest.raises(TypeError, match=r"BiasGelu: input 1 .*element type float16"):
        run_ours(a, np.ones(3, np.float16), naive=naive)
    with pytest.raises(TypeError, match=r"BiasGelu: input 0 .*element type int32"):
        run_ours(a.astype(np.int32), np.ones(3, np.int32), naive=naive)
    with pytest.raises(ValueError, match=r"BiasGelu: input 0 .*rank"):
        run_ours(np.array(1.0, np.float32), np.ones(1, np.float32), naive=naive)
