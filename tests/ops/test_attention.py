"""ai.onnx Attention (opsets 23, 24, 25): differential tests against the
onnx.reference built-in on random configurations of every attribute,
optional input, mask form and output, in float32, float16, bfloat16 and
double, at every SIMD level and 1/2 threads; fully-masked rows; strided and
empty inputs; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import (
    THREAD_COUNTS,
    assert_close,
    check_node,
    layouts,
    node_model,
    run_builtin,
    run_ours,
    same_bits,
    thread_pairs,
    unaligned,
)

# (rtol, atol) per dtype.  float32: the built-in scales Q and K by
# sqrt(scale) each and sums in another order (the outputs are O(1) averages
# of values); float16: the built-in rounds the scores and the probabilities
# to float16, the engine keeps float32 until the output; bfloat16 and double
# run a NumPy path that rounds like the built-in.
TOL = {
    np.dtype(np.float32): (3e-5, 3e-6),
    np.dtype(np.float16): (1e-2, 4e-3),
    np.dtype(bfloat16): (1e-2, 1e-2),
    np.dtype(np.float64): (1e-10, 1e-12),
}
KERNEL = "onnx_light_cpu::Attention"


def random_case(rng: np.random.Generator, dtype, opset: int, large: bool = False):
    """Inputs, output count and attributes of one random Attention node."""
    b = int(rng.integers(1, 3))
    nkv = int(rng.choice([1, 2, 3]))
    nq = nkv * int(rng.choice([1, 2, 3]))
    s = int(rng.choice([1, 2, 5, 8]))
    L = int(rng.choice([1, 3, 6, 9]))
    dk = int(rng.choice([4, 8, 16, 17]))
    dv = int(rng.choice([dk, 5]))
    if large:  # above the two-thread threshold
        b, nq, nkv, s, L, dk, dv = 1, 4, 2, 64, 128, 64, 64
    rank = int(rng.choice([3, 4]))
    attrs = {}
    past = int(rng.choice([0, 0, 1, 4])) if opset < 24 or rng.random() < 0.6 else 0
    use_nonpad = opset >= 24 and past == 0 and rng.random() < 0.4
    t = past + L

    def tensor(*shape):
        return rng.standard_normal(shape).astype(dtype)

    if rank == 3:
        q, k, v = tensor(b, s, nq * dk), tensor(b, L, nkv * dk), tensor(b, L, nkv * dv)
        attrs.update(q_num_heads=nq, kv_num_heads=nkv)
    else:
        q, k, v = tensor(b, nq, s, dk), tensor(b, nkv, L, dk), tensor(b, nkv, L, dv)
    inputs = [q, k, v]
    mask = None
    kind = rng.choice(["none", "bool", "float"])
    if kind != "none":
        mrank = int(rng.integers(2, 5))
        full = (b, nq, s, t)[4 - mrank:]
        shape = [d if rng.random() < 0.6 else 1 for d in full[:-1]]
        width = t if rng.random() < 0.7 else int(rng.integers(1, t + 1))  # short mask
        shape.append(width)
        if kind == "bool":
            mask = rng.random(shape) < 0.75
        else:
            mask = (rng.standard_normal(shape) * 2).astype(dtype)
    inputs.append(mask)
    if past:
        inputs += [tensor(b, nkv, past, dk), tensor(b, nkv, past, dv)]
    elif use_nonpad:
        inputs += [None, None]
    if use_nonpad:
        inputs.append(rng.integers(0, t + 1, size=b).astype(np.int64))
    if rng.random() < 0.5:
        attrs["is_causal"] = 1
    if rng.random() < 0.3:
        attrs["scale"] = float(rng.uniform(0.05, 0.5))
    if rng.random() < 0.3:
        attrs["softcap"] = float(rng.choice([1.0, 2.5]))
    if opset >= 25 and rng.random() < 0.5:
        attrs["left_window_size"] = int(rng.choice([-1, 0, 1, 3]))
        if not attrs.get("is_causal"):
            attrs["right_window_size"] = int(rng.choice([-1, 0, 2]))
    if rng.random() < 0.2:
        attrs["softmax_precision"] = 1
    n_out = 1
    if rng.random() < 0.6:
        n_out = 4
        attrs["qk_matmul_output_mode"] = int(rng.integers(0, 4))
    elif past:
        n_out = 3
    return inputs, n_out, attrs


def attention_model(inputs, n_out, opset, attrs):
    """A one-node model and its feeds; an absent (None) inner input gets an
    empty name, trailing ones are dropped."""
    while inputs[-1] is None:
        inputs = inputs[:-1]
    model = node_model("Attention", [x if x is not None else np.zeros(0, np.float32)
                                     for x in inputs], n_outputs=n_out, opset=opset, **attrs)
    for i, x in enumerate(inputs):
        if x is None:
            model.graph.node[0].input[i] = ""
    present = [x for x in inputs if x is not None]
    names = [model.graph.input[i].name for i, x in enumerate(inputs) if x is not None]
    model.graph.ClearField("input")
    model.graph.input.extend(
        oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(x.dtype), [None] * x.ndim)
        for n, x in zip(names, present))
    return model, dict(zip(names, present))


def check_attention(inputs, n_out, opset, attrs, tolerance=None):
    dtype = np.dtype(inputs[0].dtype)
    while inputs[-1] is None:
        inputs = inputs[:-1]
    model, feeds = attention_model(inputs, n_out, opset, attrs)
    present = list(feeds.values())
    oracle_feeds = dict(feeds)
    mask = inputs[3] if len(inputs) > 3 else None
    if attrs.get("is_causal") and mask is not None and mask.shape[-2] == 1:
        # The built-in sizes its causal mask from attn_mask's own query
        # dimension, so a mask broadcast over the queries makes every query
        # row causal like the first: the oracle gets the mask expanded.
        s = inputs[0].shape[-2] if inputs[0].ndim == 4 else inputs[0].shape[1]
        name = model.graph.node[0].input[3]
        oracle_feeds[name] = np.ascontiguousarray(
            np.broadcast_to(mask, mask.shape[:-2] + (s, mask.shape[-1])))
    expected = ReferenceEvaluator(model).run(None, oracle_feeds)
    tolerance = tolerance or TOL[dtype]

    def oracle(*_):
        return [e.astype(dtype) if e.dtype != dtype and k == 0 else e
                for k, e in enumerate(expected)]

    if all(x is not None for x in inputs):
        check_node("Attention", inputs, oracle=oracle, tolerance=tolerance, n_outputs=n_out,
                   opset=opset, **attrs)
        return
    # inner absent inputs: run ours directly at every level and thread count
    from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

    originals = [x.copy() for x in present]
    for level in available_simd_levels():
        with capped_simd_level(level):
            runs = []
            for threads in THREAD_COUNTS:
                sess = ReferenceEvaluator(model)
                olc.register_kernels_for_session(sess)
                olc.set_num_threads_for_session(sess, threads)
                olc.set_kernel_usage_recording(sess, True)
                got = sess.run(None, feeds)
                assert KERNEL in olc.used_kernel_names(sess)
                for k, (g, w) in enumerate(zip(got, oracle())):
                    assert_close(g, w, f"output {k} at {level}, {threads} threads {attrs}",
                                 tolerance)
                runs.append(got)
            for g1, g2 in thread_pairs(runs):
                assert g1.tobytes() == g2.tobytes(), "thread count changed the result"
    for x, original in zip(present, originals):
        assert x.tobytes() == original.tobytes(), "input modified"


@pytest.mark.parametrize("opset", [23, 24, 25])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.float64],
                         ids=["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("seed", range(12))
def test_attention_random_vs_builtin(opset, dtype, seed):
    rng = np.random.default_rng(1000 * opset + 10 * seed + np.dtype(dtype).itemsize)
    inputs, n_out, attrs = random_case(rng, dtype, opset)
    check_attention(inputs, n_out, opset, attrs)


@pytest.mark.slow
@pytest.mark.parametrize("opset", [23, 24, 25])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16, np.float64],
                         ids=["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("seed", range(12, 60))
def test_attention_random_vs_builtin_sweep(opset, dtype, seed):
    test_attention_random_vs_builtin(opset, dtype, seed)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_attention_two_threads(dtype):
    """A problem above the two-thread threshold: identical at 1 and 2 threads."""
    rng = np.random.default_rng(7)
    inputs, n_out, attrs = random_case(rng, dtype, 23, large=True)
    attrs = {k: v for k, v in attrs.items() if k != "qk_matmul_output_mode"}
    check_attention(inputs[:4] if inputs[3] is not None else inputs[:3], 1, 23, attrs)


@pytest.mark.parametrize("rank", [3, 4])
def test_attention_causal_past_grouped(rank):
    """Bottom-right causal alignment with a past cache, grouped heads, qk
    output with the bias (mode 2) and after the softmax (mode 3)."""
    rng = np.random.default_rng(rank)
    b, nq, nkv, s, L, p, d = 2, 6, 2, 3, 3, 5, 8
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    if rank == 3:
        q, k, v = f(b, s, nq * d), f(b, L, nkv * d), f(b, L, nkv * d)
        heads = {"q_num_heads": nq, "kv_num_heads": nkv}
    else:
        q, k, v = f(b, nq, s, d), f(b, nkv, L, d), f(b, nkv, L, d)
        heads = {}
    mask = rng.random((s, p + L)) < 0.8
    for mode in (0, 1, 2, 3):
        check_node("Attention", [q, k, v, mask, f(b, nkv, p, d), f(b, nkv, p, d)], n_outputs=4,
                   opset=23, is_causal=1, softcap=3.0, qk_matmul_output_mode=mode,
                   tolerance=TOL[np.dtype(np.float32)], **heads)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_attention_fully_masked_rows_are_zero(dtype):
    """An all-False bool mask row, an all -inf float row, nonpad 0 with
    causal (negative offset): zeros like the built-in (not NaN), also in the
    mode-3 qk output."""
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 2, 4, 8)).astype(dtype)
    k = rng.standard_normal((2, 2, 6, 8)).astype(dtype)
    v = rng.standard_normal((2, 2, 6, 8)).astype(dtype)
    mask = rng.random((2, 1, 4, 6)) < 0.7
    mask[0, 0, 1] = False
    check_attention([q, k, v, mask], 4, 23, {"qk_matmul_output_mode": 3})
    fmask = rng.standard_normal((4, 6)).astype(dtype)
    fmask[2] = -np.inf
    check_attention([q, k, v, fmask], 4, 23, {"qk_matmul_output_mode": 3, "is_causal": 1})
    nonpad = np.array([0, 2], np.int64)
    check_attention([q, k, v, None, None, None, nonpad], 4, 24,
                    {"qk_matmul_output_mode": 3, "is_causal": 1})
    got = run_ours(node_model("Attention", [q, k, v, mask], opset=23), [q, k, v, mask])[0][0]
    assert (got[0, :, 1] == 0).all() and np.isfinite(got).all()


def test_attention_mixed_value_type():
    """T2 (V, past_value) of another type than T1: Y is T1, presents keep
    their types."""
    rng = np.random.default_rng(4)
    q = rng.standard_normal((1, 2, 3, 8)).astype(np.float32)
    k = rng.standard_normal((1, 2, 5, 8)).astype(np.float32)
    v = rng.standard_normal((1, 2, 5, 4)).astype(np.float16)
    model = node_model("Attention", [q, k, v], n_outputs=3, opset=23, is_causal=1)
    got, names, _ = run_ours(model, [q, k, v])
    want = run_builtin(model, [q, k, v])
    assert KERNEL in names
    assert got[0].dtype == np.float32 and got[2].dtype == np.float16
    assert_close(got[0], want[0].astype(np.float32), "Y", (2e-3, 2e-3))
    assert_close(got[2], want[2], "present_value")


def test_attention_unaligned_and_strided():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 5, 32)).astype(np.float32)
    k = rng.standard_normal((2, 7, 16)).astype(np.float32)
    wide = rng.standard_normal((2, 7, 32)).astype(np.float32)
    attrs = {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1}
    v = wide[:, :, ::2]  # not contiguous
    check_node("Attention", [unaligned(q), unaligned(k), v], opset=23,
               tolerance=TOL[np.dtype(np.float32)], **attrs)


def test_attention_empty():
    """Zero batch, zero queries and zero keys give empty or zero outputs."""
    f = np.float32
    for q, k, v in [
        (np.zeros((0, 2, 3, 4), f), np.zeros((0, 2, 5, 4), f), np.zeros((0, 2, 5, 4), f)),
        (np.zeros((1, 2, 0, 4), f), np.ones((1, 2, 5, 4), f), np.ones((1, 2, 5, 4), f)),
    ]:
        model = node_model("Attention", [q, k, v], opset=23)
        got = run_ours(model, [q, k, v])[0][0]
        assert got.shape == q.shape[:3] + (v.shape[3],)
    q = np.ones((1, 2, 3, 4), f)
    k = np.zeros((1, 2, 0, 4), f)
    model = node_model("Attention", [q, k, k], opset=23)
    got = run_ours(model, [q, k, k])[0][0]
    assert got.shape == (1, 2, 3, 4) and (got == 0).all()


def run_bad(inputs, opset=23, **attrs):
    model = node_model("Attention", inputs, opset=opset, **attrs)
    return run_ours(model, inputs)


def test_attention_bad_input():
    f = np.float32
    q, k, v = np.ones((1, 4, 3, 8), f), np.ones((1, 3, 5, 8), f), np.ones((1, 3, 5, 8), f)
    with pytest.raises(ValueError, match=r"Attention: input 1 .*do not divide"):
        run_bad([q, k, v])
    k2 = np.ones((1, 2, 5, 8), f)
    with pytest.raises(ValueError, match=r"Attention: input 3 .*does not broadcast"):
        run_bad([q, k2, k2, np.ones((2, 1, 3, 5), np.bool_)])
    with pytest.raises(ValueError, match=r"Attention: input 3 .*exceeds"):
        run_bad([q, k2, k2, np.ones((3, 6), np.bool_)])
    with pytest.raises(ValueError, match=r"Attention: input 1 .*head size"):
        run_bad([q, np.ones((1, 2, 5, 7), f), k2])
    with pytest.raises(TypeError, match=r"Attention: input 1 .*element type float16"):
        run_bad([q, k2.astype(np.float16), k2])
    with pytest.raises(TypeError, match=r"Attention: input 0 .*element type int32"):
        run_bad([q.astype(np.int32), k2, k2])
    with pytest.raises(ValueError, match=r"Attention: rank-3 inputs need"):
        run_bad([np.ones((1, 3, 8), f)] * 3)
    with pytest.raises(ValueError, match=r"Attention: input 0 .*not a multiple"):
        run_bad([np.ones((1, 3, 9), f), np.ones((1, 3, 8), f), np.ones((1, 3, 8), f)],
                q_num_heads=2, kv_num_heads=2)
    with pytest.raises(ValueError, match=r"Attention: input 0 .*rank 3 or all rank 4"):
        run_bad([np.ones((1, 3, 8), f), k2, k2])
    with pytest.raises(ValueError, match=r"Attention: input 4 .*together"):
        model = node_model("Attention", [q, k2, k2, np.ones((3, 5), f), k2], opset=23)
        run_ours(model, [q, k2, k2, np.ones((3, 5), f), k2])
    with pytest.raises(ValueError, match=r"Attention: input 4 .*expected"):
        past = np.ones((1, 3, 2, 8), f)
        model = node_model("Attention", [q, k2, k2, np.ones((3, 7), f), past, past], opset=23)
        run_ours(model, [q, k2, k2, np.ones((3, 7), f), past, past])
    with pytest.raises(ValueError, match=r"Attention: input 6 .*outside"):
        model, feeds = attention_model([q, k2, k2, None, None, None, np.array([9], np.int64)],
                                       1, 24, {})
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        sess.run(None, feeds)
    with pytest.raises(ValueError, match=r"Attention: attribute qk_matmul_output_mode"):
        run_bad([q, k2, k2], qk_matmul_output_mode=5)
    with pytest.raises(ValueError, match=r"Attention: attributes left_window_size"):
        run_bad([q, k2, k2], opset=25, left_window_size=-2)
    with pytest.raises(ValueError, match=r"Attention: q_num_heads and kv_num_heads must not"):
        run_bad([q, k2, k2], opset=25, q_num_heads=4, kv_num_heads=2)


@pytest.mark.parametrize("mask_dtype", [np.int64, np.uint8, np.float64, np.float16],
                         ids=["int64", "uint8", "float64", "float16"])
def test_attention_numeric_mask_types(mask_dtype):
    """Any numeric attn_mask is added to the scores as its values (the
    built-in cannot combine an integer mask with is_causal: it builds the
    causal -inf in the mask's type)."""
    rng = np.random.default_rng(6)
    q = rng.standard_normal((2, 2, 4, 8)).astype(np.float32)
    k = rng.standard_normal((2, 2, 6, 8)).astype(np.float32)
    mask = rng.integers(0, 3, size=(2, 1, 4, 6)).astype(mask_dtype)
    causal = int(np.dtype(mask_dtype).kind == "f")
    check_attention([q, k, k.copy(), mask], 4, 23, {"qk_matmul_output_mode": 2,
                                                    "is_causal": causal})


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("s,t,causal", [(3, 5, 0), (4, 4, 1), (1, 700, 0), (20, 150, 1)])
def test_attention_nan_query_row_is_nan(dtype, s, t, causal):
    """Issue 12: a NaN in a query row gave a row of zeros; the built-in gives
    NaN for that row (NaN keys already propagated)."""
    rng = np.random.default_rng(s + t)
    q = rng.standard_normal((2, 4, s, 16)).astype(dtype)
    k = rng.standard_normal((2, 2, t, 16)).astype(dtype)
    v = rng.standard_normal((2, 2, t, 16)).astype(dtype)
    q[0, 1, 0, 3] = np.nan
    q[1, 3, s - 1, 0] = np.nan
    model = node_model("Attention", [q, k, v], opset=23, is_causal=causal)
    want = run_builtin(model, [q, k, v])[0]
    assert np.isnan(want[0, 1, 0]).all() and not np.isnan(want[0, 0, 0]).any()
    check_attention([q, k, v], 1, 23, {"is_causal": causal})
    q3 = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).reshape(2, s, 64)
    check_attention([q3, k.transpose(0, 2, 1, 3).reshape(2, t, 32),
                     v.transpose(0, 2, 1, 3).reshape(2, t, 32)], 1, 23,
                    {"is_causal": causal, "q_num_heads": 4, "kv_num_heads": 2})


