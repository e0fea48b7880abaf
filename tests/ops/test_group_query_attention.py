"""com.microsoft GroupQueryAttention against ONNX Runtime's CPU kernel:
prefill, decode, multi-token continuation, padded prompts, packed QKV,
rotary (interleaved, partial, position_ids), local windows, softcap,
smooth softmax, head sinks, attention bias, scale, causal=0, qk_output,
windowed caches (sliding_window_cache) and right-padded chunks
(query_seqlens); float32 and float16, bfloat16 against a float32 oracle on
rounded inputs.  NAIVE and OPTIMIZED both, the optimized one at every SIMD
level and 1/2 threads (same bits).  ONNX Runtime takes head sizes that are
multiples of 8 (16 with do_rotary): odd head sizes compare NAIVE with
OPTIMIZED.  Rows ONNX Runtime leaves unspecified (padding query rows,
cache rows past the valid ones) are not compared."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi.onnxruntime_pybind11_state import (
    Fail,
    InvalidArgument,
    InvalidGraph,
    RuntimeException,
)

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, layouts, same_bits, thread_pairs

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
NAMES = ("query", "key", "value", "past_key", "past_value", "seqlens_k",
         "total_sequence_length", "cos_cache", "sin_cache", "position_ids", "attention_bias",
         "head_sink", "k_scale", "v_scale", "q_norm_weight", "k_norm_weight", "query_seqlens")
TOL = {np.dtype(np.float32): (1e-4, 2e-5), np.dtype(np.float16): (4e-3, 4e-3),
       np.dtype(bfloat16): (3e-2, 3e-2)}


def model(feeds, n_out=3, **attrs):
    last = max(NAMES.index(n) for n in feeds)
    ins = [n if n in feeds else "" for n in NAMES[: last + 1]]
    outs = ["output", "present_key", "present_value", "output_qk"][:n_out]
    node = oh.make_node("GroupQueryAttention", ins, outs, domain=MS, **attrs)
    inputs = [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(feeds[n].dtype), None)
              for n in ins if n]
    et = oh.np_dtype_to_tensor_dtype(feeds["query"].dtype)
    # present caches: past_key's type (the codes of a quantized cache)
    ct = oh.np_dtype_to_tensor_dtype(feeds["past_key"].dtype) if "past_key" in feeds else et
    graph = oh.make_graph([node], "gqa", inputs, [
        oh.make_tensor_value_info(n, ct if n.startswith("present") else et, None) for n in outs])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])


def run_ort(feeds, n_out=3, **attrs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model(feeds, n_out, **attrs).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_ours(feeds, n_out=3, naive=False, threads=1, **attrs):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    sess = ReferenceEvaluator(model(feeds, n_out, **attrs))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    outs = sess.run(None, feeds)
    want = "onnx_light_cpu::" + ("Naive" if naive else "") + "GroupQueryAttention"
    assert want in olc.used_kernel_names(sess), olc.used_kernel_names(sess)
    return outs


def resident(t, C, W):
    """Rows a windowed cache of capacity C keeps after t tokens."""
    G = C - W + 1
    return t if t <= C else t - G * -(-(t - C) // G)


def compare(got, want, valid, what, tol):
    """Compare the rows ONNX Runtime specifies: valid = (output rows per
    entry, present rows per entry)."""
    out_rows, cache_rows = valid
    assert got[0].shape == want[0].shape and got[1].shape == want[1].shape, what
    for b, (q, c) in enumerate(zip(out_rows, cache_rows)):
        assert_close(got[0][b, :q], want[0][b, :q], f"{what}: output entry {b}", tol)
        for i in (1, 2):
            assert_close(got[i][b, :, :c], want[i][b, :, :c], f"{what}: present {i} entry {b}", tol)
    if len(want) > 3:
        assert_close(got[3], want[3], f"{what}: output_qk", tol)


def check(feeds, valid, n_out=3, oracle="ort", **attrs):
    """ORT (or, for bfloat16, ORT in float32 on the rounded inputs; for
    oracle='naive' our NAIVE kernel) against NAIVE and every SIMD level and
    thread count of OPTIMIZED."""
    dtype = feeds["query"].dtype
    tol = TOL[dtype]
    originals = {n: a.copy() for n, a in feeds.items()}
    naive = run_ours(feeds, n_out, naive=True, **attrs)
    if oracle == "ort":
        if dtype == bfloat16:
            f32 = {n: a.astype(np.float32) if a.dtype == bfloat16 else a for n, a in feeds.items()}
            want = [w.astype(bfloat16) for w in run_ort(f32, n_out, **attrs)]
        else:
            want = run_ort(feeds, n_out, **attrs)
        compare(naive, want, valid, "naive vs ORT", tol)
    else:
        want = naive
    for level in available_simd_levels():
        with capped_simd_level(level):
            per_thread = []
            for threads in THREAD_COUNTS:
                got = run_ours(feeds, n_out, threads=threads, **attrs)
                compare(got, want, valid, f"{level} {threads} threads", tol)
                per_thread.append(got)
            for a, b in thread_pairs(per_thread):
                assert same_bits(a, b), f"{level}: thread count changed the result"
    for n, a in feeds.items():
        assert same_bits(a, originals[n]), f"input {n} modified"


def make(rng, B, S, N, Nkv, H, lens, *, past=None, dtype=np.float32, packed=False,
         total=None, rotary=None, position_ids=False, bias=None, sink=False):
    """Feeds for entries of total lengths ``lens``; past buffer length
    ``past`` (None: no past inputs)."""
    f = {}
    if packed:
        f["query"] = rng.standard_normal((B, S, (N + 2 * Nkv) * H)).astype(dtype)
    else:
        f["query"] = rng.standard_normal((B, S, N * H)).astype(dtype)
        f["key"] = rng.standard_normal((B, S, Nkv * H)).astype(dtype)
        f["value"] = rng.standard_normal((B, S, Nkv * H)).astype(dtype)
    if past is not None:
        f["past_key"] = rng.standard_normal((B, Nkv, past, H)).astype(dtype)
        f["past_value"] = rng.standard_normal((B, Nkv, past, H)).astype(dtype)
    lens = np.asarray(lens)
    f["seqlens_k"] = (lens - 1).astype(np.int32)
    total = int(lens.max()) if total is None else total
    f["total_sequence_length"] = np.array(total, np.int32)
    if rotary is not None:
        P, R = rotary
        angle = rng.uniform(0, 6.3, (P, R // 2))
        f["cos_cache"] = np.cos(angle).astype(dtype)
        f["sin_cache"] = np.sin(angle).astype(dtype)
        if position_ids:
            f["position_ids"] = rng.integers(0, P - S, (B, S)).astype(np.int64)
    if bias is not None:
        f["attention_bias"] = (rng.standard_normal(bias + (S, total)) * 2).astype(dtype)
    if sink:
        f["head_sink"] = rng.standard_normal(N).astype(dtype)
    return f


def random_case(rng, dtype=None, odd=False):
    """One randomised configuration: (feeds, valid rows, attributes)."""
    heads = [(1, 1), (2, 1), (4, 2), (8, 2), (6, 3), (4, 4), (32, 8)]
    N, Nkv = heads[rng.integers(len(heads))]
    rotary = rng.random() < 0.4
    H = int(rng.choice([16, 32, 64, 80, 96, 128] if rotary else [8, 24, 64, 80, 96, 128]))
    if odd:
        H = int(rng.choice([1, 5, 13, 33, 67]))
        rotary = rotary and H >= 2
    if N == 32:
        H = min(H, 64)
    dtype = dtype or [np.float32, np.float16][rng.integers(2)]
    mode = rng.choice(["prefill", "padded", "decode", "continue"])
    window = int(rng.choice([-1, -1, 1, 3, 17]))
    causal = 1
    if mode in ("prefill", "padded") and window == -1 and rng.random() < 0.2:
        causal = 0
    if mode == "prefill":
        B, S = int(rng.integers(1, 3)), int(rng.choice([1, 2, 7, 33]))
        lens, past, P = [S] * B, None, 0
        if rng.random() < 0.3:  # an empty (dynamic) or a max-length (static) cache
            past = int(rng.choice([0, S, S + 5]))
    elif mode == "padded":
        B, S = 2, int(rng.choice([3, 9]))
        lens, past = [S, int(rng.integers(1, S + 1))], None
    else:
        B = int(rng.integers(1, 4)) if mode == "decode" else 1
        S = 1 if mode == "decode" else int(rng.choice([2, 5]))
        P = int(rng.choice([0, 1, 7, 31, 300]))
        lens = [P + S] + [int(rng.integers(S, P + S + 1)) for _ in range(B - 1)]
        past = max(lens) - S + int(rng.choice([0, 0, S + 3]))   # slack: a static buffer
        if P == 0 and S == 1:
            past = max(past, 1)
    total = max(lens)
    attrs = dict(num_heads=N, kv_num_heads=Nkv)
    if causal == 0:
        attrs["causal"] = 0
    if window > 0:
        attrs["local_window_size"] = window
    if rng.random() < 0.3:
        attrs["softcap"] = float(rng.choice([0.5, 5.0]))
    u = rng.random()
    if u < 0.3:  # -1 is ORT's schema default: off, as 0
        attrs["smooth_softmax"] = 1 if u < 0.2 else -1
    if rng.random() < 0.2:
        attrs["scale"] = float(rng.uniform(0.05, 0.3))
    rot = None
    if rotary:
        attrs["do_rotary"] = 1
        attrs["rotary_interleaved"] = int(rng.integers(2))
        # ORT: cos_cache width a multiple of 8 (odd head sizes: any even R)
        R = H if rng.random() < 0.7 else (max(16, H // 2 // 16 * 16) if not odd else 2)
        rot = (total + S + 8, R)
    bias = None
    if rng.random() < 0.3:
        bias = [(B, N), (1, N), (B, 1), (1, 1)][rng.integers(4)]
    feeds = make(rng, B, S, N, Nkv, H, lens, past=past, dtype=dtype,
                 packed=rng.random() < 0.3, rotary=rot,
                 position_ids=rotary and mode != "padded" and rng.random() < 0.3,
                 bias=bias, sink=rng.random() < 0.25)
    first = S == total
    out_rows = [min(S, n) if first else S for n in lens]   # padding rows: unspecified
    return feeds, (out_rows, lens), attrs


@pytest.mark.parametrize("seed", range(28))
def test_random_configurations(seed):
    rng = np.random.default_rng(seed)
    feeds, valid, attrs = random_case(rng)
    check(feeds, valid, **attrs)


@pytest.mark.parametrize("seed", range(4))
def test_bfloat16_against_float32_oracle(seed):
    rng = np.random.default_rng(500 + seed)
    feeds, valid, attrs = random_case(rng, dtype=bfloat16)
    check(feeds, valid, **attrs)


@pytest.mark.parametrize("seed", range(4))
def test_odd_head_sizes_naive_vs_optimized(seed):
    rng = np.random.default_rng(700 + seed)
    feeds, valid, attrs = random_case(rng, odd=True)
    check(feeds, valid, oracle="naive", **attrs)


@pytest.mark.parametrize("B,S,P,Pbuf", [(2, 5, 0, None), (2, 5, 0, 9), (3, 1, 6, 6), (3, 1, 6, 11),
                                         (1, 4, 6, 6), (1, 1, 0, 1)])
@pytest.mark.parametrize("packed", [False, True])
def test_prefill_decode_continuation(B, S, P, Pbuf, packed):
    rng = np.random.default_rng(B * 100 + S * 10 + P)
    feeds = make(rng, B, S, 4, 2, 64, [P + S] * B, past=Pbuf, packed=packed)
    check(feeds, ([S] * B, [P + S] * B), num_heads=4, kv_num_heads=2)


@pytest.mark.parametrize("mode", [1, 2])
def test_qk_output(mode):
    rng = np.random.default_rng(mode)
    feeds = make(rng, 1, 5, 4, 2, 16, [8], past=3, bias=(1, 4), sink=True)
    check(feeds, ([5], [8]), n_out=4, num_heads=4, kv_num_heads=2, qk_output=mode, softcap=0.8,
          local_window_size=3)
    feeds = make(rng, 2, 1, 4, 2, 8, [6, 4], past=9)
    check(feeds, ([1, 1], [6, 4]), n_out=4, num_heads=4, kv_num_heads=2, qk_output=mode)


@pytest.mark.parametrize("B,S,T,C,W", [(1, 1, [6], 4, 3), (1, 1, [5], 4, 3), (1, 3, [8], 5, 3),
                                       (1, 3, [3], 5, 3), (1, 6, [6], 4, 3), (2, 1, [6, 3], 4, 3),
                                       (1, 9, [20], 5, 3), (2, 1, [30, 2], 6, 6),
                                       (1, 1, [50], 8, 3)])
def test_sliding_window_cache(B, S, T, C, W):
    rng = np.random.default_rng(C * 10 + W + S)
    feeds = make(rng, B, S, 4, 2, 16, T, past=C, rotary=(64, 16), bias=(1, 4))
    check(feeds, ([S] * B, [resident(t, C, W) for t in T]), num_heads=4, kv_num_heads=2,
          local_window_size=W, sliding_window_cache=1, do_rotary=1)


@pytest.mark.parametrize("B,S,T,Q,C,W", [(2, 4, [7, 3], [2, 3], 4, 3), (2, 4, [7, 3], [0, 3], 4, 3),
                                         (1, 4, [12], [4], 4, 2), (1, 4, [6], [2], 8, None),
                                         (2, 4, [6, 3], [2, 3], 8, None),
                                         (2, 4, [6, 4], [0, 3], 10, None),
                                         (2, 1, [6, 3], [1, 0], 8, None)])
def test_query_seqlens(B, S, T, Q, C, W):
    rng = np.random.default_rng(sum(T) + C)
    feeds = make(rng, B, S, 4, 2, 16, T, past=C, rotary=(64, 16))
    feeds["query_seqlens"] = np.array(Q, np.int32)
    attrs = dict(num_heads=4, kv_num_heads=2, do_rotary=1)
    if W:
        attrs.update(local_window_size=W, sliding_window_cache=1)
    cache = [resident(t, C, W) for t in T] if W else T
    check(feeds, (Q, cache), **attrs)


def test_empty_batch():
    rng = np.random.default_rng(3)
    feeds = make(rng, 1, 3, 2, 1, 8, [3])
    feeds = {n: (a[:0] if n in ("query", "key", "value", "seqlens_k") else a)
             for n, a in feeds.items()}
    for naive in (False, True):
        out = run_ours(feeds, naive=naive, num_heads=2, kv_num_heads=1)
        assert out[0].shape == (0, 3, 16) and out[1].shape == (0, 1, 3, 8)


BAD = [
    # (mutation, attrs, error, match)
    (lambda f: f, dict(num_heads=3, kv_num_heads=2), ValueError, "multiple of kv_num_heads"),
    (lambda f: f, dict(num_heads=4, kv_num_heads=2, local_window_size=0), ValueError,
     "local_window_size"),
    (lambda f: f, dict(num_heads=4, kv_num_heads=2, local_window_size=-2), ValueError,
     "local_window_size"),
    (lambda f: f, dict(num_heads=4, kv_num_heads=2, local_window_size=3, causal=0), ValueError,
     "causal is 0"),
    (lambda f: f, dict(num_heads=4, kv_num_heads=2, causal=2), ValueError, "causal"),
    (lambda f: {**f, "query": f["query"][..., :-1]}, {}, ValueError, "not a multiple"),
    (lambda f: {**f, "key": f["key"][:, :2]}, {}, ValueError, "'key'"),
    (lambda f: {**f, "seqlens_k": np.array([20], np.int32)}, {}, ValueError, "seqlens_k"),
    (lambda f: {**f, "seqlens_k": np.array([-1], np.int32)}, {}, ValueError, "seqlens_k"),
    (lambda f: {**f, "seqlens_k": np.array([1], np.int32)}, {}, ValueError, "seqlens_k"),
    (lambda f: {**f, "total_sequence_length": np.array(2, np.int32)}, {}, ValueError,
     "total_sequence_length"),
    (lambda f: {**f, "past_key": f["past_key"][:, :, :2], "past_value": f["past_value"][:, :, :2]},
     {}, ValueError, "past_key.*holds 2 positions"),
    (lambda f: {**f, "past_value": f["past_value"][:, :1]}, {}, ValueError, "past_value"),
    (lambda f: {**f, "seqlens_k": f["seqlens_k"].astype(np.int64)}, {}, TypeError, "seqlens_k"),
    (lambda f: {**f, "key": f["key"].astype(np.float16)}, {}, TypeError, "'key'"),
    (lambda f: {**f, "attention_bias": np.zeros((1, 4, 3, 5), np.float32)}, {}, ValueError,
     "attention_bias"),
    (lambda f: {**f, "head_sink": np.zeros(3, np.float32)}, {}, ValueError, "head_sink"),
    (lambda f: {**f, "cos_cache": np.ones((6, 8), np.float32),
                "sin_cache": np.ones((6, 8), np.float32)},
     dict(do_rotary=1), ValueError, "cos/sin caches have 6 positions"),
    (lambda f: {**f, "cos_cache": np.ones((64, 16), np.float32),
                "sin_cache": np.ones((64, 16), np.float32)},
     dict(do_rotary=1), ValueError, "rotary dimension"),
    (lambda f: f, dict(do_rotary=1), ValueError, "cos_cache"),
    (lambda f: {**f, "q_norm_weight": np.ones(16, np.float32)}, {}, NotImplementedError,
     "q_norm_weight"),
    (lambda f: {**f, "k_norm_weight": np.ones(16, np.float32)}, {}, NotImplementedError,
     "k_norm_weight"),
    (lambda f: f, dict(k_quant_type="PER_TENSOR"), ValueError, "must be equal"),
    (lambda f: f, dict(local_window_size=8, sliding_window_cache=1), ValueError, "capacity"),
    (lambda f: f, dict(sliding_window_cache=1), ValueError, "local_window_size > 0"),
    (lambda f: {**f, "query_seqlens": np.array([5], np.int32)}, {}, ValueError, "query_seqlens"),
    (lambda f: {**f, "query": f["query"][0]}, {}, ValueError, "rank 3"),
    (lambda f: {**f, "total_sequence_length": np.array([7, 7], np.int32)}, {}, ValueError,
     "scalar"),
    (lambda f: {**f, "cos_cache": np.ones((64, 8), np.float32),
                "sin_cache": np.ones((64, 8), np.float32),
                "position_ids": np.zeros((1, 2), np.int64)}, dict(do_rotary=1), ValueError,
     "position_ids"),
    (lambda f: {k: v for k, v in f.items() if k != "past_value"}, {}, ValueError,
     "past_key and past_value"),
    (lambda f: f, dict(softcap=float("inf")), ValueError, "softcap"),
    # issue 12
    (lambda f: f, dict(do_rotary=5), ValueError, "attribute do_rotary must be 0 or 1"),
    (lambda f: f, dict(rotary_interleaved=-1), ValueError,
     "rotary_interleaved must be 0 or 1"),
    (lambda f: f, dict(smooth_softmax=2), ValueError, "smooth_softmax must be one of -1, 0, 1"),
    (lambda f: f, dict(scale=float("nan")), ValueError, "attribute scale must be finite"),
    (lambda f: {**f, "total_sequence_length": np.array(0, np.int32)}, {}, ValueError,
     r"input 6 \('total_sequence_length'\) must be positive"),
    (lambda f: {**f, "total_sequence_length": np.array(2, np.int32)}, {}, ValueError,
     r"input 6 \('total_sequence_length'\) \(2\) must be at least the sequence length 3"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
@pytest.mark.parametrize("naive", [False, True])
def test_bad_input(case, naive):
    mutate, attrs, error, match = BAD[case]
    rng = np.random.default_rng(case)
    feeds = mutate(make(rng, 1, 3, 4, 2, 16, [7], past=4))
    attrs = {"num_heads": 4, "kv_num_heads": 2, **attrs}
    with pytest.raises(error, match=match) as info:
        run_ours(feeds, naive=naive, **attrs)
    assert "GroupQueryAttention" in str(info.value)


def test_batch_rule_and_position_bounds():
    rng = np.random.default_rng(9)
    feeds = make(rng, 2, 3, 4, 2, 16, [7, 7], past=6)
    with pytest.raises(ValueError, match="batch_size must be 1"):
        run_ours(feeds, num_heads=4, kv_num_heads=2)
    feeds = make(rng, 1, 1, 4, 2, 16, [7], past=6, rotary=(10, 16), position_ids=True)
    feeds["position_ids"] = np.array([[10]], np.int64)
    with pytest.raises(ValueError, match="position"):
        run_ours(feeds, num_heads=4, kv_num_heads=2, do_rotary=1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200))
def test_random_sweep(seed):
    rng = np.random.default_rng(10_000 + seed)
    dtype = [np.float32, np.float16, bfloat16][seed % 3]
    feeds, valid, attrs = random_case(rng, dtype=dtype, odd=seed % 11 == 0)
    check(feeds, valid, oracle="naive" if seed % 11 == 0 else "ort", **attrs)


def test_caches_ignored_without_do_rotary():
    rng = np.random.default_rng(11)
    feeds = make(rng, 2, 5, 4, 2, 16, [5, 5], rotary=(16, 16))
    check(feeds, ([5, 5], [5, 5]), num_heads=4, kv_num_heads=2)


def random_cache_case(rng):
    """Windowed caches and right-padded chunks with the other options."""
    B = int(rng.integers(1, 3))
    N, Nkv = [(4, 2), (2, 1), (8, 2)][rng.integers(3)]
    H = 16 * int(rng.integers(1, 4))
    W = int(rng.integers(1, 6))
    C = W + int(rng.integers(0, 4))
    chunks = rng.random() < 0.5
    S = int(rng.integers(1, 6)) if chunks or B == 1 else 1
    T = [int(rng.integers(1, 30)) for _ in range(B)]
    Q = None
    if chunks:
        Q = [int(rng.integers(0, min(S, t) + 1)) for t in T]
    else:
        T = [max(t, S) for t in T]
    sliding = rng.random() < 0.6
    total = max(T) + (int(rng.integers(0, 3)) if chunks else 0)
    if not sliding:
        C = max(max(T), total) + int(rng.integers(0, 3))
        if not chunks and rng.random() < 0.5:
            C = max(T) - S                     # a growing cache
    attrs = dict(num_heads=N, kv_num_heads=Nkv, do_rotary=int(rng.random() < 0.5))
    if sliding:
        attrs.update(local_window_size=W, sliding_window_cache=1)
    elif rng.random() < 0.5:
        attrs["local_window_size"] = W
    if rng.random() < 0.3:
        attrs["softcap"] = 2.0
    if rng.random() < 0.3:
        attrs["smooth_softmax"] = 1
    feeds = make(rng, B, S, N, Nkv, H, T, past=C, total=total,
                 rotary=(64, H) if attrs["do_rotary"] else None,
                 bias=[None, (1, N), (B, 1)][rng.integers(3)], sink=rng.random() < 0.3,
                 position_ids=bool(attrs["do_rotary"]) and rng.random() < 0.3)
    if Q is not None:
        feeds["query_seqlens"] = np.array(Q, np.int32)
    out_rows = Q if Q is not None else ([min(S, t) for t in T] if S == total else [S] * B)
    cache = [resident(t, C, W) for t in T] if sliding else T
    return feeds, (out_rows, cache), attrs


def check_or_both_reject(feeds, valid, **attrs):
    try:
        run_ort(feeds, **attrs)
    except Exception as exc:  # ORT rejects the configuration: so must we
        with pytest.raises((ValueError, NotImplementedError)):
            run_ours(feeds, **attrs)
        return str(exc)
    check(feeds, valid, **attrs)


@pytest.mark.parametrize("seed", range(8))
def test_random_cache_layouts(seed):
    feeds, valid, attrs = random_cache_case(np.random.default_rng(20_000 + seed))
    check_or_both_reject(feeds, valid, **attrs)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(120))
def test_random_cache_layouts_sweep(seed):
    feeds, valid, attrs = random_cache_case(np.random.default_rng(30_000 + seed))
    check_or_both_reject(feeds, valid, **attrs)


def test_qk_output_with_windowed_cache_is_rejected():
    """ONNX Runtime's CPU kernel rejects this combination too."""
    rng = np.random.default_rng(12)
    feeds = make(rng, 1, 1, 4, 2, 16, [7], past=4)
    for naive in (False, True):
        with pytest.raises(NotImplementedError, match="GroupQueryAttention.*output_qk"):
            run_ours(feeds, n_out=4, naive=naive, num_heads=4, kv_num_heads=2, qk_output=1,
                     local_window_size=3, sliding_window_cache=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("B,S,P,Pbuf", [(2, 5, 0, None), (1, 1, 700, 700), (1, 20, 0, None)])
def test_nan_query_row_is_nan(dtype, B, S, P, Pbuf):
    """Issue 12: a NaN in a query row gave a row of zeros; ONNX Runtime gives
    NaN for that row (and the NAIVE family already did).  Measured quirk of
    ONNX Runtime 1.32: in a causal prefill only the LAST query row gives NaN,
    earlier NaN rows come out as zeros (causal=0, softcap or a decode give
    NaN): those rows are compared with the NAIVE family, which gives NaN."""
    rng = np.random.default_rng(S + P)
    feeds = make(rng, B, S, 4, 2, 16, [P + S] * B, past=Pbuf, dtype=dtype)
    feeds["query"][0, S - 1, 3] = np.nan               # head 0 of entry 0's last query
    feeds["query"][B - 1, S - 1, 16 * 2 + 1] = np.nan  # head 2 of the last entry's last query
    want = run_ort(feeds, num_heads=4, kv_num_heads=2)[0]
    assert np.isnan(want[0, S - 1, :16]).all() and not np.isnan(want[0, S - 1, 16:32]).any()
    check(feeds, ([S] * B, [P + S] * B), num_heads=4, kv_num_heads=2)
    for attrs in ({}, {"causal": 0}):
        f = make(rng, B, S, 4, 2, 16, [P + S] * B, past=Pbuf, dtype=dtype)
        f["query"][B - 1, 0, 16 + 2] = np.nan             # head 1 of the first query
        got = run_ours(f, num_heads=4, kv_num_heads=2, **attrs)[0]
        assert np.isnan(got[B - 1, 0, 16:32]).all() and not np.isnan(got[B - 1, 0, :16]).any()
        check(f, ([S] * B, [P + S] * B), oracle="ort" if attrs else "naive", num_heads=4,
              kv_num_heads=2, **attrs)


@pytest.mark.parametrize("naive", [False, True])
def test_growing_cache_reuses_the_plan(naive, monkeypatch):
    """A decode step's past is one row longer than the last step's: the
    plan of the last length is reused (P replaced), and every step gives
    ORT's result; a past_value whose length differs from past_key's is
    still refused, by the same words as without a plan."""
    from onnx_light_cpu.ops import group_query_attention as gqa

    calls = []
    plan = gqa.GroupQueryAttentionBase._plan
    monkeypatch.setattr(gqa.GroupQueryAttentionBase, "_plan",
                        lambda self, *a: calls.append(1) or plan(self, *a))
    rng = np.random.default_rng(7)
    attrs = dict(num_heads=4, kv_num_heads=2, do_rotary=1)
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    first = make(rng, 1, 1, 4, 2, 16, [5], past=4, rotary=(32, 16))
    sess = ReferenceEvaluator(model(first, **attrs))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_kernel_usage_recording(sess, True)
    for past in range(4, 12):
        feeds = make(rng, 1, 1, 4, 2, 16, [past + 1], past=past, rotary=(32, 16))
        got = sess.run(None, feeds)
        compare(got, run_ort(feeds, **attrs), ([1], [past + 1]), f"past {past}",
                TOL[np.dtype(np.float32)])
    assert len(calls) == 1, f"{len(calls)} plans for 8 steps"
    want = "onnx_light_cpu::" + ("Naive" if naive else "") + "GroupQueryAttention"
    assert want in olc.used_kernel_names(sess), olc.used_kernel_names(sess)
    feeds["past_value"] = feeds["past_value"][:, :, :-1]
    with pytest.raises(ValueError, match=r"input 4 \('past_value'\) must have shape"):
        sess.run(None, feeds)


ONE_ROW_ATTRS = [dict(), dict(do_rotary=1), dict(do_rotary=1, rotary_interleaved=1),
                 dict(do_rotary=1, softcap=3.0), dict(do_rotary=1, local_window_size=4),
                 dict(scale=0.3, causal=0)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16])
