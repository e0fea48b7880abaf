"""com.microsoft CDist: differential tests against ONNX Runtime (float32,
double, both metrics), NAIVE against OPTIMIZED, sizes off the vector width
and empty dimensions, at every SIMD level and 1/2 threads; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, node_model, same_bits, unaligned

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
# ORT expands |a|^2 + |b|^2 - 2ab (cancellation near 0, clamped); we sum the
# squared differences directly: an absolute floor relative to |a|^2 + |b|^2.
TOL = {np.dtype(np.float32): (2e-5, 2e-4), np.dtype(np.float64): (1e-12, 1e-11)}
SHAPES = [((0, 4), (3, 4)), ((3, 4), (0, 4)), ((1, 1), (1, 1)), ((3, 5), (7, 5)),
          ((17, 3), (33, 3)), ((16, 64), (31, 64)), ((5, 130), (513, 130)), ((40, 7), (600, 7)),
          ((70, 64), (1100, 64))]  # the last one above the two-thread threshold


def model(a, b, metric):
    attrs = {} if metric is None else {"metric": metric}
    m = node_model("CDist", [a, b], domain=MS, opset=21, **attrs)
    for out in m.graph.output:
        out.type.tensor_type.elem_type = m.graph.input[0].type.tensor_type.elem_type
    return m


def run_ort(a, b, metric):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model(a, b, metric).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {"x0": a, "x1": b})


def run_ours(a, b, metric, threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    olc.register_kernels_global(microsoft_implementation=policy)
    try:
        sess = ReferenceEvaluator(model(a, b, metric))
    finally:
        olc.unregister_kernels_global()
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, {"x0": a, "x1": b}), olc.used_kernel_names(sess)


def check(a, b, metric, want):
    originals = (a.copy(), b.copy())
    tol = TOL[a.dtype]
    naive, names = run_ours(a, b, metric, naive=True)
    assert names == ["onnx_light_cpu::NaiveCDist"], names
    assert_close(naive[0], want, f"naive {a.shape} {b.shape} {metric}", tol)
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                got, names = run_ours(a, b, metric, threads)
                assert names == ["onnx_light_cpu::CDist"], names
                assert_close(got[0], want, f"{a.shape} {b.shape} {metric} at {level}, {threads}t",
                             tol)
                assert_close(got[0], naive[0], "naive agreement", tol)
                results.append(got[0])
            assert same_bits(results[0], results[1]), "thread count changed the result"
    assert same_bits(a, originals[0]) and same_bits(b, originals[1]), "input modified"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("metric", [None, "sqeuclidean", "euclidean"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_cdist_vs_ort(dtype, metric, shapes):
    rng = np.random.default_rng(sum(shapes[0]) * 31 + sum(shapes[1]))
    a = rng.standard_normal(shapes[0]).astype(dtype)
    b = rng.standard_normal(shapes[1]).astype(dtype)
    want = run_ort(a, b, metric)[0] if a.size and b.size else \
        np.zeros((a.shape[0], b.shape[0]), dtype)
    check(a, b, metric, want)


def test_cdist_identical_rows_are_zero_and_k0():
    """Equal rows give exactly 0 (no cancellation to clamp); K = 0 (which ORT
    rejects) gives zeros."""
    a = np.random.default_rng(1).standard_normal((5, 33)).astype(np.float32) * 100
    got = run_ours(a, a.copy(), "euclidean")[0][0]
    assert (np.diag(got) == 0).all()
    z = run_ours(np.zeros((3, 0), np.float32), np.zeros((2, 0), np.float32), None)[0][0]
    assert z.shape == (3, 2) and (z == 0).all()


def test_cdist_unaligned_and_strided():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((9, 19)).astype(np.float32)
    b = rng.standard_normal((23, 19)).astype(np.float32)
    check(unaligned(a), unaligned(b), "euclidean", run_ort(a, b, "euclidean")[0])
    wide = rng.standard_normal((9, 38)).astype(np.float32)
    got = run_ours(wide[:, ::2], b, None)[0][0]
    assert_close(got, run_ort(np.ascontiguousarray(wide[:, ::2]), b, None)[0], "strided",
                 TOL[np.dtype(np.float32)])


@pytest.mark.parametrize("naive", [False, True])
def test_cdist_bad_input(naive):
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"CDist: input 1 .*second dimension"):
        run_ours(a, np.ones((4, 5), np.float32), None, naive=naive)
    with pytest.raises(ValueError, match=r"CDist: input 0 .*rank 2"):
        run_ours(np.ones((2, 3, 1), np.float32), a, None, naive=naive)
    with pytest.raises(ValueError, match=r"CDist: attribute metric .*'cosine'"):
        run_ours(a, a, "cosine", naive=naive)
    with pytest.raises(TypeError, match=r"CDist: input 0 .*element type float16"):
        run_ours(a.astype(np.float16), a.astype(np.float16), None, naive=naive)
    with pytest.raises(TypeError, match=r"CDist: input 1 .*element type float64"):
        run_ours(a, a.astype(np.float64), None, naive=naive)
