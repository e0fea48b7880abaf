"""ai.onnx Attention (opset 23): ours vs ORT and the onnx.reference built-in.

    pytest benchmarks/test_bench_attention.py --benchmark-only --benchmark-group-by=group

Shapes: Q, K, V (1, 32, 128, 128), causal, float32 and float16; 1 and 2
threads.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case

THREADS = (1, 2)
DTYPES = ("float32", "float16")


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def attention_case(dtype: str):
    rng = np.random.default_rng(23)
    shape = (1, 32, 128, 128)
    feeds = {n: rng.standard_normal(shape).astype(np.float32).astype(dtype)
             for n in ("Q", "K", "V")}
    # The built-in rounds every float16 step; the engine keeps float32.
    tol = 1e-2 if dtype == "float16" else 1e-5
    case = make_case("Attention", feeds, attrs={"is_causal": 1}, opset=23, rtol=tol, atol=tol)
    return case


@pytest.mark.parametrize("contender", ["ours", "ort", "builtin"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_attention(benchmark, bench_options, dtype, threads, contender):
    case = attention_case(dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