@pytest.mark.parametrize("attrs", ONE_ROW_ATTRS)
@pytest.mark.parametrize("P,lens,total,shared", [
    (7, [8], 8, False),      # growing cache
    (12, [8], 8, False),     # static buffer, copied
    (12, [8], 8, True),      # static buffer, shared
    (12, [6], 8, True),      # a shared buffer with rows between the entry and total
    (300, [301], 301, False)])   # keys in chunks
def test_one_row_decode_is_the_general_route(dtype, attrs, P, lens, total, shared, monkeypatch):
    """One entry and one new token take core.decode_row, one call: the bits
    of the general route (rows, rotation, append, attend) at every SIMD level
    and 1 and 2 threads, and ONNX Runtime's result (float32)."""
    from onnx_light_cpu.ops import group_query_attention as gqa
    from onnx_light_cpu.registry import hook

    N, Nkv, H = 4, 2, 32
    rng = np.random.default_rng(P + 7 * len(attrs))
    rotary = (P + 8, 16) if attrs.get("do_rotary") else None   # half the head rotated
    feeds = make(rng, 1, 1, N, Nkv, H, lens, past=P, total=total, dtype=dtype, packed=True,
                 rotary=rotary)
    attrs = dict(num_heads=N, kv_num_heads=Nkv, **attrs)
    calls = []
    decode_row = gqa.core.decode_row
    monkeypatch.setattr(gqa.core, "decode_row", lambda *a: calls.append(1) or decode_row(*a))

    def runs():
        outs = []
        for level in available_simd_levels():
            with capped_simd_level(level):
                for threads in (1, 2):
                    sess = ReferenceEvaluator(model(feeds, **attrs))
                    olc.register_kernels_for_session(sess)
                    olc.set_num_threads_for_session(sess, threads)
                    olc.set_kernel_usage_recording(sess, True)
                    hook.context_of(sess).share_kv_buffers = shared
                    past = {n: feeds[n].copy() for n in ("past_key", "past_value")}
                    got = sess.run(None, {**feeds, **past})
                    assert "onnx_light_cpu::GroupQueryAttention" in olc.used_kernel_names(sess)
                    assert (got[1] is past["past_key"]) == shared
                    outs.append(got)
        return outs

    one_row = runs()
    assert len(calls) == len(one_row)
    monkeypatch.setattr(gqa.GroupQueryAttention, "_decode_row", lambda *a: None)
    general = runs()
    assert len(calls) == len(one_row)
    for a, b in zip(one_row, general):
        assert all(same_bits(x, y) for x, y in zip(a, b))
    if dtype == np.float32 and attrs.get("causal", 1) and not shared:
        compare(one_row[0], run_ort(feeds, **attrs), ([1], lens), "one row vs ORT",
                TOL[np.dtype(dtype)])


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("past", [None, 3, 8])
def test_total_sequence_length_follows_ort(naive, past):
    """Issue 12: without a past, any total_sequence_length was taken (2^24
    allocated two 1 GiB caches for a 2-token prompt).  ONNX Runtime 1.32
    (measured): total_sequence_length must be positive and equal past
    length + sequence length (a growing cache, past length 0 without one) or
    be at most past_key's length (a static cache); seqlens_k in [0, total)."""
    rng = np.random.default_rng(11)
    P = past or 0
    S = 2
    feeds = make(rng, 1, S, 4, 2, 16, [P + S], past=past)
    attrs = dict(num_heads=4, kv_num_heads=2)
    bad = [0, -1, P + S + 1, 1 << 24, 2**31 - 1]
    if past is None:
        bad.append(S - 1)
    for total in bad:
        if past is not None and 0 < total <= P:
            continue
        f = {**feeds, "total_sequence_length": np.array(total, np.int32)}
        with pytest.raises((Fail, InvalidArgument, RuntimeException)):
            run_ort(f, **attrs)
        with pytest.raises(ValueError, match=r"GroupQueryAttention: input 6 "
                                             r"\('total_sequence_length'\)"):
            run_ours(f, naive=naive, **attrs)
    good = [P + S] + ([t for t in range(P - 1, P + 1) if t >= S] if past == 8 else [])
    for total in good:
        f = {**feeds, "total_sequence_length": np.array(total, np.int32),
             "seqlens_k": np.array([min(P + S, total) - 1], np.int32)}
        want = run_ort(f, **attrs)
        got = run_ours(f, naive=naive, **attrs)   # checks that our kernel ran
        assert [g.shape for g in got] == [w.shape for w in want]