@pytest.mark.parametrize("rank", [3, 4])
def test_attention_any_input_layout(rank):
    """Issue 12: Fortran-order, strided, read-only, unaligned, odd-stride and
    broadcast (stride 0) inputs give the bits of C-contiguous ones; inputs
    are never modified, presents never alias them."""
    rng = np.random.default_rng(rank)
    f = lambda *shape: np.ascontiguousarray(np.broadcast_to(  # noqa: E731
        rng.standard_normal((1,) + shape[1:]).astype(np.float32), shape))
    if rank == 3:
        inputs = [f(2, 3, 32), f(2, 5, 16), f(2, 5, 16), f(2, 1, 3, 7), f(2, 2, 2, 8),
                  f(2, 2, 2, 8)]
        attrs = {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1}
    else:
        inputs = [f(2, 4, 3, 8), f(2, 2, 5, 8), f(2, 2, 5, 8), f(2, 1, 3, 5)]
        attrs = {"softcap": 2.0}
    model = node_model("Attention", inputs, n_outputs=4, opset=23, qk_matmul_output_mode=1,
                       **attrs)
    want, names, _ = run_ours(model, inputs)
    assert KERNEL in names
    for i, a in enumerate(inputs):
        for what, x in layouts(a):
            before = x.copy()
            got, names, _ = run_ours(model, inputs[:i] + [x] + inputs[i + 1:])
            assert KERNEL in names
            for g, w in zip(got, want):
                assert same_bits(g, w), f"input {i} {what}"
                assert not np.shares_memory(g, x), f"input {i} {what}: output aliases it"
            assert same_bits(x, before), f"input {i} {what}: input modified"


