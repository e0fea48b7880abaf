"""com.microsoft Attention (BERT's fused self-attention): differential tests
against ONNX Runtime 1.32 on randomised configurations (batch, heads, head
sizes, input hidden sizes, projection bias or none, qkv_hidden_sizes, every
mask_index form, mask_filter_value, unidirectional, scale, attention_bias,
past and present) in float32 and float16, bfloat16 against float32 ORT on
bfloat16-rounded inputs; NAIVE against OPTIMIZED at every SIMD level and 1/2
threads; this package's extension (past with attention_bias) against NAIVE;
bad input."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import (
    THREAD_COUNTS,
    assert_close,
    assert_outputs_close,
    bfloat16_through_float32,
    check_every_level,
    same_bits,
)

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
NAMES = ("input", "weights", "bias", "mask_index", "past", "attention_bias",
         "past_sequence_length")
OPT = "onnx_light_cpu::MicrosoftAttention"
NAIVE = "onnx_light_cpu::NaiveMicrosoftAttention"
# (rtol, atol) per dtype against ORT.  float16: ORT keeps its probabilities
# in float16, the engine in float32 (1 ulp of outputs up to ~8);
# bfloat16: compared with float32 ORT on the same values.
TOL = {
    np.dtype(np.float32): (2e-5, 2e-5),
    np.dtype(np.float16): (4e-3, 1e-2),
    np.dtype(bfloat16): (3e-2, 5e-2),
}
# NAIVE and OPTIMIZED compute in float32 from the same rounded q, k, v.
AGREE = {
    np.dtype(np.float32): (2e-5, 2e-5),
    np.dtype(np.float16): (2e-3, 4e-3),
    np.dtype(bfloat16): (1.6e-2, 3e-2),
}


def attention_model(inputs, attrs, n_outputs=1):
    names = [n if x is not None else "" for n, x in zip(NAMES, inputs)]
    while names and names[-1] == "":
        names.pop()
    outs = ["output", "present"][:n_outputs]
    node = oh.make_node("Attention", names, outs, domain=MS, **attrs)
    elem = oh.np_dtype_to_tensor_dtype(np.dtype(inputs[0].dtype))
    graph = oh.make_graph(
        [node], "attention",
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in zip(NAMES, inputs) if x is not None],
        [oh.make_tensor_value_info(n, elem, None) for n in outs])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                               oh.make_opsetid(MS, 1)])


def feeds_of(inputs):
    return {n: x for n, x in zip(NAMES, inputs) if x is not None}


def run_ort(inputs, attrs, n_outputs=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(attention_model(inputs, attrs, n_outputs).SerializeToString(),
                                so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds_of(inputs))


def run_ours(inputs, attrs, n_outputs=1, threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    sess = ReferenceEvaluator(attention_model(inputs, attrs, n_outputs))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds_of(inputs)), olc.used_kernel_names(sess)


MASKS = ("none", "ends", "ends_starts", "3b2", "2d", "2d_right", "2d_left", "3d")


def make_mask(rng, kind, b, s, t):
    if kind == "ends":
        return rng.integers(0, t + 3, size=b).astype(np.int32)
    if kind == "ends_starts":
        ends = rng.integers(1, t + 1, size=b)
        return np.concatenate([ends, rng.integers(-1, t, size=b)]).astype(np.int32)
    if kind == "3b2":
        return rng.integers(0, t + 1, size=3 * b + 2).astype(np.int32)
    if kind == "2d":
        mask = rng.integers(0, 2, size=(b, t)).astype(np.int32)
        mask[:, 0] = rng.integers(0, 3, size=b)  # values other than 0/1 too
        return mask
    if kind == "2d_right":
        return (np.arange(t)[None, :] < rng.integers(1, t + 1, size=(b, 1))).astype(np.int32)
    if kind == "2d_left":
        return (np.arange(t)[None, :] >= rng.integers(0, t, size=(b, 1))).astype(np.int32)
    if kind == "3d":
        return rng.integers(0, 2, size=(b, s, t)).astype(np.int32)
    return None


def random_config(rng, mask_kind, dtype, past=0):
    b = int(rng.integers(1, 3))
    n = int(rng.choice([1, 2, 3, 4]))
    h = int(rng.choice([8, 16, 17, 32, 64]))
    s = int(rng.choice([1, 3, 8, 19]))
    hin = int(rng.choice([n * h, 24, 40]))
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    attrs = {"num_heads": n}
    dv = n * h
    if not past and rng.random() < 0.25:
        dv = n * int(rng.choice([4, 24]))
        attrs["qkv_hidden_sizes"] = [n * h, n * h, dv]
    total = 2 * n * h + dv
    x = f(b, s, hin)
    w = (f(hin, total) / np.sqrt(hin)).astype(np.float32)
    bias = f(total) if rng.random() < 0.8 else None
    t = past + s
    mask = make_mask(rng, mask_kind, b, s, t)
    pst = f(2, b, n, past, h) if past else None
    ab = None
    if not past and rng.random() < 0.4:
        ab = f(int(rng.choice([1, b])), int(rng.choice([1, n])), s, t)
    if rng.random() < 0.4:
        attrs["unidirectional"] = 1
    if rng.random() < 0.3:
        attrs["scale"] = float(rng.uniform(0.02, 0.3))
    if rng.random() < 0.3:
        attrs["mask_filter_value"] = float(rng.choice([-3.0, -1e9, 0.0]))
    inputs = [x, w, bias, mask, pst, ab]
    inputs = [a.astype(dtype) if a is not None and a.dtype == np.float32 else a for a in inputs]
    return inputs, attrs


# A row whose visible keys are all masked is an ordinary softmax shifted by
# mask_filter_value: at -10000, float32 keeps ~1e-3 of the scores.
SHIFTED_TOL = (2e-2, 2e-2)


def shifted_rows(inputs, attrs) -> bool:
    """True when some query row sees only masked keys (and the filter is
    large enough to cost precision)."""
    x, _, _, mask, past = (list(inputs) + [None] * 5)[:5]
    if mask is None or abs(attrs.get("mask_filter_value", -10000.0)) < 100:
        return False
    b, s = x.shape[:2]
    t = s + (0 if past is None else past.shape[3])
    keys = np.arange(t)
    if mask.ndim == 1:
        ends = mask[:b, None]
        starts = mask[b:2 * b, None] if mask.shape[0] == 2 * b else 0
        keep = np.broadcast_to(((keys >= starts) & (keys < ends))[:, None], (b, s, t))
    elif mask.ndim == 2:
        keep = np.broadcast_to((mask > 0)[:, None], (b, s, t))
    else:
        keep = mask > 0
    if attrs.get("unidirectional") and s > 1:
        keep = keep & (keys[None, :] <= t - s + np.arange(s)[:, None])
    return bool((~keep.any(axis=-1)).any())


def check(inputs, attrs, n_outputs, oracle="ort"):
    """Ours (both families, every level, 1/2 threads) against ORT (or NAIVE)."""
    dtype = np.dtype(inputs[0].dtype)
    tol = TOL[dtype]
    if shifted_rows(inputs, attrs):
        tol = tuple(max(a, b) for a, b in zip(tol, SHIFTED_TOL))
    naive, names = run_ours(inputs, attrs, n_outputs, naive=True)
    assert names == [NAIVE], names
    if oracle == "ort":
        ort_of = lambda x: run_ort(x, attrs, n_outputs)  # noqa: E731
        want = bfloat16_through_float32(ort_of, inputs) if dtype == bfloat16 else ort_of(inputs)
        assert_outputs_close(naive, want, "naive vs ORT", tol)

    def check_one(got, where):
        what = f"{attrs} {where}"
        if oracle == "ort":
            assert_outputs_close(got, want, what, tol)
        assert_outputs_close(got, naive, f"naive agreement {what}", AGREE[dtype])

    check_every_level(lambda threads: run_ours(inputs, attrs, n_outputs, threads), OPT,
                      check_one, inputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("seed", range(2))
def test_attention_random_vs_ort(dtype, mask, seed):
    rng = np.random.default_rng(seed * 100 + MASKS.index(mask))
    inputs, attrs = random_config(rng, mask, dtype)
    check(inputs, attrs, 2 if "qkv_hidden_sizes" not in attrs else 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("mask", ("none", "ends", "ends_starts", "2d", "2d_left", "3d"))
@pytest.mark.parametrize("past", (1, 6))
def test_attention_past_present_vs_ort(dtype, mask, past):
    rng = np.random.default_rng(past * 10 + len(mask))
    inputs, attrs = random_config(rng, mask, dtype, past=past)
    check(inputs, attrs, 2)


def test_left_padded_causal_row_takes_the_padding_value():
    """unidirectional excludes future keys entirely: query 0 of a row whose
    first two keys are padding sees only key 0, so its output is V of key 0
    (padding or not), as ORT gives it."""
    rng = np.random.default_rng(3)
    n, h, s = 2, 8, 5
    x = rng.standard_normal((2, s, 16)).astype(np.float32)
    w = rng.standard_normal((16, 3 * n * h)).astype(np.float32)
    bias = rng.standard_normal(3 * n * h).astype(np.float32)
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], np.int32)
    attrs = {"num_heads": n, "unidirectional": 1}
    inputs = [x, w, bias, mask]
    check(inputs, attrs, 1)
    out = run_ours(inputs, attrs)[0][0]
    v0 = (x[0, 0] @ w + bias)[2 * n * h:]
    np.testing.assert_allclose(out[0, 0], v0, rtol=1e-5, atol=1e-5)



@pytest.mark.parametrize("shape", [(2, 1), (1, 1)])
def test_one_value_mask_masks_nothing(shape):
    """ORT reads a (B, 1) or (1, 1) mask_index as one value broadcast over
    the keys: no mask at all, whatever the value."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    w = rng.standard_normal((8, 24)).astype(np.float32)
    mask = np.zeros(shape, np.int32)
    check([x, w, None, mask], {"num_heads": 2}, 1)
    assert_close(run_ours([x, w, None, mask], {"num_heads": 2})[0][0],
                 run_ours([x, w], {"num_heads": 2})[0][0], "no mask", TOL[x.dtype])

