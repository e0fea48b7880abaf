"""Schemas of the com.microsoft attention family (ONNX Runtime 1.32 contract).

Attention, MultiHeadAttention, GroupQueryAttention, QAttention,
RotaryEmbedding, LinearAttention and CausalConvWithState: names, order and
optionality of the inputs and outputs, attributes and their defaults follow
ONNX Runtime's own schemas; the docs describe what this package's kernels
(``onnx_light_cpu/ops``) compute.  Every inference function sets the output
element types and propagates whatever the input shapes decide, keeping
symbolic dimensions: a sum of a past and a new length is the dim_param
"P+L", a product of heads and head size is "N*H"; a length only a runtime
value decides is left unknown.
"""

from __future__ import annotations

from ._infer import add, attr, check_rank, elem_type, merge_dim, product, set_output, shape
from ._infer import input_type as _input_type
from ._record import (
    FLOAT_TYPES,
    MS_DOMAIN,
    LightAttribute,
    LightOpSchema,
    LightParameter,
    LightTypeConstraint,
)

P = LightParameter
A = LightAttribute
C = LightTypeConstraint

INT32 = ("tensor(int32)",)
QUANTIZED = ("tensor(int8)", "tensor(uint8)")


# -- private helpers (shape checks naming the operator and the input) -------


def _dims(op: str, ctx, i: int, name: str, ranks) -> list | None:
    """Input ``i``'s dims after checking its rank (None: absent or rank unknown)."""
    dims = shape(ctx, i)
    check_rank(op, name, dims, ranks)
    return dims


def _same(op: str, name: str, dims: list | None, k: int, want, meaning: str):
    """dims[k] merged with ``want`` (ValueError when both are static and differ)."""
    if dims is None:
        return want
    return merge_dim(op, f"input '{name}' dimension {k} ({meaning})", dims[k], want)


def _split(op: str, name: str, dim, parts, meaning: str):
    """dim / parts when dim is static (ValueError when it does not divide),
    None otherwise."""
    if not isinstance(dim, int) or not isinstance(parts, int) or parts <= 0:
        return None
    if dim % parts:
        raise ValueError(f"{op}: input '{name}' has {meaning} {dim}, not a multiple of {parts}")
    return dim // parts


def _constant_int(ctx, i: int) -> int | None:
    """The single integer a constant input ``i`` holds (an initializer), or None."""
    if i >= ctx.get_num_inputs() or not ctx.has_input(i):
        return None
    data = ctx.get_input_data(i)
    if data is None:
        return None
    from onnx import numpy_helper

    values = numpy_helper.to_array(data).reshape(-1)
    return int(values[0]) if values.size == 1 else None


def _propagated_int(ctx, i: int) -> int | None:
    """The single static integer data propagation found for input ``i``
    (``infer_shapes(..., data_prop=True)``: a value computed from shapes, such
    as the builders' Shape -> Gather -> Cast of the attention mask's width),
    or None."""
    if i >= ctx.get_num_inputs() or not ctx.has_input(i):
        return None
    get = getattr(ctx, "get_symbolic_input", None)
    data = get(i) if get is not None else None
    if data is None or len(data.dim) != 1 or not data.dim[0].HasField("dim_value"):
        return None
    return int(data.dim[0].dim_value)


def _max(a, b):
    """max(a, b) of two static dims, None otherwise."""
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return None


def _num_heads(op: str, ctx, name: str = "num_heads") -> int | None:
    n = attr(ctx, name)
    if n is not None and n <= 0:
        raise ValueError(f"{op}: attribute {name} must be positive, got {n}")
    return n


def _check_attention_bias(op: str, ctx, i: int, b, n, s, t) -> None:
    """attention_bias (B|1, N|1, S, T)."""
    dims = _dims(op, ctx, i, "attention_bias", (4,))
    if dims is None:
        return
    for k, full, meaning in ((0, b, "batch"), (1, n, "heads")):
        if isinstance(dims[k], int) and dims[k] != 1:
            _same(op, "attention_bias", dims, k, full, meaning + " or 1")
    _same(op, "attention_bias", dims, 2, s, "sequence")
    _same(op, "attention_bias", dims, 3, t, "total sequence")


# -- Attention and QAttention ----------------------------------------------

ATTENTION_DOC = """\
BERT's fused self-attention: one projection makes q, k and v, then
softmax(scale * Q K^T + masks + attention_bias) V per head.

input (B, S, Hin) times weights (Hin, Dq + Dk + Dv) plus bias gives q, k, v;
qkv_hidden_sizes splits the columns (Dq must equal Dk), three equal parts
without it.  scale 0 means 1/sqrt(head size).  output is (B, S, Dv).  past
(2, B, N, P, H) holds earlier keys and values, placed before the new ones;
present (2, B, N, P + S, H) holds all of them.

mask_index (int32) is key lengths (B,), ends then starts (2B,), (3B + 2,)
(its first B values read as lengths), or a 0/1 mask (B, P + S) or (B, S,
P + S); a masked key gets mask_filter_value added to its score.
unidirectional=1 lets query s see keys up to P + s only.  attention_bias
(B or 1, N or 1, S, P + S) is added to the scores, also together with past.
Computed in float32 for float16 and bfloat16 inputs (q, k, v rounded to the
input type first).  past_present_share_buffer=1, past_sequence_length,
do_rotary=1 and a 4-D mask are not run by this package.
"""

QATTENTION_DOC = """\
Attention on 8-bit operands, as onnxruntime.quantization produces it:

    q, k, v = float32((input - input_zero_point) @ (weight - weight_zero_point))
              * (weight_scale * input_scale) + bias

then Attention's masked softmax(scale * Q K^T) V per head.  input (B, S,
Hin) is uint8 (int8 too in this package), weight (Hin, 3D) uint8 or int8 in
three equal parts, bias (3D,) float32; input_scale and input_zero_point hold
one value, weight_scale and weight_zero_point one value or one per column.
output is (B, S, D) float32; past (2, B, N, P, H) and present (2, B, N, P + S,
H) as for Attention, and mask_index takes Attention's forms.
do_rotary=1 and past_present_share_buffer=1 are not run by this package.
"""


