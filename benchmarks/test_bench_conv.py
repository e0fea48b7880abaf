"""Conv (ResNet-50 and MobileNet-V2 layers) and ConvTranspose: ours vs ONNX
Runtime vs the built-in, 1 and 2 threads, batch 1 (``CONV_BENCH_BATCH=8``
for batch 8).  Weights and bias are initializers, as in an exported model
(ours lays them out once).  QLinearConv on ResNet-50 and MobileNet-V2
layers, uint8 activations x int8 weights per output channel, as
onnxruntime.quantization's QOperator format exports them (weights in
[-64, 64]: INT8_WEIGHTS).

    pytest benchmarks/test_bench_conv.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools
import os

import numpy as np
import onnx
import pytest
from onnx import helper

from ._harness import INT8_WEIGHTS, Case, bench_contender, named_params, node_model

BATCH = int(os.environ.get("CONV_BENCH_BATCH", "1"))

# name: (op, input C H W, W shape, attributes)
LAYERS = {
    "resnet-3x3-64": ("Conv", (64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "resnet-3x3-128x28": ("Conv", (128, 28, 28), (128, 128, 3, 3), {"pads": [1, 1, 1, 1]}),
    "resnet-3x3-256x14": ("Conv", (256, 14, 14), (256, 256, 3, 3), {"pads": [1, 1, 1, 1]}),
    "resnet-3x3-512x7": ("Conv", (512, 7, 7), (512, 512, 3, 3), {"pads": [1, 1, 1, 1]}),
    "resnet-1x1-256to64": ("Conv", (256, 56, 56), (64, 256, 1, 1), {}),
    "resnet-1x1-1024to256x14": ("Conv", (1024, 14, 14), (256, 1024, 1, 1), {}),
    "resnet-stem-7x7s2": ("Conv", (3, 224, 224), (64, 3, 7, 7),
                          {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    "resnet-3x3s2-128": ("Conv", (128, 56, 56), (128, 128, 3, 3),
                         {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "mbv2-stem-3x3s2": ("Conv", (3, 224, 224), (32, 3, 3, 3),
                        {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "mbv2-dw-144x56": ("Conv", (144, 56, 56), (144, 1, 3, 3),
                       {"pads": [1, 1, 1, 1], "group": 144}),
    "mbv2-dw-96x112s2": ("Conv", (96, 112, 112), (96, 1, 3, 3),
                         {"pads": [1, 1, 1, 1], "group": 96, "strides": [2, 2]}),
    "mbv2-dw-384x14": ("Conv", (384, 14, 14), (384, 1, 3, 3),
                       {"pads": [1, 1, 1, 1], "group": 384}),
    "mbv2-pw-144to24": ("Conv", (144, 56, 56), (24, 144, 1, 1), {}),
    "mbv2-pw-960to320x7": ("Conv", (960, 7, 7), (320, 960, 1, 1), {}),
    "densenet-3x3-128to32x56": ("Conv", (128, 56, 56), (32, 128, 3, 3),
                                {"pads": [1, 1, 1, 1]}),
    "densenet-1x1-256to128x28": ("Conv", (256, 28, 28), (128, 256, 1, 1), {}),
    "decoder-convT-4x4s2": ("ConvTranspose", (64, 32, 32), (64, 32, 4, 4),
                            {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
}


@functools.lru_cache(maxsize=2)
def conv_case(name: str) -> Case:
    op, (c, h, w_), wshape, attrs = LAYERS[name]
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal((BATCH, c, h, w_)).astype(np.float32)
    w = (rng.standard_normal(wshape) / np.sqrt(np.prod(wshape[1:]))).astype(np.float32)
    m = wshape[1] * attrs.get("group", 1) if op == "ConvTranspose" else wshape[0]
    b = rng.standard_normal(m).astype(np.float32)
    node = helper.make_node(op, ["X", "W", "B"], ["Y"], **attrs)
    model = node_model(node, {"X": x}, {"W": w, "B": b}, [onnx.TensorProto.FLOAT])
    case = Case(op, model, {"X": x}, dtype=f"float32-{name}-n{BATCH}", size=x.size)
    case.rtol, case.atol = 1e-4, 1e-4
    return case


@pytest.mark.parametrize("name,threads,contender", named_params(LAYERS))
def test_conv(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, conv_case(name), contender, threads,
                    budget_s=bench_options.budget_s, builtin_max_size=1 << 23)


# QLinearConv layers: name: (input C H W, W shape, attributes)
QLAYERS = {
    "resnet-3x3-64": ((64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    "resnet-1x1-256to64": ((256, 56, 56), (64, 256, 1, 1), {}),
    "mbv2-dw-144x56": ((144, 56, 56), (144, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 144}),
}


@functools.lru_cache(maxsize=2)
def qlinear_conv_case(name: str) -> Case:
    (c, h, w_), wshape, attrs = QLAYERS[name]
    rng = np.random.default_rng(len(name))
    x = rng.integers(0, 255, (BATCH, c, h, w_), endpoint=True).astype(np.uint8)
    m, k = wshape[0], int(np.prod(wshape[1:]))
    inits = {
        "x_scale": np.array(0.02, np.float32), "x_zero_point": np.array(128, np.uint8),
        "W": rng.integers(*INT8_WEIGHTS, size=wshape).astype(np.int8),
        "w_scale": rng.uniform(0.002, 0.01, m).astype(np.float32),
        "w_zero_point": np.zeros(m, np.int8),
        "y_scale": np.array(0.05 * np.sqrt(k), np.float32),
        "y_zero_point": np.array(128, np.uint8),
        "B": rng.integers(-1000, 1000, m).astype(np.int32),
    }
    node = helper.make_node("QLinearConv", ["X", "x_scale", "x_zero_point", "W", "w_scale",
                                            "w_zero_point", "y_scale", "y_zero_point", "B"],
                            ["Y"], **attrs)
    model = node_model(node, {"X": x}, inits, [onnx.TensorProto.UINT8])
    case = Case("QLinearConv", model, {"X": x}, dtype=f"u8s8-{name}-n{BATCH}", size=x.size)
    # the built-in requantises in float64, ORT and ours in float32: rare steps of one
    case.rtol, case.atol = 0, 1
    return case


@pytest.mark.parametrize("name,threads,contender", named_params(QLAYERS))
def test_qlinear_conv(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, qlinear_conv_case(name), contender, threads,
                    budget_s=bench_options.budget_s, builtin_max_size=1 << 23)