def batch_repeated(feeds, keep=()):
    """The feeds with every batch entry equal to the first (those named in
    ``keep`` and scalars as they are), so that a broadcast (stride 0) batch
    axis is a valid input."""
    return {n: np.ascontiguousarray(np.broadcast_to(a[:1], a.shape))
            if a.ndim and n not in keep else a for n, a in feeds.items()}


def check_layouts(feeds, naive, **attrs):
    """Every layout of every input gives the bits of the C-contiguous feeds
    and leaves the input untouched."""
    want = run_ours(feeds, naive=naive, **attrs)
    for name, a in feeds.items():
        for what, x in layouts(a):
            before = x.copy()
            got = run_ours({**feeds, name: x}, naive=naive, **attrs)
            for g, w in zip(got, want):
                assert same_bits(g, w), f"{name} {what}"
            assert same_bits(x, before), f"{name} {what}: input modified"


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("B,S,P", [(2, 1, 6), (2, 4, 0)])
def test_any_input_layout(naive, packed, B, S, P):
    """Issue 12: a strided or broadcast query was rejected with "attend: q
    must have a contiguous last axis" (naming neither operator nor input).
    Every layout gives the bits of the C-contiguous input; inputs untouched."""
    rng = np.random.default_rng(21)
    feeds = make(rng, B, S, 4, 2, 16, [P + S] * B, past=P or None, rotary=(16, 16), bias=(B, 1),
                 sink=True, packed=packed)
    check_layouts(batch_repeated(feeds), naive, num_heads=4, kv_num_heads=2, do_rotary=1)


