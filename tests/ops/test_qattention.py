"""com.microsoft QAttention (dynamically quantized BERT self-attention):
differential tests against ONNX Runtime 1.32 (uint8 input with int8 and
uint8 weights, per-tensor and per-column scales and zero points, every
mask_index form, scale, mask_filter_value, unidirectional, past and
present); the projection bit-identical to ORT's; NAIVE against OPTIMIZED
at every SIMD level and 1/2 threads; this package's extensions (int8
input, empty batch) against NAIVE; bad input."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import (
    THREAD_COUNTS,
    assert_close,
    ort_int8_weight_range,
    same_bits,
    thread_pairs,
)

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
NAMES = ("input", "weight", "bias", "input_scale", "weight_scale", "mask_index",
         "input_zero_point", "weight_zero_point", "past")
OPT = "onnx_light_cpu::QAttention"
NAIVE = "onnx_light_cpu::NaiveQAttention"
# The projection is bit-identical; the attention differs from ORT's by
# float32 summation order only.
TOL = (2e-5, 2e-5)


def qattention_model(inputs, attrs, n_outputs=1, constant_weight=False):
    names = [n if x is not None else "" for n, x in zip(NAMES, inputs)]
    while names and names[-1] == "":
        names.pop()
    outs = ["output", "present"][:n_outputs]
    node = oh.make_node("QAttention", names, outs, domain=MS, **attrs)
    graph_inputs = [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(x.dtype), x.shape)
                    for n, x in zip(NAMES, inputs) if x is not None]
    initializers = []
    if constant_weight:
        graph_inputs.pop(1)
        initializers.append(numpy_helper.from_array(inputs[1], "weight"))
    graph = oh.make_graph([node], "qattention", graph_inputs,
                          [oh.make_tensor_value_info(n, 1, None) for n in outs],
                          initializer=initializers)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])


def feeds_of(inputs, constant_weight=False):
    return {n: x for n, x in zip(NAMES, inputs)
            if x is not None and not (constant_weight and n == "weight")}


def run_ort(inputs, attrs, n_outputs=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(qattention_model(inputs, attrs, n_outputs).SerializeToString(),
                                so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds_of(inputs))


def run_ours(inputs, attrs, n_outputs=1, threads=1, naive=False, constant_weight=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    sess = ReferenceEvaluator(qattention_model(inputs, attrs, n_outputs, constant_weight))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds_of(inputs, constant_weight)), olc.used_kernel_names(sess)


MASKS = ("none", "ends", "ends_starts", "3b2", "2d", "3d", "b1")


def make_mask(rng, kind, b, s, t):
    if kind == "ends":
        return rng.integers(1, t + 3, size=b).astype(np.int32)
    if kind == "ends_starts":
        ends = rng.integers(1, t + 1, size=b)
        return np.concatenate([ends, rng.integers(0, 1, size=b)]).astype(np.int32)
    if kind == "3b2":
        return rng.integers(1, t + 1, size=3 * b + 2).astype(np.int32)
    if kind == "2d":
        mask = rng.integers(0, 2, size=(b, t)).astype(np.int32)
        mask[:, 0] = 1
        return mask
    if kind == "3d":
        mask = rng.integers(0, 2, size=(b, s, t)).astype(np.int32)
        mask[..., 0] = 1
        return mask
    if kind == "b1":  # ORT: masks nothing
        return rng.integers(0, 2, size=(b, 1)).astype(np.int32)
    return None


def quantized(rng, dtype, shape):
    """int8 values in the range ONNX Runtime sums exactly (see differential.py)."""
    lo, hi = ort_int8_weight_range() if dtype == np.int8 else (0, 255)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def random_config(rng, wtype, per_column, mask_kind="none", past=0, itype=np.uint8):
    """Inputs whose q, k, v come out of order 1 (scales fit the ranges)."""
    b = int(rng.integers(1, 3))
    n = int(rng.choice([1, 2, 3]))
    h = int(rng.choice([4, 8, 16, 33]))
    s = int(rng.choice([1, 3, 8, 17]))
    hin = int(rng.choice([n * h, 24, 40]))
    total = 3 * n * h
    x = quantized(rng, itype, (b, s, hin))
    w = quantized(rng, wtype, (hin, total))
    bias = rng.standard_normal(total).astype(np.float32)
    input_scale = np.array(rng.uniform(0.01, 0.03), np.float32)
    base = 1.0 / (100 * np.sqrt(hin))
    weight_scale = (rng.uniform(0.5, 1.5, size=total) * base).astype(np.float32) \
        if "scale" in per_column else np.array([base], np.float32)
    centre = 0 if wtype == np.int8 else 128
    weight_zp = (rng.integers(-5, 6, size=total) + centre).astype(wtype) \
        if "zp" in per_column else np.array(centre + int(rng.integers(-5, 6)), wtype)
    input_zp = np.array(int(rng.integers(100, 150)) - (128 if itype == np.int8 else 0), itype)
    t = past + s
    mask = make_mask(rng, mask_kind, b, s, t)
    past_kv = rng.standard_normal((2, b, n, past, h)).astype(np.float32) if past else None
    inputs = [x, w, bias, input_scale, weight_scale, mask, input_zp, weight_zp, past_kv]
    return inputs, {"num_heads": n}


def check(inputs, attrs, n_outputs=1, oracle="ort", constant_weight=False):
    """Ours (both families, every level, 1/2 threads) against ORT (or NAIVE)."""
    naive, names = run_ours(inputs, attrs, n_outputs, naive=True)
    assert set(names) == {NAIVE}, names
    if oracle == "ort":
        want = run_ort(inputs, attrs, n_outputs)
        compare(naive, want, "naive vs ORT")
    originals = [None if x is None else x.copy() for x in inputs]
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                got, names = run_ours(inputs, attrs, n_outputs, threads,
                                      constant_weight=constant_weight)
                assert set(names) == {OPT}, names
                what = f"{attrs} at {level}, {threads} threads"
                if oracle == "ort":
                    compare(got, want, what)
                compare(got, naive, f"naive agreement {what}")
                results.append(got)
            for a, b in thread_pairs(results):
                assert same_bits(a, b), "thread count changed the result"
    for x, original in zip(inputs, originals):
        assert x is None or same_bits(x, original), "input modified"


def compare(got, want, what):
    assert len(got) == len(want), what
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, f"{what} output {k}", TOL)


PER_COLUMN = ((), ("scale",), ("zp",), ("scale", "zp"))


@pytest.mark.parametrize("wtype", [np.uint8, np.int8], ids=["u8u8", "u8s8"])
@pytest.mark.parametrize("per_column", PER_COLUMN, ids=lambda p: "_".join(p) or "tensor")
@pytest.mark.parametrize("mask", MASKS)
def test_qattention_random_vs_ort(wtype, per_column, mask):
    rng = np.random.default_rng(MASKS.index(mask) * 10 + len(per_column) + (wtype == np.int8))
    inputs, attrs = random_config(rng, wtype, per_column, mask)
    check(inputs, attrs, 2)


@pytest.mark.parametrize("wtype", [np.uint8, np.int8], ids=["u8u8", "u8s8"])
@pytest.mark.parametrize("past", (0, 1, 5))
@pytest.mark.parametrize("unidirectional", (0, 1))
@pytest.mark.parametrize("mask", ("none", "ends", "2d"))
def test_qattention_past_present_unidirectional_vs_ort(wtype, past, unidirectional, mask):
    rng = np.random.default_rng(past * 7 + unidirectional + len(mask))
    inputs, attrs = random_config(rng, wtype, ("scale",), mask, past=past)
    attrs["unidirectional"] = unidirectional
    check(inputs, attrs, 2)


@pytest.mark.parametrize("extra", [{"scale": 0.37}, {"mask_filter_value": -7.5},
                                   {"mask_filter_value": -1e9, "scale": 0.1}])
def test_qattention_attributes_vs_ort(extra):
    rng = np.random.default_rng(21)
    inputs, attrs = random_config(rng, np.int8, (), "2d")
    check(inputs, {**attrs, **extra}, 1)


@pytest.mark.parametrize("wtype", [np.uint8, np.int8], ids=["u8u8", "u8s8"])
@pytest.mark.parametrize("per_column", PER_COLUMN, ids=lambda p: "_".join(p) or "tensor")
def test_projection_is_bit_identical_to_ort(wtype, per_column):
    """With one token the attention returns V itself (one key, weight 1):
    ORT's dequantized projection, which ours reproduces bit for bit."""
    rng = np.random.default_rng(5 + len(per_column))
    inputs, attrs = random_config(rng, wtype, per_column)
    inputs[0] = inputs[0][:, :1]
    want = run_ort(inputs, attrs)[0]
    for naive in (False, True):
        got = run_ours(inputs, attrs, naive=naive)[0][0]
        assert same_bits(got, want), f"naive={naive}: max {np.abs(got - want).max()}"


