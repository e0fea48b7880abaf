"""The normalization kernels against the built-ins, float64 NumPy oracles
and ONNX Runtime (SimplifiedLayerNormalization)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import (
    THREAD_COUNTS,
    assert_close,
    check_node,
    node_model,
    run_ours,
    same_bits,
    thread_pairs,
)

FLOATS = [np.float32, np.float16, bfloat16, np.float64]
# (rtol, atol) per output dtype: outputs near zero come out of a
# cancellation (x - mean, or x * s + b), so an absolute part is needed.
TOL = {
    np.dtype(np.float64): (1e-12, 1e-12),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float16): (2e-3, 2e-3),
    np.dtype(bfloat16): (1.6e-2, 1.6e-2),
}


def _tol(dtype, acc64: bool = True):
    """Tolerance of an output of ``dtype`` computed in float64 (acc64) or float32."""
    dtype = np.dtype(dtype)
    if not acc64 and dtype == np.float64:
        return TOL[np.dtype(np.float32)]
    return TOL[dtype]


def _rand(rng, shape, dtype, low=None):
    x = rng.standard_normal(size=shape)
    if low is not None:
        x = np.abs(x) + low
    return x.astype(dtype)


def _f64(a):
    return None if a is None else np.asarray(a).astype(np.float64)


def _eps32(eps):
    return float(np.float32(eps))


# -- float64 oracles ---------------------------------------------------------


def layer_norm64(x, s, b, axis=-1, eps=1e-5):
    axis = axis % x.ndim
    red = tuple(range(axis, x.ndim))
    xd = _f64(x)
    mean = xd.mean(axis=red, keepdims=True)
    inv = 1.0 / np.sqrt(((xd - mean) ** 2).mean(axis=red, keepdims=True) + _eps32(eps))
    y = (xd - mean) * inv * _f64(s)
    if b is not None:
        y = y + _f64(b)
    return y, mean, inv


def rms64(x, s, axis=-1, eps=1e-5):
    axis = axis % x.ndim
    xd = _f64(x)
    inv = 1.0 / np.sqrt((xd * xd).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
                        + _eps32(eps))
    return xd * inv * _f64(s), inv


# -- LayerNormalization --------------------------------------------------------

CASES = [((3, 37), -1), ((2, 3, 5, 7), 1), ((2, 3, 5, 7), -2), ((4, 1000), 1), ((2, 3, 40), 0),
         ((5, 1), -1), ((64, 1024), -1), ((0, 16), -1), ((3, 17), -1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_layer_normalization_builtin(dtype):
    rng = np.random.default_rng(0)
    for shape, axis in CASES:
        x = _rand(rng, shape, dtype)
        sh = shape[axis:]
        s, b = _rand(rng, sh, dtype), _rand(rng, sh, dtype)
        outs = 3 if dtype == np.float32 else 1  # the built-in types Mean as X
        check_node("LayerNormalization", [x, s, b], axis=axis, n_outputs=outs,
                   tolerance=TOL[x.dtype])
        check_node("LayerNormalization", [x, s], axis=axis, epsilon=1e-3, tolerance=TOL[x.dtype])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_layer_normalization_float64_oracle(dtype):
    rng = np.random.default_rng(1)
    for (shape, axis), bias in itertools.product(CASES[:6], (True, False)):
        x = _rand(rng, shape, dtype)
        sh = shape[axis:]
        s = _rand(rng, sh, dtype)
        b = _rand(rng, sh, dtype) if bias else None
        inputs = [x, s] + ([b] if bias else [])

        def oracle(*_):
            y, mean, inv = layer_norm64(x, s, b, axis)
            return [y.astype(dtype), mean.astype(np.float32), inv.astype(np.float32)]

        check_node("LayerNormalization", inputs, oracle=oracle, axis=axis, n_outputs=3,
                   tolerance=_tol(dtype))


def test_layer_normalization_scale_broadcast_and_optional_outputs():
    rng = np.random.default_rng(2)
    x = _rand(rng, (4, 6, 8), np.float32)
    s, b = _rand(rng, (1, 8), np.float32), _rand(rng, (8,), np.float32)
    # Scale of shape [1, 8] broadcasts over the normalized [6, 8].
    check_node("LayerNormalization", [x, s, b], axis=1,
               oracle=lambda *_: [layer_norm64(x, s, b, 1)[0].astype(np.float32)],
               tolerance=TOL[np.dtype(np.float32)])
    # Only InvStdDev requested, Mean skipped with an empty name.
    model = node_model("LayerNormalization", [x, s, b], n_outputs=3, axis=-1)
    model.graph.node[0].output[1] = ""
    del model.graph.output[1]
    (y, inv), names, _ = run_ours(model, [x, s, b])
    want = layer_norm64(x, s, b, -1)
    assert_close(inv, want[2].astype(np.float32), "inv", TOL[np.dtype(np.float32)])


# -- RMSNormalization -----------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_rms_normalization_builtin(dtype):
    rng = np.random.default_rng(3)
    for shape, axis in CASES:
        x = _rand(rng, shape, dtype)
        check_node("RMSNormalization", [x, _rand(rng, shape[axis:], dtype)], axis=axis, opset=23,
                   tolerance=TOL[x.dtype])


@pytest.mark.parametrize("xt,st", list(itertools.product(FLOATS, FLOATS)),
                         ids=lambda d: np.dtype(d).name)
def test_rms_normalization_type_pairs(xt, st):
    rng = np.random.default_rng(4)
    for (shape, axis), stash in itertools.product([((3, 37), -1), ((2, 3, 5), 1)], (1, 11)):
        x, s = _rand(rng, shape, xt), _rand(rng, shape[axis:], st)
        acc64 = stash == 11 or np.dtype(xt) == np.float64
        check_node("RMSNormalization", [x, s], axis=axis, stash_type=stash, opset=23,
                   oracle=lambda *_: [rms64(x, s, axis)[0].astype(st)], tolerance=_tol(st, acc64))


# -- SimplifiedLayerNormalization ------------------------------------------------


def _sln_model(x_type, s_type, x_rank, s_rank, inv=True, **attrs):
    outputs = ["Y", "inv"] if inv else ["Y"]
    node = oh.make_node("SimplifiedLayerNormalization", ["X", "S"], outputs, **attrs)
    stash = attrs.get("stash_type", 1)
    graph = oh.make_graph(
        [node], "sln",
        [oh.make_tensor_value_info("X", x_type, [None] * x_rank),
         oh.make_tensor_value_info("S", s_type, [None] * s_rank)],
        [oh.make_tensor_value_info("Y", s_type, [None] * x_rank)]
        + ([oh.make_tensor_value_info("inv", TensorProto.DOUBLE if stash == 11 else
                                      TensorProto.FLOAT, [None] * x_rank)] if inv else []))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)], ir_version=10)


def _etype(dtype) -> int:
    return oh.np_dtype_to_tensor_dtype(np.dtype(dtype))


def _run_sln_ours(model, x, s, threads=1):
    """Global registration: the built-in evaluator cannot even construct a
    model using SimplifiedLayerNormalization."""
    olc.register_kernels_global()
    try:
        sess = ReferenceEvaluator(model)
    finally:
        olc.unregister_kernels_global()
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    out = sess.run(None, {"X": x, "S": s})
    assert "onnx_light_cpu::SimplifiedLayerNormalization" in olc.used_kernel_names(sess)
    return out, olc.used_kernel_paths(sess)


def sln64(x, s, axis=-1, eps=1e-5):
    """Scale broadcast over the whole of X; inv of shape X[:axis] + [1] * ..."""
    axis = axis % x.ndim
    xd = _f64(x)
    inv = 1.0 / np.sqrt((xd * xd).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
                        + _eps32(eps))
    return xd * inv * _f64(s), inv


def _check_sln(x, s, axis=-1, stash=1, eps=None, inv=True):
    attrs = {"axis": axis, "stash_type": stash}
    if eps is not None:
        attrs["epsilon"] = eps
    model = _sln_model(_etype(x.dtype), _etype(s.dtype), x.ndim, s.ndim, inv=inv, **attrs)
    originals = x.copy(), s.copy()
    y64, inv64 = sln64(x, s, axis, 1e-5 if eps is None else eps)
    stat = np.float64 if stash == 11 else np.float32
    acc64 = stash == 11
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                out, _ = _run_sln_ours(model, x, s, threads)
                assert_close(out[0], y64.astype(s.dtype), f"Y at {level}", _tol(s.dtype, acc64))
                if inv:
                    assert_close(out[1], inv64.astype(stat), f"inv at {level}", _tol(stat, acc64))
                results.append(out)
            for a, b in thread_pairs(results):
                assert same_bits(a, b), "thread count changed the result"
    assert same_bits(x, originals[0]) and same_bits(s, originals[1])


@pytest.mark.parametrize("xt,st", list(itertools.product(FLOATS, FLOATS)),
                         ids=lambda d: np.dtype(d).name)
def test_simplified_layer_normalization_type_pairs(xt, st):
    rng = np.random.default_rng(5)
    for stash in (1, 11):
        _check_sln(_rand(rng, (3, 37), xt), _rand(rng, (37,), st), stash=stash)
        _check_sln(_rand(rng, (2, 3, 16), xt), _rand(rng, (3, 16), st), stash=stash, axis=1)


@pytest.mark.parametrize("x_shape,s_shape,axis", [
    ((2, 3, 8), (8,), -1),
    ((2, 3, 8), (3, 8), -1),        # a scale row per middle index
    ((2, 3, 8), (2, 1, 8), -1),     # per batch, shared over the middle
    ((2, 3, 8), (2, 3, 8), -1),     # one scale per element
    ((2, 3, 8), (3, 1), -1),        # broadcast inside the normalized suffix
    ((2, 3, 8), (1, 8), 1),
    ((2, 3, 8), (3, 8), 1),
    ((2, 3, 8), (2, 3, 1), 1),
    ((4, 5), (1,), 0),
    ((7,), (7,), 0),
    ((0, 3, 8), (8,), -1),          # empty outer rows
    ((64, 1001), (1001,), -1),      # two threads, odd width
])
def test_simplified_layer_normalization_broadcast(x_shape, s_shape, axis):
    rng = np.random.default_rng(6)
    for xt, st in ((np.float32, np.float32), (np.float16, np.float16), (np.float32, np.float16)):
        _check_sln(_rand(rng, x_shape, xt), _rand(rng, s_shape, st), axis=axis)


def test_simplified_layer_normalization_epsilon_any_ieee():
    rng = np.random.default_rng(7)
    x, s = _rand(rng, (4, 9), np.float32, low=0.5), _rand(rng, (9,), np.float32)
    for eps in (0.0, -1e-3, 1e-2):
        _check_sln(x, s, eps=eps)
    # Non-finite epsilon: the result follows IEEE arithmetic.
    for eps in (float("inf"), float("nan")):
        model = _sln_model(TensorProto.FLOAT, TensorProto.FLOAT, 2, 1, epsilon=eps)
        (y, inv), _ = _run_sln_ours(model, x, s)
        with np.errstate(all="ignore"):
            want = sln64(x, s, -1, eps)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(want[0]))
        np.testing.assert_array_equal(inv.astype(np.float64), want[1].astype(np.float32))


def test_simplified_layer_normalization_without_inv_and_paths():
    rng = np.random.default_rng(8)
    x, s = _rand(rng, (5, 64), np.float16), _rand(rng, (64,), np.float16)
    model = _sln_model(TensorProto.FLOAT16, TensorProto.FLOAT16, 2, 1, inv=False)
    (y,), paths = _run_sln_ours(model, x, s)
    assert_close(y, sln64(x, s)[0].astype(np.float16), "Y", TOL[np.dtype(np.float16)])
    assert paths[0].startswith("simplifiedlayernormalization_float16_")


ORT_TYPES = [np.float32, np.float16, np.float64]


@pytest.mark.parametrize("xt,st", list(itertools.product(ORT_TYPES, ORT_TYPES)),
                         ids=lambda d: np.dtype(d).name)
def test_simplified_layer_normalization_against_onnxruntime(xt, st):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(9)
    for shape, s_shape, axis in (((2, 3, 33), (33,), -1), ((4, 128), (128,), -1),
                                 ((2, 3, 8), (3, 8), 1)):
        x, s = _rand(rng, shape, xt), _rand(rng, s_shape, st)
        model = _sln_model(_etype(xt), _etype(st), x.ndim, s.ndim, axis=axis)
        try:
            sess = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT's kernel covers some type pairs only
            pytest.skip(f"onnxruntime has no kernel for {np.dtype(xt)}/{np.dtype(st)}: "
                        f"{str(exc).splitlines()[0][:120]}")
        y_ort, inv_ort = sess.run(None, {"X": x, "S": s})
        (y, inv), _ = _run_sln_ours(model, x, s)
        assert_close(y, y_ort.astype(y.dtype), "Y vs ORT", _tol(st, False))
        assert_close(inv, inv_ort.reshape(inv.shape), "inv vs ORT", TOL[np.dtype(np.float32)])


def test_simplified_layer_normalization_bfloat16_against_onnxruntime():
    """ORT's numpy API has no bfloat16: its float32 kernel runs on the
    bfloat16 inputs widened, and ours must round that result once."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(10)
    x, s = _rand(rng, (6, 96), bfloat16), _rand(rng, (96,), bfloat16)
    f32 = _sln_model(TensorProto.FLOAT, TensorProto.FLOAT, 2, 1)
    sess = ort.InferenceSession(f32.SerializeToString(), providers=["CPUExecutionProvider"])
    y_ort, inv_ort = sess.run(None, {"X": x.astype(np.float32), "S": s.astype(np.float32)})
    model = _sln_model(TensorProto.BFLOAT16, TensorProto.BFLOAT16, 2, 1)
    (y, inv), _ = _run_sln_ours(model, x, s)
    assert_close(y, y_ort.astype(bfloat16), "Y vs ORT", TOL[np.dtype(bfloat16)])
    assert_close(inv, inv_ort, "inv vs ORT", TOL[np.dtype(np.float32)])


