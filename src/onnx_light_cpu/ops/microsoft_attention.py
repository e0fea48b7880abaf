"""com.microsoft Attention, BERT's fused self-attention (the OPTIMIZED
family; the NAIVE one is in :mod:`onnx_light_cpu.naive.microsoft_attention`).

    q, k, v = input (B, S, Hin) @ weights (Hin, Dq + Dk + Dv) + bias
    out = softmax(scale * Q Kᵀ + masks + attention_bias) V      (B, S, Dv)

``qkv_hidden_sizes`` splits the weights (Dq must equal Dk; without it the
three parts are equal); ``scale`` 0 means 1/sqrt(head size).  ``past``
(2, B, N, P, H) precedes the new keys and values, and the optional
``present`` output (2, B, N, P + S, H) holds them all.

Masks, as ONNX Runtime 1.32's CPU kernel applies them (probed on
single-node models; this is the contract):
- ``mask_index`` int32 of shape (B,): key lengths, keys t >= end[b] masked;
  (2B,): ends then starts, keys outside [start[b], end[b]) masked;
  (3B + 2,): only its first B values are read, as key lengths;
  (B, T) or (B, S, T), T = P + S: 0/1 masks, a key whose value is not > 0
  is masked; (B, 1) or (1, 1) (unless T = 1) masks nothing (ORT reads one
  value broadcast over every key as no mask).  A masked key gets
  ``mask_filter_value`` ADDED to its score, so a row masked everywhere is
  an ordinary softmax, shifted.  A negative end is an error; ends past T
  are clamped.
- ``unidirectional=1`` (when S > 1): query s sees keys t <= P + s only; the
  others are excluded entirely (ORT writes the lowest float there, which
  replaces the padding value): a left-padded row whose only visible key is
  padding yields that key's value.
- ``attention_bias`` (B|1, N|1, S, T) is added to the scores.

The projection runs on the float GEMM engine (the weights packed once when
they are an initializer), the attention on the shared attention engine: the
causal frontier and, when ``mask_filter_value`` rules a key out for good,
the 1-D masks and right-padded 2-D masks become per-query key ranges; the
rest becomes a float32 bias.  With float32, constant weights, no past nor
present and (batch, head) tasks enough for the threads, the projection is
fused in: the weights are packed once head by head, and one task a (batch,
head) projects its head's q, k, v into a small buffer and attends them
while they are in cache (no (B, S, 3H) buffer, one parallel loop; the same
bits as the unfused path).  FLOAT and FLOAT16 as ONNX Runtime's CPU;
BFLOAT16 as this package's extension (q, k, v rounded to the input type as
ORT does for FLOAT16, then float32 arithmetic).

Where this package differs from ONNX Runtime's CPU kernel (documented
choices):
- ``past`` together with ``attention_bias`` (ORT rejects it) is supported:
  the bias covers the P + S keys;
- a 4-D mask (Megatron's (B, 1, M, M)), ``past_present_share_buffer=1``,
  the ``past_sequence_length`` input and ``do_rotary=1`` raise
  NotImplementedError, as ORT's CPU does;
- ``present`` with different K and V head sizes (ORT returns a buffer of V's
  head size whose K half is not meaningful) raises NotImplementedError;
- with ``mask_filter_value`` = -inf, a row whose every key is masked is zeros
  (ORT: NaN).
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import cast
from .._kernels.engines import attention as engine
from .._kernels.engines import gemm
from ..memory import check_buffer, prepared_empty
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp
from ._contract import REQUIRED
from ._layout import engine_ready
from .attention import (
    check_attention_bias,
    engine_level_name,
    microsoft_attribute_problem,
    run_engine,
    with_attention_bias,
)

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
ZERO = np.zeros(1, dtype=np.int64)
# A mask_filter_value this low adds exp(-100) ~ 4e-44 of a key's weight at
# most: the key is as good as absent, so a key range can skip it.
EXCLUDING_FILTER = -100.0
# (batch, head) tasks a thread needs for the fused projection: fewer, and
# the unfused GEMM's finer tiles balance the threads better.
FUSED_TASKS_PER_THREAD = 4


class Plan(NamedTuple):
    """What a run needs that the inputs' shapes decide."""

    b: int
    s: int
    hin: int
    n: int
    dq: int
    dv: int
    h: int           # head size of Q and K
    hv: int          # head size of V
    p: int           # past positions
    t: int           # total key positions P + S
    mask: str        # "", "ends", "ends_starts", "ends_of_3b2", "2d", "3d"
    scale: float
    element_type: int
    level: int
    proj_threads: int
    attn_threads: int


