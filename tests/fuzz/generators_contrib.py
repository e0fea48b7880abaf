"""Valid-case generators of the fused and contrib operators: SwiGLU,
rotary embeddings, attention (ai.onnx, MHA, GQA), linear attention, causal
convolution, skip normalizations, BiasGelu, CDist, MatMulNBits,
GatherBlockQuantized, MoE, QMoE, TreeEnsemble, and the com.microsoft
Range, Trilu, Unique, ExpandDims, Gelu, FastGelu, QuickGelu, FusedMatMul,
FusedGemm, QAttention, QEmbedLayerNormalization."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto
from onnx import helper as oh

from .cases import ML, MS, Case, Draw, elem_type, quantized_weights, randn, random_shape
from .generators import BF16, F16, F32, F64, I8, U8, _record_dtypes, _values, generator

MS_FLOATS = (F32, F16, BF16)


def _dt(d: Draw, record, among=MS_FLOATS):
    return d.choice(_record_dtypes(record, among))


def _twin(op, inputs, attrs, dtype, n_outputs=1, ort_ok=True, **kw) -> Case:
    """A com.microsoft case judged by the other policy's kernel (and by ONNX
    Runtime when the NAIVE one runs and ORT supports the configuration)."""
    kw.setdefault("tolerance", "loose")
    return Case(op, MS, 1, inputs, attrs, n_outputs=n_outputs, family="contrib",
                oracle="twin", ort_ok=ort_ok and dtype in (F32, F16),
                output_types=kw.pop("output_types", (elem_type(dtype),) * n_outputs), **kw)


# ------------------------------------------------------------------ elementwise-ish

@generator("ai.onnx", "SwiGLU")
def gen_swiglu(d: Draw, record) -> Case:
    dtype = _dt(d, record, (F32, F16, BF16, F64))
    rng = d.rng()
    shape = tuple(d.choice((0, 1, 2, 3, 7, 17, 33)) for _ in range(d.int(0, 3)))
    a, b = _values(d, rng, shape, dtype, 3.0), _values(d, rng, shape, dtype)
    attrs = {"alpha": d.choice([1.0, 0.5, 1.702, -2.0])} if d.chance(0.5) else {}
    return Case("SwiGLU", "", 28, [a, b], attrs, family="elementwise", widen=True,
                tolerance="elementwise")


@generator("com.microsoft", "BiasGelu")
def gen_bias_gelu(d: Draw, record) -> Case:
    dtype = _dt(d, record, (F32, F16, BF16, F64))
    rng = d.rng()
    H = d.choice((1, 3, 16, 17, 64))
    lead = tuple(d.choice((0, 1, 2, 5)) for _ in range(d.int(0, 2)))
    a = _values(d, rng, lead + (H,), dtype, 2.0)
    # Not ONNX Runtime: its float16 kernel overflows to NaN for large |x|.
    return _twin("BiasGelu", [a, randn(rng, (H,), dtype)], {}, dtype, tolerance="accumulate",
                 ort_ok=False)


@generator("com.microsoft", "CDist")
def gen_cdist(d: Draw, record) -> Case:
    dtype = _dt(d, record, (F32, F64))
    rng = d.rng()
    M, N, K = d.choice((0, 1, 3, 17)), d.choice((0, 1, 5, 33)), d.choice((1, 3, 16, 65))
    attrs = {"metric": d.choice(["euclidean", "sqeuclidean"])} if d.chance(0.8) else {}
    case = _twin("CDist", [randn(rng, (M, K), dtype), randn(rng, (N, K), dtype)], attrs, dtype)
    case.ort_ok = dtype in (F32, F64)
    return case


# ------------------------------------------------------------------ normalization

@generator("com.microsoft", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization")
def gen_skip_norm(d: Draw, record) -> Case:
    op = record.op_type
    dtype = _dt(d, record)
    rng = d.rng()
    H = d.choice((1, 4, 16, 17, 64))
    lead = d.choice([(2, 3), (1, 5), (3,), (0, 2), (2, 0)])
    x = _values(d, rng, lead + (H,), dtype)
    skip = randn(rng, d.choice([lead + (H,), lead + (H,), (1,) + lead[1:] + (H,)]
                               if len(lead) == 2 else [lead + (H,)]), dtype)
    inputs = [x, skip, randn(rng, (H,), dtype)]
    if op == "SkipLayerNormalization":
        inputs.append(randn(rng, (H,), dtype) if d.chance(0.6) else None)
    inputs.append(randn(rng, (H,), dtype) if d.chance(0.5) else None)
    while inputs[-1] is None:
        inputs.pop()
    n_out = d.choice([1, 1, 4])
    attrs = {"epsilon": d.choice([1e-5, 1e-3])} if d.chance(0.5) else {}
    t = elem_type(dtype)
    types = (t, TensorProto.FLOAT, TensorProto.FLOAT, t)[:n_out]
    return _twin(op, inputs, attrs, dtype, n_outputs=n_out, output_types=types,
                 compare=(0, 3) if n_out == 4 else (0,))


# ------------------------------------------------------------------ rotary

@generator("ai.onnx", "RotaryEmbedding")
def gen_rotary(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    b, s, n = d.choice((1, 2)), d.choice((1, 3, 5)), d.choice((1, 2, 3))
    h = d.choice((2, 8, 16, 34, 64))
    rot = d.choice([h, h, max(2, (h // 4) * 2)])
    rank = d.choice([3, 4])
    positions = d.chance(0.5)
    table = 11
    x = randn(rng, (b, n, s, h) if rank == 4 else (b, s, n * h), dtype)
    angle = rng.uniform(-3, 3, (table, rot // 2) if positions else (b, s, rot // 2))
    inputs = [x, np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)]
    if positions:
        inputs.append(rng.integers(0, table, (b, s)).astype(np.int64))
    attrs = {"interleaved": d.choice([0, 1])}
    if rot != h:
        attrs["rotary_embedding_dim"] = rot
    if rank == 3:
        attrs["num_heads"] = n
    return Case("RotaryEmbedding", "", 23, inputs, attrs, family="rotary", widen=True,
                tolerance="accumulate", structural=frozenset({3}))


@generator("com.microsoft", "RotaryEmbedding")
def gen_ms_rotary(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    b, s, n = d.choice((1, 2)), d.choice((1, 3, 5)), d.choice((1, 2, 3))
    h = d.choice((2, 8, 16, 34, 64))
    rot = d.choice([h, h, max(2, (h // 4) * 2)])
    rank = d.choice([3, 4])
    table = 16
    x = randn(rng, (b, n, s, h) if rank == 4 else (b, s, n * h), dtype)
    if d.chance(0.7):
        pos = rng.integers(0, table, (b, s)).astype(np.int64)
    else:
        pos = np.array([d.int(0, table - s)], np.int64)
    angle = rng.uniform(-3, 3, (table, rot // 2))
    attrs = {"interleaved": d.choice([0, 1])}
    if rot != h:
        attrs["rotary_embedding_dim"] = rot
        attrs["num_heads"] = n
    elif rank == 3 and d.chance(0.5):
        attrs["num_heads"] = n
    inputs = [x, pos, np.cos(angle).astype(dtype), np.sin(angle).astype(dtype)]
    return Case("RotaryEmbedding", MS, 1, inputs, attrs, family="rotary", oracle="ort",
                tolerance="accumulate", structural=frozenset({1}),
                output_types=(elem_type(dtype),))


# ------------------------------------------------------------------ causal conv

def _causal_conv_inputs(d: Draw, rng, dtype, channels_last=False):
    b, c, L, k = d.choice((1, 2)), d.choice((1, 3, 8, 17)), d.choice((0, 1, 4, 9)), \
        d.choice((1, 2, 4))
    dilation = d.choice([1, 1, 2])
    sl = (k - 1) * dilation
    if channels_last:
        x, st = randn(rng, (b, L, c), dtype), randn(rng, (b, sl, c), dtype)
    else:
        x, st = randn(rng, (b, c, L), dtype), randn(rng, (b, c, sl), dtype)
    w = (randn(rng, (c, 1, k), np.float32) * 0.5).astype(dtype)
    bias = randn(rng, (c,), dtype) if d.chance(0.6) else None
    past = st if d.chance(0.6) else None
    inputs = [x, w, bias, past]
    while inputs[-1] is None:
        inputs.pop()
    return inputs, dilation


@generator("ai.onnx", "CausalConvWithState")
def gen_causal_conv(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    inputs, dilation = _causal_conv_inputs(d, rng, dtype)
    attrs = {"activation": d.choice(["none", "silu", "swish"])}
    if dilation != 1 and len(inputs) > 3:
        # the ai.onnx operator has no dilation: a (k-1)-long state
        k = inputs[1].shape[-1]
        inputs[3] = np.ascontiguousarray(inputs[3][..., : k - 1])
    return Case("CausalConvWithState", "", 27, inputs, attrs, n_outputs=2, family="conv",
                widen=True, tolerance="accumulate")


@generator("com.microsoft", "CausalConvWithState")
def gen_ms_causal_conv(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    channels_last = d.chance(0.5)
    inputs, dilation = _causal_conv_inputs(d, rng, dtype, channels_last)
    attrs = {"activation": d.choice(["none", "silu"]), "dilation": dilation,
             "channels_last": int(channels_last)}
    return _twin("CausalConvWithState", inputs, attrs, dtype, n_outputs=2,
                 tolerance="accumulate", ort_ok=False)


# ------------------------------------------------------------------ attention

@generator("ai.onnx", "Attention")
def gen_attention(d: Draw, record) -> Case:
    dtype = _dt(d, record, (F32, F16, BF16, F64))
    rng = d.rng()
    opset = d.choice([23, 24])
    b, nkv = d.choice((1, 2)), d.choice((1, 2, 3))
    nq = nkv * d.choice((1, 2))
    s, L = d.choice((1, 2, 5)), d.choice((1, 3, 6))
    dk = d.choice((4, 8, 17))
    dv = d.choice((dk, 5))
    rank = d.choice([3, 4])
    past = d.choice([0, 0, 1, 4])
    t = past + L
    attrs = {}

    def tensor(*shape):
        return randn(rng, shape, dtype)

    if rank == 3:
        q, k, v = tensor(b, s, nq * dk), tensor(b, L, nkv * dk), tensor(b, L, nkv * dv)
        attrs.update(q_num_heads=nq, kv_num_heads=nkv)
    else:
        q, k, v = tensor(b, nq, s, dk), tensor(b, nkv, L, dk), tensor(b, nkv, L, dv)
    causal = d.chance(0.4)
    mask = None
    kind = d.choice(["none", "bool", "float"])
    if kind != "none":
        mrank = d.int(2, 4)
        full = (b, nq, s, t)[4 - mrank:]
        shape = [dim if d.chance(0.6) else 1 for dim in full[:-1]]
        if causal:  # oracle bug: the built-in sizes its causal mask from the mask's rows
            shape[-1] = s
        shape.append(t)
        mask = rng.random(shape) < 0.75 if kind == "bool" else \
            (rng.standard_normal(shape) * 2).astype(dtype)
    inputs = [q, k, v, mask]
    n_out = 1
    if past:
        inputs += [tensor(b, nkv, past, dk), tensor(b, nkv, past, dv)]
        n_out = 3
    if causal:
        attrs["is_causal"] = 1
    if d.chance(0.3):
        attrs["scale"] = d.float(0.05, 0.5)
    if d.chance(0.3):
        attrs["softcap"] = d.choice([1.0, 2.5])
    while inputs[-1] is None:
        inputs.pop()
    return Case("Attention", "", opset, inputs, attrs, n_outputs=n_out, family="attention",
                widen=True, tolerance="loose")


@generator("com.microsoft", "MultiHeadAttention")
def gen_mha(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    b, n, s = d.choice((1, 2)), d.choice((1, 2, 3)), d.choice((1, 3, 8))
    h = d.choice((8, 16, 24, 5))
    L = d.choice((1, 4, 9)) if d.chance(0.3) else s
    past = d.choice((0, 0, 1, 5))
    t = past + L
    q = randn(rng, (b, s, n * h), dtype)
    k, v = randn(rng, (b, L, n * h), dtype), randn(rng, (b, L, n * h), dtype)
    bias = randn(rng, (3 * n * h,), dtype) if d.chance(0.4) else None
    mask = None
    kind = d.choice(["none", "lengths", "2d"])
    if kind == "lengths":
        mask = rng.integers(1, t + 1, size=b).astype(np.int32)
    elif kind == "2d":
        mask = (np.arange(t)[None, :] < rng.integers(1, t + 1, size=(b, 1))).astype(np.int32)
    attention_bias = randn(rng, (d.choice((1, b)), d.choice((1, n)), s, t), dtype) \
        if d.chance(0.3) else None
    pk = randn(rng, (b, n, past, h), dtype) if past else None
    pv = randn(rng, (b, n, past, h), dtype) if past else None
    attrs = {"num_heads": n}
    if d.chance(0.3):
        attrs["unidirectional"] = 1
    if d.chance(0.3):
        attrs["scale"] = d.float(0.02, 0.3)
    inputs = [q, k, v, bias, mask, attention_bias, pk, pv]
    while inputs[-1] is None:
        inputs.pop()
    n_out = 3 if past else 1
    case = _twin("MultiHeadAttention", inputs, attrs, dtype, n_outputs=n_out,
                 structural=frozenset({4}), ort_ok=h % 8 == 0)
    return case


@generator("com.microsoft", "Attention")
def gen_microsoft_attention(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    b, n, s = d.choice((1, 2)), d.choice((1, 2, 3)), d.choice((1, 3, 8))
    h, hin = d.choice((8, 16, 5)), d.choice((4, 16, 24))
    past = d.choice((0, 0, 1, 5))
    t = past + s
    x = randn(rng, (b, s, hin), dtype)
    w = randn(rng, (hin, 3 * n * h), dtype)
    bias = randn(rng, (3 * n * h,), dtype) if d.chance(0.8) else None
    mask = None
    kind = d.choice(["none", "lengths", "ends_starts", "2d", "3d"])
    if kind == "lengths":
        mask = rng.integers(1, t + 1, size=b).astype(np.int32)
    elif kind == "ends_starts":
        mask = np.concatenate([rng.integers(t // 2 + 1, t + 1, size=b),
                               rng.integers(0, t // 2 + 1, size=b)]).astype(np.int32)
    elif kind in ("2d", "3d"):
        mask = rng.integers(0, 2, size=(b, t) if kind == "2d" else (b, s, t)).astype(np.int32)
        mask[..., 0] = 1
    attention_bias = randn(rng, (d.choice((1, b)), d.choice((1, n)), s, t), dtype) \
        if not past and d.chance(0.3) else None
    pst = randn(rng, (2, b, n, past, h), dtype) if past else None
    attrs = {"num_heads": n}
    if d.chance(0.3):
        attrs["unidirectional"] = 1
    if d.chance(0.3):
        attrs["scale"] = d.float(0.02, 0.3)
    inputs = [x, w, bias, mask, pst, attention_bias]
    while inputs[-1] is None:
        inputs.pop()
    return _twin("Attention", inputs, attrs, dtype, n_outputs=2 if past else 1,
                 structural=frozenset({3}))


@generator("com.microsoft", "EmbedLayerNormalization")
def gen_embed_layer_norm(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    b, s, h = d.choice((1, 2, 3)), d.choice((1, 4, 9)), d.choice((1, 8, 17, 64))
    vocab, positions = d.choice((1, 5, 50)), s + d.choice((0, 3))
    ids = rng.integers(0, vocab, (b, s)).astype(np.int32)
    segments = d.chance(0.7)
    sids = rng.integers(0, 2, (b, s)).astype(np.int32) if segments else None
    seg = randn(rng, (2, h), dtype) if segments else None
    mask = rng.integers(0, 2, (b, s)).astype(np.int32) if d.chance(0.6) else None
    pids = None
    if d.chance(0.3):
        pids = rng.integers(0, positions, (d.choice((1, b)), s)).astype(np.int32)
    inputs = [ids, sids, randn(rng, (vocab, h), dtype), randn(rng, (positions, h), dtype), seg,
              randn(rng, (h,), dtype), randn(rng, (h,), dtype), mask, pids]
    while inputs[-1] is None:
        inputs.pop()
    attrs = {"epsilon": d.choice([1e-12, 1e-5])} if d.chance(0.5) else {}
    return _twin("EmbedLayerNormalization", inputs, attrs, dtype, n_outputs=3,
                 structural=frozenset({0, 1, 7, 8}),
                 output_types=(elem_type(dtype), TensorProto.INT32, elem_type(dtype)))


@generator("com.microsoft", "QAttention")
def gen_qattention(d: Draw, record) -> Case:
    rng = d.rng()
    itype = U8 if d.chance(0.8) else I8  # int8 input: this package's extension
    wtype = d.choice([U8, I8])
    b, n, s = d.choice((1, 2)), d.choice((1, 2, 3)), d.choice((1, 3, 8))
    h, hin = d.choice((8, 16, 5)), d.choice((4, 16, 24))
    past = d.choice((0, 0, 1, 5))
    t, total = past + s, 3 * n * h

    def q(dtype, shape):
        info = np.iinfo(dtype)
        return rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)

    x, w = q(itype, (b, s, hin)), quantized_weights(rng, (hin, total), wtype, itype)
    scale = 1.0 / (100 * np.sqrt(hin))
    ws = (rng.uniform(0.5, 1.5, total) * scale).astype(F32) if d.chance(0.5) \
        else np.array(scale, F32)
    wz = q(wtype, d.choice([(), (1,), (total,)])) if d.chance(0.7) else None
    iz = q(itype, d.choice([(), (1,)])) if d.chance(0.7) else None
    mask = None
    kind = d.choice(["none", "lengths", "2d", "3d"])
    if kind == "lengths":
        mask = rng.integers(1, t + 1, size=b).astype(np.int32)
    elif kind in ("2d", "3d"):
        mask = rng.integers(0, 2, size=(b, t) if kind == "2d" else (b, s, t)).astype(np.int32)
        mask[..., 0] = 1
    pst = randn(rng, (2, b, n, past, h), F32) if past else None
    attrs = {"num_heads": n}
    if d.chance(0.3):
        attrs["unidirectional"] = 1
    inputs = [x, w, randn(rng, (total,), F32), np.array(d.float(0.005, 0.03), F32), ws, mask,
              iz, wz, pst]
    while inputs[-1] is None:
        inputs.pop()
    return _twin("QAttention", inputs, attrs, F32, n_outputs=2 if past else 1,
                 structural=frozenset({5}), ort_ok=itype == U8)


@generator("com.microsoft", "QEmbedLayerNormalization")
def gen_qembed_layer_norm(d: Draw, record) -> Case:
    rng = d.rng()
    qt = d.choice([U8, I8])
    info = np.iinfo(qt)
    b, s, h = d.choice((1, 2, 3)), d.choice((1, 4, 9)), d.choice((1, 8, 17, 64))
    vocab, positions = d.choice((1, 5, 50)), s + d.choice((0, 3))

    def q(*shape):
        return rng.integers(info.min, int(info.max) + 1, shape).astype(qt)

    def params():
        return np.array(d.float(0.005, 0.05), F32), q()

    segments = d.chance(0.7)
    mask = rng.integers(0, 2, (b, s)).astype(np.int32) if d.chance(0.6) else None
    (ws, wz), (ps, pz), (ss, sz), (gs, gz), (bs, bz) = (params() for _ in range(5))
    inputs = [rng.integers(0, vocab, (b, s)).astype(np.int32),
              rng.integers(0, 2, (b, s)).astype(np.int32) if segments else None,
              q(vocab, h), q(positions, h), q(2, h) if segments else None, q(h), q(h), mask,
              ws, ps, ss if segments else None, gs, bs,
              wz, pz, sz if segments else None, gz, bz]
    attrs = {"epsilon": d.choice([1e-12, 1e-5])} if d.chance(0.5) else {}
    return _twin("QEmbedLayerNormalization", inputs, attrs, F32, n_outputs=2,
                 structural=frozenset({0, 1, 7}),
                 output_types=(TensorProto.FLOAT, TensorProto.INT32))


@generator("com.microsoft", "GroupQueryAttention")
def gen_gqa(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    N, Nkv = d.choice([(1, 1), (2, 1), (4, 2), (6, 3)])
    H = d.choice((8, 16, 32, 5))
    B = d.choice((1, 2))
    mode = d.choice(["prefill", "decode"])
    if mode == "prefill":
        S, P = d.choice((1, 2, 7)), 0
    else:
        S, P = 1, d.choice((1, 3, 8))
    total = P + S
    f = {"query": randn(rng, (B, S, N * H), dtype),
         "key": randn(rng, (B, S, Nkv * H), dtype),
         "value": randn(rng, (B, S, Nkv * H), dtype)}
    inputs = [f["query"], f["key"], f["value"]]
    if P:
        inputs += [randn(rng, (B, Nkv, P, H), dtype), randn(rng, (B, Nkv, P, H), dtype)]
    else:
        inputs += [None, None]
    inputs += [np.full((B,), total - 1, np.int32), np.array(total, np.int32)]
    attrs = {"num_heads": N, "kv_num_heads": Nkv}
    if d.chance(0.3):
        attrs["local_window_size"] = d.choice([1, 3])
    if d.chance(0.2):
        attrs["softcap"] = d.choice([0.5, 5.0])
    if d.chance(0.2):
        attrs["scale"] = d.float(0.05, 0.3)
    return _twin("GroupQueryAttention", inputs, attrs, dtype, n_outputs=3,
                 structural=frozenset({5, 6}), ort_ok=H % 8 == 0)


# ------------------------------------------------------------------ linear attention

def _linear_attention_inputs(d: Draw, rng, dtype):
    B, T = d.choice((1, 2)), d.choice((1, 3, 6))
    Hkv = d.choice((1, 2))
    Hq = Hkv * d.choice((1, 2))
    dk, dv = d.choice((4, 8, 16)), d.choice((4, 12))
    rule = d.choice(["linear", "gated", "delta", "gated_delta"])
    key = rng.standard_normal((B, T, Hkv, dk))
    key /= np.maximum(np.linalg.norm(key, axis=-1, keepdims=True), 1e-6)
    inputs = [rng.standard_normal((B, T, Hq * dk)).astype(dtype),
              key.reshape(B, T, Hkv * dk).astype(dtype),
              rng.standard_normal((B, T, Hkv * dv)).astype(dtype)]
    inputs.append((rng.standard_normal((B, Hkv, dk, dv)) * 0.5).astype(dtype)
                  if d.chance(0.5) else None)
    inputs.append((-np.abs(rng.standard_normal((B, T, Hkv * dk if d.chance(0.5) else Hkv)))
                   * 0.2).astype(dtype) if rule in ("gated", "gated_delta") else None)
    inputs.append(rng.random((B, T, Hkv)).astype(dtype) if rule in ("delta", "gated_delta")
                  else None)
    while inputs[-1] is None:
        inputs.pop()
    attrs = {"update_rule": rule, "q_num_heads": Hq, "kv_num_heads": Hkv}
    if d.chance(0.3):
        attrs["scale"] = d.float(0.1, 1.0)
    return inputs, attrs


@generator("ai.onnx", "LinearAttention")
def gen_linear_attention(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    inputs, attrs = _linear_attention_inputs(d, rng, dtype)
    return Case("LinearAttention", "", 27, inputs, attrs, n_outputs=2, family="attention",
                widen=True, tolerance="loose")


@generator("com.microsoft", "LinearAttention")
def gen_ms_linear_attention(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    inputs, attrs = _linear_attention_inputs(d, rng, dtype)
    return _twin("LinearAttention", inputs, attrs, dtype, n_outputs=2, ort_ok=False)


# ------------------------------------------------------------------ quantized

def _pack(q: np.ndarray, bits: int) -> np.ndarray:
    """Codes along the last axis, low bits first."""
    per = 8 // bits
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per)).astype(np.uint8)
    out = np.zeros(q.shape[:-1], np.uint8)
    for i in range(per):
        out |= (q[..., i] << (bits * i)).astype(np.uint8)
    return out


@generator("com.microsoft", "MatMulNBits")
def gen_matmul_nbits(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    bits = d.choice([4, 4, 8, 2])
    block = d.choice([16, 32, 64, 128])
    K, N, M = d.choice((16, 32, 100, 256)), d.choice((1, 7, 16, 33)), d.choice((1, 2, 5))
    nb = -(-K // block)
    q = rng.integers(0, 1 << bits, (N, nb * block))
    B = _pack(q, bits).reshape(N, nb, block * bits // 8)
    scales = (rng.random((N, nb)) * 0.1 + 0.01).astype(dtype)
    a = randn(rng, (M, K) if d.chance(0.7) else (2, M, K), dtype)
    inputs = [a, B, scales.reshape(-1) if d.chance(0.3) else scales]
    if d.chance(0.4):
        zp = rng.integers(0, 1 << bits, (N, -(-nb * bits // 8) * 8 // bits))
        inputs.append(_pack(zp, bits))
    attrs = {"K": K, "N": N, "bits": bits, "block_size": block}
    if d.chance(0.3):
        attrs["accuracy_level"] = d.choice([0, 4])
    constant = frozenset({1, 2, 3}) if d.chance(0.5) else frozenset()
    return Case("MatMulNBits", MS, 1, inputs, attrs, family="quantized", oracle="ort",
                tolerance="loose", structural=frozenset({1, 3}), constant=constant,
                output_types=(elem_type(dtype),))


@generator("com.microsoft", "GatherBlockQuantized")
def gen_gather_block_quantized(d: Draw, record) -> Case:
    rng = d.rng()
    bits = d.choice([4, 8])
    block = d.choice([16, 32, 64, 128])
    V = d.choice((1, 3, 8))
    D = d.choice((16, 32, 64, 130)) // (8 // bits) * (8 // bits)
    lead = (V,) + ((d.choice((1, 2)),) if d.chance(0.2) else ())
    P = D * bits // 8
    data = rng.integers(0, 256, lead + (P,), dtype=np.uint8)
    G = -(-D // block)
    sdt = d.choice([F32, F16])
    scales = (rng.standard_normal(lead + (G,)) * 0.1).astype(sdt)
    idx = rng.integers(-V, V, d.choice([(), (1,), (3,), (2, 2)])).astype(d.choice([np.int32,
                                                                                  np.int64]))
    inputs = [data, idx, scales]
    if d.chance(0.4):
        per = 8 // bits
        inputs.append(rng.integers(0, 256, lead + (-(-G // per),), dtype=np.uint8))
    attrs = {"bits": bits, "block_size": block}
    return Case("GatherBlockQuantized", MS, 1, inputs, attrs, family="quantized", oracle="ort",
                tolerance="accumulate", structural=frozenset({0, 1, 3}),
                output_types=(elem_type(sdt),))


@generator("com.microsoft", "MoE")
def gen_moe(d: Draw, record) -> Case:
    dtype = _dt(d, record)
    rng = d.rng()
    T, H, inter, E = d.choice((1, 3, 7)), d.choice((8, 16, 33)), d.choice((8, 17)), \
        d.choice((2, 4))
    activation = d.choice(["relu", "gelu", "silu", "swiglu"])
    f = 2 if activation == "swiglu" else 1
    x = randn(rng, (T, H), dtype)
    router = randn(rng, (T, E), dtype)
    w1 = (rng.standard_normal((E, f * inter, H)) / np.sqrt(H)).astype(dtype)
    w2 = (rng.standard_normal((E, H, inter)) / np.sqrt(inter)).astype(dtype)
    b1 = (rng.standard_normal((E, f * inter)) * 0.5).astype(dtype) if d.chance(0.5) else None
    b2 = (rng.standard_normal((E, H)) * 0.5).astype(dtype) if d.chance(0.5) else None
    inputs = [x, router, w1, b1, w2, b2]
    while inputs[-1] is None:
        inputs.pop()
    attrs = {"k": d.int(1, E), "activation_type": activation,
             "normalize_routing_weights": d.choice([0, 1])}
    if activation == "swiglu":
        attrs["swiglu_fusion"] = 1
    return Case("MoE", MS, 1, inputs, attrs, family="moe", oracle="ort", tolerance="loose",
                output_types=(elem_type(dtype),))


@generator("com.microsoft", "QMoE")
def gen_qmoe(d: Draw, record) -> Case:
    from onnx_light_cpu.reference import moe as naive

    dtype = _dt(d, record)
    rng = d.rng()
    T, H, inter, E = d.choice((1, 3, 7)), d.choice((16, 32)), d.choice((16, 32)), d.choice((2, 4))
    bits = d.choice([4, 8])
    block = d.choice([0, 16, 32])
    activation = d.choice(["relu", "gelu", "silu", "swiglu"])
    f = 2 if activation == "swiglu" else 1

    def quantized(rows, columns):
        packed = columns // 2 if bits == 4 else columns
        w = rng.integers(0, 256, (E, rows, packed), dtype=np.uint8)
        shape = (E, rows) if block == 0 else (E, rows, -(-columns // block))
        unit = 1.0 / (np.sqrt(columns) * (4 if bits == 4 else 64))
        return w, (rng.uniform(0.5, 1.5, shape) * unit).astype(dtype)

    w1, s1 = quantized(f * inter, H)
    w2, s2 = quantized(H, inter)
    inputs = [randn(rng, (T, H), dtype), randn(rng, (T, E), dtype), w1, s1, None, w2, s2]
    k = d.int(1, E)
    attrs = {"expert_weight_bits": bits, "block_size": block, "activation_type": activation,
             "k": k, "normalize_routing_weights": 1}
    if activation == "swiglu":
        attrs["swiglu_fusion"] = 1

    def oracle(*a, attrs):
        padded = list(a) + [None] * (11 - len(a))
        wide = [x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype != np.uint8
                else x for x in padded]
        return [naive.qmoe(*wide, bits=bits, block_size=block, input_major=False, k=k,
                           normalize=True, activation=activation, alpha=1.0, beta=0.0,
                           limit=None)]

    return Case("QMoE", MS, 1, inputs, attrs, family="moe", oracle="numpy", tolerance="loose",
                numpy_oracle=oracle, structural=frozenset({2, 5}),
                output_types=(elem_type(dtype),))


# ------------------------------------------------------------------ contrib tensor operators

def _scalar_like(d: Draw, value, dtype) -> np.ndarray:
    """``value`` as a tensor of shape () or (1,) (both "scalar like")."""
    return np.array(value, dtype=dtype).reshape(d.choice([(), (), (1,)]))


@generator("com.microsoft", "Range")
def gen_ms_range(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    if dtype.kind == "f":
        start = float(rng.uniform(-50, 50))
        step = float(rng.uniform(0.05, 7)) * d.choice([1, -1])
        if d.chance(0.1):
            step = d.choice([np.inf, -np.inf, 1e-3])
    else:
        start = int(rng.integers(-50, 50))
        step = d.int(1, 9) * d.choice([1, -1])
    count = d.choice([0, 1, 2, 5, 17, 100, 300]) * d.choice([1, 1, 1, -1])
    limit = start + count * step if np.isfinite(step) else start + count
    if dtype.kind == "f" and d.chance(0.5):
        limit += float(rng.uniform(-1, 1)) * abs(step) if np.isfinite(step) else 0.0
    if dtype.kind != "f":
        info = np.iinfo(dtype)
        limit = int(np.clip(limit, info.min, info.max))
    inputs = [_scalar_like(d, start, dtype), _scalar_like(d, limit, dtype)]
    if d.chance(0.8) or step != 1:
        inputs.append(_scalar_like(d, step, dtype))
    return Case("Range", MS, 1, inputs, family="tensor", oracle="ort", tolerance="exact",
                structural=frozenset({0, 1, 2}), output_types=(elem_type(dtype),))


@generator("com.microsoft", "Trilu")
def gen_ms_trilu(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    shape = random_shape(d, rank=d.int(2, 4))
    inputs = [_values(d, rng, shape, dtype, specials=0.2)]
    if d.chance(0.6):
        k = d.int(-6, 6) if d.chance(0.9) else d.choice([2**62, -2**62, 1000, -1000])
        inputs.append(_scalar_like(d, k, np.int64))
    attrs = {}
    if d.chance(0.7):
        attrs["upper"] = d.choice([0, 1, 1, 0, 2, -1])
    return Case("Trilu", MS, 1, inputs, attrs, family="tensor", oracle="ort", tolerance="exact",
                structural=frozenset({1}), output_types=(elem_type(dtype),))


@generator("com.microsoft", "Unique")
def gen_ms_unique(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    n = d.choice((0, 1, 2, 7, 33, 255, 1000, 4099))
    if d.chance(0.7):  # repeats
        x = rng.integers(-d.int(1, 20), d.int(1, 20) + 1, n).astype(dtype)
    else:
        x = _values(d, rng, (n,), dtype, 100.0, specials=0.0)
    if n and d.chance(0.3):  # signed zeros, NaN, infinities among them
        x[rng.random(n) < 0.3] = rng.choice([0.0, -0.0, np.nan, np.inf, -np.inf])
    return Case("Unique", MS, 1, [x], n_outputs=3, family="tensor", oracle="ort",
                tolerance="exact",
                output_types=(elem_type(dtype), TensorProto.INT64, TensorProto.INT64))


@generator("com.microsoft", "ExpandDims")
def gen_ms_expand_dims(d: Draw, record) -> Case:
    dtype = d.choice(_record_dtypes(record))
    rng = d.rng()
    x = randn(rng, random_shape(d, max_rank=4), dtype, 10.0)
    rank = x.ndim
    axis = _scalar_like(d, d.int(-rank - 1, rank), np.int32)
    out = TensorProto.STRING if dtype.kind == "O" else elem_type(dtype)
    return Case("ExpandDims", MS, 1, [x, axis], family="tensor", oracle="ort",
                tolerance="exact", structural=frozenset({1}), output_types=(out,))


# ------------------------------------------------------------------ transformer activations

def _ms_activation(x, attrs, op, bias=None):
    """float64 Gelu (erf), FastGelu (tanh, + bias) and QuickGelu."""
    import math

    w = np.asarray(x).astype(np.float64)
    if bias is not None:
        w = w + np.asarray(bias).astype(np.float64)
    with np.errstate(all="ignore"):
        if op == "Gelu":
            y = w * 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(w / math.sqrt(2)))
        elif op == "FastGelu":
            y = 0.5 * w * (1 + np.tanh(math.sqrt(2 / math.pi) * (w + 0.044715 * w**3)))
        else:
            alpha = float(np.float32(attrs.get("alpha", 1.702)))
            y = w / (1 + np.exp(-alpha * w))
    return [y.astype(np.asarray(x).dtype)]


@generator("com.microsoft", "Gelu", "FastGelu", "QuickGelu")
def gen_ms_activation(d: Draw, record) -> Case:
    op = record.op_type
    dtype = _dt(d, record, (F32, F16, BF16, F64))
    rng = d.rng()
    shape = random_shape(d, rank=d.int(1 if op == "FastGelu" else 0, 4))
    inputs = [_values(d, rng, shape, dtype, 3.0, specials=0.2)]
    if op == "FastGelu" and d.chance(0.6):
        inputs.append(randn(rng, shape[-1:], dtype))
    attrs = {"alpha": d.choice([1.702, 1.0, -0.5, 0.0])} if op == "QuickGelu" and d.chance(0.5) \
        else {}
    return Case(op, MS, 1, inputs, attrs, family="elementwise", tolerance="accumulate",
                oracle="numpy", output_types=(elem_type(dtype),),
                numpy_oracle=lambda *a, attrs: _ms_activation(a[0], attrs, op, *a[1:]))


def _fused_matmul(a, b, attrs):
    """float64 FusedMatMul with ONNX Runtime's reading of transA with a 1-D B."""
    def order(rank, batch_trans, trans):
        axes = list(range(rank))
        if batch_trans:
            axes = axes[1:-1] + [0, rank - 1]
        if trans:
            axes[-1], axes[-2] = axes[-2], axes[-1]
        return axes

    wa, wb = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
    ta, tb = attrs.get("transA", 0), attrs.get("transB", 0)
    if ta and wa.ndim > 1 and wb.ndim == 1:
        wa = wa.reshape(wa.shape[:-2] + wa.shape[-2:][::-1])
        ta = 0
    if wa.ndim > 1:
        wa = wa.transpose(order(wa.ndim, attrs.get("transBatchA", 0), ta))
    if wb.ndim > 1:
        wb = wb.transpose(order(wb.ndim, attrs.get("transBatchB", 0), tb))
    y = attrs.get("alpha", 1.0) * np.matmul(wa, wb)
    return [np.asarray(y).astype(np.asarray(a).dtype)]


