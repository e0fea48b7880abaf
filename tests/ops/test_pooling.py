"""The pooling kernels (MaxPool, AveragePool, LpPool, the global pools, LRN,
MaxUnpool, MaxRoiPool) against ONNX Runtime and a float64 NumPy oracle of
the specification (ORT's geometry), at every SIMD level, 1 and 2 threads.

The built-ins are wrong where ``ceil_mode`` drops the last window (it must
start inside the input or the left padding), for MaxPool's Indices with a
1x1 kernel (per plane) and for LRN (only the channels below the batch
size): those cases have ORT and the NumPy oracle as the oracles, and a test
each shows the built-in's answer differs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import (
    assert_close,
    check_node,
    layouts,
    node_model,
    run_builtin,
    run_ours,
    same_bits,
)

ort = pytest.importorskip("onnxruntime")

F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)
BF16 = np.dtype(bfloat16)
NARROW = (F16, BF16)
TOL = {F64: (1e-12, 1e-12), F32: (2e-6, 1e-6), F16: (2e-3, 1e-3), BF16: (1.6e-2, 1e-2)}


# -- oracles -------------------------------------------------------------------------


def run_ort(model: onnx.ModelProto, inputs, threads: int = 1) -> list:
    model = onnx.shape_inference.infer_shapes(model)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 4
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {f"x{i}": np.ascontiguousarray(a) for i, a in enumerate(inputs)})


def ort_oracle(op, n_outputs=1, opset=22, **attrs):
    """ONNX Runtime on the float32 values of float16/bfloat16 inputs, its
    results rounded once (what our kernels compute)."""
    def oracle(*inputs):
        wide = [a.astype(F32) if a.dtype in NARROW else a for a in inputs]
        out = run_ort(node_model(op, wide, n_outputs=n_outputs, opset=opset, **attrs), wide)
        return [o.astype(inputs[0].dtype) if o.dtype == F32 else o for o in out]
    return oracle


def geometry(shape, kernel, strides=None, pads=None, dilations=None, auto_pad="NOTSET",
             ceil_mode=0):
    """(output spatial sizes, pads begin, pads end), as ONNX Runtime computes them."""
    n = len(kernel)
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    pads = pads or [0] * (2 * n)
    out, pb, pe = [], [], []
    for i in range(n):
        size, k, s, d = shape[2 + i], kernel[i], strides[i], dilations[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            need = max(0, ((size + s - 1) // s - 1) * s + k - size)
            b = (need + 1) // 2 if auto_pad == "SAME_LOWER" else need // 2
            e = need - b
        elif auto_pad == "VALID":
            b = e = 0
        else:
            b, e = pads[i], pads[n + i]
        span = size + b + e - (d * (k - 1) + 1)
        if ceil_mode and auto_pad == "NOTSET":
            o = -(-span // s) + 1
            if (o - 1) * s >= size + b:
                o -= 1
        else:
            o = span // s + 1
        out.append(o)
        pb.append(b)
        pe.append(e)
    return out, pb, pe


def pool_numpy(x, mode, kernel, strides=None, pads=None, dilations=None, auto_pad="NOTSET",
               ceil_mode=0, count_include_pad=0, p=2, storage_order=0):
    """float64 pooling of x [N, C, ...] (mode max, avg, lp); max also gives
    its indices.  The window's first tap seeds the max and only a greater
    value replaces it: a NaN first tap stays, later ones never win (ONNX
    Runtime's loops)."""
    n = len(kernel)
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    out, pb, pe = geometry(x.shape, kernel, strides, pads, dilations, auto_pad, ceil_mode)
    xd = x.astype(np.float64)
    N, C = x.shape[:2]
    spatial = x.shape[2:]
    y = np.zeros((N, C, *out))
    idx = np.zeros((N, C, *out), np.int64)
    plane = math.prod(spatial)
    base = (np.arange(N * C) * plane).reshape(N, C)
    if storage_order:
        mult = [math.prod(spatial[:i]) for i in range(n)]
    else:
        mult = [math.prod(spatial[i + 1:]) for i in range(n)]
    for o in itertools.product(*[range(v) for v in out]):
        taps, counted = [], 1
        for i in range(n):
            pos = [o[i] * strides[i] - pb[i] + k * dilations[i] for k in range(kernel[i])]
            taps.append([q for q in pos if 0 <= q < spatial[i]])
            lo, hi = (-pb[i], spatial[i] + pe[i]) if count_include_pad else (0, spatial[i])
            counted *= sum(lo <= q < hi for q in pos)
        where = (slice(None), slice(None)) + o
        vals = [(xd[(slice(None), slice(None)) + t], sum(a * m for a, m in zip(t, mult)))
                for t in itertools.product(*taps)]
        if mode == "max":
            best = np.full((N, C), -np.inf)
            at = np.zeros((N, C), np.int64)
            for i, (v, flat) in enumerate(vals):
                better = (v > best) | (i == 0)  # the first tap seeds (a NaN there stays)
                best = np.where(better, v, best)
                at = np.where(better, flat, at)
            if x.dtype.kind in "iu":
                best = np.where(np.isinf(best), np.iinfo(x.dtype).min, best)
            y[where] = best
            idx[where] = base + at
        elif mode == "avg":
            y[where] = sum(v for v, _ in vals) / counted
        else:
            y[where] = sum(np.abs(v) ** p for v, _ in vals) ** (1.0 / p)
    return y.astype(x.dtype), idx


def lrn_numpy(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    alpha, beta, bias = (float(np.float32(v)) for v in (alpha, beta, bias))  # FLOAT attributes
    xd = x.astype(np.float64)
    C = x.shape[1]
    sq = np.zeros_like(xd)
    for c in range(C):
        lo, hi = max(0, c - (size - 1) // 2), min(C - 1, c + size // 2)
        sq[:, c] = (xd[:, lo:hi + 1] ** 2).sum(axis=1)
    return (xd / (bias + alpha / size * sq) ** beta).astype(x.dtype)


def rand(rng, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _tol(dtype):
    return TOL[np.dtype(dtype)]


# -- MaxPool -------------------------------------------------------------------------

MAX_CASES = [
    ((2, 3, 17), dict(kernel_shape=[3], strides=[2])),
    ((2, 3, 17), dict(kernel_shape=[4], strides=[3], auto_pad="VALID")),
    ((1, 3, 9, 9), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((2, 3, 10, 11), dict(kernel_shape=[2, 3], strides=[2, 1], dilations=[2, 2],
                          pads=[1, 0, 0, 1])),
    ((2, 3, 10, 11), dict(kernel_shape=[2, 3], strides=[3, 2], pads=[1, 1, 1, 1])),
    ((1, 2, 5, 5), dict(kernel_shape=[1, 1], strides=[2, 2])),
    ((1, 4, 33, 37), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 4, 40, 41), dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
    ((1, 2, 20, 50), dict(kernel_shape=[2, 5], strides=[3, 3], dilations=[1, 2])),
    ((2, 3, 6, 7, 5), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], auto_pad="SAME_UPPER")),
    ((2, 3, 6, 7, 5), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], auto_pad="SAME_LOWER")),
    ((1, 2, 7, 8, 9), dict(kernel_shape=[3, 2, 3], pads=[1, 0, 1, 1, 1, 0], ceil_mode=1,
                           strides=[2, 2, 2])),
]


@pytest.mark.parametrize("with_indices", [False, True])
@pytest.mark.parametrize("shape, attrs", MAX_CASES)
def test_maxpool_float32_vs_ort(shape, attrs, with_indices):
    rng = np.random.default_rng(1)
    x = rand(rng, shape, F32)
    n_out = 2 if with_indices else 1
    check_node("MaxPool", [x], oracle=ort_oracle("MaxPool", n_out, **attrs), n_outputs=n_out,
               opset=22, **attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("shape, attrs", MAX_CASES[2:5] + MAX_CASES[9:10])
def test_maxpool_indices_storage_order(shape, attrs, storage_order):
    rng = np.random.default_rng(2)
    x = rand(rng, shape, F32)
    check_node("MaxPool", [x], oracle=ort_oracle("MaxPool", 2, storage_order=storage_order,
                                                 **attrs),
               n_outputs=2, opset=22, storage_order=storage_order, **attrs)


def test_maxpool_3d_column_major_indices_numpy():
    rng = np.random.default_rng(3)
    x = rand(rng, (2, 3, 6, 7, 5), F32)
    attrs = dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], pads=[1, 0, 1, 0, 1, 1])
    y, idx = pool_numpy(x, "max", attrs["kernel_shape"], attrs["strides"], attrs["pads"],
                        storage_order=1)
    check_node("MaxPool", [x], oracle=lambda x: [y, idx], n_outputs=2, opset=22,
               storage_order=1, **attrs)


