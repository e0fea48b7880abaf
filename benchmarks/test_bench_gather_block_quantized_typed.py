"""com.microsoft GatherBlockQuantized on typed data: token embeddings from a
(151936, 896) table (Qwen2.5-0.5B's vocabulary and width) stored as INT4
(symmetric, float32 or float16 scales) or UINT4 with zero points, block 32,
gathering 1 token (decode) and 128 (prefill), ours vs ORT.

    pytest benchmarks/test_bench_gather_block_quantized_typed.py --benchmark-only \
        --benchmark-group-by=group

The table, scales and zero points are initializers (ORT takes no INT4
feeds from NumPy, and a real embedding is constant); only the indices are
fed.  The reference dequantizes the selected rows in NumPy.

Measured (AVX-512, 2 loaded cores, medians of 15 alternating blocks, ours /
ORT 1.32 at 2 threads): 1 id 0.07-0.30 (3-4 µs vs 11-52 µs), 128 ids
0.03-0.07 (52-64 µs vs 0.95-1.65 ms).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from ml_dtypes import int4, uint4
from onnx import TensorProto
from onnx import helper as oh
from onnx import numpy_helper as nh

from ._harness import DEFAULT_IR_VERSION, Case, _onnx_type, bench_contender

MS = "com.microsoft"
OP = "GatherBlockQuantized"
VOCAB, HIDDEN, BLOCK = 151936, 896, 32
KINDS = ("int4-float32", "int4-float16", "uint4zp-float16")
TOKENS = (1, 128)
THREADS = (1, 2)
CONTENDERS = ("ours", "ort")


@functools.lru_cache(maxsize=1)
def _table(kind: str):
    rng = np.random.default_rng(0)
    signed = kind.startswith("int4")
    dtype = int4 if signed else uint4
    low, high = (-8, 8) if signed else (0, 16)
    data = rng.integers(low, high, (VOCAB, HIDDEN), dtype=np.int8).astype(dtype)
    scales = (rng.random((VOCAB, HIDDEN // BLOCK)) * 0.02).astype(kind.split("-")[1])
    zp = None if signed else rng.integers(0, 16, scales.shape, dtype=np.int8).astype(dtype)
    return data, scales, zp


def _reference(feeds: dict, kind: str) -> list:
    data, scales, zp = _table(kind)
    idx = feeds["indices"]
    codes = data[idx].astype(np.float32)
    if zp is not None:
        codes -= np.repeat(zp[idx].astype(np.float32), BLOCK, -1)
    return [(codes * np.repeat(scales[idx].astype(np.float32), BLOCK, -1)).astype(scales.dtype)]


@functools.lru_cache(maxsize=2)
def gbq_typed_case(kind: str, tokens: int) -> Case:
    data, scales, zp = _table(kind)
    consts = {"data": data, "scales": scales} | ({} if zp is None else {"zero_points": zp})
    names = ["data", "indices", "scales"] + ([] if zp is None else ["zero_points"])
    node = oh.make_node(OP, names, ["y"], domain=MS, block_size=BLOCK, quantize_axis=1)
    graph = oh.make_graph(
        [node], f"single_{OP}",
        [oh.make_tensor_value_info("indices", TensorProto.INT64, [tokens])],
        [oh.make_tensor_value_info("y", _onnx_type(scales.dtype), None)],
        initializer=[nh.from_array(a, n) for n, a in consts.items()])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    feeds = {"indices": np.random.default_rng(tokens).integers(0, VOCAB, (tokens,))}
    return Case(f"{OP}-{VOCAB}x{HIDDEN}-{kind}-b{BLOCK}", model, feeds,
                dtype=str(scales.dtype), size=tokens * HIDDEN, domain=MS,
                reference=functools.partial(_reference, kind=kind), rtol=0, atol=0,
                expected_kernel=f"onnx_light_cpu::{OP}")


def _params():
    for kind in KINDS:
        for tokens in TOKENS:
            for threads in THREADS:
                for contender in CONTENDERS:
                    yield pytest.param(kind, tokens, threads, contender,
                                       id=f"{kind}-n{tokens}-t{threads}-{contender}")


@pytest.mark.parametrize("kind,tokens,threads,contender", list(_params()))
def test_gather_block_quantized_typed(benchmark, bench_options, kind, tokens, threads,
                                      contender):
    case = gbq_typed_case(kind, tokens)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
