"""com.microsoft GatherBlockQuantized: 128 token embeddings from a
(32000, 4096) 4-bit table (LLaMA-sized vocabulary), block 128 and 32,
float32 and float16 scales, ours vs ORT.

    pytest benchmarks/test_bench_gather_block_quantized.py --benchmark-only \
        --benchmark-group-by=group

onnx.reference has no kernel for this operator, so there is no builtin
contender; the reference dequantizes the selected rows in NumPy.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx import helper as oh

from ._harness import DEFAULT_IR_VERSION, Case, _onnx_type, bench_contender

MS = "com.microsoft"
OP = "GatherBlockQuantized"
VOCAB, HIDDEN, TOKENS = 32000, 4096, 128
BLOCKS = (128, 32)
DTYPES = ("float32", "float16")
THREADS = (1, 2)
CONTENDERS = ("ours", "ort")


def _reference(feeds: dict, block: int) -> list:
    """Dequantize the selected rows (4-bit, implicit zero point 8)."""
    rows = feeds["data"][feeds["indices"]]
    codes = np.stack([rows & 0x0F, rows >> 4], -1).reshape(len(rows), -1).astype(np.float32)
    scales = np.repeat(feeds["scales"][feeds["indices"]].astype(np.float32), block, -1)
    return [((codes - 8) * scales).astype(feeds["scales"].dtype)]


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def gbq_case(block: int, dtype: str) -> Case:
    rng = np.random.default_rng(block)
    groups = HIDDEN // block
    feeds = {
        "data": rng.integers(0, 256, (VOCAB, HIDDEN // 2), dtype=np.uint8),
        "indices": rng.integers(0, VOCAB, (TOKENS,)).astype(np.int64),
        "scales": (rng.standard_normal((VOCAB, groups)) * 0.02).astype(dtype),
    }
    node = oh.make_node(OP, list(feeds), ["y"], domain=MS, bits=4, block_size=block)
    graph = oh.make_graph(
        [node], f"single_{OP}",
        [oh.make_tensor_value_info(n, _onnx_type(a.dtype), list(a.shape))
         for n, a in feeds.items()],
        [oh.make_tensor_value_info("y", _onnx_type(dtype), None)],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    tol = 3e-3 if dtype == "float16" else 1e-6
    return Case(f"{OP}-{VOCAB}x{HIDDEN}-int4-b{block}", model, feeds, dtype=dtype,
                size=TOKENS * HIDDEN, domain=MS,
                reference=functools.partial(_reference, block=block), rtol=tol, atol=tol,
                expected_kernel=f"onnx_light_cpu::{OP}")


def _params():
    for block in BLOCKS:
        for dtype in DTYPES:
            for threads in THREADS:
                for contender in CONTENDERS:
                    yield pytest.param(block, dtype, threads, contender,
                                       id=f"b{block}-{dtype}-t{threads}-{contender}")


@pytest.mark.parametrize("block,dtype,threads,contender", list(_params()))
def test_gather_block_quantized(benchmark, bench_options, block, dtype, threads, contender):
    case = gbq_case(block, dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
