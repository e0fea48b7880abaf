"""com.microsoft BiasGelu and CDist, ai.onnx SwiGLU: ours vs ORT (and the
onnx.reference built-in for SwiGLU, which ORT 1.32 cannot run at opset 28).

    pytest benchmarks/test_bench_activation.py --benchmark-only --benchmark-group-by=group

Shapes: BiasGelu (128, 3072) float32/float16 (a BERT-base FFN), CDist
(1024, 64) x (1024, 64) float32, SwiGLU (128, 2816) float32; 1 and 2 threads.
onnx.reference has no BiasGelu or CDist, so there is no builtin contender
for them.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import bench_contender, make_case

MS = "com.microsoft"
THREADS = (1, 2)


def _naive(case):
    """The NAIVE family's outputs: the untimed check of every contender."""
    sess = ReferenceEvaluator(case.model)
    olc.register_kernels_for_session(
        sess, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
    return lambda feeds: sess.run(None, feeds)


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def activation_case(op: str, dtype: str):
    rng = np.random.default_rng(0)
    if op == "BiasGelu":
        feeds = {"A": rng.standard_normal((128, 3072)).astype(np.float32).astype(dtype),
                 "bias": rng.standard_normal(3072).astype(np.float32).astype(dtype)}
        case = make_case(op, feeds, outputs=[("Y", np.dtype(dtype))], domain=MS,
                         rtol=3e-3 if dtype == "float16" else 1e-5, atol=1e-4)
    elif op == "CDist":
        feeds = {"A": rng.standard_normal((1024, 64)).astype(dtype),
                 "B": rng.standard_normal((1024, 64)).astype(dtype)}
        case = make_case(op, feeds, outputs=[("Y", np.dtype(dtype))], domain=MS,
                         attrs={"metric": "euclidean"}, rtol=1e-5, atol=1e-4)
    else:
        feeds = {"A": rng.standard_normal((128, 2816)).astype(dtype),
                 "B": rng.standard_normal((128, 2816)).astype(dtype)}
        return make_case(op, feeds, outputs=[("Y", np.dtype(dtype))], opset=28)
    case.reference = _naive(case)
    return case


CASES = (("BiasGelu", "float32", ("ours", "ort")), ("BiasGelu", "float16", ("ours", "ort")),
         ("CDist", "float32", ("ours", "ort")), ("SwiGLU", "float32", ("ours", "builtin")))


def _params():
    for op, dtype, contenders in CASES:
        for threads in THREADS:
            for contender in contenders:
                yield pytest.param(op, dtype, threads, contender,
                                   id=f"{op}-{dtype}-t{threads}-{contender}")


@pytest.mark.parametrize("op,dtype,threads,contender", list(_params()))
def test_activation(benchmark, bench_options, op, dtype, threads, contender):
    case = activation_case(op, dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
