"""RotaryEmbedding, ai.onnx (23) against the onnx.reference built-in and
com.microsoft against ONNX Runtime and the naive NumPy module, at every
SIMD level and 1/2 threads; the core on strided views and in place; bad
input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ml_dtypes import bfloat16
from onnx.reference.ops.op_rotary_embedding import rotary_embedding as builtin_rotary

from onnx_light_cpu._kernels.engines import rotary as core
from onnx_light_cpu.reference.rotary_embedding import rotary_embedding as naive_rotary
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level, state

from differential import THREAD_COUNTS, check_node, layouts, node_model, run_ours

MS = "com.microsoft"
MS_KERNEL = "onnx_light_cpu::MicrosoftRotaryEmbedding"
DTYPES = (np.float32, np.float16, bfloat16)
# Our float32 arithmetic matches numpy's float32 formula bit for bit (no
# FMA); against ORT (which may contract) and against float16 built-ins that
# round every step, a small absolute floor covers cancellation in a*c - b*s.
LOOSE = {np.dtype(np.float32): (1e-5, 1e-5), np.dtype(np.float16): (2e-3, 4e-3),
         np.dtype(bfloat16): (1e-2, 3e-2)}
EXACT = (0.0, 0.0)


def _inputs(rng, dtype, b, s, n, h, rot, rank, positions, table=11):
    """x, cos, sin[, position_ids] for the ai.onnx operator."""
    x = rng.standard_normal((b, n, s, h) if rank == 4 else (b, s, n * h)).astype(np.float32)
    shape = (table, rot // 2) if positions else (b, s, rot // 2)
    angle = rng.uniform(-3, 3, shape)
    inputs = [x.astype(dtype), np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)]
    if positions:
        inputs.append(rng.integers(0, table, (b, s)).astype(np.int64))
    return inputs


def _f32_oracle(**attrs):
    """The built-in's formula in float32 on the (already rounded) inputs,
    rounded once to the input type: what we compute."""
    def oracle(x, cos, sin, pos=None):
        y = builtin_rotary(x.astype(np.float32), cos.astype(np.float32), sin.astype(np.float32),
                           pos, interleaved=attrs.get("interleaved"),
                           rotary_embedding_dim=attrs.get("rotary_embedding_dim"),
                           num_heads=attrs.get("num_heads"))
        return [y.astype(x.dtype)]
    return oracle


LAYOUTS = list(itertools.product((3, 4), (True, False), (0, 1)))
CASES = [  # b, s, n, h, rotary_embedding_dim (0: all)
    (1, 1, 1, 2, 0), (2, 3, 2, 8, 0), (2, 5, 3, 16, 0), (1, 7, 2, 34, 0), (3, 2, 2, 64, 0),
    (2, 3, 2, 80, 32), (1, 4, 3, 128, 64), (2, 3, 1, 20, 6), (1, 9, 2, 96, 96),
]


@pytest.mark.parametrize("b,s,n,h,rot", CASES)
@pytest.mark.parametrize("rank,positions,interleaved", LAYOUTS)
def test_onnx_float32_matches_builtin(b, s, n, h, rot, rank, positions, interleaved):
    rng = np.random.default_rng(b * 1000 + s * 100 + h)
    inputs = _inputs(rng, np.float32, b, s, n, h, rot or h, rank, positions)
    attrs = {"interleaved": interleaved}
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if rank == 3:
        attrs["num_heads"] = n
    check_node("RotaryEmbedding", inputs, tolerance=EXACT, **attrs)


@pytest.mark.parametrize("dtype", (np.float16, bfloat16))
@pytest.mark.parametrize("rank,positions,interleaved", LAYOUTS)
def test_onnx_narrow_types(dtype, rank, positions, interleaved):
    rng = np.random.default_rng(7)
    b, s, n, h, rot = 2, 5, 3, 40, 24
    inputs = _inputs(rng, dtype, b, s, n, h, rot, rank, positions)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot}
    if rank == 3:
        attrs["num_heads"] = n
    # Exactly the float32 formula rounded once ...
    check_node("RotaryEmbedding", inputs, oracle=_f32_oracle(**attrs), tolerance=EXACT, **attrs)
    # ... and close to the built-in, which rounds every step in the narrow type.
    check_node("RotaryEmbedding", inputs, tolerance=LOOSE[np.dtype(dtype)], **attrs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_onnx_threads_and_large_rows(dtype):
    """Enough rows for two threads; heads of 128 and 64 (partial)."""
    rng = np.random.default_rng(3)
    for interleaved, rot in ((0, 0), (1, 64)):
        inputs = _inputs(rng, dtype, 1, 96, 8, 128, rot or 128, 4, True, table=128)
        attrs = {"interleaved": interleaved}
        if rot:
            attrs["rotary_embedding_dim"] = rot
        check_node("RotaryEmbedding", inputs, oracle=_f32_oracle(**attrs), tolerance=EXACT, **attrs)


def test_onnx_empty_and_noncontiguous():
    rng = np.random.default_rng(5)
    for shape in ((0, 2, 3, 8), (2, 0, 3, 8), (2, 2, 0, 8)):
        x = np.zeros(shape, np.float32)
        cos = rng.standard_normal((4, 4)).astype(np.float32)
        pos = np.zeros((shape[0], shape[2]), np.int64)
        check_node("RotaryEmbedding", [x, cos, cos.copy(), pos])
    x = rng.standard_normal((2, 3, 4, 16)).astype(np.float32)[:, :, ::2, :]  # strided
    cos, sin = (rng.standard_normal((6, 8)).astype(np.float32) for _ in range(2))
    pos = rng.integers(0, 6, (2, 2)).astype(np.int64)
    check_node("RotaryEmbedding", [x, cos, sin, pos], tolerance=EXACT)


def test_onnx_opset_range():
    rng = np.random.default_rng(1)
    inputs = _inputs(rng, np.float32, 1, 2, 1, 8, 8, 4, True)
    check_node("RotaryEmbedding", inputs, opset=23, tolerance=EXACT)


# ---------------------------------------------------------------- core

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("interleaved", (0, 1))
def test_core_in_place_on_transposed_view(dtype, interleaved):
    """GroupQueryAttention passes (B, N, S, H) buffers as [B, S, N, H] views,
    rotated in place, with float32 caches for narrow types."""
    rng = np.random.default_rng(11)
    b, n, s, h, rot, table = 2, 3, 5, 24, 16, 9
    buf = rng.standard_normal((b, n, s, h)).astype(dtype)
    cos, sin = (rng.standard_normal((table, rot // 2)).astype(np.float32) for _ in range(2))
    pos = rng.integers(0, table, (b, s)).astype(np.int64)
    for level in range(state.max_level + 1):
        for threads in THREAD_COUNTS:
            for cache_type in (np.float32, dtype):
                c, sn = cos.astype(cache_type), sin.astype(cache_type)
                ref = builtin_rotary(buf.astype(np.float32), c.astype(np.float32),
                                     sn.astype(np.float32), pos, interleaved=interleaved,
                                     rotary_embedding_dim=rot).astype(dtype)
                work = buf.copy()
                view = work.transpose(0, 2, 1, 3)
                core.rotate(view, c, sn, pos, view, interleaved, rot, level, threads)
                assert work.tobytes() == ref.tobytes(), (level, threads, cache_type)


def test_core_rejects_contract_violations():
    x = np.zeros((1, 2, 1, 8), np.float32)
    cos = np.zeros((3, 4), np.float32)
    pos = np.zeros((1, 2), np.int64)
    with pytest.raises(ValueError, match="rotary_dim"):
        core.rotate(x, cos, cos, pos, x, False, 7, 0, 1)
    with pytest.raises(ValueError, match="contiguous"):
        half = cos[:, :2].copy()
        core.rotate(x[..., ::2], half, half, pos, x[..., ::2], False, 4, 0, 1)
    with pytest.raises(TypeError):
        core.rotate(x, cos, cos, pos, x.astype(np.float16), False, 8, 0, 1)
    with pytest.raises(ValueError, match="positions"):
        core.rotate(x, cos, cos, pos.astype(np.int32), x, False, 8, 0, 1)


# ------------------------------------------------------- com.microsoft

ort = pytest.importorskip("onnxruntime")


def _ms_inputs(rng, dtype, b, s, n, h, rot, rank, offset=None, table=16):
    x = rng.standard_normal((b, n, s, h) if rank == 4 else (b, s, n * h)).astype(np.float32)
    if offset is None:
        pos = rng.integers(0, table, (b, s)).astype(np.int64)
    else:
        pos = np.array([offset], np.int64)
    angle = rng.uniform(-3, 3, (table, rot // 2))
    return [x.astype(dtype), pos, np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)]


def run_ort(inputs, **attrs):
    model = node_model("RotaryEmbedding", inputs, domain=MS, opset=21, **attrs)
    out_type = model.graph.output[0].type.tensor_type
    out_type.elem_type = model.graph.input[0].type.tensor_type.elem_type
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {f"x{i}": a for i, a in enumerate(inputs)})


def _naive_oracle(**attrs):
    def oracle(*inputs):
        return [naive_rotary(*inputs, **attrs)]
    return oracle


MS_CASES = [  # b, s, n, h, rot (0: all), rank, num_heads attribute, offset
    (1, 1, 1, 2, 0, 4, 0, None), (2, 3, 2, 8, 0, 4, 0, None), (2, 5, 3, 16, 0, 3, 3, None),
    (2, 5, 3, 16, 0, 3, 0, None), (1, 7, 2, 34, 0, 3, 0, 4), (3, 2, 2, 64, 32, 4, 2, None),
    (1, 4, 3, 128, 64, 3, 3, 0), (2, 6, 4, 80, 0, 4, 4, 9), (1, 1, 8, 64, 0, 4, 0, 15),
]


@pytest.mark.parametrize("b,s,n,h,rot,rank,num_heads,offset", MS_CASES)
@pytest.mark.parametrize("interleaved", (0, 1))
@pytest.mark.parametrize("dtype", (np.float32, np.float16))
def test_microsoft_matches_ort(b, s, n, h, rot, rank, num_heads, offset, interleaved, dtype):
    rng = np.random.default_rng(b * 100 + h + s)
    inputs = _ms_inputs(rng, dtype, b, s, n, h, rot or h, rank, offset)
    attrs = {"interleaved": interleaved}
    if rot:
        attrs["rotary_embedding_dim"] = rot
    if num_heads:
        attrs["num_heads"] = num_heads
    check_node("RotaryEmbedding", inputs, oracle=lambda *a: run_ort(list(a), **attrs),
               kernel=MS_KERNEL, domain=MS, tolerance=LOOSE[np.dtype(dtype)], **attrs)
    check_node("RotaryEmbedding", inputs, oracle=_naive_oracle(**attrs),
               kernel=MS_KERNEL, domain=MS, tolerance=EXACT, **attrs)


@pytest.mark.parametrize("interleaved", (0, 1))
def test_microsoft_bfloat16_against_float32_oracle(interleaved):
    rng = np.random.default_rng(2)
    inputs = _ms_inputs(rng, bfloat16, 2, 5, 3, 48, 32, 4)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": 32, "num_heads": 3}

    def oracle(x, pos, cos, sin):
        wide = [x.astype(np.float32), pos, cos.astype(np.float32), sin.astype(np.float32)]
        return [run_ort(wide, **attrs)[0].astype(bfloat16)]

    check_node("RotaryEmbedding", inputs, oracle=oracle, kernel=MS_KERNEL, domain=MS,
               tolerance=LOOSE[np.dtype(bfloat16)], **attrs)
    check_node("RotaryEmbedding", inputs, oracle=_naive_oracle(**attrs), kernel=MS_KERNEL,
               domain=MS, tolerance=EXACT, **attrs)


def test_microsoft_large_two_threads():
    rng = np.random.default_rng(4)
    inputs = _ms_inputs(rng, np.float32, 1, 64, 16, 128, 128, 4, table=64)
    check_node("RotaryEmbedding", inputs, oracle=_naive_oracle(), kernel=MS_KERNEL, domain=MS,
               tolerance=EXACT)
    check_node("RotaryEmbedding", inputs, oracle=lambda *a: run_ort(list(a)), kernel=MS_KERNEL,
               domain=MS, tolerance=LOOSE[np.dtype(np.float32)])


# ------------------------------------------------------------ bad input

def _ours(inputs, domain="", **attrs):
    model = node_model("RotaryEmbedding", inputs, domain=domain, opset=None if not domain else 21,
                       **attrs)
    return run_ours(model, inputs)[0]


def _assert_untouched(inputs, before):
    for a, b in zip(inputs, before):
        assert a.tobytes() == b.tobytes()


BAD_ONNX = [
    # (description, mutate(inputs) -> inputs, attrs, error, match)
    ("position out of range", lambda i: i[:3] + [i[3] + 11], {}, ValueError,
     r"input 3 \('x3'\) has positions"),
    ("negative position", lambda i: i[:3] + [i[3] - 20], {}, ValueError, "outside"),
    ("cos too short", lambda i: [i[0], i[1][:, :2], i[2][:, :2], i[3]], {}, ValueError,
     r"input 1 \('x1'\) must have shape"),
    ("sin shape", lambda i: [i[0], i[1], i[2][:3], i[3]], {}, ValueError, r"input 2 \('x2'\)"),
    ("cache dtype", lambda i: [i[0], i[1].astype(np.float16), i[2], i[3]], {}, TypeError,
     r"input 1 \('x1'\) has element type float16, expected float32 like input 0"),
    ("x dtype", lambda i: [i[0].astype(np.float64)] + i[1:], {}, TypeError, "element type"),
    ("x rank", lambda i: [i[0][0, 0]] + i[1:], {}, ValueError, "expected one of ranks 3, 4"),
    ("positions shape", lambda i: i[:3] + [i[3][:, :1]], {}, ValueError,
     r"input 3 \('x3'\) must have shape"),
    ("positions dtype", lambda i: i[:3] + [i[3].astype(np.int32)], {}, TypeError, "int64"),
    ("odd rotary dim", lambda i: i, {"rotary_embedding_dim": 3}, ValueError, "rotary_embedding"),
    ("rotary dim > head", lambda i: i, {"rotary_embedding_dim": 10}, ValueError, "rotary_embed"),
    ("rank 3 without num_heads", lambda i: [i[0].transpose(0, 2, 1, 3).reshape(2, 3, 16)] + i[1:],
     {}, ValueError, "num_heads"),
    ("heads do not divide", lambda i: [i[0].transpose(0, 2, 1, 3).reshape(2, 3, 16)] + i[1:],
     {"num_heads": 3}, ValueError, "not a multiple"),
    ("direct caches shape", lambda i: i[:3], {}, ValueError, r"input 1 \('x1'\) must have shape"),
    # issue 12: flags out of range, missing inputs, an output that cannot fit
    ("interleaved 5", lambda i: i, {"interleaved": 5}, ValueError,
     "attribute interleaved must be 0 or 1, got 5"),
    ("negative num_heads", lambda i: i, {"num_heads": -2}, ValueError, "num_heads"),
]


@pytest.mark.parametrize("what,mutate,attrs,error,match", BAD_ONNX, ids=[c[0] for c in BAD_ONNX])
def test_onnx_bad_input(what, mutate, attrs, error, match):
    rng = np.random.default_rng(0)
    inputs = mutate(_inputs(rng, np.float32, 2, 3, 2, 8, 8, 4, True))
    before = [a.copy() for a in inputs]
    with pytest.raises(error, match=match) as info:
        _ours(inputs, **attrs)
    assert "RotaryEmbedding" in str(info.value)
    _assert_untouched(inputs, before)


BAD_MS = [
    ("offset past the caches", lambda i: [i[0], np.array([14], np.int64)] + i[2:], {}, ValueError,
     "offset"),
    ("negative offset", lambda i: [i[0], np.array([-1], np.int64)] + i[2:], {}, ValueError,
     "offset"),
    ("position out of range", lambda i: [i[0], np.full((2, 3), 16, np.int64)] + i[2:], {},
     ValueError, r"input 1 \('x1'\) has positions"),
    ("positions shape", lambda i: [i[0], np.zeros(2, np.int64)] + i[2:], {}, ValueError,
     r"input 1 \('x1'\) must have shape"),
    ("cache too short", lambda i: [i[0], i[1], i[2][:, :3], i[3][:, :3]], {}, ValueError,
     r"input 2 \('x2'\) must have shape"),
    ("rotary dim without heads", lambda i: i, {"rotary_embedding_dim": 4}, ValueError, "num_heads"),
    ("scale", lambda i: i, {"scale": 2.0}, NotImplementedError, "scale"),
    ("packed batching", lambda i: i, {"is_packed_batching": 1}, NotImplementedError, "packed"),
    ("hidden not multiple of head",
     lambda i: [i[0].transpose(0, 2, 1, 3).reshape(2, 3, 16)[..., :12]] + i[1:], {}, ValueError,
     "multiple"),
    ("cache dtype", lambda i: [i[0], i[1], i[2].astype(np.float16), i[3]], {}, TypeError,
     r"input 2 \('x2'\) has element type float16, expected float32 like input 0"),
    # issue 12
    ("interleaved 5", lambda i: i, {"interleaved": 5}, ValueError,
     "attribute interleaved must be 0 or 1, got 5"),
]


@pytest.mark.parametrize("what,mutate,attrs,error,match", BAD_MS, ids=[c[0] for c in BAD_MS])
def test_microsoft_bad_input(what, mutate, attrs, error, match):
    rng = np.random.default_rng(0)
    inputs = mutate(_ms_inputs(rng, np.float32, 2, 3, 2, 8, 8, 4))
    before = [a.copy() for a in inputs]
    with pytest.raises(error, match=match) as info:
        _ours(inputs, domain=MS, **attrs)
    assert "RotaryEmbedding" in str(info.value)
    _assert_untouched(inputs, before)


def test_every_level_is_exercised():
    assert available_simd_levels()[0] == "scalar"
    with capped_simd_level("scalar"):
        assert state.level == 0


@pytest.mark.parametrize("domain", ["", MS])
@pytest.mark.parametrize("rank", [3, 4])
def test_any_input_layout(domain, rank):
    """Issue 12: every memory layout of every input gives the bits of the
    C-contiguous one; inputs are never modified."""
    rng = np.random.default_rng(rank)
    if domain:
        inputs = _ms_inputs(rng, np.float32, 2, 3, 2, 8, 8, rank)
    else:
        inputs = _inputs(rng, np.float32, 2, 3, 2, 8, 8, rank, True)
    inputs = [np.ascontiguousarray(np.broadcast_to(a[:1], a.shape)) for a in inputs]
    attrs = {"num_heads": 2} if rank == 3 else {}
    kernel = MS_KERNEL if domain else "onnx_light_cpu::RotaryEmbedding"
    model = node_model("RotaryEmbedding", inputs, domain=domain, opset=21 if domain else None,
                       **attrs)
    want, names, _ = run_ours(model, inputs)
    assert kernel in names
    for i, a in enumerate(inputs):
        if a.ndim < 2:
            continue
        for what, x in layouts(a):
            before = x.copy()
            got, names, _ = run_ours(model, inputs[:i] + [x] + inputs[i + 1:])
            assert kernel in names
            assert got[0].tobytes() == want[0].tobytes(), f"input {i} {what}"
            assert x.tobytes() == before.tobytes(), f"input {i} {what}: input modified"


@pytest.mark.parametrize("domain", ["", MS])
def test_output_too_large_is_refused_before_allocating(domain):
    """Issue 12: a broadcast (stride 0) input of 1 TiB asked numpy for a
    1 TiB output (or, with overcommit, ran over it); the size is checked
    first: a MemoryError naming the operator, the output and the bytes."""
    x = np.broadcast_to(np.ones((1, 1, 1, 8), np.float32), (1 << 24, 1 << 10, 2, 8))
    cos = np.ones((4, 4), np.float32)
    pos = np.broadcast_to(np.zeros((1, 1), np.int64), (1 << 24, 2))
    inputs = [x, cos, cos, pos] if not domain else [x, pos, cos, cos]
    model = node_model("RotaryEmbedding", inputs, domain=domain, opset=21 if domain else None)
    with pytest.raises(MemoryError, match=r"RotaryEmbedding: output 0 .*needs 1099511627776 "
                                          r"bytes"):
        run_ours(model, inputs)