def test_constant_weight_is_packed_once_and_agrees():
    rng = np.random.default_rng(11)
    inputs, attrs = random_config(rng, np.int8, ("scale", "zp"), "ends")
    check(inputs, attrs, 1, constant_weight=True)
    model = qattention_model(inputs, attrs, constant_weight=True)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    feeds = feeds_of(inputs, constant_weight=True)
    first = sess.run(None, feeds)[0].copy()
    assert same_bits(first, sess.run(None, feeds)[0])


def test_strided_input():
    rng = np.random.default_rng(13)
    inputs, attrs = random_config(rng, np.uint8, ("zp",), "2d")
    x = inputs[0]
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    wide[..., ::2] = x
    got = run_ours([wide[..., ::2]] + inputs[1:], attrs)[0]
    compare(got, run_ort(inputs, attrs), "strided input")


def test_int8_input_extension():
    """ORT has no kernel for an int8 input: ours runs it, against NAIVE."""
    rng = np.random.default_rng(17)
    inputs, attrs = random_config(rng, np.int8, ("scale",), "ends", itype=np.int8)
    with pytest.raises(Exception, match="implementation"):
        run_ort(inputs, attrs)
    check(inputs, attrs, 1, oracle="naive")


def test_empty_batch_sequence_and_hidden():
    """ORT's process dies on a batch of 0 (division by zero): ours gives
    empty outputs; S = 0 as ORT; Hin = 0 gives q, k, v = bias (ORT: zeros)."""
    rng = np.random.default_rng(19)
    inputs, attrs = random_config(rng, np.int8, ())
    for naive in (False, True):
        got = run_ours([inputs[0][:0]] + inputs[1:], attrs, 2, naive=naive)[0]
        assert got[0].shape[0] == 0 and got[1].shape[1] == 0
        got = run_ours([inputs[0][:, :0]] + inputs[1:], attrs, 2, naive=naive)[0]
        assert got[0].shape == run_ort([inputs[0][:, :0]] + inputs[1:], attrs)[0].shape
    empty_hidden = [inputs[0][..., :0], inputs[1][:0]] + inputs[2:]
    check(empty_hidden, attrs, 1, oracle="naive")