def _attention_like(op: str, ctx, *, x: int, w: int, bias: int, mask: int, past: int,
                    attention_bias: int | None, out_elem: int, sizes) -> None:
    """Shared inference of Attention and QAttention (input positions given)."""
    xd = _dims(op, ctx, x, "input", (3,))
    wd = _dims(op, ctx, w, "weight" if op == "QAttention" else "weights", (2,))
    wname = "weight" if op == "QAttention" else "weights"
    n = _num_heads(op, ctx)
    b = s = None
    if xd is not None:
        b, s = xd[0], xd[1]
        if wd is not None:
            _same(op, wname, wd, 0, xd[2], "input hidden size")
    total = wd[1] if wd is not None else None
    bd = _dims(op, ctx, bias, "bias", (1,))
    if bd is not None:
        total = _same(op, "bias", bd, 0, total, "Dq + Dk + Dv")
    if sizes:
        if len(sizes) != 3 or min(sizes) <= 0:
            raise ValueError(f"{op}: attribute qkv_hidden_sizes must hold 3 positive sizes, "
                             f"got {list(sizes)}")
        if sizes[0] != sizes[1]:
            raise ValueError(f"{op}: attribute qkv_hidden_sizes: the Q and K sizes must be "
                             f"equal, got {list(sizes)}")
        if isinstance(total, int) and total != sum(sizes):
            raise ValueError(f"{op}: input '{wname}' has {total} columns, expected the sum of "
                             f"qkv_hidden_sizes {list(sizes)} = {sum(sizes)}")
        dk, dv = sizes[1], sizes[2]
    else:
        dk = dv = _split(op, wname, total, 3, "a column count (Q, K and V)")
    h = _split(op, wname, dk, n, "a Q/K hidden size (num_heads heads)")
    _split(op, wname, dv, n, "a V hidden size (num_heads heads)")
    set_output(ctx, 0, out_elem, None if xd is None else [b, s, dv])

    pd = _dims(op, ctx, past, "past", (5,))
    p = None
    if pd is not None:
        _same(op, "past", pd, 0, 2, "key and value")
        b = _same(op, "past", pd, 1, b, "batch")
        _same(op, "past", pd, 2, n, "num_heads")
        h = _same(op, "past", pd, 4, h, "head size")
        p = pd[3]
    t = add(p, s) if pd is not None else s
    md = _dims(op, ctx, mask, "mask_index", (1, 2, 3, 4))
    if md is not None and len(md) in (2, 3):
        if not (len(md) == 2 and md[1] == 1):  # (B|1, 1) masks nothing
            _same(op, "mask_index", md, 0, b, "batch")
            # the mask's own name for P + S when it has one (as ORT's symbolic inference)
            t = _same(op, "mask_index", md, len(md) - 1, t, "total sequence")
        if len(md) == 3:
            _same(op, "mask_index", md, 1, s, "sequence")
    if attention_bias is not None:
        _check_attention_bias(op, ctx, attention_bias, b, n, s, t)
    if attr(ctx, "past_present_share_buffer", 0) and pd is not None:
        set_output(ctx, 1, out_elem, pd)  # the shared buffer keeps its length
    elif xd is not None or pd is not None:
        set_output(ctx, 1, out_elem, [2, b, n, t, h])
    else:
        set_output(ctx, 1, out_elem, None)


def _infer_attention(ctx) -> None:
    """output (B, S, Dv); present (2, B, N, P + S, H)."""
    _attention_like("Attention", ctx, x=0, w=1, bias=2, mask=3, past=4, attention_bias=5,
                    out_elem=elem_type(ctx, 0), sizes=tuple(attr(ctx, "qkv_hidden_sizes", ())))


def _infer_qattention(ctx) -> None:
    """output (B, S, D) of bias's type; present (2, B, N, P + S, H)."""
    op = "QAttention"
    for i, name in ((3, "input_scale"), (6, "input_zero_point")):
        dims = _dims(op, ctx, i, name, (0, 1))
        if dims:
            _same(op, name, dims, 0, 1, "one value")
    _attention_like(op, ctx, x=0, w=1, bias=2, mask=5, past=8, attention_bias=None,
                    out_elem=elem_type(ctx, 2), sizes=())


# The attributes Attention and QAttention share.
_ATTENTION_ATTRIBUTES = (
    A("do_rotary", "INT", "1: rotate q and k (not run by this package)."),
    A("mask_filter_value", "FLOAT", "Added to a masked key's score (-10000 when "
      "absent)."),
    A("num_heads", "INT", "Number of heads.", required=True),
    A("past_present_share_buffer", "INT", "1: past and present share one buffer "
      "(not run by this package)."),
    A("scale", "FLOAT", "Score scale; absent or 0: 1/sqrt(head size)."),
    A("unidirectional", "INT", "1: causal (query s sees keys up to P + s).", 0),
)


def _attention_schema() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "Attention", 1, ATTENTION_DOC,
        inputs=(
            P("input", "T", "Hidden states (B, S, Hin)."),
            P("weights", "T", "Projection weights (Hin, Dq + Dk + Dv)."),
            P("bias", "T", "Projection bias (Dq + Dk + Dv,).", optional=True),
            P("mask_index", "M", "Key lengths, ends and starts, or a 0/1 mask.", optional=True),
            P("past", "T", "Earlier keys and values (2, B, N, P, H).", optional=True),
            P("attention_bias", "T", "Added to the scores, (B|1, N|1, S, P + S).",
              optional=True),
            P("past_sequence_length", "M", "Buffer-sharing past length (not run here).",
              optional=True),
        ),
        outputs=(
            P("output", "T", "Attention output (B, S, Dv)."),
            P("present", "T", "Past and new keys and values (2, B, N, P + S, H).",
              optional=True),
        ),
        attributes=_ATTENTION_ATTRIBUTES + (
            A("qkv_hidden_sizes", "INTS", "Dq, Dk, Dv: the weights' column split."),
            A("rotary_embedding_dim", "INT", "Rotated channels with do_rotary."),
        ),
        type_constraints=(
            C("T", FLOAT_TYPES, "Float activations, weights and caches."),
            C("M", INT32, "Masks and lengths."),
        ),
        infer=_infer_attention,
    )


