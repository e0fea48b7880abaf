"""com.microsoft FastGelu (with bias, on BERT-base's and a batch of eight
384-token sequences' FFN: 1x128x3072 and 8x384x3072), Gelu and QuickGelu
(1x128x3072), float32 and float16: ours vs ORT, 1 and 2 threads
(onnx.reference has none of them; ONNX Runtime's outputs are the reference).

    pytest benchmarks/test_bench_microsoft_activation.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case, ort_session_options

MS = "com.microsoft"
KERNELS = {"Gelu": "onnx_light_cpu::MicrosoftGelu"}
# (operator, shape, with bias, dtype)
CASES = (
    ("FastGelu", (1, 128, 3072), True, "float32"),
    ("FastGelu", (8, 384, 3072), True, "float32"),
    ("FastGelu", (1, 128, 3072), True, "float16"),
    ("FastGelu", (1, 128, 3072), False, "float32"),
    ("Gelu", (1, 128, 3072), False, "float32"),
    ("QuickGelu", (1, 128, 3072), False, "float32"),
)


def ort_reference(case):
    """ONNX Runtime's outputs on the case (1 thread), the untimed check."""
    import onnxruntime as ort

    sess = ort.InferenceSession(case.model.SerializeToString(), ort_session_options(1),
                                providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def activation_case(op: str, shape: tuple, bias: bool, dtype: str):
    rng = np.random.default_rng(0)
    feeds = {"X": (rng.standard_normal(shape) * 2).astype(np.float32).astype(dtype)}
    if bias:
        feeds["bias"] = rng.standard_normal(shape[-1]).astype(np.float32).astype(dtype)
    case = make_case(op, feeds, outputs=[("Y", np.dtype(dtype))], domain=MS,
                     rtol=3e-3 if dtype == "float16" else 1e-5, atol=1e-4)
    case.expected_kernel = KERNELS.get(op, f"onnx_light_cpu::{op}")
    case.reference = ort_reference(case)
    return case


@pytest.mark.parametrize("op,shape,bias,dtype,threads,contender", [
    pytest.param(op, shape, bias, dtype, t, c,
                 id=f"{op}{'-bias' if bias else ''}-{dtype}-{'x'.join(map(str, shape))}-t{t}-{c}")
    for op, shape, bias, dtype in CASES for t in (1, 2) for c in ("ours", "ort")])
def test_microsoft_activation(benchmark, bench_options, op, shape, bias, dtype, threads,
                              contender):
    bench_contender(benchmark, activation_case(op, shape, bias, dtype), contender, threads,
                    budget_s=bench_options.budget_s)