@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=["float32", "float16", "bfloat16"])
def test_past_with_attention_bias_extension(dtype):
    """ORT's CPU rejects past with attention_bias; here it is supported (the
    bias covers the P + S keys), OPTIMIZED against NAIVE."""
    rng = np.random.default_rng(7)
    inputs, attrs = random_config(rng, "2d", dtype, past=4)
    b, s = inputs[0].shape[:2]
    n = attrs["num_heads"]
    inputs[5] = rng.standard_normal((b, n, s, 4 + s)).astype(dtype)
    if dtype != bfloat16:  # ORT has no bfloat16 Attention on CPU at all
        with pytest.raises(Exception, match="past and attention_bias"):
            run_ort(inputs, attrs, 2)
    check(inputs, attrs, 2, oracle="naive")


def test_constant_weights_are_packed_once_and_agree():
    """Weights as an initializer take the pre-packed GEMM path."""
    rng = np.random.default_rng(11)
    inputs, attrs = random_config(rng, "ends", np.float32)
    model = attention_model(inputs, attrs)
    model.graph.initializer.append(oh.make_tensor(
        "weights", TensorProto.FLOAT, inputs[1].shape, inputs[1].ravel().tolist()))
    del model.graph.input[1]
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    feeds = {k: v for k, v in feeds_of(inputs).items() if k != "weights"}
    got = sess.run(None, feeds)
    assert OPT in olc.used_kernel_names(sess)
    assert_close(got[0], run_ort(inputs, attrs)[0], "constant weights", TOL[np.dtype(np.float32)])
    again = sess.run(None, feeds)
    assert same_bits(got[0], again[0])