@pytest.mark.parametrize("dtype", [F64, F16, BF16, np.dtype(np.int8), np.dtype(np.uint8)])
@pytest.mark.parametrize("shape, attrs", MAX_CASES[::3])
def test_maxpool_other_types(shape, attrs, dtype):
    rng = np.random.default_rng(4)
    x = rand(rng, shape, dtype)
    y, idx = pool_numpy(x, "max", attrs["kernel_shape"], attrs.get("strides"), attrs.get("pads"),
                        attrs.get("dilations"), attrs.get("auto_pad", "NOTSET"),
                        attrs.get("ceil_mode", 0))
    check_node("MaxPool", [x], oracle=lambda x: [y, idx], n_outputs=2, opset=22, **attrs)


def test_maxpool_int8_vs_ort():
    rng = np.random.default_rng(5)
    for dtype in (np.int8, np.uint8):
        x = rand(rng, (2, 3, 9, 10), dtype)
        attrs = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
        check_node("MaxPool", [x], oracle=ort_oracle("MaxPool", **attrs), opset=12, **attrs)


def test_maxpool_nan_as_ort():
    """A NaN first tap of a window stays, later ones never win: ONNX
    Runtime's loops (Indices, dilations, double).  Its MLAS path (float32, no
    Indices) returns NaN when the last tap is NaN instead."""
    rng = np.random.default_rng(6)
    x = rand(rng, (1, 2, 9, 9), F32)
    x[0, 0, 1:3, 1:3] = np.nan
    x[0, 1, 0, :] = np.nan
    x[0, 1, 4, 5] = np.nan
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2])
    check_node("MaxPool", [x], oracle=ort_oracle("MaxPool", 2, **attrs), n_outputs=2, opset=22,
               **attrs)
    y, _ = pool_numpy(x, "max", [3, 3], [2, 2])
    check_node("MaxPool", [x], oracle=lambda x: [y], opset=22, **attrs)
    x64 = x.astype(F64)
    check_node("MaxPool", [x64], oracle=ort_oracle("MaxPool", **attrs), opset=22, **attrs)


