"""Schemas of the remaining com.microsoft operators (ONNX Runtime 1.32 contract).

The Skip norms, EmbedLayerNormalization and its quantized twin, MoE and
QMoE, the Gelu family (BiasGelu, FastGelu, Gelu, QuickGelu), CDist,
FusedConv, FusedGemm, FusedMatMul and the contrib tensor operators (ExpandDims, Range,
Trilu, Unique).  Names, order and optionality of the inputs and outputs,
attribute names, types and defaults follow ONNX Runtime's own schemas; the
type constraints hold ONNX Runtime's types plus those this package's kernels
add (bfloat16 for EmbedLayerNormalization and FusedGemm).  The kernels are
in ``onnx_light_cpu/ops`` (skip_norm, embed_layer_norm, qembed_layer_norm,
moe, bias_gelu, microsoft_activation, cdist, fused_matmul, microsoft_tensor).
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto, numpy_helper

from ._infer import (
    attr,
    check_rank,
    elem_type,
    merge_dim,
    product,
    set_output,
    shape,
)
from ._record import MS_DOMAIN, LightAttribute, LightOpSchema, LightParameter
from ._record import LightTypeConstraint as TC

P = LightParameter
A = LightAttribute

_F = "tensor(float)"
_F16 = "tensor(float16)"
_BF16 = "tensor(bfloat16)"
_F64 = "tensor(double)"
_I32 = "tensor(int32)"
_I64 = "tensor(int64)"
#: float, float16, bfloat16 (the norms and MoE)
_NORM_TYPES = (_F, _F16, _BF16)
#: float16, float, double, bfloat16 (the Gelu family, FusedMatMul)
_GELU_TYPES = (_F16, _F, _F64, _BF16)
#: the numeric and other types ONNX Runtime's ExpandDims and Unique accept
_ALL_BUT_BF16 = ("tensor(uint8)", "tensor(uint16)", "tensor(uint32)", "tensor(uint64)",
                 "tensor(int8)", "tensor(int16)", _I32, _I64, _F16, _F, _F64,
                 "tensor(string)", "tensor(bool)", "tensor(complex64)", "tensor(complex128)")
_EPSILON = A("epsilon", "FLOAT", "Added to the variance (or mean square); finite, >= 0.", 1e-12)


# -- private helpers --------------------------------------------------------


def _fail(op: str, name: str, message: str):
    raise ValueError(f"{op}: input '{name}' {message}")


def _same_dim(op: str, name: str, what: str, a, b):
    """merge_dim with an error naming the input."""
    try:
        return merge_dim(op, what, a, b)
    except ValueError:
        _fail(op, name, f"has {what} {b}, expected {a}")


def _vector(op: str, ctx, i: int, name: str, length):
    """Checks that optional input ``i`` is 1-D of ``length``; the merged length."""
    dims = shape(ctx, i)
    if dims is None:
        return length
    check_rank(op, name, dims, (1,))
    return _same_dim(op, name, "length", length, dims[0])


def _scalar_like(op: str, ctx, i: int, name: str) -> None:
    """Input ``i`` (when known) has shape () or (1,)."""
    dims = shape(ctx, i)
    if dims is None:
        return
    check_rank(op, name, dims, (0, 1))
    if dims and isinstance(dims[0], int) and dims[0] != 1:
        _fail(op, name, f"must be a scalar or of shape (1,), got shape {dims}")


def _has(ctx, i: int) -> bool:
    """Whether the node has input ``i`` (not absent, not an empty name)."""
    return i < ctx.get_num_inputs() and ctx.has_input(i)


def _constant(ctx, i: int):
    """Input ``i``'s value when it is a constant (an initializer), else None."""
    if not _has(ctx, i):
        return None
    data = ctx.get_input_data(i)
    return None if data is None else numpy_helper.to_array(data)


def _broadcast(op: str, name: str, a: list, b: list) -> list:
    """numpy broadcasting of two dim lists: 1 yields to the other dim, a
    static dim wins over a symbolic one (which must then be 1 or equal), two
    different symbols give an unknown dim."""
    out = []
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + list(a)
    b = [1] * (n - len(b)) + list(b)
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int):
            _fail(op, name, f"has batch dimensions {b} that do not broadcast with {a}")
        elif isinstance(x, int) or isinstance(y, int):
            out.append(x if isinstance(x, int) else y)
        else:
            out.append(None)
    return out


def _same_shape_infer(op: str, min_rank: int = 0, bias: int | None = None):
    """Output 0 has input 0's type and shape; input ``bias`` (when given) is
    1-D with the length of input 0's last axis."""

    def infer(ctx) -> None:
        dims = shape(ctx, 0)
        if dims is not None and len(dims) < min_rank:
            _fail(op, "X" if op != "BiasGelu" else "A",
                  f"must have rank >= {min_rank}, got {len(dims)}")
        if bias is not None and dims is not None and dims:
            last = _vector(op, ctx, bias, "bias" if op != "BiasGelu" else "B", dims[-1])
            dims = dims[:-1] + [last]
        set_output(ctx, 0, elem_type(ctx, 0), dims)

    return infer


# -- SkipLayerNormalization, SkipSimplifiedLayerNormalization ----------------


