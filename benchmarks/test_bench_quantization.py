"""DynamicQuantizeMatMul and MatMulIntegerToFloat at BERT-base shapes, 1 and
2 threads: ours vs ORT.

    pytest benchmarks/test_bench_quantization.py --benchmark-only --benchmark-group-by=group

B (int8), its per-column scales and zero points and the bias are
initializers, as ``onnxruntime.quantization`` writes them: both engines
pack B once, before timing.  Rows are batch x sequence (1 x 128, 1 x 384,
8 x 128, 8 x 384), K x N the BERT-base projections (768 x 768 attention,
768 x 3072 and 3072 x 768 the feed-forward).  Outputs must match ORT's bit for bit
(tests/ops/test_quantization.py).  onnx.reference has no kernel for these
operators: no builtin contender.  Groups read
``<op>-float32[M..K..N..]-<M*N>-t<threads>``; extra_info holds ``gops``.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from ._harness import (
    DEFAULT_IR_VERSION,
    DEFAULT_OPSET,
    INT8_WEIGHTS,
    Case,
    bench_contender,
    prepare_ort,
)

MS = "com.microsoft"
THREADS = (1, 2)
CONTENDERS = ("ours", "ort")
OPS = ("DynamicQuantizeMatMul", "MatMulIntegerToFloat")
# (M, K, N)
SHAPES = tuple((m, k, n) for m in (128, 384, 1024, 3072)
               for k, n in ((768, 768), (768, 3072), (3072, 768)))


def make_model(op_type: str, M: int, K: int, N: int):
    """The node with B and its parameters as initializers; (model, feeds)."""
    rng = np.random.default_rng(K + N)
    b = rng.integers(*INT8_WEIGHTS, (K, N)).astype(np.int8)
    b_scale = (rng.random(N) * 0.01 + 0.001).astype(np.float32)
    b_zp = rng.integers(-3, 4, N).astype(np.int8)
    bias = rng.standard_normal(N).astype(np.float32)
    if op_type == "DynamicQuantizeMatMul":
        feeds = {"A": rng.standard_normal((M, K)).astype(np.float32)}
        consts = {"B": b, "b_scale": b_scale, "b_zero_point": b_zp, "bias": bias}
        names = ["A", "B", "b_scale", "b_zero_point", "bias"]
    else:
        feeds = {"A": rng.integers(0, 256, (M, K)).astype(np.uint8)}
        consts = {"B": b, "a_scale": np.array(0.02, np.float32), "b_scale": b_scale,
                  "a_zero_point": np.array(128, np.uint8), "b_zero_point": b_zp, "bias": bias}
        names = ["A", "B", "a_scale", "b_scale", "a_zero_point", "b_zero_point", "bias"]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["Y"], domain=MS)], f"single_{op_type}",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in feeds.items()],
        [helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(a, n) for n, a in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", DEFAULT_OPSET),
                                                    helper.make_opsetid(MS, 1)],
                              ir_version=DEFAULT_IR_VERSION)
    return model, feeds


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def quantized_case(op_type: str, M: int, K: int, N: int) -> Case:
    model, feeds = make_model(op_type, M, K, N)
    case = Case(op_type, model, feeds, dtype=f"float32[M{M}K{K}N{N}]", size=M * N, domain=MS)
    run, _ = prepare_ort(case, 1)
    expected = run()
    case.reference = lambda _feeds: expected
    case.rtol = case.atol = 0.0
    return case


def _params():
    for op_type in OPS:
        for M, K, N in SHAPES:
            for threads in THREADS:
                for contender in CONTENDERS:
                    yield pytest.param(op_type, M, K, N, threads, contender,
                                       id=f"{op_type}-M{M}K{K}N{N}-t{threads}-{contender}")


@pytest.mark.parametrize("op_type,M,K,N,threads,contender", list(_params()))
def test_quantized_matmul(benchmark, bench_options, op_type, M, K, N, threads, contender):
    case = quantized_case(op_type, M, K, N)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
    if benchmark.disabled or benchmark.stats is None:
        return
    benchmark.extra_info.update(gops=round(2 * M * N * K / benchmark.stats.stats.median / 1e9, 1))