def _qattention_schema() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "QAttention", 1, QATTENTION_DOC,
        inputs=(
            P("input", "T1", "Quantized hidden states (B, S, Hin)."),
            P("weight", "T2", "Quantized projection weights (Hin, 3D)."),
            P("bias", "T3", "Projection bias (3D,)."),
            P("input_scale", "T3", "Scale of input (one value)."),
            P("weight_scale", "T3", "Scale of weight (one value or one per column)."),
            P("mask_index", "T4", "Attention's mask forms.", optional=True),
            P("input_zero_point", "T1", "Zero point of input (one value).", optional=True),
            P("weight_zero_point", "T2", "Zero point of weight (one value or one per column).",
              optional=True),
            P("past", "T3", "Earlier keys and values (2, B, N, P, H).", optional=True),
        ),
        outputs=(
            P("output", "T3", "Attention output (B, S, D)."),
            P("present", "T3", "Past and new keys and values (2, B, N, P + S, H).",
              optional=True),
        ),
        attributes=_ATTENTION_ATTRIBUTES,
        type_constraints=(
            C("T1", QUANTIZED, "Quantized input."),
            C("T2", QUANTIZED, "Quantized weight."),
            C("T3", ("tensor(float)", "tensor(float16)"),
              "Float scales, bias, caches and output (this package runs float)."),
            C("T4", INT32, "Masks."),
        ),
        infer=_infer_qattention,
    )


# -- MultiHeadAttention -------------------------------------------------------

MHA_DOC = """\
softmax(scale * Q K^T + attention_bias + key padding) V over num_heads heads.

query is (B, S, D) with D = N * H.  key and value are (B, L, D) and (B, L,
N * Hv), or already split into heads as (B, N, L, H) and (B, N, L, Hv)
(cross attention).  bias (2D + N * Hv,) is added to q, k and v (to q only
for rank-4 keys).  past_key/past_value (B, N, P, H|Hv) precede the new keys;
present_key/present_value (B, N, P + L, H|Hv) hold them all.  output is
(B, S, N * Hv): the value's width for rank-3 inputs.

key_padding_mask (int32) is key lengths (B,) or a mask (B, P + L) or (B, S,
P + L) where a value > 0 attends; a masked key gets mask_filter_value added
to its score.  unidirectional=1 (with S > 1) lets query s < S - 1 see keys
up to P + s.  The optional qk output is the (B, N, S, P + L) scores before
the softmax.  scale 0 means 1/sqrt(H).  float16 and bfloat16 are computed in
float32.  Packed QKV/KV (rank-5 query or key) and the buffer-sharing inputs
past_sequence_length and cache_indirection are not run by this package.
"""


def _infer_mha(ctx) -> None:
    """output (B, S, N*Hv); present_key/value (B, N, P+L, H|Hv); qk (B, N, S, P+L)."""
    op = "MultiHeadAttention"
    elem = elem_type(ctx, 0)
    n = _num_heads(op, ctx)
    qd = _dims(op, ctx, 0, "query", (3, 5))
    kd = _dims(op, ctx, 1, "key", (3, 4, 5))
    vd = _dims(op, ctx, 2, "value", (3, 4))
    b = s = width = h = hv = length = None
    if qd is not None and len(qd) == 3:
        b, s, width = qd
        h = _split(op, "query", width, n, "hidden size (num_heads heads)")
    elif qd is not None:  # packed QKV (B, S, N, 3, H)
        b, s = qd[0], qd[1]
        _same(op, "query", qd, 2, n, "num_heads")
        _same(op, "query", qd, 3, 3, "Q, K and V")
        h = hv = qd[4]
        length = s
    if kd is not None and len(kd) == 3:
        b = _same(op, "key", kd, 0, b, "batch")
        _same(op, "key", kd, 2, width, "hidden size")
        length = kd[1]
        if vd is not None:
            if len(vd) != 3:
                raise ValueError(f"{op}: input 'value' must have rank 3 like key, got {len(vd)}")
            _same(op, "value", vd, 0, b, "batch")
            length = _same(op, "value", vd, 1, length, "kv sequence")
            hv = _split(op, "value", vd[2], n, "hidden size (num_heads heads)")
            width_v = vd[2]
        else:
            width_v = None
    elif kd is not None and len(kd) == 4:
        b = _same(op, "key", kd, 0, b, "batch")
        _same(op, "key", kd, 1, n, "num_heads")
        h = _same(op, "key", kd, 3, h, "head size")
        length = kd[2]
        if vd is not None:
            if len(vd) != 4:
                raise ValueError(f"{op}: input 'value' must have rank 4 like key, got {len(vd)}")
            _same(op, "value", vd, 0, b, "batch")
            _same(op, "value", vd, 1, n, "num_heads")
            length = _same(op, "value", vd, 2, length, "kv sequence")
            hv = vd[3]
        width_v = None
    elif kd is not None:  # packed KV (B, L, N, 2, H)
        b = _same(op, "key", kd, 0, b, "batch")
        _same(op, "key", kd, 2, n, "num_heads")
        _same(op, "key", kd, 3, 2, "K and V")
        h = hv = _same(op, "key", kd, 4, h, "head size")
        length = kd[1]
        width_v = width
    else:
        width_v = None if vd is None or len(vd) != 3 else vd[2]
        if qd is not None and len(qd) == 3 and vd is None:
            width_v = width
            hv = h

    pk = _dims(op, ctx, 6, "past_key", (4,))
    pv = _dims(op, ctx, 7, "past_value", (4,))
    p = None
    for name, dims, d in (("past_key", pk, h), ("past_value", pv, hv)):
        if dims is None:
            continue
        b = _same(op, name, dims, 0, b, "batch")
        _same(op, name, dims, 1, n, "num_heads")
        p = _same(op, name, dims, 2, p, "past sequence")
        if name == "past_key":
            h = _same(op, name, dims, 3, d, "head size")
        else:
            hv = _same(op, name, dims, 3, d, "v head size")
    has_past = pk is not None or pv is not None or _input_type(ctx, 6) is not None
    total = add(p, length) if has_past else length

    if width_v is None and hv is not None:
        width_v = product(op, n, hv)
    if qd is not None:
        set_output(ctx, 0, elem, [b, s, width_v])
    else:
        set_output(ctx, 0, elem, None)

    bd = _dims(op, ctx, 3, "bias", (1,))
    if bd is not None and isinstance(width, int) and isinstance(hv, int) and n:
        _same(op, "bias", bd, 0, 2 * width + n * hv, "2 * hidden + num_heads * v head size")
    md = _dims(op, ctx, 4, "key_padding_mask", (1, 2, 3))
    if md is not None and len(md) > 1:
        _same(op, "key_padding_mask", md, 0, b, "batch")
        _same(op, "key_padding_mask", md, len(md) - 1, total, "total sequence")
        if len(md) == 3:
            _same(op, "key_padding_mask", md, 1, s, "sequence")
    _check_attention_bias(op, ctx, 5, b, n, s, total)

    shared = _input_type(ctx, 8) is not None  # buffer sharing: present is the past buffer
    for i, d, dims in ((1, h, pk), (2, hv, pv)):
        if shared and dims is not None:
            set_output(ctx, i, elem, dims)
        else:
            set_output(ctx, i, elem, [b, n, total, d])
    set_output(ctx, 3, elem, [b, n, s, total])


