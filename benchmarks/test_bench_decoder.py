"""Whole decoders, ours vs ONNX Runtime, in alternating blocks.

    pytest benchmarks/test_bench_decoder.py --benchmark-only [--decoders] [--load busy]

Layer measured: one ``run`` of a builder-shaped decoder (benchmarks/decoders.py)
end to end, steady state; building, loading and the first run are not timed.
Steps: a 128-token prefill, one decode token after 128 and after 1024 cached
positions (a random cache, no padding, batch 1).

* tiny: the 2-layer decoders of ``decoders.TINY``, run by default;
* real (``--decoders``): Qwen2-0.5B (all 24 layers, vocabulary 151936) and
  Llama-3.2-1B's per-layer shapes (hidden 2048, 32/8 heads, intermediate
  8192, vocabulary 128256) cut to 4 of its 16 layers to bound the time;
  float32 and int4 (MatMulNBits, accuracy level 4).

Each test is one case at one thread count: ours (``ReferenceEvaluator`` +
``register_kernels_for_session``) and an onnxruntime session with the same
``intra_op_num_threads``, sequential, not spinning, at ORT's default
optimization level (what a user of ORT gets: it folds the tied embedding's
Transpose and fuses what it knows).  Logits must agree before timing.
pytest-benchmark times ours; ORT's blocks run between ours' (``Interleaver``)
and ``extra_info`` holds both medians and ``ratio`` = ours / ORT.
``python -m tools.decoder_ratio`` runs this file under each load and prints
the ratio table.
"""

from __future__ import annotations

import functools
import gc
import time

import numpy as np
import onnx
import pytest

import onnx_light_cpu as olc

from ._harness import interleave_with_ort, model_sessions
from .decoders import (
    DTYPES,
    LLAMA_3_2_1B,
    QWEN2_0_5B,
    TINY,
    DecoderConfig,
    build_decoder,
    make_feeds,
)

# (new tokens, cached positions)
STEPS = {"prefill128": (128, 0), "decode128": (1, 128), "decode1024": (1, 1024)}
REAL = (QWEN2_0_5B, LLAMA_3_2_1B.with_layers(4))
THREADS = (1, 2)
# Largest |ours - ORT| on the logits, relative to their largest magnitude:
# at accuracy level 4 both quantize the int4 cases' activations to int8 per
# block, each its own way (seen: 5e-3 on a tiny 128-token prefill).
LOGIT_TOLERANCE = {"float32": 1e-4, "int4": 2e-2}
# Operators whose kernel must be ours for the case to mean anything.
MUST_RUN = {"float32": ("GroupQueryAttention", "MatMul", "SkipSimplifiedLayerNormalization"),
            "int4": ("GroupQueryAttention", "MatMulNBits", "GatherBlockQuantized",
                     "SkipSimplifiedLayerNormalization")}


def _params():
    for configs, real in ((TINY, False), (REAL, True)):
        for config in configs:
            for dtype in DTYPES:
                for threads in THREADS:
                    for step in STEPS:
                        marks = [pytest.mark.decoders] if real else []
                        yield pytest.param(config, dtype, threads, step, real, marks=marks,
                                           id=f"{config.name}-{dtype}-{step}-t{threads}")


@functools.lru_cache(maxsize=1)  # the steps and thread counts of a model follow each other
def _model(config: DecoderConfig, dtype: str) -> onnx.ModelProto:
    return build_decoder(config, dtype)


_held: dict = {}  # the sessions of the current case: a real model holds gigabytes


def _sessions(config: DecoderConfig, dtype: str, threads: int):
    """(our evaluator, the ORT session), kept while the next test needs them."""
    key = (config, dtype, threads)
    if key in _held:
        return _held[key]
    _held.clear()
    gc.collect()
    model = _model(config, dtype)
    ours, theirs = model_sessions(model, model, threads)
    _held[key] = ours, theirs
    return ours, theirs


def _check(config, dtype, ours, theirs, feeds) -> dict:
    """Untimed: outputs agree, our kernels ran; returns what the run used
    and the time of a second call (the first one prepares)."""
    olc.set_kernel_usage_recording(ours, True)
    got = ours.run(None, feeds)
    used = {name.split("::", 1)[1] for name in olc.used_kernel_names(ours)}
    olc.set_kernel_usage_recording(ours, False)
    olc.clear_used_kernel_names(ours)
    want = theirs.run(None, feeds)
    start = time.perf_counter()
    ours.run(None, feeds)
    ours_s = time.perf_counter() - start

    missing = [op for op in MUST_RUN[dtype] if op not in used]
    assert not missing, f"{config.name} {dtype}: our kernels did not run for {missing}"
    for name, g, w in zip(ours.output_names, got, want):
        assert g.shape == w.shape, f"{name}: {g.shape} vs ORT {w.shape}"
    scale = max(1.0, float(np.abs(want[0]).max()))
    error = float(np.abs(got[0] - want[0]).max()) / scale
    assert error <= LOGIT_TOLERANCE[dtype], (
        f"{config.name} {dtype}: logits differ from ORT by {error:.2e} of their scale")
    graph_ops = {n.op_type for n in ours.proto_.graph.node} - {"Constant"}
    return {"second_call_s": ours_s, "logit_error": error,
            "builtin_ops": sorted(graph_ops - used)}


@pytest.mark.parametrize("config,dtype,threads,step,real", list(_params()))
def test_decoder(benchmark, bench_options, competing_load, config, dtype, threads, step, real):
    if real and not bench_options.decoders:
        pytest.skip("real-size decoder: give --decoders or OLC_BENCH_DECODERS=1")
    pytest.importorskip("onnxruntime")
    seq, past = STEPS[step]
    feeds = make_feeds(config, seq, past)
    ours, theirs = _sessions(config, dtype, threads)
    info = _check(config, dtype, ours, theirs, feeds)

    benchmark.group = f"decoder-{config.name}-{dtype}-{step}-t{threads}"
    benchmark.extra_info.update(
        contender="ours-vs-ort", model=config.name, layers=config.layers, dtype=dtype,
        step=step, new_tokens=seq, past=past, threads=threads, simd=olc.simd_level(),
        nodes=len(_model(config, dtype).graph.node), ort_optimization="all",
        **competing_load.describe(), **info)
    interleave_with_ort(benchmark, ours, theirs, feeds, info["second_call_s"],
                        bench_options.budget_s)