def test_simplified_layer_normalization_builtin_fails_clearly():
    x = np.ones((2, 4), dtype=np.float32)
    model = _sln_model(TensorProto.FLOAT, TensorProto.FLOAT, 2, 1)
    with pytest.raises(Exception, match="SimplifiedLayerNormalization"):
        ReferenceEvaluator(model).run(None, {"X": x, "S": x[0]})


@pytest.mark.parametrize("x_shape,s_shape,attrs,exc,match", [
    ((2, 3), (4,), {}, ValueError, "does not broadcast"),
    ((2, 3), (2, 2, 3), {}, ValueError, "does not broadcast"),   # would expand X
    ((2, 3), (1, 1, 3), {}, ValueError, "does not broadcast"),   # would raise its rank
    ((2, 3), (3,), {"axis": 2}, ValueError, "no axis"),
    ((2, 0), (1,), {}, ValueError, "empty normalized suffix"),
    ((2, 3), (3,), {"stash_type": 10}, ValueError, "stash_type"),
])
def test_simplified_layer_normalization_bad_input(x_shape, s_shape, attrs, exc, match):
    model = _sln_model(TensorProto.FLOAT, TensorProto.FLOAT, len(x_shape), len(s_shape), **attrs)
    x, s = np.ones(x_shape, np.float32), np.ones(s_shape, np.float32)
    with pytest.raises(exc, match=match):
        _run_sln_ours(model, x, s)


