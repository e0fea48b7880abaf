"""com.microsoft MultiHeadAttention, BERT-base self-attention: B=1, S=128,
12 heads of 64 (q/k/v (1, 128, 768)), float32 and float16; ours vs ORT
(onnx.reference has no MultiHeadAttention), 1 and 2 threads.

    pytest benchmarks/test_bench_multi_head_attention.py --benchmark-only \
        --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case, naive_reference

MS = "com.microsoft"
THREADS = (1, 2)
DTYPES = ("float32", "float16")


@functools.lru_cache(maxsize=1)
def mha_case(dtype: str):
    rng = np.random.default_rng(12)
    shape = (1, 128, 768)
    feeds = {n: rng.standard_normal(shape).astype(np.float32).astype(dtype)
             for n in ("query", "key", "value")}
    case = make_case("MultiHeadAttention", feeds, attrs={"num_heads": 12}, domain=MS,
                     expected_kernel="onnx_light_cpu::MultiHeadAttention")
    case.reference = naive_reference(case)
    tol = 3e-3 if dtype == "float16" else 1e-5
    case.rtol = case.atol = tol
    return case


@pytest.mark.parametrize("contender", ["ours", "ort"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_multi_head_attention(benchmark, bench_options, dtype, threads, contender):
    case = mha_case(dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