def test_maxpool_builtin_wrong_where_ours_follows_ort():
    """ceil_mode with pads: the last window must start inside the input or
    the left padding; 1x1 kernel Indices are over the whole tensor."""
    x = np.random.default_rng(7).standard_normal((1, 1, 55, 55)).astype(F32)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    model = node_model("MaxPool", [x], opset=22, **attrs)
    ours, names, _ = run_ours(model, [x])
    want = run_ort(model, [x])
    assert names == ["onnx_light_cpu::MaxPool"]
    assert ours[0].shape == want[0].shape == (1, 1, 28, 28)
    assert_close(ours[0], want[0])
    x = np.random.default_rng(8).standard_normal((2, 3, 4, 4)).astype(F32)
    model = node_model("MaxPool", [x], n_outputs=2, opset=22, kernel_shape=[1, 1])
    ours, _, _ = run_ours(model, [x])
    builtin = run_builtin(model, [x])
    np.testing.assert_array_equal(ours[1], np.arange(x.size).reshape(x.shape))
    np.testing.assert_array_equal(ours[1], run_ort(model, [x])[1])
    assert not np.array_equal(builtin[1], ours[1])


def test_maxpool_opset_versions():
    rng = np.random.default_rng(9)
    x = rand(rng, (1, 3, 8, 9), F32)
    for opset in (7, 8, 10, 11, 12, 22):
        attrs = dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1])
        n_out = 2 if opset >= 8 else 1
        check_node("MaxPool", [x], oracle=ort_oracle("MaxPool", n_out, opset=opset, **attrs),
                   n_outputs=n_out, opset=opset, **attrs)


