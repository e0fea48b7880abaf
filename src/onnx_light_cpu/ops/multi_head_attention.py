"""com.microsoft MultiHeadAttention (the OPTIMIZED family; the NAIVE one is
in :mod:`onnx_light_cpu.naive.multi_head_attention`).

    out = softmax(scale * Q Kᵀ + attention_bias + padding) V

query is (B, S, N*H); key/value are (B, L, N*H) / (B, L, N*Hv), or already
split into heads for Whisper-style cross attention, (B, N, L, H) /
(B, N, L, Hv).  The projection bias (2*N*H + N*Hv) is added to q, k and v
(only to q for rank-4 cross attention, as ONNX Runtime's CPU kernel does);
past_key/past_value (B, N, P, H|Hv) precede the new keys, and
present_key/present_value hold the P + L positions.

Masks, as ONNX Runtime 1.32's CPU kernel applies them (probed):
- key_padding_mask, int32: lengths (B,) (keys t >= length[b] are masked),
  or a binary (B, T) / (B, S, T) mask where a value > 0 attends.  A masked
  key gets ``mask_filter_value`` ADDED to its score (a row masked
  everywhere is thus an ordinary softmax, shifted);
- unidirectional (when S > 1): query s < S-1 sees keys t <= P + s, the last
  query sees every key; its masked scores are -FLT_MAX (replaced);
- the optional ``qk`` output is the scores before the softmax, with both.

The adapter hands the engine ranges of keys for unidirectional and (when
``mask_filter_value`` rules a key out for good) key lengths or right-padded
(B, T) masks, and a float32 bias otherwise.  Packed QKV/KV (rank 5) and
the buffer-sharing inputs 8/9 (past_sequence_length, cache_indirection)
raise NotImplementedError.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from ..memory import check_buffer
from ._base import EVERY_INPUT, Attr, Input, KernelOp
from ._contract import REQUIRED
from ._layout import engine_ready
from .attention import (
    check_attention_bias,
    concat_cache,
    engine_level_name,
    fresh,
    heads_view,
    microsoft_attribute_problem,
    run_engine,
    with_attention_bias,
)

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
# A mask_filter_value this low adds exp(-100) ~ 4e-44 of a key's weight at
# most: the key is as good as absent, so a range can skip it.
EXCLUDING_FILTER = -100.0


class Plan(NamedTuple):
    """What a run needs that the inputs' shapes decide."""

    b: int
    s: int
    n: int
    h: int
    hv: int
    width: int
    p: int          # past positions
    t: int          # total key positions
    lengths: bool   # key_padding_mask holds key lengths (else a binary mask, or none)
    scale: float


