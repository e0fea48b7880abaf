"""LinearAttention, ai.onnx (27) and com.microsoft: ours vs ORT
(com.microsoft) and vs the onnx.reference built-in (ai.onnx).

    pytest benchmarks/test_bench_linear_attention.py --benchmark-only --benchmark-group-by=group

Shape: B = 1, 16 query and kv heads, d_k = d_v = 128 (a Qwen3-Next style
gated delta-net layer), update_rule gated_delta with per-head decay and
beta; decode (one token on a past state) and prefill (512 tokens, no past);
1 and 2 threads; float32, and float16 for com.microsoft.  ORT 1.32 cannot
run the ai.onnx operator (its function body fails in a Scan), so the ai.onnx
rows compare with the built-in only; onnx.reference has no com.microsoft
kernel, so those rows compare with ORT only (checked against the NAIVE
family, which delegates to the built-in).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import Case, bench_contender, make_single_node_model

MS = "com.microsoft"
THREADS = (1, 2)
B, HEADS, DK, DV = 1, 16, 128, 128
MODES = {"decode": 1, "prefill": 512}
VARIANTS = {  # label -> (domain, kernel, dtypes, contenders)
    "LinearAttention": ("", "onnx_light_cpu::LinearAttention", ("float32",), ("ours", "builtin")),
    "MicrosoftLinearAttention": (MS, "onnx_light_cpu::MicrosoftLinearAttention",
                                 ("float32", "float16"), ("ours", "ort")),
}


def _feeds(mode: str, dtype: str) -> dict[str, np.ndarray]:
    T = MODES[mode]
    rng = np.random.default_rng(T)
    key = rng.standard_normal((B, T, HEADS, DK))
    key /= np.linalg.norm(key, axis=-1, keepdims=True)  # the delta rules expect unit keys
    feeds = {
        "query": rng.standard_normal((B, T, HEADS * DK)),
        "key": key.reshape(B, T, HEADS * DK),
        "value": rng.standard_normal((B, T, HEADS * DV)),
    }
    if mode == "decode":
        feeds["past_state"] = rng.standard_normal((B, HEADS, DK, DV)) * 0.1
    feeds["decay"] = -np.abs(rng.standard_normal((B, T, HEADS))) * 0.1
    feeds["beta"] = rng.random((B, T, HEADS))
    return {k: v.astype(dtype) for k, v in feeds.items()}


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def linear_attention_case(variant: str, mode: str, dtype: str) -> Case:
    domain, kernel, _, _ = VARIANTS[variant]
    feeds = _feeds(mode, dtype)
    names = list(feeds)
    if "past_state" not in feeds:
        names.insert(3, "")
    model = make_single_node_model(
        "LinearAttention", [(k, v.dtype, v.shape) for k, v in feeds.items()],
        outputs=[("output", feeds["query"].dtype), ("present_state", feeds["query"].dtype)],
        attrs={"q_num_heads": HEADS, "kv_num_heads": HEADS}, opset=27 if not domain else 21,
        domain=domain)
    del model.graph.node[0].input[:]
    model.graph.node[0].input.extend(names)
    if not domain:
        model.ir_version = 11  # opset 27
    reference = None
    if domain:
        naive = ReferenceEvaluator(model)
        olc.register_kernels_for_session(
            naive, microsoft_implementation=olc.MicrosoftKernelImplementation.NAIVE)
        reference = functools.partial(naive.run, None)
    tol = 4e-3 if dtype == "float16" else 1e-4
    return Case(f"{variant}-{mode}-{B}x{MODES[mode]}x{HEADS}x{DK}", model, feeds, dtype=dtype,
                size=feeds["query"].size, domain=domain, reference=reference, rtol=tol,
                atol=tol, expected_kernel=kernel)


def _params():
    for variant, (_, _, dtypes, contenders) in VARIANTS.items():
        for mode in MODES:
            for dtype in dtypes:
                for threads in THREADS:
                    for contender in contenders:
                        yield pytest.param(variant, mode, dtype, threads, contender,
                                           id=f"{variant}-{mode}-{dtype}-t{threads}-{contender}")


@pytest.mark.parametrize("variant,mode,dtype,threads,contender", list(_params()))
def test_linear_attention(benchmark, bench_options, variant, mode, dtype, threads, contender):
    case = linear_attention_case(variant, mode, dtype)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
