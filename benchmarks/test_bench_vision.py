"""Whole CNNs and LSTM encoders, ours vs ONNX Runtime, in alternating blocks.

    pytest benchmarks/test_bench_vision.py --benchmark-only [--vision] [--load busy]

Layer measured: one ``run`` of a graph of benchmarks/vision.py end to end,
steady state; building, loading and the first run are not timed.  The tiny
models run by default; ``--vision`` (or ``OLC_BENCH_VISION=1``) adds
ResNet-50, MobileNet-V2 and DenseNet-121 at 224x224, batch 1 and 8, and the
2-layer bidirectional LSTMs (hidden 128 and 512, sequence 32 and 256).

Each test is one model at one thread count: ours (``ReferenceEvaluator`` +
``register_kernels_for_session``) and an onnxruntime session with the same
``intra_op_num_threads``, sequential, not spinning, at ORT's default
optimization level (what a user of ORT gets: it fuses Conv with its
activation).  Outputs must agree before timing.  ``extra_info`` holds both
medians and ``ratio`` = ours / ORT.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import time

import numpy as np
import pytest

import onnx_light_cpu as olc

from ._harness import interleave_with_ort, model_sessions
from .vision import (
    DENSENET121,
    LSTMS,
    MOBILENET_V2,
    RESNET50,
    TINY_CNNS,
    TINY_LSTM,
    build_cnn,
    build_lstm,
    cnn_feeds,
    lstm_feeds,
)

THREADS = (1, 2)
# Largest |ours - ORT| relative to the outputs' largest magnitude.
TOLERANCE = 1e-4
# Operators whose kernel must be ours for the case to mean anything.
MUST_RUN = {"resnet": ("Conv", "MaxPool"), "mobilenet_v2": ("Conv",),
            "densenet": ("Conv", "AveragePool"), "lstm": ("LSTM",)}


def _models():
    """(config, kind, build, feeds, real) of every case."""
    yield from ((c, c.kind, build_cnn, cnn_feeds, False) for c in TINY_CNNS)
    yield TINY_LSTM, "lstm", build_lstm, lstm_feeds, False
    for config in (RESNET50, MOBILENET_V2, DENSENET121):
        for batch in (1, 8):
            yield (dataclasses.replace(config, batch=batch, name=f"{config.name}-b{batch}"),
                   config.kind, build_cnn, cnn_feeds, True)
    yield from ((c, "lstm", build_lstm, lstm_feeds, True) for c in LSTMS)


def _params():
    """Each CNN twice for ours: as exported, and after olc.fuse (Conv + Add +
    activation into FusedConv, what ONNX Runtime's optimizer does to its
    own copy of the graph)."""
    for config, kind, build, feeds, real in _models():
        for fused in (False, True) if kind != "lstm" else (False,):
            for threads in THREADS:
                marks = [pytest.mark.vision] if real else []
                yield pytest.param(config, kind, build, feeds, threads, real, fused,
                                   marks=marks, id=f"{config.name}{'-fused' * fused}-t{threads}")


@functools.lru_cache(maxsize=1)  # the thread counts of a model follow each other
def _model(config, build):
    return build(config)


@functools.lru_cache(maxsize=1)
def _fused(config, build):
    return olc.fuse(_model(config, build), ["fused_conv"]).model


def _sessions(config, build, threads: int, fused: bool):
    model = _model(config, build)
    return model_sessions(_fused(config, build) if fused else model, model, threads)


def _check(config, kind, ours, theirs, feeds) -> dict:
    """Untimed: outputs agree and our kernels ran; returns what the run
    used and the time of a second call (the first one prepares)."""
    olc.set_kernel_usage_recording(ours, True)
    got = ours.run(None, feeds)[0]
    used = {name.split("::", 1)[1] for name in olc.used_kernel_names(ours)}
    if "FusedConv" in used:
        used.add("Conv")
    olc.set_kernel_usage_recording(ours, False)
    want = theirs.run(None, feeds)[0]
    start = time.perf_counter()
    ours.run(None, feeds)
    ours_s = time.perf_counter() - start
    missing = [op for op in MUST_RUN[kind] if op not in used]
    assert not missing, f"{config.name}: our kernels did not run for {missing}"
    assert got.shape == want.shape, f"{config.name}: {got.shape} vs ORT {want.shape}"
    error = float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))
    assert error <= TOLERANCE, f"{config.name}: differs from ORT by {error:.2e} of its scale"
    graph_ops = {n.op_type for n in ours.proto_.graph.node}
    return {"second_call_s": ours_s, "error": error, "builtin_ops": sorted(graph_ops - used)}


@pytest.mark.parametrize("config,kind,build,feeds,threads,real,fused", list(_params()))
def test_vision(benchmark, bench_options, competing_load, config, kind, build, feeds, threads,
                real, fused):
    if real and not bench_options.vision:
        pytest.skip("real-size model: give --vision or OLC_BENCH_VISION=1")
    pytest.importorskip("onnxruntime")
    inputs = feeds(config)
    gc.collect()
    ours, theirs = _sessions(config, build, threads, fused)
    info = _check(config, kind, ours, theirs, inputs)

    benchmark.group = f"vision-{config.name}{'-fused' * fused}-t{threads}"
    benchmark.extra_info.update(
        contender="ours-vs-ort", model=config.name, kind=kind, threads=threads, fused=fused,
        simd=olc.simd_level(), nodes=len(_model(config, build).graph.node),
        ort_optimization="all", **competing_load.describe(), **info)
    interleave_with_ort(benchmark, ours, theirs, inputs, info["second_call_s"],
                        bench_options.budget_s)
