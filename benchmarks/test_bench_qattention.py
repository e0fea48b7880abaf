"""com.microsoft QAttention at BERT-base shapes: B=1, S=128 and 384,
hidden 768, 12 heads; uint8 input, int8 weights (768, 2304) with
per-column scales and zero points (weights, bias, scales and zero points
initializers: both engines pack the weights once) and a key-length mask.
Ours vs ORT (onnx.reference has no QAttention), 1 and 2 threads.

    pytest benchmarks/test_bench_qattention.py --benchmark-only \
        --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper as oh

from ._harness import INT8_WEIGHTS, Case, bench_contender, naive_checked_case, node_model

MS = "com.microsoft"
THREADS = (1, 2)
SHAPES = ((1, 128), (1, 384))
HIDDEN, HEADS = 768, 12


def qattention_model(b: int, s: int) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(b * 1000 + s)
    x = rng.integers(0, 256, (b, s, HIDDEN)).astype(np.uint8)
    lengths = np.full(b, s, np.int32)
    lengths[b // 2:] = s * 3 // 4
    total = 3 * HIDDEN
    init = {
        "weight": rng.integers(*INT8_WEIGHTS, (HIDDEN, total)).astype(np.int8),
        "bias": rng.standard_normal(total).astype(np.float32),
        "input_scale": np.array(0.02, np.float32),
        "weight_scale": (rng.uniform(0.5, 1.5, total) / (100 * np.sqrt(HIDDEN))
                         ).astype(np.float32),
        "input_zero_point": np.array(128, np.uint8),
        "weight_zero_point": rng.integers(-3, 4, total).astype(np.int8),
    }
    node = oh.make_node("QAttention", ["input", "weight", "bias", "input_scale", "weight_scale",
                                       "mask_index", "input_zero_point", "weight_zero_point"],
                        ["output"], domain=MS, num_heads=HEADS)
    feeds = {"input": x, "mask_index": lengths}
    return node_model(node, feeds, init, [onnx.TensorProto.FLOAT]), feeds


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def qattention_case(b: int, s: int) -> Case:
    return naive_checked_case(f"QAttention-B{b}xS{s}", *qattention_model(b, s),
                              "onnx_light_cpu::QAttention", 2e-5)


@pytest.mark.parametrize("contender", ["ours", "ort"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"B{s[0]}xS{s[1]}")
def test_qattention(benchmark, bench_options, shape, threads, contender):
    bench_contender(benchmark, qattention_case(*shape), contender, threads,
                    budget_s=bench_options.budget_s)


