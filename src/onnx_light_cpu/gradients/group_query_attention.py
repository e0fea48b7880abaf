"""Gradient of com.microsoft GroupQueryAttention, for a first prompt without
caches (see :mod:`onnx_light_cpu.ops.group_query_attention` for the forward
semantics).

    P = softmax(softcap(scale Q K^T) masked)        ai.onnx Attention, mode 3
    dP = dY V^T
    dS = P * (dP - sum_keys(dP * P)) * scale        (* (1 - tanh^2) with softcap)
    dQ = dS K,  dK = dS^T Q,  dV = P^T dY

Q, K, V and dY are cast to FLOAT; the probabilities come from an ai.onnx
Attention node (opset 23) with ``qk_matmul_output_mode=3``.  K and V heads
are expanded to num_heads (query head n reads KV head n // (num_heads /
kv_num_heads)) and their gradients summed back to kv_num_heads.  The scale
is the attribute, or 1 / sqrt(Shape(Q)[2] / num_heads) computed in the
graph.  The key mask is built in the graph from seqlens_k: query s of
entry b sees keys [end - W, end) with end = min(s + 1, seqlens_k[b] + 1)
(causal; W = local_window_size, else from 0) or [0, seqlens_k[b] + 1).
Gradients of present_key / present_value (the new K and V, in BNSH) are
added to dK and dV.  With do_rotary, Q and K are rotated by an ai.onnx
RotaryEmbedding at the forward's positions (s, or position_ids[0, 0] + s:
a first prompt reads no other entry of position_ids) and dQ, dK rotated
back by the transposed rotation, the same node with -sin.  The results are
CastLike'd back to the inputs' types.

Supported: separate query, key and value, or packed QKV (split in the
graph, the gradient concatenated); no past caches, so
total_sequence_length is the query's length; any seqlens_k (right-padded
entries included); causal or not; local_window_size; scale; softcap;
do_rotary, half-split or interleaved, partial rotary included (the cos
cache's second dimension must be static: it gives the rotary dimension).

Not supported (NotImplementedError): past_key/past_value, attention_bias,
head_sink and smooth_softmax, query_seqlens, q/k norm weights, quantized
caches, sliding_window_cache, qk_output.
"""

from __future__ import annotations

from onnx import TensorProto

from .builder import MS_DOMAIN, GradContext

DOMAIN, OP_TYPE = MS_DOMAIN, "GroupQueryAttention"
T = TensorProto
BNSH = [0, 2, 1, 3]          # [B, S, N, H] <-> [B, N, S, H]
KEYS_FIRST = [0, 1, 3, 2]    # swaps the last two axes

#: Attributes with the only values the rule differentiates.
FIXED_ATTRIBUTES = {"smooth_softmax": (0, -1), "qk_output": (0,),
                    "sliding_window_cache": (0,), "k_quant_type": ("NONE",),
                    "v_quant_type": ("NONE",)}
#: Inputs the rule does not differentiate through, by position.
UNSUPPORTED_INPUTS = {3: "past_key", 4: "past_value", 10: "attention_bias", 11: "head_sink",
                      14: "q_norm_weight", 15: "k_norm_weight", 16: "query_seqlens"}