# -- bad input ---------------------------------------------------------------

def _base():
    rng = np.random.default_rng(0)
    inputs, _ = random_config(rng, np.int8, ())
    x = quantized(rng, np.uint8, (2, 5, 12))
    w = quantized(rng, np.int8, (12, 36))
    return [x, w, rng.standard_normal(36).astype(np.float32)] + inputs[3:]


def _with(**changes):
    def make():
        inputs = _base()
        for name, value in changes.items():
            inputs[NAMES.index(name)] = value
        return inputs
    return make


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("case", [
    ("weight zp type", _with(weight_zero_point=np.array(0, np.uint8)), {},
     TypeError, r"input 7 \('weight_zero_point'\) has element type uint8"),
    ("input zp type", _with(input_zero_point=np.array(0, np.int8)), {},
     TypeError, r"input 6 \('input_zero_point'\) has element type int8"),
    ("weight scale shape", _with(weight_scale=np.ones(5, np.float32)), {},
     ValueError, r"input 4 \('weight_scale'\) has shape \(5,\)"),
    ("weight scale 2-D", _with(weight_scale=np.ones((1, 36), np.float32)), {},
     ValueError, r"input 4 \('weight_scale'\) has shape \(1, 36\)"),
    ("weight zp shape", _with(weight_zero_point=np.zeros(4, np.int8)), {},
     ValueError, r"input 7 \('weight_zero_point'\) has shape \(4,\)"),
    ("input scale shape", _with(input_scale=np.ones(2, np.float32)), {},
     ValueError, r"input 3 \('input_scale'\) has shape \(2,\)"),
    ("input zp shape", _with(input_zero_point=np.zeros(2, np.uint8)), {},
     ValueError, r"input 6 \('input_zero_point'\) has shape \(2,\)"),
    ("scale type", _with(weight_scale=np.ones(1, np.float64)), {},
     TypeError, r"input 4 \('weight_scale'\) has element type float64"),
    ("float16", _with(bias=np.ones(36, np.float16)), {},
     TypeError, r"input 2 \('bias'\) has element type float16"),
    ("heads", _with(), {"num_heads": 5},
     ValueError, r"input 1 \('weight'\) has a Q/K hidden size of 12, not divisible"),
    ("columns", lambda: [_base()[0], _base()[1][:, :35], np.ones(35, np.float32)]
     + _base()[3:], {}, ValueError, r"input 1 \('weight'\) has 35 columns, not divisible"),
    ("weight rows", lambda: [_base()[0], _base()[1][:11]] + _base()[2:], {},
     ValueError, r"input 1 \('weight'\) has shape \(11, 36\)"),
    ("bias shape", _with(bias=np.ones(30, np.float32)), {}, ValueError, r"input 2 \('bias'\)"),
    ("mask shape", _with(mask_index=np.ones((2, 6), np.int32)), {},
     ValueError, r"input 5 \('mask_index'\) has shape \(2, 6\)"),
    ("mask 4-D", _with(mask_index=np.ones((2, 1, 5, 5), np.int32)), {},
     NotImplementedError, r"input 5 \('mask_index'\).*4-D mask"),
    ("negative length", _with(mask_index=np.array([-1, 5], np.int32)), {},
     ValueError, r"input 5 \('mask_index'\) holds a negative key length"),
    ("past shape", _with(past=np.zeros((2, 2, 3, 1, 3), np.float32)), {},
     ValueError, r"input 8 \('past'\) has shape"),
    ("rotary", _with(), {"do_rotary": 1}, ValueError, "do_rotary"),
    ("bias missing", _with(bias=None), {}, ValueError, "input 2 .*is required"),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_bad_input(case, naive):
    _, make, extra, error, message = case
    inputs = make()
    attrs = {"num_heads": 3, **extra}
    with pytest.raises(error, match=message) as info:
        run_ours(inputs, attrs, naive=naive)
    assert "QAttention" in str(info.value)


# -- end to end ----------------------------------------------------------------

@pytest.mark.parametrize("naive", [False, True])
def test_dynamically_quantized_bert_like_graph_vs_ort(naive, tmp_path):
    """Attention's BERT-like graph quantized by onnxruntime.quantization
    (QEmbedLayerNormalization, QAttention, DynamicQuantizeLinear +
    MatMulInteger for the MatMuls) matches ORT, every fused node ours."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    import onnx
    from test_microsoft_attention import bert_like_model

    model, feeds = bert_like_model(np.random.default_rng(21), b=3, s=11)
    onnx.save(model, tmp_path / "float.onnx")
    quantization.quantize_dynamic(
        tmp_path / "float.onnx", tmp_path / "quantized.onnx",
        weight_type=quantization.QuantType.QInt8,
        op_types_to_quantize=["Attention", "MatMul", "EmbedLayerNormalization"],
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    quantized = onnx.load(tmp_path / "quantized.onnx")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(quantized.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    prefix = "Naive" if naive else ""
    for threads in THREAD_COUNTS:
        sess = ReferenceEvaluator(quantized)
        olc.register_kernels_for_session(sess, microsoft_implementation=policy)
        olc.set_num_threads_for_session(sess, threads)
        olc.set_kernel_usage_recording(sess, True)
        got = sess.run(None, feeds)
        names = set(olc.used_kernel_names(sess))
        for kernel in (f"{prefix}QAttention", f"{prefix}QEmbedLayerNormalization",
                       "MatMulInteger"):
            assert f"onnx_light_cpu::{kernel}" in names, (kernel, names)
        assert_close(got[0], want[0], f"quantized bert-like, {threads} threads", (1e-4, 1e-4))
