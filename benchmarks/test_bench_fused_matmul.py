"""com.microsoft FusedMatMul on BERT-base's attention (12 heads of 64:
alpha Q K^T with transB, 1x12x128x64 and 8x12x384x64; the scores times V,
1x12x128x128 by 1x12x128x64; a transBatchA read, 128x12x64 by 12x64x128)
and FusedGemm (128x768 by 768x3072 plus bias, Relu), float32: ours vs ORT,
1 and 2 threads (onnx.reference has neither; ONNX Runtime's outputs are the
reference).

    pytest benchmarks/test_bench_fused_matmul.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case, ort_session_options

MS = "com.microsoft"
# (name, operator, input shapes, attributes)
CASES = (
    ("qk-1x128", "FusedMatMul", ((1, 12, 128, 64), (1, 12, 128, 64)),
     {"transB": 1, "alpha": 0.125}),
    ("qk-8x384", "FusedMatMul", ((8, 12, 384, 64), (8, 12, 384, 64)),
     {"transB": 1, "alpha": 0.125}),
    ("pv-1x128", "FusedMatMul", ((1, 12, 128, 128), (1, 12, 128, 64)), {}),
    ("transbatch-1x128", "FusedMatMul", ((128, 12, 64), (12, 64, 128)), {"transBatchA": 1}),
    ("gemm-relu-128x768x3072", "FusedGemm", ((128, 768), (768, 3072), (3072,)),
     {"activation": "Relu"}),
)


def ort_reference(case):
    """ONNX Runtime's outputs on the case (1 thread), the untimed check."""
    import onnxruntime as ort

    sess = ort.InferenceSession(case.model.SerializeToString(), ort_session_options(1),
                                providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def fused_case(name: str):
    _, op, shapes, attrs = next(c for c in CASES if c[0] == name)
    rng = np.random.default_rng(0)
    feeds = {n: (rng.standard_normal(s) * 0.3).astype(np.float32)
             for n, s in zip("ABC", shapes)}
    case = make_case(op, feeds, attrs=attrs, outputs=[("Y", np.dtype(np.float32))], domain=MS,
                     rtol=1e-4, atol=1e-4)
    case.reference = ort_reference(case)
    return case


@pytest.mark.parametrize("name,threads,contender", [
    pytest.param(name, t, c, id=f"{name}-t{t}-{c}")
    for name, *_ in CASES for t in (1, 2) for c in ("ours", "ort")])
def test_fused_matmul(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, fused_case(name), contender, threads,
                    budget_s=bench_options.budget_s)