def gradient(ctx: GradContext) -> dict[int, str]:
    _check(ctx)
    heads, kv_heads = ctx.attr("num_heads"), ctx.attr("kv_num_heads")
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    packed = not k
    if packed:
        qf, kf, vf = _split_packed(ctx, ctx.cast(q, T.FLOAT), heads, kv_heads)
    else:
        qf, kf, vf = (ctx.cast(x, T.FLOAT) for x in (q, k, v))

    length = ctx.add("Shape", [q], start=1, end=2, hint="length")
    steps = ctx.add("Range", [ctx.const(0, "int64"), ctx.add("Squeeze", [length]),
                              ctx.const(1, "int64")], hint="steps")
    rotary = _Rotary(ctx, q, steps, length) if ctx.attr("do_rotary", 0) else None
    if rotary:
        qf, kf = rotary.rotate(qf, heads), rotary.rotate(kf, kv_heads)
    mask = _key_mask(ctx, steps, length, ctx.input(5), ctx.attr("causal", 1),
                     ctx.attr("local_window_size", -1))
    d_q, d_k, d_v = _attention_backward(ctx, qf, kf, vf, mask, heads, kv_heads)

    # present_key / present_value are K and V themselves (rotated), in BNSH
    if ctx.grad(1) is not None:
        d_k = ctx.add("Add", [d_k, _merged(ctx, ctx.cast(ctx.grad(1), T.FLOAT))])
    if ctx.grad(2) is not None:
        d_v = ctx.add("Add", [d_v, _merged(ctx, ctx.cast(ctx.grad(2), T.FLOAT))])
    if rotary:
        d_q, d_k = rotary.rotate_back(d_q, heads), rotary.rotate_back(d_k, kv_heads)
    if packed:
        return {0: ctx.cast_like(ctx.add("Concat", [d_q, d_k, d_v], axis=2), q)}
    return {0: ctx.cast_like(d_q, q), 1: ctx.cast_like(d_k, k), 2: ctx.cast_like(d_v, v)}


def _attention_backward(ctx: GradContext, qf: str, kf: str, vf: str, mask: str, heads: int,
                        kv_heads: int) -> tuple[str, str, str]:
    """dQ [B, S, heads * H], dK and dV [B, S, kv_heads * H] (FLOAT) from
    the FLOAT Q, K, V (rotated) and output gradient."""
    scale, softcap = ctx.attr("scale", 0.0), max(ctx.attr("softcap", 0.0), 0.0)
    attention = {"q_num_heads": heads, "kv_num_heads": kv_heads, "qk_matmul_output_mode": 3}
    attention.update({name: value for name, value in (("scale", scale), ("softcap", softcap))
                      if value})
    probs = ctx.add("Attention", [qf, kf, vf, mask],
                    outputs=[ctx.fresh("unused_y"), "", "", ctx.fresh("probs")], **attention)[3]

    q4 = _by_heads(ctx, qf, heads)
    k4 = _kv_by_heads(ctx, kf, heads, kv_heads)
    v4 = _kv_by_heads(ctx, vf, heads, kv_heads)
    dy4 = _by_heads(ctx, ctx.cast(ctx.grad(0), T.FLOAT), heads)

    # softmax backward: dS = P * (dP - sum_keys(dP * P))
    d_probs = ctx.add("MatMul", [dy4, _transposed(ctx, v4)], hint="d_probs")
    # onnx 1.23's shape inference gives the qk output a key length of 0 when
    # K's length is not a number (a symbolic or computed dimension): a
    # Reshape to dP's shape (a no-op) keeps the 0 from reaching later nodes
    probs = ctx.add("Reshape", [probs, ctx.add("Shape", [d_probs])], hint="probs")
    row = ctx.reduce_sum(ctx.add("Mul", [d_probs, probs]), [-1], keepdims=1)
    d_scores = ctx.add("Mul", [probs, ctx.add("Sub", [d_probs, row])], hint="d_scores")
    scale_t = (ctx.const([scale], "float32", "scale") if scale
               else _default_scale(ctx, qf, heads))
    if softcap:
        # y = c tanh(x / c) has dy/dx = 1 - tanh^2(x / c); x = scale Q K^T
        scores = ctx.add("Mul", [ctx.add("MatMul", [q4, _transposed(ctx, k4)]), scale_t])
        tanh = ctx.add("Tanh", [ctx.add("Div", [scores, ctx.const([softcap], "float32")])])
        slope = ctx.add("Sub", [ctx.const([1.0], "float32"), ctx.add("Mul", [tanh, tanh])])
        d_scores = ctx.add("Mul", [d_scores, slope])
    d_scores = ctx.add("Mul", [d_scores, scale_t], hint="d_scores")

    d_q = _merged(ctx, ctx.add("MatMul", [d_scores, k4]))
    d_k = _summed_groups(ctx, ctx.add("MatMul", [_transposed(ctx, d_scores), q4]),
                         heads, kv_heads)
    d_v = _summed_groups(ctx, ctx.add("MatMul", [_transposed(ctx, probs), dy4]),
                         heads, kv_heads)
    return d_q, d_k, d_v