@pytest.mark.parametrize("naive", [False, True])
def test_sizes_checked_before_allocating(naive):
    """Issue 12: the present caches (and output_qk) are sized first: what
    cannot fit in memory is a MemoryError naming the operator, the output
    and the byte count, before any allocation (here a broadcast static
    cache of 2^31 positions: 2 x 128 GiB of present)."""
    rng = np.random.default_rng(2)
    feeds = make(rng, 1, 1, 4, 2, 16, [4], past=3)
    big = (1, 2, 1 << 31, 16)
    feeds["past_key"] = np.broadcast_to(feeds["past_key"][:, :, :1], big)
    feeds["past_value"] = np.broadcast_to(feeds["past_value"][:, :, :1], big)
    with pytest.raises(MemoryError, match=r"GroupQueryAttention: output 1 \(present_key.*"
                                          r"needs 274877906944 bytes"):
        run_ours(feeds, naive=naive, num_heads=4, kv_num_heads=2)


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("name,value", [
    ("past_key", [[1.0]]), ("query", [[1.0]]), ("seqlens_k", [6]),
    ("total_sequence_length", 7.0), ("cos_cache", [1.0]), ("attention_bias", 0.5)])
def test_python_values_instead_of_tensors(naive, name, value):
    """Issue 12: a Python list or float where a tensor is expected is a
    TypeError naming the operator and the input (a list past_key was an
    AttributeError)."""
    rng = np.random.default_rng(4)
    feeds = make(rng, 1, 3, 4, 2, 16, [7], past=4, rotary=(16, 16), bias=(1, 1))
    sess = ReferenceEvaluator(model(feeds, 3, num_heads=4, kv_num_heads=2, do_rotary=1))
    olc.register_kernels_for_session(sess, microsoft_implementation=(
        olc.MicrosoftKernelImplementation.NAIVE if naive
        else olc.MicrosoftKernelImplementation.OPTIMIZED))
    with pytest.raises(TypeError, match=rf"GroupQueryAttention: input \d+ \('{name}'\) must be a "
                                        rf"tensor"):
        sess.run(None, {**feeds, name: value})