@generator("com.microsoft", "FusedMatMul")
def gen_fused_matmul(d: Draw, record) -> Case:
    dtype = _dt(d, record, (F32, F16, BF16, F64))
    rng = d.rng()
    M, K, N = d.choice((0, 1, 3, 17)), d.choice((0, 1, 5, 33)), d.choice((1, 4, 16, 19))
    rank = d.choice((1, 2, 3, 4))
    attrs = {k: d.choice([0, 1]) for k in ("transA", "transB") if d.chance(0.6)}
    if rank >= 3 and d.chance(0.5):
        attrs.update({k: d.choice([0, 1]) for k in ("transBatchA", "transBatchB")})
    if d.chance(0.5):
        attrs["alpha"] = d.choice([0.125, -1.0, 2.0])
    batch = tuple(d.choice((1, 2, 3)) for _ in range(max(rank - 2, 0)))
    if rank == 1:  # one 1-D operand, the other a matrix
        if d.chance(0.5):
            a_shape, b_shape = (K,), ((N, K) if attrs.get("transB") else (K, N))
        else:
            a_shape, b_shape = ((K, M) if attrs.get("transA") else (M, K)), (K,)
    else:
        def stored(read, batch_trans, trans):
            axes = list(range(len(read)))
            if batch_trans:
                axes = axes[1:-1] + [0, len(read) - 1]
            if trans:
                axes[-1], axes[-2] = axes[-2], axes[-1]
            shape = [0] * len(read)
            for position, axis in enumerate(axes):
                shape[axis] = read[position]
            return tuple(shape)
        a_batch = tuple(1 if d.chance(0.2) else s for s in batch)
        a_shape = stored(a_batch + (M, K), attrs.get("transBatchA"), attrs.get("transA"))
        b_shape = stored(batch + (K, N), attrs.get("transBatchB"), attrs.get("transB"))
    inputs = [randn(rng, a_shape, dtype), randn(rng, b_shape, dtype)]
    return Case("FusedMatMul", MS, 1, inputs, attrs, family="matmul", tolerance="accumulate",
                oracle="numpy", numpy_oracle=_fused_matmul, output_types=(elem_type(dtype),))


