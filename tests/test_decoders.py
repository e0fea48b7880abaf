"""Tiny builder-shaped decoders (benchmarks/decoders.py) run end to end with
our kernels and match ONNX Runtime: a 7-token prefill, then one decode step
with the present cache fed back, float32 and int4 weights."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.decoders import (  # noqa: E402
    DTYPES,
    TINY,
    build_decoder,
    make_feeds,
    next_step_feeds,
)

# Sums taken in another order than ORT's: on logits of order 1-5 the largest
# difference seen over three steps is 7e-6 (float32, and int4 at this
# machine's level).  int4 (accuracy level 4) quantizes each activation block
# to int8: a sum in another order (the scalar twin's, say) can move a value
# across a rounding boundary, one code of a block of amax / 127, which the
# next layers carry to the logits (seen: 0.026 at the scalar level).
TOLERANCE = {"float32": (1e-4, 1e-4), "int4": (1e-4, 5e-2)}
# The operators whose kernel must be ours, per weight dtype.
EXPECTED = {
    "float32": {"MatMul", "Gather"},
    "int4": {"MatMulNBits", "GatherBlockQuantized"},
}
COMMON = {"GroupQueryAttention", "SimplifiedLayerNormalization",
          "SkipSimplifiedLayerNormalization", "Sigmoid", "Mul", "ReduceSum"}
PREFILL, PAST = 7, 0


def _ort_session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", TINY, ids=[c.name for c in TINY])
def test_tiny_decoder_matches_onnxruntime(config, dtype):
    model = build_decoder(config, dtype)
    names = [o.name for o in model.graph.output]
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    ref = _ort_session(model)
    rtol, atol = TOLERANCE[dtype]

    feeds = make_feeds(config, PREFILL, PAST)
    for step in ("prefill", "decode"):
        got = dict(zip(names, sess.run(None, feeds)))
        want = dict(zip(names, ref.run(None, feeds)))
        for name in names:
            assert got[name].shape == want[name].shape, (step, name)
            np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol,
                                       err_msg=f"{config.name} {dtype} {step}: {name}")
        token = int(np.argmax(want["logits"][0, -1]))
        feeds = next_step_feeds(config, feeds, want, token)
    assert got["present.0.key"].shape[2] == PAST + PREFILL + 1

    used = {name.split("::", 1)[1] for name in olc.used_kernel_names(sess)}
    missing = (COMMON | EXPECTED[dtype]) - used
    assert not missing, f"these operators did not run our kernel: {sorted(missing)}"


def test_tiny_decoder_structure():
    """The builder's node sequence: mask subgraph, tied embedding, per layer
    norm / packed QKV / GQA with rotary / norm / SwiGLU, final norm, LM head."""
    config = TINY[0]
    ops = [n.op_type for n in build_decoder(config, "int4").graph.node
           if n.op_type != "Constant"]
    assert ops[:6] == ["ReduceSum", "Sub", "Cast", "Shape", "Gather", "Cast"]
    assert ops[6:8] == ["Reshape", "GatherBlockQuantized"]
    layer = ["SimplifiedLayerNormalization", "MatMulNBits", "Add", "GroupQueryAttention",
             "MatMulNBits", "SkipSimplifiedLayerNormalization", "MatMulNBits", "MatMulNBits",
             "Sigmoid", "Mul", "Mul", "MatMulNBits"]
    assert ops[8:20] == layer
    assert ops[20:32] == ["SkipSimplifiedLayerNormalization"] + layer[1:]
    assert ops[32:] == ["SkipSimplifiedLayerNormalization", "MatMulNBits"]
    gqa = next(n for n in build_decoder(config).graph.node if n.op_type == "GroupQueryAttention")
    attrs = {a.name: a for a in gqa.attribute}
    assert attrs["do_rotary"].i == 1 and list(gqa.input)[1:3] == ["", ""]


def test_competing_load_runs_only_inside_the_block():
    from benchmarks._harness import competing_load

    with competing_load("busy") as load:
        proc = load.proc
        assert proc is not None and proc.poll() is None
        assert load.describe()["load"] == "busy"
    assert proc.poll() is not None
    with competing_load("idle") as load:
        assert load.proc is None
    with pytest.raises(ValueError, match="competing_load"):
        competing_load("heavy")


def test_decoder_ratio_table(tmp_path):
    from tools.decoder_ratio import read_ratios, render

    run = {"machine_info": {"load": "busy"}, "benchmarks": [
        {"extra_info": {"model": m, "dtype": "int4", "step": "decode128", "threads": 2,
                        "ratio": r, "load": "busy"}}
        for m, r in (("tiny-a", 2.0), ("tiny-b", 8.0), ("qwen2-0.5b", 0.9))]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    text = render(read_ratios([path]), ["idle", "busy"])
    assert "| qwen2-0.5b-int4-decode128 | 2 | n/a | 0.90 |" in text
    assert "| **tiny decoders, geometric mean** (2 rows) | 2 | n/a | 4.00 |" in text