class MicrosoftAttentionBase(KernelOp):
    """Attributes, validation, projection, past/present and mask decoding,
    shared by both families; subclasses implement ``_attend``."""

    op_domain = "com.microsoft"
    #: The NAIVE family materialises the scores.
    computes_in_numpy: ClassVar[bool] = False

    inputs = (Input("input", types=FLOATS, ranks=(3,)),
              Input("weights", like=0, ranks=(2,)),
              Input("bias", like=0, ranks=(1,), optional=True),
              Input("mask_index", types=(T.INT32,), optional=True),
              Input("past", like=0, ranks=(5,), optional=True),
              Input("attention_bias", like=0, ranks=(4,), optional=True),
              Input("past_sequence_length", types=(T.INT32,), optional=True))
    attributes = (Attr("num_heads", "int", REQUIRED),
                  Attr("scale", "float", 0.0),
                  Attr("mask_filter_value", "float", -10000.0),
                  # ORT reads any value but 1 as 0: a typo must not go unnoticed
                  Attr("unidirectional", "flag", 0),
                  Attr("qkv_hidden_sizes", "ints", ()),
                  Attr("past_present_share_buffer", "flag", 0),
                  Attr("do_rotary", "flag", 0),
                  Attr("rotary_embedding_dim", "int", 0))

    #: Where Attention's inputs (input, weights, bias, mask_index, past,
    #: attention_bias, past_sequence_length) sit in the node: QAttention's
    #: differ.  Errors of the shared checks name the node's input.
    input_positions: ClassVar[tuple] = tuple(range(7))

    # Multiply-adds one thread must have before a second one helps: the
    # projection is a GEMM (MatMul's measured 2^17), the attention runs on
    # GroupQueryAttention's engine (2^19, counting both products).
    min_proj_work_per_thread = 1 << 17
    min_attn_work_per_thread = 1 << 19

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        outputs = list(onnx_node.output)
        self.n_outputs = len(outputs)
        self.wants_present = len(outputs) > 1 and bool(outputs[1])
        sizes = tuple(self.qkv_hidden_sizes or ())
        problem = microsoft_attribute_problem(self.num_heads, self.scale, self.mask_filter_value)
        if problem is not None:
            self._reject_attribute(problem)
        elif sizes and (len(sizes) != 3 or min(sizes) <= 0):
            self._reject_attribute("attribute qkv_hidden_sizes must hold 3 positive sizes, "
                                   f"got {list(sizes)}")
        elif sizes and sizes[0] != sizes[1]:
            self._reject_attribute("attribute qkv_hidden_sizes: the Q and K sizes must be "
                                   f"equal, got {list(sizes)}")
        elif self.do_rotary:
            self._reject_attribute("attribute do_rotary=1 is not supported (as in ONNX "
                                   "Runtime's CPU kernel: fuse MultiHeadAttention + "
                                   "RotaryEmbedding instead)")
        elif self.past_present_share_buffer:
            self._reject_attribute("attribute past_present_share_buffer=1 is not supported "
                                   "(as in ONNX Runtime's CPU kernel)")
        elif self.n_outputs > 2:
            self._reject_attribute(f"has at most 2 outputs (output, present), got "
                                   f"{self.n_outputs}")
        self.sizes = sizes

    # -- validation -----------------------------------------------------

    def _error_at(self, index: int, message: str) -> str:
        return self._input_error(self.input_positions[index], message)

    def _plan(self, x, weights, bias=None, mask_index=None, past=None, attention_bias=None,
              past_sequence_length=None):
        n = self.num_heads
        if past_sequence_length is not None:
            raise NotImplementedError(self._error_at(
                6, "(past_sequence_length, buffer sharing) is not supported"))
        b, s, hin = x.shape
        if weights.shape[0] != hin:
            raise ValueError(self._error_at(
                1, f"has shape {weights.shape}, expected ({hin}, Dq + Dk + Dv): its first "
                   f"dimension must be input 0's hidden size {hin}"))
        total = weights.shape[1]
        if self.sizes:
            dq, dk, dv = self.sizes
            if dq + dk + dv != total:
                raise ValueError(self._error_at(
                    1, f"has {total} columns, expected the sum of qkv_hidden_sizes "
                       f"{list(self.sizes)} = {dq + dk + dv}"))
        else:
            if total % 3:
                raise ValueError(self._error_at(
                    1, f"has {total} columns, not divisible into Q, K and V (3 equal parts)"))
            dq = dk = dv = total // 3
        for what, d in (("Q/K", dq), ("V", dv)):
            if d % n:
                raise ValueError(self._error_at(
                    1, f"has a {what} hidden size of {d}, not divisible into num_heads {n} "
                       "heads"))
        h, hv = dq // n, dv // n
        if bias is not None and bias.shape != (total,):
            raise ValueError(self._error_at(
                2, f"has shape {bias.shape}, expected ({total},) like weights' columns"))
        p = 0
        if past is not None:
            if h != hv:
                raise ValueError(self._error_at(
                    4, f"needs equal K and V head sizes, got {h} and {hv} (qkv_hidden_sizes)"))
            if past.shape[:3] != (2, b, n) or past.shape[4] != h:
                raise ValueError(self._error_at(
                    4, f"has shape {past.shape}, expected (2, batch, num_heads, past_sequence, "
                       f"head_size) = (2, {b}, {n}, P, {h})"))
            p = past.shape[3]
        elif self.wants_present and h != hv:
            raise NotImplementedError(f"{self.onnx_node.op_type}: output 1 (present) needs equal "
                                      f"K and V head sizes, got {h} and {hv}")
        t = p + s
        kind = ""
        if mask_index is not None:
            kind = self._mask_kind(mask_index, b, s, t)
        if attention_bias is not None:
            check_attention_bias(self, attention_bias, b, n, s, t,
                                 position=self.input_positions[5])
        scale = self.scale if self.scale != 0.0 else (1.0 / math.sqrt(h) if h else 1.0)
        return Plan(b, s, hin, n, dq, dv, h, hv, p, t, kind, scale, ELEMENT_TYPES[x.dtype],
                    simd.state.level,
                    self._num_threads(b * s * hin * total, self.min_proj_work_per_thread),
                    self._num_threads(b * n * s * t * (h + hv), self.min_attn_work_per_thread))

    def _mask_kind(self, mask, b, s, t) -> str:
        shape = mask.shape
        if mask.ndim == 1 and shape[0] in (b, 2 * b, 3 * b + 2):
            # b == 2b only when b == 0: nothing to read either way
            return {b: "ends", 2 * b: "ends_starts", 3 * b + 2: "ends_of_3b2"}[shape[0]]
        if mask.ndim == 2 and shape == (b, t):
            return "2d"
        if mask.ndim == 2 and shape[0] in (1, b) and shape[1] == 1:
            return ""  # ORT: one value per row broadcast over the keys masks nothing
        if mask.ndim == 3 and shape == (b, s, t):
            return "3d"
        if mask.ndim == 4:
            raise NotImplementedError(self._error_at(
                3, f"has shape {shape}: a 4-D mask is not supported (as in ONNX Runtime's CPU "
                   "kernel)"))
        raise ValueError(self._error_at(
            3, f"has shape {shape}, expected key lengths ({b},), ends and starts ({2 * b},), "
               f"({3 * b + 2},), or a 0/1 mask ({b}, {t}) or ({b}, {s}, {t}) (batch, [sequence,] "
               "total_sequence)"))

    # -- run ----------------------------------------------------------------

    def _execute(self, plan, x, weights, bias=None, mask_index=None, past=None,
                 attention_bias=None, past_sequence_length=None):
        self._check_sizes(plan, weights.shape[1], x.dtype, past is not None)
        ranges = self._key_ranges(plan, mask_index)
        qkv = self._project(plan, x, weights, bias)
        return self._attention(plan, qkv, ranges, mask_index, past, attention_bias, x.dtype)

    def _check_sizes(self, plan, total, dtype, has_past) -> None:
        """MemoryError for a projection or output that cannot fit (before
        anything is allocated)."""
        op = self.onnx_node.op_type
        b, s, n, h, hv, t = plan.b, plan.s, plan.n, plan.h, plan.hv, plan.t
        check_buffer(op, "the projected q, k, v", (b, s, total), 4)
        if has_past or self.wants_present:
            check_buffer(op, "output 1 (present)", (2, b, n, t, h), dtype.itemsize)
        check_buffer(op, "output 0", (b, s, n * hv), dtype.itemsize)
        if self.computes_in_numpy:
            check_buffer(op, "the materialised scores", (3, b, n, s, t), 4)

    def _attention(self, plan, qkv, ranges, mask_index, past, attention_bias, dtype):
        """Outputs (output, present) of the projected qkv (B, S, Dq + Dk + Dv)."""
        b, s, n, h, hv, p, t = plan.b, plan.s, plan.n, plan.h, plan.hv, plan.p, plan.t
        dq = plan.dq
        q4 = qkv[..., :dq].reshape(b, s, n, h).transpose(0, 2, 1, 3)
        k4 = qkv[..., dq:2 * dq].reshape(b, s, n, h).transpose(0, 2, 1, 3)
        v4 = qkv[..., 2 * dq:].reshape(b, s, n, hv).transpose(0, 2, 1, 3)
        present = None
        if past is not None or self.wants_present:
            present = self._new_output((2, b, n, t, h), dtype, 1)
            if h == hv:
                engine.fill_present(np.ascontiguousarray(past) if p else None, k4, v4, present)
            else:
                if p:
                    present[:, :, :, :p] = past
                present[0, :, :, p:] = k4
                present[1, :, :, p:] = v4
            k4, v4 = present[0], present[1]
        out = self._new_output((b, s, n * hv), dtype, 0)
        out4 = out.reshape(b, s, n, hv).transpose(0, 2, 1, 3)
        self._attend(plan, q4, k4, v4, out4, ranges, mask_index, attention_bias)
        results = (out, present)
        return results[: max(self.n_outputs, 1)]

    def _key_ranges(self, plan, mask) -> tuple | None:
        """(start, end) int64 (B,) of the keys a 1-D mask keeps, checked, or
        None for another mask."""
        kind = plan.mask
        if kind not in ("ends", "ends_starts", "ends_of_3b2"):
            return None
        b, t = plan.b, plan.t
        ends = mask[:b].astype(np.int64)
        if ends.size and ends.min() < 0:
            raise ValueError(self._error_at(
                3, f"holds a negative key length (end position) {int(ends.min())}"))
        starts = mask[b:2 * b].astype(np.int64) if kind == "ends_starts" else \
            np.zeros(b, np.int64)
        return np.clip(starts, 0, t), np.minimum(ends, t)

    def _project(self, plan, x, weights, bias) -> np.ndarray:
        """input @ weights + bias as (B, S, Dq + Dk + Dv): float32 for FLOAT,
        rounded to the input type for the others (as ORT's FLOAT16)."""
        raise NotImplementedError

    def padding_bias(self, plan, ranges, mask) -> np.ndarray | None:
        """0 / mask_filter_value (float32) of the mask as a (B, 1, 1|S, T)
        array, or None."""
        t = plan.t
        mfv = np.float32(self.mask_filter_value)
        zero = np.float32(0)
        if ranges is not None:
            keys = np.arange(t)[None, :]
            keep = (keys >= ranges[0][:, None]) & (keys < ranges[1][:, None])
            return np.where(keep, zero, mfv)[:, None, None]
        if plan.mask == "2d":
            return np.where(mask > 0, zero, mfv)[:, None, None]
        if plan.mask == "3d":
            return np.where(mask > 0, zero, mfv)[:, None]
        return None

    def causal_ends(self, plan) -> np.ndarray | None:
        """(S,) end of the keys each query sees under unidirectional, or None."""
        if not self.unidirectional or plan.s <= 1:
            return None
        return plan.p + 1 + np.arange(plan.s, dtype=np.int64)


