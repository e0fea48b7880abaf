"""BiasGelu's backward model: finite differences in float64 (our kernel runs
DOUBLE) and float32, ranks 1 to 3; float16/bfloat16 against the float32
backward; run by our kernels and by ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16

import onnx_light_cpu as olc

from gradcheck import check_gradients, one_node_model, ours, run_ort

# ((rtol, atol) against central differences, step h).  DOUBLE: the rule
# evaluates erf in float32 (ONNX Runtime has no DOUBLE Erf), an error near
# 3e-8 in the derivative; h = 1e-5 keeps the difference's own error below
# 1e-9.  float32 with h = 1e-2: truncation h^2 |f'''| / 6 and rounding
# 1e-7 / h, both near 1e-5.  Measured: a sixth of these bounds.
TOL = {np.float64: ((2e-7, 2e-7), 1e-5), np.float32: ((1e-4, 1e-4), 1e-2)}
# ours against ONNX Runtime: the same graph; float32 Erf kernels may differ by an ulp
ORT_TOL = {np.float64: (1e-6, 1e-7), np.float32: (1e-6, 1e-7)}
SHAPES = [(4,), (3, 5), (2, 3, 4)]


def bias_gelu_model(dtype, shape):
    t = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return one_node_model("BiasGelu", {"A": (t, list(shape)), "bias": (t, [shape[-1]])},
                          {"C": (t, list(shape))})


def feeds_for(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    return {"A": (2 * rng.standard_normal(shape)).astype(dtype),
            "bias": rng.standard_normal(shape[-1]).astype(dtype)}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_bias_gelu_gradient(dtype, shape):
    tol, step = TOL[dtype]
    check_gradients(bias_gelu_model(dtype, shape), feeds_for(dtype, shape), tol=tol, step=step,
                    ort_tol=ORT_TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float16, bfloat16])
def test_bias_gelu_half_types_match_float32(dtype):
    """Half types compute in float32 and round once: the float32 backward of
    the rounded inputs, rounded."""
    shape = (3, 8)
    feeds = {k: v.astype(dtype) for k, v in feeds_for(np.float32, shape).items()}
    dc = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    backward = olc.gradient_model(bias_gelu_model(dtype, shape))
    onnx.checker.check_model(backward, full_check=True)
    got = ours(backward).run(None, {**feeds, "grad_C": dc})
    want = ours(olc.gradient_model(bias_gelu_model(np.float32, shape))).run(
        None, {**{k: v.astype(np.float32) for k, v in feeds.items()},
               "grad_C": dc.astype(np.float32)})
    for g, w in zip(got, want):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.astype(np.float32), w.astype(dtype).astype(np.float32),
                                   rtol=0, atol=0)
    if dtype == np.float16:  # ONNX Runtime's Python API takes no bfloat16 arrays
        for g, o in zip(got, run_ort(backward, {**feeds, "grad_C": dc})):
            np.testing.assert_allclose(g.astype(np.float32), o.astype(np.float32), rtol=1e-3)
