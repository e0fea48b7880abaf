"""com.microsoft BiasGelu on a BERT-base FFN, (128, 3072) float32 and
float16: ours vs ORT, 1 and 2 threads (onnx.reference has no BiasGelu).

    pytest benchmarks/test_bench_bias_gelu.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, dtype_params, make_case, naive_reference

OP = "BiasGelu"
CASES = (("float32", ("ours", "ort")), ("float16", ("ours", "ort")))


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def bias_gelu_case(dtype: str):
    rng = np.random.default_rng(0)
    feeds = {"A": rng.standard_normal((128, 3072)).astype(np.float32).astype(dtype),
             "bias": rng.standard_normal(3072).astype(np.float32).astype(dtype)}
    case = make_case(OP, feeds, outputs=[("Y", np.dtype(dtype))], domain="com.microsoft",
                     rtol=3e-3 if dtype == "float16" else 1e-5, atol=1e-4)
    case.reference = naive_reference(case)
    return case


@pytest.mark.parametrize("dtype,threads,contender", dtype_params(OP, CASES))
def test_bias_gelu(benchmark, bench_options, dtype, threads, contender):
    bench_contender(benchmark, bias_gelu_case(dtype), contender, threads,
                    budget_s=bench_options.budget_s)
