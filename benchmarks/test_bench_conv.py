"""Conv (ResNet-50 and MobileNet-V2 layers) and ConvTranspose: ours vs ONNX
Runtime vs the built-in, 1 and 2 threads, batch 1 (``CONV_BENCH_BATCH=8``
for batch 8).  Weights and bias are initializers, as in an exported model
(ours lays them out once).

    pytest benchmarks/test_bench_conv.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools
import os

import numpy as np
import onnx
import pytest
from onnx import helper

from ._harness import CONTENDERS, Case, bench_contender, node_model

THREADS = (1, 2)
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
    "mbv2-dw-144x56": ("Conv", (144, 56, 56), (144, 1, 3, 3),
                       {"pads": [1, 1, 1, 1], "group": 144}),
    "mbv2-dw-384x14": ("Conv", (384, 14, 14), (384, 1, 3, 3),
                       {"pads": [1, 1, 1, 1], "group": 384}),
    "mbv2-pw-144to24": ("Conv", (144, 56, 56), (24, 144, 1, 1), {}),
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


def _params():
    for name in LAYERS:
        for threads in THREADS:
            for contender in CONTENDERS:
                yield pytest.param(name, threads, contender, id=f"{name}-t{threads}-{contender}")


@pytest.mark.parametrize("name,threads,contender", list(_params()))
def test_conv(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, conv_case(name), contender, threads,
                    budget_s=bench_options.budget_s, builtin_max_size=1 << 23)