# -- AveragePool and LpPool ----------------------------------------------------------

AVG_CASES = [
    ((2, 3, 17), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ((2, 3, 10, 11), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)),
    ((2, 3, 10, 11), dict(kernel_shape=[3, 2], strides=[1, 2], pads=[1, 1, 2, 0],
                          dilations=[2, 2])),
    ((1, 4, 28, 28), dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])),
    ((1, 2, 33, 47), dict(kernel_shape=[3, 5], strides=[2, 2], pads=[1, 2, 1, 2])),
    ((1, 2, 20, 30), dict(kernel_shape=[4, 4], strides=[3, 3])),
    ((2, 3, 6, 7, 5), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], auto_pad="SAME_UPPER")),
    ((2, 3, 6, 7, 5), dict(kernel_shape=[2, 3, 2], strides=[1, 2, 2], auto_pad="SAME_LOWER")),
    ((1, 2, 7, 8, 9), dict(kernel_shape=[3, 2, 3], pads=[1, 0, 1, 1, 1, 0], strides=[2, 2, 2],
                           ceil_mode=1)),
]


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("shape, attrs", AVG_CASES)
def test_averagepool_float32_vs_ort(shape, attrs, count_include_pad):
    x = rand(np.random.default_rng(10), shape, F32)
    attrs = dict(attrs, count_include_pad=count_include_pad)
    check_node("AveragePool", [x], oracle=ort_oracle("AveragePool", opset=19, **attrs),
               opset=19, tolerance=(1e-5, 1e-6), **attrs)


@pytest.mark.parametrize("dtype", [F64, F16, BF16])
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("shape, attrs", AVG_CASES[::2])
def test_averagepool_other_types(shape, attrs, count_include_pad, dtype):
    x = rand(np.random.default_rng(11), shape, dtype)
    y, _ = pool_numpy(x, "avg", attrs["kernel_shape"], attrs.get("strides"), attrs.get("pads"),
                      attrs.get("dilations"), attrs.get("auto_pad", "NOTSET"),
                      attrs.get("ceil_mode", 0), count_include_pad)
    check_node("AveragePool", [x], oracle=lambda x: [y], opset=22, tolerance=_tol(dtype),
               count_include_pad=count_include_pad, **attrs)


def test_averagepool_opset_versions():
    x = rand(np.random.default_rng(12), (1, 3, 8, 9), F32)
    attrs = dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], count_include_pad=1)
    for opset in (7, 10, 11, 19, 22):
        want = pool_numpy(x, "avg", [3, 2], [2, 1], [1, 0, 1, 1], count_include_pad=1)[0]
        check_node("AveragePool", [x], oracle=lambda x: [want], opset=opset,
                   tolerance=(1e-5, 1e-6), **attrs)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape, attrs", AVG_CASES[:6])
def test_lppool_float32_vs_ort(shape, attrs, p):
    x = rand(np.random.default_rng(13), shape, F32)
    opset = 18 if ("dilations" in attrs or "ceil_mode" in attrs) else 11
    check_node("LpPool", [x], oracle=ort_oracle("LpPool", opset=opset, p=p, **attrs),
               opset=opset, tolerance=(2e-5, 1e-6), p=p, **attrs)


@pytest.mark.parametrize("dtype", [F64, F16, BF16, F32])
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape, attrs", AVG_CASES[1::3])
def test_lppool_numpy(shape, attrs, p, dtype):
    x = rand(np.random.default_rng(14), shape, dtype)
    y, _ = pool_numpy(x, "lp", attrs["kernel_shape"], attrs.get("strides"), attrs.get("pads"),
                      attrs.get("dilations"), attrs.get("auto_pad", "NOTSET"),
                      attrs.get("ceil_mode", 0), p=p)
    tol = (2e-5, 1e-6) if dtype == F32 else _tol(dtype)
    check_node("LpPool", [x], oracle=lambda x: [y], opset=22, tolerance=tol, p=p, **attrs)


# -- global pools ------------------------------------------------------------------


