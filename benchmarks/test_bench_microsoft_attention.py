"""com.microsoft Attention (BERT's fused self-attention) at BERT-base
shapes: B=1 and 8, S=128 and 384, hidden 768, 12 heads, weights (768, 2304)
and bias as initializers (both engines pack them once), a key-length mask
(half the batch padded to 3/4 of S); and as GPT-2 small runs it (the same
sizes, ``unidirectional=1``, a raw (B, P + S) mask of ones, ``past`` and
``present``): a 128-token prompt and one token after 128.  float32, ours vs
ORT (onnx.reference has no com.microsoft Attention), 1 and 2 threads.

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


# GPT-2 small: (batch, new tokens, cached positions)
GPT2_STEPS = ((1, 128, 0), (1, 1, 128))


def attention_model(b: int, s: int, dtype: str,
                    past: int | None = None) -> tuple[onnx.ModelProto, dict]:
    """BERT's node with a key-length mask, or (``past`` given) GPT-2's:
    causal, a raw mask of ones, past and present."""
    rng = np.random.default_rng(b * 1000 + s)
    t = _onnx_type(dtype)
    x = rng.standard_normal((b, s, HIDDEN)).astype(dtype)
    w = (rng.standard_normal((HIDDEN, 3 * HIDDEN)) / np.sqrt(HIDDEN)).astype(dtype)
    bias = rng.standard_normal(3 * HIDDEN).astype(dtype)
    if past is None:
        mask = np.full(b, s, np.int32)
        mask[b // 2:] = s * 3 // 4
        inputs, outputs, attrs = ["input", "weights", "bias", "mask_index"], ["output"], {}
        feeds = {"input": x, "mask_index": mask}
    else:
        mask = np.ones((b, past + s), np.int32)
        cache = rng.standard_normal((2, b, HEADS, past, HIDDEN // HEADS)).astype(dtype)
        inputs = ["input", "weights", "bias", "mask_index", "past"]
        outputs, attrs = ["output", "present"], {"unidirectional": 1}
        feeds = {"input": x, "mask_index": mask, "past": cache}
    node = oh.make_node("Attention", inputs, outputs, domain=MS, num_heads=HEADS, **attrs)
    graph = oh.make_graph(
        [node], "single_Attention",
        [oh.make_tensor_value_info(n, _onnx_type(a.dtype), list(a.shape))
         for n, a in feeds.items()],
        [oh.make_tensor_value_info(n, t, None) for n in outputs],
        [numpy_helper.from_array(w, "weights"), numpy_helper.from_array(bias, "bias")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    return model, feeds


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def attention_case(b: int, s: int, dtype: str, past: int | None = None) -> Case:
    model, feeds = attention_model(b, s, dtype, past)
    naive = ReferenceEvaluator(model)
    olc.register_kernels_for_session(
        naive, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
    tol = 3e-3 if dtype == "float16" else 2e-5
    label = f"B{b}xS{s}" if past is None else f"GPT2-B{b}xS{s}xP{past}"
    return Case(f"MicrosoftAttention-{label}", model, feeds, dtype=dtype,
                size=feeds["input"].size, domain=MS, reference=lambda f: naive.run(None, f),
                rtol=tol, atol=tol, expected_kernel="onnx_light_cpu::MicrosoftAttention")


@pytest.mark.parametrize("contender", ["ours", "ort"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"B{s[0]}xS{s[1]}")
def test_microsoft_attention(benchmark, bench_options, shape, threads, contender):
    case = attention_case(*shape, "float32")
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)


@pytest.mark.parametrize("contender", ["ours", "ort"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("step", GPT2_STEPS, ids=lambda s: f"B{s[0]}xS{s[1]}xP{s[2]}")
def test_gpt2_attention(benchmark, bench_options, step, threads, contender):
    case = attention_case(step[0], step[1], "float32", step[2])
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