def _skip_norm_infer(op: str, simplified: bool):
    vectors = (("gamma", 2), ("bias", 3)) if simplified else (
        ("gamma", 2), ("beta", 3), ("bias", 4))

    def infer(ctx) -> None:
        t = elem_type(ctx, 0)
        x = shape(ctx, 0)
        check_rank(op, "input", x, (2, 3))
        skip = shape(ctx, 1)
        check_rank(op, "skip", skip, (2, 3))
        out = x
        if x is not None and skip is not None:
            if len(skip) > len(x):
                _fail(op, "skip", f"has rank {len(skip)}, more than input's {len(x)}")
            out = list(x)
            lead = len(x) - len(skip)  # 1 for a (S, H) skip of a (B, S, H) input
            for k, d in enumerate(skip):
                axis = lead + k
                if axis == 0 and len(x) == 3 and d == 1:
                    continue  # batch broadcast: (1, S, H)
                try:
                    out[axis] = merge_dim(op, "skip", x[axis], d)
                except ValueError:
                    allowed = f"{x}" + (f", {x[1:]} or {[1] + x[1:]}" if len(x) == 3 else "")
                    _fail(op, "skip", f"has shape {skip}, expected {allowed} (input is {x})")
        hidden = None if out is None else out[-1]
        if hidden is None and skip is not None:
            hidden = skip[-1]
        for name, i in vectors:
            hidden = _vector(op, ctx, i, name, hidden)
        if out is not None:
            out = out[:-1] + [hidden]
        set_output(ctx, 0, t, out)
        stats = None if out is None else out[:-1] + [1]
        set_output(ctx, 1, TensorProto.FLOAT, stats)
        set_output(ctx, 2, TensorProto.FLOAT, stats)
        set_output(ctx, 3, t, out)

    return infer


def _skip_norm_schemas() -> tuple:
    out = []
    for simplified in (False, True):
        name = "SkipSimplifiedLayerNormalization" if simplified else "SkipLayerNormalization"
        what = ("v / sqrt(mean(v * v) + epsilon) * gamma" if simplified else
                "(v - mean(v)) / sqrt(var(v) + epsilon) * gamma + beta")
        doc = (
            f"Residual add then normalization over the last axis: v = input + skip (+ bias), "
            f"output = {what}.  input is (S, H) or (B, S, H); skip has the shape of input or, "
            "for a rank-3 input, (S, H) or (1, S, H) (shared by the batch); gamma"
            + ("" if simplified else ", beta") + " and bias have length H.  The sum and the "
            "statistics are computed in float32, float16 and bfloat16 rounded once at the "
            "store.  Optional outputs: mean (float32, input's shape with a last dimension of "
            "1" + ("; zeros, there is no centring" if simplified else "") + "), inv_std_var "
            "(float32, the same shape) and input_skip_bias_sum (v, in the input's type and "
            "shape).")
        inputs = [
            P("input", "T", "(S, H) or (B, S, H)."),
            P("skip", "T", "The residual: input's shape, or (S, H) or (1, S, H) for rank 3."),
            P("gamma", "T", "Scale, length H."),
        ]
        if not simplified:
            inputs.append(P("beta", "T", "Shift, length H.", optional=True))
        inputs.append(P("bias", "T", "Added to input + skip before normalizing, length H.",
                        optional=True))
        out.append(LightOpSchema(
            MS_DOMAIN, name, 1, doc,
            inputs=tuple(inputs),
            outputs=(
                P("output", "T", "The normalized tensor, input's shape."),
                P("mean", "U", "Row means (zeros for the simplified form), last dim 1.",
                  optional=True),
                P("inv_std_var", "U", "1 / sqrt(variance + epsilon) per row, last dim 1.",
                  optional=True),
                P("input_skip_bias_sum", "T", "input + skip (+ bias), input's shape.",
                  optional=True),
            ),
            attributes=(_EPSILON,),
            type_constraints=(
                TC("T", _NORM_TYPES, "input, skip, parameters and outputs 0 and 3."),
                TC("U", (_F,), "The saved statistics: float32."),
            ),
            infer=_skip_norm_infer(name, simplified),
        ))
    return tuple(out)


# -- EmbedLayerNormalization, QEmbedLayerNormalization -----------------------


#: QEmbedLayerNormalization's inputs 8-17: a scale or zero point of one element each
_QUANT_PARAMETERS = tuple(f"{t}_{p}" for p in ("scale", "zero_point") for t in (
    "word_embedding", "position_embedding", "segment_embedding", "gamma", "beta"))


def _embed_infer(op: str, quantized: bool):
    # (name, index) of the ids-shaped inputs, tables, vectors
    word, pos, seg, gamma, beta = (
        ("word_embedding_quant", "position_embedding_quant", "segment_embedding",
         "gamma_quant", "beta_quant") if quantized else
        ("word_embedding", "position_embedding", "segment_embedding", "gamma", "beta"))

    def infer(ctx) -> None:
        ids = shape(ctx, 0)
        check_rank(op, "input_ids", ids, (2,))
        batch, seq = (None, None) if ids is None else ids
        for name, i in (("segment_ids", 1), ("mask", 7)):
            dims = shape(ctx, i)
            check_rank(op, name, dims, (2,))
            if dims is not None:
                batch = _same_dim(op, name, "batch size", batch, dims[0])
                seq = _same_dim(op, name, "sequence length", seq, dims[1])
        if quantized:
            given = [_has(ctx, i) for i in (1, 4, 10, 15)]
            if any(given) and not all(given):
                _fail(op, "segment_embedding", "and segment_ids, segment_embedding_scale and "
                      "segment_embedding_zero_point (inputs 1, 4, 10, 15) come all together")
        elif _has(ctx, 1) and not _has(ctx, 4):
            _fail(op, "segment_ids", "is given without segment_embedding (input 4)")
        hidden = None
        for name, i in ((word, 2), (pos, 3), (seg, 4)):
            dims = shape(ctx, i)
            check_rank(op, name, dims, (2,))
            if dims is not None:
                hidden = _same_dim(op, name, "hidden size", hidden, dims[1])
        for name, i in ((gamma, 5), (beta, 6)):
            hidden = _vector(op, ctx, i, name, hidden)
        pids = None if quantized else shape(ctx, 8)
        if pids is not None:
            check_rank(op, "position_ids", pids, (2,))
            seq = _same_dim(op, "position_ids", "sequence length", seq, pids[1])
            if pids[0] != 1:
                batch = _same_dim(op, "position_ids", "batch size", batch, pids[0])
        else:
            rows = shape(ctx, 3)
            if (rows is not None and isinstance(rows[0], int) and isinstance(seq, int)
                    and rows[0] < seq):
                _fail(op, pos, f"has {rows[0]} rows, fewer than the sequence length {seq}")
        if quantized:
            for i, name in enumerate(_QUANT_PARAMETERS, 8):
                _scalar_like(op, ctx, i, name)
        t = TensorProto.FLOAT if quantized else elem_type(ctx, 2)
        out = [batch, seq, hidden]
        set_output(ctx, 0, t, out)
        set_output(ctx, 1, TensorProto.INT32, [batch])
        if not quantized:
            set_output(ctx, 2, t, out)

    return infer