# -- quantized KV caches (k_quant_type / v_quant_type, kv_cache_bit_width) --
#
# ONNX Runtime 1.32's CPU kernel (measured): int8 caches [B, Nkv, P, H],
# 4-bit caches uint8 [B, Nkv, P, H/2] holding code + 8 (low nibble the even
# channel); new K/V (after the packed split and rotary) quantized as
# clamp(round-half-even(x * float32(1/scale))), NaN to the largest code, a
# zero scale multiplying by 1; attention over the float32 dequantized cache,
# the step's own keys included, at prefill too.

def quant_feeds(rng, B, S, N, Nkv, H, lens, P, bits, kind, *, dtype=np.float32, scale_shape=None,
                **kw):
    """``make`` with a quantized past cache of length P and its scales."""
    f = make(rng, B, S, N, Nkv, H, lens, dtype=dtype, **kw)
    Hc = H if bits == 8 else H // 2
    for n in ("past_key", "past_value"):
        f[n] = (rng.integers(-128, 128, (B, Nkv, P, Hc)).astype(np.int8) if bits == 8
                else rng.integers(0, 256, (B, Nkv, P, Hc)).astype(np.uint8))
    # scales such that most new values fall inside the code range
    top = 3.0 / (127 if bits == 8 else 7)
    for n in ("k_scale", "v_scale"):
        if kind == "PER_TENSOR":
            f[n] = np.full(scale_shape or (1,), top, np.float32)
        else:
            f[n] = rng.uniform(0.5 * top, 1.5 * top, scale_shape or (1, Nkv, 1, H)).astype(
                np.float32)
    return f


