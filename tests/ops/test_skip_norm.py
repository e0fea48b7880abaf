"""com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization:
differential tests against ONNX Runtime (float32, float16, and bfloat16 fed
through OrtValue), NAIVE against OPTIMIZED, every optional input and output
slot, skip broadcasting, row sizes off the vector width, empty outer
dimensions, at every SIMD level and 1/2 threads; bad input."""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, same_bits, unaligned

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
LN, RMS = "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"
DTYPES = (np.float32, np.float16, bfloat16)
OUT_NAMES = ("y", "mean", "inv_std_var", "sum")

# (rtol, atol) per dtype: y is O(1); float16/bfloat16 may differ from ORT by
# one rounding of the output (2^-10 / 2^-7 relative), float32 by the
# reduction order and the variance formula.
TOL = {
    np.dtype(np.float32): (2e-5, 2e-5),
    np.dtype(np.float16): (2e-3, 2e-3),
    np.dtype(bfloat16): (1.6e-2, 1.6e-2),
}


def onnx_type(dtype) -> int:
    return oh.np_dtype_to_tensor_dtype(np.dtype(dtype))


def skip_model(op: str, dtype, has_beta: bool, has_bias: bool, wanted: tuple[bool, ...],
               epsilon: float | None = None, trailing: bool = False) -> onnx.ModelProto:
    """A one-node model; absent optional inputs and unrequested outputs get
    empty names, trailing ones are dropped unless ``trailing``."""
    inputs = ["x", "skip", "gamma"] + (["beta" if has_beta else ""] if op == LN else [])
    inputs.append("bias" if has_bias else "")
    outputs = [n if w else "" for n, w in zip(OUT_NAMES, wanted)]
    while not trailing and inputs[-1] == "":
        inputs.pop()
    while not trailing and outputs[-1] == "":
        outputs.pop()
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    node = oh.make_node(op, inputs, outputs, domain=MS, **attrs)
    t = onnx_type(dtype)
    out_types = {"y": t, "mean": TensorProto.FLOAT, "inv_std_var": TensorProto.FLOAT, "sum": t}
    graph = oh.make_graph(
        [node], "skip_norm",
        [oh.make_tensor_value_info(n, t, None) for n in inputs if n],
        [oh.make_tensor_value_info(n, out_types[n], None) for n in outputs if n],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                         ir_version=10)


def _ours_only(op, dtype, feeds, model, what, originals=None):
    """Ours (both policies, every level and thread count) against NAIVE."""
    want, _ = run_ours(model, feeds, naive=True)
    for level in available_simd_levels():
        with capped_simd_level(level):
            for threads in THREAD_COUNTS:
                got, names = run_ours(model, feeds, threads)
                assert names == [f"onnx_light_cpu::{op}"], names
                compare(got, want, f"{what} at {level}, {threads} threads")
    return want


def make_feeds(rng, dtype, shape, skip_shape, has_beta, has_bias, scale=1.0, offset=0.0):
    H = shape[-1]

    def r(*s):
        return (rng.standard_normal(s) * scale + offset).astype(np.float32).astype(dtype)

    feeds = {"x": r(*shape), "skip": r(*skip_shape),
             "gamma": (rng.standard_normal(H) * 0.5 + 1).astype(np.float32).astype(dtype)}
    if has_beta:
        feeds["beta"] = (rng.standard_normal(H) * 0.1).astype(np.float32).astype(dtype)
    if has_bias:
        feeds["bias"] = (rng.standard_normal(H) * 0.1).astype(np.float32).astype(dtype)
    return feeds


def run_ort(model: onnx.ModelProto, feeds: dict) -> list:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    if next(iter(feeds.values())).dtype != bfloat16:
        return sess.run(None, feeds)
    # ORT's numpy bridge has no bfloat16: pass and read the raw 16-bit words.
    values = {k: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
        v.view(np.uint16), TensorProto.BFLOAT16) for k, v in feeds.items()}
    results = []
    for v in sess.run_with_ort_values(None, values):
        if v.data_type() == "tensor(float)":
            results.append(v.numpy())
            continue
        n = int(np.prod(v.shape()))
        words = (ctypes.c_uint16 * n).from_address(v.data_ptr()) if n else []
        results.append(np.frombuffer(bytes(words), np.uint16).view(bfloat16).reshape(v.shape()))
    return results


