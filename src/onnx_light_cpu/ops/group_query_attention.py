"""com.microsoft GroupQueryAttention as ONNX Runtime's CPU kernel runs it (the
OPTIMIZED family; the NAIVE one is in
:mod:`onnx_light_cpu.naive.group_query_attention`).

    query [B, S, N*H] (or packed [B, S, (N + 2 Nkv) H] with key/value absent)
    key, value [B, S, Nkv*H]; past_key/past_value [B, Nkv, P, H] (BNSH)
    seqlens_k[b] = total length T[b] of entry b - 1; total_sequence_length

total_sequence_length must be positive, at least S, and equal P + S (a
growing cache; P = 0 without past inputs) or be at most P (a static cache),
as ONNX Runtime 1.32 requires (measured); seqlens_k[b] lies in [0, total).
The first prompt is a call with S == total_sequence_length: every entry
starts at position 0 (entries shorter than S are right-padded).  Otherwise
entry b's S new tokens follow its past_len = T[b] - S cached ones (with
query_seqlens Q: its first Q[b] rows follow T[b] - Q[b]).
present_key/value [B, Nkv, max(P, total_sequence_length), H] hold the past
rows, then the (rotated) new ones, zeros after (a static buffer P >=
total_sequence_length keeps its length).  Query s of entry b sits at
position past_len + s and attends keys [begin, min(past_len + s + 1, T[b]))
(causal) where a positive local_window_size W counts the current token
(begin = end - W), or every key of the entry (causal=0).

Scores: (scale q).k, softcap c*tanh(x/c), + attention_bias (columns by
absolute key position), softmax with head_sink (or a zero sink for
smooth_softmax) in the denominator.  The shared engine
(:func:`onnx_light_cpu._kernels.engines.attention.attend`) runs the softmax without
materialising the scores and fills present from past while it reads it.

With the evaluator context's ``share_kv_buffers`` (set only by the
generation loop) a static cache's past buffers, when dense and writable,
receive the new rows in place and are returned as the presents (ONNX
Runtime's past_present_share_buffer): rows past each entry's length keep
what they held instead of zeros.

sliding_window_cache=1 keeps window-sized buffers (see ``_windowed``);
qk_output materialises the scores only when the output is requested.

Quantized KV cache, as ONNX Runtime 1.32's CPU kernel computes it (measured;
the spec says nothing of it): k_quant_type == v_quant_type in {PER_TENSOR,
PER_CHANNEL} with kv_cache_bit_width 8 or 4 (NONE: width 0, k_scale and
v_scale ignored).  past/present caches are int8 [B, Nkv, P, H] (8 bits) or
uint8 [B, Nkv, P, H/2] holding code + 8, the low nibble the even channel (4
bits); past inputs are required (of length 0 for a first prompt: they give
the present caches' type).  k_scale/v_scale (inputs 12/13) are float32
dequantization scales of any shape holding 1 (PER_TENSOR) or Nkv*H
(PER_CHANNEL, channel order [Nkv, H]) values.  The new K (after the packed
split and rotary) and V are quantized as clamp(round-half-even(x *
float32(1/scale))) -- a multiplication by the float32 reciprocal, not a
division; a zero scale multiplies by 1 and NaN gives the largest code, as
ONNX Runtime -- and attention reads every key dequantized (code * scale in
float32), the step's own keys included, at prefill too; FLOAT16 queries
attend in float32 like FLOAT ones.  The engine dequantizes each tile of
codes as it reads it (no float copy of the cache).

Rejected with NotImplementedError: q/k norm weights (inputs 14/15; ONNX
Runtime's CPU kernel rejects them too) and output_qk together with a
windowed cache.  Unlike ONNX Runtime, head sizes need not be multiples of 8
(16 with rotary; 32 for a windowed 4-bit cache).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels.engines import attention as core
from .._kernels.engines import rotary as rotary_core
from ..memory import CHECK_FROM_BYTES, check_buffer
from ..reference.attention_core import dequantize
from ._base import EVERY_INPUT, Attr, Input, KernelOp
from ._contract import REQUIRED
from ._layout import engine_ready

T = TensorProto
_INT32_MAX = 2**31 - 1
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)

QUANT_TYPES = ("NONE", "PER_TENSOR", "PER_CHANNEL")
#: Code element type of a quantized cache per kv_cache_bit_width.
CODE_TYPES = {8: np.dtype(np.int8), 4: np.dtype(np.uint8)}

#: Input positions in ONNX Runtime's order.
INPUTS = ("query", "key", "value", "past_key", "past_value", "seqlens_k",
          "total_sequence_length", "cos_cache", "sin_cache", "position_ids",
          "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
          "k_norm_weight", "query_seqlens")


_NONES = (None,) * len(INPUTS)


def _past_length_free(key: tuple, args: tuple) -> tuple:
    """``key`` (``_runloop.plan_key``: level, threads, then per input its
    dtype and shape, or None) with the length axis of past_key and
    past_value (inputs 3 and 4, both given) as -1, a length no array has."""
    out = list(key)
    pos = 2
    for i, a in enumerate(args):
        if a is None:
            pos += 1
            continue
        if i in (3, 4):
            shape = out[pos + 1]
            out[pos + 1] = shape[:2] + (-1,) + shape[3:]
        pos += 2
    return tuple(out)


def _ready(x: np.ndarray) -> np.ndarray:
    """``engine_ready(x)``, with the common dense case first."""
    return x if x.flags.c_contiguous else engine_ready(x)


class Plan(NamedTuple):
    """What a run needs that the inputs' shapes and the attributes decide."""

    B: int
    S: int
    N: int
    Nkv: int
    H: int
    packed: bool
    P: int          # past_key's length (the cache capacity of a static cache)
    scale: float
    # present lengths up to this need no memory check (every buffer of the
    # run is below memory.CHECK_FROM_BYTES); -1: always check
    unchecked_length: int
    zero_sink: np.ndarray | None   # smooth_softmax's sink
    cache_dtype: np.dtype          # the present caches': the query's, or the codes'
    Hc: int                        # their last dimension (H, or H / 2 for 4-bit codes)
    one_row: bool                  # one entry, one new token, nothing else: core.decode_row's case


