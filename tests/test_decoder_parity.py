"""Small decoders with the features of ONNX Runtime's model builder beyond
the dense Qwen2/Llama shape (benchmarks/decoders.py): GPT-OSS's QMoE
experts, int8 and int4 KV caches, an INT4-typed GatherBlockQuantized
embedding.  Each runs a 7-token prefill and two decode steps with the present
cache fed back, with our kernels, and matches ONNX Runtime 1.32 end to end."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.decoders import TINY, build_decoder, make_feeds, next_step_feeds  # noqa: E402

BASE = TINY[0]  # tiny-qwen: hidden 64, 4 heads, 2 KV heads
# (config, weight dtype of the dense projections, operators that must run ours)
CASES = {
    "qmoe8": (replace(BASE, name="tiny-gpt-oss-8bit", intermediate=64, experts=4,
                      experts_per_token=2, expert_bits=8), "float32", {"QMoE"}),
    "qmoe4": (replace(BASE, name="tiny-gpt-oss-4bit", intermediate=64, experts=4,
                      experts_per_token=2, expert_bits=4), "int4", {"QMoE", "MatMulNBits"}),
    "typed-embedding": (replace(BASE, name="tiny-qwen-int4-embedding", typed_embedding=True),
                        "int4", {"GatherBlockQuantized", "MatMulNBits"}),
}
for _bits in (8, 4):
    for _quant in ("PER_TENSOR", "PER_CHANNEL"):
        CASES[f"kv{_bits}-{_quant.lower()}"] = (
            replace(BASE, name=f"tiny-qwen-kv{_bits}", kv_cache_bits=_bits, kv_quant=_quant),
            "float32", {"GroupQueryAttention"})
# QMoE's int8 activations (8-bit experts, and 4-bit at accuracy level 4)
# quantize each block to int8 as ORT does, but sums taken in another order
# can move one code across a rounding boundary (see test_decoders.py).
TOLERANCE = (1e-4, 5e-2)
STEPS, PREFILL = 3, 7


def _ort_session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_decoder_matches_onnxruntime(case):
    config, dtype, expected = CASES[case]
    model = build_decoder(config, dtype)
    names = [o.name for o in model.graph.output]
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    ref = _ort_session(model)
    feeds = make_feeds(config, PREFILL, 0)
    for step in range(STEPS):
        got = dict(zip(names, sess.run(None, feeds)))
        want = dict(zip(names, ref.run(None, feeds)))
        for name in names:
            assert got[name].shape == want[name].shape, (step, name)
            np.testing.assert_allclose(got[name], want[name], rtol=TOLERANCE[0],
                                       atol=TOLERANCE[1], err_msg=f"{case} step {step}: {name}")
        feeds = next_step_feeds(config, feeds, want, int(np.argmax(want["logits"][0, -1])))
    used = {name.split("::", 1)[1] for name in olc.used_kernel_names(sess)}
    assert expected <= used, f"not run by our kernels: {sorted(expected - used)}"