def run_ours(model, feeds, threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    # onnx.reference has no com.microsoft kernels: the evaluator can only be
    # built while a global registration provides them.
    olc.register_kernels_global(microsoft_implementation=policy)
    try:
        sess = ReferenceEvaluator(model)
    finally:
        olc.unregister_kernels_global()
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    outputs = sess.run(None, feeds)
    return outputs, olc.used_kernel_names(sess)


def compare(got: list, want: list, what: str, tolerance=None) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        # The float32 statistics of narrow inputs take float32's tolerance.
        assert_close(g, w, f"{what} output {k}", tolerance or TOL[w.dtype])


def check(op, dtype, shape, skip_shape, has_beta, has_bias, wanted, rng, *,
          epsilon=None, levels=None, oracle="ort", scale=1.0, offset=0.0, tolerance=None):
    """Ours (OPTIMIZED at every level and thread count, and NAIVE) against
    the oracle; identical bits across thread counts; inputs unmodified."""
    model = skip_model(op, dtype, has_beta, has_bias, wanted, epsilon)
    feeds = make_feeds(rng, dtype, shape, skip_shape, has_beta, has_bias, scale, offset)
    originals = {k: v.copy() for k, v in feeds.items()}
    expected = run_ort(model, feeds) if oracle == "ort" else oracle(feeds)
    what = f"{op} {np.dtype(dtype).name} {shape} skip {skip_shape} beta={has_beta} " \
           f"bias={has_bias} outputs={wanted}"
    naive, names = run_ours(model, feeds, naive=True)
    assert f"onnx_light_cpu::Naive{op}" in names, names
    compare(naive, expected, f"{what} NAIVE", tolerance)
    for level in levels or available_simd_levels():
        with capped_simd_level(level):
            per_thread = []
            for threads in THREAD_COUNTS:
                got, names = run_ours(model, feeds, threads)
                assert names == [f"onnx_light_cpu::{op}"], names
                compare(got, expected, f"{what} at {level}, {threads} threads", tolerance)
                compare(got, naive, f"{what} at {level} vs NAIVE", tolerance)
                per_thread.append(got)
            for a, b in zip(per_thread[0], per_thread[1]):
                assert same_bits(a, b), f"{what}: thread count changed the result"
            for out in per_thread[0]:
                for a in feeds.values():
                    assert not np.shares_memory(out, a), f"{what}: output aliases an input"
    for k, a in feeds.items():
        assert same_bits(a, originals[k]), f"{what}: input {k} modified"


def _options(op):
    betas = (False, True) if op == LN else (False,)
    for has_beta, has_bias in itertools.product(betas, (False, True)):
        for extra in itertools.product((False, True), repeat=3):
            yield has_beta, has_bias, (True,) + extra


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", (LN, RMS))
def test_every_optional_input_and_output(op, dtype):
    """Each optional input present or absent, each output slot requested or not."""
    rng = np.random.default_rng(1)
    for has_beta, has_bias, wanted in _options(op):
        check(op, dtype, (2, 3, 19), (3, 19), has_beta, has_bias, wanted, rng)


SHAPES = [
    ((3, 1), (3, 1)),
    ((4, 7), (4, 7)),
    ((2, 5, 33), (2, 5, 33)),
    ((2, 5, 33), (5, 33)),
    ((3, 2, 48), (1, 2, 48)),
    ((1, 3, 896), (1, 3, 896)),
    ((2, 2, 4095), (2, 4095)),
    ((2, 64, 896), (64, 896)),  # large enough for two threads
    ((0, 5), (0, 5)),
    ((0, 3, 8), (3, 8)),
    ((2, 0, 8), (0, 8)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", (LN, RMS))
@pytest.mark.parametrize("shape,skip_shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_shapes_and_skip_broadcast(op, dtype, shape, skip_shape):
    rng = np.random.default_rng(sum(shape))
    check(op, dtype, shape, skip_shape, op == LN, True, (True, True, True, True), rng)


@pytest.mark.parametrize("op", (LN, RMS))
def test_epsilon(op):
    rng = np.random.default_rng(3)
    for eps in (0.0, 1e-5, 0.5):
        check(op, np.float32, (2, 3, 16), (2, 3, 16), False, False, (True, False, True), rng,
              epsilon=eps)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", (LN, RMS))
@pytest.mark.parametrize("shape", [(1, 128, 4096), (1, 1, 4096), (1, 128, 896), (4, 33, 1000)])
def test_model_sizes(op, dtype, shape):
    rng = np.random.default_rng(4)
    check(op, dtype, shape, shape, op == LN, True, (True, True, True, True), rng)


def _float64_reference(op):
    def oracle(feeds):
        v = feeds["x"].astype(np.float64) + feeds["skip"].astype(np.float64)
        mean = v.mean(-1, keepdims=True) if op == LN else np.zeros(v.shape[:-1] + (1,))
        c = v - mean
        inv = 1 / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-12)
        y = c * inv * feeds["gamma"].astype(np.float64)
        return [y.astype(np.float32), mean.astype(np.float32), inv.astype(np.float32)]
    return oracle


@pytest.mark.parametrize("op", (LN, RMS))
def test_large_mean_small_spread(op):
    """Rows around 1000 with a spread of 0.7: the float32 residual itself is
    only good to ~1e-4 of the spread, but the centred variance keeps that
    (E[v^2] - mean^2 would lose every digit: ulp(1e6) = 0.06)."""
    rng = np.random.default_rng(5)
    check(op, np.float32, (4, 2, 300), (4, 2, 300), False, False, (True, True, True), rng,
          oracle=_float64_reference(op), scale=0.5, offset=500.0, tolerance=(1e-3, 1e-3))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", (LN, RMS))
def test_nan_and_inf_rows(op, dtype):
    """A NaN or inf in a row makes that row NaN, the others stay finite."""
    x = np.ones((3, 2, 20), dtype=np.float32)
    x[0, 0, 3], x[1, 1, 19] = np.nan, np.inf
    x[2] = np.linspace(-1, 1, 40).reshape(2, 20)
    feeds = {"x": x.astype(dtype), "skip": np.zeros((2, 20), dtype),
             "gamma": np.ones(20, dtype)}
    model = skip_model(op, dtype, False, False, (True, False, True))
    want, _ = run_ours(model, feeds, naive=True)
    assert np.isnan(want[0][0, 0].astype(np.float32)).all()
    assert np.isfinite(want[0][2].astype(np.float32)).all()
    for level in available_simd_levels():
        with capped_simd_level(level):
            got, _ = run_ours(model, feeds)
            compare(got, want, f"{op} special values at {level}")


def test_inventory_names():
    for policy, prefix in ((olc.MicrosoftKernelImplementation.OPTIMIZED, ""),
                           (olc.MicrosoftKernelImplementation.NAIVE, "Naive")):
        records = {r.op_type: r for r in olc.registered_kernels(microsoft_implementation=policy)
                   if r.domain == MS}
        for op in (LN, RMS):
            r = records[op]
            assert r.name == f"onnx_light_cpu::{prefix}{op}"
            assert r.registrar == "RegisterMicrosoftKernels"
            assert r.implementation == policy.value
            assert set(r.element_types) == {"tensor(float)", "tensor(float16)",
                                            "tensor(bfloat16)"}


# -- bad input -----------------------------------------------------------------


def _run_both(model, feeds):
    for naive in (False, True):
        yield lambda naive=naive: run_ours(model, feeds, naive=naive)


def _bad(op, feeds, error, match, has_beta=False, has_bias=False, epsilon=None):
    dtype = feeds["x"].dtype if feeds["x"].dtype in map(np.dtype, DTYPES) else np.float32
    model = skip_model(op, dtype, has_beta, has_bias, (True,), epsilon)
    originals = {k: v.copy() for k, v in feeds.items()}
    for call in _run_both(model, feeds):
        with pytest.raises(error, match=match):
            call()
    for k, v in feeds.items():
        assert same_bits(v, originals[k])


def _ok(shape=(2, 3, 8), skip_shape=None, dtype=np.float32):
    H = shape[-1]
    return {"x": np.ones(shape, dtype), "skip": np.ones(skip_shape or shape, dtype),
            "gamma": np.ones(H, dtype)}


@pytest.mark.parametrize("op", (LN, RMS))
def test_bad_element_types(op):
    _bad(op, {**_ok(dtype=np.float64)}, TypeError, rf"{op}: input 0 .*float64")
    _bad(op, {**_ok(), "skip": np.ones((2, 3, 8), np.float16)}, TypeError,
         rf"{op}: input 1 .*float16")
    _bad(op, {**_ok(), "gamma": np.ones(8, bfloat16)}, TypeError, rf"{op}: input 2 .*bfloat16")
    bias_index = 4 if op == LN else 3
    _bad(op, {**_ok(), "bias": np.ones(8, np.float16)}, TypeError,
         rf"{op}: input {bias_index} .*float16", has_bias=True)


@pytest.mark.parametrize("op", (LN, RMS))
def test_bad_shapes(op):
    _bad(op, _ok((8,)), ValueError, rf"{op}: input 0 .*expected one of ranks 2, 3")
    _bad(op, _ok((1, 2, 3, 8)), ValueError, rf"{op}: input 0 .*expected one of ranks 2, 3")
    _bad(op, _ok((2, 3, 0)), ValueError, rf"{op}: input 0 .*last dimension")
    _bad(op, _ok((2, 3, 8), (2, 8)), ValueError, rf"{op}: input 1 .*shape")
    _bad(op, _ok((2, 3, 8), (2, 1, 8)), ValueError, rf"{op}: input 1 .*shape")
    _bad(op, _ok((2, 3, 8), (3, 1, 8)), ValueError, rf"{op}: input 1 .*shape")
    _bad(op, _ok((3, 8), (1, 3, 8)), ValueError, rf"{op}: input 1 .*shape")
    _bad(op, _ok((3, 8), (1, 8)), ValueError, rf"{op}: input 1 .*shape")
    _bad(op, {**_ok(), "gamma": np.ones(7, np.float32)}, ValueError, rf"{op}: input 2 .*\(8,\)")
    _bad(op, {**_ok(), "gamma": np.ones((1, 8), np.float32)}, ValueError, rf"{op}: input 2")
    bias_index = 4 if op == LN else 3
    _bad(op, {**_ok(), "bias": np.ones(9, np.float32)}, ValueError,
         rf"{op}: input {bias_index} .*\(8,\)", has_bias=True)
    if op == LN:
        _bad(op, {**_ok(), "beta": np.ones(3, np.float32)}, ValueError, rf"{op}: input 3",
             has_beta=True)


@pytest.mark.parametrize("op", (LN, RMS))
@pytest.mark.parametrize("eps", (-1e-5, float("inf"), float("nan")))
def test_bad_epsilon(op, eps):
    _bad(op, _ok(), ValueError, rf"{op}: attribute epsilon", epsilon=eps)


@pytest.mark.parametrize("op", (LN, RMS))
def test_trailing_empty_names(op):
    """An empty bias name and empty trailing output slots, as ORT accepts them."""
    rng = np.random.default_rng(6)
    model = skip_model(op, np.float32, False, False, (True, False, False, False), trailing=True)
    assert model.graph.node[0].input[-1] == "" and model.graph.node[0].output[-1] == ""
    feeds = make_feeds(rng, np.float32, (2, 3, 40), (3, 40), False, False)
    expected = run_ort(model, feeds)
    got = _ours_only(op, np.float32, feeds, model, f"{op} trailing empty names")
    assert_close(got[0], expected[0], op, TOL[np.dtype(np.float32)])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", (LN, RMS))
def test_strided_and_unaligned_inputs(op, dtype):
    """Views that are not contiguous or start off the vector alignment."""
    rng = np.random.default_rng(7)
    model = skip_model(op, dtype, op == LN, True, (True, True, True, True))
    base = make_feeds(rng, dtype, (2, 3, 2 * 37 + 1), (3, 2 * 37 + 1), op == LN, True)
    feeds = {k: (v[..., 1::2] if v.ndim > 1 else unaligned(v[1:38])) for k, v in base.items()}
    assert not feeds["x"].flags.c_contiguous
    expected = run_ort(model, {k: np.ascontiguousarray(v) for k, v in feeds.items()})
    _ours_only(op, dtype, feeds, model, f"{op} strided")
    got, _ = run_ours(model, feeds)
    compare(got, expected, f"{op} strided vs ORT")


@pytest.mark.parametrize("op", (LN, RMS))
def test_bad_arity(op):
    """Missing required inputs, extra inputs or outputs."""
    n_max = 5 if op == LN else 4
    cases = [(["x", "", "gamma"], ["y"], "required"),
             (["x", "skip", "gamma"] + ["gamma"] * (n_max - 2), ["y"], "at most"),
             (["x", "skip", "gamma"], ["y", "m", "i", "s", "extra"], "at most 4 outputs")]
    feeds = _ok()
    for inputs, outputs, match in cases:
        node = oh.make_node(op, inputs, outputs, domain=MS)
        graph = oh.make_graph(
            [node], "bad", [oh.make_tensor_value_info(n, TensorProto.FLOAT, None)
                            for n in ("x", "skip", "gamma")],
            [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                    oh.make_opsetid(MS, 1)])
        for naive in (False, True):
            with pytest.raises(ValueError, match=rf"{op}: .*{match}"):
                run_ours(model, {k: v for k, v in feeds.items()}, naive=naive)