def _embed_schemas() -> tuple:
    embed = LightOpSchema(
        MS_DOMAIN, "EmbedLayerNormalization", 1,
        "BERT's embedding layer fused with its LayerNormalization: v = word_embedding["
        "input_ids] + position_embedding[position] (+ segment_embedding[segment_ids]), then "
        "output = (v - mean(v)) / sqrt(var(v) + epsilon) * gamma + beta over the hidden axis. "
        "input_ids, segment_ids and mask are int32 (B, S); the tables are (rows, H); the "
        "position is s, or position_ids ((B, S) or (1, S)).  Without segment_ids a given "
        "segment_embedding adds its row 0.  Outputs: output (B, S, H); mask_index, int32 "
        "(B,), the number of mask values equal to 1 per row (zeros without a mask); "
        "embedding_sum, v itself (B, S, H).  An id outside its table is an error.  float32 "
        "arithmetic; float16 and bfloat16 (this package's extension) rounded once.",
        inputs=(
            P("input_ids", "T1", "Token ids (B, S)."),
            P("segment_ids", "T1", "Segment ids (B, S); needs segment_embedding.",
              optional=True),
            P("word_embedding", "T", "Word table (vocabulary, H)."),
            P("position_embedding", "T", "Position table (positions, H)."),
            P("segment_embedding", "T", "Segment table (segments, H).", optional=True),
            P("gamma", "T", "LayerNorm scale, length H."),
            P("beta", "T", "LayerNorm shift, length H."),
            P("mask", "T1", "Attention mask (B, S); its ones are counted.", optional=True),
            P("position_ids", "T1", "Positions (B, S) or (1, S); default 0..S-1.",
              optional=True),
        ),
        outputs=(
            P("output", "T", "Normalized embeddings (B, S, H)."),
            P("mask_index", "T1", "Ones of each mask row, int32 (B,).", optional=True),
            P("embedding_sum", "T", "The sum before normalization (B, S, H).", optional=True),
        ),
        attributes=(
            _EPSILON,
            A("mask_index_type", "INT", "Read by shape tools only: mask_index is (B,) "
              "whatever its value."),
        ),
        type_constraints=(
            TC("T1", (_I32,), "Ids, mask and mask_index: int32."),
            TC("T", (_F, _F16, _BF16), "Tables, parameters and outputs 0 and 2."),
        ),
        infer=_embed_infer("EmbedLayerNormalization", quantized=False),
    )
    q = "Per-tensor (one element) "
    qembed = LightOpSchema(
        MS_DOMAIN, "QEmbedLayerNormalization", 1,
        "EmbedLayerNormalization on quantized tables: each of the word, position and segment "
        "tables, gamma and beta is uint8 or int8 (all the same) with its own float32 scale "
        "and zero point of one element, dequantized as (q - zero_point) * scale for the rows "
        "a run reads.  The position of a token is its index s; segment_ids, "
        "segment_embedding and its scale and zero point come together or not at all.  "
        "Outputs: layernorm_out, float32 (B, S, H); mask_index_out, int32 (B,), the number "
        "of mask values equal to 1 per row (zeros without a mask).",
        inputs=(
            P("input_ids", "T1", "Token ids (B, S)."),
            P("segment_ids", "T1", "Segment ids (B, S).", optional=True),
            P("word_embedding_quant", "T2", "Quantized word table (vocabulary, H)."),
            P("position_embedding_quant", "T2", "Quantized position table (positions, H)."),
            P("segment_embedding", "T2", "Quantized segment table (segments, H).",
              optional=True),
            P("gamma_quant", "T2", "Quantized LayerNorm scale, length H."),
            P("beta_quant", "T2", "Quantized LayerNorm shift, length H."),
            P("mask", "T1", "Attention mask (B, S).", optional=True),
            P("word_embedding_scale", "T", q + "scale of the word table."),
            P("position_embedding_scale", "T", q + "scale of the position table."),
            P("segment_embedding_scale", "T", q + "scale of the segment table.",
              optional=True),
            P("gamma_scale", "T", q + "scale of gamma."),
            P("beta_scale", "T", q + "scale of beta."),
            P("word_embedding_zero_point", "T2", q + "zero point of the word table."),
            P("position_embedding_zero_point", "T2", q + "zero point of the position table."),
            P("segment_embedding_zero_point", "T2", q + "zero point of the segment table.",
              optional=True),
            P("gamma_zero_point", "T2", q + "zero point of gamma."),
            P("beta_zero_point", "T2", q + "zero point of beta."),
        ),
        outputs=(
            P("layernorm_out", "T", "Normalized embeddings (B, S, H)."),
            P("mask_index_out", "T1", "Ones of each mask row, int32 (B,).", optional=True),
        ),
        attributes=(_EPSILON,),
        type_constraints=(
            TC("T1", (_I32,), "Ids, mask and mask_index_out: int32."),
            TC("T2", ("tensor(int8)", "tensor(uint8)"), "Quantized tables and zero points."),
            TC("T", (_F,), "Scales and the output: float32."),
        ),
        infer=_embed_infer("QEmbedLayerNormalization", quantized=True),
    )
    return embed, qembed


