"""Tiny CNNs and an LSTM encoder with the structure torch.onnx.export writes
(benchmarks/vision.py) run end to end with our kernels, as exported (its
Conv chains fused in the run plan, and node by node) and after olc.fuse
(FusedConv), and match ONNX Runtime, at 1 and 2 threads, bit-identical
between the two."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from differential import THREAD_COUNTS

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.vision import (  # noqa: E402
    TINY_CNNS,
    TINY_LSTM,
    build_cnn,
    build_lstm,
    cnn_feeds,
    lstm_feeds,
)

# The operators whose kernel must be ours, per model kind.
EXPECTED = {
    "resnet": {"Conv", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Flatten", "Gemm"},
    "mobilenet_v2": {"Conv", "Clip", "Add", "GlobalAveragePool", "Flatten", "Gemm"},
    "densenet": {"Conv", "Relu", "MaxPool", "Concat", "BatchNormalization", "AveragePool",
                 "GlobalAveragePool", "Flatten", "Gemm"},
    "lstm": {"LSTM", "Slice", "Transpose", "Reshape"},
}
# Sums of up to a few thousand products in another order than ORT's.
RTOL, ATOL = 1e-4, 1e-4

# After olc.fuse, or fused in the run plan (registry/conv_chains.py): Conv +
# Add + activation run as FusedConv, BatchNormalization + Relu as one
# BatchNormalization.
FUSED_EXPECTED = {
    "resnet": {"FusedConv", "Conv", "MaxPool", "GlobalAveragePool", "Flatten", "Gemm"},
    "mobilenet_v2": {"FusedConv", "Conv", "GlobalAveragePool", "Flatten", "Gemm"},
    "densenet": {"FusedConv", "Conv", "MaxPool", "Concat", "BatchNormalization",
                 "AveragePool", "GlobalAveragePool", "Flatten", "Gemm"},
}

# how the Conv chains run: "plan" (the default), "nodes" (fuse_conv=False),
# "fuse" (olc.fuse first)
CASES = [(c.name, c.kind, build_cnn, cnn_feeds, c, mode) for c in TINY_CNNS
         for mode in ("plan", "nodes", "fuse")]
CASES.append((TINY_LSTM.name, "lstm", build_lstm, lstm_feeds, TINY_LSTM, "plan"))


def _ours(model, threads, fuse_conv=True):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess, fuse_conv=fuse_conv)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess


@pytest.mark.parametrize("name, kind, build, feeds, config, mode", CASES,
                         ids=[c[0] + {"plan": "", "nodes": "-nodes", "fuse": "-fused"}[c[5]]
                              for c in CASES])
def test_model_matches_onnxruntime(name, kind, build, feeds, config, mode):
    exported, inputs = build(config), feeds(config)
    model = olc.fuse(exported, ["fused_conv"]).model if mode == "fuse" else exported
    expected = EXPECTED[kind] if mode == "nodes" else FUSED_EXPECTED.get(kind, EXPECTED[kind])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(exported.SerializeToString(), so,
                                providers=["CPUExecutionProvider"]).run(None, inputs)[0]
    results = {}
    for threads in THREAD_COUNTS:
        sess = _ours(model, threads, fuse_conv=mode != "nodes")
        results[threads] = sess.run(None, inputs)[0]
        used = {n.split("::", 1)[1] for n in olc.used_kernel_names(sess)}
        missing = sorted(expected - used)
        assert not missing, f"{name}: these operators did not run our kernel: {missing}"
    first = results[THREAD_COUNTS[0]]
    np.testing.assert_allclose(first, want, rtol=RTOL, atol=ATOL, err_msg=name)
    for threads in THREAD_COUNTS[1:]:
        np.testing.assert_array_equal(first, results[threads], err_msg=f"{name}: {threads} threads")