FUSED_GEMM_ACTIVATIONS = {
    "Relu": lambda y, a, b, g: np.maximum(y, 0), "Tanh": lambda y, a, b, g: np.tanh(y),
    "Sigmoid": lambda y, a, b, g: 1 / (1 + np.exp(-y)),
    "LeakyRelu": lambda y, a, b, g: np.where(y >= 0, y, a * y),
    "HardSigmoid": lambda y, a, b, g: np.clip(a * y + b, 0, 1),
    "Elu": lambda y, a, b, g: np.where(y >= 0, y, a * (np.exp(y) - 1)),
    "Selu": lambda y, a, b, g: np.where(y > 0, g * y, g * (a * np.exp(y) - a)),
    "ThresholdedRelu": lambda y, a, b, g: np.where(y > a, y, 0),
    "Softplus": lambda y, a, b, g: np.logaddexp(0, y),
    "Softsign": lambda y, a, b, g: y / (1 + np.abs(y)),
    "ScaledTanh": lambda y, a, b, g: a * np.tanh(b * y),
    "ParametricSoftplus": lambda y, a, b, g: a * np.logaddexp(0, b * y),
    "Celu": lambda y, a, b, g: np.where(y >= 0, y, a * (np.exp(y / a) - 1)),
}


def _fused_gemm(a, b, c=None, *, attrs):
    wa, wb = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
    wa = wa.T if attrs.get("transA") else wa
    wb = wb.T if attrs.get("transB") else wb
    y = np.float32(attrs.get("alpha", 1.0)) * (wa @ wb)
    if c is not None and attrs.get("beta", 1.0) != 0:  # beta 0 ignores C (NaN too), as ORT
        y = y + np.float32(attrs.get("beta", 1.0)) * np.asarray(c).astype(np.float64)
    params = [float(np.float32(attrs.get(f"activation_{k}", 0.0)))
              for k in ("alpha", "beta", "gamma")]
    with np.errstate(all="ignore"):
        y = FUSED_GEMM_ACTIVATIONS[attrs["activation"]](y, *params)
    return [np.asarray(y).astype(np.asarray(a).dtype)]


