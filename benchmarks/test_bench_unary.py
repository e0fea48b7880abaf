"""Abs, Exp, Log, Sigmoid, Tanh, Neg, Reciprocal, Clip, Gelu (float32,
float16) and Not (bool); Gelu also at a decoder MLP's shape, [128, 3072].

    pytest benchmarks/test_bench_unary.py --benchmark-only --benchmark-group-by=group
    pytest benchmarks/test_bench_unary.py --benchmark-only --bench-large  # adds 1e7
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from ._harness import CONTENDERS, bench_contender, make_case, named_case, size_label

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
    "Neg": (-10.0, 10.0),
    "Reciprocal": (0.1, 10.0),  # clear of 0 (inf) and of float16 subnormals
    "Clip": (-10.0, 10.0),  # between -1 and 1, as a decoder's clamps
    "Gelu": (-5.0, 5.0),
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
    feeds = {"X": x}
    if op_type == "Clip":
        feeds.update(min=np.array(-1, x.dtype), max=np.array(1, x.dtype))
    case = make_case(op_type, feeds)
    if op_type == "Gelu":
        # the built-in computes float16 Gelu step by step in float16: float64
        # is the reference, and the built-in's cancellation below -2 (5e-4)
        # is within the check's absolute tolerance
        case.reference = _gelu_reference
        case.atol = 1e-3 if dtype == "float16" else None
    return case


def _gelu_reference(feeds):
    x = feeds["X"]
    erf = np.vectorize(math.erf, otypes=[np.float64])
    w = x.astype(np.float64)
    return [(w * 0.5 * (1 + erf(w / math.sqrt(2)))).astype(x.dtype)]


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


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("contender", CONTENDERS)
def test_gelu_decoder_shape(benchmark, bench_options, approximate, threads, contender):
    """Gelu of one prefill's MLP activations, [128, 3072] float32."""
    x = np.random.default_rng(1).uniform(-5, 5, (128, 3072)).astype(np.float32)
    case = named_case(make_case("Gelu", {"X": x}, attrs={"approximate": approximate}),
                      f"Gelu_{approximate}-128x3072")
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)


# ---------------------------------------------------------------- activations
# The activations CNN exports use, on 1M float32 (a feature map of a
# mid-sized CNN): Relu, HardSwish (MobileNet-V3), Erf (Gelu bodies), Mish.

ACTIVATIONS = {"Relu": (-5.0, 5.0), "HardSwish": (-5.0, 5.0), "Erf": (-3.0, 3.0),
               "Mish": (-5.0, 5.0)}


def _erf_reference(feeds):
    x = feeds["X"]
    return [np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)]


@pytest.mark.parametrize("op_type", list(ACTIVATIONS))
@pytest.mark.parametrize("threads", THREADS)
@pytest.mark.parametrize("contender", CONTENDERS)
def test_activation_1m(benchmark, bench_options, op_type, threads, contender):
    low, high = ACTIVATIONS[op_type]
    x = np.random.default_rng(2).uniform(low, high, 10**6).astype(np.float32)
    case = named_case(make_case(op_type, {"X": x}, rtol=1e-5, atol=1e-6), f"{op_type}-1M")
    if op_type == "Erf":
        case.reference = _erf_reference
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
