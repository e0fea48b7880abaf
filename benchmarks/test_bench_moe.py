"""com.microsoft MoE and QMoE at a Mixtral-like expert shape: hidden 1024,
inter 2816, 8 experts, top-2, interleaved SwiGLU; prefill (T = 128 tokens)
and decode (T = 1); ours vs ORT, 1 and 2 threads.

    pytest benchmarks/test_bench_moe.py --benchmark-only --benchmark-group-by=group

Rows: MoE float32; QMoE 4-bit with per-row scales, and with blocks of 32
and 128 at accuracy levels 0 and 4; QMoE 8-bit with blocks of 32, with and
without zero points, and 4-bit blocks of 32 with zero points at accuracy
level 4.  Expert weights (and zero points) are initializers, so both
engines prepare them once, before timing (ORT prepacks them; for 8-bit
blocks and at accuracy level 4 both quantize the activations to int8 per
block).
Outputs are checked against a float32 NumPy reference (within 0.1 at
accuracy level 4, 1e-3 otherwise; the outputs are O(1)).  onnx.reference
has no kernel for these operators: no builtin contender.  Groups read
``<op>[<row>]-float32-<T*H>-t<threads>``.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper as oh

from onnx_light_cpu.reference import moe as naive

from ._harness import DEFAULT_IR_VERSION, Case, _onnx_type, bench_contender

MS = "com.microsoft"
HIDDEN, INTER, EXPERTS, TOP_K = 1024, 2816, 8, 2
TOKENS = (128, 1)
# (label, operator, block_size, accuracy_level, bits, zero points); block
# None: float weights
ROWS = (("float", "MoE", None, 0, 4, False), ("int4-per-row", "QMoE", 0, 0, 4, False),
        ("int4-b32-acc0", "QMoE", 32, 0, 4, False), ("int4-b32-acc4", "QMoE", 32, 4, 4, False),
        ("int4-b128-acc0", "QMoE", 128, 0, 4, False),
        ("int4-b128-acc4", "QMoE", 128, 4, 4, False),
        ("int8-b32", "QMoE", 32, 0, 8, False), ("int8-b32-zp", "QMoE", 32, 0, 8, True),
        ("int4-b32-zp-acc4", "QMoE", 32, 4, 4, True))
THREADS = (1, 2)
CONTENDERS = ("ours", "ort")


@functools.lru_cache(maxsize=1)
def _weights(block, bits=4, zero_points=False):
    """Expert weights of one row, shared by its prefill and decode cases."""
    rng = np.random.default_rng(7)
    if block is None:
        w1 = (rng.standard_normal((EXPERTS, 2 * INTER, HIDDEN)) / 32).astype(np.float32)
        w2 = (rng.standard_normal((EXPERTS, HIDDEN, INTER)) / 53).astype(np.float32)
        return {"fc1_experts_weights": w1, "fc2_experts_weights": w2}

    def quantized(rows, columns, unit):
        w = rng.integers(0, 256, (EXPERTS, rows, columns * bits // 8), dtype=np.uint8)
        shape = (EXPERTS, rows) if block == 0 else (EXPERTS, rows, columns // block)
        s = (rng.uniform(0.5, 1.5, shape) * unit / (1 << (bits - 4))).astype(np.float32)
        if not zero_points:
            return w, s, None
        # zero points near the middle code keep the outputs O(1)
        middle = 1 << (bits - 1)
        z = rng.integers(middle - 2, middle + 2, (EXPERTS, rows, columns // block))
        if bits == 4:
            z = z[:, :, 0::2] | (z[:, :, 1::2] << 4)
        return w, s, z.astype(np.uint8)

    w1, s1, z1 = quantized(2 * INTER, HIDDEN, 1 / 128)
    w2, s2, z2 = quantized(HIDDEN, INTER, 1 / 212)
    weights = {"fc1_experts_weights": w1, "fc1_scales": s1, "fc2_experts_weights": w2,
               "fc2_scales": s2}
    if zero_points:
        weights.update(fc1_zero_points=z1, fc2_zero_points=z2)
    return weights


def _reference(feeds, weights, block, bits=4):
    """float32 NumPy: route, then each expert on its rows (QMoE experts
    dequantized one at a time)."""
    x = feeds["input"]
    if block is None:
        experts, mix = naive.routing(feeds["router_probs"], TOP_K, True)
    else:
        experts, mix = naive.qmoe_routing(feeds["router_probs"], TOP_K, True)
    out = np.zeros(x.shape, np.float64)
    for e in np.unique(experts):
        tokens, slot = np.nonzero(experts == e)
        if block is None:
            w1, w2 = weights["fc1_experts_weights"][e], weights["fc2_experts_weights"][e]
        else:
            w1, w2 = (naive.dequantize(
                          weights[f"fc{i}_experts_weights"][e:e + 1],
                          weights[f"fc{i}_scales"][e:e + 1], bits, block, columns,
                          weights[f"fc{i}_zero_points"][e:e + 1]
                          if f"fc{i}_zero_points" in weights else None)[0].astype(np.float32)
                      for i, columns in ((1, HIDDEN), (2, INTER)))
        h = x[tokens] @ w1.T
        y = naive.swiglu(h[:, 0::2], h[:, 1::2]) @ w2.T
        out[tokens] += mix[tokens, slot][:, None] * y
    return [out.astype(np.float32)]


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def moe_case(label: str, tokens: int) -> Case:
    _, op, block, accuracy, bits, zero_points = next(row for row in ROWS if row[0] == label)
    rng = np.random.default_rng(tokens)
    feeds = {"input": rng.standard_normal((tokens, HIDDEN)).astype(np.float32),
             "router_probs": rng.standard_normal((tokens, EXPERTS)).astype(np.float32)}
    weights = _weights(block, bits, zero_points)
    attrs = dict(k=TOP_K, activation_type="swiglu", swiglu_fusion=1,
                 normalize_routing_weights=1)
    if op == "MoE":
        inputs = ["input", "router_probs", "fc1_experts_weights", "", "fc2_experts_weights"]
    else:
        inputs = ["input", "router_probs", "fc1_experts_weights", "fc1_scales", "",
                  "fc2_experts_weights", "fc2_scales"]
        if zero_points:
            inputs += ["", "", "", "", "fc1_zero_points", "fc2_zero_points"]
        attrs.update(expert_weight_bits=bits, block_size=block, accuracy_level=accuracy)
    node = oh.make_node(op, inputs, ["output"], domain=MS, **attrs)
    graph = oh.make_graph(
        [node], f"single_{op}",
        [oh.make_tensor_value_info(n, _onnx_type(a.dtype), list(a.shape))
         for n, a in feeds.items()],
        [oh.make_tensor_value_info("output", _onnx_type(np.float32), None)],
        initializer=[onnx.numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                          ir_version=DEFAULT_IR_VERSION)
    # int8 activations (accuracy level 4, 8-bit blocks): a few 1e-2 from
    # the float result
    tol = 1e-1 if accuracy == 4 or bits == 8 else 1e-3
    return Case(f"{op}[{label} T{tokens}]", model, feeds, dtype="float32",
                size=tokens * HIDDEN, domain=MS,
                reference=functools.partial(_reference, weights=weights, block=block,
                                            bits=bits),
                rtol=tol, atol=tol, expected_kernel=f"onnx_light_cpu::{op}")


def _params():
    for label, *_ in ROWS:
        for tokens in TOKENS:
            for threads in THREADS:
                for contender in CONTENDERS:
                    yield pytest.param(label, tokens, threads, contender,
                                       id=f"{label}-T{tokens}-t{threads}-{contender}")


@pytest.mark.parametrize("label,tokens,threads,contender", list(_params()))
def test_moe(benchmark, bench_options, label, tokens, threads, contender):
    case = moe_case(label, tokens)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)

