"""com.microsoft GroupQueryAttention as LLaMA-style decoders run it (B=1, 32
query heads, 8 kv heads, head size 128), ours vs ORT:

    pytest benchmarks/test_bench_group_query_attention.py --benchmark-only \
        --benchmark-group-by=group

Rows: decode (one token) after 512 and 2048 cached positions, prefill of
128 and 512 tokens; each with and without ``do_rotary``; float32 and
float16; 1 and 2 threads.  The past cache grows (present = past + new), the
layout ORT's model builder uses without buffer sharing.  onnx.reference has
no kernel for this operator, so there is no builtin contender.

Quantized KV caches (``test_group_query_attention_quantized``): decode after
512 and 2048 cached positions with int8 and int4 (uint8, two codes a byte)
per-channel caches, float32, the same shapes.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import DEFAULT_IR_VERSION, Case, _onnx_type, bench_contender

MS = "com.microsoft"
N, NKV, H = 32, 8, 128
THREADS = (1, 2)
# (label, new tokens S, cached positions P)
STEPS = (("decode512", 1, 512), ("decode2048", 1, 2048), ("prefill128", 128, 0),
         ("prefill512", 512, 0))
DTYPES = ("float32", "float16")
CONTENDERS = ("ours", "ort")
MAX_POSITIONS = 4096


def _model(dtype: str, S: int, P: int, rotary: bool):
    t = _onnx_type(dtype)
    names = ["query", "key", "value", "past_key", "past_value", "seqlens_k",
             "total_sequence_length"] + (["cos_cache", "sin_cache"] if rotary else [])
    shapes = {"query": [1, S, N * H], "key": [1, S, NKV * H], "value": [1, S, NKV * H],
              "past_key": [1, NKV, P, H], "past_value": [1, NKV, P, H], "seqlens_k": [1],
              "total_sequence_length": [], "cos_cache": [MAX_POSITIONS, H // 2],
              "sin_cache": [MAX_POSITIONS, H // 2]}
    node = oh.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                        domain=MS, num_heads=N, kv_num_heads=NKV, do_rotary=int(rotary))
    inputs = [oh.make_tensor_value_info(
        n, 6 if n in ("seqlens_k", "total_sequence_length") else t, shapes[n]) for n in names]
    graph = oh.make_graph([node], "single_GroupQueryAttention", inputs,
                          [oh.make_tensor_value_info(n, t, None)
                           for n in ("output", "present_key", "present_value")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    return model, names, shapes


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def gqa_case(step: str, dtype: str, rotary: bool) -> Case:
    _, S, P = next(s for s in STEPS if s[0] == step)
    rng = np.random.default_rng(S + P)
    model, names, shapes = _model(dtype, S, P, rotary)
    feeds = {}
    for n in names:
        if n == "seqlens_k":
            feeds[n] = np.array([P + S - 1], np.int32)
        elif n == "total_sequence_length":
            feeds[n] = np.array(P + S, np.int32)
        elif n in ("cos_cache", "sin_cache"):
            angle = np.arange(MAX_POSITIONS)[:, None] * 10000.0 ** (-np.arange(H // 2) / (H // 2))
            feeds[n] = (np.cos(angle) if n == "cos_cache" else np.sin(angle)).astype(dtype)
        else:
            feeds[n] = rng.standard_normal(shapes[n]).astype(np.float32).astype(dtype)
    naive = ReferenceEvaluator(model)
    olc.register_kernels_for_session(
        naive, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
    tol = 4e-3 if dtype == "float16" else 1e-4
    label = f"GroupQueryAttention-{step}{'-rotary' if rotary else ''}"
    return Case(label, model, feeds, dtype=dtype, size=feeds["query"].size, domain=MS,
                reference=lambda f: naive.run(None, f), rtol=tol, atol=tol,
                expected_kernel="onnx_light_cpu::GroupQueryAttention")


def _params():
    for step, _, _ in STEPS:
        for rotary in (False, True):
            for dtype in DTYPES:
                for threads in THREADS:
                    for contender in CONTENDERS:
                        yield pytest.param(
                            step, rotary, dtype, threads, contender,
                            id=(f"{step}{'-rotary' if rotary else ''}-{dtype}"
                                f"-t{threads}-{contender}"),
                        )


@pytest.mark.parametrize("step,rotary,dtype,threads,contender", list(_params()))
def test_group_query_attention(benchmark, bench_options, step, rotary, dtype, threads, contender):
    case = gqa_case(step, dtype, rotary)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)


# -- quantized KV caches ---------------------------------------------------------

QUANT_STEPS = ("decode512", "decode2048")
KV_BITS = (8, 4)


@functools.lru_cache(maxsize=1)
def gqa_quantized_case(step: str, bits: int) -> Case:
    _, S, P = next(s for s in STEPS if s[0] == step)
    rng = np.random.default_rng(P + bits)
    names = ["query", "key", "value", "past_key", "past_value", "seqlens_k",
             "total_sequence_length", "", "", "", "", "", "k_scale", "v_scale"]
    code = TensorProto.INT8 if bits == 8 else TensorProto.UINT8
    types = {"past_key": code, "past_value": code, "seqlens_k": TensorProto.INT32,
             "total_sequence_length": TensorProto.INT32}
    node = oh.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                        domain=MS, num_heads=N, kv_num_heads=NKV, k_quant_type="PER_CHANNEL",
                        v_quant_type="PER_CHANNEL", kv_cache_bit_width=bits)
    graph = oh.make_graph(
        [node], "single_GroupQueryAttention",
        [oh.make_tensor_value_info(n, types.get(n, TensorProto.FLOAT), None) for n in names if n],
        [oh.make_tensor_value_info("output", TensorProto.FLOAT, None),
         oh.make_tensor_value_info("present_key", code, None),
         oh.make_tensor_value_info("present_value", code, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    Hc = H if bits == 8 else H // 2
    cache = ((lambda: rng.integers(-128, 128, (1, NKV, P, Hc)).astype(np.int8)) if bits == 8
             else (lambda: rng.integers(0, 256, (1, NKV, P, Hc)).astype(np.uint8)))
    feeds = {"query": rng.standard_normal((1, S, N * H)).astype(np.float32),
             "key": rng.standard_normal((1, S, NKV * H)).astype(np.float32),
             "value": rng.standard_normal((1, S, NKV * H)).astype(np.float32),
             "past_key": cache(), "past_value": cache(),
             "seqlens_k": np.array([P + S - 1], np.int32),
             "total_sequence_length": np.array(P + S, np.int32),
             "k_scale": rng.uniform(0.01, 0.03, (1, NKV, 1, H)).astype(np.float32),
             "v_scale": rng.uniform(0.01, 0.03, (1, NKV, 1, H)).astype(np.float32)}
    naive = ReferenceEvaluator(model)
    olc.register_kernels_for_session(
        naive, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
    return Case(f"GroupQueryAttention-{step}-int{bits}kv", model, feeds, dtype="float32",
                size=feeds["query"].size, domain=MS, reference=lambda f: naive.run(None, f),
                rtol=1e-4, atol=1e-4, expected_kernel="onnx_light_cpu::GroupQueryAttention")


@pytest.mark.parametrize("step", QUANT_STEPS)
@pytest.mark.parametrize("bits", KV_BITS)
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("contender", CONTENDERS)
def test_group_query_attention_quantized(benchmark, bench_options, step, bits, threads,
                                         contender):
    case = gqa_quantized_case(step, bits)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