def test_engine_ready_keeps_broadcast_axes_compact():
    """A broadcast input whose last axis the engine cannot read is copied
    compactly: the stride-0 axes stay stride 0 (never a dense copy)."""
    from onnx_light_cpu.ops._layout import engine_ready
    base = np.arange(16, dtype=np.float32)
    x = np.broadcast_to(base[::2], (1 << 20, 4, 8))     # 128 MiB if densified
    y = engine_ready(x)
    assert y.strides[:2] == (0, 0) and y.strides[2] == 4 and same_bits(y[-1, -1], base[::2])
    z = engine_ready(np.broadcast_to(base[:8], (1 << 20, 8)), np.float16)
    assert z.dtype == np.float16 and z.strides == (0, 2)


def test_attention_presents_never_alias_inputs():
    """Issue 12 (inputs never modified): with one kv head, a rank-3 K is
    already the (B, 1, L, D) present: it was handed out as a view of the
    input, so whoever wrote into present_key wrote into K."""
    rng = np.random.default_rng(8)
    q = rng.standard_normal((2, 3, 16)).astype(np.float32)
    k = rng.standard_normal((2, 5, 8)).astype(np.float32)
    v = rng.standard_normal((2, 5, 8)).astype(np.float32)
    model = node_model("Attention", [q, k, v], n_outputs=3, opset=23, q_num_heads=2,
                       kv_num_heads=1)
    got, names, _ = run_ours(model, [q, k, v])
    assert KERNEL in names
    want = run_builtin(model, [q, k, v])
    for g, w, x in zip(got[1:], want[1:], (k, v)):
        assert_close(g, w, "present")
        assert not np.shares_memory(g, x)


