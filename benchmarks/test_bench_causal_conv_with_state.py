"""CausalConvWithState: ai.onnx (ours vs the onnx.reference built-in; ONNX
Runtime has no kernel for the opset-27 operator) and com.microsoft in both
layouts (ours vs ORT).

    pytest benchmarks/test_bench_causal_conv_with_state.py --benchmark-only \
        --benchmark-group-by=group

Shapes (LFM2 / Qwen3.5-style short convolutions): kernel 4, SiLU, weight and
bias as initializers, past state; decode B=1, C=2048, S=1 and prefill B=1,
C=2048, S=512; float32 and float16; 1 and 2 threads.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import Case, bench_contender, make_single_node_model

MS = "com.microsoft"
THREADS = (1, 2)
CHANNELS, KERNEL = 2048, 4
LENGTHS = {"decode": 1, "prefill": 512}
DTYPES = ("float32", "float16")
VARIANTS = {  # label -> (domain, channels_last, kernel name, contenders)
    "CausalConvWithState": ("", False, "onnx_light_cpu::CausalConvWithState", ("ours", "builtin")),
    "MicrosoftCausalConvWithState": (MS, False, "onnx_light_cpu::MicrosoftCausalConvWithState",
                                     ("ours", "ort")),
    "MicrosoftCausalConvWithState-channels_last": (
        MS, True, "onnx_light_cpu::MicrosoftCausalConvWithState", ("ours", "ort")),
}


def _model(feeds, weights, domain, channels_last):
    """The node with weight and bias as initializers, as in exported models."""
    model = make_single_node_model(
        "CausalConvWithState",
        [(k, v.dtype, v.shape) for k, v in feeds.items()],
        outputs=[("y", feeds["input"].dtype), ("present", feeds["input"].dtype)],
        attrs={"activation": "silu", **({"channels_last": int(channels_last)} if domain else {})},
        opset=27 if not domain else 21, domain=domain)
    node = model.graph.node[0]
    del node.input[:]
    node.input.extend(["input", "weight", "bias", "past_state"])
    model.graph.initializer.extend(onnx.numpy_helper.from_array(v, k) for k, v in weights.items())
    if not domain:
        model.ir_version = 13  # opset 27
    return model


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def conv_case(variant: str, phase: str, dtype: str) -> Case:
    domain, channels_last, kernel, _ = VARIANTS[variant]
    rng = np.random.default_rng(0)
    length, c, sl = LENGTHS[phase], CHANNELS, KERNEL - 1
    if channels_last:
        x_shape, s_shape = (1, length, c), (1, sl, c)
    else:
        x_shape, s_shape = (1, c, length), (1, c, sl)
    feeds = {
        "input": rng.standard_normal(x_shape).astype(dtype),
        "past_state": rng.standard_normal(s_shape).astype(dtype),
    }
    weights = {
        "weight": (rng.standard_normal((c, 1, KERNEL)) * 0.5).astype(dtype),
        "bias": rng.standard_normal(c).astype(dtype),
    }
    model = _model(feeds, weights, domain, channels_last)
    # The reference: the NAIVE family (com.microsoft) or the built-in, both
    # on float32 inputs, rounded to the case's type.
    wide = {k: v.astype(np.float32) for k, v in weights.items()}
    wide_model = _model({k: v.astype(np.float32) for k, v in feeds.items()}, wide, domain,
                        channels_last)
    sess = ReferenceEvaluator(wide_model)
    if domain:
        olc.register_kernels_for_session(
            sess, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)

    def reference(f):
        wide_feeds = {k: v.astype(np.float32) for k, v in f.items()}
        return [a.astype(dtype) for a in sess.run(None, wide_feeds)]

    tol = 4e-3 if dtype == "float16" else 1e-5
    return Case(f"{variant}-{phase}-1x{c}x{length}-k{KERNEL}", model, feeds, dtype=dtype,
                size=feeds["input"].size, domain=domain, reference=reference, rtol=tol, atol=tol,
                expected_kernel=kernel)


def _params():
    for variant, (_, _, _, contenders) in VARIANTS.items():
        for phase in LENGTHS:
            for dtype in DTYPES:
                for threads in THREADS:
                    for contender in contenders:
                        yield pytest.param(variant, phase, dtype, threads, contender,
                                           id=f"{variant}-{phase}-{dtype}-t{threads}-{contender}")


@pytest.mark.parametrize("variant,phase,dtype,threads,contender", list(_params()))
def test_causal_conv(benchmark, bench_options, variant, phase, dtype, threads, contender):
    case = conv_case(variant, phase, dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
