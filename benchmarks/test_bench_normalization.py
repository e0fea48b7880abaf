"""LayerNormalization, RMSNormalization, SimplifiedLayerNormalization
(float32, float16 on the LLM shapes), GroupNormalization and
BatchNormalization: ours vs ONNX Runtime vs the built-in, 1 and 2 threads.

    pytest benchmarks/test_bench_normalization.py --benchmark-only --benchmark-group-by=group

SimplifiedLayerNormalization has no built-in (onnx.reference cannot run
it) and RMSNormalization none in ORT 1.32's CPU provider for opset 23 is
skipped by the harness where ORT refuses the model.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import CONTENDERS, bench_contender, make_case

THREADS = (1, 2)
LLM_SHAPES = ((1, 128, 4096), (1, 1, 4096), (1, 128, 896))
ROW_OPS = ("LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization")
OPSETS = {"LayerNormalization": 21, "RMSNormalization": 23, "SimplifiedLayerNormalization": 21}


def _shape_label(shape) -> str:
    return "x".join(str(d) for d in shape)


@functools.lru_cache(maxsize=1)
def row_case(op_type: str, dtype: str, shape: tuple):
    rng = np.random.default_rng(len(op_type) + shape[-1])
    x = rng.standard_normal(shape).astype(dtype)
    feeds = {"X": x, "S": rng.standard_normal(shape[-1]).astype(dtype)}
    if op_type == "LayerNormalization":
        feeds["B"] = rng.standard_normal(shape[-1]).astype(dtype)
    case = make_case(op_type, feeds, attrs={"axis": -1}, opset=OPSETS[op_type])
    case.dtype = f"{dtype}-{_shape_label(shape)}"
    # The reference is the formula in float64 (the built-in sums float16 in
    # float16, and SimplifiedLayerNormalization has none).
    eps = float(np.float32(1e-5))

    def reference(f):
        xd = f["X"].astype(np.float64)
        if op_type == "LayerNormalization":
            xd = xd - xd.mean(-1, keepdims=True)
        y = xd / np.sqrt((xd * xd).mean(-1, keepdims=True) + eps) * f["S"].astype(np.float64)
        if "B" in f:
            y = y + f["B"].astype(np.float64)
        return [y.astype(f["S"].dtype)]

    case.reference = reference
    # Outputs near zero come out of a cancellation (x * s + b).
    case.rtol, case.atol = (3e-3, 3e-3) if dtype == "float16" else (1e-5, 2e-6)
    return case


@functools.lru_cache(maxsize=1)
def channel_case(op_type: str, dtype: str):
    rng = np.random.default_rng(3)
    if op_type == "GroupNormalization":
        x = rng.standard_normal((1, 320, 64, 64)).astype(dtype)
        feeds = {"X": x, "S": rng.standard_normal(320).astype(dtype),
                 "B": rng.standard_normal(320).astype(dtype)}
        case = make_case(op_type, feeds, attrs={"num_groups": 32}, opset=21)
    else:
        x = rng.standard_normal((1, 64, 112, 112)).astype(dtype)
        c = 64
        feeds = {"X": x, "S": rng.standard_normal(c).astype(dtype),
                 "B": rng.standard_normal(c).astype(dtype),
                 "M": rng.standard_normal(c).astype(dtype),
                 "V": (np.abs(rng.standard_normal(c)) + 0.1).astype(dtype)}
        case = make_case(op_type, feeds, opset=15)
    case.dtype = f"{dtype}-{_shape_label(x.shape)}"
    case.atol = 5e-6  # outputs near zero: (x - mean) * mul + bias cancels
    return case


def _params():
    for op_type in ROW_OPS:
        for dtype in ("float32", "float16"):
            for shape in LLM_SHAPES:
                for threads in THREADS:
                    for contender in CONTENDERS:
                        if contender == "builtin" and op_type == "SimplifiedLayerNormalization":
                            continue
                        yield pytest.param(
                            op_type, dtype, shape, threads, contender,
                            id=f"{op_type}-{dtype}-{_shape_label(shape)}-t{threads}-{contender}")
    for op_type in ("GroupNormalization", "BatchNormalization"):
        for threads in THREADS:
            for contender in CONTENDERS:
                yield pytest.param(op_type, "float32", None, threads, contender,
                                   id=f"{op_type}-float32-t{threads}-{contender}")


@pytest.mark.parametrize("op_type,dtype,shape,threads,contender", list(_params()))
def test_norm(benchmark, bench_options, op_type, dtype, shape, threads, contender):
    if shape is None:
        case = channel_case(op_type, dtype)
    else:
        case = row_case(op_type, dtype, shape)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