# -- MoE, QMoE ---------------------------------------------------------------


def _moe_infer(op: str, quantized: bool):
    weights = ((2, "fc1_experts_weights"), (5, "fc2_experts_weights"),
               (8, "fc3_experts_weights")) if quantized else (
        (2, "fc1_experts_weights"), (4, "fc2_experts_weights"))

    def infer(ctx) -> None:
        x = shape(ctx, 0)
        check_rank(op, "input", x, (2, 3))
        router = shape(ctx, 1)
        check_rank(op, "router_probs", router, (2,))
        experts = None if router is None else router[1]
        if x is not None and router is not None:
            tokens = x[0] if len(x) == 2 else product(op, *x[:-1])
            if tokens is not None:
                _same_dim(op, "router_probs", "token count", tokens, router[0])
        for i, name in weights:
            dims = shape(ctx, i)
            check_rank(op, name, dims, (3,))
            if dims is not None:
                experts = _same_dim(op, name, "expert count", experts, dims[0])
        if quantized:
            rw = shape(ctx, 14)
            check_rank(op, "router_weights", rw, (2,))
            if rw is not None and router is not None:
                for k, what in ((0, "token count"), (1, "expert count")):
                    _same_dim(op, "router_weights", what, router[k], rw[k])
        else:
            _moe_float_checks(op, ctx, x, experts)
        set_output(ctx, 0, elem_type(ctx, 0), x)

    return infer


def _moe_float_checks(op: str, ctx, x, experts) -> None:
    """MoE's FC1 [E, f*I, H], FC2 [E, H, I] and biases [E, f*I], [E, H]."""
    w1, w2 = shape(ctx, 2), shape(ctx, 4)
    hidden = None if x is None else x[-1]
    fused = (attr(ctx, "activation_type", b"relu") in (b"swiglu", "swiglu")
             and attr(ctx, "swiglu_fusion", 0) == 1)
    if w1 is not None:
        hidden = _same_dim(op, "fc1_experts_weights", "hidden size (dim 2)", hidden, w1[2])
    if w2 is not None:
        hidden = _same_dim(op, "fc2_experts_weights", "hidden size (dim 1)", hidden, w2[1])
    if w1 is not None and w2 is not None and isinstance(w1[1], int) and isinstance(w2[2], int):
        f = 2 if fused else 1
        if w1[1] != f * w2[2]:
            _fail(op, "fc2_experts_weights",
                  f"has inter size {w2[2]} but fc1_experts_weights has {w1[1]} rows "
                  f"(expected {f} * inter size)")
    for i, name, rows in ((3, "fc1_experts_bias", None if w1 is None else w1[1]),
                          (5, "fc2_experts_bias", hidden)):
        dims = shape(ctx, i)
        check_rank(op, name, dims, (2,))
        if dims is not None:
            _same_dim(op, name, "expert count", experts, dims[0])
            _same_dim(op, name, "rows", rows, dims[1])


_MOE_ATTRIBUTES = (
    A("activation_alpha", "FLOAT", "SwiGLU's alpha: G * sigmoid(alpha * G) * (L + beta).", 1.0),
    A("activation_beta", "FLOAT", "SwiGLU's beta (added to the linear half).", 0.0),
    A("activation_type", "STRING", "relu, gelu (tanh form), silu, identity or swiglu.",
      "relu"),
    A("k", "INT", "Experts per token (>= 1, at most the expert count).", 1),
    A("normalize_routing_weights", "INT", "1: the k routing weights are renormalized.", 0),
    A("swiglu_fusion", "INT", "1: FC1 rows alternate gate and linear (interleaved "
      "SwiGLU); 0: separate (FC3); 2 (not supported): gate then linear halves.", 0),
    A("swiglu_limit", "FLOAT", "Clamp of the SwiGLU gate (above) and linear part; none "
      "when absent."),
    A("swiglu_limit_after_activation", "INT", "1 is not supported.", 0),
    A("use_sparse_mixer", "INT", "Accepted with k=2 (routes as without it).", 0),
)


