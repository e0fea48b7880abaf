"""CDist's backward model: finite differences in float64 and float32, both
metrics, run by our kernels (its CDist node too) and by ONNX Runtime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T

import onnx_light_cpu as olc

from gradcheck import check_gradients, one_node_model, ours

# ((rtol, atol) against central differences, step h): float64 with h = 1e-6
# leaves truncation (h^2) and rounding (1e-16 |L| / h) near 1e-9; float32
# with h = 1e-2 leaves h^2 |f'''| and a rounding error 1e-7 |L| / h near
# 1e-5.  Measured: about a tenth of these bounds.
TOL = {np.float64: ((1e-7, 1e-8), 1e-6), np.float32: ((2e-3, 2e-4), 1e-2)}
# ours against ONNX Runtime: the same graph; the euclidean C differs (ORT
# expands |a|^2 + |b|^2 - 2ab), which moves dC / C by a few ulps
ORT_TOL = {np.float64: (1e-12, 1e-13), np.float32: (1e-5, 1e-6)}
SHAPES = [(1, 1, 1), (3, 4, 2), (5, 2, 7)]   # M, N, K


def cdist_model(dtype, m, n, k, metric):
    t = T.DOUBLE if dtype == np.float64 else T.FLOAT
    attrs = {} if metric is None else {"metric": metric}
    return one_node_model("CDist", {"A": (t, [m, k]), "B": (t, [n, k])}, {"C": (t, [m, n])},
                          **attrs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("metric", [None, "sqeuclidean", "euclidean"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cdist_gradient(dtype, metric, shape):
    rng = np.random.default_rng(sum(shape))
    m, n, k = shape
    feeds = {"A": rng.standard_normal((m, k)).astype(dtype),
             "B": rng.standard_normal((n, k)).astype(dtype)}
    tol, step = TOL[dtype]
    kernels = ("CDist",) if metric == "euclidean" else ()
    check_gradients(cdist_model(dtype, m, n, k, metric), feeds, tol=tol, step=step,
                    kernels=kernels, ort_tol=ORT_TOL[dtype])


def test_cdist_euclidean_zero_distance_gives_zero():
    """Where a row of A equals a row of B the distance has no derivative:
    the rule's subgradient is 0 (and no NaN leaks from dC / C)."""
    a = np.array([[1.0, 2.0], [0.5, -1.0]])
    b = np.array([[1.0, 2.0], [3.0, 0.0], [0.5, -1.0]])
    backward = olc.gradient_model(cdist_model(np.float64, 2, 3, 2, "euclidean"))
    dc = np.zeros((2, 3))
    dc[0, 0] = dc[1, 2] = 1.0      # only the zero-distance pairs
    got = ours(backward).run(None, {"A": a, "B": b, "grad_C": dc})
    for g in got:
        np.testing.assert_array_equal(g, np.zeros_like(g))


def test_cdist_same_input_twice_sums_both_gradients():
    """CDist(A, A): grad_A is the sum of both positions' gradients."""
    model = one_node_model("CDist", {"A": (T.DOUBLE, [3, 2])}, {"C": (T.DOUBLE, [3, 3])},
                           metric="sqeuclidean")
    model.graph.node[0].input.append("A")
    backward = olc.gradient_model(model)
    assert [o.name for o in backward.graph.output] == ["grad_A"]
    rng = np.random.default_rng(1)
    a, dc = rng.standard_normal((3, 2)), rng.standard_normal((3, 3))
    (got,) = ours(backward).run(None, {"A": a, "grad_C": dc})
    diff = a[:, None, :] - a[None, :, :]
    want = 2 * ((dc[:, :, None] * diff).sum(1) - (dc[:, :, None] * diff).sum(0))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_cdist_unknown_metric_is_rejected():
    model = cdist_model(np.float32, 2, 2, 2, "cityblock")
    with pytest.raises(NotImplementedError, match="CDist.*cityblock"):
        olc.gradient_model(model)