def quant_attrs(N, Nkv, bits, kind, **attrs):
    return dict(num_heads=N, kv_num_heads=Nkv, k_quant_type=kind, v_quant_type=kind,
                kv_cache_bit_width=bits, **attrs)


def nibbles(x):
    """4-bit caches as their codes (a byte compare would hide which one)."""
    if x.dtype != np.uint8:
        return x
    return np.stack([x & 15, x >> 4], axis=-1).reshape(x.shape[:-1] + (-1,))


def check_quant(feeds, valid, n_out=3, **attrs):
    """ORT against NAIVE and every SIMD level and thread count of OPTIMIZED:
    codes equal, outputs within tolerance, the same bits at 1 and 2 threads.
    Returns ORT's outputs."""
    tol = TOL[feeds["query"].dtype]
    originals = {n: a.copy() for n, a in feeds.items()}
    want = run_ort(feeds, n_out, **attrs)
    unpack = lambda outs: [outs[0], nibbles(outs[1]), nibbles(outs[2])] + outs[3:]  # noqa: E731
    compare(unpack(run_ours(feeds, n_out, naive=True, **attrs)), unpack(want), valid,
            "naive vs ORT", tol)
    for level in available_simd_levels():
        with capped_simd_level(level):
            per_thread = []
            for threads in THREAD_COUNTS:
                got = run_ours(feeds, n_out, threads=threads, **attrs)
                compare(unpack(got), unpack(want), valid, f"{level} {threads} threads", tol)
                per_thread.append(got)
            for a, b in thread_pairs(per_thread):
                assert same_bits(a, b), f"{level}: thread count changed the result"
    for n, a in feeds.items():
        assert same_bits(a, originals[n]), f"input {n} modified"
    return want


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("kind", ["PER_TENSOR", "PER_CHANNEL"])
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("packed,rotary", [(False, False), (True, True)])
def test_quantized_cache_prefill_then_two_decode_steps(dtype, kind, bits, packed, rotary):
    """A prompt of 5 tokens into an empty cache, then two decode steps each
    fed the previous step's present cache (ORT's, so that each step is
    compared on its own)."""
    rng = np.random.default_rng(bits * 10 + len(kind) + packed)
    N, Nkv, H, S0 = 4, 2, 32, 5
    attrs = quant_attrs(N, Nkv, bits, kind, **({"do_rotary": 1} if rotary else {}))
    rot = (16, H) if rotary else None
    feeds = quant_feeds(rng, 1, S0, N, Nkv, H, [S0], 0, bits, kind, dtype=dtype, packed=packed,
                        rotary=rot)
    present = check_quant(feeds, ([S0], [S0]), **attrs)[1:]
    for step in (1, 2):
        T = S0 + step
        f = quant_feeds(rng, 1, 1, N, Nkv, H, [T], 0, bits, kind, dtype=dtype, packed=packed,
                        rotary=rot)
        f.update(past_key=present[0], past_value=present[1], k_scale=feeds["k_scale"],
                 v_scale=feeds["v_scale"])
        for n in ("cos_cache", "sin_cache"):
            if rotary:
                f[n] = feeds[n]
        present = check_quant(f, ([1], [T]), **attrs)[1:]


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("case", ["batch_padded_decode", "static_cache", "continuation",
                                  "window_softcap_sink_bias", "long_decode"])
