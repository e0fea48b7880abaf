"""peak_memory_bytes against what the kernels allocate, and the model walk.

Each case is a single-node model run twice by our kernel in a fresh
ReferenceEvaluator (``register_kernels_for_session``; ``used_kernel_names``
checked).

NumPy allocations (tracemalloc sees them):
- second run: the scratch a run allocates besides what the evaluator keeps
  (estimate ``numpy - pooled``).  tracemalloc's peak over the run includes
  the outputs allocated during it, not always at the same time as the
  scratch (many kernels allocate their outputs after their scratch is
  freed), so the measured scratch lies between ``peak - outputs`` and
  ``peak``; the estimate must lie there too, within ``TOL`` (a run's own
  interpreter allocations, a few KiB).  The evaluator's BufferPool cannot
  hand the first run's outputs to the second: the test still holds them.
- first run: what stays allocated after it, less its outputs, is what the
  node prepared plus the scratch slots the pool keeps (estimate
  ``prepared + pooled``), within ``TOL``.

C allocations (malloc/aligned_alloc in the cores) are invisible to
tracemalloc.  Their figures come from the code (peak_memory.py names each
C function); they are checked (a) for MatMulNBits against the core's own
``PreparedWeights.scratch_bytes`` and ``prepared_bytes`` (olc_nb_scratch,
olc_q8_scratch), and (b) for every case, when gcc and glibc are at hand,
with a malloc meter: a small LD_PRELOAD library counting the bytes malloc,
calloc, realloc and the aligned allocators hand out (NumPy's data included)
in a subprocess; the estimate's total (``_Estimate.scratch``) must lie
between the metered run's peak less its outputs and its peak, within
``TOL``.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu import memory_estimate as pm
from onnx_light_cpu.memory_estimate import PeakMemory, peak_memory, peak_memory_bytes

MS = "com.microsoft"
F32, F16 = np.float32, np.float16


def tol(estimate: int) -> int:
    """Slack of one comparison: a run's interpreter allocations (dicts,
    lists, small index arrays: measured 0.5-6 KiB) and 4 %."""
    return 12 * 1024 + estimate // 25


# -- single-node models ------------------------------------------------------------

def node_model(op, inputs, *, constant=(), n_out=1, domain=MS, **attrs):
    """(model, feeds, node): None inputs are left out; indices in
    ``constant`` become initializers."""
    names, values, feeds, inits = [], [], {}, []
    for i, a in enumerate(inputs):
        if a is None:
            names.append("")
            continue
        name = f"x{i}"
        names.append(name)
        if i in constant:
            inits.append(numpy_helper.from_array(a, name))
        else:
            values.append(oh.make_tensor_value_info(
                name, oh.np_dtype_to_tensor_dtype(a.dtype), a.shape))
            feeds[name] = a
    while names and not names[-1]:
        names.pop()
    outs = [f"y{i}" for i in range(n_out)]
    node = oh.make_node(op, names, outs, domain=domain, **attrs)
    graph = oh.make_graph([node], "g", values, [oh.make_tensor_value_info(o, 0, None)
                                                for o in outs], initializer=inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21),
                                                oh.make_opsetid(MS, 1)], ir_version=10)
    return model, feeds, node


def _nbytes(values) -> int:
    return sum(v.nbytes for v in values if isinstance(v, np.ndarray))


def estimate_of(case, threads=1, simd_level=None):
    op, inputs, constant, attrs, n_out, domain = case
    _, _, node = node_model(op, inputs, constant=constant, n_out=n_out, domain=domain, **attrs)
    shapes = [None if a is None else a.shape for a in inputs]
    types = [None if a is None else a.dtype for a in inputs]
    inits = {f"x{i}": inputs[i] for i in constant}
    return pm._estimate(node, shapes, types, inits, num_threads=threads, simd_level=simd_level)


def session(case, threads=1):
    op, inputs, constant, attrs, n_out, domain = case
    model, feeds, _ = node_model(op, inputs, constant=constant, n_out=n_out, domain=domain,
                                 **attrs)
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    return sess, feeds


def measure_numpy(case, threads=1) -> dict:
    """tracemalloc over a first and a second run of a fresh evaluator."""
    sess, feeds = session(case, threads)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        first = sess.run(None, feeds)
        current = tracemalloc.get_traced_memory()[0]
        kept = current - base - _nbytes(first)
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        second = sess.run(None, feeds)  # ``first`` still held: no output comes from the pool
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    names = olc.used_kernel_names(sess)
    return {"kept": kept, "peak": peak, "outputs": _nbytes(second), "names": names,
            "node": sess.rt_nodes_[0]}


# -- the sweep ------------------------------------------------------------------------

def _rng():
    return np.random.default_rng(7)


def R(rng, *shape, dtype=F32, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def U8(rng, *shape):
    return rng.integers(0, 255, shape, dtype=np.uint8)


def I8(rng, *shape):
    return rng.integers(-128, 127, shape, dtype=np.int8)


def c(op, inputs, constant=(), n_out=1, domain=MS, **attrs):
    return (op, inputs, tuple(constant), attrs, n_out, domain)


def build_cases():
    """(id, case) pairs: the operators with real scratch over several
    shapes, the others once."""
    rng = _rng()
    cases = []
    # MatMulNBits: routes (direct, dot, GEMM panels, int8), constant or not, float16
    for M, K, N, level, const, dt, block in [
            (1, 256, 512, 0, (), F32, 32), (64, 256, 512, 0, (), F32, 32),
            (64, 256, 512, 4, (1, 2), F32, 32), (1, 512, 256, 4, (1, 2), F32, 64),
            (64, 256, 512, 0, (1, 2), F32, 32), (16, 512, 256, 0, (1, 2), F16, 64),
            (200, 256, 128, 0, (), F32, 32)]:
        nb = K // block
        cases.append((f"MatMulNBits-M{M}-K{K}-N{N}-acc{level}-c{len(const)}-{np.dtype(dt).name}",
                      c("MatMulNBits", [R(rng, M, K, dtype=dt), U8(rng, N, nb, block // 2),
                                        (rng.random((N, nb)) * 0.01).astype(dt)],
                        const, K=K, N=N, bits=4, block_size=block, accuracy_level=level)))
    # MatMulNBits variants: zero points (packed uint8, float), bias, 8 and 2 bits, g_idx
    K, N, nb = 256, 128, 8
    g_idx = (np.arange(K) // 32).astype(np.int32)
    for label, ins, const, attrs in [
            ("zp-uint8-bias", [R(rng, 8, K), U8(rng, N, nb, 16), R(rng, N, nb),
                               U8(rng, N, nb // 2), None, R(rng, N)], (1, 2, 3), {}),
            ("zp-float-acc4", [R(rng, 8, K), U8(rng, N, nb, 16), R(rng, N, nb),
                               R(rng, N, nb)], (1, 2, 3), {"accuracy_level": 4}),
            ("bits8", [R(rng, 64, K), U8(rng, N, nb, 32), R(rng, N, nb)], (1, 2), {"bits": 8}),
            ("bits2", [R(rng, 64, K), U8(rng, N, nb, 8), R(rng, N, nb)], (), {"bits": 2}),
            ("g_idx-c3", [R(rng, 16, K), U8(rng, N, nb, 16), R(rng, N, nb), None, g_idx],
             (1, 2, 4), {}),
            ("g_idx-c0", [R(rng, 16, K), U8(rng, N, nb, 16), R(rng, N, nb), None, g_idx],
             (), {})]:
        attrs = {"K": K, "N": N, "bits": 4, "block_size": 32, **attrs}
        cases.append((f"MatMulNBits-{label}", c("MatMulNBits", ins, const, **attrs)))
    # MultiHeadAttention: prefill, decode with a past, bias, qk, causal, key lengths
    for B, S, L, N, H, P, extra in [
            (2, 64, 64, 4, 32, 0, ""), (1, 1, 1, 8, 64, 300, ""), (2, 32, 32, 4, 16, 0, "bias"),
            (2, 16, 16, 4, 16, 0, "qk"), (2, 16, 16, 4, 16, 0, "causal"),
            (2, 16, 16, 4, 16, 0, "lengths")]:
        ins = [R(rng, B, S, N * H), R(rng, B, L, N * H), R(rng, B, L, N * H),
               R(rng, 3 * N * H) if extra == "bias" else None,
               np.full((B,), L + P, np.int32) if extra == "lengths" else None, None,
               R(rng, B, N, P, H) if P else None, R(rng, B, N, P, H) if P else None]
        attrs = {"num_heads": N}
        if extra == "causal":
            attrs["unidirectional"] = 1
        n_out = 4 if extra == "qk" else (3 if P else 1)
        cases.append((f"MultiHeadAttention-B{B}-S{S}-P{P}-{extra or 'plain'}",
                      c("MultiHeadAttention", ins, n_out=n_out, **attrs)))
    # GroupQueryAttention: prompt, long decode (chunked), grouped heads, rotary
    for B, S, N, Nkv, H, P, rotary in [(1, 64, 8, 2, 32, 0, 0), (1, 1, 8, 2, 64, 512, 0),
                                       (2, 1, 8, 8, 64, 100, 0), (1, 32, 8, 2, 32, 0, 1)]:
        ins = [R(rng, B, S, N * H), R(rng, B, S, Nkv * H), R(rng, B, S, Nkv * H),
               R(rng, B, Nkv, P, H) if P else None, R(rng, B, Nkv, P, H) if P else None,
               np.full((B,), P + S - 1, np.int32), np.array(P + S, np.int32),
               R(rng, P + S + 8, H // 2) if rotary else None,
               R(rng, P + S + 8, H // 2) if rotary else None]
        cases.append((f"GroupQueryAttention-B{B}-S{S}-{N}x{Nkv}-P{P}-rot{rotary}",
                      c("GroupQueryAttention", ins, n_out=3, num_heads=N, kv_num_heads=Nkv,
                        do_rotary=rotary)))
    B, S, N, Nkv, H = 1, 16, 8, 2, 32
    seqlens, total = np.full((B,), S - 1, np.int32), np.array(S, np.int32)
    cases += [
        ("GroupQueryAttention-packed", c("GroupQueryAttention", [
            R(rng, B, S, (N + 2 * Nkv) * H), None, None, None, None, seqlens, total],
            n_out=3, num_heads=N, kv_num_heads=Nkv)),
        ("GroupQueryAttention-packed-rotary", c("GroupQueryAttention", [
            R(rng, B, S, (N + 2 * Nkv) * H), None, None, None, None, seqlens, total,
            R(rng, S + 4, H // 2), R(rng, S + 4, H // 2)], n_out=3, num_heads=N,
            kv_num_heads=Nkv, do_rotary=1)),
        ("GroupQueryAttention-qk", c("GroupQueryAttention", [
            R(rng, B, S, N * H), R(rng, B, S, Nkv * H), R(rng, B, S, Nkv * H), None, None,
            seqlens, total], n_out=4, num_heads=N, kv_num_heads=Nkv, qk_output=1)),
        ("MultiHeadAttention-cross-rank4", c("MultiHeadAttention", [
            R(rng, 2, 16, 128), R(rng, 2, 4, 24, 32), R(rng, 2, 4, 24, 32)], num_heads=4)),
        ("Attention-lengths-past", c("Attention", [
            R(rng, 2, 4, 64), R(rng, 64, 192), R(rng, 192), np.array([6, 5], np.int32),
            R(rng, 2, 2, 4, 8, 16)], (1,), n_out=2, num_heads=4)),
        ("Attention-mask2d", c("Attention", [R(rng, 2, 16, 64), R(rng, 64, 192), R(rng, 192),
                                             np.ones((2, 16), np.int32)], (1,), num_heads=4)),
    ]
    # Attention: fused projection (constant float32 weights), unfused, float16, present
    for B, S, Hin, N, const, dt, present in [
            (2, 64, 128, 4, (1,), F32, 0), (2, 64, 128, 4, (), F32, 0),
            (4, 32, 64, 8, (1, 2), F32, 0), (2, 16, 64, 4, (1,), F16, 0),
            (2, 16, 64, 4, (1,), F32, 1)]:
        ins = [R(rng, B, S, Hin, dtype=dt), R(rng, Hin, 3 * Hin, dtype=dt),
               R(rng, 3 * Hin, dtype=dt)]
        cases.append((f"Attention-B{B}-S{S}-Hin{Hin}-c{len(const)}-{np.dtype(dt).name}"
                      f"-present{present}",
                      c("Attention", ins, const, n_out=2 if present else 1, num_heads=N)))
    for B, S, Hin, const in [(2, 32, 64, (1,)), (2, 32, 64, ())]:
        ins = [U8(rng, B, S, Hin), U8(rng, Hin, 3 * Hin), R(rng, 3 * Hin), np.array(0.02, F32),
               np.array(0.01, F32), None, np.array(3, np.uint8), np.array(5, np.uint8)]
        cases.append((f"QAttention-B{B}-S{S}-c{len(const)}",
                      c("QAttention", ins, const, num_heads=4)))
    # MoE / QMoE
    for T, H, inter, E, k, const, act, dt in [
            (8, 64, 128, 4, 2, (2, 4), "relu", F32), (8, 64, 128, 4, 2, (), "relu", F32),
            (1, 64, 128, 8, 2, (2, 4), "silu", F32), (300, 64, 64, 4, 1, (2, 4), "relu", F32),
            (16, 64, 64, 4, 2, (2, 4), "swiglu", F16)]:
        f = 2 if act == "swiglu" else 1
        ins = [R(rng, T, H, dtype=dt), R(rng, T, E, dtype=dt), R(rng, E, f * inter, H, dtype=dt),
               R(rng, E, f * inter, dtype=dt), R(rng, E, H, inter, dtype=dt),
               R(rng, E, H, dtype=dt)]
        attrs = {"k": k, "activation_type": act}
        if act == "swiglu":
            attrs["swiglu_fusion"] = 1
        cases.append((f"MoE-T{T}-E{E}-k{k}-c{len(const)}-{act}", c("MoE", ins, const, **attrs)))
    for T, H, inter, E, bits, block, const, level in [
            (4, 64, 128, 4, 4, 32, (2, 3, 5, 6), 0), (4, 64, 128, 4, 4, 32, (2, 3, 5, 6), 4),
            (64, 64, 128, 4, 4, 32, (2, 3, 5, 6), 0), (64, 64, 128, 4, 8, 0, (), 0),
            (1, 128, 128, 8, 8, 64, (2, 3, 5, 6), 0)]:
        def codes(n, kk):
            return rng.integers(0, 255, (E, n, -(-kk * bits // 8)), dtype=np.uint8)

        def scales(n, kk):
            shape = (E, n, kk // block) if block else (E, n)
            return (rng.random(shape) * 0.01).astype(F32)

        ins = [R(rng, T, H), R(rng, T, E), codes(inter, H), scales(inter, H), None,
               codes(H, inter), scales(H, inter)]
        cases.append((f"QMoE-T{T}-E{E}-bits{bits}-block{block}-c{len(const)}-acc{level}",
                      c("QMoE", ins, const, k=2, expert_weight_bits=bits, block_size=block,
                        accuracy_level=level)))
    T, H, inter, E = 16, 64, 64, 4
    cases += [
        ("QMoE-zero-points", c("QMoE", [
            R(rng, T, H), R(rng, T, E), U8(rng, E, inter, H // 2), R(rng, E, inter, H // 32),
            None, U8(rng, E, H, inter // 2), R(rng, E, H, inter // 32), None, None, None, None,
            U8(rng, E, inter, 1), U8(rng, E, H, 1)], (2, 3, 5, 6, 11, 12), k=2,
            expert_weight_bits=4, block_size=32)),
        ("QMoE-fc3-silu-panels", c("QMoE", [
            R(rng, 8 * T, H), R(rng, 8 * T, E), U8(rng, E, inter, H // 2),
            R(rng, E, inter, H // 32), None, U8(rng, E, H, inter // 2),
            R(rng, E, H, inter // 32), None, U8(rng, E, inter, H // 2),
            R(rng, E, inter, H // 32)], (2, 3, 5, 6, 8, 9), k=2, expert_weight_bits=4,
            block_size=32, activation_type="silu")),
        ("MoE-c0-float16", c("MoE", [R(rng, T, H, dtype=F16), R(rng, T, E, dtype=F16),
                                     R(rng, E, inter, H, dtype=F16), R(rng, E, inter, dtype=F16),
                                     R(rng, E, H, inter, dtype=F16), R(rng, E, H, dtype=F16)],
                             k=2)),
    ]
    # int8 GEMMs
    for M, K, N, const in [(64, 128, 256, (1,)), (64, 128, 256, ()), (1, 256, 512, (1,))]:
        ins = [R(rng, M, K), I8(rng, K, N), np.array(0.01, F32), np.array(0, np.int8),
               R(rng, N)]
        cases.append((f"DynamicQuantizeMatMul-M{M}-c{len(const)}",
                      c("DynamicQuantizeMatMul", ins, const)))
    for M, K, N, const, ot in [(64, 128, 256, (1,), F32), (64, 128, 256, (), F32),
                               (32, 128, 256, (1,), F16)]:
        ins = [U8(rng, M, K), I8(rng, K, N), np.array(0.02, ot), np.full((N,), 0.01, ot),
               np.array(3, np.uint8), None, R(rng, N, dtype=ot)]
        cases.append((f"MatMulIntegerToFloat-M{M}-c{len(const)}-{np.dtype(ot).name}",
                      c("MatMulIntegerToFloat", ins, const)))
    for M, K, N, const, tb, yq in [(64, 128, 256, (3,), 0, 0), (64, 128, 256, (), 1, 0),
                                   (64, 128, 256, (3,), 0, 1)]:
        ins = [U8(rng, M, K), np.array(0.02, F32), np.array(3, np.uint8),
               I8(rng, N, K) if tb else I8(rng, K, N), np.array(0.01, F32),
               np.array(0, np.int8), None]
        if yq:
            ins += [np.array(0.5, F32), np.array(1, np.uint8)]
        cases.append((f"QGemm-M{M}-c{len(const)}-tB{tb}-q{yq}",
                      c("QGemm", ins, const, transB=tb)))
    for const, dt in [((1,), F32), ((), F32), ((1,), F16)]:
        name = f"c{len(const)}-{np.dtype(dt).name}"
        cases.append((f"FusedMatMul-{name}", c("FusedMatMul", [R(rng, 64, 128, dtype=dt),
                                                               R(rng, 128, 256, dtype=dt)], const)))
        cases.append((f"FusedGemm-{name}", c("FusedGemm", [R(rng, 64, 128, dtype=dt),
                                                           R(rng, 128, 256, dtype=dt),
                                                           R(rng, 256, dtype=dt)], const,
                                             activation="Relu")))
    # FusedConv: Winograd (an image as one block, block by block), im2col tiles, the 1x1
    # plain GEMM, depthwise
    for name, xs, ws, const, attrs in [
            ("winograd-c1", (1, 32, 28, 30), (48, 32, 3, 3), (1, 2), {"pads": [1, 1, 1, 1]}),
            ("im2col-c0", (1, 64, 40, 40), (16, 64, 3, 3), (), {"strides": [2, 2]}),
            ("pointwise", (1, 64, 28, 28), (32, 64, 1, 1), (1,), {}),
            ("depthwise", (1, 32, 28, 28), (32, 1, 3, 3), (1,), {"group": 32}),
            ("depthwise-s2", (1, 32, 28, 28), (32, 1, 3, 3), (1,),
             {"group": 32, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
            ("winograd-blocked", (1, 16, 70, 71), (17, 16, 3, 3), (1, 2),
             {"pads": [1, 0, 2, 1]}),
            # more channels than pixels: the pixels as the GEMM's rows
            ("gemm-t", (2, 64, 7, 7), (512, 64, 3, 3), (1, 2),
             {"strides": [2, 2], "pads": [1, 1, 1, 1]})]:
        cases.append((f"FusedConv-{name}", c("FusedConv", [R(rng, *xs), R(rng, *ws),
                                                           R(rng, ws[0])], const,
                                             activation="Relu", **attrs)))
    # the rest, once each
    B, S, H = 4, 64, 256
    s8 = [np.array(0.01, F32), np.array(3, np.uint8)]
    t8 = [np.array(0.03, F32), np.array(3, np.uint8)]
    cases += [
        ("SkipLayerNormalization", c("SkipLayerNormalization", [
            R(rng, B, S, H), R(rng, B, S, H), R(rng, H), R(rng, H), R(rng, H)], n_out=4)),
        ("SkipSimplifiedLayerNormalization", c("SkipSimplifiedLayerNormalization", [
            R(rng, B, S, H, dtype=F16), R(rng, B, S, H, dtype=F16), R(rng, H, dtype=F16)],
            n_out=4)),
        ("SimplifiedLayerNormalization", c("SimplifiedLayerNormalization",
                                           [R(rng, B, S, H), R(rng, H)], n_out=2, domain="")),
        ("BiasGelu", c("BiasGelu", [R(rng, B, S, H), R(rng, H)])),
        ("Gelu", c("Gelu", [R(rng, B, S, H)])),
        ("FastGelu", c("FastGelu", [R(rng, B, S, H), R(rng, H)])),
        ("QuickGelu", c("QuickGelu", [R(rng, B, S, H, dtype=F16)])),
        ("Range", c("Range", [np.array(0, np.int64), np.array(100000, np.int64),
                              np.array(1, np.int64)])),
        ("Trilu-upper", c("Trilu", [R(rng, 8, 128, 128)])),
        ("Trilu-lower", c("Trilu", [R(rng, 4, 96, 160)], upper=0)),
        ("ExpandDims", c("ExpandDims", [R(rng, B, S, H), np.array(1, np.int32)])),
        ("Unique", c("Unique", [rng.integers(0, 1000, 20000).astype(F32)], n_out=3)),
        ("CDist", c("CDist", [R(rng, 300, 64), R(rng, 200, 64)])),
        ("GatherBlockQuantized", c("GatherBlockQuantized", [
            U8(rng, 1000, 64), rng.integers(0, 1000, (4, 64)).astype(np.int64),
            R(rng, 1000, 4)], block_size=32, bits=4)),
        ("RotaryEmbedding", c("RotaryEmbedding", [
            R(rng, 2, 64, 256), np.tile(np.arange(64, dtype=np.int64), (2, 1)),
            R(rng, 128, 16), R(rng, 128, 16)], num_heads=8)),
        ("QuantizeLinear", c("QuantizeLinear", [R(rng, B, S, H)] + s8)),
        ("DequantizeLinear", c("DequantizeLinear", [U8(rng, B, S, H)] + s8)),
        ("QLinearAdd", c("QLinearAdd", [U8(rng, B, S, H)] + s8 + [U8(rng, B, S, H)] + s8 + t8)),
        ("QLinearMul-broadcast", c("QLinearMul", [U8(rng, B, S, H)] + s8 + [U8(rng, H)] + s8
                                   + t8)),
        ("QLinearLeakyRelu", c("QLinearLeakyRelu", [U8(rng, B, S, H)] + s8 + t8, alpha=0.1)),
        ("QLinearSigmoid", c("QLinearSigmoid", [U8(rng, B, S, H)] + s8 + t8)),
        ("QLinearSoftmax", c("QLinearSoftmax", [U8(rng, B, S, H)] + s8
                             + [np.array(1 / 256, F32), np.array(0, np.uint8)], opset=13)),
        ("QLinearGlobalAveragePool", c("QLinearGlobalAveragePool",
                                       [U8(rng, 2, 64, 32, 32)] + s8 + t8)),
        ("QLinearAveragePool", c("QLinearAveragePool", [U8(rng, 2, 16, 32, 32)] + s8 + t8,
                                 kernel_shape=[3, 3])),
        ("QLinearConcat", c("QLinearConcat", t8 + [U8(rng, B, S, H)] + s8 + [U8(rng, B, S, H),
                                                  np.array(0.02, F32), np.array(4, np.uint8)],
                            axis=1)),
        ("QLinearWhere", c("QLinearWhere", [rng.random((B, S, H)) > 0.5, U8(rng, B, S, H)] + s8
                           + [U8(rng, B, S, H), np.array(0.02, F32), np.array(4, np.uint8)]
                           + t8)),
        ("EmbedLayerNormalization", c("EmbedLayerNormalization", [
            rng.integers(0, 1000, (B, S)).astype(np.int32),
            rng.integers(0, 2, (B, S)).astype(np.int32), R(rng, 1000, H), R(rng, 512, H),
            R(rng, 2, H), R(rng, H), R(rng, H), np.ones((B, S), np.int32)], n_out=2)),
        ("QEmbedLayerNormalization", c("QEmbedLayerNormalization", [
            rng.integers(0, 1000, (B, S)).astype(np.int32), None, U8(rng, 1000, H),
            U8(rng, 512, H), None, U8(rng, H), U8(rng, H), None, np.array(0.01, F32),
            np.array(0.01, F32), None, np.array(0.01, F32), np.array(0.01, F32),
            np.array(3, np.uint8), np.array(3, np.uint8), None, np.array(3, np.uint8),
            np.array(3, np.uint8)], (2, 3, 5, 6), n_out=2)),
        ("CausalConvWithState", c("CausalConvWithState", [
            R(rng, 2, 256, 64), R(rng, 256, 1, 4), R(rng, 256), R(rng, 2, 256, 3)], n_out=2)),
        ("LinearAttention", c("LinearAttention", [
            R(rng, 2, 16, 128), R(rng, 2, 16, 128), R(rng, 2, 16, 128), R(rng, 2, 4, 32, 32),
            R(rng, 2, 16, 4), R(rng, 2, 16, 4)], n_out=2, q_num_heads=4, kv_num_heads=4)),
    ]
    return cases


CASES = build_cases()
IDS = [name for name, _ in CASES]


def _check_between(what, estimate, low, high):
    slack = tol(estimate)
    assert low - slack <= estimate <= high + slack, (
        f"{what}: estimate {estimate} outside the measured [{low}, {high}] (+-{slack})")


@pytest.mark.parametrize("case", [case for _, case in CASES], ids=IDS)
def test_numpy_scratch_and_prepared(case):
    e = estimate_of(case)
    m = measure_numpy(case)
    assert any(n.startswith("onnx_light_cpu::") for n in m["names"]), m["names"]
    # second run: scratch allocated besides what the evaluator keeps
    _check_between("NumPy scratch of a run", e.numpy - e.pooled,
                   m["peak"] - m["outputs"], m["peak"])  # (NumPy's part: C excluded)
    # first run: what stays (prepared weights, kept scratch slots)
    kept = e.prepared + e.pooled
    assert abs(m["kept"] - kept) <= tol(kept), (
        f"kept after the first run: measured {m['kept']}, estimate {kept} "
        f"(prepared {e.prepared} + pooled {e.pooled})")
    # the public figure is the sum of both sides
    op, inputs, constant, attrs, n_out, domain = case
    _, _, node = node_model(op, inputs, constant=constant, n_out=n_out, domain=domain, **attrs)
    got = peak_memory_bytes(node, [None if a is None else a.shape for a in inputs],
                            [None if a is None else a.dtype for a in inputs],
                            {f"x{i}" for i in constant})
    assert got == PeakMemory(e.scratch(), e.prepared)


NBITS_CORE = [name for name in IDS if name.startswith("MatMulNBits") and "g_idx" not in name]


@pytest.mark.parametrize("case", [dict(CASES)[name] for name in NBITS_CORE], ids=NBITS_CORE)
def test_matmul_nbits_native_against_core(case):
    """The C side of MatMulNBits against the core's own figures
    (PreparedWeights.scratch_bytes: olc_nb_scratch / olc_q8_scratch; g_idx
    runs in NumPy, measured above)."""
    e = estimate_of(case)
    m = measure_numpy(case)
    node = m["node"]
    assert e.native == node.scratch_bytes
    if any(i in case[2] for i in (1, 2)):   # prepared once: the core counts its arrays
        inputs = case[1]
        N, nb = inputs[2].shape
        # the adapter widens half-type scales and float zero points before
        # the core sees them: kept, but not counted by the core
        widened = N * nb * 4 if inputs[2].dtype != np.float32 else 0
        if len(inputs) > 3 and inputs[3] is not None and inputs[3].dtype != np.uint8:
            widened += N * nb * 4
        assert e.prepared == node.prepared_bytes + widened


def test_threads_multiply_per_thread_buffers():
    rng = _rng()
    case = c("MatMulNBits", [R(rng, 512, 1024), U8(rng, 1024, 32, 16), R(rng, 1024, 32)],
             K=1024, N=1024, bits=4, block_size=32)
    one, four = estimate_of(case, 1), estimate_of(case, 4)
    assert four.native == 4 * one.native > 0
    # the adapter's own threshold: a small product stays on one thread
    small = c("MatMulNBits", [R(rng, 8, 64), U8(rng, 64, 2, 16), R(rng, 64, 2)],
              K=64, N=64, bits=4, block_size=32)
    assert estimate_of(small, 1) == estimate_of(small, 4)


def test_unknown_operator():
    node = oh.make_node("Add", ["a", "b"], ["c"])
    with pytest.raises(NotImplementedError, match="ai.onnx::Add"):
        peak_memory_bytes(node, [(2,), (2,)], [TensorProto.FLOAT] * 2)


def test_every_custom_operator_has_an_estimate():
    ops = {(k.domain, k.op_type) for k in olc.registered_kernels() if k.domain == MS}
    ops.add(("", "SimplifiedLayerNormalization"))
    assert ops <= set(pm.supported_memory_operators())
    tested = {case[0] for _, case in CASES}
    assert {op for _, op in ops} <= tested


def test_input_forms():
    """Shapes and types by name or by position; types as codes, dtypes or strings."""
    node = oh.make_node("MatMulNBits", ["A", "B", "s"], ["Y"], domain=MS, K=256, N=128, bits=4,
                        block_size=32)
    shapes = [(4, 256), (128, 8, 16), (128, 8)]
    a = peak_memory_bytes(node, shapes, [TensorProto.FLOAT16, TensorProto.UINT8,
                                         TensorProto.FLOAT16])
    b = peak_memory_bytes(node, dict(zip(["A", "B", "s"], shapes)),
                          {"A": np.float16, "B": np.uint8, "s": "tensor(float16)"})
    assert a == b and a.scratch >= 4 * 256 * 4 + 4 * 128 * 4 and a.prepared == 0
    const = peak_memory_bytes(node, shapes, [TensorProto.FLOAT16, TensorProto.UINT8,
                                             TensorProto.FLOAT16], initializers={"B", "s"})
    assert const.prepared > 0


# -- the malloc meter (C allocations) ---------------------------------------------------

METER_C = r"""
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <malloc.h>
#include <errno.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
static int64_t cur, peak;
static void add(void *p) {
    if (!p) return;
    int64_t c = __atomic_add_fetch(&cur, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
    int64_t pk = __atomic_load_n(&peak, __ATOMIC_RELAXED);
    while (c > pk && !__atomic_compare_exchange_n(&peak, &pk, c, 1, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED)) {}
}
static void sub(void *p) {
    if (p) __atomic_sub_fetch(&cur, (int64_t)malloc_usable_size(p), __ATOMIC_RELAXED);
}
void *malloc(size_t n) { void *p = __libc_malloc(n); add(p); return p; }
void *calloc(size_t a, size_t b) { void *p = __libc_calloc(a, b); add(p); return p; }
void free(void *p) { sub(p); __libc_free(p); }
void *realloc(void *p, size_t n) {
    sub(p); void *q = __libc_realloc(p, n); add(q ? q : (n ? p : NULL)); return q;
}
void *memalign(size_t a, size_t n) { void *p = __libc_memalign(a, n); add(p); return p; }
void *aligned_alloc(size_t a, size_t n) { void *p = __libc_memalign(a, n); add(p); return p; }
int posix_memalign(void **r, size_t a, size_t n) {
    void *p = __libc_memalign(a, n); if (!p) return ENOMEM; add(p); *r = p; return 0;
}
int64_t olc_meter_current(void) { return __atomic_load_n(&cur, __ATOMIC_RELAXED); }
int64_t olc_meter_peak(void) { return __atomic_load_n(&peak, __ATOMIC_RELAXED); }
void olc_meter_reset_peak(void) {
    __atomic_store_n(&peak, __atomic_load_n(&cur, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}
"""

METER_RUN = textwrap.dedent("""
    import ctypes, importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("tpm", sys.argv[1])
    tpm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tpm)
    from onnx_light_cpu import simd
    lib = ctypes.CDLL(None)
    lib.olc_meter_current.restype = lib.olc_meter_peak.restype = ctypes.c_int64
    threads = int(sys.argv[2])
    names = set(sys.argv[3:])
    out = {"level": simd.state.level, "runs": {}}
    for name, case in tpm.CASES:
        if names and name not in names:
            continue
        sess, feeds = tpm.session(case, threads)
        first = sess.run(None, feeds)
        lib.olc_meter_reset_peak()
        base = lib.olc_meter_current()
        second = sess.run(None, feeds)
        out["runs"][name] = [lib.olc_meter_peak() - base, tpm._nbytes(second)]
        del first, second, sess
    print(json.dumps(out))
""")

#: operators whose C scratch depends on the instruction set or the threads:
#: metered again at the scalar level and with two threads
VARIANT_PREFIXES = ("MatMulNBits", "MoE", "QMoE", "Attention", "FusedMatMul", "FusedGemm",
                    "FusedConv",
                    "MultiHeadAttention-B2-S64", "GroupQueryAttention-B1-S1",
                    "DynamicQuantizeMatMul", "QGemm")
VARIANTS = {"default": ({}, 1), "scalar": ({"ONNX_LIGHT_CPU_MAX_SIMD": "scalar"}, 1),
            "two_threads": ({}, 2)}


@pytest.fixture(scope="module")
def meter_library(tmp_path_factory):
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None or platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("the malloc meter needs gcc and glibc")
    tmp = tmp_path_factory.mktemp("meter")
    (tmp / "meter.c").write_text(METER_C)
    lib = tmp / "meter.so"
    subprocess.run([gcc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(tmp / "meter.c")],
                   check=True, capture_output=True)
    ctypes.CDLL(str(lib))  # it loads
    return lib


_METERED: dict = {}


def metered(lib, variant):
    """{name: (peak, outputs)} and the SIMD level of one metered subprocess."""
    if variant not in _METERED:
        env_extra, threads = VARIANTS[variant]
        env = dict(os.environ, LD_PRELOAD=str(lib), **env_extra)
        src = os.path.join(os.path.dirname(os.path.abspath(olc.__file__)), os.pardir)
        env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src), env.get("PYTHONPATH", "")])
        names = [] if variant == "default" else [
            n for n in IDS if n.startswith(VARIANT_PREFIXES)]
        result = subprocess.run([sys.executable, "-c", METER_RUN, os.path.abspath(__file__),
                                 str(threads)] + names,
                                env=env, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            pytest.fail(f"the metered run failed:\n{result.stderr[-3000:]}")
        _METERED[variant] = json.loads(result.stdout.strip().splitlines()[-1])
    return _METERED[variant]


METER_PARAMS = [("default", n) for n in IDS] + [
    (v, n) for v in ("scalar", "two_threads") for n in IDS if n.startswith(VARIANT_PREFIXES)]


@pytest.mark.parametrize(("variant", "name"), METER_PARAMS,
                         ids=[f"{v}-{n}" for v, n in METER_PARAMS])
def test_total_scratch_with_malloc_meter(meter_library, variant, name):
    """NumPy and C scratch together, as malloc hands them out (second run)."""
    run = metered(meter_library, variant)
    case = dict(CASES)[name]
    threads = VARIANTS[variant][1]
    e = estimate_of(case, threads, run["level"])
    peak, outputs = run["runs"][name]
    estimate = e.scratch(reused_pool=True)
    if threads == 1:
        _check_between("NumPy + C scratch of a run", estimate, peak - outputs, peak)
        return
    # Per-thread buffers are made by the first task a worker runs
    # (olc_slot_buffer): a worker the OS wakes late may make none, so the
    # measure lies below the estimate (a bound) and above the caller's share
    # of it: the shared buffers and one slot's, at least 1/threads of it
    # (the plan at two threads can cut smaller slot buffers than at one, so
    # the one-thread figure is no lower bound when the worker never ran).
    assert peak - outputs - tol(estimate) <= estimate, (estimate, peak, outputs)
    assert estimate // threads <= peak + tol(estimate), (estimate, peak)


# -- the model walk ------------------------------------------------------------------

def _decoder_block(K=256, N=512, bits=4, block=32, batch=2, seq=8):
    """x -> SimplifiedLayerNormalization -> MatMulNBits (constant weights)
    and MatMul -> Add -> y; the MatMulNBits output's shape is stated in
    value_info (until its schema lands)."""
    rng = _rng()
    nb = K // block
    inits = [numpy_helper.from_array(R(rng, K), "gamma"),
             numpy_helper.from_array(U8(rng, N, nb, block * bits // 8), "B"),
             numpy_helper.from_array(R(rng, N, nb), "scales"),
             numpy_helper.from_array(R(rng, K, N), "W")]
    nodes = [oh.make_node("SimplifiedLayerNormalization", ["x", "gamma"], ["n"], axis=-1,
                          epsilon=1e-6),
             oh.make_node("MatMulNBits", ["n", "B", "scales"], ["p"], domain=MS, K=K, N=N,
                          bits=bits, block_size=block, accuracy_level=4),
             oh.make_node("MatMul", ["n", "W"], ["q"]),
             oh.make_node("Add", ["p", "q"], ["y"])]
    graph = oh.make_graph(nodes, "block", [oh.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["batch", "seq", K])],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
        value_info=[oh.make_tensor_value_info("p", TensorProto.FLOAT, [batch, seq, N])])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(MS, 1)],
                         ir_version=10)


def test_model_walk():
    K, N = 256, 512
    model = _decoder_block(K, N)
    result = peak_memory(model, {"x": (2, 8, K)})
    M = 16
    x, n, p, q, y = M * K * 4, M * K * 4, M * N * 4, M * N * 4, M * N * 4
    assert [r.op_type for r in result.per_node] == [
        "SimplifiedLayerNormalization", "MatMulNBits", "MatMul", "Add"]
    sln, nbits, matmul, add = result.per_node
    # x is read by the norm only: freed after it; n lives until the MatMul
    assert (sln.live_bytes, sln.output_bytes, sln.scratch) == (x, n, 0)
    assert (nbits.live_bytes, nbits.output_bytes) == (n, p)
    assert (matmul.live_bytes, matmul.output_bytes, matmul.scratch) == (n + p, q, 0)
    assert (add.live_bytes, add.output_bytes) == (p + q, y)
    expected = peak_memory_bytes(model.graph.node[1], [(2, 8, K), (N, K // 32, 16), (N, K // 32)],
                                 [TensorProto.FLOAT, TensorProto.UINT8, TensorProto.FLOAT],
                                 {"B", "scales"})
    assert (nbits.scratch, nbits.prepared) == expected and expected.prepared > 0
    assert result.peak_bytes == max(r.peak_bytes for r in result.per_node)
    assert result.peak_bytes == max(x + n, n + p + expected.scratch, n + p + q, p + q + y)
    assert result.prepared_bytes == expected.prepared
    assert result.initializer_bytes == sum(
        numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    # the sequence form, and more threads never lower the peak
    assert peak_memory(model, [(2, 8, K)]) == result
    assert peak_memory(model, [(2, 8, K)], num_threads=4).peak_bytes >= result.peak_bytes


def test_model_walk_unknown_shape_names_the_node():
    model = _decoder_block(batch=1, seq=4)
    del model.graph.value_info[:]
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
        has_schema = True
    except Exception:
        has_schema = False
    if has_schema and onnx.defs.has("MatMulNBits", MS):
        # MatMulNBits' schema has landed: the walk goes through
        result = peak_memory(model, {"x": (1, 4, 256)})
        assert result.per_node[1].output_bytes == 4 * 512 * 4
    else:
        with pytest.raises(ValueError, match="MatMulNBits"):
            peak_memory(model, {"x": (1, 4, 256)})


def test_model_walk_matches_a_run_of_the_block():
    """The walk's per-node output bytes are the bytes a run produces."""
    model = _decoder_block()
    x = R(_rng(), 2, 8, 256)
    for name in ("n", "q"):  # intermediates as outputs too, to see them
        model.graph.output.append(oh.make_tensor_value_info(name, TensorProto.FLOAT, None))
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    values = dict(zip([o.name for o in model.graph.output], sess.run(None, {"x": x})))
    assert "onnx_light_cpu::MatMulNBits" in olc.used_kernel_names(sess)
    result = peak_memory(model, {"x": x.shape})
    produced = {"n": 0, "q": 2, "y": 3}
    for name, index in produced.items():
        assert result.per_node[index].output_bytes == values[name].nbytes
    assert result.per_node[1].output_bytes == values["y"].nbytes  # p has y's shape and type
    assert math.prod(x.shape) * 4 == result.per_node[0].live_bytes