def _mha_schema() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "MultiHeadAttention", 1, MHA_DOC,
        inputs=(
            P("query", "T", "Queries (B, S, N*H)."),
            P("key", "T", "Keys (B, L, N*H) or (B, N, L, H).", optional=True),
            P("value", "T", "Values (B, L, N*Hv) or (B, N, L, Hv).", optional=True),
            P("bias", "T", "Projection bias of q, k and v (2 N*H + N*Hv,).", optional=True),
            P("key_padding_mask", "M", "Key lengths (B,) or a mask (B, [S,] P + L).",
              optional=True),
            P("attention_bias", "T", "Added to the scores, (B|1, N|1, S, P + L).",
              optional=True),
            P("past_key", "T", "Earlier keys (B, N, P, H).", optional=True),
            P("past_value", "T", "Earlier values (B, N, P, Hv).", optional=True),
            P("past_sequence_length", "M", "Buffer-sharing past length (not run here).",
              optional=True),
            P("cache_indirection", "M", "Beam-search cache indirection (not run here).",
              optional=True),
        ),
        outputs=(
            P("output", "T", "Attention output (B, S, N*Hv)."),
            P("present_key", "T", "Past and new keys (B, N, P + L, H).", optional=True),
            P("present_value", "T", "Past and new values (B, N, P + L, Hv).", optional=True),
            P("qk", "QK", "Scores before the softmax (B, N, S, P + L).", optional=True),
        ),
        attributes=(
            A("mask_filter_value", "FLOAT", "Added to a masked key's score (-10000 when "
              "absent)."),
            A("num_heads", "INT", "Number of heads.", required=True),
            A("scale", "FLOAT", "Score scale; absent or 0: 1/sqrt(H)."),
            A("unidirectional", "INT", "1: causal (query s sees keys up to P + s).", 0),
        ),
        type_constraints=(
            C("T", FLOAT_TYPES, "Float activations and caches."),
            C("QK", FLOAT_TYPES, "Type of the qk output (the query's in this package)."),
            C("M", INT32, "Masks and lengths."),
        ),
        infer=_infer_mha,
    )


# -- GroupQueryAttention -----------------------------------------------------

GQA_DOC = """\
Causal attention of num_heads query heads over kv_num_heads shared key/value
heads, with a key/value cache, as ONNX Runtime's CPU kernel runs it.

query (B, S, N*H), key and value (B, S, Nkv*H); or query packed as (B, S,
(N + 2 Nkv) H) with key and value absent.  past_key/past_value (B, Nkv, P,
H) are the cache; seqlens_k[b] + 1 is entry b's total length and
total_sequence_length (a scalar) the longest.  total_sequence_length equals
P + S (a growing cache) or is at most P (a static buffer): present_key and
present_value are (B, Nkv, max(P, total_sequence_length), H), the past rows
then the new ones; without a past they are (B, Nkv, S, H); with
sliding_window_cache=1 they keep past's length.  output is (B, S, N*H).

Query s of entry b sits after that entry's cached tokens and attends the
keys before it (causal=1), within local_window_size when positive, or every
key of its entry (causal=0).  Scores are scale q.k (scale 0: 1/sqrt(H)),
softcapped when softcap > 0, plus attention_bias (B|1, N|1, S, total); the
softmax counts head_sink (or a zero sink with smooth_softmax=1) in its
denominator.  do_rotary=1 rotates q and k with cos_cache/sin_cache (rows by
position_ids or by position).  output_qk (B, N, S, total) holds the scores
(qk_output=1) or the probabilities (2).  k_quant_type = v_quant_type
PER_TENSOR or PER_CHANNEL with kv_cache_bit_width 8 (int8 codes) or 4
(uint8, two codes a byte: (B, Nkv, P, H/2)) keeps a quantized cache scaled
by k_scale/v_scale.  query_seqlens gives each entry's count of new rows.
q_norm_weight/k_norm_weight are not run by this package.
"""