GLOBAL_SHAPES = [(2, 5, 7, 7), (1, 33, 3), (2, 3, 4, 5, 6), (3, 4, 17, 19), (1, 8, 1, 1),
                 (2, 3, 40, 41)]


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", GLOBAL_SHAPES)
def test_global_pools_float32_vs_ort(op, shape):
    x = rand(np.random.default_rng(15), shape, F32)
    check_node(op, [x], oracle=ort_oracle(op), opset=22, tolerance=(1e-5, 1e-6))


@pytest.mark.parametrize("dtype", [F64, F16, BF16, F32])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", GLOBAL_SHAPES[::2])
def test_global_pools_numpy(op, shape, dtype):
    x = rand(np.random.default_rng(16), shape, dtype)
    xd = x.astype(np.float64)
    axes = tuple(range(2, x.ndim))
    for p in (1, 2, 3) if op == "GlobalLpPool" else (None,):
        if op == "GlobalAveragePool":
            want = xd.mean(axis=axes, keepdims=True)
        elif op == "GlobalMaxPool":
            want = xd.max(axis=axes, keepdims=True)
        else:
            want = (np.abs(xd) ** p).sum(axis=axes, keepdims=True) ** (1 / p)
        attrs = {} if p is None else {"p": p}
        tol = (1e-5, 1e-6) if dtype == F32 else _tol(dtype)
        check_node(op, [x], oracle=lambda x: [want.astype(dtype)], opset=22, tolerance=tol,
                   **attrs)


def test_global_lp_pool_opset_1_float_p():
    x = rand(np.random.default_rng(17), (2, 3, 5, 5), F32)
    want = (np.abs(x.astype(np.float64)) ** 2).sum(axis=(2, 3), keepdims=True) ** 0.5
    check_node("GlobalLpPool", [x], oracle=lambda x: [want.astype(F32)], opset=1, p=2.0,
               tolerance=(1e-5, 1e-6))


# -- LRN -----------------------------------------------------------------------------


LRN_CASES = [((2, 7, 5, 5), dict(size=3)), ((1, 64, 6, 7), dict(size=5, alpha=1e-3, beta=0.6,
                                                                bias=2.0)),
             ((3, 8, 17), dict(size=1)), ((1, 5, 2, 3, 4), dict(size=7, beta=1.0))]


@pytest.mark.parametrize("shape, attrs", LRN_CASES)
def test_lrn_float32_vs_ort(shape, attrs):
    x = rand(np.random.default_rng(18), shape, F32)
    if len(shape) != 4:
        want = lrn_numpy(x, **attrs)
        oracle = lambda x: [want]  # noqa: E731 (ORT's LRN is 4-D only)
    else:
        oracle = ort_oracle("LRN", opset=13, **attrs)
    check_node("LRN", [x], oracle=oracle, opset=13, tolerance=(1e-5, 1e-6), **attrs)


@pytest.mark.parametrize("dtype", [F64, F16, BF16, F32])
@pytest.mark.parametrize("size", [1, 2, 4, 5])
def test_lrn_numpy(size, dtype):
    """Even sizes too (ORT takes only odd ones): the window is
    c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2)."""
    x = rand(np.random.default_rng(19), (2, 6, 3, 5), dtype)
    want = lrn_numpy(x, size, alpha=0.05, beta=0.75, bias=1.5)
    tol = (1e-5, 1e-6) if dtype == F32 else _tol(dtype)
    check_node("LRN", [x], oracle=lambda x: [want], opset=13, tolerance=tol, size=size,
               alpha=0.05, beta=0.75, bias=1.5)


def test_lrn_every_channel_unlike_the_builtin():
    x = rand(np.random.default_rng(20), (1, 6, 3, 3), F32)
    model = node_model("LRN", [x], opset=13, size=3)
    ours, names, _ = run_ours(model, [x])
    assert names == ["onnx_light_cpu::LRN"]
    assert_close(ours[0], run_ort(model, [x])[0], tolerance=(1e-5, 1e-6))
    assert not np.allclose(run_builtin(model, [x])[0], ours[0])


# -- MaxUnpool and MaxRoiPool ----------------------------------------------------------