class GroupQueryAttentionBase(KernelOp):
    """Attributes, validation, positions, key ranges and the present cache,
    shared by both families; subclasses implement ``_rotate``, ``_append``
    and ``_attend``.  The plan checks what the shapes and attributes decide;
    ``_execute`` what the values of seqlens_k, total_sequence_length,
    query_seqlens and position_ids decide, then runs."""

    strided_inputs = EVERY_INPUT  # engine_ready copies only what the core cannot read

    op_domain = "com.microsoft"
    inputs = (Input("query", types=FLOATS, ranks=(3,)),
              Input("key", like=0, ranks=(3,), optional=True),
              Input("value", like=0, ranks=(3,), optional=True),
              # the caches' types are checked by the plan: the query's, or
              # int8/uint8 codes of a quantized cache
              Input("past_key", ranks=(4,), optional=True),
              Input("past_value", ranks=(4,), optional=True),
              Input("seqlens_k", types=(T.INT32,), ranks=(1,)),
              Input("total_sequence_length", types=(T.INT32,)),
              # read only with do_rotary (ignored without, as ORT does)
              Input("cos_cache", optional=True),
              Input("sin_cache", optional=True),
              Input("position_ids", optional=True),
              Input("attention_bias", like=0, ranks=(4,), optional=True),
              Input("head_sink", like=0, ranks=(1,), optional=True),
              Input("k_scale", optional=True),
              Input("v_scale", optional=True),
              Input("q_norm_weight", optional=True),
              Input("k_norm_weight", optional=True),
              Input("query_seqlens", types=(T.INT32,), ranks=(1,), optional=True))
    attributes = (Attr("num_heads", "int", REQUIRED),
                  Attr("kv_num_heads", "int", REQUIRED),
                  Attr("scale", "float", 0.0),
                  Attr("softcap", "float", 0.0),
                  Attr("causal", "flag", 1),
                  Attr("local_window_size", "int", -1),
                  Attr("do_rotary", "flag", 0),
                  Attr("rotary_interleaved", "flag", 0),
                  # -1 is ORT's schema default and means off, as 0 does
                  Attr("smooth_softmax", "int", 0, allowed=(-1, 0, 1)),
                  Attr("qk_output", "int", 0, allowed=(0, 1, 2)),
                  Attr("sliding_window_cache", "flag", 0),
                  Attr("k_quant_type", "string", "NONE", allowed=QUANT_TYPES),
                  Attr("v_quant_type", "string", "NONE", allowed=QUANT_TYPES),
                  Attr("kv_cache_bit_width", "int", 0))

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        N, Nkv, window = self.num_heads, self.kv_num_heads, self.local_window_size
        if N is not None and Nkv is not None:
            if N <= 0 or Nkv <= 0:
                self._reject_attribute(f"num_heads ({N}) and kv_num_heads ({Nkv}) must be "
                                       "positive")
            elif N % Nkv:
                self._reject_attribute(f"num_heads ({N}) must be a multiple of kv_num_heads "
                                       f"({Nkv})")
        if not math.isfinite(self.scale):
            self._reject_attribute("attribute scale must be finite (0: 1/sqrt(head_size)), "
                                   f"got {self.scale}")
        if not math.isfinite(self.softcap):
            self._reject_attribute(f"attribute softcap must be finite, got {self.softcap}")
        self.softcap = max(self.softcap, 0.0)   # <= 0: no softcap, as ORT
        self.smooth_softmax = self.smooth_softmax == 1
        if window == 0 or window < -1 or window > _INT32_MAX:
            self._reject_attribute(f"attribute local_window_size must be -1 or in "
                                   f"[1, {_INT32_MAX}], got {window}")
        elif window > 0 and not self.causal:
            self._reject_attribute(f"attribute local_window_size must be -1 when causal is 0, "
                                   f"got {window}")
        # Quantized KV cache: ONNX Runtime's checks, in its order.
        kq, vq, bits = self.k_quant_type, self.v_quant_type, self.kv_cache_bit_width
        self._kv_bits = 0
        if kq != vq:
            self._reject_attribute(f"k_quant_type ({kq!r}) and v_quant_type ({vq!r}) must be "
                                   "equal")
        elif kq != "NONE":
            if bits not in (4, 8):
                self._reject_attribute(f"attribute kv_cache_bit_width must be 4 or 8 with "
                                       f"k_quant_type {kq!r}, got {bits}")
            else:
                self._kv_bits = bits
        elif bits != 0:
            self._reject_attribute(f"attribute kv_cache_bit_width must be 0 without a quantized "
                                   f"KV cache (k_quant_type 'NONE'), got {bits}")
        outputs = onnx_node.output
        self._n_outputs = len(outputs)
        if self._n_outputs > 3 and outputs[3] and self.qk_output == 0:
            self._reject_attribute("output 3 (output_qk) needs attribute qk_output 1 or 2")
        self._want_qk = self._n_outputs > 3 and bool(outputs[3]) and self.qk_output > 0

    # -- validation -------------------------------------------------------

    def _new_plan(self, key: tuple, args: tuple):
        """A growing cache is one row longer every step, and every step's
        inputs are then a new signature: the plans are kept per signature
        with the caches' length left out (``P`` set from past_key), so that
        a long generation does not build a plan a step.  The checks that
        depend on that length (past_value's equal to past_key's, a window
        cache at least the window) go to ``_plan``, which words the error."""
        if len(args) <= 4 or args[3] is None or args[4] is None:
            return super()._new_plan(key, args)
        P = args[3].shape[2]
        if P != args[4].shape[2] or (self.sliding_window_cache and P < self.local_window_size):
            return super()._new_plan(key, args)
        plan = super()._new_plan(_past_length_free(key, args), args)._replace(P=P)
        self._last_plan = (key, plan)
        return plan

    def _shape(self, i, x, shape):
        if x.shape != tuple(shape):
            raise ValueError(self._input_error(i, f"must have shape {tuple(shape)}, got {x.shape}"))

    def _plan(self, *args):
        op = self.onnx_node.op_type
        x = dict(zip(INPUTS, args + (None,) * (len(INPUTS) - len(args))))
        for i in (14, 15):
            if x[INPUTS[i]] is not None:
                raise NotImplementedError(self._input_error(
                    i, "is not supported (q/k norms are not implemented, as ONNX Runtime's CPU "
                       "kernel)"))
        bits = self._kv_bits
        for i in (12, 13):
            if bits and x[INPUTS[i]] is None:
                raise ValueError(f"{op}: input {i} ({INPUTS[i]!r}) is required with "
                                 f"k_quant_type {self.k_quant_type!r}")
        q = x["query"]
        dt = q.dtype
        N, Nkv = self.num_heads, self.kv_num_heads
        B, S, D = q.shape
        key, value = x["key"], x["value"]
        packed = key is None
        if packed:
            if value is not None:
                raise ValueError(self._input_error(
                    2, "must be absent when key is absent (packed QKV)"))
            if D % (N + 2 * Nkv):
                raise ValueError(self._input_error(
                    0, f"packed QKV last dimension {D} is not a multiple of num_heads + "
                       f"2 * kv_num_heads = {N + 2 * Nkv}"))
            H = D // (N + 2 * Nkv)
        else:
            if value is None:
                raise ValueError(self._input_error(2, "is required when key is given"))
            if D % N:
                raise ValueError(self._input_error(
                    0, f"last dimension {D} is not a multiple of num_heads {N}"))
            H = D // N
            for i, t in ((1, key), (2, value)):
                self._shape(i, t, (B, S, Nkv * H))
        if H == 0:
            raise ValueError(self._input_error(0, f"gives head size 0 (shape {q.shape})"))
        pk, pv = x["past_key"], x["past_value"]
        if (pk is None) != (pv is None):
            raise ValueError(f"{op}: past_key and past_value must be given together")
        P = 0
        Hc = H            # a cache row's elements (4-bit: two codes a byte)
        if bits:
            if pk is None:
                raise ValueError(f"{op}: a quantized KV cache (kv_cache_bit_width {bits}) needs "
                                 "past_key and past_value (of length 0 for a first prompt): "
                                 "their element type is the present cache's")
            if bits == 4 and H % 2:
                raise ValueError(self._input_error(
                    0, f"gives head size {H}: a 4-bit KV cache needs an even head size"))
            Hc = H if bits == 8 else H // 2
            for i, past in ((3, pk), (4, pv)):
                if past.dtype != CODE_TYPES[bits]:
                    raise TypeError(self._input_error(
                        i, f"has element type {past.dtype}, expected {CODE_TYPES[bits]} for "
                           f"kv_cache_bit_width {bits}"))
            n = 1 if self.k_quant_type == "PER_TENSOR" else Nkv * H
            for i in (12, 13):
                sc = x[INPUTS[i]]
                if sc.dtype != np.float32:
                    raise TypeError(self._input_error(
                        i, f"has element type {sc.dtype}, expected float32"))
                if sc.size != n:
                    raise ValueError(self._input_error(
                        i, f"must have {n} elements for {self.k_quant_type} (kv_num_heads * "
                           f"head_size = {Nkv} * {H} for PER_CHANNEL), got shape {sc.shape}"))
        if pk is not None:
            for i, past in ((3, pk), (4, pv)):
                if not bits and past.dtype != dt:
                    raise TypeError(self._input_error(
                        i, f"has element type {past.dtype}, expected {dt} like input 0"))
            P = pk.shape[2]
            self._shape(3, pk, (B, Nkv, P, Hc))
            self._shape(4, pv, (B, Nkv, P, Hc))
        self._shape(5, x["seqlens_k"], (B,))
        tot = x["total_sequence_length"]
        if tot.size != 1 or tot.ndim > 1:
            raise ValueError(self._input_error(6, f"must be a scalar, got shape {tot.shape}"))
        qsl = x["query_seqlens"]
        if qsl is not None:
            self._shape(16, qsl, (B,))
            if not self.causal:
                raise ValueError(self._input_error(16, "requires causal=1"))
            if pk is None:
                raise ValueError(self._input_error(16, "requires past_key and past_value"))
        if self.sliding_window_cache:
            if self.local_window_size <= 0:
                raise ValueError(f"{op}: sliding_window_cache=1 needs local_window_size > 0")
            if pk is None:
                raise ValueError(f"{op}: sliding_window_cache=1 needs past_key and past_value "
                                 "(their length is the cache capacity)")
            if P < self.local_window_size:
                raise ValueError(self._input_error(
                    3, f"sliding_window_cache: capacity {P} must be at least local_window_size "
                       f"({self.local_window_size})"))
            if self._want_qk:
                raise NotImplementedError(f"{op}: output_qk with sliding_window_cache=1 is not "
                                          "implemented")
        if self.do_rotary:   # (without do_rotary the caches are ignored, as ORT does)
            cos, sin = x["cos_cache"], x["sin_cache"]
            if cos is None or sin is None:
                raise ValueError(f"{op}: do_rotary=1 needs inputs cos_cache and sin_cache")
            for i, c in ((7, cos), (8, sin)):
                if c.dtype != dt:
                    raise TypeError(self._input_error(
                        i, f"has element type {c.dtype}, expected {dt} like input 0"))
                if c.ndim != 2:
                    raise ValueError(self._input_error(
                        i, f"has rank {c.ndim} (shape {c.shape}), expected rank 2"))
            if sin.shape != cos.shape:
                raise ValueError(self._input_error(8, f"has shape {sin.shape}, expected "
                                                      f"{cos.shape} like cos_cache"))
            if cos.shape[1] == 0 or 2 * cos.shape[1] > H:
                raise ValueError(self._input_error(
                    7, f"shape {cos.shape}: the rotary dimension 2 * {cos.shape[1]} must be in "
                       f"[2, head size {H}]"))
            pid = x["position_ids"]
            if pid is not None:
                if pid.dtype != np.int64:
                    raise TypeError(self._input_error(
                        9, f"has element type {pid.dtype}, expected one of int64"))
                if pid.ndim != 2:
                    raise ValueError(self._input_error(
                        9, f"has rank {pid.ndim} (shape {pid.shape}), expected rank 2"))
                self._shape(9, pid, (B, S))
        bias = x["attention_bias"]
        if bias is not None and (bias.shape[0] not in (1, B) or bias.shape[1] not in (1, N)
                                 or bias.shape[2] != S):
            raise ValueError(self._input_error(
                10, f"must have shape (1 or {B}, 1 or {N}, {S}, total_sequence_length), got "
                    f"{bias.shape}"))
        if x["head_sink"] is not None:
            self._shape(11, x["head_sink"], (N,))
        scale = self.scale if self.scale != 0.0 else 1.0 / math.sqrt(H)
        # The largest present length L whose buffers (present [B, Nkv, L, H],
        # output_qk's float32 work (3, B, N, S, total <= L)) and the fixed
        # ones (output, rotated query and key) are all below the size the
        # memory checks start at.
        item = dt.itemsize
        fixed = max(B * S * N * H * item, B * S * (N + Nkv) * H * item if self.do_rotary else 0)
        cache_dtype = CODE_TYPES[bits] if bits else dt
        per_row = max(B * Nkv * Hc * cache_dtype.itemsize,
                      3 * B * N * S * 4 if self._want_qk else 0)
        if fixed >= CHECK_FROM_BYTES:
            unchecked = -1
        elif per_row == 0:
            unchecked = _INT32_MAX
        else:
            unchecked = (CHECK_FROM_BYTES - 1) // per_row
        zero_sink = np.zeros(N, np.float32) if self.smooth_softmax else None
        one_row = (B == 1 and S == 1 and packed and pk is not None and not bits
                   and not self.sliding_window_cache and not self._want_qk and qsl is None
                   and bias is None and x["head_sink"] is None and not self.smooth_softmax
                   and not (self.do_rotary and x["position_ids"] is not None))
        return Plan(B, S, N, Nkv, H, packed, P, scale, unchecked, zero_sink, cache_dtype, Hc,
                    one_row)

    def _execute(self, plan, *args):
        # Per-call glue of a decode step costs more than its attention at
        # small sizes: the checks work on Python ints and lists (B entries),
        # the per-entry arrays come from one Cython pass (core.gqa_rows).
        op = self.onnx_node.op_type
        x = args + _NONES[len(args):]
        B, S, N, Nkv, H, P = plan.B, plan.S, plan.N, plan.Nkv, plan.H, plan.P
        q, pk, pv, seqlens, qsl = x[0], x[3], x[4], x[5], x[16]
        dt = q.dtype
        total = x[6].item()      # one element (the plan checked)
        if total <= 0 and B:
            raise ValueError(self._input_error(6, f"must be positive, got {total}"))
        if qsl is None and total < S:
            raise ValueError(self._input_error(
                6, f"({total}) must be at least the sequence length {S}"))
        sl = seqlens.tolist()
        lens = [n + 1 for n in sl]                         # total length per entry
        if B and min(sl) < 0:
            raise ValueError(self._input_error(5, f"values must be >= 0, got {sl}"))
        if B and max(lens) > total:
            raise ValueError(self._input_error(
                5, f"values {sl}: seqlens_k + 1 must not exceed "
                   f"total_sequence_length ({total})"))
        first = False
        if qsl is not None:
            # right-padded chunks: entry b appends its first Q[b] rows
            append = qsl.tolist()
            if B and (min(append) < 0 or any(a > min(n, S) for a, n in zip(append, lens))):
                raise ValueError(self._input_error(
                    16, f"values {append} must be in [0, min(sequence_length {S}, "
                        f"seqlens_k + 1)] per entry (seqlens_k {sl})"))
            past_len = [n - a for n, a in zip(lens, append)]
        else:
            first = S == total
            append = [S] * B
            if first:       # every entry starts at 0 (shorter ones right-padded)
                past_len = [0] * B
            else:
                past_len = [n - S for n in lens]
                if B and min(past_len) < 0:
                    raise ValueError(self._input_error(
                        5, f"values {sl} give fewer than the {S} new tokens "
                           f"(seqlens_k + 1 - sequence_length must be >= 0)"))
                if B > 1 and S > 1:
                    raise ValueError(f"{op}: batch_size must be 1 when sequence_length > 1 and "
                                     f"past context is given (got batch {B}, sequence {S})")
        past_max = max(past_len) if B else 0
        if self.sliding_window_cache:
            L = P
        else:
            L = max(P, total)                                      # present length
            if B and past_max > P:
                raise ValueError(self._input_error(
                    3, f"holds {P} positions but seqlens_k {sl} needs "
                       f"{past_max} past positions"))
            if qsl is None and total != P + S and total > P:
                # ONNX Runtime's rule, without a past cache too (P = 0): the
                # present buffers hold max(P, total) rows, so a larger total
                # would allocate for nothing
                raise ValueError(self._input_error(
                    6, f"({total}) must equal the past length + sequence_length "
                       f"({P} + {S}) for a growing cache, or be at most past_key's length "
                       f"{P} for a static one"))
            if qsl is not None and B and past_max + S > L:
                raise ValueError(self._input_error(
                    16, f"values {append}: the padded chunk of {S} rows after "
                        f"{past_max} cached ones does not fit the KV cache "
                        f"capacity {L}"))

        # rotary positions: past_len[b] + s (made by gqa_rows) unless
        # position_ids are given
        positions = None
        own_positions = False
        cos, sin = x[7], x[8]
        if self.do_rotary:
            pid = x[9]
            low = high = None
            if pid is None:
                own_positions = True
                if B and S:
                    low, high = min(past_len), past_max + S - 1
            else:
                # ONNX Runtime's first prompt reads only position_ids[0, 0]:
                # every entry counts up from it.
                positions = (np.broadcast_to(pid[0, 0] + np.arange(S, dtype=np.int64), (B, S))
                             if first and B and S else pid)
                if positions.size:
                    low, high = int(positions.min()), int(positions.max())
            if low is not None and (low < 0 or high >= cos.shape[0]):
                raise ValueError(self._input_error(
                    7 if pid is None else 9,
                    f"cos/sin caches have {cos.shape[0]} positions but positions up to "
                    f"{high} (min {low}) are needed"))

        bias = x[10]
        if bias is not None and bias.shape[3] != total:
            raise ValueError(self._input_error(
                10, f"must have shape (1 or {B}, 1 or {N}, {S}, {total}), got {bias.shape}"))
        sink = x[11]

        # Sizes first, nothing allocated yet (a broadcast past or query can
        # describe more than memory holds); the plan knows up to which
        # present length every buffer is too small to check.
        if L > plan.unchecked_length:
            for i, name in ((1, "present_key"), (2, "present_value")):
                check_buffer(op, f"output {i} ({name}, from past_key / total_sequence_length)",
                             (B, Nkv, L, plan.Hc), plan.cache_dtype.itemsize)
            check_buffer(op, "output 0", (B, S, N, H), dt.itemsize)
            if self.do_rotary:
                check_buffer(op, "the rotated query and key (input 0)", (B, S, N + Nkv, H),
                             dt.itemsize)
            if self._want_qk:
                # output_qk (B, N, S, total) and its float32 work
                check_buffer(op, "output 3 (output_qk)", (3, B, N, S, total), 4)
        start, count, past32, key_begin, key_end, own = core.gqa_rows(
            past_len, append, lens, S, self.causal, self.local_window_size, own_positions)
        if own_positions:
            positions = own

        # Q, new K/V as [B, S, heads, H] views (a strided or broadcast input:
        # a compact copy whose last axis the engine can read)
        q = _ready(q)
        if plan.packed:
            q4 = q.reshape(B, S, N + 2 * Nkv, H)
            vv = q4[:, :, N + Nkv:]
            if self.do_rotary:   # query and key heads are adjacent: one pass
                qk4 = self._rotate(q4[:, :, :N + Nkv], cos, sin, positions)
                qv, kv = qk4[:, :, :N], qk4[:, :, N:]
            else:
                qv, kv = q4[:, :, :N], q4[:, :, N:N + Nkv]
        else:
            qv = q.reshape(B, S, N, H)
            kv = _ready(x[1]).reshape(B, S, Nkv, H)
            vv = _ready(x[2]).reshape(B, S, Nkv, H)
            if self.do_rotary:
                qv = self._rotate(qv, cos, sin, positions)
                kv = self._rotate(kv, cos, sin, positions)

        scale = plan.scale
        fbias = None
        if bias is not None:
            fbias = np.broadcast_to(engine_ready(bias, np.float32), (B, N, S, total))
        if sink is not None:
            fsink = sink.astype(np.float32)
        elif self.smooth_softmax:
            fsink = plan.zero_sink
        else:
            fsink = None
        shared = self._in_place(pk, pv, plan, L)
        if shared:   # the past buffers are the presents: no copy of the cache
            present_k, present_v = pk, pv
        else:
            present_k = self._new_output((B, Nkv, L, plan.Hc), plan.cache_dtype, 1)
            present_v = self._new_output((B, Nkv, L, plan.Hc), plan.cache_dtype, 2)
        out = self._new_output((B, S, N, H), dt, 0)
        qt, ot = qv.transpose(0, 2, 1, 3), out.transpose(0, 2, 1, 3)
        qk = None
        kv_quant = None
        if self._kv_bits:
            # codes of the new rows (after the packed split and rotary),
            # attention over the dequantized cache, new keys included
            kv_quant = (self._kv_bits, self._scales(12, x[12], Nkv * H),
                        self._scales(13, x[13], Nkv * H))
        if self.sliding_window_cache:
            if kv_quant:   # the new rows' codes, [B, Nkv, S, Hc]
                codes = []
                for new, i in ((kv, 12), (vv, 13)):
                    c = np.empty((B, Nkv, S, plan.Hc), plan.cache_dtype)
                    self._quantize(new.astype(np.float32, copy=False), 0 * start, count, c,
                                   self._scales(i, x[i], Nkv * H, inverse=True), self._kv_bits)
                    codes.append(c)
                knew, vnew = codes
            else:
                knew, vnew = kv.transpose(0, 2, 1, 3), vv.transpose(0, 2, 1, 3)
            self._windowed(qt, knew, vnew, pk, pv, present_k, present_v, ot, lens, past_len,
                           append, scale, fbias, fsink, kv_quant)
        else:
            if total == L:
                kt, vt = present_k, present_v
            else:
                kt, vt = present_k[:, :, :total], present_v[:, :, :total]
            # The new rows now, zeros after them; the engine copies the past
            # rows (while it reads them).  A shared buffer keeps its rows
            # after total as they are, as ONNX Runtime's does: clearing a
            # static buffer of the whole context every step cost more than
            # the attention (4096 rows: Qwen2-0.5B int4 steps 12.6 -> 16.5 ms).
            ak, av = (kt, vt) if shared else (present_k, present_v)
            if kv_quant:
                for new, present, i in ((kv, ak, 12), (vv, av, 13)):
                    self._quantize(new.astype(np.float32, copy=False), start, count, present,
                                   self._scales(i, x[i], Nkv * H, inverse=True), self._kv_bits)
            else:
                self._append(kv, vv, start, count, ak, av)
            past = None
            if pk is not None and P and not shared:
                past = (_ready(pk), _ready(pv), past32)
            self._attend(qt, kt, vt, ot, scale, fbias, key_begin, key_end, fsink, past,
                         kv_quant)
            if self._want_qk:
                if kv_quant:
                    kt = dequantize(kt, kv_quant[1], self._kv_bits)
                qk = self._qk(qv, kt, scale, fbias, key_begin, key_end, fsink)
        outputs = [out.reshape(B, S, N * H), present_k, present_v]
        if self._n_outputs > 3:
            outputs.append(qk)
        return tuple(outputs[: max(self._n_outputs, 1)])

    def _in_place(self, pk, pv, plan, L: int) -> bool:
        """Whether the new rows go into the past buffers themselves, which
        come back as the presents (the context's ``share_kv_buffers``): a
        cache as long as the present one, not windowed, both buffers dense,
        writable, of the cache's type, and apart (K rows must not land in V)."""
        return (self._context.share_kv_buffers and not self.sliding_window_cache
                and L == plan.P and self._shareable(pk, plan) and self._shareable(pv, plan)
                and not np.shares_memory(pk, pv))

    @staticmethod
    def _shareable(past, plan) -> bool:
        """Whether a past buffer can take the new rows in place."""
        return (past is not None and past.dtype == plan.cache_dtype
                and past.flags.c_contiguous and past.flags.writeable)

    def _windowed(self, qt, knew, vnew, pk, pv, present_k, present_v, ot, lens, past_len,
                  append, scale, fbias, fsink, kv_quant=None):
        """sliding_window_cache=1: the buffers hold the L(T) most recent
        positions at rows [0, L(T)), L(T) = T if T <= C else
        T - G ceil((T - C) / G) with G = C - W + 1.  Each entry attends over
        its resident past rows followed by its new rows (staged), then keeps
        the newest L(T) of them.  knew/vnew: the new rows [B, Nkv, S, H]
        (their codes with ``kv_quant``)."""
        C, W = present_k.shape[2], self.local_window_size
        G = C - W + 1

        def resident(t):
            return t if t <= C else t - G * -(-(t - C) // G)

        S = qt.shape[2]
        for b in range(qt.shape[0]):
            t, p0, a = int(lens[b]), int(past_len[b]), int(append[b])
            lp = resident(p0)
            base = p0 - lp                     # absolute position of staged row 0
            n = min(lp + a, t - base)          # staged keys that exist after this step
            ks = np.concatenate([pk[b, :, :lp], knew[b, :, :a]], axis=1)[:, :n]
            vs = np.concatenate([pv[b, :, :lp], vnew[b, :, :a]], axis=1)[:, :n]
            lt = resident(t)
            for dst, st in ((present_k, ks), (present_v, vs)):
                dst[b, :, :lt] = st[:, t - lt - base:t - base]
                dst[b, :, lt:] = 0
            end = np.minimum(lp + np.arange(S) + 1, n)
            begin = np.minimum(np.maximum(end - W, 0), end)
            bias = None if fbias is None else fbias[b:b + 1, :, :, base:base + n]
            self._attend(qt[b:b + 1], ks[None], vs[None], ot[b:b + 1], scale, bias,
                         np.ascontiguousarray(begin[None], dtype=np.int32),
                         np.ascontiguousarray(end[None], dtype=np.int32), fsink,
                         kv_quant=kv_quant)

    def _qk(self, qv, kt, scale, fbias, key_begin, key_end, fsink):
        """output_qk [B, N, S, total_sequence_length], materialised (only when
        requested): the scores (qk_output=1) or the probabilities (2), zeros
        outside each query's key range."""
        B, S, N, H = qv.shape
        Nkv, T_ = kt.shape[1], kt.shape[2]
        group = N // Nkv
        qf = qv.transpose(0, 2, 1, 3).astype(np.float32)
        kf = np.repeat(kt.astype(np.float32), group, axis=1)
        sc = np.matmul(qf, kf.transpose(0, 1, 3, 2)) * np.float32(scale)   # [B, N, S, T]
        t = np.arange(T_)[None, None, :]
        inside = (t >= key_begin[:, :, None]) & (t < key_end[:, :, None])  # [B, S, T]
        inside = inside[:, None]
        if self.softcap > 0:
            sc = np.float32(self.softcap) * np.tanh(sc / np.float32(self.softcap))
        if fbias is not None:
            sc = sc + fbias
        if self.qk_output == 2:
            m = np.where(inside, sc, -np.inf).max(axis=-1, keepdims=True)
            if fsink is not None:
                m = np.maximum(m, fsink[None, :, None, None])
            m = np.where(np.isfinite(m), m, 0)
            with np.errstate(over="ignore", invalid="ignore"):  # masked entries only
                e = np.where(inside, np.exp(sc - m), 0)
            den = e.sum(axis=-1, keepdims=True)
            if fsink is not None:
                den = den + np.exp(fsink[None, :, None, None] - m)
            sc = np.where(den > 0, e / np.where(den > 0, den, 1), 0)
        else:
            sc = np.where(inside, sc, 0)
        return sc.astype(qv.dtype)

    def _scales(self, index, scale, n, inverse=False):
        """Input ``index`` (k_scale or v_scale, 1 or n float32 values) as
        float32 C-contiguous [n] (n = Nkv * H, channel order): the scales,
        or with ``inverse`` the multipliers that quantize, float32(1 /
        scale), 1 where the scale is 0 (ONNX Runtime's, measured).  Kept
        while the input is an initializer."""
        def prepare():
            s = np.broadcast_to(np.asarray(scale, np.float32).reshape(-1), (n,))
            if inverse:
                with np.errstate(divide="ignore", invalid="ignore"):
                    s = np.float32(1) / np.where(s == 0, np.float32(1), s)
            return np.ascontiguousarray(s, dtype=np.float32)
        return self._prepared_input(("kv_scale", index, inverse, n), index, scale, prepare)

    def _rotate(self, x, cos, sin, positions):
        raise NotImplementedError

    def _quantize(self, new, start, count, present, inv, bits):
        """Rows [start[b], start[b] + count[b]) of the quantized present cache
        ``present`` take the codes of rows [0, count[b]) of ``new`` (float32
        [B, S, Nkv, H]): clamp(round-half-even(x * inv[channel])), NaN to the
        largest code (ONNX Runtime's); zero bytes after them."""
        raise NotImplementedError

    def _append(self, new_k, new_v, start, count, present_k, present_v):
        """Rows [start[b], start[b] + count[b]) of the present caches [B, Nkv,
        L, H] from rows [0, count[b]) of new_k/new_v [B, S, Nkv, H], zeros
        after them (int64 start, count)."""
        raise NotImplementedError

    def _attend(self, q, k, v, out, scale, bias, key_begin, key_end, sink, past=None,
                kv_quant=None):
        """Attention into ``out``; ``past`` (past_k, past_v, lens): rows t <
        lens[b] of k and v come from the past cache first; ``kv_quant``
        (bits, k scales, v scales): k and v hold codes, attended
        dequantized in float32."""
        raise NotImplementedError


class GroupQueryAttention(GroupQueryAttentionBase):
    # Work is about B * N * S * T * H multiply-adds.  Measured on the engine
    # (2 cores, AVX-512, float32, head 128, best of 40): 262K is about even
    # (9.1 -> 6.4 us, a few microseconds of parallel region), 524K gains
    # (20.4 -> 10.8 us), 1M and up halves.
    min_work_per_thread = 1 << 18
    # Rotation is a light pass (0.14 ms for a 128-token prefill of 32 heads
    # of 128 on one thread) next to the attention: a parallel region of its
    # own only for large prefills.
    min_rotary_per_thread = 1 << 20

    def _rotate(self, x, cos, sin, positions):
        out = np.empty(x.shape, x.dtype)
        threads = self._num_threads(x.size, self.min_rotary_per_thread)
        rotary_core.rotate(x, np.ascontiguousarray(cos), np.ascontiguousarray(sin),
                           np.ascontiguousarray(positions, dtype=np.int64), out,
                           self.rotary_interleaved,
                           2 * cos.shape[1], simd.state.level, threads)
        return out

    def _execute(self, plan, *args):
        if plan.one_row:
            outputs = self._decode_row(plan, args)
            if outputs is not None:
                return outputs
        return super()._execute(plan, *args)

    def _decode_row(self, plan, args):
        """A decode step of one entry (the plan's ``one_row``) in one core
        call, core.decode_row: the general route's checks, reduced to this
        case, hold and the arrays are dense, else None (that route then
        words the error or copies).  Same bits as that route."""
        q, pk, pv, cos, sin = args[0], args[3], args[4], None, None
        total, row = args[6].item(), args[5].item()   # row: seqlens_k, the past length
        P = plan.P
        L = max(P, total)
        if not (0 <= row < total and row <= P and (total == P + 1 or total <= P)
                and L <= plan.unchecked_length and q.flags.c_contiguous):
            return None
        if self.do_rotary:
            cos, sin = args[7], args[8]
            if not (row < cos.shape[0] and cos.flags.c_contiguous and sin.flags.c_contiguous):
                return None
        shared = self._in_place(pk, pv, plan, L)
        if shared:
            present_k, present_v, past = pk, pv, None
        elif pk.flags.c_contiguous and pv.flags.c_contiguous:
            present_k = self._new_output((1, plan.Nkv, L, plan.H), q.dtype, 1)
            present_v = self._new_output((1, plan.Nkv, L, plan.H), q.dtype, 2)
            past = (pk, pv)
        else:
            return None
        N, H, window = plan.N, plan.H, self.local_window_size
        out = self._new_output((1, 1, N, H), q.dtype, 0)
        level = simd.state.level
        self._record(q.dtype, level, 0)
        core.decode_row(q.reshape(1, 1, -1, H), present_k, present_v, out, past, cos, sin, row,
                        total, total if shared else L,
                        max(row + 1 - window, 0) if self.causal and window > 0 else 0,
                        plan.scale, self.softcap, self.rotary_interleaved, level,
                        self._num_threads(N * total * H, self.min_work_per_thread))
        outputs = (out.reshape(1, 1, N * H), present_k, present_v, None)
        return outputs[: max(self._n_outputs, 1)]

    def _record(self, dtype, level, bits):
        self._record_path((dtype, level, bits), lambda: (
            f"group_query_attention_{dtype.name}{f'_int{bits}kv' if bits else ''}_"
            f"{simd.LEVEL_NAMES[core.level_used(level)]}"))

    def _append(self, new_k, new_v, start, count, present_k, present_v):
        core.append_rows(new_k, new_v, start, count, present_k, present_v)

    def _quantize(self, new, start, count, present, inv, bits):
        core.quantize_rows(new, start, count, present, inv, bits)

    def _attend(self, q, k, v, out, scale, bias, key_begin, key_end, sink, past=None,
                kv_quant=None):
        level = simd.state.level
        bits = kv_quant[0] if kv_quant else 0
        self._record(out.dtype, level, bits)
        B, N, S, H = q.shape
        work = B * N * S * max(k.shape[2], 1) * H
        threads = self._num_threads(work, self.min_work_per_thread)
        core.attend(q, k, v, out, scale=scale, bias=bias, key_begin=key_begin, key_end=key_end,
                    softcap=self.softcap, softcap_first=True, sink=sink, threads=threads,
                    level=level, past=past, kv_quant=kv_quant)


KERNELS = {
    "RegisterMicrosoftKernels": (GroupQueryAttention,),
}
