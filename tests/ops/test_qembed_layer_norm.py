"""com.microsoft QEmbedLayerNormalization (BERT's embedding layer with
quantized tables): differential tests against ONNX Runtime 1.32 (uint8 and
int8 tables, with and without the segment inputs, with and without a
mask), NAIVE against OPTIMIZED at every SIMD level and 1/2 threads, bad
input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, same_bits, thread_pairs

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
NAMES = ("input_ids", "segment_ids", "word_embedding_quant", "position_embedding_quant",
         "segment_embedding", "gamma_quant", "beta_quant", "mask", "word_embedding_scale",
         "position_embedding_scale", "segment_embedding_scale", "gamma_scale", "beta_scale",
         "word_embedding_zero_point", "position_embedding_zero_point",
         "segment_embedding_zero_point", "gamma_zero_point", "beta_zero_point")
OPT = "onnx_light_cpu::QEmbedLayerNormalization"
NAIVE = "onnx_light_cpu::NaiveQEmbedLayerNormalization"
# The LayerNorm statistics are summed in another order than ORT's loop.
TOL = (1e-5, 1e-5)
SEGMENT = (1, 4, 10, 15)


def model_of(inputs, n_outputs=2, epsilon=1e-5):
    names = [n if x is not None else "" for n, x in zip(NAMES, inputs)]
    while names and names[-1] == "":
        names.pop()
    outs = ["output", "mask_index"][:n_outputs]
    node = oh.make_node("QEmbedLayerNormalization", names, outs, domain=MS, epsilon=epsilon)
    graph = oh.make_graph(
        [node], "qembed",
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in zip(NAMES, inputs) if x is not None],
        [oh.make_tensor_value_info(n, t, None) for n, t in zip(outs, (1, 6))])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)])


def feeds_of(inputs):
    return {n: x for n, x in zip(NAMES, inputs) if x is not None}


def run_ort(inputs, n_outputs=2):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model_of(inputs, n_outputs).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds_of(inputs))


def run_ours(inputs, n_outputs=2, threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    sess = ReferenceEvaluator(model_of(inputs, n_outputs))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds_of(inputs)), olc.used_kernel_names(sess)


def random_inputs(rng, qtype, segment=True, mask=True, b=2, s=7, h=40, vocab=30, positions=9):
    lo, hi = (-128, 128) if qtype == np.int8 else (0, 256)

    def q(*shape):
        return rng.integers(lo, hi, size=shape).astype(qtype)

    def scale():
        return np.array(rng.uniform(0.005, 0.05), np.float32)

    def zero():
        return np.array(int(rng.integers(lo // 2 + hi // 4, hi // 2 + hi // 4)), qtype)

    inputs = [rng.integers(0, vocab, size=(b, s)).astype(np.int32),
              rng.integers(0, 2, size=(b, s)).astype(np.int32),
              q(vocab, h), q(positions, h), q(2, h), q(h), q(h),
              rng.integers(0, 3, size=(b, s)).astype(np.int32),
              scale(), scale(), scale(), scale(), scale(),
              zero(), zero(), zero(), zero(), zero()]
    if not segment:
        for i in SEGMENT:
            inputs[i] = None
    if not mask:
        inputs[7] = None
    return inputs


def check(inputs, n_outputs=2):
    want = run_ort(inputs, n_outputs)
    naive, names = run_ours(inputs, n_outputs, naive=True)
    assert set(names) == {NAIVE}, names
    compare(naive, want, "naive vs ORT")
    originals = [None if x is None else x.copy() for x in inputs]
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                got, names = run_ours(inputs, n_outputs, threads)
                assert set(names) == {OPT}, names
                what = f"{level}, {threads} threads"
                compare(got, want, what)
                compare(got, naive, f"naive agreement {what}")
                results.append(got)
            for a, b in thread_pairs(results):
                assert same_bits(a, b), "thread count changed the result"
    for x, original in zip(inputs, originals):
        assert x is None or same_bits(x, original), "input modified"


def compare(got, want, what):
    assert len(got) == len(want), what
    assert_close(got[0], want[0], f"{what} output 0", TOL)
    if len(got) > 1:
        assert got[1].dtype == np.int32 and same_bits(got[1], want[1]), f"{what} mask_index"


@pytest.mark.parametrize("qtype", [np.uint8, np.int8], ids=["uint8", "int8"])
@pytest.mark.parametrize("segment", [True, False], ids=["segment", "no_segment"])
@pytest.mark.parametrize("mask", [True, False], ids=["mask", "no_mask"])
@pytest.mark.parametrize("seed", range(2))
def test_qembed_layer_norm_vs_ort(qtype, segment, mask, seed):
    rng = np.random.default_rng(seed * 8 + segment * 2 + mask)
    shape = dict(b=int(rng.integers(1, 4)), s=int(rng.integers(1, 10)),
                 h=int(rng.choice([8, 33, 64, 768])))
    check(random_inputs(rng, qtype, segment, mask, **shape))


def test_empty_sequence_and_one_output():
    rng = np.random.default_rng(3)
    inputs = random_inputs(rng, np.uint8)
    for i in (0, 1, 7):
        inputs[i] = inputs[i][:, :0]
    check(inputs)
    inputs = random_inputs(rng, np.int8)
    for naive in (False, True):  # ORT's schema requires output 1: ours may leave it out
        got = run_ours(inputs, 1, naive=naive)[0]
        assert_close(got[0], run_ort(inputs)[0], "one output", TOL)


@pytest.mark.parametrize("naive", [False, True])
def test_constant_tables_are_dequantized_once(naive):
    """Tables, scales and zero points as initializers, as the quantization
    tools write them: the position and segment tables, gamma and beta are
    dequantized at the first run only, and every run gives the bits of the
    same inputs fed as graph inputs."""
    rng = np.random.default_rng(5)
    inputs = random_inputs(rng, np.uint8, b=2, s=6, h=33)
    model = model_of(inputs)
    model.graph.initializer.extend(
        onnx.numpy_helper.from_array(x, NAMES[i]) for i, x in enumerate(inputs)
        if i not in (0, 1, 7))
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess, microsoft_implementation=(
        olc.MicrosoftKernelImplementation.NAIVE if naive
        else olc.MicrosoftKernelImplementation.OPTIMIZED))
    olc.set_kernel_usage_recording(sess, True)
    node = sess.rt_nodes_[0]
    for run in range(3):
        ids = rng.integers(0, 30, size=(2, 6)).astype(np.int32)
        sids = rng.integers(0, 2, size=(2, 6)).astype(np.int32)
        fed = [ids, sids] + inputs[2:7] + [inputs[7]] + inputs[8:]
        got = sess.run(None, {"input_ids": ids, "segment_ids": sids, "mask": inputs[7]})
        want, _ = run_ours(fed, naive=naive)
        assert all(same_bits(a, b) for a, b in zip(got, want)), f"run {run}"
        assert sorted(node._prepared_inputs) == [("dequantized", i) for i in (1, 2, 3, 4)]
    assert set(olc.used_kernel_names(sess)) == {NAIVE if naive else OPT}


def _with(*changes):
    def make():
        inputs = random_inputs(np.random.default_rng(0), np.uint8, b=2, s=4, h=8, vocab=10,
                               positions=6)
        for index, value in changes:
            inputs[index] = value(inputs) if callable(value) else value
        return inputs
    return make


@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("case", [
    ("id out of range", _with((0, np.array([[0, 1, 2, 10], [0, 0, 0, 0]], np.int32))),
     ValueError, r"input 0 \('input_ids'\) holds 10"),
    ("negative id", _with((0, np.array([[0, 1, 2, -1], [0, 0, 0, 0]], np.int32))),
     ValueError, r"input 0 \('input_ids'\) holds -1"),
    ("segment id", _with((1, np.array([[0, 1, 2, 1], [0, 0, 0, 0]], np.int32))),
     ValueError, r"input 1 \('segment_ids'\) holds 2"),
    ("sequence past positions", _with((3, lambda x: x[3][:3])),
     ValueError, r"input 3 \('position_embedding_quant'\) has 3 rows"),
    ("segment ids alone", _with((4, None), (10, None), (15, None)),
     ValueError, r"input 4 \(segment_embedding\) is missing"),
    ("segment table alone", _with((1, None)),
     ValueError, r"input 1 \(segment_ids\) is missing"),
    ("scale shape", _with((8, np.ones(2, np.float32))),
     ValueError, r"input 8 \('word_embedding_scale'\) has shape \(2,\)"),
    ("zero point shape", _with((14, np.zeros((1, 1), np.uint8))),
     ValueError, r"input 14 \('position_embedding_zero_point'\) has shape \(1, 1\)"),
    ("zero point type", _with((13, np.array(0, np.int8))),
     TypeError, r"input 13 \('word_embedding_zero_point'\) has element type int8"),
    ("table types", _with((3, lambda x: x[3].view(np.int8))),
     TypeError, r"input 3 \('position_embedding_quant'\) has element type int8"),
    ("scale type", _with((11, np.array(1.0, np.float64))),
     TypeError, r"input 11 \('gamma_scale'\) has element type float64"),
    ("gamma shape", _with((5, lambda x: x[5][:4])),
     ValueError, r"input 5 \('gamma_quant'\) has shape \(4,\)"),
    ("mask shape", _with((7, np.ones((2, 3), np.int32))),
     ValueError, r"input 7 \('mask'\) has shape \(2, 3\)"),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_bad_input(case, naive):
    _, make, error, message = case
    with pytest.raises(error, match=message) as info:
        run_ours(make(), naive=naive)
    assert "QEmbedLayerNormalization" in str(info.value)