def test_quantized_cache_configurations(bits, case):
    rng = np.random.default_rng(bits + len(case))
    N, Nkv, H = 4, 2, 16
    kind = "PER_CHANNEL" if len(case) % 2 else "PER_TENSOR"
    extra = {}
    if case == "batch_padded_decode":      # entries of different lengths, one step each
        f = quant_feeds(rng, 3, 1, N, Nkv, H, [7, 3, 5], 6, bits, kind)
        valid = ([1, 1, 1], [7, 3, 5])
    elif case == "static_cache":           # a buffer longer than total_sequence_length
        f = quant_feeds(rng, 1, 1, N, Nkv, H, [6], 9, bits, kind)
        valid = ([1], [6])
    elif case == "continuation":           # 3 new tokens after 6 cached
        f = quant_feeds(rng, 1, 3, N, Nkv, H, [9], 6, bits, kind)
        valid = ([3], [9])
    elif case == "window_softcap_sink_bias":
        f = quant_feeds(rng, 1, 4, N, Nkv, H, [10], 6, bits, kind, bias=(1, N), sink=True)
        extra = dict(local_window_size=3, softcap=2.0)
        valid = ([4], [10])
    else:                                  # several decode chunks of the engine
        f = quant_feeds(rng, 1, 1, 8, 2, 64, [700], 699, bits, kind)
        N, Nkv = 8, 2
        valid = ([1], [700])
    check_quant(f, valid, **quant_attrs(N, Nkv, bits, kind, **extra))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("B,S,T,C,W", [(1, 1, [6], 4, 3), (1, 3, [8], 5, 3), (2, 1, [6, 3], 4, 3),
                                       (1, 6, [6], 4, 3)])
def test_quantized_sliding_window_cache(bits, B, S, T, C, W):
    rng = np.random.default_rng(C * 10 + W + S + bits)
    kind = "PER_CHANNEL" if S % 2 else "PER_TENSOR"
    H = 16 if bits == 8 else 32   # ORT: a multiple of 32 for a windowed 4-bit cache
    f = quant_feeds(rng, B, S, 4, 2, H, T, C, bits, kind, rotary=(64, H))
    check_quant(f, ([S] * B, [resident(t, C, W) for t in T]),
                **quant_attrs(4, 2, bits, kind, local_window_size=W, sliding_window_cache=1,
                              do_rotary=1))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("kind,shape", [("PER_TENSOR", ()), ("PER_TENSOR", (1,)),
                                        ("PER_TENSOR", (1, 1, 1, 1)),
                                        ("PER_CHANNEL", (1, 2, 1, 16)),
                                        ("PER_CHANNEL", (2, 1, 16)), ("PER_CHANNEL", (2, 16)),
                                        ("PER_CHANNEL", (32,))])
def test_quantized_cache_scale_shapes(bits, kind, shape):
    rng = np.random.default_rng(len(shape) * 3 + bits)
    f = quant_feeds(rng, 1, 1, 4, 2, 16, [5], 4, bits, kind, scale_shape=shape)
    check_quant(f, ([1], [5]), **quant_attrs(4, 2, bits, kind))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("mode", [1, 2])
def test_quantized_cache_qk_output(bits, mode):
    rng = np.random.default_rng(bits + mode)
    f = quant_feeds(rng, 1, 3, 4, 2, 16, [7], 4, bits, "PER_CHANNEL")
    check_quant(f, ([3], [7]), n_out=4, **quant_attrs(4, 2, bits, "PER_CHANNEL", qk_output=mode))


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_cache_query_seqlens(bits):
    rng = np.random.default_rng(bits)
    f = quant_feeds(rng, 2, 4, 4, 2, 32, [6, 3], 8, bits, "PER_TENSOR", rotary=(64, 32))
    f["query_seqlens"] = np.array([2, 3], np.int32)
    check_quant(f, ([2, 3], [6, 3]), **quant_attrs(4, 2, bits, "PER_TENSOR", do_rotary=1))


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_cache_special_values(bits):
    """NaN and infinite keys (NaN to the largest code), zero, infinite and
    NaN scales (a zero scale multiplies by 1), as ONNX Runtime."""
    rng = np.random.default_rng(40 + bits)
    f = quant_feeds(rng, 1, 1, 4, 2, 16, [5], 4, bits, "PER_CHANNEL")
    f["key"][0, 0, :4] = [np.nan, np.inf, -np.inf, 1e9]
    f["k_scale"][0, 1, 0, :3] = [0, np.inf, np.nan]
    f["v_scale"][0, 0, 0, 5] = 0
    check_quant(f, ([1], [5]), **quant_attrs(4, 2, bits, "PER_CHANNEL"))


def test_scales_ignored_without_quantization():
    """ONNX Runtime reads k_scale/v_scale only with a quantized cache."""
    rng = np.random.default_rng(5)
    f = make(rng, 1, 1, 4, 2, 16, [5], past=4)
    f.update(k_scale=np.array([3.0, 1.0], np.float32), v_scale=np.array([5.0], np.float32))
    check(f, ([1], [5]), num_heads=4, kv_num_heads=2)


BAD_QUANT = [
    # (mutation, attrs, error, match); attrs over quant_attrs(4, 2, 8, PER_TENSOR)
    (lambda f: f, dict(v_quant_type="PER_CHANNEL"), ValueError,
     r"k_quant_type \('PER_TENSOR'\) and v_quant_type \('PER_CHANNEL'\) must be equal"),
    (lambda f: f, dict(kv_cache_bit_width=0), ValueError, "kv_cache_bit_width must be 4 or 8"),
    (lambda f: f, dict(kv_cache_bit_width=6), ValueError, "kv_cache_bit_width must be 4 or 8"),
    (lambda f: f, dict(k_quant_type="NONE", v_quant_type="NONE"), ValueError,
     "kv_cache_bit_width must be 0"),
    (lambda f: f, dict(k_quant_type="PER_BLOCK", v_quant_type="PER_BLOCK"), ValueError,
     "k_quant_type"),
    (lambda f: {n: a for n, a in f.items() if n != "k_scale"}, {}, ValueError,
     r"input 12 \('k_scale'\) is required"),
    (lambda f: {n: a for n, a in f.items() if n != "v_scale"}, {}, ValueError,
     r"input 13 \('v_scale'\) is required"),
    (lambda f: {**f, "k_scale": np.ones(2, np.float32)}, {}, ValueError,
     r"input 12 \('k_scale'\) must have 1 elements"),
    (lambda f: {**f, "v_scale": np.ones(16, np.float32)}, dict(k_quant_type="PER_CHANNEL",
                                                               v_quant_type="PER_CHANNEL"),
     ValueError, r"input 12 \('k_scale'\) must have 32 elements"),
    (lambda f: {**f, "v_scale": np.ones(1, np.float16)}, {}, TypeError,
     r"input 13 \('v_scale'\) has element type float16, expected float32"),
    (lambda f: {**f, "past_key": f["past_key"].view(np.uint8)}, {}, TypeError,
     r"input 3 \('past_key'\) has element type uint8, expected int8 for kv_cache_bit_width 8"),
    (lambda f: f, dict(kv_cache_bit_width=4), TypeError,
     r"input 3 \('past_key'\) has element type int8, expected uint8 for kv_cache_bit_width 4"),
    (lambda f: {**f, "past_key": f["past_key"].astype(np.float32),
                "past_value": f["past_value"].astype(np.float32)}, {}, TypeError,
     r"input 3 \('past_key'\) has element type float32, expected int8"),
    (lambda f: {**f, "past_key": f["past_key"].view(np.uint8)[..., :8],
                "past_value": f["past_value"].view(np.uint8)[..., :8]}, {}, TypeError,
     "expected int8"),
    (lambda f: {**f, "past_value": f["past_value"][..., :8]}, {}, ValueError,
     r"input 4 \('past_value'\) must have shape"),
    (lambda f: {n: a for n, a in f.items() if n not in ("past_key", "past_value")}, {},
     ValueError, "needs past_key and past_value"),
]


