"""Tiny builder-shaped decoders (benchmarks/decoders.py) run end to end with
our kernels and match ONNX Runtime: a 7-token prefill, then decode steps
with the present cache fed back, float32 and int4 weights; and decoders
with the builder's other features: GPT-OSS's QMoE experts, int8 and int4
KV caches, an INT4-typed GatherBlockQuantized embedding."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
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


def _matches_onnxruntime(config, dtype, steps, tolerance):
    """Runs a prefill and ``steps - 1`` decode steps with ours and ORT,
    feeding ORT's present cache and greedy token back; returns our
    evaluator (its kernel usage recorded)."""
    model = build_decoder(config, dtype)
    names = [o.name for o in model.graph.output]
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    ref = _ort_session(model)
    rtol, atol = tolerance
    feeds = make_feeds(config, PREFILL, PAST)
    for step in range(steps):
        got = dict(zip(names, sess.run(None, feeds)))
        want = dict(zip(names, ref.run(None, feeds)))
        for name in names:
            assert got[name].shape == want[name].shape, (step, name)
            np.testing.assert_allclose(got[name], want[name], rtol=rtol, atol=atol,
                                       err_msg=f"{config.name} {dtype} step {step}: {name}")
        feeds = next_step_feeds(config, feeds, want, int(np.argmax(want["logits"][0, -1])))
    assert got["present.0.key"].shape[2] == PAST + PREFILL + steps - 1
    return sess


def _not_ours(sess, expected) -> list[str]:
    used = {name.split("::", 1)[1] for name in olc.used_kernel_names(sess)}
    return sorted(set(expected) - used)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", TINY, ids=[c.name for c in TINY])
def test_tiny_decoder_matches_onnxruntime(config, dtype):
    sess = _matches_onnxruntime(config, dtype, 2, TOLERANCE[dtype])
    missing = _not_ours(sess, COMMON | EXPECTED[dtype])
    assert not missing, f"these operators did not run our kernel: {missing}"


# The builder's other features on tiny-qwen: (config, weight dtype of the
# dense projections, operators that must run ours).
FEATURES = {
    "qmoe8": (replace(TINY[0], name="tiny-gpt-oss-8bit", intermediate=64, experts=4,
                      expert_bits=8), "float32", {"QMoE"}),
    "qmoe4": (replace(TINY[0], name="tiny-gpt-oss-4bit", intermediate=64, experts=4,
                      expert_bits=4), "int4", {"QMoE", "MatMulNBits"}),
    "typed-embedding": (replace(TINY[0], name="tiny-qwen-int4-embedding", typed_embedding=True),
                        "int4", {"GatherBlockQuantized", "MatMulNBits"}),
    **{f"kv{bits}-{quant.lower()}": (
        replace(TINY[0], name=f"tiny-qwen-kv{bits}", kv_cache_bits=bits, kv_quant=quant),
        "float32", {"GroupQueryAttention"})
       for bits in (8, 4) for quant in ("PER_TENSOR", "PER_CHANNEL")},
}


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_decoder_features_match_onnxruntime(feature):
    """A prefill and two decode steps.  QMoE quantizes activations to int8
    as int4 projections do: one code may move (TOLERANCE["int4"])."""
    config, dtype, expected = FEATURES[feature]
    sess = _matches_onnxruntime(config, dtype, 3, TOLERANCE["int4"])
    missing = _not_ours(sess, expected)
    assert not missing, f"these operators did not run our kernel: {missing}"


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


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("kind", ["busy", "bursty"])
def test_competing_load_ends_with_a_killed_parent(kind):
    """A parent killed by a signal (the out-of-memory killer) cannot stop
    its load; the load notices that its parent is gone and ends."""
    code = ("import os\n"
            "from benchmarks._harness import competing_load\n"
            f"load = competing_load({kind!r}).__enter__()\n"
            "print(load.proc.pid, flush=True)\n"
            "os.kill(os.getpid(), 9)\n")
    parent = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).parents[1], timeout=60)
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    stat = Path(f"/proc/{int(parent.stdout.split()[0])}/stat")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:  # gone, or a zombie its new parent has not reaped yet
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except (FileNotFoundError, ProcessLookupError):
            return
        time.sleep(0.05)
    pytest.fail(f"the {kind} load outlived its killed parent")


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
