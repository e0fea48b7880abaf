"""com.microsoft CDist, euclidean, (1024, 64) x (1024, 64) float32: ours vs
ORT, 1 and 2 threads (onnx.reference has no CDist).

    pytest benchmarks/test_bench_cdist.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, dtype_params, make_case, naive_reference

OP = "CDist"
CASES = (("float32", ("ours", "ort")),)


@functools.lru_cache(maxsize=1)
def cdist_case(dtype: str):
    rng = np.random.default_rng(0)
    feeds = {"A": rng.standard_normal((1024, 64)).astype(dtype),
             "B": rng.standard_normal((1024, 64)).astype(dtype)}
    case = make_case(OP, feeds, outputs=[("Y", np.dtype(dtype))], domain="com.microsoft",
                     attrs={"metric": "euclidean"}, rtol=1e-5, atol=1e-4)
    case.reference = naive_reference(case)
    return case


@pytest.mark.parametrize("dtype,threads,contender", dtype_params(OP, CASES))
def test_cdist(benchmark, bench_options, dtype, threads, contender):
    bench_contender(benchmark, cdist_case(dtype), contender, threads,
                    budget_s=bench_options.budget_s)
