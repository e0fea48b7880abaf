"""DeformConv: ours vs ONNX Runtime (and the built-in on the smallest case:
it calls GridSample once per output element and input channel), 1 and 2
threads, batch 1, offsets uniform in +-2.  Weights and bias are
initializers, as in an exported model (ours lays them out once); offsets
(and the mask) are inputs, as the layer that predicts them makes them.

    pytest benchmarks/test_bench_deform_conv.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper

from ._harness import Case, bench_contender, named_params, node_model, ort_session_options

# name: (input C H W, W shape, attributes, with a mask)
LAYERS = {
    "3x3-64x56": ((64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, False),
    "3x3-64x56-mask": ((64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    "3x3-128x28-og4": ((128, 28, 28), (128, 128, 3, 3),
                       {"pads": [1, 1, 1, 1], "offset_group": 4}, True),
    "3x3-4x6": ((4, 6, 6), (4, 4, 3, 3), {"pads": [1, 1, 1, 1]}, True),
}


def _ort_reference(model: onnx.ModelProto):
    def run(feeds):
        import onnxruntime as ort
        sess = ort.InferenceSession(model.SerializeToString(), ort_session_options(1),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    return run


@functools.lru_cache(maxsize=2)
def deform_case(name: str) -> Case:
    (c, h, w_), wshape, attrs, with_mask = LAYERS[name]
    rng = np.random.default_rng(len(name))
    og = attrs.get("offset_group", 1)
    kk = wshape[2] * wshape[3]
    x = rng.standard_normal((1, c, h, w_)).astype(np.float32)
    w = (rng.standard_normal(wshape) / np.sqrt(np.prod(wshape[1:]))).astype(np.float32)
    b = rng.standard_normal(wshape[0]).astype(np.float32)
    feeds = {"X": x, "offset": rng.uniform(-2, 2, (1, og * 2 * kk, h, w_)).astype(np.float32)}
    names = ["X", "W", "offset", "B"]
    if with_mask:
        feeds["mask"] = rng.uniform(0, 1, (1, og * kk, h, w_)).astype(np.float32)
        names.append("mask")
    node = helper.make_node("DeformConv", names, ["Y"], **attrs)
    model = node_model(node, feeds, {"W": w, "B": b}, [onnx.TensorProto.FLOAT])
    case = Case("DeformConv", model, feeds, dtype=f"float32-{name}", size=x.size,
                reference=_ort_reference(model))
    case.rtol, case.atol = 1e-4, 1e-4
    return case


@pytest.mark.parametrize("name,threads,contender", named_params(LAYERS))
def test_deform_conv(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, deform_case(name), contender, threads,
                    budget_s=bench_options.budget_s, builtin_max_size=200)