def _split_packed(ctx: GradContext, packed: str, heads: int, kv_heads: int
                  ) -> tuple[str, str, str]:
    """[B, S, (heads + 2 kv_heads) H] -> Q, K, V.  Slices, not a Split: onnx's
    shape inference gives a Split with computed sizes rank-0 outputs."""
    width = ctx.add("Shape", [packed], start=2, end=3)
    head_size = ctx.add("Div", [width, ctx.ints([heads + 2 * kv_heads])], hint="head_size")
    bounds = [ctx.ints([0])] + [ctx.add("Mul", [head_size, ctx.ints([n])], hint="bound")
                                for n in (heads, heads + kv_heads, heads + 2 * kv_heads)]
    return tuple(ctx.add("Slice", [packed, bounds[i], bounds[i + 1], ctx.ints([2])], hint=name)
                 for i, name in enumerate("qkv"))


def _check(ctx: GradContext) -> None:
    ctx.only_attributes(("num_heads", "kv_num_heads", "scale", "softcap", "causal",
                         "local_window_size", "do_rotary", "rotary_interleaved",
                         "kv_cache_bit_width",
                         *FIXED_ATTRIBUTES))
    for name, allowed in FIXED_ATTRIBUTES.items():
        value = ctx.attr(name, allowed[0])
        if value not in allowed:
            ctx.unsupported(f"{name}={value!r}")
    heads, kv_heads = ctx.attr("num_heads"), ctx.attr("kv_num_heads")
    if not heads or not kv_heads or heads % kv_heads:
        raise ValueError(f"{ctx.label}: num_heads ({heads}) must be a positive multiple of "
                         f"kv_num_heads ({kv_heads})")
    window, causal = ctx.attr("local_window_size", -1), ctx.attr("causal", 1)
    if window == 0 or window < -1 or (window > 0 and not causal):
        raise ValueError(f"{ctx.label}: local_window_size must be -1 or positive with "
                         f"causal=1, got {window}")
    if bool(ctx.input(1)) != bool(ctx.input(2)):
        raise ValueError(f"{ctx.label}: key and value must be both given or both absent "
                         "(packed QKV)")
    for position, name in UNSUPPORTED_INPUTS.items():
        if ctx.input(position):
            ctx.unsupported(f"input {position} ({name})")
    if ctx.grad(0) is None:
        ctx.unsupported("the model does not output 'output', whose gradient is required")
    if ctx.grad(3) is not None:
        ctx.unsupported("output 3 (output_qk)")


def _key_mask(ctx: GradContext, keys: str, length: str, seqlens: str, causal: int,
              window: int) -> str:
    """BOOL [B, 1, S, S]: key j is visible to query s of entry b (``keys``:
    0 ... S - 1; ``length``: [S])."""
    total = ctx.add("Add", [ctx.cast(seqlens, T.INT64), ctx.const(1, "int64")])
    end = ctx.add("Reshape", [total, ctx.ints([-1, 1, 1, 1])], hint="end")
    if causal:
        queries = ctx.add("Unsqueeze", [keys, ctx.ints([1])])
        end = ctx.add("Min", [ctx.add("Add", [queries, ctx.const(1, "int64")]), end],
                      hint="end")
    visible = ctx.add("Less", [keys, end], hint="visible")
    if window > 0:
        begin = ctx.add("Sub", [end, ctx.const(window, "int64")], hint="begin")
        visible = ctx.add("And", [visible, ctx.add("GreaterOrEqual", [keys, begin])],
                          hint="visible")
    if not causal:
        # ONNX Runtime's Attention wants the mask's query axis at full length
        full = ctx.add("Concat", [ctx.ints([1, 1]), length, length], axis=0)
        visible = ctx.add("Expand", [visible, full], hint="visible")
    return visible


