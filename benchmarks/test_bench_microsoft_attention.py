"""com.microsoft Attention (BERT's fused self-attention) at BERT-base
shapes: B=1 and 8, S=128 and 384, hidden 768, 12 heads, weights (768, 2304)
and bias as initializers (both engines pack them once), a key-length mask
(half the batch padded to 3/4 of S); float32, ours vs ORT (onnx.reference
has no com.microsoft Attention), 1 and 2 threads.

    pytest benchmarks/test_bench_microsoft_attention.py --benchmark-only \
        --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import DEFAULT_IR_VERSION, Case, _onnx_type, bench_contender

MS = "com.microsoft"
THREADS = (1, 2)
SHAPES = ((1, 128), (1, 384), (8, 128), (8, 384))
HIDDEN, HEADS = 768, 12


def attention_model(b: int, s: int, dtype: str) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(b * 1000 + s)
    t = _onnx_type(dtype)
    x = rng.standard_normal((b, s, HIDDEN)).astype(dtype)
    w = (rng.standard_normal((HIDDEN, 3 * HIDDEN)) / np.sqrt(HIDDEN)).astype(dtype)
    bias = rng.standard_normal(3 * HIDDEN).astype(dtype)
    lengths = np.full(b, s, np.int32)
    lengths[b // 2:] = s * 3 // 4
    node = oh.make_node("Attention", ["input", "weights", "bias", "mask_index"], ["output"],
                        domain=MS, num_heads=HEADS)
    graph = oh.make_graph(
        [node], "single_Attention",
        [oh.make_tensor_value_info("input", t, list(x.shape)),
         oh.make_tensor_value_info("mask_index", onnx.TensorProto.INT32, [b])],
        [oh.make_tensor_value_info("output", t, None)],
        [numpy_helper.from_array(w, "weights"), numpy_helper.from_array(bias, "bias")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    return model, {"input": x, "mask_index": lengths}


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def attention_case(b: int, s: int, dtype: str) -> Case:
    model, feeds = attention_model(b, s, dtype)
    naive = ReferenceEvaluator(model)
    olc.register_kernels_for_session(
        naive, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
    tol = 3e-3 if dtype == "float16" else 2e-5
    return Case(f"MicrosoftAttention-B{b}xS{s}", model, feeds, dtype=dtype,
                size=feeds["input"].size, domain=MS, reference=lambda f: naive.run(None, f),
                rtol=tol, atol=tol, expected_kernel="onnx_light_cpu::MicrosoftAttention")


@pytest.mark.parametrize("contender", ["ours", "ort"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"B{s[0]}xS{s[1]}")
def test_microsoft_attention(benchmark, bench_options, shape, threads, contender):
    case = attention_case(*shape, "float32")
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
