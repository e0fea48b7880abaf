"""MatMulInteger and QLinearMatMul (u8 x s8) at 1 and 2 threads: ours vs ORT
vs the built-in.

    pytest benchmarks/test_bench_matmul_integer.py --benchmark-only --benchmark-group-by=group

Groups are ``<op>-uint8[<A shape>x<B shape>]-<size>-t<threads>``; each
benchmark's extra_info holds ``gops`` (2 M N K integer operations per median
call, in 10^9/s).  B is a graph input, not an initializer, so every call
packs it.  MatMulInteger outputs must match the built-in bit for bit;
QLinearMatMul within one unit (ORT rounds in float32).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import CONTENDERS, INT8_WEIGHTS, bench_contender, make_case

THREADS = (1, 2)
# (op, A shape, B shape)
CASES = (
    ("MatMulInteger", (128, 1024), (1024, 1024)),
    ("QLinearMatMul", (128, 1024), (1024, 1024)),
)


@pytest.fixture(scope="module", autouse=True)
def _single_threaded_blas():
    """The built-in's int32 matmul does not use BLAS, but its pool, if
    another benchmark left it spinning, would slow the next contender."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _label(shape) -> str:
    return "x".join(map(str, shape))


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def integer_case(op_type, shape_a, shape_b):
    rng = np.random.default_rng(shape_b[-1])
    a = rng.integers(0, 256, shape_a).astype(np.uint8)
    b = rng.integers(*INT8_WEIGHTS, shape_b).astype(np.int8)
    if op_type == "MatMulInteger":
        feeds = {"A": a, "B": b, "a_zero_point": np.array(128, np.uint8),
                 "b_zero_point": np.array(3, np.int8)}
    else:
        feeds = {"a": a, "a_scale": np.array(0.02, np.float32),
                 "a_zero_point": np.array(128, np.uint8), "b": b,
                 "b_scale": np.array(0.01, np.float32), "b_zero_point": np.array(0, np.int8),
                 "y_scale": np.array(0.5, np.float32), "y_zero_point": np.array(120, np.uint8)}
    out = np.int32 if op_type == "MatMulInteger" else np.uint8
    case = make_case(op_type, feeds, outputs=[("Y", np.dtype(out))])
    case.dtype = f"uint8[{_label(shape_a)}x{_label(shape_b)}]"
    case.rtol = case.atol = 0.0
    if op_type == "QLinearMatMul":
        # ORT requantises in float32: off by one where float64 rounds the
        # other way (0.02% of elements here); ours is exact (tests/ops).
        case.atol = 1.0
    return case


def _params():
    for op_type, shape_a, shape_b in CASES:
        for threads in THREADS:
            for contender in CONTENDERS:
                yield pytest.param(
                    op_type, shape_a, shape_b, threads, contender,
                    id=f"{op_type}-{_label(shape_a)}x{_label(shape_b)}-t{threads}-{contender}",
                )


@pytest.mark.parametrize("op_type,shape_a,shape_b,threads,contender", list(_params()))
def test_matmul_integer(benchmark, bench_options, op_type, shape_a, shape_b, threads,
                        contender):
    case = integer_case(op_type, shape_a, shape_b)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
    if benchmark.disabled or benchmark.stats is None:
        return
    M, K = shape_a
    N = shape_b[-1]
    benchmark.extra_info.update(gops=round(2 * M * N * K / benchmark.stats.stats.median / 1e9, 1))
