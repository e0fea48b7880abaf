"""com.microsoft EmbedLayerNormalization: differential tests against ONNX
Runtime 1.32 (float32, float16; bfloat16 against float32 ORT on the same
values) with and without segments, mask and position_ids ((B, S) and
(1, S)), every output subset, hidden sizes off the vector width; NAIVE
against OPTIMIZED at every SIMD level and 1/2 threads; bad input (ids out of
range, shapes)."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import (
    assert_close,
    assert_outputs_close,
    bfloat16_through_float32,
    check_every_level,
)

ort = pytest.importorskip("onnxruntime")

MS = "com.microsoft"
NAMES = ("input_ids", "segment_ids", "word_embedding", "position_embedding",
         "segment_embedding", "gamma", "beta", "mask", "position_ids")
OUTPUTS = ("output", "mask_index", "embedding_sum")
OPT = "onnx_light_cpu::EmbedLayerNormalization"
NAIVE = "onnx_light_cpu::NaiveEmbedLayerNormalization"
TOL = {
    np.dtype(np.float32): (2e-5, 2e-5),
    np.dtype(np.float16): (2e-3, 2e-3),
    np.dtype(bfloat16): (1.6e-2, 3e-2),
}


def embed_model(inputs, attrs, outputs=OUTPUTS):
    names = [n if x is not None else "" for n, x in zip(NAMES, inputs)]
    while names and names[-1] == "":
        names.pop()
    node = oh.make_node("EmbedLayerNormalization", names, list(outputs), domain=MS, **attrs)
    graph = oh.make_graph(
        [node], "embed",
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(x.dtype), x.shape)
         for n, x in zip(NAMES, inputs) if x is not None],
        [oh.make_value_info(n, oh.TypeProto()) for n in outputs if n])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                               oh.make_opsetid(MS, 1)])


def feeds_of(inputs):
    return {n: x for n, x in zip(NAMES, inputs) if x is not None}


def run_ort(inputs, attrs, outputs=OUTPUTS):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(embed_model(inputs, attrs, outputs).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds_of(inputs))


def run_ours(inputs, attrs, outputs=OUTPUTS, threads=1, naive=False):
    policy = (olc.MicrosoftKernelImplementation.NAIVE if naive
              else olc.MicrosoftKernelImplementation.OPTIMIZED)
    sess = ReferenceEvaluator(embed_model(inputs, attrs, outputs))
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess.run(None, feeds_of(inputs)), olc.used_kernel_names(sess)


def random_config(rng, dtype, segments=True, mask=True, positions=None, b=2, s=7, h=24):
    vocab, n_pos, n_seg = 30, s + 3, 3
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    ids = rng.integers(0, vocab, (b, s)).astype(np.int32)
    sids = rng.integers(0, n_seg, (b, s)).astype(np.int32) if segments else None
    seg = f(n_seg, h) if segments else None
    m = rng.integers(0, 2, (b, s)).astype(np.int32) if mask else None
    pids = None
    if positions == "bs":
        pids = rng.integers(0, n_pos, (b, s)).astype(np.int32)
    elif positions == "1s":
        pids = rng.integers(0, n_pos, (1, s)).astype(np.int32)
    tables = [f(vocab, h) * 2 + 1, f(n_pos, h), seg, f(h), f(h)]
    tables = [None if t is None else t.astype(dtype) for t in tables]
    word, pos, seg, gamma, beta = tables
    return [ids, sids, word, pos, seg, gamma, beta, m, pids]


def check(inputs, attrs, outputs=OUTPUTS, oracle="ort"):
    dtype = np.dtype(inputs[2].dtype)
    tol = TOL[dtype]
    naive, names = run_ours(inputs, attrs, outputs, naive=True)
    assert names == [NAIVE], names
    if oracle == "ort":
        ort_of = lambda x: run_ort(x, attrs, outputs)  # noqa: E731
        want = bfloat16_through_float32(ort_of, inputs) if dtype == bfloat16 else ort_of(inputs)
        assert_outputs_close(naive, want, "naive vs ORT", tol)

    def check_one(got, where):
        what = f"{attrs} {where}"
        if oracle == "ort":
            assert_outputs_close(got, want, what, tol)
        assert_outputs_close(got, naive, f"naive agreement {what}", tol)

    check_every_level(lambda threads: run_ours(inputs, attrs, outputs, threads), OPT, check_one,
                      inputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("segments", [True, False], ids=["segments", "no_segments"])
@pytest.mark.parametrize("mask", [True, False], ids=["mask", "no_mask"])
@pytest.mark.parametrize("positions", [None, "bs", "1s"])
def test_embed_vs_ort(dtype, segments, mask, positions):
    rng = np.random.default_rng(hash((segments, mask, positions)) % 1000)
    check(random_config(rng, dtype, segments, mask, positions), {})


@pytest.mark.parametrize("h", [1, 7, 16, 33, 768])
def test_hidden_sizes_and_epsilon(h):
    rng = np.random.default_rng(h)
    check(random_config(rng, np.float32, h=h, b=3, s=5), {"epsilon": 1e-5})


@pytest.mark.parametrize("outputs", [("output", "mask_index"), ("output", "", "embedding_sum")])
def test_output_subsets(outputs):
    rng = np.random.default_rng(1)
    check(random_config(rng, np.float32), {}, outputs)


def test_output_only_is_ours_alone():
    """ORT's shape inference wants mask_index; one output works here."""
    rng = np.random.default_rng(2)
    inputs = random_config(rng, np.float32)
    got = run_ours(inputs, {}, ("output",))[0]
    assert_close(got[0], run_ort(inputs, {})[0], "output only", TOL[np.dtype(np.float32)])