def _moe_schemas() -> tuple:
    moe = LightOpSchema(
        MS_DOMAIN, "MoE", 1,
        "Top-k mixture of experts.  Tokens (T, H) or (B, S, H) are routed by their router "
        "logits (T, E): softmax over the E experts, the k most probable kept (optionally "
        "renormalized).  Each expert computes FC2(activation(FC1 x + b1)) + b2 on the rows "
        "routed to it, FC1 (E, f * I, H) with f = 2 for interleaved SwiGLU, FC2 (E, H, I), "
        "biases (E, f * I) and (E, H); the output, of input's shape and type, is the "
        "routing-weighted sum in expert order.  float16 and bfloat16 run in float32, rounded "
        "once.  Separate FC3 weights are not supported.",
        inputs=(
            P("input", "T", "Tokens (T, H) or (B, S, H)."),
            P("router_probs", "T", "Router logits (T, E)."),
            P("fc1_experts_weights", "T", "FC1 (E, f * I, H)."),
            P("fc1_experts_bias", "T", "FC1 bias (E, f * I).", optional=True),
            P("fc2_experts_weights", "T", "FC2 (E, H, I)."),
            P("fc2_experts_bias", "T", "FC2 bias (E, H).", optional=True),
            P("fc3_experts_weights", "T", "Not supported.", optional=True),
            P("fc3_experts_bias", "T", "Not supported.", optional=True),
        ),
        outputs=(P("output", "T", "Input's shape and type."),),
        attributes=_MOE_ATTRIBUTES,
        type_constraints=(TC("T", _NORM_TYPES, "Activations, weights and output."),),
        infer=_moe_infer("MoE", quantized=False),
    )
    qmoe = LightOpSchema(
        MS_DOMAIN, "QMoE", 1,
        "MoE with block- or row-quantized expert weights: uint8 codes of 2, 3, 4 or 8 bits "
        "(expert_weight_bits, per projection fc*_expert_weight_bits), least significant "
        "first, value = (code - zero_point) * scale, the implicit zero point 2^(bits - 1).  "
        "Routing: softmax over the k largest logits (router_weights, when given, weight the "
        "same experts).  Output of input's shape and type.  The FP4/FP8 scale inputs (15 on), "
        "prepacked weights and float8 codes are not supported.",
        inputs=(
            P("input", "T", "Tokens (T, H) or (B, S, H)."),
            P("router_probs", "T", "Router logits (T, E)."),
            P("fc1_experts_weights", "T1", "FC1 codes (E, rows, packed columns)."),
            P("fc1_scales", "T2", "FC1 scales (E, rows) or (E, rows, blocks).",
              optional=True),
            P("fc1_experts_bias", "T", "FC1 bias.", optional=True),
            P("fc2_experts_weights", "T1", "FC2 codes (E, rows, packed columns)."),
            P("fc2_scales", "T2", "FC2 scales.", optional=True),
            P("fc2_experts_bias", "T", "FC2 bias (E, H).", optional=True),
            P("fc3_experts_weights", "T1", "FC3 codes (gate projection).", optional=True),
            P("fc3_scales", "T2", "FC3 scales.", optional=True),
            P("fc3_experts_bias", "T", "FC3 bias.", optional=True),
            P("fc1_zero_points", "T1", "Packed FC1 zero points.", optional=True),
            P("fc2_zero_points", "T1", "Packed FC2 zero points.", optional=True),
            P("fc3_zero_points", "T1", "Packed FC3 zero points.", optional=True),
            P("router_weights", "T", "Routing weights (T, E) for the chosen experts.",
              optional=True),
            P("fc1_global_scale", "T4", "Not supported.", optional=True),
            P("fc2_global_scale", "T4", "Not supported.", optional=True),
            P("fc1_act_scale", "T4", "Not supported.", optional=True),
            P("fc2_act_scale", "T4", "Not supported.", optional=True),
            P("fc1_act_block_scale", "T2", "Not supported.", optional=True),
            P("fc2_act_block_scale", "T2", "Not supported.", optional=True),
        ),
        outputs=(P("output", "T", "Input's shape and type."),),
        attributes=_MOE_ATTRIBUTES + (
            A("accuracy_level", "INT", "4: int8 activations where ONNX Runtime uses them.", 0),
            A("block_size", "INT", "Codes per scale along a row; 0 or absent: per row."),
            A("expert_weight_bits", "INT", "Bits per code: 2, 3, 4 or 8.", 4),
            A("fc1_expert_weight_bits", "INT", "FC1's bits (default expert_weight_bits)."),
            A("fc2_expert_weight_bits", "INT", "FC2's bits (default expert_weight_bits)."),
            A("fc3_expert_weight_bits", "INT", "FC3's bits (default expert_weight_bits)."),
            A("quant_type", "STRING", "int (the only one supported).", "int"),
            A("weights_prepacked", "INT", "Prepacked weights: not supported.", -1),
        ),
        type_constraints=(
            TC("T", _NORM_TYPES, "Activations, biases, router and output."),
            TC("T1", ("tensor(uint8)", "tensor(float8e4m3fn)"),
               "Codes and zero points (uint8 supported)."),
            TC("T2", (_F, _F16, _BF16, "tensor(float8e8m0)", "tensor(float8e4m3fn)"),
               "Scales (float types supported)."),
            TC("T4", (_F,), "The FP4/FP8 global scales (not supported)."),
        ),
        infer=_moe_infer("QMoE", quantized=True),
    )
    return moe, qmoe


# -- activations -------------------------------------------------------------


def _activation_schemas() -> tuple:
    x = P("X", "T", "Input tensor.")
    y = P("Y", "T", "X's shape and type.")
    half = ("Half types are computed in float32 and rounded once; bfloat16 is this "
            "package's extension.")
    tc = TC("T", _GELU_TYPES, "Float tensors.")
    return (
        LightOpSchema(
            MS_DOMAIN, "BiasGelu", 1,
            "C = Gelu(A + B) = x * (1 + erf(x / sqrt(2))) / 2 with x = A + B, the exact (erf) "
            "Gelu.  A has rank >= 1; B is 1-D with the length of A's last axis.  " + half,
            inputs=(P("A", "T", "Input, rank >= 1."),
                    P("B", "T", "Bias, 1-D, length of A's last axis.")),
            outputs=(P("C", "T", "A's shape and type."),),
            type_constraints=(tc,),
            infer=_same_shape_infer("BiasGelu", 1, bias=1),
        ),
        LightOpSchema(
            MS_DOMAIN, "FastGelu", 1,
            "Y = x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2 with x = X (+ bias), "
            "the tanh approximation of Gelu.  X has rank >= 1; the optional bias is 1-D with "
            "the length of X's last axis.  " + half,
            inputs=(P("X", "T", "Input, rank >= 1."),
                    P("bias", "T", "1-D, length of X's last axis.", optional=True)),
            outputs=(y,),
            type_constraints=(TC("T", (_F, _F64, _F16, _BF16), "Float tensors."),),
            infer=_same_shape_infer("FastGelu", 1, bias=1),
        ),
        LightOpSchema(
            MS_DOMAIN, "Gelu", 1,
            "Y = X * (1 + erf(X / sqrt(2))) / 2, the exact Gelu, element-wise on any rank "
            "(scalars included).  " + half,
            inputs=(x,), outputs=(y,), type_constraints=(tc,),
            infer=_same_shape_infer("Gelu"),
        ),
        LightOpSchema(
            MS_DOMAIN, "QuickGelu", 1,
            "Y = X * sigmoid(alpha * X), element-wise on any rank; alpha (default 1.702) may "
            "take any value.  " + half,
            inputs=(x,), outputs=(y,),
            attributes=(A("alpha", "FLOAT", "Slope inside the sigmoid.", 1.702),),
            type_constraints=(tc,),
            infer=_same_shape_infer("QuickGelu"),
        ),
    )


