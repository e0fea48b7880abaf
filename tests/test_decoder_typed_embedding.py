"""A tiny builder-shaped decoder (benchmarks/decoders.py, int4 weights)
whose token embedding is an INT4- or UINT4-typed GatherBlockQuantized (an
untied [vocab, hidden] table, blocks of 32, float32 scales, UINT4 with zero
points), run end to end with our kernels and compared with ONNX Runtime
over a prefill and two decode steps."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from ml_dtypes import int4, uint4
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

ort = pytest.importorskip("onnxruntime")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.decoders import TINY, build_decoder, make_feeds, next_step_feeds  # noqa: E402

BLOCK = 32
# int4 MatMulNBits at accuracy level 4, as tests/test_decoders.py explains;
# the embedding itself is bit-identical to ORT's.
RTOL, ATOL = 1e-4, 5e-2


def typed_embedding_decoder(config, kind: str, seed: int = 3):
    """The int4 decoder with its embedding Reshape + packed-UINT8
    GatherBlockQuantized replaced by a GatherBlockQuantized on a typed table."""
    model = build_decoder(config, "int4")
    graph = model.graph
    rng = np.random.default_rng(seed)
    V, H = config.vocab, config.hidden
    if kind == "int4":
        data, zp = rng.integers(-8, 8, (V, H)).astype(int4), None
    else:
        data = rng.integers(0, 16, (V, H)).astype(uint4)
        zp = rng.integers(0, 16, (V, H // BLOCK)).astype(uint4)
    scales = (rng.uniform(0.5, 1.5, (V, H // BLOCK)) / (4.6 * np.sqrt(H))).astype(np.float32)
    gbq = next(n for n in graph.node if n.op_type == "GatherBlockQuantized")
    reshape = next(n for n in graph.node if n.output[0] == gbq.input[0])
    graph.node.remove(reshape)
    inits = {"model.embed_tokens.weight": data, "model.embed_tokens.scales": scales}
    if zp is not None:
        inits["model.embed_tokens.zero_points"] = zp
    graph.initializer.extend(nh.from_array(a, n) for n, a in inits.items())
    names = list(inits)
    new = oh.make_node("GatherBlockQuantized", [names[0], "input_ids"] + names[1:],
                       list(gbq.output), gbq.name, domain="com.microsoft", bits=4,
                       block_size=BLOCK, gather_axis=0, quantize_axis=1)
    index = list(graph.node).index(gbq)
    graph.node.remove(gbq)
    graph.node.insert(index, new)
    return model


@pytest.mark.parametrize("kind", ["int4", "uint4"])
@pytest.mark.parametrize("config", TINY[:2], ids=[c.name for c in TINY[:2]])
def test_typed_embedding_decoder_matches_onnxruntime(config, kind):
    model = typed_embedding_decoder(config, kind)
    names = [o.name for o in model.graph.output]
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])

    feeds = make_feeds(config, 7, 0)
    for step in ("prefill", "decode 1", "decode 2"):
        got = dict(zip(names, sess.run(None, feeds)))
        want = dict(zip(names, ref.run(None, feeds)))
        for name in names:
            assert got[name].shape == want[name].shape, (step, name)
            np.testing.assert_allclose(got[name], want[name], rtol=RTOL, atol=ATOL,
                                       err_msg=f"{config.name} {kind} {step}: {name}")
        token = int(np.argmax(want["logits"][0, -1]))
        feeds = next_step_feeds(config, feeds, want, token)
    assert "onnx_light_cpu::GatherBlockQuantized" in olc.used_kernel_names(sess)
    paths = olc.used_kernel_paths(sess)
    assert any(p.startswith(f"gather_block_quantized_{kind}_float32_") for p in paths), paths