def test_mask_index_counts_ones():
    """[1, 1, 0, 1, 0] -> 3; values other than 1 are not counted (ORT)."""
    rng = np.random.default_rng(3)
    inputs = random_config(rng, np.float32, s=5)
    inputs[7] = np.array([[1, 1, 0, 1, 0], [1, 2, 0, -1, 1]], np.int32)
    got = run_ours(inputs, {})[0]
    np.testing.assert_array_equal(got[1], [3, 2])
    check(inputs, {})


def test_segment_embedding_without_segment_ids_adds_row_0():
    rng = np.random.default_rng(4)
    inputs = random_config(rng, np.float32)
    inputs[1] = None
    check(inputs, {})


def test_bert_base_shape_two_threads():
    rng = np.random.default_rng(5)
    check(random_config(rng, np.float32, b=2, s=128, h=768), {})


def test_strided_read_only_and_empty():
    rng = np.random.default_rng(6)
    inputs = random_config(rng, np.float32)
    word = inputs[2]
    wide = np.zeros((word.shape[0], 2 * word.shape[1]), np.float32)
    wide[:, ::2] = word
    ro = inputs[3].copy()
    ro.flags.writeable = False
    other = list(inputs)
    other[2], other[3] = wide[:, ::2], ro
    assert_outputs_close(run_ours(other, {})[0], run_ort(inputs, {}), "strided",
                         TOL[np.dtype(np.float32)])
    for cut in (np.s_[:0], np.s_[:, :0]):
        empty = [x if x is None or x.dtype != np.int32 else x[cut] for x in inputs[:8]]
        got = run_ours(empty, {})[0]
        want = run_ort(empty, {})
        assert [g.shape for g in got] == [w.shape for w in want]


# -- bad input ---------------------------------------------------------------

@pytest.mark.parametrize("naive", [False, True])
@pytest.mark.parametrize("case", [
    ("id too large", 0, lambda x: np.full_like(x, 30), r"input 0 \('input_ids'\) holds 30"),
    ("id negative", 0, lambda x: np.full_like(x, -1), r"input 0 \('input_ids'\) holds -1"),
    ("segment id", 1, lambda x: np.full_like(x, 3), r"input 1 \('segment_ids'\) holds 3"),
    ("position id", 8, lambda x: np.full((2, 7), 10, np.int32),
     r"input 8 \('position_ids'\) holds 10"),
    ("position ids batch", 8, lambda x: np.zeros((3, 7), np.int32),
     r"input 8 \('position_ids'\) has shape \(3, 7\)"),
    ("positions beyond the table", 3, lambda x: x[:5], r"input 3 \('position_embedding'\) has 5"),
    ("mask shape", 7, lambda x: x[:, :3], r"input 7 \('mask'\) has shape \(2, 3\)"),
    ("segment_ids shape", 1, lambda x: x[:1], r"input 1 \('segment_ids'\) has shape"),
    ("gamma", 5, lambda x: x[:5], r"input 5 \('gamma'\) has shape \(5,\)"),
    ("position hidden", 3, lambda x: np.zeros((10, 5), np.float32),
     r"input 3 \('position_embedding'\) has shape \(10, 5\)"),
    ("ids int64", 0, lambda x: x.astype(np.int64), r"input 0 \('input_ids'\) has element type"),
    ("ids rank", 0, lambda x: x[0], r"input 0 \('input_ids'\) has rank 1"),
], ids=lambda c: c[0] if isinstance(c, tuple) else None)
def test_bad_input(case, naive):
    _, index, change, message = case
    rng = np.random.default_rng(0)
    inputs = random_config(rng, np.float32)
    inputs[index] = change(inputs[index] if inputs[index] is not None else inputs[0])
    with pytest.raises((ValueError, TypeError), match=message) as info:
        run_ours(inputs, {}, naive=naive)
    assert "EmbedLayerNormalization" in str(info.value)


def test_segment_ids_without_table():
    rng = np.random.default_rng(0)
    inputs = random_config(rng, np.float32)
    inputs[4] = None
    with pytest.raises(ValueError, match="without input 4"):
        run_ours(inputs, {})
