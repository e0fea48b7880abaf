"""com.microsoft SkipLayerNormalization (with beta and bias) and
SkipSimplifiedLayerNormalization (outputs y and input_skip_bias_sum, as the
ONNX Runtime model builder emits it in LLaMA-style decoders), ours vs ORT.

    pytest benchmarks/test_bench_skip_norm.py --benchmark-only --benchmark-group-by=group

Shapes: a 128-token prefill and a one-token decode step at hidden size 4096,
and a 128-token prefill at 896 (Qwen2-0.5B); float32 and float16.
onnx.reference has no kernel for these operators, so there is no builtin
contender.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import DEFAULT_IR_VERSION, Case, _onnx_type, bench_contender

MS = "com.microsoft"
THREADS = (1, 2)
SHAPES = ((1, 128, 4096), (1, 1, 4096), (1, 128, 896))
OPS = ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
DTYPES = ("float32", "float16")
CONTENDERS = ("ours", "ort")


def _model(op: str, dtype: str, shape) -> tuple[onnx.ModelProto, list[str]]:
    t = _onnx_type(dtype)
    if op == "SkipLayerNormalization":
        inputs, outputs = ["x", "skip", "gamma", "beta", "bias"], ["y"]
    else:
        inputs, outputs = ["x", "skip", "gamma"], ["y", "", "", "sum"]
    shapes = {"x": shape, "skip": shape}
    node = oh.make_node(op, inputs, outputs, domain=MS, epsilon=1e-6)
    graph = oh.make_graph(
        [node], f"single_{op}",
        [oh.make_tensor_value_info(n, t, list(shapes.get(n, (shape[-1],)))) for n in inputs],
        [oh.make_tensor_value_info(n, t, None) for n in outputs if n],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    return model, inputs


def _evaluator(model, policy=olc.MicrosoftKernelImplementation.OPTIMIZED):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess, microsoft_implementation=policy)
    return sess


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def skip_norm_case(op: str, dtype: str, shape) -> Case:
    rng = np.random.default_rng(sum(shape))
    model, inputs = _model(op, dtype, shape)
    H = shape[-1]
    feeds = {n: rng.standard_normal(shape if n in ("x", "skip") else (H,))
             .astype(np.float32).astype(dtype) for n in inputs}
    label = f"{op}-{'x'.join(map(str, shape))}"
    naive = _evaluator(model, olc.MicrosoftKernelImplementation.NAIVE)
    tol = 3e-3 if dtype == "float16" else 1e-5
    return Case(label, model, feeds, dtype=dtype, size=feeds["x"].size, domain=MS,
                reference=lambda f: naive.run(None, f), rtol=tol, atol=tol,
                expected_kernel=f"onnx_light_cpu::{op}")


def _params():
    for op in OPS:
        for shape in SHAPES:
            for dtype in DTYPES:
                for threads in THREADS:
                    for contender in CONTENDERS:
                        yield pytest.param(
                            op, shape, dtype, threads, contender,
                            id=f"{op}-{'x'.join(map(str, shape))}-{dtype}-t{threads}-{contender}",
                        )


@pytest.mark.parametrize("op,shape,dtype,threads,contender", list(_params()))
def test_skip_norm(benchmark, bench_options, op, shape, dtype, threads, contender):
    case = skip_norm_case(op, dtype, shape)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
