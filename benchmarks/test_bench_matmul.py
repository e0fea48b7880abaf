"""MatMul and Gemm (float32) at 1 and 2 threads: ours vs ORT vs the built-in.

    pytest benchmarks/test_bench_matmul.py --benchmark-only --benchmark-group-by=group

Groups are ``<op>-float32[<A shape>x<B shape>]-<size>-t<threads>``.  Each
benchmark's extra_info holds ``gflops`` (2 M N K per median call) and
``fma_peak_fraction``: that over the FMA peak of as many cores (threads x
the one-core peak, measured once per session by ``gemm.fma_peak_gflops``:
independent register-only FMA chains, see tools/fma_peak.py).  B is a graph input here, not an
initializer, so every call packs it (or streams it, for M = 1).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from onnx_light_cpu._kernels.engines import gemm as gemm_core
from onnx_light_cpu.simd import state

from ._harness import CONTENDERS, bench_contender, make_case

THREADS = (1, 2)


@pytest.fixture(scope="module", autouse=True)
def _single_threaded_blas():
    """The built-in runs NumPy's matmul: OpenBLAS with one thread, as the
    harness describes it.  Its pool, left spinning after each call, would
    otherwise slow whichever contender runs next on a 2-core machine."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield

# (op, A shape, B shape, attributes, with bias)
CASES = (
    ("MatMul", (128, 512), (512, 1376), {}, False),
    ("MatMul", (512, 512), (512, 512), {}, False),
    ("MatMul", (1, 4096), (4096, 4096), {}, False),
    ("MatMul", (128, 4096), (4096, 4096), {}, False),
    ("MatMul", (32, 128, 128), (32, 128, 128), {}, False),
    ("Gemm", (128, 512), (1376, 512), {"transB": 1}, True),
)


def _label(shape) -> str:
    return "x".join(map(str, shape))


def _flops(shape_a, shape_b, attrs) -> int:
    *batch, M, K = shape_a
    N = shape_b[-2] if attrs.get("transB") else shape_b[-1]
    return 2 * int(np.prod(batch, dtype=np.int64)) * M * N * K


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def matmul_case(op_type, shape_a, shape_b, attrs_items, bias):
    attrs = dict(attrs_items)
    rng = np.random.default_rng(len(shape_a) + shape_b[-1])
    feeds = {"A": rng.uniform(-1, 1, shape_a).astype(np.float32),
             "B": rng.uniform(-1, 1, shape_b).astype(np.float32)}
    N = shape_b[-2] if attrs.get("transB") else shape_b[-1]
    if bias:
        feeds["C"] = rng.uniform(-1, 1, (N,)).astype(np.float32)
    case = make_case(op_type, feeds, attrs=attrs)
    case.dtype = f"float32[{_label(shape_a)}x{_label(shape_b)}]"

    def reference(feeds):
        a, b = feeds["A"].astype(np.float64), feeds["B"].astype(np.float64)
        y = np.matmul(a, b.T if attrs.get("transB") else b)
        return [(y + feeds["C"] if bias else y).astype(np.float32)]

    case.reference = reference
    K = shape_a[-1]
    case.rtol, case.atol = 1e-4, 4 * K * 1.2e-7  # float32 sums over K terms
    return case


@functools.cache
def _fma_peak(threads: int) -> float:
    """FMA peak of ``threads`` cores: ``threads`` x the best of 5 short
    one-thread runs of tools.fma_peak's loop.  On a dedicated machine the
    2-thread loop measures twice the 1-thread one (512 vs 257 GFLOP/s here);
    on a shared one a 2-thread run measures the neighbours' load instead."""
    if state.level == 0:
        return float("nan")
    return threads * max(gemm_core.fma_peak_gflops(2_000_000, state.level, 1) for _ in range(5))


def _params():
    for op_type, shape_a, shape_b, attrs, bias in CASES:
        for threads in THREADS:
            for contender in CONTENDERS:
                yield pytest.param(
                    op_type, shape_a, shape_b, tuple(attrs.items()), bias, threads, contender,
                    id=f"{op_type}-{_label(shape_a)}x{_label(shape_b)}-t{threads}-{contender}",
                )


@pytest.mark.parametrize("op_type,shape_a,shape_b,attrs,bias,threads,contender",
                         list(_params()))
def test_matmul(benchmark, bench_options, op_type, shape_a, shape_b, attrs, bias, threads,
                contender):
    case = matmul_case(op_type, shape_a, shape_b, attrs, bias)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
    if benchmark.disabled or benchmark.stats is None:
        return
    gflops = _flops(shape_a, shape_b, dict(attrs)) / benchmark.stats.stats.median / 1e9
    peak = _fma_peak(threads)
    benchmark.extra_info.update(gflops=round(gflops, 1), fma_peak_gflops=round(peak, 1),
                                fma_peak_fraction=round(gflops / peak, 3))
