"""com.microsoft MatMulNBits on the parity tool's projections, ours vs ORT,
1 and 2 threads.

    pytest benchmarks/test_bench_matmul_nbits.py --benchmark-only --benchmark-group-by=group

Default set (float32, 4-bit, block 32, accuracy levels 0 and 4): the
Muse-Glimmer Q/attention gate (6656 -> 4096), K/V (6656 -> 256) and
attention output (4096 -> 6656) at M = 1, 8, 128, and the distinct Qwen2
projections of the spec's table at M = 128.  ``--bench-large`` adds the
Muse-Glimmer MLP families (83 MB of packed weights each) and the spec's
8-bit Qwen2 cases (accuracy level 4, M = 128 and M = 1).  The vocabulary
projection (several GB) is left to ``python -m tools.benchmark_matmul_nbits_parity
--vocabulary``, which also reports preparation, errors and bandwidth.

B and scales are initializers, so both engines prepare them once, before
timing.  Outputs are checked against a float64 dequantize-then-matmul oracle
at accuracy level 0, and against ORT's own accuracy-level-4 result at level 4
(both quantize the activations to int8 per block).  Groups read
``MatMulNBits-float32[<projection> M.. K.. N.. int<bits> b<block> acc<level>]-<M*N>-t<threads>``.
onnx.reference has no kernel for this operator: no builtin contender.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import onnx_light_cpu as olc
from tools.benchmark_matmul_nbits_parity import (
    MS,
    MUSE_FAMILIES,
    OP,
    QWEN_PROJECTIONS,
    make_activation,
    make_model,
    make_weights,
    oracle,
    prepare_ort,
)
from tools.benchmark_matmul_nbits_parity import (
    Case as Projection,
)

from ._harness import Case, bench_contender

THREADS = (1, 2)
CONTENDERS = ("ours", "ort")
ACCURACY_LEVELS = (0, 4)


def _distinct(projections):
    """One projection per (K, N): equal shapes time the same thing."""
    seen, out = set(), []
    for name, k, n in projections:
        if (k, n) not in seen:
            seen.add((k, n))
            out.append((name, k, n))
    return out


MUSE = {name: (k, n) for name, k, n in MUSE_FAMILIES}
QWEN = _distinct(QWEN_PROJECTIONS)

# (projection name, M, K, N, bits, accuracy levels, large)
CASES = [
    *((f"muse {name}", m, *MUSE[name], 4, ACCURACY_LEVELS, False)
      for name in ("Q/attention gate", "K/V", "attention output") for m in (1, 8, 128)),
    *((f"qwen {name}", 128, k, n, 4, ACCURACY_LEVELS, False) for name, k, n in QWEN),
    *((f"muse {name}", m, *MUSE[name], 4, ACCURACY_LEVELS, True)
      for name in ("MLP gate/up", "MLP down") for m in (1, 8, 128)),
    *((f"qwen {name}", m, k, n, 8, (4,), True) for name, k, n in QWEN for m in (128, 1)),
]


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def nbits_case(name: str, M: int, K: int, N: int, bits: int, accuracy_level: int) -> Case:
    projection = Projection(name, M, K, N, "float32", bits, 32, accuracy_level)
    packed, scales = make_weights(K, N, bits, 32, "float32")
    model = make_model(projection, packed, scales)
    feeds = {"A": make_activation(M, K, "float32")}
    if accuracy_level == 0:
        expected = [oracle(feeds["A"], packed, scales, K, bits, 32).astype(np.float32)]
        # Outputs are about 1; float32 sums over K terms in another order.
        tol = 1e-4
    else:
        expected = [prepare_ort(model, feeds, 1).result]
        # Both quantize each activation block the same way; one code rounded
        # the other way moves an output by a block's scale product (~1e-4).
        tol = 5e-4
    label = f"{name.replace(' ', '_')} M{M} K{K} N{N} int{bits} b32 acc{accuracy_level}"
    return Case(OP, model, feeds, dtype=f"float32[{label}]", size=M * N, domain=MS,
                reference=lambda _feeds: expected, rtol=tol, atol=tol,
                expected_kernel=f"onnx_light_cpu::{OP}")


def _params():
    for name, m, k, n, bits, levels, large in CASES:
        for level in levels:
            for threads in THREADS:
                for contender in CONTENDERS:
                    yield pytest.param(
                        name, m, k, n, bits, level, large, threads, contender,
                        id=f"{name.replace(' ', '_').replace('/', '_')}-M{m}-int{bits}"
                           f"-acc{level}-t{threads}-{contender}")


@pytest.mark.parametrize("name,M,K,N,bits,accuracy_level,large,threads,contender",
                         list(_params()))
def test_matmul_nbits(benchmark, bench_options, name, M, K, N, bits, accuracy_level, large,
                      threads, contender):
    if large and not bench_options.large:
        pytest.skip("large MatMulNBits case: give --bench-large or OLC_BENCH_LARGE=1")
    if contender == "ours" and OP not in olc.registered_kernel_names():
        pytest.skip("MatMulNBits is not registered in onnx_light_cpu yet")
    case = nbits_case(name, M, K, N, bits, accuracy_level)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
    if benchmark.disabled or benchmark.stats is None:
        return
    # Decode reads the weights once a call: report the rate it reads them at.
    weight_bytes = Projection(name, M, K, N, "float32", bits, 32).packed_bytes
    benchmark.extra_info["weight_gbps"] = round(
        weight_bytes / benchmark.stats.stats.median / 1e9, 2)