def test_simplified_layer_normalization_rank0_and_int():
    x = np.ones((), np.float32)
    with pytest.raises(ValueError, match="rank"):
        _run_sln_ours(_sln_model(TensorProto.FLOAT, TensorProto.FLOAT, 0, 0), x, x)
    xi = np.ones((2, 3), np.int32)
    with pytest.raises(TypeError, match="element type int32"):
        _run_sln_ours(_sln_model(TensorProto.INT32, TensorProto.FLOAT, 2, 1), xi,
                      np.ones(3, np.float32))


# -- InstanceNormalization, GroupNormalization, BatchNormalization ----------------


def _per_channel(v, x):
    return _f64(v).reshape((-1,) + (1,) * (x.ndim - 2))


def instance64(x, s, b, eps=1e-5):
    xd = _f64(x)
    red = tuple(range(2, x.ndim))
    mean = xd.mean(axis=red, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=red, keepdims=True)
    return (xd - mean) / np.sqrt(var + _eps32(eps)) * _per_channel(s, x) + _per_channel(b, x)


def group64(x, s, b, groups, eps=1e-5):
    n, c = x.shape[:2]
    xd = _f64(x).reshape(n, groups, -1)
    mean = xd.mean(axis=2, keepdims=True)
    var = ((xd - mean) ** 2).mean(axis=2, keepdims=True)
    xn = ((xd - mean) / np.sqrt(var + _eps32(eps))).reshape(x.shape)
    if s.size != c:
        s, b = np.repeat(s, c // groups), np.repeat(b, c // groups)
    return xn * _per_channel(s, x) + _per_channel(b, x)


def batch64(x, s, b, mean, var, eps=1e-5):
    return ((_f64(x) - _per_channel(mean, x)) / np.sqrt(_per_channel(var, x) + _eps32(eps))
            * _per_channel(s, x) + _per_channel(b, x))


CHANNEL_SHAPES = [(2, 6, 5, 7), (1, 4, 33), (3, 6), (2, 6, 0), (0, 6, 4), (2, 12, 40, 40)]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_instance_normalization(dtype):
    rng = np.random.default_rng(11)
    for shape in CHANNEL_SHAPES:
        x = _rand(rng, shape, dtype)
        s, b = _rand(rng, shape[1], dtype), _rand(rng, shape[1], dtype)
        if dtype in (np.float32, np.float64) and shape[2:] and math.prod(shape[2:]):
            check_node("InstanceNormalization", [x, s, b], tolerance=TOL[x.dtype])
        check_node("InstanceNormalization", [x, s, b], epsilon=1e-2, tolerance=_tol(dtype),
                   oracle=lambda *_: [instance64(x, s, b, 1e-2).astype(dtype)])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization(dtype, opset):
    rng = np.random.default_rng(12)
    for shape, groups in ((2, 6, 5, 7), 3), ((1, 4, 33), 4), ((3, 6), 2), ((2, 12, 40, 40), 4), \
            ((1, 8, 3), 1):
        x = _rand(rng, shape, dtype)
        per = groups if opset == 18 else shape[1]
        s, b = _rand(rng, per, dtype), _rand(rng, per, dtype)
        if dtype == np.float32:
            check_node("GroupNormalization", [x, s, b], num_groups=groups, opset=opset,
                       tolerance=TOL[x.dtype])
        check_node("GroupNormalization", [x, s, b], num_groups=groups, opset=opset,
                   tolerance=_tol(dtype),
                   oracle=lambda *_: [group64(x, s, b, groups).astype(dtype)])
        if opset == 21:
            check_node("GroupNormalization", [x, s, b], num_groups=groups, opset=opset,
                       stash_type=11, tolerance=_tol(dtype),
                       oracle=lambda *_: [group64(x, s, b, groups).astype(dtype)])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_batch_normalization_inference(dtype):
    rng = np.random.default_rng(13)
    for shape in CHANNEL_SHAPES:
        c = shape[1]
        x = _rand(rng, shape, dtype)
        s, b, m = (_rand(rng, c, dtype) for _ in range(3))
        v = _rand(rng, c, dtype, low=0.1)
        for opset in (7, 9, 14, 15):
            if dtype == bfloat16 and opset < 14:
                continue
            if dtype in (np.float32, np.float64) and opset >= 14:
                check_node("BatchNormalization", [x, s, b, m, v], opset=opset,
                           tolerance=TOL[x.dtype])
            check_node("BatchNormalization", [x, s, b, m, v], opset=opset, epsilon=1e-3,
                       tolerance=_tol(dtype),
                       oracle=lambda *_: [batch64(x, s, b, m, v, 1e-3).astype(dtype)])
    # Opset 15: scale/bias and mean/var of other types than X.
    x = _rand(rng, (2, 3, 4), dtype)
    s, b = _rand(rng, 3, np.float32), _rand(rng, 3, np.float32)
    m, v = _rand(rng, 3, np.float64), _rand(rng, 3, np.float64, low=0.1)
    check_node("BatchNormalization", [x, s, b, m, v], opset=15, tolerance=_tol(dtype),
               oracle=lambda *_: [batch64(x, s, b, m, v).astype(dtype)])


@pytest.mark.parametrize("opset", [6, 7, 9])
def test_batch_normalization_old_opsets_training_outputs(opset):
    rng = np.random.default_rng(20)
    x = _rand(rng, (3, 4, 5, 6), np.float32)
    s, b, m = (_rand(rng, 4, np.float32) for _ in range(3))
    v = _rand(rng, 4, np.float32, low=0.1)
    mom = _eps32(0.9)
    red = (0, 2, 3)
    bm, bv = _f64(x).mean(axis=red), _f64(x).var(axis=red)
    want = [batch64(x, s, b, bm, bv).astype(np.float32),
            (_f64(m) * mom + bm * (1 - mom)).astype(np.float32),
            (_f64(v) * mom + bv * (1 - mom)).astype(np.float32),
            bm.astype(np.float32), bv.astype(np.float32)]
    attrs = {"is_test": 0} if opset == 6 else {}
    check_node("BatchNormalization", [x, s, b, m, v], opset=opset, n_outputs=5,
               oracle=lambda *_: want, tolerance=TOL[x.dtype], **attrs)


def test_batch_normalization_old_opsets_is_test():
    rng = np.random.default_rng(14)
    x = _rand(rng, (2, 3, 4, 5), np.float32)
    s, b, m = (_rand(rng, 3, np.float32) for _ in range(3))
    v = _rand(rng, 3, np.float32, low=0.1)
    want = [batch64(x, s, b, m, v).astype(np.float32)]
    check_node("BatchNormalization", [x, s, b, m, v], opset=6, is_test=1, oracle=lambda *_: want,
               tolerance=TOL[x.dtype])
    check_node("BatchNormalization", [x, s, b, m, v], opset=7, spatial=1, oracle=lambda *_: want,
               tolerance=TOL[x.dtype])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_batch_normalization_training(dtype):
    rng = np.random.default_rng(15)
    for shape in ((2, 6, 5, 7), (3, 4, 33), (4, 6), (2, 8, 30, 30)):
        c = shape[1]
        x = _rand(rng, shape, dtype)
        s, b, m = (_rand(rng, c, dtype) for _ in range(3))
        v = _rand(rng, c, dtype, low=0.1)

        mom = _eps32(0.8)  # a FLOAT attribute

        def oracle(*_):
            red = (0,) + tuple(range(2, x.ndim))
            bm, bv = _f64(x).mean(axis=red), _f64(x).var(axis=red)
            return [batch64(x, s, b, bm, bv).astype(dtype),
                    (_f64(m) * mom + bm * (1 - mom)).astype(dtype),
                    (_f64(v) * mom + bv * (1 - mom)).astype(dtype)]

        if dtype in (np.float32, np.float64):
            check_node("BatchNormalization", [x, s, b, m, v], opset=15, training_mode=1,
                       n_outputs=3, tolerance=TOL[x.dtype])
        check_node("BatchNormalization", [x, s, b, m, v], opset=15, training_mode=1, momentum=0.8,
                   n_outputs=3, oracle=oracle, tolerance=_tol(dtype))


# -- LpNormalization, MeanVarianceNormalization -----------------------------------


def lp64(x, axis, p):
    xd = _f64(x)
    norm = (np.abs(xd).sum(axis=axis, keepdims=True) if p == 1
            else np.sqrt((xd * xd).sum(axis=axis, keepdims=True)))
    with np.errstate(all="ignore"):
        return np.where(norm == 0, 0.0, xd / norm)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_lp_normalization(dtype):
    rng = np.random.default_rng(16)
    x = _rand(rng, (2, 6, 5, 7), dtype)
    x[0, 1, 2, :] = 0  # a zero row on the last axis
    x[1, :, 3, 4] = 0  # and on axis 1
    for axis, p in itertools.product((-1, 0, 1, 3), (1, 2)):
        check_node("LpNormalization", [x], axis=axis, p=p, tolerance=_tol(dtype),
                   oracle=lambda *_: [lp64(x, axis, p).astype(dtype)])
        if p == 2 and dtype in (np.float32, np.float64):
            check_node("LpNormalization", [x], axis=axis, p=p, tolerance=TOL[x.dtype])
    big = _rand(rng, (64, 1024), dtype)
    check_node("LpNormalization", [big], tolerance=_tol(dtype),
               oracle=lambda *_: [lp64(big, -1, 2).astype(dtype)])
    check_node("LpNormalization", [np.zeros((0, 3), dtype)], oracle=lambda x: [x.copy()])


def mvn64(x, axes):
    xd = _f64(x)
    mean = xd.mean(axis=tuple(axes), keepdims=True)
    std = np.sqrt(((xd - mean) ** 2).mean(axis=tuple(axes), keepdims=True))
    return (xd - mean) / (std + float(np.float32(1e-9)))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_mean_variance_normalization(dtype):
    rng = np.random.default_rng(17)
    x = _rand(rng, (2, 6, 5, 7), dtype)
    for axes in ([0, 2, 3], [2, 3], [1], [0, 1, 2, 3], [3], [-1, -2]):
        if dtype == np.float32:
            check_node("MeanVarianceNormalization", [x], axes=axes, tolerance=TOL[x.dtype])
        check_node("MeanVarianceNormalization", [x], axes=axes, tolerance=_tol(dtype),
                   oracle=lambda *_: [mvn64(x, [a % 4 for a in axes]).astype(dtype)])
    check_node("MeanVarianceNormalization", [x], tolerance=_tol(dtype), opset=9,
               oracle=lambda *_: [mvn64(x, [0, 2, 3]).astype(dtype)])


# -- bad input --------------------------------------------------------------------


def _raises(op, inputs, exc, match, n_outputs=1, **attrs):
    model = node_model(op, inputs, n_outputs=n_outputs, **attrs)
    with pytest.raises(exc, match=match):
        run_ours(model, inputs)


def test_bad_inputs():
    f = np.ones((2, 3, 4), np.float32)
    c3 = np.ones(3, np.float32)
    _raises("LayerNormalization", [f, np.ones(5, np.float32)], ValueError,
            "LayerNormalization: input 1 .*does not broadcast")
    _raises("LayerNormalization", [f, np.ones(4, np.float64)], TypeError, "input 1 .*float64")
    _raises("LayerNormalization", [f, np.ones(4, np.float32)], ValueError, "no axis", axis=3)
    _raises("LayerNormalization", [f.astype(np.int32), np.ones(4, np.int32)], TypeError,
            "input 0 .*int32")
    _raises("RMSNormalization", [f, np.ones(3, np.float32)], ValueError, "does not broadcast",
            opset=23)
    _raises("LayerNormalization", [f, np.ones(4, np.float32)], ValueError,
            "LayerNormalization: attribute stash_type must be one of 1, got 11", stash_type=11)
    _raises("RMSNormalization", [f, np.ones(4, np.float32)], ValueError,
            "attribute stash_type must be one of 1, 11, got 16", opset=23, stash_type=16)
    _raises("GroupNormalization", [f, c3, c3], ValueError,
            "attribute stash_type must be one of 1, 11, got 10", num_groups=3, opset=21,
            stash_type=10)
    _raises("InstanceNormalization", [f, np.ones(4, np.float32), c3], ValueError,
            "input 1 .*scale.*expected \\(3,\\)")
    _raises("InstanceNormalization", [np.ones(3, np.float32), c3, c3], ValueError, "rank >= 2")
    _raises("GroupNormalization", [f, c3, c3], ValueError, "num_groups 2 does not divide",
            num_groups=2, opset=21)
    _raises("GroupNormalization", [f, np.ones(2, np.float32), c3], ValueError, "input 1",
            num_groups=3, opset=21)
    _raises("BatchNormalization", [f, c3, c3, c3, np.ones(2, np.float32)], ValueError,
            "input 4 .*input_var")
    _raises("BatchNormalization", [f, c3, c3.astype(np.float64), c3, c3], TypeError, "input 2",
            opset=15)
    _raises("LpNormalization", [f], ValueError, "attribute p must be one of 1, 2, got 3", p=3)
    _raises("LpNormalization", [f], ValueError, "no axis", axis=-4)
    _raises("MeanVarianceNormalization", [f], ValueError, "no axis", axes=[0, 5])


def test_outputs_do_not_alias_inputs_and_reuse():
    rng = np.random.default_rng(18)
    x = _rand(rng, (256, 1024), np.float32)
    s = _rand(rng, 1024, np.float32)
    model = node_model("LayerNormalization", [x, s])
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    y1 = sess.run(None, {"x0": x, "x1": s})[0]
    y2 = sess.run(None, {"x0": x, "x1": s})[0]
    assert not np.shares_memory(y1, y2) and not np.shares_memory(y1, x)
    np.testing.assert_array_equal(y1, y2)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_special_values_and_unaligned(dtype):
    """A NaN or infinity poisons its own row only; unaligned starts and
    widths off the vector width give the same results."""
    from differential import unaligned

    rng = np.random.default_rng(19)
    x = _rand(rng, (6, 45), dtype)
    x[1, 3], x[2, 44], x[3, :] = np.nan, np.inf, 0
    s, b = _rand(rng, 45, dtype), _rand(rng, 45, dtype)
    with np.errstate(all="ignore"):
        ln = layer_norm64(x, s, b)
        rms = rms64(x, s)
    check_node("LayerNormalization", [unaligned(x), unaligned(s), unaligned(b)],
               tolerance=_tol(dtype), oracle=lambda *_: [ln[0].astype(dtype)])
    check_node("RMSNormalization", [unaligned(x), s], opset=23, tolerance=_tol(dtype),
               oracle=lambda *_: [rms[0].astype(dtype)])
    for width in (1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 65):
        xw = _rand(rng, (3, width), dtype)
        sw = _rand(rng, width, dtype)
        check_node("RMSNormalization", [xw, sw], opset=23, tolerance=_tol(dtype),
                   oracle=lambda *_: [rms64(xw, sw)[0].astype(dtype)])
        check_node("LpNormalization", [xw], p=1, tolerance=_tol(dtype),
                   oracle=lambda *_: [lp64(xw, -1, 1).astype(dtype)])


def test_two_threads_give_the_same_bits(monkeypatch):
    """Rows split over two threads (threshold lowered so moderate sizes split):
    check_node compares 1 and 2 threads bit for bit."""
    from onnx_light_cpu.ops import normalization as nm

    monkeypatch.setattr(nm._Norm, "min_work_per_thread", 64)
    rng = np.random.default_rng(21)
    for dtype in FLOATS:
        tol = _tol(dtype)
        x = _rand(rng, (4, 8, 9, 11), dtype)
        s8, b8 = _rand(rng, 8, dtype), _rand(rng, 8, dtype)
        s11, b11 = _rand(rng, 11, dtype), _rand(rng, 11, dtype)
        m8, v8 = _rand(rng, 8, dtype), _rand(rng, 8, dtype, low=0.1)
        check_node("LayerNormalization", [x, s11, b11], tolerance=tol,
                   oracle=lambda *_: [layer_norm64(x, s11, b11)[0].astype(dtype)])
        check_node("RMSNormalization", [x, s11], opset=23, tolerance=tol,
                   oracle=lambda *_: [rms64(x, s11)[0].astype(dtype)])
        check_node("InstanceNormalization", [x, s8, b8], tolerance=tol,
                   oracle=lambda *_: [instance64(x, s8, b8).astype(dtype)])
        check_node("GroupNormalization", [x, s8, b8], num_groups=4, opset=21, tolerance=tol,
                   oracle=lambda *_: [group64(x, s8, b8, 4).astype(dtype)])
        check_node("BatchNormalization", [x, s8, b8, m8, v8], tolerance=tol,
                   oracle=lambda *_: [batch64(x, s8, b8, m8, v8).astype(dtype)])
        check_node("LpNormalization", [x], tolerance=tol,
                   oracle=lambda *_: [lp64(x, -1, 2).astype(dtype)])
        check_node("MeanVarianceNormalization", [x], axes=[2, 3], tolerance=tol,
                   oracle=lambda *_: [mvn64(x, [2, 3]).astype(dtype)])
        _check_sln(_rand(rng, (16, 40), dtype), _rand(rng, 40, np.float32))
