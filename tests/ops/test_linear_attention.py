"""LinearAttention, ai.onnx against the onnx.reference built-in and
com.microsoft against ONNX Runtime: every update rule, past state present
or absent, both decay and beta layouts, grouped (and, for com.microsoft,
inverse grouped and shared-key) heads, float32, float16 and bfloat16
activations with a state of another type, empty sequences, at every SIMD
level and 1/2 threads; NAIVE against OPTIMIZED (state windows included);
bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import (
    THREAD_COUNTS,
    assert_close,
    element_type,
    same_bits,
    thread_pairs,
    unaligned,
)

MS = "com.microsoft"
NAMES = ("query", "key", "value", "past_state", "decay", "beta")
RULES = ("linear", "gated", "delta", "gated_delta")
# Relative to the largest expected magnitude: the recurrence sums dk terms
# per token in another order (and with FMAs) than the NumPy einsums.
TOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float16): 2e-3, np.dtype(bfloat16): 1.6e-2}


def make_inputs(rng, B, T, Hq, Hkv, dk, dv, rule, *, Hk=None, decay_rows=True, beta_heads=True,
                past=False, dtype=np.float32, state_dtype=None, window=0):
    """Feeds (name -> array) for one case; keys L2-normalised per head as
    the delta rules expect."""
    Hk = Hk or Hkv
    key = rng.standard_normal((B, T, Hk, dk))
    key /= np.maximum(np.linalg.norm(key, axis=-1, keepdims=True), 1e-6)
    feeds = {"query": rng.standard_normal((B, T, Hq * dk)),
             "key": key.reshape(B, T, Hk * dk),
             "value": rng.standard_normal((B, T, Hkv * dv))}
    if past:
        shape = (B, Hkv, dk, dv) if not window else (window, B, Hkv, dk, dv)
        feeds["past_state"] = rng.standard_normal(shape) * 0.5
    if rule in ("gated", "gated_delta"):
        feeds["decay"] = -np.abs(rng.standard_normal((B, T, Hkv * dk if decay_rows else Hkv))) * 0.2
    if rule in ("delta", "gated_delta"):
        feeds["beta"] = rng.random((B, T, Hkv if beta_heads else 1))
    out = {k: a.astype(dtype) for k, a in feeds.items()}
    if past:
        out["past_state"] = feeds["past_state"].astype(state_dtype or dtype)
    return out


def model(feeds, domain="", outputs=2, **attrs):
    names = [n if n in feeds else "" for n in NAMES]
    while not names[-1]:
        names.pop()
    out_names = ["output", "present_state"][:outputs]
    node = oh.make_node("LinearAttention", names, out_names, domain=domain, **attrs)
    dt = element_type(feeds["query"].dtype)
    st = element_type(feeds["past_state"].dtype) if "past_state" in feeds else dt
    graph = oh.make_graph(
        [node], "la",
        [oh.make_tensor_value_info(n, element_type(a.dtype), [None] * a.ndim)
         for n, a in feeds.items()],
        [oh.make_tensor_value_info("output", dt, None),
         oh.make_tensor_value_info("present_state", st, None)][:outputs])
    opsets = [oh.make_opsetid("", 27)]
    if domain:
        opsets.append(oh.make_opsetid(domain, 1))
    return oh.make_model(graph, opset_imports=opsets)


def run_ours(m, feeds, threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    olc.register_kernels_global(microsoft_implementation=policy)
    try:
        sess = ReferenceEvaluator(m)
    finally:
        olc.unregister_kernels_global()
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds), olc.used_kernel_names(sess)


def assert_near(got, want, what, tol=None):
    magnitude = np.abs(np.asarray(want, dtype=np.float64))
    scale = max(float(magnitude[np.isfinite(magnitude)].max(initial=0.0)), 1.0)
    rel = tol or TOL[np.dtype(got.dtype) if got.dtype in TOL else np.dtype(np.float32)]
    assert_close(got, want, what, (rel, rel * scale))


def check(m, feeds, expected, kernel, naive_too=False):
    """Ours at every SIMD level and thread count against ``expected``; the
    outputs identical across thread counts; inputs untouched."""
    originals = {k: a.copy() for k, a in feeds.items()}
    for level in available_simd_levels():
        with capped_simd_level(level):
            per_thread = []
            for threads in THREAD_COUNTS:
                got, names = run_ours(m, feeds, threads)
                assert names == [kernel], names
                for i, (g, w) in enumerate(zip(got, expected)):
                    assert_near(g, w, f"output {i} at {level}, {threads} threads",
                                TOL[np.dtype(feeds["query"].dtype)] if i == 0 else None)
                per_thread.append(got)
            for a, b in thread_pairs(per_thread):
                assert same_bits(a, b), "thread count changed the result"
    if naive_too:
        got, names = run_ours(m, feeds, naive=True)
        assert names == ["onnx_light_cpu::NaiveMicrosoftLinearAttention"], names
        for i, (g, w) in enumerate(zip(got, expected)):
            assert_near(g, w, f"naive output {i}", TOL[np.dtype(feeds["query"].dtype)])
    for k, a in feeds.items():
        assert same_bits(a, originals[k]), f"input {k} modified"


def builtin(m, feeds):
    return ReferenceEvaluator(m).run(None, feeds)


# ---------------------------------------------------------------- ai.onnx

@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("past", [False, True])
@pytest.mark.parametrize("layout", ["rows_heads", "head_one"])
def test_onnx_rules(rule, past, layout):
    rng = np.random.default_rng(7)
    feeds = make_inputs(rng, 2, 5, 4, 2, 8, 12, rule, past=past,
                        decay_rows=layout == "rows_heads", beta_heads=layout == "rows_heads")
    m = model(feeds, update_rule=rule, q_num_heads=4, kv_num_heads=2)
    check(m, feeds, builtin(m, feeds), "onnx_light_cpu::LinearAttention")


@pytest.mark.parametrize("shape", [
    (1, 1, 1, 1, 1, 1), (1, 3, 8, 1, 16, 16),      # decode, multi-query
    (2, 7, 3, 3, 5, 33), (1, 70, 2, 2, 33, 40),    # dims off the vector widths, 2 chunks
    (3, 2, 6, 2, 7, 3), (2, 16, 4, 4, 64, 64),     # the last above the 2-thread threshold
], ids=str)
@pytest.mark.parametrize("rule", ["linear", "gated_delta"])
def test_onnx_shapes(shape, rule):
    B, T, Hq, Hkv, dk, dv = shape
    rng = np.random.default_rng(sum(shape))
    feeds = make_inputs(rng, B, T, Hq, Hkv, dk, dv, rule, past=True)
    m = model(feeds, update_rule=rule, q_num_heads=Hq, kv_num_heads=Hkv)
    check(m, feeds, builtin(m, feeds), "onnx_light_cpu::LinearAttention")


@pytest.mark.parametrize("dtype,state_dtype", [
    (np.float16, None), (bfloat16, None), (np.float16, np.float32), (np.float32, np.float16),
    (bfloat16, np.float32), (np.float32, bfloat16)], ids=str)
@pytest.mark.parametrize("past", [False, True])
def test_onnx_dtypes(dtype, state_dtype, past):
    rng = np.random.default_rng(3)
    feeds = make_inputs(rng, 2, 6, 4, 2, 16, 24, "gated_delta", past=past, dtype=dtype,
                        state_dtype=state_dtype)
    m = model(feeds, q_num_heads=4, kv_num_heads=2, scale=0.3, chunk_size=2)
    want = builtin(m, feeds)
    check(m, feeds, want, "onnx_light_cpu::LinearAttention")
    assert want[1].dtype == (feeds["past_state"].dtype if past else np.dtype(dtype))


@pytest.mark.parametrize("B,T", [(2, 0), (0, 3), (0, 0)])
@pytest.mark.parametrize("past", [False, True])
def test_onnx_empty(B, T, past):
    rng = np.random.default_rng(0)
    feeds = make_inputs(rng, B, T, 2, 2, 4, 4, "gated_delta", past=past)
    m = model(feeds, q_num_heads=2, kv_num_heads=2)
    want = builtin(m, feeds)
    got, names = run_ours(m, feeds)
    assert names == ["onnx_light_cpu::LinearAttention"]
    for g, w in zip(got, want):
        assert_close(g, w, "empty")


@pytest.mark.parametrize("decay_rows", [True, False])
def test_onnx_special_values(decay_rows):
    """NaN and infinities flow through the recurrence as in the built-in; a
    decay of -inf clears the state, a very negative one underflows to 0."""
    rng = np.random.default_rng(9)
    feeds = make_inputs(rng, 1, 6, 2, 2, 16, 20, "gated_delta", past=True,
                        decay_rows=decay_rows)
    decay = feeds["decay"]
    decay[0, 1, 0] = -np.inf
    decay[0, 2, 1] = -1000.0
    decay[0, 3, 0] = np.nan
    feeds["value"][0, 4, 25] = np.inf
    m = model(feeds, q_num_heads=2, kv_num_heads=2)
    with np.errstate(all="ignore"):
        want = builtin(m, feeds)
    check(m, feeds, want, "onnx_light_cpu::LinearAttention")


def test_onnx_unaligned_and_strided_inputs():
    rng = np.random.default_rng(5)
    feeds = make_inputs(rng, 2, 9, 2, 2, 12, 20, "gated_delta", past=True)
    feeds = {k: unaligned(a) for k, a in feeds.items()}
    feeds["value"] = np.asfortranarray(feeds["value"])
    m = model(feeds, q_num_heads=2, kv_num_heads=2)
    check(m, feeds, builtin(m, feeds), "onnx_light_cpu::LinearAttention")


def test_onnx_outputs_do_not_alias_and_reuse():
    """A second run gives fresh results; outputs never share inputs' memory."""
    rng = np.random.default_rng(8)
    feeds = make_inputs(rng, 1, 4, 2, 2, 64, 64, "linear", past=True)
    m = model(feeds, update_rule="linear", q_num_heads=2, kv_num_heads=2)
    sess = ReferenceEvaluator(m)
    olc.register_kernels_for_session(sess)
    first = [a.copy() for a in sess.run(None, feeds)]
    second = sess.run(None, feeds)
    for a, b in zip(first, second):
        assert same_bits(a, b)
        for x in feeds.values():
            assert not np.shares_memory(b, x)