@generator("com.microsoft", "FusedGemm")
def gen_fused_gemm(d: Draw, record) -> Case:
    dtype = _dt(d, record, (F32, F16, BF16))
    rng = d.rng()
    M, K, N = d.choice((0, 1, 3, 17)), d.choice((0, 1, 5, 33)), d.choice((1, 4, 16, 19))
    ta, tb = d.choice([0, 1]), d.choice([0, 1])
    activation = d.choice(sorted(FUSED_GEMM_ACTIVATIONS))
    attrs = {"activation": activation, "transA": ta, "transB": tb,
             "activation_alpha": d.choice([0.2, 1.5]), "activation_beta": d.choice([0.5, 1.0]),
             "activation_gamma": d.choice([1.05, 2.0])}
    if d.chance(0.5):
        attrs.update(alpha=d.choice([0.5, -1.0]), beta=d.choice([0.0, 2.0]))
    inputs = [randn(rng, (K, M) if ta else (M, K), dtype),
              randn(rng, (N, K) if tb else (K, N), dtype)]
    if d.chance(0.6):
        inputs.append(randn(rng, d.choice([(N,), (M, 1), (1, 1), (M, N), ()]), dtype))
    return Case("FusedGemm", MS, 1, inputs, attrs, family="matmul", tolerance="accumulate",
                oracle="numpy", numpy_oracle=_fused_gemm, output_types=(elem_type(dtype),))