class MultiHeadAttentionBase(KernelOp):
    """Attribute and input validation shared by both families; subclasses
    implement ``_compute``."""

    strided_inputs = EVERY_INPUT  # engine_ready copies only what the core cannot read
    #: The NAIVE family materialises the scores and a float32 copy of V.
    computes_in_numpy: ClassVar[bool] = False

    op_domain = "com.microsoft"
    # query's rank is checked by the plan: rank 5 (packed QKV) is not implemented
    inputs = (Input("query", types=FLOATS),
              Input("key", like=0, optional=True),
              Input("value", like=0, optional=True),
              Input("bias", like=0, ranks=(1,), optional=True),
              Input("key_padding_mask", types=(T.INT32,), optional=True),
              Input("attention_bias", like=0, ranks=(4,), optional=True),
              Input("past_key", like=0, ranks=(4,), optional=True),
              Input("past_value", like=0, ranks=(4,), optional=True),
              Input("past_sequence_length", optional=True),
              Input("cache_indirection", optional=True))
    attributes = (Attr("num_heads", "int", REQUIRED),
                  Attr("scale", "float", 0.0),
                  Attr("mask_filter_value", "float", -10000.0),
                  # ONNX Runtime reads any value but 1 as 0: a typo must not go unnoticed
                  Attr("unidirectional", "flag", 0))

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        outputs = list(onnx_node.output)
        self.n_outputs = len(outputs)
        self.wants = [i < len(outputs) and bool(outputs[i]) for i in range(4)]
        problem = microsoft_attribute_problem(self.num_heads, self.scale, self.mask_filter_value)
        if problem is not None:
            self._reject_attribute(problem)

    def _plan(self, query, key=None, value=None, bias=None, key_padding_mask=None,
              attention_bias=None, past_key=None, past_value=None, *rest):
        for i, x in enumerate(rest, 8):
            if x is not None:
                raise NotImplementedError(self._input_error(
                    i, "(past_sequence_length / cache_indirection, buffer sharing) is not "
                       "supported"))
        n = self.num_heads
        if query.ndim == 5:
            raise NotImplementedError(self._input_error(0, "packed QKV (rank 5) is not supported"))
        if query.ndim != 3:
            raise ValueError(self._input_error(
                0, f"must have rank 3 (batch, sequence, hidden), got shape {query.shape}"))
        if key is not None and key.ndim == 5:
            raise NotImplementedError(self._input_error(1, "packed KV (rank 5) is not supported"))
        if key is None or value is None:
            raise ValueError(self._input_error(1, "key and value are required (packed QKV is not "
                                                  "supported)"))
        b, s, width = query.shape
        if width % n:
            raise ValueError(self._input_error(
                0, f"has hidden size {width}, not a multiple of num_heads {n}"))
        h = width // n
        if key.ndim == 3 and value.ndim == 3:
            if key.shape[0] != b or key.shape[2] != width:
                raise ValueError(self._input_error(
                    1, f"has shape {key.shape}, expected (batch, kv_sequence, hidden) = "
                       f"({b}, L, {width})"))
            if value.shape[:2] != key.shape[:2] or value.shape[2] % n:
                raise ValueError(self._input_error(
                    2, f"has shape {value.shape}, expected ({b}, {key.shape[1]}, num_heads * "
                       "v_head_size)"))
            hv = value.shape[2] // n
        elif key.ndim == 4 and value.ndim == 4:
            if key.shape[:2] != (b, n) or key.shape[3] != h:
                raise ValueError(self._input_error(
                    1, f"has shape {key.shape}, expected (batch, num_heads, kv_sequence, "
                       f"head_size) = ({b}, {n}, L, {h})"))
            if value.shape[:3] != key.shape[:3]:
                raise ValueError(self._input_error(
                    2, f"has shape {value.shape}, expected ({b}, {n}, {key.shape[2]}, Hv)"))
            hv = value.shape[3]
        else:
            raise ValueError(self._input_error(
                1, f"key and value must both have rank 3 or both rank 4, got {key.shape} and "
                   f"{value.shape}"))
        length = key.shape[1] if key.ndim == 3 else key.shape[2]

        if bias is not None:
            if bias.shape != (2 * width + n * hv,):
                raise ValueError(self._input_error(
                    3, f"has shape {bias.shape}, expected ({2 * width + n * hv},) = 2 * hidden + "
                       "v_hidden"))

        if (past_key is None) != (past_value is None):
            raise ValueError(self._input_error(6, "past_key and past_value must be given together"))
        p = 0
        if past_key is not None:
            for i, (past, d) in enumerate(((past_key, h), (past_value, hv)), 6):
                if past.shape[:2] != (b, n) or past.shape[3] != d:
                    raise ValueError(self._input_error(
                        i, f"has shape {past.shape}, expected (batch, num_heads, past_sequence, "
                           f"head_size) = ({b}, {n}, P, {d})"))
            p = past_key.shape[2]
            if past_value.shape[2] != p:
                raise ValueError(self._input_error(
                    7, f"has shape {past_value.shape}: its length differs from past_key's {p}"))
        t = p + length

        if key_padding_mask is not None:
            mask = key_padding_mask
            if mask.shape not in ((b,), (b, t), (b, s, t)):
                raise ValueError(self._input_error(
                    4, f"has shape {mask.shape}, expected lengths ({b},) or a mask ({b}, {t}) or "
                       f"({b}, {s}, {t}) (batch, [sequence,] total_sequence)"))
        if attention_bias is not None:
            check_attention_bias(self, attention_bias, b, n, s, t)
        scale = self.scale if self.scale != 0.0 else (1.0 / math.sqrt(h) if h else 1.0)
        lengths = key_padding_mask is not None and key_padding_mask.shape == (b,)
        return Plan(b, s, n, h, hv, width, p, t, lengths, scale)

    def _execute(self, plan, query, key=None, value=None, bias=None, key_padding_mask=None,
                 attention_bias=None, past_key=None, past_value=None, *rest):
        op = "MultiHeadAttention"
        b, s, n, h, hv, width, p, t = plan.b, plan.s, plan.n, plan.h, plan.hv, plan.width, \
            plan.p, plan.t
        # sizes first, nothing allocated yet
        if bias is not None:
            for i, x in enumerate((query, key, value) if key.ndim == 3 else (query,)):
                check_buffer(op, f"input {i} plus its projection bias", x.shape, x.itemsize)
        for i, d in ((1, h), (2, hv)):
            if past_key is not None:
                check_buffer(op, f"output {i} (present, input {i + 5} + new keys)",
                             (b, n, t, d), query.itemsize)
            elif self.wants[i]:
                check_buffer(op, f"output {i} (present, from input {i})", (b, n, t, d),
                             query.itemsize)
        check_buffer(op, "output 0", (b, s, n, hv), query.itemsize)
        if self.wants[3] or self.computes_in_numpy:
            # materialised (B, N, S, T) float32 scores (the qk output, the NAIVE family)
            check_buffer(op, "the materialised scores (qk)", (3, b, n, s, t), 4)
        if self.computes_in_numpy:
            check_buffer(op, "the float32 values", (b, n, t, hv), 4)
        lengths = binary = None
        if key_padding_mask is not None:
            if plan.lengths:
                mask = key_padding_mask
                if mask.size and (mask.min() < 0 or mask.max() > t):
                    raise ValueError(self._input_error(
                        4, f"holds key lengths outside [0, {t}] (total sequence length)"))
                lengths = mask
            else:
                binary = key_padding_mask
        if bias is not None:
            query = query + bias[:width]
            if key.ndim == 3:  # rank-4 cross attention keys are taken as they are
                key = key + bias[width: 2 * width]
                value = value + bias[2 * width:]
        q4 = heads_view(query, n)
        k4 = heads_view(key, n) if key.ndim == 3 else key
        v4 = heads_view(value, n) if value.ndim == 3 else value
        if past_key is not None:
            k4, v4 = concat_cache(past_key, k4), concat_cache(past_value, v4)
            present_k, present_v = k4, v4
        else:
            present_k = fresh(k4, key) if self.wants[1] else None
            present_v = fresh(v4, value) if self.wants[2] else None
        out = np.empty((b, s, n, hv), dtype=query.dtype)
        out4 = out.transpose(0, 2, 1, 3)
        qk = self._compute(q4, k4, v4, out4, plan.scale, p, lengths, binary, attention_bias)
        results = [out.reshape(b, s, n * hv), present_k, present_v, qk]
        return tuple(results[: max(self.n_outputs, 1)])

    def _causal_ends(self, s: int, t: int, p: int) -> np.ndarray | None:
        """End of the keys each query sees under unidirectional (ORT: query
        s < S-1 sees t <= P + s, the last one every key), or None."""
        if not self.unidirectional or s <= 1:
            return None
        end = np.minimum(p + 1 + np.arange(s, dtype=np.int64), t)
        end[-1] = t
        return end

    @staticmethod
    def narrow(scores: np.ndarray, dtype) -> np.ndarray:
        """The float32 scores in the output type (-FLT_MAX becomes -inf in
        float16, as ORT's output shows)."""
        with np.errstate(over="ignore"):
            return scores.astype(dtype)

    def padding_bias(self, b, s, t, lengths, binary) -> np.ndarray | None:
        """0 / mask_filter_value (additive, float32) of the key padding mask as
        a (B, 1, S|1, T) array, or None."""
        if lengths is not None:
            keep = np.arange(t)[None, :] < lengths[:, None]
            return np.where(keep, np.float32(0), np.float32(self.mask_filter_value))[:, None, None]
        if binary is not None:
            bias = np.where(binary > 0, np.float32(0), np.float32(self.mask_filter_value))
            return bias[:, None, None] if binary.ndim == 2 else bias[:, None]
        return None

    def dense_scores(self, q4, k4, scale, p, lengths, binary, attention_bias) -> np.ndarray:
        """The (B, N, S, T) float32 scores before the softmax, as ORT builds
        them: scale * Q Kᵀ + attention_bias + padding, -FLT_MAX where
        unidirectional hides a key."""
        b, n, s, _ = q4.shape
        t = k4.shape[2]
        scores = np.matmul(q4.astype(np.float32), np.swapaxes(k4.astype(np.float32), -1, -2))
        scores *= np.float32(scale)
        if attention_bias is not None:
            scores += attention_bias.astype(np.float32)
        pad = self.padding_bias(b, s, t, lengths, binary)
        if pad is not None:
            scores += pad
        ends = self._causal_ends(s, t, p)
        if ends is not None:
            hidden = np.arange(t)[None, :] >= ends[:, None]  # (S, T)
            scores[:, :, hidden] = np.finfo(np.float32).min
        return scores


