"""com.microsoft MultiHeadAttention: differential tests against ONNX Runtime
on randomised configurations (batch, heads, head sizes 64/80/96/128 and odd
ones, past lengths 0/1/odd/long, projection bias, every key padding mask
form, attention bias, unidirectional, scale, mask_filter_value, rank-4
cross-attention keys, the present and qk outputs) in float32 and float16,
bfloat16 against float32 ORT on bfloat16-rounded inputs; NAIVE against
OPTIMIZED at every SIMD level and 1/2 threads; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import (
    assert_close,
    bfloat16_through_float32,
    check_every_level,
    layouts,
    same_bits,
    unaligned,
)

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
NAMES = ("query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key",
         "past_value", "past_sequence_length", "cache_indirection")
OUTPUTS = ("output", "present_key", "present_value", "qk")
# (rtol, atol) per dtype against ORT; the outputs are O(1) averages of
# values.  float16: ORT and the engine round differently on the way;
# bfloat16 is compared with float32 ORT (one bfloat16 rounding of q, k, v
# projections and of the output).
TOL = {
    np.dtype(np.float32): (2e-5, 2e-5),
    np.dtype(np.float16): (4e-3, 4e-3),
    np.dtype(bfloat16): (3e-2, 3e-2),
}
# A row whose keys are all padded is an ordinary softmax shifted by
# mask_filter_value: at -10000, float32 keeps ~1e-3 of the scores.
SHIFTED_TOL = (2e-2, 2e-2)


def mha_model(inputs, attrs, wanted=(True, False, False, False)):
    """A one-node model; absent inputs and unwanted outputs get empty names."""
    names = [n if x is not None else "" for n, x in zip(NAMES, inputs)]
    while names and names[-1] == "":
        names.pop()
    outs = [n if w else "" for n, w in zip(OUTPUTS, wanted)]
    while outs[-1] == "":
        outs.pop()
    node = oh.make_node("MultiHeadAttention", names, outs, domain=MS, **attrs)
    elem = oh.np_dtype_to_tensor_dtype(np.dtype(inputs[0].dtype))
    graph = oh.make_graph(
        [node], "mha",
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in zip(NAMES, inputs) if x is not None],
        [oh.make_tensor_value_info(n, elem, None) for n in outs if n])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                               oh.make_opsetid(MS, 1)])


def feeds_of(inputs):
    return {n: x for n, x in zip(NAMES, inputs) if x is not None}


def run_ort(inputs, attrs, wanted):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(mha_model(inputs, attrs, wanted).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds_of(inputs))


def run_ours(inputs, attrs, wanted=(True, False, False, False), threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    sess = ReferenceEvaluator(mha_model(inputs, attrs, wanted))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    got = sess.run(None, feeds_of(inputs))
    return [g for g in got if g is not None], olc.used_kernel_names(sess)


def random_config(rng: np.random.Generator, head_size: int, past: int, dtype):
    """Inputs and attributes of one random MultiHeadAttention node."""
    b = int(rng.integers(1, 3))
    n = int(rng.choice([1, 2, 3]))
    s = int(rng.choice([1, 3, 8]))
    cross = rng.random() < 0.2
    L = int(rng.choice([1, 4, 9])) if cross or rng.random() < 0.3 else s
    hv = head_size if past or rng.random() < 0.8 else 24  # ORT: Hv == H with a past
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    q = f(b, s, n * head_size)
    if cross:
        k, v = f(b, n, L, head_size), f(b, n, L, hv)
    else:
        k, v = f(b, L, n * head_size), f(b, L, n * hv)
    bias = f(2 * n * head_size + n * hv) if rng.random() < 0.5 else None
    t = past + L
    mask = None
    kind = rng.choice(["none", "lengths", "2d", "3d"])
    if kind == "lengths":
        mask = rng.integers(1, t + 1, size=b).astype(np.int32)
    elif kind == "2d":
        mask = (rng.random((b, t)) < 0.8).astype(np.int32)
        mask[:, 0] = 1
        if rng.random() < 0.5:  # right padding (ours turns it into key ranges)
            mask = (np.arange(t)[None, :] < rng.integers(1, t + 1, size=(b, 1))).astype(np.int32)
    elif kind == "3d":
        mask = (rng.random((b, s, t)) < 0.8).astype(np.int32)
        mask[..., 0] = 1
    attention_bias = None
    if rng.random() < 0.4:
        attention_bias = f(int(rng.choice([1, b])), int(rng.choice([1, n])), s, t)
    pk = pv = None
    if past:
        pk, pv = f(b, n, past, head_size), f(b, n, past, hv)
    attrs = {"num_heads": n}
    if rng.random() < 0.4 and not cross:
        attrs["unidirectional"] = 1
    if rng.random() < 0.3:
        attrs["scale"] = float(rng.uniform(0.02, 0.3))
    if rng.random() < 0.2:
        attrs["mask_filter_value"] = float(rng.choice([-5.0, -1e9]))
    inputs = [q, k, v, bias, mask, attention_bias, pk, pv]
    inputs = [x.astype(dtype) if x is not None and x.dtype == np.float32 else x for x in inputs]
    return inputs, attrs


def check(inputs, attrs, wanted, tolerance=None):
    """Ours (both families, every level, 1/2 threads) against ORT."""
    dtype = np.dtype(inputs[0].dtype)
    tol = tolerance or TOL[dtype]
    ort_of = lambda x: run_ort(x, attrs, wanted)  # noqa: E731
    want = bfloat16_through_float32(ort_of, inputs) if dtype == bfloat16 else ort_of(inputs)
    originals = [None if x is None else x.copy() for x in inputs]
    naive, names = run_ours(inputs, attrs, wanted, naive=True)
    assert names == ["onnx_light_cpu::NaiveMultiHeadAttention"], names
    compare(naive, want, "naive", tol)

    def check_one(got, where):
        compare(got, want, f"{attrs} {where}", tol)
        compare(got, naive, "naive agreement", tol)

    check_every_level(lambda threads: run_ours(inputs, attrs, wanted, threads),
                      "onnx_light_cpu::MultiHeadAttention", check_one, inputs, originals)


def compare(got, want, what, tol):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        if k == 3:  # qk: -FLT_MAX (float32) / -inf (float16) where unidirectional hides
            g32, w32 = g.astype(np.float32), w.astype(np.float32)
            hidden = w32 < -1e30
            assert (g32[hidden] < -1e30).all(), f"{what}: qk hidden positions"
            g, w = np.where(hidden, 0, g32).astype(g.dtype), np.where(hidden, 0, w32).astype(
                w.dtype)
        assert_close(g, w, f"{what} output {k}", tol)


HEAD_SIZES = (64, 80, 96, 128, 17, 8)
PASTS = (0, 1, 7, 130)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("head_size", HEAD_SIZES)
@pytest.mark.parametrize("past", PASTS)
def test_mha_random_vs_ort(dtype, head_size, past):
    seed = head_size * 1000 + past * 10 + np.dtype(dtype).itemsize
    rng = np.random.default_rng(seed)
    inputs, attrs = random_config(rng, head_size, past, dtype)
    wanted = (True, bool(rng.random() < 0.5), bool(rng.random() < 0.5), rng.random() < 0.4)
    if past:  # present outputs come in pairs with a past
        wanted = (True, True, True, wanted[3])
    check(inputs, attrs, wanted)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("seed", range(80))
def test_mha_random_vs_ort_sweep(dtype, seed):
    rng = np.random.default_rng(seed)
    inputs, attrs = random_config(rng, int(rng.choice(HEAD_SIZES)), int(rng.choice(PASTS)), dtype)
    check(inputs, attrs, (True, True, True, True))


def test_mha_benchmark_shape_two_threads():
    """B=1, S=128, 12 heads of 64 (above the two-thread threshold), with a
    key padding mask and unidirectional."""
    rng = np.random.default_rng(11)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    inputs = [f(1, 128, 768), f(1, 128, 768), f(1, 128, 768), f(3 * 768),
              np.array([120], np.int32), None, None, None]
    check(inputs, {"num_heads": 12, "unidirectional": 1}, (True, True, True, False))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_mha_fully_padded_rows(dtype):
    """A zero key length or an all-zero binary row: ORT adds the filter value
    to every key, an ordinary softmax shifted; ours too."""
    rng = np.random.default_rng(12)
    f = lambda *shape: rng.standard_normal(shape).astype(dtype)  # noqa: E731
    q, k, v = f(2, 3, 16), f(2, 5, 16), f(2, 5, 16)
    check([q, k, v, None, np.array([0, 3], np.int32)], {"num_heads": 2},
          (True, False, False, True), SHIFTED_TOL)
    mask = np.ones((2, 3, 5), np.int32)
    mask[1, 2] = 0
    check([q, k, v, None, mask], {"num_heads": 2, "unidirectional": 1},
          (True, False, False, True), SHIFTED_TOL)


def test_mha_unaligned_inputs():
    rng = np.random.default_rng(13)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    inputs = [unaligned(f(2, 5, 48)), unaligned(f(2, 7, 48)), unaligned(f(2, 7, 48)),
              unaligned(f(144))]
    check(inputs, {"num_heads": 3}, (True, False, False, False))


def test_mha_empty():
    f = np.float32
    got, _ = run_ours([np.ones((1, 0, 8), f), np.ones((1, 4, 8), f), np.ones((1, 4, 8), f)],
                      {"num_heads": 2})
    assert got[0].shape == (1, 0, 8)
    got, _ = run_ours([np.ones((1, 3, 8), f), np.ones((1, 0, 8), f), np.ones((1, 0, 8), f)],
                      {"num_heads": 2})
    assert got[0].shape == (1, 3, 8) and (got[0] == 0).all()


@pytest.mark.parametrize("naive", [False, True])
def test_mha_bad_input(naive):
    f = np.float32
    q, k, v = np.ones((1, 3, 8), f), np.ones((1, 4, 8), f), np.ones((1, 4, 8), f)

    def run(inputs, **attrs):
        attrs.setdefault("num_heads", 2)
        return run_ours(inputs, attrs, naive=naive)

    with pytest.raises(NotImplementedError, match=r"MultiHeadAttention: input 0 .*packed QKV"):
        run([np.ones((1, 4, 2, 3, 4), f)])
    with pytest.raises(NotImplementedError, match=r"MultiHeadAttention: input 1 .*packed KV"):
        run([q, np.ones((1, 4, 2, 2, 4), f)])
    with pytest.raises(NotImplementedError, match=r"MultiHeadAttention: input 8 .*not supported"):
        run([q, k, v, None, None, None, None, None, np.array([0], np.int32)])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 0 .*multiple of num_heads"):
        run([q, k, v], num_heads=3)
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 1 .*expected"):
        run([q, np.ones((1, 4, 6), f), v])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 3 .*expected \(24,\)"):
        run([q, k, v, np.ones(20, f)])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 4 .*expected lengths"):
        run([q, k, v, None, np.ones((1, 9), np.int32)])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 4 .*outside"):
        run([q, k, v, None, np.array([5], np.int32)])
    with pytest.raises(TypeError, match=r"MultiHeadAttention: input 4 .*int32"):
        run([q, k, v, None, np.ones((1, 4), np.int64)])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 5 .*expected"):
        run([q, k, v, None, None, np.ones((1, 2, 3, 5), f)])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 6 .*together"):
        run([q, k, v, None, None, None, np.ones((1, 2, 1, 4), f)])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 6 .*expected"):
        run([q, k, v, None, None, None, np.ones((1, 3, 1, 4), f), np.ones((1, 3, 1, 4), f)])
    with pytest.raises(TypeError, match=r"MultiHeadAttention: input 1 .*float16"):
        run([q, k.astype(np.float16), v])
    with pytest.raises(TypeError, match=r"MultiHeadAttention: input 0 .*float64"):
        run([q.astype(np.float64), k, v])
    with pytest.raises(ValueError, match=r"MultiHeadAttention: attribute num_heads"):
        run([q, k, v], num_heads=0)
    with pytest.raises(ValueError, match=r"MultiHeadAttention: input 1 .*key and value are"):
        run([q])
    # issue 12
    with pytest.raises(ValueError, match=r"MultiHeadAttention: attribute scale must be finite"):
        run([q, k, v], scale=float("nan"))
    with pytest.raises(ValueError, match=r"MultiHeadAttention: attribute mask_filter_value"):
        run([q, k, v], mask_filter_value=float("nan"))
    with pytest.raises(ValueError, match=r"MultiHeadAttention: attribute unidirectional"):
        run([q, k, v], unidirectional=5)



def test_mha_strided_attention_bias():
    """An attention bias whose last axis is not contiguous."""
    rng = np.random.default_rng(14)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    wide = f(1, 2, 4, 12)
    inputs = [f(1, 4, 16), f(1, 6, 16), f(1, 6, 16), None, None, wide[..., ::2]]
    check(inputs, {"num_heads": 2}, (True, False, False, True))


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("s,t", [(3, 5), (1, 700), (20, 150)])
def test_mha_nan_query_row_is_nan(dtype, s, t):
    """Issue 12: a NaN in a query row gave a row of zeros; ONNX Runtime (and
    the NAIVE family) give NaN for that row (NaN keys already propagated)."""
    rng = np.random.default_rng(s * t)
    f = lambda *shape: rng.standard_normal(shape).astype(dtype)  # noqa: E731
    q = f(2, s, 4 * 16)
    q[0, s - 1, 5] = np.nan          # head 0 of the last query of entry 0
    q[1, 0, 16 * 3] = np.nan          # head 3 of the first query of entry 1
    inputs = [q, f(2, t, 64), f(2, t, 64)]
    want = run_ort(inputs, {"num_heads": 4}, (True,))[0]
    assert np.isnan(want[0, s - 1, :16]).all() and not np.isnan(want[0, s - 1, 16:]).any()
    check(inputs, {"num_heads": 4}, (True, False, False, False))


@pytest.mark.parametrize("naive", [False, True])
def test_mha_unidirectional_must_be_0_or_1(naive):
    """Issue 12: unidirectional=5 ran as causal, ONNX Runtime reads it as 0:
    anything but 0 or 1 is rejected, naming the operator and the attribute."""
    f = np.float32
    q, k, v = np.ones((1, 3, 8), f), np.ones((1, 4, 8), f), np.ones((1, 4, 8), f)
    for value in (5, -1, 2):
        with pytest.raises(ValueError, match=r"MultiHeadAttention: attribute unidirectional "
                                             r"must be 0 or 1, got " + str(value)):
            run_ours([q, k, v], {"num_heads": 2, "unidirectional": value}, naive=naive)
    for value in (0, 1):
        _, names = run_ours([q, k, v], {"num_heads": 2, "unidirectional": value}, naive=naive)
        assert names == ["onnx_light_cpu::" + ("Naive" if naive else "") + "MultiHeadAttention"]


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("rank", [3, 4])
def test_mha_any_input_layout(naive, rank):
    """Issue 12: Fortran-order, strided, read-only, unaligned, odd-stride and
    broadcast (stride 0) inputs give the bits of C-contiguous ones; inputs
    are never modified."""
    rng = np.random.default_rng(rank)
    f = lambda *shape: np.ascontiguousarray(np.broadcast_to(  # noqa: E731
        rng.standard_normal((1,) + shape[1:]).astype(np.float32), shape))
    kv = (2, 2, 5, 8) if rank == 4 else (2, 5, 16)
    inputs = [f(2, 3, 16), f(*kv), f(*kv), f(48), np.ones((2, 5), np.int32),
              f(2, 2, 3, 5 + 2 * (rank == 3)), None, None]
    if rank == 3:
        inputs[6:] = [f(2, 2, 2, 8), f(2, 2, 2, 8)]
        inputs[4] = np.ones((2, 7), np.int32)
    wanted = (True, True, True, True)
    want, names = run_ours(inputs, {"num_heads": 2, "unidirectional": 1}, wanted, naive=naive)
    assert names == ["onnx_light_cpu::" + ("Naive" if naive else "") + "MultiHeadAttention"]
    for i, a in enumerate(inputs):
        if a is None:
            continue
        for what, x in layouts(a):
            before = x.copy()
            got, _ = run_ours(inputs[:i] + [x] + inputs[i + 1:],
                              {"num_heads": 2, "unidirectional": 1}, wanted, naive=naive)
            for g, w in zip(got, want):
                assert same_bits(g, w), f"input {i} {what}"
            assert same_bits(x, before), f"input {i} {what}: input modified"


@pytest.mark.parametrize("naive", [False, True])
def test_mha_sizes_checked_before_allocating(naive):
    """Issue 12: present and qk outputs are sized before anything is
    allocated: a MemoryError naming the operator, the output and the byte
    count (broadcast keys of 2^30 positions)."""
    f = np.float32
    q = np.ones((1, 2, 16), f)
    k = np.broadcast_to(np.ones((1, 1, 16), f), (1, 1 << 30, 16))
    with pytest.raises(MemoryError, match=r"MultiHeadAttention: output 1 \(present.*needs "
                                          r"68719476736 bytes"):
        run_ours([q, k, k], {"num_heads": 2}, (True, True, True, False), naive=naive)
    with pytest.raises(MemoryError, match=r"MultiHeadAttention: .*scores \(qk\).*needs "
                                          r"51539607552 bytes"):
        run_ours([q, k, k], {"num_heads": 2}, (True, False, False, True), naive=naive)
