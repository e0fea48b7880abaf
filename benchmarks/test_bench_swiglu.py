"""ai.onnx SwiGLU, (128, 2816) float32: ours vs the onnx.reference built-in
(ONNX Runtime 1.32 cannot run it at opset 28), 1 and 2 threads.

    pytest benchmarks/test_bench_swiglu.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, dtype_params, make_case

OP = "SwiGLU"
CASES = (("float32", ("ours", "builtin")),)


@functools.lru_cache(maxsize=1)
def swiglu_case(dtype: str):
    rng = np.random.default_rng(0)
    feeds = {"A": rng.standard_normal((128, 2816)).astype(dtype),
             "B": rng.standard_normal((128, 2816)).astype(dtype)}
    return make_case(OP, feeds, outputs=[("Y", np.dtype(dtype))], opset=28)


@pytest.mark.parametrize("dtype,threads,contender", dtype_params(OP, CASES))
def test_swiglu(benchmark, bench_options, dtype, threads, contender):
    bench_contender(benchmark, swiglu_case(dtype), contender, threads,
                    budget_s=bench_options.budget_s)