# -- CDist, FusedGemm, FusedMatMul -------------------------------------------


def _cdist_infer(ctx) -> None:
    op = "CDist"
    a, b = shape(ctx, 0), shape(ctx, 1)
    check_rank(op, "A", a, (2,))
    check_rank(op, "B", b, (2,))
    if a is not None and b is not None:
        _same_dim(op, "B", "second dimension", a[1], b[1])
    set_output(ctx, 0, elem_type(ctx, 0),
               [None if a is None else a[0], None if b is None else b[0]])


def _fused_gemm_infer(ctx) -> None:
    op = "FusedGemm"
    a, b = shape(ctx, 0), shape(ctx, 1)
    check_rank(op, "A", a, (2,))
    check_rank(op, "B", b, (2,))
    m = k = n = None
    if a is not None:
        m, k = a[::-1] if attr(ctx, "transA", 0) else a
    if b is not None:
        kb, n = b[::-1] if attr(ctx, "transB", 0) else b
        k = _same_dim(op, "B", "inner dimension", k, kb)
    c = shape(ctx, 2)
    if c is not None:
        check_rank(op, "C", c, (0, 1, 2))
        for d, want in zip(c[::-1], (n, m)):
            if isinstance(d, int) and d != 1 and isinstance(want, int) and d != want:
                _fail(op, "C", f"has shape {c}, which does not broadcast to ({m}, {n})")
    set_output(ctx, 0, elem_type(ctx, 0), [m, n])


def _fused_matmul_infer(ctx) -> None:
    op = "FusedMatMul"
    a, b = shape(ctx, 0), shape(ctx, 1)
    for name, dims in (("A", a), ("B", b)):
        if dims is not None and not dims:
            _fail(op, name, "must have rank >= 1, got a scalar")
    batch_a, batch_b = attr(ctx, "transBatchA", 0), attr(ctx, "transBatchB", 0)
    if a is None or b is None:
        set_output(ctx, 0, elem_type(ctx, 0), None)
        return
    if (batch_a or batch_b) and not (len(a) == len(b) and len(a) >= 3):
        _fail(op, "B", f"has shape {b}: with transBatchA or transBatchB both inputs must have "
              f"the same rank >= 3 (A has shape {a})")
    a2 = a if len(a) > 1 else [1] + a
    b2 = b if len(b) > 1 else b + [1]

    def read(dims, batch_trans, trans):
        if batch_trans:
            dims = dims[1:-1] + [dims[0], dims[-1]]
        if trans:
            dims = dims[:-2] + [dims[-1], dims[-2]]
        return dims

    # transA/transB are ignored for a 1-D operand
    a_read = read(a2, batch_a, attr(ctx, "transA", 0) and len(a) > 1)
    b_read = read(b2, batch_b, attr(ctx, "transB", 0) and len(b) > 1)
    m, k = a_read[-2:]
    kb, n = b_read[-2:]
    try:
        merge_dim(op, "inner dimension", k, kb)
    except ValueError:
        _fail(op, "B", f"has shape {b}: its inner dimension {kb} differs from A's {k} "
              f"(A has shape {a})")
    out = _broadcast(op, "B", a_read[:-2], b_read[:-2])
    out += ([m] if len(a) > 1 else []) + ([n] if len(b) > 1 else [])
    set_output(ctx, 0, elem_type(ctx, 0), out)