def _infer_gqa(ctx) -> None:
    """output (B, S, N*H); present (B, Nkv, L, H) with L = max(P, total), S
    without a past, P with a sliding-window cache; output_qk (B, N, S, total)."""
    op = "GroupQueryAttention"
    elem = elem_type(ctx, 0)
    n = _num_heads(op, ctx)
    nkv = _num_heads(op, ctx, "kv_num_heads")
    if isinstance(n, int) and isinstance(nkv, int) and n % nkv:
        raise ValueError(f"{op}: attribute num_heads ({n}) must be a multiple of kv_num_heads "
                         f"({nkv})")
    qd = _dims(op, ctx, 0, "query", (3,))
    packed = _input_type(ctx, 1) is None and _input_type(ctx, 2) is None
    b = s = h = width = None
    if qd is not None:
        b, s = qd[0], qd[1]
        if packed:
            parts = n + 2 * nkv if n is not None and nkv is not None else None
            h = _split(op, "query", qd[2], parts, "packed width (num_heads + 2 kv_num_heads "
                       "heads)")
            width = product(op, n, h) if h is not None else None
        else:
            width = qd[2]
            h = _split(op, "query", qd[2], n, "hidden size (num_heads heads)")
    if not packed:
        for i, name in ((1, "key"), (2, "value")):
            dims = _dims(op, ctx, i, name, (3,))
            if dims is None:
                continue
            b = _same(op, name, dims, 0, b, "batch")
            s = _same(op, name, dims, 1, s, "sequence")
            if isinstance(h, int) and isinstance(nkv, int):
                _same(op, name, dims, 2, nkv * h, "kv_num_heads * head size")
            elif h is None:
                h = _split(op, name, dims[2], nkv, "hidden size (kv_num_heads heads)")

    quant = attr(ctx, "k_quant_type", b"NONE")
    quant = quant.decode() if isinstance(quant, bytes) else quant
    bits = attr(ctx, "kv_cache_bit_width", 0) if quant != "NONE" else 0
    hc = h if bits != 4 else (h // 2 if isinstance(h, int) else None)
    pk = _dims(op, ctx, 3, "past_key", (4,))
    pv = _dims(op, ctx, 4, "past_value", (4,))
    p = None
    for name, dims in (("past_key", pk), ("past_value", pv)):
        if dims is None:
            continue
        b = _same(op, name, dims, 0, b, "batch")
        _same(op, name, dims, 1, nkv, "kv_num_heads")
        p = _same(op, name, dims, 2, p, "past sequence (cache capacity)")
        hc = _same(op, name, dims, 3, hc, "head size" if bits != 4 else "head size / 2")
    if h is None and isinstance(hc, int):
        h = hc * 2 if bits == 4 else hc
        if width is None and packed:
            width = product(op, n, h)
    has_past = _input_type(ctx, 3) is not None
    cache_elem = elem_type(ctx, 3) if has_past else elem
    sd = _dims(op, ctx, 5, "seqlens_k", (1,))
    b = _same(op, "seqlens_k", sd, 0, b, "batch")
    td = _dims(op, ctx, 6, "total_sequence_length", (0, 1))
    if td is not None and len(td) == 1:
        _same(op, "total_sequence_length", td, 0, 1, "one value")

    total = _constant_int(ctx, 6)
    if total is None:
        total = _propagated_int(ctx, 6)
    if not has_past:  # no cache: total_sequence_length must be the sequence length
        if isinstance(total, int) and isinstance(s, int) and total != s:
            raise ValueError(f"{op}: input 'total_sequence_length' is {total}, expected the "
                             f"sequence length {s} without past_key/past_value")
        total = s if total is None else total
    if attr(ctx, "sliding_window_cache", 0):
        length = p
    elif not has_past:
        length = s
    elif total is not None:
        length = _max(p, total)
    else:
        length = None  # P + S (a growing cache) or P (a static one): the value decides

    if attr(ctx, "do_rotary", 0):
        cos = _dims(op, ctx, 7, "cos_cache", (2,))
        sin = _dims(op, ctx, 8, "sin_cache", (2,))
        if cos is not None and sin is not None:
            _same(op, "sin_cache", sin, 0, cos[0], "cache length")
            _same(op, "sin_cache", sin, 1, cos[1], "rotary dim / 2")
        pos = _dims(op, ctx, 9, "position_ids", (2,))
        if pos is not None:
            _same(op, "position_ids", pos, 0, b, "batch")
            _same(op, "position_ids", pos, 1, s, "sequence")
    _check_attention_bias(op, ctx, 10, b, n, s, total)
    sink = _dims(op, ctx, 11, "head_sink", (1,))
    _same(op, "head_sink", sink, 0, n, "num_heads")
    qsl = _dims(op, ctx, 16, "query_seqlens", (1,))
    _same(op, "query_seqlens", qsl, 0, b, "batch")

    set_output(ctx, 0, elem, None if qd is None else [b, s, width])
    for i in (1, 2):
        set_output(ctx, i, cache_elem, [b, nkv, length, hc])
    set_output(ctx, 3, elem, [b, n, s, total])


def _gqa_schema() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "GroupQueryAttention", 1, GQA_DOC,
        inputs=(
            P("query", "T", "Queries (B, S, N*H), or packed QKV (B, S, (N + 2 Nkv) H)."),
            P("key", "T", "New keys (B, S, Nkv*H).", optional=True),
            P("value", "T", "New values (B, S, Nkv*H).", optional=True),
            P("past_key", "T_CACHE", "Key cache (B, Nkv, P, H).", optional=True),
            P("past_value", "T_CACHE", "Value cache (B, Nkv, P, H).", optional=True),
            P("seqlens_k", "M", "Total length of each entry minus one (B,)."),
            P("total_sequence_length", "M", "Longest total length (a scalar)."),
            P("cos_cache", "T", "Rotary cosines (positions, rotary dim / 2).", optional=True),
            P("sin_cache", "T", "Rotary sines (positions, rotary dim / 2).", optional=True),
            P("position_ids", "tensor(int64)", "Rotary positions (B, S).", optional=True),
            P("attention_bias", "T", "Added to the scores, (B|1, N|1, S, total).",
              optional=True),
            P("head_sink", "T", "Per-head sink logit in the softmax (N,).", optional=True),
            P("k_scale", "T_KV_SCALE", "Key cache dequantization scale.", optional=True),
            P("v_scale", "T_KV_SCALE", "Value cache dequantization scale.", optional=True),
            P("q_norm_weight", "T", "Query norm weight (not run here).", optional=True),
            P("k_norm_weight", "T", "Key norm weight (not run here).", optional=True),
            P("query_seqlens", "M", "New rows of each entry (B,).", optional=True),
        ),
        outputs=(
            P("output", "T", "Attention output (B, S, N*H)."),
            P("present_key", "T_CACHE", "Key cache after the step (B, Nkv, L, H).",
              optional=True),
            P("present_value", "T_CACHE", "Value cache after the step (B, Nkv, L, H).",
              optional=True),
            P("output_qk", "T", "Scores or probabilities (B, N, S, total).", optional=True),
        ),
        attributes=(
            A("causal", "INT", "1: query s sees the keys up to its own position.", 1),
            A("do_rotary", "INT", "1: rotate q and k with the cos/sin caches."),
            A("k_norm_epsilon", "FLOAT", "Key norm epsilon (norms not run here)."),
            A("k_quant_type", "STRING", "NONE, PER_TENSOR or PER_CHANNEL.", "NONE"),
            A("kv_cache_bit_width", "INT", "8 or 4 with a quantized cache, else 0."),
            A("kv_num_heads", "INT", "Number of key/value heads.", required=True),
            A("local_window_size", "INT", "Keys a query sees, itself included; -1: all.", -1),
            A("num_heads", "INT", "Number of query heads.", required=True),
            A("q_norm_epsilon", "FLOAT", "Query norm epsilon (norms not run here)."),
            A("qk_norm_epsilon", "FLOAT", "Norm epsilon (norms not run here).", 1e-6),
            A("qk_output", "INT", "0: no output_qk, 1: scores, 2: probabilities.", 0),
            A("rotary_interleaved", "INT", "1: rotate interleaved channel pairs."),
            A("scale", "FLOAT", "Score scale; absent or 0: 1/sqrt(H)."),
            A("sliding_window_cache", "INT", "1: window-sized cache buffers.", 0),
            A("smooth_softmax", "INT", "1: a zero sink in the softmax denominator.", -1),
            A("softcap", "FLOAT", "c > 0: scores become c tanh(x / c)."),
            A("v_quant_type", "STRING", "Must equal k_quant_type.", "NONE"),
        ),
        type_constraints=(
            C("T", FLOAT_TYPES, "Float activations."),
            C("T_CACHE", FLOAT_TYPES + ("tensor(uint8)", "tensor(int8)",
                                        "tensor(float8e4m3fn)"),
              "Caches: the query's type, or int8 / uint8 codes of a quantized cache."),
            C("T_KV_SCALE", ("tensor(float)",), "Cache scales."),
            C("M", INT32, "Lengths."),
        ),
        infer=_infer_gqa,
    )