@pytest.mark.parametrize("dtype", [F32, F64, F16, BF16])
@pytest.mark.parametrize("with_shape", [False, True])
def test_maxunpool_roundtrip(dtype, with_shape):
    rng = np.random.default_rng(21)
    x = rand(rng, (2, 3, 8, 8), F32)
    model = node_model("MaxPool", [x], n_outputs=2, opset=22, kernel_shape=[2, 2], strides=[2, 2])
    y, idx = run_ort(model, [x])
    y = y.astype(dtype)
    inputs = [y, idx]
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    inferred = (2, 3, 8, 8)
    if with_shape:
        inputs.append(np.array([2, 3, 9, 10], np.int64))

    def oracle(y, idx, *shape):
        out = np.zeros(inferred, dtype)
        out.reshape(-1)[idx.reshape(-1)] = y.reshape(-1)
        if shape:
            big = np.zeros(tuple(shape[0]), dtype)
            big[:, :, :8, :8] = out
            out = big
        return [out]

    check_node("MaxUnpool", inputs, oracle=oracle, opset=22, **attrs)
    # with output_shape, ONNX Runtime scatters over the requested shape; the
    # specification's reference (and its backend case) over the inferred one
    if dtype == F32 and not with_shape:
        check_node("MaxUnpool", inputs, oracle=ort_oracle("MaxUnpool", **attrs), opset=22,
                   **attrs)


@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_maxroipool(dtype):
    rng = np.random.default_rng(22)
    x = rand(rng, (2, 3, 12, 14), F32)
    rois = np.array([[0, 1, 1, 8, 9], [1, 0, 0, 13, 11], [1, 3.4, 2.6, 5.5, 4.5],
                     [0, 10, 10, 11, 11], [1, -2, -3, 20, 30]], F32)
    attrs = dict(pooled_shape=[3, 4], spatial_scale=0.75)
    want = run_ort(node_model("MaxRoiPool", [x, rois], opset=1, **attrs), [x, rois])
    xt, rt = x.astype(dtype), rois.astype(dtype)
    check_node("MaxRoiPool", [xt, rt], oracle=lambda *a: [want[0].astype(dtype)], opset=22,
               tolerance=(0, 0) if dtype != F16 else _tol(dtype), **attrs)


# -- memory layouts, empty tensors, threads ------------------------------------------


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("LpPool", dict(kernel_shape=[2, 2])),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {}), ("GlobalLpPool", {}),
    ("LRN", dict(size=3)),
])
@pytest.mark.parametrize("dtype", [F32, F16, F64])
def test_layouts(op, attrs, dtype):
    x = rand(np.random.default_rng(23), (2, 3, 9, 10), dtype)
    model = node_model(op, [x], opset=22 if op != "LRN" else 13, **attrs)
    want, names, _ = run_ours(model, [x])
    assert names == [f"onnx_light_cpu::{op}"]
    for name, view in layouts(x):
        original = np.array(view)
        got, names, _ = run_ours(model, [view])
        assert names == [f"onnx_light_cpu::{op}"]
        assert same_bits(got[0], want[0]), name
        assert same_bits(np.array(view), original), f"{name}: input modified"


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", dict(kernel_shape=[2, 2])), ("AveragePool", dict(kernel_shape=[2, 2])),
    ("LpPool", dict(kernel_shape=[2, 2])), ("GlobalAveragePool", {}), ("GlobalMaxPool", {}),
    ("LRN", dict(size=3)),
])
def test_empty_batch(op, attrs):
    x = np.zeros((0, 3, 4, 5), F32)
    model = node_model(op, [x], opset=22 if op != "LRN" else 13, **attrs)
    got, names, _ = run_ours(model, [x])
    assert names == [f"onnx_light_cpu::{op}"]
    assert got[0].shape[:2] == (0, 3)


@pytest.fixture
def split_always(monkeypatch):
    """Every pooling kernel asks for two threads whatever the size."""
    from onnx_light_cpu.ops import pooling

    for cls in pooling.KERNELS["RegisterPoolingKernels"]:
        monkeypatch.setattr(cls, "min_work_per_thread", 1, raising=False)