class MicrosoftAttention(MicrosoftAttentionBase):
    op_type = "Attention"  # the class is named apart from ai.onnx Attention

    def _project(self, plan, x, weights, bias):
        b, s, hin = plan.b, plan.s, plan.hin
        total = weights.shape[1]
        m = b * s
        # a kept scratch slot (no output uses 2 or 3): a fresh 28 MB buffer a run
        # (BERT-base, B=8, S=384) would fault its pages in every time
        out = self._new_output((m, total), np.dtype(np.float32), 2)
        if bias is not None:
            out[...] = bias.astype(np.float32, copy=False)
        else:
            out.fill(0)
        if m and total and hin:
            et, level = plan.element_type, plan.level
            a = np.ascontiguousarray(x).reshape(m, hin)
            if self._constant_input(1) is weights:
                packed = self._prepared_input(("packed", gemm.level_used(level)), 1, weights,
                                              lambda: self._pack(weights, et, level))
                gemm.sgemm(a, ZERO, packed, ZERO, weights, ZERO, out, hin, 1, total, 1, m,
                           total, hin, 1.0, True, et, level, plan.proj_threads)
            else:
                w = np.ascontiguousarray(weights)
                gemm.sgemm(a, ZERO, None, ZERO, w, ZERO, out, hin, 1, total, 1, m, total, hin,
                           1.0, True, et, level, plan.proj_threads)
        if x.dtype == np.float32:
            return out.reshape(b, s, total)
        # rounded once to the input type, by Cast's vector loops (NumPy's
        # astype takes 6x longer), into another kept scratch slot
        qkv = self._new_output((b, s, total), x.dtype, 3)
        cast.convert(out, qkv, plan.element_type, T.FLOAT, plan.level, plan.proj_threads)
        return qkv

    @staticmethod
    def _pack(weights, element_type, level) -> np.ndarray:
        """The constant weights packed for the GEMM engine (64-byte aligned)."""
        k, total = weights.shape
        packed = prepared_empty(gemm.packed_size(k, total, level), np.float32)
        gemm.pack_b(np.ascontiguousarray(weights), ZERO, packed, total, 1, k, total,
                    element_type, level, 1)
        return packed

    def _attend(self, plan, q4, k4, v4, out4, ranges, mask, attention_bias):
        self._record_path((q4.dtype, plan.level), lambda: (
            f"microsoft_attention_{q4.dtype.name}_{engine_level_name(plan.level)}"))
        bias, begin, end = self._engine_masks(plan, ranges, mask, attention_bias)
        run_engine(engine_ready(q4), engine_ready(k4), engine_ready(v4), out4,
                   scale=plan.scale, bias=bias, begin=begin, end=end, softcap=0.0,
                   softcap_first=False, threads=plan.attn_threads, level=plan.level)

    def _engine_masks(self, plan, ranges, mask, attention_bias):
        """The engine's (bias, key_begin, key_end) of the masks."""
        b, s, t = plan.b, plan.s, plan.t
        if plan.mask == "2d" and ranges is None and self.mask_filter_value <= EXCLUDING_FILTER:
            if attention_bias is None:  # GPT-2's mask of ones: key ranges in one C pass
                causal = self.causal_ends(plan)
                fast = engine.right_padded_key_ends(mask, s, -1 if causal is None
                                                    else int(causal[0]))
                if fast is not None:
                    return None, fast[0], fast[1]
            keep = mask > 0
            count = keep.sum(axis=1)
            if (keep == (np.arange(t)[None, :] < count[:, None])).all():
                ranges = (np.zeros(b, np.int64), count.astype(np.int64))  # right padding
                mask = None
        causal = self.causal_ends(plan)
        begin = end = None
        if causal is not None:
            begin = np.zeros((b, s), np.int64)
            end = np.broadcast_to(causal, (b, s))
        pad_ranges = ranges
        if ranges is not None and self.mask_filter_value <= EXCLUDING_FILTER:
            # padded keys are ruled out: skip them, unless a row would be left
            # with none (then ORT's softmax runs over the shifted scores)
            lo = np.broadcast_to(ranges[0][:, None], (b, s))
            hi = ranges[1][:, None] if end is None else np.minimum(end, ranges[1][:, None])
            hi = np.broadcast_to(hi, (b, s))
            if (lo < hi).all():
                begin, end, pad_ranges = lo, hi, None
        bias = None
        if pad_ranges is not None or mask is not None:
            bias = self.padding_bias(plan, pad_ranges, mask)
        bias = with_attention_bias(bias, attention_bias, s, t)
        if begin is not None:
            begin = np.ascontiguousarray(begin, dtype=np.int32)
            end = np.ascontiguousarray(end, dtype=np.int32)
        return bias, begin, end

    # -- the projection fused into the attention (float32, constant weights) --

    def _execute(self, plan, x, weights, bias=None, mask_index=None, past=None,
                 attention_bias=None, past_sequence_length=None):
        if not self._fusable(plan, x, weights, past):
            return super()._execute(plan, x, weights, bias, mask_index, past, attention_bias,
                                    past_sequence_length)
        self._check_sizes(plan, weights.shape[1], x.dtype, False)
        ranges = self._key_ranges(plan, mask_index)
        level = plan.level
        self._record_path(("fused", level), lambda: (
            f"microsoft_attention_float32_{engine_level_name(level)}_fused_projection"))
        n, h, hv = plan.n, plan.h, plan.hv
        width = 2 * h + hv
        packed = self._prepared_input(("heads", gemm.level_used(level)), 1, weights,
                                      lambda: self._pack_heads(plan, weights, level))
        wbias = None
        if bias is not None:
            wbias = self._prepared_input(("heads",), 2, bias,
                                         lambda: self._by_head(plan, bias[None])[0])
        masks, begin, end = self._engine_masks(plan, ranges, mask_index, attention_bias)
        threads = max(plan.proj_threads, plan.attn_threads)
        slots = min(threads, plan.b * n)
        # the heads' projected rows: a kept scratch slot, as the unfused projection's
        proj = self._new_output((slots, plan.s * width), np.dtype(np.float32), 2)
        out = self._new_output((plan.b, plan.s, n * hv), x.dtype, 0)
        engine.attend_projected(
            np.ascontiguousarray(x), packed, wbias, out, proj, heads=n, head_size=h,
            v_head_size=hv, scale=plan.scale, bias=masks, key_begin=begin, key_end=end,
            threads=threads, level=level)
        return (out, None)[: max(self.n_outputs, 1)]

    def _fusable(self, plan, x, weights, past) -> bool:
        """Whether one task a (batch, head) can project its head and attend
        it at once: float32 self-attention without a cache, the weights an
        initializer (packed once, head by head), and tasks enough for the
        threads (else the unfused projection splits finer)."""
        threads = max(plan.proj_threads, plan.attn_threads)
        return (x.dtype == np.float32 and past is None and not self.wants_present
                and plan.b * plan.s * plan.hin > 0 and plan.h > 0 and plan.hv > 0
                and self._constant_input(1) is weights
                and plan.b * plan.n >= FUSED_TASKS_PER_THREAD * threads)

    @staticmethod
    def _by_head(plan, w) -> np.ndarray:
        """(K, Dq + Dk + Dv) columns regrouped head by head: (K, N * W),
        head j's W = 2 H + Hv columns its q, k and v ones."""
        k, n, h, hv, dq = w.shape[0], plan.n, plan.h, plan.hv, plan.dq
        parts = (w[:, :dq].reshape(k, n, h), w[:, dq:2 * dq].reshape(k, n, h),
                 w[:, 2 * dq:].reshape(k, n, hv))
        return np.concatenate(parts, axis=2).reshape(k, n * (2 * h + hv)).astype(np.float32)

    def _pack_heads(self, plan, weights, level) -> np.ndarray:
        """The weights packed for the GEMM engine as N (K, W) matrices, one a
        head (64-byte aligned)."""
        k, n, width = plan.hin, plan.n, 2 * plan.h + plan.hv
        grouped = self._by_head(plan, weights)
        packed = prepared_empty(n * gemm.packed_size(k, width, level), np.float32)
        gemm.pack_b(grouped, np.arange(n, dtype=np.int64) * width, packed, n * width, 1, k, width,
                    T.FLOAT, level, 1)
        return packed


KERNELS = {
    "RegisterMicrosoftKernels": (MicrosoftAttention,),
}
