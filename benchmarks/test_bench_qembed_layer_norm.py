"""com.microsoft QEmbedLayerNormalization at BERT-base shapes: B=1,
S=128, hidden 768, uint8 tables (30522 words, 512 positions, 2 segments),
gamma and beta with their scales and zero points (initializers), a mask.
Ours vs ORT (onnx.reference has none), 1 and 2 threads.

    pytest benchmarks/test_bench_qembed_layer_norm.py --benchmark-only \
        --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper as oh

from ._harness import Case, bench_contender, naive_checked_case, node_model

MS = "com.microsoft"
THREADS = (1, 2)
HIDDEN = 768
VOCAB, POSITIONS = 30522, 512


def qembed_model(b: int, s: int) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(b * 1000 + s + 1)

    def q(*shape):
        return rng.integers(0, 256, shape).astype(np.uint8)

    init = {"word": q(VOCAB, HIDDEN), "position": q(POSITIONS, HIDDEN), "segment": q(2, HIDDEN),
            "gamma": q(HIDDEN), "beta": q(HIDDEN)}
    for name in list(init):
        init[f"{name}_scale"] = np.array(rng.uniform(0.005, 0.05), np.float32)
        init[f"{name}_zero_point"] = np.array(rng.integers(100, 150), np.uint8)
    feeds = {"input_ids": rng.integers(0, VOCAB, (b, s)).astype(np.int32),
             "segment_ids": rng.integers(0, 2, (b, s)).astype(np.int32),
             "mask": np.ones((b, s), np.int32)}
    tables = ("word", "position", "segment", "gamma", "beta")
    names = (["input_ids", "segment_ids", *tables, "mask"] + [f"{t}_scale" for t in tables]
             + [f"{t}_zero_point" for t in tables])
    node = oh.make_node("QEmbedLayerNormalization", names, ["output", "mask_index"], domain=MS,
                        epsilon=1e-12)
    return node_model(node, feeds, init, [onnx.TensorProto.FLOAT, onnx.TensorProto.INT32]), feeds


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def qembed_case(b: int, s: int) -> Case:
    return naive_checked_case(f"QEmbedLayerNormalization-B{b}xS{s}", *qembed_model(b, s),
                              "onnx_light_cpu::QEmbedLayerNormalization", 1e-5)


@pytest.mark.parametrize("contender", ["ours", "ort"])
@pytest.mark.parametrize("threads", THREADS)
def test_qembed_layer_norm(benchmark, bench_options, threads, contender):
    bench_contender(benchmark, qembed_case(1, 128), contender, threads,
                    budget_s=bench_options.budget_s)