# ------------------------------------------------------------------ trees

@generator("ai.onnx.ml", "TreeEnsemble")
def gen_tree_ensemble(d: Draw, record) -> Case:
    dtype = d.choice([F32, F64, F16])
    rng = d.rng()
    n_features, n_targets = d.choice((1, 3, 4)), d.choice((1, 2, 3))
    grid = np.arange(-4, 5) / 2.0
    fields = {k: [] for k in ("modes", "featureids", "splits", "truenodeids", "trueleafs",
                              "falsenodeids", "falseleafs")}
    leaf_w, leaf_t, roots = [], [], []

    def leaf():
        leaf_w.append(float(rng.normal()) * 4)
        leaf_t.append(int(rng.integers(n_targets)))
        return len(leaf_w) - 1

    def build(depth):
        i = len(fields["modes"])
        for key, value in (("modes", int(rng.integers(0, 6))),
                           ("featureids", int(rng.integers(n_features))),
                           ("splits", float(rng.choice(grid))), ("truenodeids", -1),
                           ("trueleafs", 0), ("falsenodeids", -1), ("falseleafs", 0)):
            fields[key].append(value)
        for side in ("true", "false"):
            if depth + 1 >= 3 or rng.random() < 0.3:
                fields[f"{side}nodeids"][i], fields[f"{side}leafs"][i] = leaf(), 1
            else:
                fields[f"{side}nodeids"][i] = build(depth + 1)
        return i

    for _ in range(d.int(1, 4)):
        roots.append(build(0))
    adt = dtype  # the thresholds and weights have X's type

    def tensor(name, values, dt):
        return onnx.numpy_helper.from_array(np.asarray(values, dtype=dt), name)

    attrs = dict(
        n_targets=n_targets, tree_roots=roots,
        nodes_modes=oh.make_tensor("nodes_modes", TensorProto.UINT8, (len(fields["modes"]),),
                                   fields["modes"]),
        nodes_featureids=fields["featureids"],
        nodes_splits=tensor("nodes_splits", fields["splits"], adt),
        nodes_truenodeids=fields["truenodeids"], nodes_trueleafs=fields["trueleafs"],
        nodes_falsenodeids=fields["falsenodeids"], nodes_falseleafs=fields["falseleafs"],
        leaf_targetids=leaf_t, leaf_weights=tensor("leaf_weights", leaf_w, adt),
        aggregate_function=d.int(0, 3), post_transform=d.choice([0, 0, 1, 2]))
    x = rng.choice(grid, size=(d.choice((0, 1, 5, 17)), n_features))
    x += np.where(rng.random(x.shape) < 0.3, rng.normal(size=x.shape) * 2, 0)
    case = Case("TreeEnsemble", ML, 5, [x.astype(dtype)], attrs, family="tree",
                tolerance="accumulate" if dtype != F16 else "loose", oracle="numpy")
    case.numpy_oracle = lambda x, attrs: [_tree_oracle(case, x, attrs)]
    return case