def constant_weights_model(inputs, attrs):
    """attention_model with weights (and bias) as initializers."""
    model = attention_model(inputs, attrs)
    for i in (1, 2):
        if inputs[i] is not None:
            model.graph.initializer.append(numpy_helper.from_array(inputs[i], NAMES[i]))
    kept = [v for v in model.graph.input if v.name not in NAMES[1:3]]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return model


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("seed", range(2))
def test_fused_projection_vs_ort_and_unfused(mask, seed):
    """float32 with constant weights and batch x heads tasks enough: each
    (batch, head) task projects its head and attends it at once; the bits
    are those of the unfused path (weights as an input), at every level and
    thread count, and agree with ORT."""
    rng = np.random.default_rng(seed * 10 + MASKS.index(mask) + 300)
    inputs, attrs = random_config(rng, mask, np.float32)
    b, n = int(rng.integers(2, 4)), 4
    h = inputs[1].shape[1] // (3 * attrs["num_heads"])
    attrs["num_heads"] = n
    attrs.pop("qkv_hidden_sizes", None)
    if seed:
        attrs["qkv_hidden_sizes"] = [n * h, n * h, n * 8]
    total = 2 * n * h + (n * 8 if seed else n * h)
    s, hin = inputs[0].shape[1], inputs[0].shape[2]
    inputs[0] = rng.standard_normal((b, s, hin)).astype(np.float32)
    inputs[1] = (rng.standard_normal((hin, total)) / np.sqrt(hin)).astype(np.float32)
    inputs[2] = rng.standard_normal(total).astype(np.float32) if inputs[2] is not None else None
    inputs[3] = make_mask(rng, mask, b, s, s)
    if inputs[5] is not None:
        inputs[5] = rng.standard_normal((b, n, s, s)).astype(np.float32)
    model = constant_weights_model(inputs, attrs)
    feeds = {k: v for k, v in feeds_of(inputs).items() if k not in NAMES[1:3]}
    want = run_ort(inputs, attrs)
    tol = TOL[np.dtype(np.float32)]
    if shifted_rows(inputs, attrs):
        tol = tuple(max(a, c) for a, c in zip(tol, SHIFTED_TOL))

    def run_fused(threads):
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess)
        olc.set_num_threads_for_session(sess, threads)
        olc.set_kernel_usage_recording(sess, True)
        got = sess.run(None, feeds)
        assert any("fused_projection" in p for p in olc.used_kernel_paths(sess))
        return got, olc.used_kernel_names(sess)

    def check_one(got, where):
        assert_outputs_close(got, want, f"{attrs} {where}", tol)
        unfused = run_ours(inputs, attrs)[0]
        assert same_bits(got[0], unfused[0]), f"fused and unfused differ {where}"

    check_every_level(run_fused, OPT, check_one, inputs)