class MultiHeadAttention(MultiHeadAttentionBase):
    # Work is B * N * S * T * (Dk + Dv) multiply-adds.  The engine is
    # GroupQueryAttention's, whose measurement on 2 cores puts the break-even
    # of a second thread near 2^18 of B * N * S * T * H: 2^19 here, where
    # the work counts both products.  (On this shared machine under load a
    # second thread cost ~0.8 ms whatever the size: not measurable again.)
    min_work_per_thread = 1 << 19

    def _compute(self, q4, k4, v4, out4, scale, p, lengths, binary, attention_bias):
        b, n, s, h = q4.shape
        t = k4.shape[2]
        level = simd.state.level
        self._record_path((q4.dtype, level), lambda: (
            f"multi_head_attention_{q4.dtype.name}_{engine_level_name(level)}"))
        ends = self._causal_ends(s, t, p)
        given_lengths, given_binary = lengths, binary
        if binary is not None and binary.ndim == 2 and self.mask_filter_value <= EXCLUDING_FILTER:
            keep = binary > 0
            count = keep.sum(axis=1)
            if (keep == (np.arange(t)[None, :] < count[:, None])).all():
                lengths, binary = count, None  # right padding: lengths in disguise
        if (lengths is not None and self.mask_filter_value <= EXCLUDING_FILTER
                and lengths.min(initial=t) > 0):
            # padded keys are ruled out: skip them instead of adding the filter
            cut = np.broadcast_to(lengths.astype(np.int64)[:, None], (b, s))
            ends = cut if ends is None else np.minimum(ends[None, :], cut)
            lengths = None
        begin = end = None
        if ends is not None:
            end = np.ascontiguousarray(np.broadcast_to(ends, (b, s)), dtype=np.int32)
            begin = np.zeros((b, s), np.int32)
        bias = with_attention_bias(self.padding_bias(b, s, t, lengths, binary), attention_bias,
                                   s, t)
        work = b * n * s * t * (h + v4.shape[3])
        run_engine(engine_ready(q4), engine_ready(k4), engine_ready(v4), out4, scale=scale,
                   bias=bias, begin=begin, end=end, softcap=0.0, softcap_first=False,
                   threads=self._num_threads(work, self.min_work_per_thread), level=level)
        if not self.wants[3]:
            return None
        scores = self.dense_scores(q4, k4, scale, p, given_lengths, given_binary, attention_bias)
        return self.narrow(scores, q4.dtype)


KERNELS = {
    "RegisterMicrosoftKernels": (MultiHeadAttention,),
}
