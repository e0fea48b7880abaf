"""ai.onnx SwiGLU (opset 28): differential tests against the onnx.reference
built-in for every type the schema allows, alpha values, sizes off the
vector width, empty and large tensors, special values, at every SIMD level
and 1/2 threads; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

from differential import check_node, node_model, random_shapes, run_ours, special_values, unaligned

DTYPES = (np.float32, np.float16, bfloat16, np.float64)


def float32_oracle(alpha):
    """Swish computed in float32 and rounded once (the built-in works in the
    narrow type itself, so for float16/bfloat16 ours is the closer one)."""
    def oracle(a, b):
        x, y = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(all="ignore"):
            s = 1.0 / (1.0 + np.exp(-np.float64(np.float32(alpha)) * x))
        return [(x * s * y).astype(a.dtype)]
    return oracle


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_swiglu_shapes(dtype):
    rng = np.random.default_rng(0)
    for shape in random_shapes(rng):
        a = np.asarray(rng.standard_normal(shape) * 4).astype(dtype)
        b = np.asarray(rng.standard_normal(shape)).astype(dtype)
        oracle = "builtin" if dtype in (np.float32, np.float64) else float32_oracle(1.0)
        check_node("SwiGLU", [a, b], oracle=oracle, opset=28)


@pytest.mark.parametrize("alpha", [0.5, 1.702, -2.0, 0.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_swiglu_alpha(alpha, dtype):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((5, 37)) * 4).astype(dtype)
    b = rng.standard_normal((5, 37)).astype(dtype)
    check_node("SwiGLU", [a, b], oracle="builtin", opset=28, alpha=alpha)


def test_swiglu_special_values_and_unaligned():
    for dtype in (np.float32, np.float64):
        s = special_values(dtype)
        a = np.repeat(s, s.size)
        b = np.tile(s, s.size)
        check_node("SwiGLU", [a, b], oracle="builtin", opset=28)
    rng = np.random.default_rng(2)
    a = rng.standard_normal(1001).astype(np.float32)
    b = rng.standard_normal(1001).astype(np.float32)
    check_node("SwiGLU", [unaligned(a), unaligned(b)], oracle="builtin", opset=28)


def test_swiglu_bad_input():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"SwiGLU: input 1 .*shape \(3,\).*no broadcasting"):
        run_ours(node_model("SwiGLU", [a, a[0]], opset=28), [a, a[0]])
    b = a.astype(np.float16)
    with pytest.raises(TypeError, match=r"SwiGLU: input 1 .*float16"):
        run_ours(node_model("SwiGLU", [a, b], opset=28), [a, b])
    i = a.astype(np.int32)
    with pytest.raises(TypeError, match=r"SwiGLU: input 0 .*int32"):
        run_ours(node_model("SwiGLU", [i, i], opset=28), [i, i])