class _Rotary:
    """The forward's rotation of Q and K (ai.onnx RotaryEmbedding) and its
    transpose, a rotation by the opposite angles."""

    def __init__(self, ctx: GradContext, q: str, steps: str, length: str):
        cos, sin, position_ids = ctx.input(7), ctx.input(8), ctx.input(9)
        if not (cos and sin):
            raise ValueError(f"{ctx.label}: do_rotary=1 needs inputs cos_cache and sin_cache")
        dims = ctx.dims(cos)
        if not dims or len(dims) != 2 or not dims[1]:
            ctx.unsupported("do_rotary with a cos_cache whose second dimension the model "
                            "does not state (it gives the rotary dimension)")
        self.ctx, self.dim = ctx, 2 * dims[1]
        self.interleaved = ctx.attr("rotary_interleaved", 0)
        self.cos = ctx.cast(cos, T.FLOAT)
        self.sin = ctx.cast(sin, T.FLOAT)
        self.minus_sin = ctx.add("Neg", [self.sin])
        if position_ids:
            # the first prompt counts every entry up from position_ids[0, 0]
            first = ctx.add("Slice", [position_ids, ctx.ints([0, 0]), ctx.ints([1, 1])])
            steps = ctx.add("Add", [steps, ctx.add("Reshape", [first, ctx.ints([])])])
        batch = ctx.add("Shape", [q], start=0, end=1)
        self.positions = ctx.add("Expand", [ctx.add("Unsqueeze", [steps, ctx.ints([0])]),
                                            ctx.add("Concat", [batch, length], axis=0)],
                                 hint="positions")

    def rotate(self, x: str, heads: int, sin: str | None = None) -> str:
        """[B, S, heads * H] rotated at the positions."""
        return self.ctx.add("RotaryEmbedding", [x, self.cos, sin or self.sin, self.positions],
                            num_heads=heads, rotary_embedding_dim=self.dim,
                            interleaved=self.interleaved)

    def rotate_back(self, x: str, heads: int) -> str:
        return self.rotate(x, heads, self.minus_sin)


def _default_scale(ctx: GradContext, q: str, heads: int) -> str:
    """1 / sqrt(head size) with the head size read from Q's shape."""
    width = ctx.cast(ctx.add("Shape", [q], start=2, end=3), T.FLOAT)
    head_size = ctx.add("Div", [width, ctx.const([float(heads)], "float32")])
    return ctx.add("Reciprocal", [ctx.add("Sqrt", [head_size])], hint="scale")


def _by_heads(ctx: GradContext, x: str, heads: int) -> str:
    """[B, S, heads * H] (or any shape [B, S, ...] of that size) -> [B,
    heads, S, H]."""
    split = ctx.add("Reshape", [x, ctx.ints([0, 0, heads, -1])])
    return ctx.add("Transpose", [split], perm=BNSH)


def _merged(ctx: GradContext, x4: str) -> str:
    """[B, heads, S, H] -> [B, S, heads * H]."""
    return ctx.add("Reshape", [ctx.add("Transpose", [x4], perm=BNSH), ctx.ints([0, 0, -1])])


def _transposed(ctx: GradContext, x4: str) -> str:
    return ctx.add("Transpose", [x4], perm=KEYS_FIRST)


def _kv_by_heads(ctx: GradContext, x: str, heads: int, kv_heads: int) -> str:
    """[B, S, kv_heads * H] -> [B, heads, S, H]: KV head j repeated for the
    query heads j * group ... j * group + group - 1."""
    group = heads // kv_heads
    if group == 1:
        return _by_heads(ctx, x, heads)
    single = ctx.add("Reshape", [x, ctx.ints([0, 0, kv_heads, 1, -1])])
    repeated = ctx.add("Expand", [single, ctx.ints([1, 1, 1, group, 1])])
    return _by_heads(ctx, repeated, heads)


def _summed_groups(ctx: GradContext, d4: str, heads: int, kv_heads: int) -> str:
    """[B, heads, S, H] -> [B, S, kv_heads * H], each group of query heads
    summed into its KV head."""
    group = heads // kv_heads
    if group == 1:
        return _merged(ctx, d4)
    by_group = ctx.add("Reshape", [ctx.add("Transpose", [d4], perm=BNSH),
                                   ctx.ints([0, 0, kv_heads, group, -1])])
    return ctx.add("Reshape", [ctx.reduce_sum(by_group, [3]), ctx.ints([0, 0, -1])])