def test_attention_sizes_checked_before_allocating():
    """Issue 12: presents and the materialised scores are sized before
    anything is allocated: a MemoryError naming the operator, the output and
    the byte count (broadcast keys of 2^30 positions)."""
    q = np.ones((1, 2, 2, 16), np.float32)
    k = np.broadcast_to(np.ones((1, 1, 1, 16), np.float32), (1, 1, 1 << 30, 16))
    model = node_model("Attention", [q, k, k], n_outputs=3, opset=23)
    with pytest.raises(MemoryError, match=r"Attention: output 1 \(present.*needs 68719476736 "
                                          r"bytes"):
        run_ours(model, [q, k, k])
    model = node_model("Attention", [q, k, k], n_outputs=4, opset=23)
    with pytest.raises(MemoryError, match=r"Attention: output 1"):
        run_ours(model, [q, k, k])
    model = node_model("Attention", [q, k, k], n_outputs=4, opset=23)
    model.graph.node[0].output[1] = model.graph.node[0].output[2] = ""
    with pytest.raises(MemoryError, match=r"Attention: .*scores.*needs 137438953472 bytes"):
        run_ours(model, [q, k, k])


def test_attention_missing_value_input():
    """Issue 12: a node with Q and K only was a TypeError from Python's call
    (missing argument), naming neither the operator nor the input."""
    q, k = np.ones((1, 2, 3, 8), np.float32), np.ones((1, 2, 5, 8), np.float32)
    with pytest.raises(ValueError, match=r"Attention: input 2 .*is required"):
        run_bad([q, k])
