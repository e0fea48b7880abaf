"""Cast: float32 <-> float16, float32 <-> bfloat16 and int64 -> float32.

    pytest benchmarks/test_bench_cast.py --benchmark-only --benchmark-group-by=group

The group is ``Cast-<input dtype>-to-<output dtype>-<size>-t<threads>``.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

from ._harness import CONTENDERS, bench_contender, make_case, size_label

SIZES = (10**6,)
THREADS = (1, 2)
# (input dtype, output element type, output dtype)
PAIRS = (
    ("float32", TensorProto.FLOAT16, np.float16),
    ("float16", TensorProto.FLOAT, np.float32),
    ("float32", TensorProto.BFLOAT16, ml_dtypes.bfloat16),
    ("bfloat16", TensorProto.FLOAT, np.float32),
    ("int64", TensorProto.FLOAT, np.float32),
)


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def cast_case(src: str, to: int, size: int):
    rng = np.random.default_rng(size + to)
    if src == "int64":
        x = rng.integers(-(1 << 40), 1 << 40, size)
    else:
        x = rng.uniform(-1000.0, 1000.0, size).astype(np.dtype(ml_dtypes.bfloat16)
                                                       if src == "bfloat16" else src)
    out = np.dtype(dict((t, d) for _, t, d in PAIRS)[to])
    case = make_case("Cast", {"X": x}, attrs={"to": to}, outputs=[("Y", out)],
                     rtol=0.0, atol=0.0)
    # Two pairs read float32: the group names both types.
    case.dtype = f"{src}-to-{out.name}"
    return case


def _params():
    for src, to, out in PAIRS:
        for size in SIZES:
            for threads in THREADS:
                for contender in CONTENDERS:
                    yield pytest.param(
                        src, to, size, threads, contender,
                        id=f"Cast-{src}-to-{np.dtype(out).name}-{size_label(size)}"
                           f"-t{threads}-{contender}",
                    )


@pytest.mark.parametrize("src,to,size,threads,contender", list(_params()))
def test_cast(benchmark, bench_options, src, to, size, threads, contender):
    bench_options.skip_if_too_large(size)
    if contender == "ort" and (src == "bfloat16" or to == TensorProto.BFLOAT16):
        pytest.skip("onnxruntime's Python API takes and returns no bfloat16 arrays")
    case = cast_case(src, to, size)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
