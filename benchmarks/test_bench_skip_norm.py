"""com.microsoft SkipLayerNormalization (with beta and bias) and
SkipSimplifiedLayerNormalization (outputs y and input_skip_bias_sum, as the
ONNX Runtime model builder emits it in LLaMA-style decoders), ours vs ORT.

    pytest benchmarks/test_bench_skip_norm.py --benchmark-only --benchmark-group-by=group

Shapes: a 128-token prefill and a one-token decode step at hidden size 4096,
and a 128-token prefill at 896 (Qwen2-0.5B); float32 and float16.
onnx.reference has no kernel for these operators, so there is no builtin
contender, and our evaluator is built while a global registration provides
the kernel (then unregistered: only the session registration acts).
"""

from __future__ import annotations

import functools
import os

import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import (
    DEFAULT_IR_VERSION,
    Case,
    _effective_threads,
    _onnx_type,
    check_outputs,
    prepare_ort,
    time_in_blocks,
)

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
    olc.register_kernels_global(microsoft_implementation=policy)
    try:
        sess = ReferenceEvaluator(model)
    finally:
        olc.unregister_kernels_global()
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


def _prepare_ours(case: Case, threads: int):
    sess = _evaluator(case.model)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, case.feeds)
    names, paths = olc.used_kernel_names(sess), olc.used_kernel_paths(sess)
    olc.set_kernel_usage_recording(sess, False)
    olc.clear_used_kernel_names(sess)
    assert case.kernel_name in names, f"{case.kernel_name} did not run, got {names}"
    info = {"path": paths[names.index(case.kernel_name)], "kernel": case.kernel_name}
    effective = _effective_threads(sess, case.size, threads)
    if effective is not None:
        info["effective_threads"] = effective
    return (lambda: sess.run(None, case.feeds)), info


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
    if contender == "ours":
        run, info = _prepare_ours(case, threads)
    else:
        run, info = prepare_ort(case, threads)
    check_outputs(case, run(), contender)
    benchmark.group = case.group(threads)
    benchmark.extra_info.update(contender=contender, op=op, dtype=dtype, size=case.size,
                                threads=threads, simd=olc.simd_level(), **info)
    time_in_blocks(benchmark, run, bench_options.budget_s)
    # Other processes on a shared machine show here (1-minute load average).
    benchmark.extra_info["loadavg_1m"] = round(os.getloadavg()[0], 2)