@pytest.mark.parametrize("dtype", [F32, F64, F16, np.dtype(np.int8)])
def test_threads_bit_identical(split_always, dtype):
    """Planes split across two threads: the same bits as one thread."""
    rng = np.random.default_rng(24)
    x = rand(rng, (2, 5, 13, 14), dtype)
    cases = [("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), 2)]
    if dtype.kind == "f":
        cases += [("AveragePool", dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), 1),
                  ("LpPool", dict(kernel_shape=[2, 3], p=3), 1), ("LRN", dict(size=5), 1),
                  ("GlobalAveragePool", {}, 1), ("GlobalMaxPool", {}, 1),
                  ("GlobalLpPool", {}, 1)]
    for op, attrs, n_out in cases:
        model = node_model(op, [x], n_outputs=n_out, opset=22 if op != "LRN" else 13, **attrs)
        for level in available_simd_levels():
            with capped_simd_level(level):
                one, _, _ = run_ours(model, [x], threads=1)
                two, names, _ = run_ours(model, [x], threads=2)
            assert names == [f"onnx_light_cpu::{op}"]
            for a, b in zip(one, two):
                assert same_bits(a, b), f"{op} at {level}"
    if dtype.kind == "f":
        rois = np.array([[0, 1, 1, 8, 9], [1, 0, 0, 13, 11], [1, 3, 2, 5, 4]], dtype)
        model = node_model("MaxRoiPool", [x, rois], opset=22, pooled_shape=[2, 3])
        one, _, _ = run_ours(model, [x, rois], threads=1)
        two, _, _ = run_ours(model, [x, rois], threads=2)
        assert same_bits(one[0], two[0])


@pytest.mark.parametrize("shape", [(1, 3, 6, 70), (2, 2, 15, 33), (1, 1, 2, 2)], ids=str)
def test_two_by_two_at_stride_two(split_always, shape):
    """2 x 2 windows at stride 2 inside the plane take their own AVX-512 loop
    (olc_pooling_pairs), the same operations as the row path: AveragePool
    exactly (0 + (top + bottom) of the even column) + (top + bottom) of the
    odd one, divided by 4; MaxPool seeded by the first tap (a NaN there
    stays, later ones never win), whatever the thread count.  Odd heights
    and widths leave their last row or column out; 35 columns end in a
    masked vector."""
    rng = np.random.default_rng(26)
    x = rand(rng, shape, F32)
    x.reshape(-1)[::7] = -0.0
    x.reshape(-1)[3::11] = np.nan
    H, W = shape[2] // 2 * 2, shape[3] // 2 * 2
    a, b = x[..., 0:H:2, 0:W:2], x[..., 0:H:2, 1:W:2]
    c, d = x[..., 1:H:2, 0:W:2], x[..., 1:H:2, 1:W:2]
    average = ((F32.type(0) + (a + c)) + (b + d)) / F32.type(4)
    first = a
    for later in (b, c, d):  # maxps(later, first): first where either is NaN
        first = np.where(later > first, later, first)
    for op, want in (("AveragePool", average), ("MaxPool", first)):
        model = node_model(op, [x], opset=22, kernel_shape=[2, 2], strides=[2, 2])
        for level in available_simd_levels():
            with capped_simd_level(level):
                for threads in (1, 2):
                    got, names, _ = run_ours(model, [x], threads=threads)
                    assert names == [f"onnx_light_cpu::{op}"]
                    if op == "MaxPool" or level.startswith("avx512"):
                        assert same_bits(got[0], want), f"{op} at {level}, {threads} threads"
                    else:  # other levels sum in other orders
                        assert_close(got[0], want, f"{op} at {level}")


def test_the_split_is_asked(split_always):
    from onnx_light_cpu.ops import pooling

    x = rand(np.random.default_rng(25), (2, 5, 13, 14), F32)
    model = node_model("MaxPool", [x], opset=22, kernel_shape=[3, 3])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, 2)
    op = next(n for n in sess.rt_nodes_ if isinstance(n, pooling.MaxPool))
    assert op._num_threads(1000, op.min_work_per_thread) == 2


# -- bad input -----------------------------------------------------------------------