# -- RotaryEmbedding -----------------------------------------------------------

ROTARY_DOC = """\
Rotates the first rotary_embedding_dim channels of every head (all of them
when 0 or absent) by the angles of cos_cache/sin_cache (positions, rotary
dim / 2) at each token's position; the output has the input's shape and type.

input is (B, S, N*H) or (B, N, S, H); a rank-3 input without num_heads takes
H = 2 * cos_cache.shape[1].  position_ids is (B, S) positions, or one value
(shape (1,)): an offset, token s at offset + s.  interleaved=1 rotates
channel pairs (2i, 2i + 1), else (i, i + rot/2).  scale other than 1 and
is_packed_batching=1 are not run by this package (ONNX Runtime's CPU kernel
ignores them).
"""


def _infer_rotary(ctx) -> None:
    """output: the input's shape and type."""
    op = "RotaryEmbedding"
    xd = _dims(op, ctx, 0, "input", (3, 4))
    pos = _dims(op, ctx, 1, "position_ids", (0, 1, 2))
    if pos is not None and len(pos) == 1:
        _same(op, "position_ids", pos, 0, 1, "one offset")
    cos = _dims(op, ctx, 2, "cos_cache", (2,))
    sin = _dims(op, ctx, 3, "sin_cache", (2,))
    if cos is not None and sin is not None:
        _same(op, "sin_cache", sin, 0, cos[0], "cache length")
        _same(op, "sin_cache", sin, 1, cos[1], "rotary dim / 2")
    if xd is not None:
        b, s = xd[0], xd[2] if len(xd) == 4 else xd[1]
        if pos is not None and len(pos) == 2:
            _same(op, "position_ids", pos, 0, b, "batch")
            _same(op, "position_ids", pos, 1, s, "sequence")
        n = attr(ctx, "num_heads", 0)
        if len(xd) == 3 and n > 0:
            _split(op, "input", xd[2], n, "hidden size (num_heads heads)")
        elif len(xd) == 3 and cos is not None and isinstance(cos[1], int):
            _split(op, "input", xd[2], 2 * cos[1], "hidden size (heads of 2 * "
                   "cos_cache.shape[1])")
    set_output(ctx, 0, elem_type(ctx, 0), xd)


def _rotary_schema() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "RotaryEmbedding", 1, ROTARY_DOC,
        inputs=(
            P("input", "T", "(B, S, N*H) or (B, N, S, H)."),
            P("position_ids", "M", "Positions (B, S) or an offset (1,)."),
            P("cos_cache", "T", "Cosines (positions, rotary dim / 2)."),
            P("sin_cache", "T", "Sines (positions, rotary dim / 2)."),
        ),
        outputs=(P("output", "T", "The rotated input, same shape."),),
        attributes=(
            A("interleaved", "INT", "1: rotate pairs (2i, 2i + 1); 0 (absent): (i, i + "
              "rot/2)."),
            A("is_packed_batching", "INT", "1: packed batches (not run by this package)."),
            A("num_heads", "INT", "Heads of a rank-3 input (needed with "
              "rotary_embedding_dim)."),
            A("rotary_embedding_dim", "INT", "Rotated channels per head; absent or 0: all."),
            A("scale", "FLOAT", "Position scale (only 1 is run by this package)."),
        ),
        type_constraints=(
            C("T", FLOAT_TYPES, "Float input and caches."),
            C("M", ("tensor(int64)",), "Positions."),
        ),
        infer=_infer_rotary,
    )