# ---------------------------------------------------------- com.microsoft

ort = pytest.importorskip("onnxruntime")


def run_ort(m, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


MS_SHAPES = [  # B, T, Hq, Hk, Hkv, dk, dv
    (2, 5, 4, 2, 2, 8, 12),     # grouped query heads
    (1, 4, 2, 4, 4, 8, 8),      # inverse GQA: query heads shared by kv heads
    (2, 3, 2, 2, 4, 16, 20),    # inverse GQA with shared key heads
    (1, 6, 4, 1, 4, 4, 40),     # one key head for every kv head
    (1, 1, 16, 16, 16, 32, 32),  # decode
    (1, 66, 2, 2, 2, 24, 9),    # two chunks
]


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("shape", MS_SHAPES, ids=str)
def test_microsoft_vs_ort(rule, shape):
    B, T, Hq, Hk, Hkv, dk, dv = shape
    rng = np.random.default_rng(sum(shape))
    feeds = make_inputs(rng, B, T, Hq, Hkv, dk, dv, rule, Hk=Hk, past=T % 2 == 0,
                        decay_rows=dv % 2 == 0, beta_heads=dk % 16 == 0)
    m = model(feeds, domain=MS, update_rule=rule, q_num_heads=Hq, kv_num_heads=Hkv)
    check(m, feeds, run_ort(m, feeds), "onnx_light_cpu::MicrosoftLinearAttention",
          naive_too=True)


@pytest.mark.parametrize("state_dtype", [None, np.float32])
@pytest.mark.parametrize("rule", ["gated", "gated_delta"])
def test_microsoft_float16_vs_ort(rule, state_dtype):
    rng = np.random.default_rng(11)
    feeds = make_inputs(rng, 2, 7, 4, 2, 16, 8, rule, past=True, dtype=np.float16,
                        state_dtype=state_dtype)
    m = model(feeds, domain=MS, update_rule=rule, q_num_heads=4, kv_num_heads=2, scale=0.25,
              chunk_size=4)  # a tuning hint: no effect on the result
    check(m, feeds, run_ort(m, feeds), "onnx_light_cpu::MicrosoftLinearAttention",
          naive_too=True)


@pytest.mark.parametrize("rule", RULES)
def test_microsoft_bfloat16_vs_float32_ort(rule):
    """ORT has no bfloat16 kernel: its float32 result on the rounded inputs."""
    rng = np.random.default_rng(12)
    feeds = make_inputs(rng, 1, 5, 2, 4, 8, 16, rule, Hk=2, past=True, dtype=bfloat16)
    m = model(feeds, domain=MS, update_rule=rule, q_num_heads=2, kv_num_heads=4)
    f32 = {k: a.astype(np.float32) for k, a in feeds.items()}
    want = [a.astype(bfloat16) for a in run_ort(model(f32, domain=MS, update_rule=rule,
                                                      q_num_heads=2, kv_num_heads=4), f32)]
    check(m, feeds, want, "onnx_light_cpu::MicrosoftLinearAttention", naive_too=True)


def test_microsoft_ignores_unused_decay_and_beta():
    rng = np.random.default_rng(13)
    feeds = make_inputs(rng, 1, 4, 2, 2, 8, 8, "gated_delta", past=True)
    for rule in ("linear", "gated", "delta"):
        m = model(feeds, domain=MS, update_rule=rule, q_num_heads=2, kv_num_heads=2)
        check(m, feeds, run_ort(m, feeds), "onnx_light_cpu::MicrosoftLinearAttention",
              naive_too=True)


def test_microsoft_defaults_and_empty_sequence():
    rng = np.random.default_rng(14)
    for T in (0, 3):
        feeds = make_inputs(rng, 2, T, 2, 2, 4, 4, "gated_delta", past=True)
        m = model(feeds, domain=MS, q_num_heads=2, kv_num_heads=2)
        want = run_ort(m, feeds)
        for naive in (False, True):
            got, _ = run_ours(m, feeds, naive=naive)
            for g, w in zip(got, want):
                assert_near(g, w, f"T={T} naive={naive}")


@pytest.mark.parametrize("window,T", [(1, 3), (2, 5), (3, 2), (8, 1), (4, 0), (4, 66)])
@pytest.mark.parametrize("dtype,dv", [(np.float32, 12), (np.float32, 32), (np.float16, 12)])
def test_microsoft_state_window_naive_vs_optimized(window, T, dtype, dv):
    """ORT runs state windows on CUDA only: the NAIVE family is the oracle.
    dv = 32 fills whole blocks (the float32 rows go straight to the slots);
    T = 66 puts the window across the boundary of two 64-token chunks."""
    rng = np.random.default_rng(window * 10 + T)
    feeds = make_inputs(rng, 2, T, 4, 2, 8, dv, "gated_delta", past=T != 5, window=window,
                        dtype=dtype)
    m = model(feeds, domain=MS, q_num_heads=4, kv_num_heads=2, state_window=window)
    want, names = run_ours(m, feeds, naive=True)
    assert names == ["onnx_light_cpu::NaiveMicrosoftLinearAttention"]
    assert want[1].shape == (window, 2, 2, 8, dv)
    if T < window:  # the slots before the first token hold zeros
        assert not np.any(want[1][: window - T - (1 if T == 0 else 0)].astype(np.float32))
    check(m, feeds, want, "onnx_light_cpu::MicrosoftLinearAttention")
    # the last slot is the state a window of 0 gives
    plain = dict(feeds)
    if "past_state" in feeds:
        plain["past_state"] = feeds["past_state"][-1]
    m0 = model(plain, domain=MS, q_num_heads=4, kv_num_heads=2)
    got0, _ = run_ours(m0, plain)
    assert_near(want[1][-1], got0[1], "last slot")


# ---------------------------------------------------------------- bad input

def _raises(m, feeds, exc, match, naive=False):
    originals = {k: a.copy() for k, a in feeds.items()}
    with pytest.raises(exc, match=match):
        run_ours(m, feeds, naive=naive)
    for k, a in feeds.items():
        assert same_bits(a, originals[k])


@pytest.mark.parametrize("domain", ["", MS])
def test_bad_attributes(domain):
    rng = np.random.default_rng(0)
    feeds = make_inputs(rng, 1, 2, 4, 2, 4, 4, "gated_delta")
    _raises(model(feeds, domain=domain, q_num_heads=4, kv_num_heads=2, update_rule="fast"),
            feeds, ValueError, "LinearAttention: attribute update_rule")
    _raises(model(feeds, domain=domain, q_num_heads=4, kv_num_heads=3), feeds, ValueError,
            "LinearAttention: q_num_heads \\(4\\).*kv_num_heads \\(3\\)")
    # onnx.reference's OpRun itself rejects a missing required attribute
    _raises(model(feeds, domain=domain, q_num_heads=4), feeds, (RuntimeError, ValueError),
            "kv_num_heads")
    _raises(model(feeds, domain=domain, q_num_heads=0, kv_num_heads=2), feeds, ValueError,
            "must be positive")
    if domain:
        _raises(model(feeds, domain=domain, q_num_heads=4, kv_num_heads=2, state_window=9),
                feeds, ValueError, "state_window must be in \\[0, 8\\]")


@pytest.mark.parametrize("domain,naive", [("", False), (MS, False), (MS, True)])
def test_bad_inputs(domain, naive):
    rng = np.random.default_rng(0)
    base = make_inputs(rng, 2, 3, 4, 2, 4, 6, "gated_delta", past=True)
    attrs = dict(domain=domain, q_num_heads=4, kv_num_heads=2)

    def bad(exc, match, **changes):
        feeds = dict(base, **changes)
        feeds = {k: v for k, v in feeds.items() if v is not None}
        _raises(model(feeds, **attrs), feeds, exc, match, naive)

    bad(ValueError, r"input 0 \('query'\) last dimension 15 is not a multiple",
        query=base["query"][..., :15])
    bad(ValueError, r"input 1 \('key'\) last dimension",
        key=np.zeros((2, 3, 6), np.float32))
    bad(ValueError, r"input 2 \('value'\) last dimension 13",
        value=np.zeros((2, 3, 13), np.float32))
    bad(ValueError, r"input 2 \('value'\) has shape \(2, 4, 12\): its batch",
        value=np.zeros((2, 4, 12), np.float32))
    bad(ValueError, r"input 0 \('query'\) has rank 4 \(shape \(2, 3, 4, 4\)\), expected rank 3",
        query=np.zeros((2, 3, 4, 4), np.float32))
    bad(TypeError, r"input 1 \('key'\) has element type float16, expected float32 like input 0",
        key=base["key"].astype(np.float16))
    bad(TypeError, r"input 0 \('query'\) has element type float64",
        query=base["query"].astype(np.float64), key=base["key"].astype(np.float64),
        value=base["value"].astype(np.float64))
    bad(ValueError, r"input 3 \('past_state'\) has shape \(2, 2, 4, 5\)",
        past_state=np.zeros((2, 2, 4, 5), np.float32))
    bad(ValueError, r"input 3 \('past_state'\) has rank 3 \(shape \(2, 2, 24\)\), expected rank 4",
        past_state=np.zeros((2, 2, 24), np.float32))
    bad(ValueError, r"input 4 \('decay'\) has shape \(2, 3, 3\)",
        decay=np.zeros((2, 3, 3), np.float32))
    bad(ValueError, r"input 5 \('beta'\) has shape \(2, 3, 4\)",
        beta=np.zeros((2, 3, 4), np.float32))
    bad(ValueError, r"update_rule 'gated_delta' requires input 4 \(decay\)", decay=None)
    bad(ValueError, r"update_rule 'gated_delta' requires input 5 \(beta\)", beta=None)


def test_microsoft_state_window_shapes():
    rng = np.random.default_rng(0)
    feeds = make_inputs(rng, 2, 3, 2, 2, 4, 4, "linear", past=True)  # a 4D past
    for naive in (False, True):
        _raises(model(feeds, domain=MS, update_rule="linear", q_num_heads=2, kv_num_heads=2,
                      state_window=2), feeds, ValueError,
                r"input 3 \('past_state'\) has rank 4 \(shape \(2, 2, 4, 4\)\), "
                r"expected rank 5", naive)
        feeds5 = dict(feeds, past_state=np.zeros((3, 2, 2, 4, 4), np.float32))
        _raises(model(feeds5, domain=MS, update_rule="linear", q_num_heads=2, kv_num_heads=2,
                      state_window=2), feeds5, ValueError,
                r"has shape \(3, 2, 2, 4, 4\), expected \(2, 2, 2, 4, 4\)", naive)


def test_onnx_forbids_unused_decay_and_beta():
    rng = np.random.default_rng(0)
    feeds = make_inputs(rng, 1, 2, 2, 2, 4, 4, "gated_delta")
    _raises(model(feeds, update_rule="linear", q_num_heads=2, kv_num_heads=2), feeds,
            ValueError, r"input 4 \('decay'\) is only allowed with update_rule gated")


def test_onnx_rejects_microsoft_head_layouts():
    rng = np.random.default_rng(0)
    feeds = make_inputs(rng, 1, 2, 2, 4, 4, 4, "linear")  # inverse GQA
    _raises(model(feeds, update_rule="linear", q_num_heads=2, kv_num_heads=4), feeds,
            ValueError, r"q_num_heads \(2\) must be a positive multiple of kv_num_heads \(4\)")
    feeds = make_inputs(rng, 1, 2, 4, 4, 4, 4, "linear", Hk=2)  # shared key heads
    _raises(model(feeds, update_rule="linear", q_num_heads=4, kv_num_heads=4), feeds,
            ValueError, r"input 1 \('key'\) last dimension 8 must be kv_num_heads")


def test_inventory():
    names = olc.registered_kernel_names()
    assert names["LinearAttention"] == "onnx_light_cpu::LinearAttention"
    assert names["com.microsoft::LinearAttention"] == "onnx_light_cpu::MicrosoftLinearAttention"
    naive = [r for r in olc.registered_kernels(olc.MicrosoftKernelImplementation.NAIVE)
             if r.op_type == "LinearAttention" and r.domain == MS]
    assert [r.name for r in naive] == ["onnx_light_cpu::NaiveMicrosoftLinearAttention"]
    onnx_record = [r for r in olc.registered_kernels()
                   if r.op_type == "LinearAttention" and r.domain == "ai.onnx"][0]
    assert onnx_record.since_version == onnx.defs.get_schema("LinearAttention", 27).since_version
    assert set(onnx_record.element_types) == {"tensor(float)", "tensor(float16)",
                                               "tensor(bfloat16)"}