@pytest.mark.parametrize("case", range(len(BAD_QUANT)))
@pytest.mark.parametrize("naive", [False, True])
def test_quantized_cache_bad_input(case, naive):
    """A clear error naming the operator (and the input), before any buffer
    is touched; ONNX Runtime rejects each of these too."""
    mutate, attrs, error, match = BAD_QUANT[case]
    rng = np.random.default_rng(case)
    feeds = mutate(quant_feeds(rng, 1, 1, 4, 2, 16, [5], 4, 8, "PER_TENSOR"))
    attrs = {**quant_attrs(4, 2, 8, "PER_TENSOR"), **attrs}
    with pytest.raises((Fail, InvalidArgument, InvalidGraph, RuntimeException)):
        run_ort(feeds, **attrs)
    with pytest.raises(error, match=match) as info:
        run_ours(feeds, naive=naive, **attrs)
    assert "GroupQueryAttention" in str(info.value)


def test_quantized_cache_odd_head_size_for_4_bits():
    rng = np.random.default_rng(6)
    f = quant_feeds(rng, 1, 1, 2, 1, 6, [3], 2, 8, "PER_TENSOR")
    f["query"] = f["query"][..., :10]
    f["key"], f["value"] = f["key"][..., :5], f["value"][..., :5]
    f["past_key"] = f["past_value"] = np.zeros((1, 1, 2, 2), np.uint8)
    for naive in (False, True):
        with pytest.raises(ValueError, match="GroupQueryAttention.*even head size"):
            run_ours(f, naive=naive, **quant_attrs(2, 1, 4, "PER_TENSOR"))


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("packed", [False, True])
def test_quantized_cache_any_input_layout(naive, bits, packed):
    """Strided, broadcast, misaligned and read-only inputs (codes and scales
    included) give the bits of the C-contiguous ones and stay untouched."""
    rng = np.random.default_rng(22 + bits)
    feeds = quant_feeds(rng, 2, 1, 4, 2, 16, [7, 7], 6, bits, "PER_CHANNEL", packed=packed,
                        rotary=(16, 16))
    check_layouts(batch_repeated(feeds, keep=("k_scale", "v_scale")), naive,
                  **quant_attrs(4, 2, bits, "PER_CHANNEL", do_rotary=1))


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_cache_empty_batch(bits):
    rng = np.random.default_rng(3)
    feeds = quant_feeds(rng, 1, 3, 2, 1, 8, [3], 0, bits, "PER_TENSOR")
    feeds = {n: (a[:0] if n in ("query", "key", "value", "seqlens_k", "past_key", "past_value")
                 else a) for n, a in feeds.items()}
    for naive in (False, True):
        out = run_ours(feeds, naive=naive, **quant_attrs(2, 1, bits, "PER_TENSOR"))
        assert out[0].shape == (0, 3, 16) and out[1].shape == (0, 1, 3, 8 if bits == 8 else 4)


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_cache_bfloat16_against_float32_oracle(bits):
    """ONNX Runtime has no bfloat16 GroupQueryAttention: ORT in float32 on the
    rounded inputs (the codes of bfloat16 keys are those of their float32
    values), the output within bfloat16's tolerance."""
    rng = np.random.default_rng(60 + bits)
    f = quant_feeds(rng, 1, 3, 4, 2, 16, [7], 4, bits, "PER_CHANNEL", dtype=bfloat16)
    attrs = quant_attrs(4, 2, bits, "PER_CHANNEL")
    f32 = {n: a.astype(np.float32) if a.dtype == bfloat16 else a for n, a in f.items()}
    want = run_ort(f32, **attrs)
    want[0] = want[0].astype(bfloat16)
    for naive in (False, True):
        got = run_ours(f, naive=naive, **attrs)
        compare([got[0], nibbles(got[1]), nibbles(got[2])],
                [want[0], nibbles(want[1]), nibbles(want[2])], ([3], [7]), "bfloat16",
                TOL[np.dtype(bfloat16)])


@pytest.mark.parametrize("bits", [0, 8, 4])
@pytest.mark.parametrize("B,S,lens", [(1, 1, [7]), (3, 1, [5, 9, 2]), (1, 4, [4]), (2, 6, [6, 3])])
def test_shared_static_buffer_in_place(bits, B, S, lens):
    """The evaluator context's share_kv_buffers (the Generator's shared static
    buffers): the new rows go into the past buffers, which come back as the
    presents, and the output and each entry's cache rows equal a run that
    copies; the rows from total_sequence_length on keep what they held (a
    static buffer of the whole context is not cleared every step)."""
    from onnx_light_cpu.registry import hook

    rng = np.random.default_rng(B * 31 + S + bits)
    N, Nkv, H, C = 4, 2, 32, 12
    kind = "PER_TENSOR"
    if bits:
        feeds = quant_feeds(rng, B, S, N, Nkv, H, lens, C, bits, kind, total=max(lens))
        attrs = quant_attrs(N, Nkv, bits, kind)
    else:
        feeds = make(rng, B, S, N, Nkv, H, lens, past=C)
        attrs = dict(num_heads=N, kv_num_heads=Nkv)
    want = run_ours(feeds, **attrs)
    sess = ReferenceEvaluator(model(feeds, **attrs))
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    hook.context_of(sess).share_kv_buffers = True
    past = {n: feeds[n].copy() for n in ("past_key", "past_value")}
    got = sess.run(None, {**feeds, **past})
    assert "onnx_light_cpu::GroupQueryAttention" in olc.used_kernel_names(sess)
    assert got[1] is past["past_key"] and got[2] is past["past_value"]
    np.testing.assert_array_equal(got[0], want[0])
    for b, n in enumerate(lens):
        for i in (1, 2):
            np.testing.assert_array_equal(got[i][b, :, :n], want[i][b, :, :n])
    total = int(feeds["total_sequence_length"].item())
    assert total < C
    for i, name in ((1, "past_key"), (2, "past_value")):
        assert feeds[name][:, :, total:].any()
        np.testing.assert_array_equal(got[i][:, :, total:], feeds[name][:, :, total:])
    # a read-only past is left alone: the kernel copies as usual
    frozen = {n: feeds[n].copy() for n in ("past_key", "past_value")}
    for a in frozen.values():
        a.flags.writeable = False
    got = sess.run(None, {**feeds, **frozen})
    assert got[1] is not frozen["past_key"] and same_bits(frozen["past_key"], feeds["past_key"])
    np.testing.assert_array_equal(got[1], want[1])