# -- LinearAttention -------------------------------------------------------------

LINEAR_DOC = """\
Recurrent linear attention with a (dk, dv) state per (batch, kv head),
updated token by token:

    gated rules:   S = exp(g) * S
    delta rules:   u = beta * (v - S^T k)          (u = v otherwise)
    every rule:    S = S + k u^T,   o = scale * S^T q   (scale 0: 1/sqrt(dk))

query (B, T, Hq*dk), key (B, T, Hk*dk) with Hk dividing kv_num_heads,
value (B, T, Hkv*dv); decay (B, T, Hkv*dk) or (B, T, Hkv) (log-space gate)
for the gated rules, beta (B, T, Hkv) or (B, T, 1) for the delta rules
(ignored by the others).  output is (B, T, max(Hq, Hkv)*dv) (Hq < Hkv:
inverse grouping, kv head h reads query head h / (Hkv / Hq)).  past_state
and present_state are (B, Hkv, dk, dv), or (W, B, Hkv, dk, dv) with
state_window W > 0 (slot s: the state after token T - W + s).  The
recurrence runs in float32; present_state has past_state's type (the
query's without one).  chunk_size is a scheduling hint, no effect here.
"""


def _infer_linear(ctx) -> None:
    """output (B, T, max(Hq, Hkv)*dv); present_state (B, Hkv, dk, dv) or (W, ...)."""
    op = "LinearAttention"
    hq = _num_heads(op, ctx, "q_num_heads")
    hkv = _num_heads(op, ctx, "kv_num_heads")
    if isinstance(hq, int) and isinstance(hkv, int) and hq % hkv and hkv % hq:
        raise ValueError(f"{op}: attributes q_num_heads ({hq}) and kv_num_heads ({hkv}) must "
                         "be multiples one of the other")
    w = attr(ctx, "state_window", 0)
    qd = _dims(op, ctx, 0, "query", (3,))
    kd = _dims(op, ctx, 1, "key", (3,))
    vd = _dims(op, ctx, 2, "value", (3,))
    b = t = dk = dv = None
    if qd is not None:
        b, t = qd[0], qd[1]
        dk = _split(op, "query", qd[2], hq, "hidden size (q_num_heads heads)")
    for name, dims in (("key", kd), ("value", vd)):
        if dims is not None:
            b = _same(op, name, dims, 0, b, "batch")
            t = _same(op, name, dims, 1, t, "sequence")
    if kd is not None and isinstance(dk, int) and isinstance(kd[2], int):
        heads = _split(op, "key", kd[2], dk, "hidden size (d_k per head)")
        if heads == 0 or (isinstance(hkv, int) and hkv % heads):
            raise ValueError(f"{op}: input 'key' has {heads} heads of {dk}, which does not "
                             f"divide kv_num_heads {hkv}")
    if vd is not None:
        dv = _split(op, "value", vd[2], hkv, "hidden size (kv_num_heads heads)")
    for i, name, ranks in ((4, "decay", (3,)), (5, "beta", (3,))):
        dims = _dims(op, ctx, i, name, ranks)
        if dims is not None:
            _same(op, name, dims, 0, b, "batch")
            _same(op, name, dims, 1, t, "sequence")
    state = [b, hkv, dk, dv] if not w else [w, b, hkv, dk, dv]
    sd = _dims(op, ctx, 3, "past_state", (len(state),))
    if sd is not None:
        state = [_same(op, "past_state", sd, k, d, m) for k, (d, m) in enumerate(zip(
            state, (["state_window"] if w else []) + ["batch", "kv_num_heads", "d_k", "d_v"]))]
        dv = state[-1]
    if vd is not None and isinstance(hq, int) and isinstance(hkv, int) and hq <= hkv:
        width = vd[2]
    elif isinstance(hq, int) and isinstance(hkv, int) and vd is not None and \
            not isinstance(vd[2], int):
        width = product(op, hq // hkv, vd[2])
    else:
        width = product(op, max(hq, hkv), dv) if hq is not None and hkv is not None else None
    set_output(ctx, 0, elem_type(ctx, 0), None if qd is None else [b, t, width])
    state_elem = elem_type(ctx, 3) if _input_type(ctx, 3) is not None else elem_type(ctx, 0)
    set_output(ctx, 1, state_elem, state)


def _linear_schema() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "LinearAttention", 1, LINEAR_DOC,
        inputs=(
            P("query", "T", "Queries (B, T, Hq*dk)."),
            P("key", "T", "Keys (B, T, Hk*dk)."),
            P("value", "T", "Values (B, T, Hkv*dv)."),
            P("past_state", "S", "State before the first token (B, Hkv, dk, dv).",
              optional=True),
            P("decay", "T", "Log-space gate (B, T, Hkv*dk) or (B, T, Hkv).", optional=True),
            P("beta", "T", "Delta-rule step (B, T, Hkv) or (B, T, 1).", optional=True),
        ),
        outputs=(
            P("output", "T", "Attention output (B, T, max(Hq, Hkv)*dv)."),
            P("present_state", "S", "State after the last token (B, Hkv, dk, dv)."),
        ),
        attributes=(
            A("chunk_size", "INT", "Chunk length hint (no effect in this package).", 64),
            A("kv_num_heads", "INT", "Number of key/value (state) heads.", required=True),
            A("q_num_heads", "INT", "Number of query heads.", required=True),
            A("scale", "FLOAT", "Output scale; 0: 1/sqrt(dk).", 0.0),
            A("state_window", "INT", "W > 0: the last W states, (W, B, Hkv, dk, dv).", 0),
            A("update_rule", "STRING", "linear, gated, delta or gated_delta.", "gated_delta"),
        ),
        type_constraints=(
            C("T", FLOAT_TYPES, "Float activations."),
            C("S", FLOAT_TYPES, "Float states."),
        ),
        infer=_infer_linear,
    )


