"""com.microsoft Range (1e5 float32 values), Trilu (8 x 128 x 128 float32),
Unique (1e4 float32 values, 1000 distinct) and ExpandDims (64 x 1024
float32): ours vs ORT, 1 and 2 threads (onnx.reference has none of them
in this domain; ONNX Runtime's outputs are the reference).

    pytest benchmarks/test_bench_microsoft_tensor.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import onnx_light_cpu as olc

from ._harness import bench_contender, make_case, ort_session_options

MS = "com.microsoft"
F32, I64 = np.dtype(np.float32), np.dtype(np.int64)
OPS = ("Range", "Trilu", "Unique", "ExpandDims")


def ort_reference(case):
    """ONNX Runtime's outputs on the case (1 thread), the untimed check."""
    import onnxruntime as ort

    sess = ort.InferenceSession(case.model.SerializeToString(), ort_session_options(1),
                                providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


@functools.cache
def tensor_case(op: str):
    rng = np.random.default_rng(0)
    if op == "Range":
        n = 100_000
        feeds = {"start": np.array(0.5, F32), "limit": np.array(n + 0.5, F32),
                 "delta": np.array(1, F32)}
        case = make_case(op, feeds, outputs=[("Y", F32)], domain=MS)
        case.size = n
    elif op == "Trilu":
        feeds = {"X": rng.standard_normal((8, 128, 128)).astype(F32), "k": np.array(1, I64)}
        case = make_case(op, feeds, outputs=[("Y", F32)], domain=MS, attrs={"upper": 0})
    elif op == "Unique":
        feeds = {"x": rng.integers(0, 1000, 10_000).astype(F32)}
        case = make_case(op, feeds, outputs=[("y", F32), ("idx", I64), ("counts", I64)],
                         domain=MS)
    else:
        feeds = {"X": rng.standard_normal((64, 1024)).astype(F32),
                 "axis": np.array(1, np.int32)}
        case = make_case(op, feeds, outputs=[("Y", F32)], domain=MS)
    case.rtol = case.atol = 0.0  # the same bits as ONNX Runtime
    # the registered name (Range, Trilu and Unique are MicrosoftRange, ...)
    case.expected_kernel = next(r.name for r in olc.registered_kernels()
                                if r.domain == MS and r.op_type == op)
    case.reference = ort_reference(case)
    return case


@pytest.mark.parametrize("op,threads,contender", [
    pytest.param(op, t, c, id=f"{op}-float32-t{t}-{c}")
    for op in OPS for t in (1, 2) for c in ("ours", "ort")])
def test_microsoft_tensor(benchmark, bench_options, op, threads, contender):
    bench_contender(benchmark, tensor_case(op), contender, threads,
                    budget_s=bench_options.budget_s)