BAD = [
    ("MaxPool", (1, 2, 5, 5), dict(kernel_shape=[3]), ValueError, "kernel_shape"),
    ("MaxPool", (1, 2, 5, 5), dict(kernel_shape=[3, 3], pads=[1, 1]), ValueError, "pads"),
    ("MaxPool", (1, 2, 5, 5), dict(kernel_shape=[3, 3], pads=[-1, 0, 0, 0]), ValueError, "pads"),
    ("MaxPool", (1, 2, 5, 5), dict(kernel_shape=[3, 3], pads=[3, 0, 0, 0]), ValueError,
     "smaller than the kernel"),
    ("MaxPool", (1, 2, 2, 2), dict(kernel_shape=[3, 3]), ValueError, "larger than"),
    ("MaxPool", (1, 2, 5, 5), dict(kernel_shape=[3, 3], strides=[0, 1]), ValueError, "strides"),
    ("MaxPool", (1, 2, 5, 5), dict(kernel_shape=[3, 3], storage_order=2), ValueError,
     "storage_order"),
    ("MaxPool", (2, 5), dict(kernel_shape=[3]), ValueError, "rank"),
    ("MaxPool", (1, 1, 2, 2, 2, 2), dict(kernel_shape=[1, 1, 1, 1]), ValueError, "rank"),
    ("AveragePool", (1, 2, 5, 5), dict(kernel_shape=[3, 3], auto_pad="FOO"), ValueError,
     "auto_pad"),
    ("LpPool", (1, 2, 5, 5), dict(kernel_shape=[2, 2], p=0), ValueError, "p"),
    ("LRN", (1, 2, 5, 5), dict(size=0), ValueError, "size"),
    ("GlobalAveragePool", (3,), {}, ValueError, "rank"),
]


@pytest.mark.parametrize("op, shape, attrs, error, match", BAD)
def test_bad_input(op, shape, attrs, error, match):
    x = np.ones(shape, F32)
    model = node_model(op, [x], opset=22 if op != "LRN" else 13, **attrs)
    with pytest.raises(error, match=match) as info:
        run_ours(model, [x])
    assert op in str(info.value)


def test_bad_types():
    x = np.ones((1, 2, 5, 5), np.int32)
    with pytest.raises(TypeError, match="MaxPool"):
        run_ours(node_model("MaxPool", [x], opset=22, kernel_shape=[2, 2]), [x])
    x8 = np.ones((1, 2, 5, 5), np.int8)
    with pytest.raises(TypeError, match="AveragePool"):
        run_ours(node_model("AveragePool", [x8], opset=22, kernel_shape=[2, 2]), [x8])


def test_maxunpool_bad_input():
    y = np.ones((1, 1, 2, 2), F32)
    attrs = dict(kernel_shape=[2, 2], strides=[2, 2])
    for idx, match in [(np.array([[[[0, 1], [2, 16]]]], np.int64), "outside"),
                       (np.array([[[[0, 1], [2, -1]]]], np.int64), "outside"),
                       (np.zeros((1, 1, 2, 3), np.int64), "shape")]:
        with pytest.raises(ValueError, match=match):
            run_ours(node_model("MaxUnpool", [y, idx], opset=22, **attrs), [y, idx])
    idx = np.zeros((1, 1, 2, 2), np.int64)
    small = np.array([1, 1, 3, 3], np.int64)
    with pytest.raises(ValueError, match="MaxUnpool"):
        run_ours(node_model("MaxUnpool", [y, idx, small], opset=22, **attrs), [y, idx, small])


def test_maxroipool_bad_input():
    x = np.ones((1, 2, 5, 5), F32)
    for rois, match in [(np.array([[1, 0, 0, 2, 2]], F32), "batch"),
                        (np.array([[0, np.nan, 0, 2, 2]], F32), "finite"),
                        (np.array([[0, 0, 2, 2]], F32), "5")]:
        with pytest.raises(ValueError, match=match):
            run_ours(node_model("MaxRoiPool", [x, rois], opset=22, pooled_shape=[2, 2]),
                     [x, rois])


def test_element_types_of_the_inventory():
    """MaxPool registers int8 and uint8; the others the four float types."""
    kinds = {k.op_type: set(k.element_types) for k in olc.registered_kernels()
             if k.op_type in ("MaxPool", "AveragePool", "LRN")}
    assert {"tensor(int8)", "tensor(uint8)", "tensor(bfloat16)"} <= kinds["MaxPool"]
    assert "tensor(int8)" not in kinds["AveragePool"]
    assert TensorProto.FLOAT  # the module's constant is used