def _tree_oracle(case: Case, x, attrs):
    """Oracle bug: onnx.reference applies TreeEnsemble's post transforms
    wrongly; its raw scores with the transform applied here, in float64."""
    from onnx.reference import ReferenceEvaluator

    from .cases import build_model

    raw = case.clone()
    raw.attrs = dict(attrs, post_transform=0)
    raw.oracle = "builtin"
    v = ReferenceEvaluator(build_model(raw)).run(None, {"in0": x})[0]
    post = attrs.get("post_transform", 0)
    w = v.astype(np.float64)
    if post == 1:  # SOFTMAX
        e = np.exp(w - w.max(axis=1, keepdims=True))
        w = e / e.sum(axis=1, keepdims=True)
    elif post == 2:  # LOGISTIC
        e = 1.0 / (1.0 + np.exp(-np.abs(w)))
        w = np.where(w < 0, 1.0 - e, e)
    return w.astype(v.dtype)


# ------------------------------------------------------------------ convolution

@generator("com.microsoft", "FusedConv")
def gen_fused_conv(d: Draw, record) -> Case:
    rng = d.rng()
    n = d.int(1, 3)
    group = d.choice((1, 1, 2))
    cg, mg = d.choice((1, 2, 3)), d.choice((1, 2, 4))
    kernel = tuple(d.choice((1, 2, 3)) for _ in range(n))
    strides = [d.choice((1, 2)) for _ in range(n)]
    pads = [d.choice((0, 1)) for _ in range(2 * n)]
    spatial = tuple(max(d.choice((1, 3, 5, 8)), kernel[i] - pads[i] - pads[i + n])
                    for i in range(n))
    activation = d.choice(("", "Relu", "Tanh", "Sigmoid", "LeakyRelu", "Clip", "HardSigmoid"))
    params = {"LeakyRelu": [0.1], "Clip": [-0.5, 0.7], "HardSigmoid": [0.2, 0.5]}
    attrs = {"group": group, "strides": strides, "pads": pads}
    if activation:
        attrs["activation"] = activation
    if activation in params:
        attrs["activation_params"] = params[activation]
    x = _values(d, rng, (d.choice((1, 2)), group * cg) + spatial, F32, 1.0, 0.0)
    w = randn(rng, (group * mg, cg) + kernel, F32)
    out = tuple((spatial[i] + pads[i] + pads[i + n] - kernel[i]) // strides[i] + 1
                for i in range(n))
    inputs = [x, w, randn(rng, (group * mg,), F32)]
    if d.chance(0.4):
        inputs.append(randn(rng, (x.shape[0], group * mg) + out, F32))
    return Case("FusedConv", MS, 1, inputs, attrs, family="conv", oracle="ort",
                tolerance="accumulate", output_types=(elem_type(F32),))
