"""com.microsoft EmbedLayerNormalization at BERT-base shapes: B=1 and 8,
S=128 and 384, hidden 768, vocabulary 30522, 512 positions, 2 segments, a
mask (output mask_index), tables as initializers; float32 and float16, ours
vs ORT (onnx.reference has no kernel for it), 1 and 2 threads.

    pytest benchmarks/test_bench_embed_layer_norm.py --benchmark-only \
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

from ._harness import DEFAULT_IR_VERSION, Case, bench_contender

MS = "com.microsoft"
THREADS = (1, 2)
SHAPES = ((1, 128), (1, 384), (8, 128), (8, 384))
DTYPES = ("float32", "float16")
HIDDEN, VOCAB, POSITIONS = 768, 30522, 512


@functools.lru_cache(maxsize=1)
def tables(dtype: str):
    rng = np.random.default_rng(0)
    return [numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)
            for name, shape in (("word", (VOCAB, HIDDEN)), ("pos", (POSITIONS, HIDDEN)),
                                ("seg", (2, HIDDEN)), ("gamma", (HIDDEN,)),
                                ("beta", (HIDDEN,)))]


def embed_model(b: int, s: int, dtype: str) -> tuple[onnx.ModelProto, dict]:
    rng = np.random.default_rng(b * 1000 + s)
    feeds = {"input_ids": rng.integers(0, VOCAB, (b, s)).astype(np.int32),
             "segment_ids": rng.integers(0, 2, (b, s)).astype(np.int32),
             "mask": (np.arange(s)[None, :] < rng.integers(s // 2, s + 1, (b, 1)))
             .astype(np.int32)}
    node = oh.make_node("EmbedLayerNormalization",
                        ["input_ids", "segment_ids", "word", "pos", "seg", "gamma", "beta",
                         "mask"], ["output", "mask_index"], domain=MS, epsilon=1e-12)
    graph = oh.make_graph(
        [node], "single_EmbedLayerNormalization",
        [oh.make_tensor_value_info(n, onnx.TensorProto.INT32, [b, s]) for n in feeds],
        [oh.make_value_info(n, oh.TypeProto()) for n in ("output", "mask_index")],
        tables(dtype))
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    return model, feeds


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def embed_case(b: int, s: int, dtype: str) -> Case:
    model, feeds = embed_model(b, s, dtype)
    naive = ReferenceEvaluator(model)
    olc.register_kernels_for_session(
        naive, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
    tol = 3e-3 if dtype == "float16" else 2e-5
    return Case(f"EmbedLayerNormalization-B{b}xS{s}", model, feeds, dtype=dtype,
                size=b * s * HIDDEN, domain=MS, reference=lambda f: naive.run(None, f),
                rtol=tol, atol=tol, expected_kernel="onnx_light_cpu::EmbedLayerNormalization")


@pytest.mark.parametrize("contender", ["ours", "ort"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"B{s[0]}xS{s[1]}")
def test_embed_layer_norm(benchmark, bench_options, shape, dtype, threads, contender):
    case = embed_case(*shape, dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
