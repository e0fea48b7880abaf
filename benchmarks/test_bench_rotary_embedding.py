"""RotaryEmbedding, ai.onnx (23) and com.microsoft, ours vs ORT vs the
onnx.reference built-in (ai.onnx only: onnx.reference has no com.microsoft
kernel).

    pytest benchmarks/test_bench_rotary_embedding.py --benchmark-only --benchmark-group-by=group

Shape: (1, 32, 128, 128) (B, N, S, H), full rotation, position_ids into a
4096-row cos/sin table; float32 and float16; 1 and 2 threads.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.reference.rotary_embedding import rotary_embedding as naive_rotary

from ._harness import Case, bench_contender, make_single_node_model

MS = "com.microsoft"
THREADS = (1, 2)
SHAPE = (1, 32, 128, 128)
TABLE = 4096
DTYPES = ("float32", "float16")
VARIANTS = {  # label -> (domain, input order, kernel, contenders)
    "RotaryEmbedding": ("", ("X", "cos_cache", "sin_cache", "position_ids"),
                        "onnx_light_cpu::RotaryEmbedding", ("ours", "ort", "builtin")),
    "MicrosoftRotaryEmbedding": (MS, ("X", "position_ids", "cos_cache", "sin_cache"),
                                 "onnx_light_cpu::MicrosoftRotaryEmbedding", ("ours", "ort")),
}


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def rotary_case(variant: str, dtype: str) -> Case:
    domain, order, kernel, _ = VARIANTS[variant]
    rng = np.random.default_rng(0)
    b, n, s, h = SHAPE
    angle = rng.uniform(-3, 3, (TABLE, h // 2))
    arrays = {
        "X": rng.standard_normal(SHAPE).astype(dtype),
        "cos_cache": np.cos(angle).astype(dtype),
        "sin_cache": np.sin(angle).astype(dtype),
        "position_ids": (np.arange(s, dtype=np.int64) + 1000)[None].repeat(b, 0),
    }
    feeds = {name: arrays[name] for name in order}
    model = make_single_node_model(
        "RotaryEmbedding", [(k, v.dtype, v.shape) for k, v in feeds.items()],
        opset=23 if not domain else 21, domain=domain)
    if not domain:
        model.ir_version = 11  # opset 23
    x = feeds["X"]

    def reference(f):
        wide = {k: (v.astype(np.float32) if v.dtype != np.int64 else v) for k, v in f.items()}
        y = naive_rotary(wide["X"], wide["position_ids"], wide["cos_cache"], wide["sin_cache"])
        return [y.astype(x.dtype)]

    tol = 4e-3 if dtype == "float16" else 1e-5
    return Case(f"{variant}-{'x'.join(map(str, SHAPE))}", model, feeds, dtype=dtype,
                size=x.size, domain=domain, reference=reference, rtol=tol, atol=tol,
                expected_kernel=kernel)


def _params():
    for variant, (_, _, _, contenders) in VARIANTS.items():
        for dtype in DTYPES:
            for threads in THREADS:
                for contender in contenders:
                    yield pytest.param(variant, dtype, threads, contender,
                                       id=f"{variant}-{dtype}-t{threads}-{contender}")


@pytest.mark.parametrize("variant,dtype,threads,contender", list(_params()))
def test_rotary_embedding(benchmark, bench_options, variant, dtype, threads, contender):
    case = rotary_case(variant, dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)


def test_naive_matches_the_evaluator():
    """The reference the cases check against is the operator's meaning."""
    case = rotary_case("MicrosoftRotaryEmbedding", "float32")
    sess = ReferenceEvaluator(case.model)
    olc.register_kernels_for_session(sess)
    np.testing.assert_allclose(sess.run(None, case.feeds)[0], case.expected()[0], rtol=1e-6,
                               atol=1e-6)