# -- CausalConvWithState ---------------------------------------------------------

CONV_DOC = """\
Depthwise causal convolution over time whose left context is a carried
state.  With K taps and dilation d, SL = (K - 1) d and v = [past_state (zeros
when absent), input] along time, output t of channel c is

    act(bias[c] + sum_j weight[c, 0, j] * v[t + SL - (K - 1 - j) d])

and present_state holds v's last SL positions; act is none or SiLU ("silu",
"swish").  channels_last=0: input (B, C, L), states (B, C, SL);
channels_last=1: input (B, L, d_1..d_n) with C = d_1 * ... * d_n, states
(B, SL, d_1..d_n).  weight is (C, 1, K), bias (C,); output has the input's
shape and type.  float16 and bfloat16 are computed in float32.  ndim other
than 1, state_window > 0, the extended channel/state attributes
(state_length, input_channels, input_channel_offset, state_channels_last,
state_update_capacity) and the state_update output are not run by this
package (CUDA only in ONNX Runtime).
"""

_CONV_EXTENDED = {"state_length": 0, "input_channels": 0, "input_channel_offset": 0,
                  "state_channels_last": -1, "state_update_capacity": 0, "ndim": 1,
                  "state_window": 0}


def _infer_conv(ctx) -> None:
    """output: the input's shape; present_state (B, C, (K-1) d) or (B, (K-1) d, d_1..d_n)."""
    op = "CausalConvWithState"
    elem = elem_type(ctx, 0)
    last = attr(ctx, "channels_last", 0)
    d = attr(ctx, "dilation", 1)
    if d < 1:
        raise ValueError(f"{op}: attribute dilation must be >= 1, got {d}")
    xd = shape(ctx, 0)
    if xd is not None and len(xd) < 3:
        raise ValueError(f"{op}: input 'input' must have rank 3 or more, got {len(xd)}")
    extended = any(attr(ctx, k, v) != v for k, v in _CONV_EXTENDED.items())
    if xd is not None and not last and not extended:
        check_rank(op, "input", xd, (3,))
    wd = _dims(op, ctx, 1, "weight", (3,))
    set_output(ctx, 0, elem, xd)
    past = shape(ctx, 3)
    set_output(ctx, 2, elem, None)  # state_update (CUDA only): type only
    if extended:  # layouts this package does not run: the past buffer's, when given
        set_output(ctx, 1, elem, past)
        return
    channels = None
    if xd is not None:
        channels = product(op, *xd[2:]) if last else xd[1]
    if wd is not None:
        channels = _same(op, "weight", wd, 0, channels, "channels")
        _same(op, "weight", wd, 1, 1, "one input channel per group")
        k = wd[2]
        if isinstance(k, int) and k < 1:
            raise ValueError(f"{op}: input 'weight' must have at least one tap, got {k}")
    sl = (k - 1) * d if wd is not None and isinstance(k, int) else None
    bd = _dims(op, ctx, 2, "bias", (1,))
    _same(op, "bias", bd, 0, channels, "channels")
    if xd is None:
        state = None
    elif last:
        state = [xd[0], sl, *xd[2:]]
    else:
        state = [xd[0], channels, sl]
    if past is not None:
        check_rank(op, "past_state", past, (len(state),) if state is not None else
                   range(3, 64))
        if state is None:
            state = past
        else:
            meanings = ["batch", "state length"] + [f"channel dim {j}" for j in
                                                    range(len(state) - 2)] if last else \
                ["batch", "channels", "state length ((K - 1) * dilation)"]
            state = [_same(op, "past_state", past, j, dim, m)
                     for j, (dim, m) in enumerate(zip(state, meanings))]
    set_output(ctx, 1, elem, state)


def _conv_schema() -> LightOpSchema:
    return LightOpSchema(
        MS_DOMAIN, "CausalConvWithState", 1, CONV_DOC,
        inputs=(
            P("input", "T", "(B, C, L), or (B, L, d_1..d_n) with channels_last=1."),
            P("weight", "T", "Depthwise taps (C, 1, K)."),
            P("bias", "T", "Per-channel bias (C,).", optional=True),
            P("past_state", "T", "Left context (B, C, SL) or (B, SL, d_1..d_n).",
              optional=True),
        ),
        outputs=(
            P("output", "T", "Convolved input, same shape."),
            P("present_state", "T", "The last SL positions of [past_state, input]."),
            P("state_update", "T", "Extended state output (not run by this package).",
              optional=True),
        ),
        attributes=(
            A("activation", "STRING", "none, silu or swish.", "none"),
            A("channels_last", "INT", "1: time before channels.", 0),
            A("dilation", "INT", "Tap spacing d >= 1.", 1),
            A("input_channel_offset", "INT", "Extended layout (not run here).", 0),
            A("input_channels", "INT", "Extended layout (not run here).", 0),
            A("ndim", "INT", "Convolved dims (only 1 is run here).", 1),
            A("state_channels_last", "INT", "Extended layout; -1: as channels_last (not run "
              "here otherwise).", -1),
            A("state_length", "INT", "Extended state length (not run here).", 0),
            A("state_update_capacity", "INT", "Extended state output (not run here).", 0),
            A("state_window", "INT", "Windowed states (not run here).", 0),
        ),
        type_constraints=(C("T", FLOAT_TYPES, "Float tensors."),),
        infer=_infer_conv,
    )


def schemas() -> tuple:
    """The LightOpSchema records of this family."""
    return (_attention_schema(), _mha_schema(), _gqa_schema(), _qattention_schema(),
            _rotary_schema(), _linear_schema(), _conv_schema())

