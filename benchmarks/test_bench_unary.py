"""Abs, Exp, Log, Sigmoid, Tanh (float32, float16) and Not (bool).

    pytest benchmarks/test_bench_unary.py --benchmark-only --benchmark-group-by=group
    pytest benchmarks/test_bench_unary.py --benchmark-only --bench-large  # adds 1e7
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import CONTENDERS, bench_contender, make_case, size_label

SIZES = (10**3, 10**5, 10**6, 10**7)
THREADS = (1, 2)
FLOAT_TYPES = ("float32", "float16")

# Input range per operator: inside each function's useful domain and, for
# float16, clear of overflow (exp(10) = 22026 < 65504).
RANGES = {
    "Abs": (-10.0, 10.0),
    "Exp": (-10.0, 10.0),
    "Log": (0.01, 100.0),  # strictly positive
    "Sigmoid": (-10.0, 10.0),
    "Tanh": (-5.0, 5.0),
}
OPS = tuple(RANGES) + ("Not",)


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def unary_case(op_type: str, dtype: str, size: int):
    rng = np.random.default_rng(size + len(op_type))
    if op_type == "Not":
        x = rng.random(size) < 0.5
    else:
        low, high = RANGES[op_type]
        x = rng.uniform(low, high, size).astype(dtype)
    return make_case(op_type, {"X": x})


def _params():
    for op_type in OPS:
        for dtype in ("bool",) if op_type == "Not" else FLOAT_TYPES:
            for size in SIZES:
                for threads in THREADS:
                    for contender in CONTENDERS:
                        yield pytest.param(
                            op_type, dtype, size, threads, contender,
                            id=f"{op_type}-{dtype}-{size_label(size)}-t{threads}-{contender}",
                        )


@pytest.mark.parametrize("op_type,dtype,size,threads,contender", list(_params()))
def test_unary(benchmark, bench_options, op_type, dtype, size, threads, contender):
    bench_options.skip_if_too_large(size)
    case = unary_case(op_type, dtype, size)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