def test_strided_and_empty_inputs():
    rng = np.random.default_rng(5)
    inputs, attrs = random_config(rng, "2d", np.float32)
    x = inputs[0]
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), np.float32)
    wide[..., ::2] = x
    strided = [wide[..., ::2]] + inputs[1:]
    assert_outputs_close(run_ours(strided, attrs)[0], run_ort(inputs, attrs), "strided",
                         TOL[x.dtype])
    for cut in (np.s_[:0], np.s_[:, :0]):
        empty = [x[cut]] + inputs[1:3] + [None, None, None]
        got = run_ours(empty, attrs)[0]
        assert got[0].shape == run_ort(empty, attrs)[0].shape


# -- bad input ---------------------------------------------------------------

def _base(rng=None):
    rng = rng or np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 12)).astype(np.float32)
    w = rng.standard_normal((12, 36)).astype(np.float32)
    bias = rng.standard_normal(36).astype(np.float32)
    return x, w, bias


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("case", [
    ("mask (2, 6)", lambda x, w, b: ([x, w, b, np.ones((2, 6), np.int32)], {}),
     ValueError, r"input 3 \('mask_index'\) has shape \(2, 6\)"),
    ("mask (5,)", lambda x, w, b: ([x, w, b, np.ones(5, np.int32)], {}),
     ValueError, r"input 3 \('mask_index'\) has shape \(5,\)"),
    ("mask 4-D", lambda x, w, b: ([x, w, b, np.ones((2, 1, 5, 5), np.int32)], {}),
     NotImplementedError, "4-D mask"),
    ("mask int64", lambda x, w, b: ([x, w, b, np.ones((2, 5), np.int64)], {}),
     TypeError, r"input 3 \('mask_index'\) has element type int64"),
    ("negative length", lambda x, w, b: ([x, w, b, np.array([-1, 5], np.int32)], {}),
     ValueError, "negative key length"),
    ("heads", lambda x, w, b: ([x, w, b], {"num_heads": 5}),
     ValueError, r"input 1 \('weights'\) has a Q/K hidden size of 12, not divisible"),
    ("columns", lambda x, w, b: ([x, w[:, :35], b[:35]], {}),
     ValueError, "not divisible into Q, K and V"),
    ("qkv sizes sum", lambda x, w, b: ([x, w, b], {"qkv_hidden_sizes": [9, 9, 9]}),
     ValueError, "sum of qkv_hidden_sizes"),
    ("qkv q != k", lambda x, w, b: ([x, w, b], {"qkv_hidden_sizes": [9, 15, 12]}),
     ValueError, "Q and K sizes must be equal"),
    ("weights rows", lambda x, w, b: ([x, w[:11], b], {}),
     ValueError, r"input 1 \('weights'\) has shape \(11, 36\)"),
    ("bias", lambda x, w, b: ([x, w, b[:30]], {}), ValueError, r"input 2 \('bias'\)"),
    ("past shape", lambda x, w, b: ([x, w, b, None, np.zeros((2, 2, 3, 1, 3), np.float32)], {}),
     ValueError, r"input 4 \('past'\) has shape"),
    ("attention_bias", lambda x, w, b: ([x, w, b, None, None, np.zeros((1, 3, 1, 5),
                                                                     np.float32)], {}),
     ValueError, r"input 5 \('attention_bias'\) has shape"),
    ("rotary", lambda x, w, b: ([x, w, b], {"do_rotary": 1}), ValueError, "do_rotary"),
    ("share", lambda x, w, b: ([x, w, b], {"past_present_share_buffer": 1}), ValueError,
     "past_present_share_buffer"),
    ("unidirectional 2", lambda x, w, b: ([x, w, b], {"unidirectional": 2}), ValueError,
     "unidirectional"),
    ("num_heads 0", lambda x, w, b: ([x, w, b], {"num_heads": 0}), ValueError, "num_heads"),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_bad_input(case, naive):
    _, make, error, message = case
    x, w, b = _base()
    inputs, extra = make(x, w, b)
    attrs = {"num_heads": 3, **extra}
    with pytest.raises(error, match=message) as info:
        run_ours(inputs, attrs, naive=naive)
    assert "Attention" in str(info.value)


def test_present_with_unequal_head_sizes_is_rejected():
    x, _, _ = _base()
    w = np.ones((12, 30), np.float32)
    with pytest.raises(NotImplementedError, match="present"):
        run_ours([x, w], {"num_heads": 3, "qkv_hidden_sizes": [9, 9, 12]}, 2)


# -- end to end ----------------------------------------------------------------

def bert_like_model(rng, b, s, hidden=64, heads=4, vocab=50, layers=2):
    """EmbedLayerNormalization -> layers x (Attention -> MatMul ->
    SkipLayerNormalization -> MatMul -> BiasGelu -> MatMul ->
    SkipLayerNormalization), the fused graph of ORT's BERT optimizer."""
    f = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(np.float32)  # noqa: E731
    inits, nodes = {}, []

    def init(name, value):
        inits[name] = value
        return name

    nodes.append(oh.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "segment_ids", init("word", f(vocab, hidden)), init("pos", f(s, hidden)),
         init("seg", f(2, hidden)), init("g0", 1 + f(hidden)), init("b0", f(hidden)), "mask"],
        ["h0", "mask_index"], domain=MS, epsilon=1e-12))
    x = "h0"
    for i in range(layers):
        nodes += [
            oh.make_node("Attention", [x, init(f"qkv_w{i}", f(hidden, 3 * hidden)),
                                      init(f"qkv_b{i}", f(3 * hidden)), "mask_index"],
                         [f"att{i}"], domain=MS, num_heads=heads),
            oh.make_node("MatMul", [f"att{i}", init(f"o_w{i}", f(hidden, hidden))], [f"o{i}"]),
            oh.make_node("SkipLayerNormalization",
                         [f"o{i}", x, init(f"g1_{i}", 1 + f(hidden)), init(f"b1_{i}", f(hidden)),
                          init(f"o_b{i}", f(hidden))], [f"ln{i}"], domain=MS, epsilon=1e-12),
            oh.make_node("MatMul", [f"ln{i}", init(f"fc1_w{i}", f(hidden, 4 * hidden))],
                         [f"fc1{i}"]),
            oh.make_node("BiasGelu", [f"fc1{i}", init(f"fc1_b{i}", f(4 * hidden))], [f"act{i}"],
                         domain=MS),
            oh.make_node("MatMul", [f"act{i}", init(f"fc2_w{i}", f(4 * hidden, hidden))],
                         [f"fc2{i}"]),
            oh.make_node("SkipLayerNormalization",
                         [f"fc2{i}", f"ln{i}", init(f"g2_{i}", 1 + f(hidden)),
                          init(f"b2_{i}", f(hidden)), init(f"fc2_b{i}", f(hidden))],
                         [f"h{i + 1}"], domain=MS, epsilon=1e-12)]
        x = f"h{i + 1}"
    int32 = TensorProto.INT32
    graph = oh.make_graph(
        nodes, "bert_like",
        [oh.make_tensor_value_info(n, int32, [b, s]) for n in ("input_ids", "segment_ids",
                                                              "mask")],
        [oh.make_tensor_value_info(x, 1, [b, s, hidden])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid(MS, 1)])
    feeds = {"input_ids": rng.integers(0, vocab, (b, s)).astype(np.int32),
             "segment_ids": rng.integers(0, 2, (b, s)).astype(np.int32),
             "mask": (np.arange(s)[None, :] < rng.integers(1, s + 1, (b, 1))).astype(np.int32)}
    return model, feeds


@pytest.mark.parametrize("naive", [False, True])
def test_bert_like_graph_vs_ort(naive):
    rng = np.random.default_rng(21)
    model, feeds = bert_like_model(rng, b=3, s=11)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    for threads in THREAD_COUNTS:
        sess = ReferenceEvaluator(model)
        olc.register_kernels_for_session(sess, microsoft_implementation=policy)
        olc.set_num_threads_for_session(sess, threads)
        olc.set_kernel_usage_recording(sess, True)
        got = sess.run(None, feeds)
        names = set(olc.used_kernel_names(sess))
        prefix = "Naive" if naive else ""
        for kernel in (f"{prefix}MicrosoftAttention", f"{prefix}EmbedLayerNormalization",
                       f"{prefix}SkipLayerNormalization", f"{prefix}BiasGelu", "MatMul"):
            assert f"onnx_light_cpu::{kernel}" in names, (kernel, names)
        assert_close(got[0], want[0], f"bert-like, {threads} threads", (1e-4, 1e-4))