def _fused_conv_infer(ctx) -> None:
    op = "FusedConv"
    x, w = shape(ctx, 0), shape(ctx, 1)
    check_rank(op, "X", x, (3, 4, 5))
    check_rank(op, "W", w, (3, 4, 5))
    if x is None or w is None or len(x) != len(w):
        set_output(ctx, 0, elem_type(ctx, 0), None if x is None else [None] * len(x))
        return
    n = len(x) - 2
    strides = list(attr(ctx, "strides", None) or [1] * n)
    dilations = list(attr(ctx, "dilations", None) or [1] * n)
    pads = list(attr(ctx, "pads", None) or [0] * 2 * n)
    auto_pad = attr(ctx, "auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    out = [x[0], w[0]]
    for i in range(n):
        size, k = x[2 + i], w[2 + i]
        if not isinstance(size, int) or not isinstance(k, int):
            out.append(None)
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-size // strides[i]))
        else:
            lo, hi = (0, 0) if auto_pad == "VALID" else (pads[i], pads[i + n])
            out.append((size + lo + hi - (k - 1) * dilations[i] - 1) // strides[i] + 1)
    set_output(ctx, 0, elem_type(ctx, 0), out)


def _matmul_schemas() -> tuple:
    return (
        LightOpSchema(
            MS_DOMAIN, "CDist", 1,
            "Pairwise distances of the rows of A (M, K) and B (N, K): C[i, j] = sum_k (A[i, k] "
            "- B[j, k])^2 for metric 'sqeuclidean', its square root for 'euclidean'.  The "
            "differences are summed directly, so no squared distance is negative.",
            inputs=(P("A", "T", "(M, K)."), P("B", "T", "(N, K).")),
            outputs=(P("C", "T", "(M, N)."),),
            attributes=(A("metric", "STRING", "sqeuclidean or euclidean.", "sqeuclidean"),),
            type_constraints=(TC("T", (_F, _F64), "float or double."),),
            infer=_cdist_infer,
        ),
        LightOpSchema(
            MS_DOMAIN, "FusedGemm", 1,
            "Y = activation(alpha * op(A) op(B) + beta * C), Gemm with a fused activation: "
            "A and B 2-D (op transposes when transA/transB), C broadcast to (M, N), beta 0 "
            "ignores C.  activation (required by the kernel) is one of Relu, Tanh, Sigmoid, "
            "LeakyRelu, HardSigmoid, Elu, Selu, ThresholdedRelu, Softplus, Softsign, "
            "ScaledTanh, ParametricSoftplus or Celu, with the activation_* parameters it "
            "reads (required, no defaults).  The activation runs on the float32 product; "
            "float32, float16 and bfloat16 (this package's extension) run, the other types "
            "of ONNX Runtime's schema have no kernel here (nor on ONNX Runtime's CPU).",
            inputs=(P("A", "T", "(M, K), or (K, M) with transA."),
                    P("B", "T", "(K, N), or (N, K) with transB."),
                    P("C", "T", "Broadcast to (M, N).", optional=True)),
            outputs=(P("Y", "T", "(M, N)."),),
            attributes=(
                A("activation", "STRING", "The activation's name."),
                A("activation_alpha", "FLOAT", "The activation's alpha."),
                A("activation_beta", "FLOAT", "The activation's beta."),
                A("activation_gamma", "FLOAT", "The activation's gamma (Selu)."),
                A("alpha", "FLOAT", "Scale of the product.", 1.0),
                A("beta", "FLOAT", "Scale of C.", 1.0),
                A("transA", "INT", "1: A is transposed.", 0),
                A("transB", "INT", "1: B is transposed.", 0),
            ),
            type_constraints=(TC("T", (_F16, _F, _F64, "tensor(uint32)", "tensor(uint64)",
                                       _I32, _I64, _BF16), "Tensor types."),),
            infer=_fused_gemm_infer,
        ),
        LightOpSchema(
            MS_DOMAIN, "FusedConv", 1,
            "Y = activation(Conv(X, W) + B + Z): an ai.onnx Conv (1-D to 3-D, group, "
            "strides, pads, dilations, auto_pad) with an optional Z of the output's shape "
            "added before the activation, one of Relu, Tanh, Sigmoid, LeakyRelu "
            "(activation_params: alpha), Clip (min, max) or HardSigmoid (alpha, beta); "
            "no activation leaves the sum as it is.  float32 runs (as on ONNX Runtime's CPU); "
            "float16 and double of ONNX Runtime's schema have no kernel here.",
            inputs=(P("X", "T", "(N, C, D1, ...)."),
                    P("W", "T", "(M, C / group, k1, ...)."),
                    P("B", "T", "(M,).", optional=True),
                    P("Z", "T", "The output's shape, added before the activation.",
                      optional=True)),
            outputs=(P("Y", "T", "(N, M, O1, ...)."),),
            attributes=(
                A("activation", "STRING", "The activation's name (none: identity)."),
                A("activation_params", "FLOATS", "The activation's parameters."),
                A("auto_pad", "STRING", "NOTSET, SAME_UPPER, SAME_LOWER or VALID.", "NOTSET"),
                A("dilations", "INTS", "Per spatial axis."),
                A("group", "INT", "Groups of channels.", 1),
                A("kernel_shape", "INTS", "W's spatial shape."),
                A("pads", "INTS", "Starts then ends."),
                A("strides", "INTS", "Per spatial axis."),
            ),
            type_constraints=(TC("T", (_F16, _F, _F64), "Float types."),),
            infer=_fused_conv_infer,
        ),
        LightOpSchema(
            MS_DOMAIN, "FusedMatMul", 1,
            "Y = alpha * op(A) op(B) with numpy.matmul semantics (1-D operands, broadcast "
            "batch dimensions).  transBatchA reads A (d0, d1, ..., d(r-2), d(r-1)) as (d1, "
            "..., d(r-2), d0, d(r-1)), then transA swaps its last two axes; likewise for B.  "
            "transBatchA and transBatchB need two inputs of the same rank >= 3; transA and "
            "transB are ignored for a 1-D operand.  Half types are summed in float32 and "
            "rounded once; bfloat16 is this package's extension.",
            inputs=(P("A", "T", "Rank >= 1."), P("B", "T", "Rank >= 1.")),
            outputs=(P("Y", "T", "Broadcast batch + (M,) + (N,) (1-D operands drop theirs)."),),
            attributes=(
                A("alpha", "FLOAT", "Scale of the product.", 1.0),
                A("transA", "INT", "1: A's last two axes are swapped.", 0),
                A("transB", "INT", "1: B's last two axes are swapped.", 0),
                A("transBatchA", "INT", "1: A's first axis moves before its last one.", 0),
                A("transBatchB", "INT", "1: B's first axis moves before its last one.", 0),
            ),
            type_constraints=(TC("T", _GELU_TYPES, "Float tensors."),),
            infer=_fused_matmul_infer,
        ),
    )


# -- ExpandDims, Range, Trilu, Unique -----------------------------------------


def _expand_dims_infer(ctx) -> None:
    op = "ExpandDims"
    x = shape(ctx, 0)
    _scalar_like(op, ctx, 1, "axis")
    t = elem_type(ctx, 0)
    if x is None:
        set_output(ctx, 0, t, None)
        return
    axis = _constant(ctx, 1)
    if axis is None:
        set_output(ctx, 0, t, [None] * (len(x) + 1))
        return
    position = int(axis.reshape(-1)[0])
    rank = len(x)
    if not -(rank + 1) <= position <= rank:
        _fail(op, "axis", f"must be in [{-(rank + 1)}, {rank}] for X of rank {rank}, "
              f"got {position}")
    if position < 0:
        position += rank + 1
    set_output(ctx, 0, t, x[:position] + [1] + x[position:])


def _range_infer(ctx) -> None:
    op = "Range"
    for i, name in ((0, "start"), (1, "limit"), (2, "delta")):
        _scalar_like(op, ctx, i, name)
    t = elem_type(ctx, 0)
    start, limit = _constant(ctx, 0), _constant(ctx, 1)
    delta = _constant(ctx, 2) if _has(ctx, 2) else 1
    if start is None or limit is None or delta is None:
        set_output(ctx, 0, t, [None])  # data-dependent: a fresh dim
        return
    first, last = start.reshape(-1)[0], limit.reshape(-1)[0]
    step = np.asarray(delta).reshape(-1)[0]
    if step == 0:
        _fail(op, "delta", "must not be zero")
    if start.dtype.kind == "f":
        with np.errstate(all="ignore"):
            count = np.ceil((np.float64(last) - np.float64(first)) / np.float64(step))
        if not math.isfinite(count):
            _fail(op, "limit", "gives a number of elements that is not finite")
    else:
        count = -((int(first) - int(last)) // int(step))
    if count >= 2.0 ** 63:
        _fail(op, "limit", f"gives {count:g} elements, more than an int64 counts")
    set_output(ctx, 0, t, [max(int(count), 0)])


def _trilu_infer(ctx) -> None:
    x = shape(ctx, 0)
    if x is not None and len(x) < 2:
        _fail("Trilu", "X", f"must have rank >= 2, got {len(x)}")
    _scalar_like("Trilu", ctx, 1, "k")
    set_output(ctx, 0, elem_type(ctx, 0), x)


def _unique_infer(ctx) -> None:
    x = shape(ctx, 0)
    check_rank("Unique", "x", x, (1,))
    set_output(ctx, 0, elem_type(ctx, 0), [None])  # data-dependent: a fresh dim
    set_output(ctx, 1, TensorProto.INT64, x)
    set_output(ctx, 2, TensorProto.INT64, [None])


def _tensor_schemas() -> tuple:
    return (
        LightOpSchema(
            MS_DOMAIN, "ExpandDims", 1,
            "Y is a copy of X with a dimension of 1 inserted at position axis (int32, shape () "
            "or (1,), in [-(r + 1), r] for X of rank r; a negative axis counts from the end "
            "of Y's shape).  The shape is inferred when axis is a constant, the rank only "
            "otherwise.",
            inputs=(P("X", "T", "Any tensor."), P("axis", _I32, "Where the new axis goes.")),
            outputs=(P("Y", "T", "X's shape with a 1 inserted."),),
            type_constraints=(TC("T", _ALL_BUT_BF16, "Tensor types (complex: no kernel)."),),
            infer=_expand_dims_infer,
        ),
        LightOpSchema(
            MS_DOMAIN, "Range", 1,
            "Y = start, start + delta, ... while below limit (above for a negative delta): "
            "ceil((limit - start) / delta) elements, none when negative.  start, limit and "
            "delta (default 1, never 0) have shape () or (1,).  The values accumulate start "
            "+= delta in the element type.  The length is static when start, limit and "
            "delta are constants, a fresh dim otherwise.",
            inputs=(P("start", "T", "First value."), P("limit", "T", "Exclusive bound."),
                    P("delta", "T", "Step, default 1.", optional=True)),
            outputs=(P("Y", "T", "1-D."),),
            type_constraints=(TC("T", (_F, _F64, "tensor(int16)", _I32, _I64),
                                 "Numeric types."),),
            infer=_range_infer,
        ),
        LightOpSchema(
            MS_DOMAIN, "Trilu", 1,
            "Y = X with the elements outside a triangle of its last two axes zeroed: upper "
            "(any non-zero value) keeps j - i >= k, lower (0) keeps j - i <= k.  X has rank "
            ">= 2; k (int64, shape () or (1,), default 0) may take any value.",
            inputs=(P("X", "T", "Rank >= 2."),
                    P("k", _I64, "Diagonal offset.", optional=True)),
            outputs=(P("Y", "T", "X's shape and type."),),
            attributes=(A("upper", "INT", "Non-zero: the upper triangle; 0: the lower.", 1),),
            type_constraints=(TC("T", (_F16, _F, _F64, _BF16, "tensor(uint8)",
                                       "tensor(uint16)", "tensor(uint32)", "tensor(uint64)",
                                       "tensor(int8)", "tensor(int16)", _I32, _I64,
                                       "tensor(bool)"), "Tensor types."),),
            infer=_trilu_infer,
        ),
        LightOpSchema(
            MS_DOMAIN, "Unique", 1,
            "The distinct values of the 1-D x in order of first occurrence (y), each "
            "element's position in y (idx, x's shape) and how often each occurs (counts).  "
            "-0.0 and 0.0 are one value; every NaN is a value of its own.  y and counts have "
            "a data-dependent length: a fresh dim each.",
            inputs=(P("x", "T", "1-D."),),
            outputs=(P("y", "T", "Distinct values."),
                     P("idx", _I64, "Index into y of each element of x."),
                     P("counts", _I64, "Occurrences of each value of y.")),
            type_constraints=(TC("T", _ALL_BUT_BF16, "Tensor types."),),
            infer=_unique_infer,
        ),
    )


def schemas() -> tuple:
    """The LightOpSchema records of this family."""
    return (_skip_norm_schemas() + _embed_schemas() + _moe_schemas()
            + _activation_schemas() + _matmul_schemas() + _tensor_schemas())

