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

sliding_window_cache=1 keeps window-sized buffers (see ``_windowed``);
qk_output materialises the scores only when the output is requested.
Rejected with NotImplementedError: quantized KV caches (k_scale/v_scale,
kv_cache_bit_width, quant types, integer caches), q/k norm weights, and
output_qk together with a windowed cache.  Unlike ONNX Runtime, head sizes
need not be multiples of 8 (16 with rotary).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels.engines import attention as core
from .._kernels.engines import rotary as rotary_core
from ..memory import check_buffer
from ._base import EVERY_INPUT, KernelOp
from ._layout import engine_ready

T = TensorProto
_INT32_MAX = 2**31 - 1
_FLOATS = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(bfloat16))

#: Input positions in ONNX Runtime's order.
INPUTS = ("query", "key", "value", "past_key", "past_value", "seqlens_k",
          "total_sequence_length", "cos_cache", "sin_cache", "position_ids",
          "attention_bias", "head_sink", "k_scale", "v_scale", "q_norm_weight",
          "k_norm_weight", "query_seqlens")


class GroupQueryAttentionBase(KernelOp):
    """Attributes, validation, positions, key ranges and the present cache,
    shared by both families; subclasses implement ``_rotate`` and ``_attend``."""

    strided_inputs = EVERY_INPUT  # engine_ready copies only what the core cannot read

    op_domain = "com.microsoft"
    onnx_types = (T.FLOAT, T.FLOAT16, T.BFLOAT16)

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        a = {att.name: onnx.helper.get_attribute_value(att) for att in onnx_node.attribute}
        op = onnx_node.op_type
        errors = []
        self.num_heads = int(a.get("num_heads", 0))
        self.kv_num_heads = int(a.get("kv_num_heads", 0))
        if "num_heads" not in a or "kv_num_heads" not in a:
            errors.append(f"{op}: attributes num_heads and kv_num_heads are required")
        elif self.num_heads <= 0 or self.kv_num_heads <= 0:
            errors.append(f"{op}: num_heads ({self.num_heads}) and kv_num_heads "
                          f"({self.kv_num_heads}) must be positive")
        elif self.num_heads % self.kv_num_heads:
            errors.append(f"{op}: num_heads ({self.num_heads}) must be a multiple of "
                          f"kv_num_heads ({self.kv_num_heads})")
        self.scale_attr = float(a.get("scale", 0.0))
        if not math.isfinite(self.scale_attr):
            errors.append(f"{op}: attribute scale must be finite (0: 1/sqrt(head_size)), "
                          f"got {self.scale_attr}")
        self.softcap = float(a.get("softcap", 0.0))
        if not math.isfinite(self.softcap):
            errors.append(f"{op}: attribute softcap must be finite, got {self.softcap}")
        self.softcap = max(self.softcap, 0.0)   # <= 0: no softcap, as ORT
        self.causal = int(a.get("causal", 1))
        if self.causal not in (0, 1):
            errors.append(f"{op}: attribute causal must be 0 or 1, got {self.causal}")
        self.window = int(a.get("local_window_size", -1))
        if self.window == 0 or self.window < -1 or self.window > _INT32_MAX:
            errors.append(f"{op}: attribute local_window_size must be -1 or in "
                          f"[1, {_INT32_MAX}], got {self.window}")
        elif self.window > 0 and self.causal == 0:
            errors.append(f"{op}: attribute local_window_size must be -1 when causal is 0, "
                          f"got {self.window}")
        for name in ("do_rotary", "rotary_interleaved", "smooth_softmax"):
            if int(a.get(name, 0)) not in (0, 1):
                errors.append(f"{op}: attribute {name} must be 0 or 1, got {a[name]}")
        self.do_rotary = int(a.get("do_rotary", 0)) == 1
        self.interleaved = int(a.get("rotary_interleaved", 0)) == 1
        self.smooth = int(a.get("smooth_softmax", 0)) == 1
        self.qk_output = int(a.get("qk_output", 0))
        if self.qk_output not in (0, 1, 2):
            errors.append(f"{op}: attribute qk_output must be 0, 1 or 2, got {self.qk_output}")
        self.sliding = int(a.get("sliding_window_cache", 0))
        self._unsupported = None
        if self.sliding not in (0, 1):
            errors.append(f"{op}: attribute sliding_window_cache must be 0 or 1, "
                          f"got {self.sliding}")
        for name in ("k_quant_type", "v_quant_type"):
            v = a.get(name, b"NONE")
            v = v.decode() if isinstance(v, bytes) else v
            if v != "NONE":
                self._unsupported = f"{op}: quantized KV caches ({name}={v!r}) are not implemented"
        if "kv_cache_bit_width" in a and int(a["kv_cache_bit_width"]) not in (0,):
            self._unsupported = (f"{op}: quantized KV caches (kv_cache_bit_width) are not "
                                 "implemented")
        outputs = onnx_node.output
        self._n_outputs = len(outputs)
        if self._n_outputs > 3 and outputs[3] and self.qk_output == 0:
            errors.append(f"{op}: output 3 (output_qk) needs attribute qk_output 1 or 2")
        self._want_qk = self._n_outputs > 3 and bool(outputs[3]) and self.qk_output > 0
        # Raised at run time: a constructor error would break building the
        # evaluator or registering kernels on it.
        self._attr_error = errors[0] if errors else None

    # -- validation -------------------------------------------------------

    def _tensor(self, i, x, dtype=None, rank=None):
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(i, f"must be a tensor, got {type(x).__name__}"))
        if dtype is not None and x.dtype != dtype:
            raise TypeError(self._input_error(i, f"has element type {x.dtype}, expected {dtype}"))
        if rank is not None and x.ndim != rank:
            raise ValueError(self._input_error(i, f"must have rank {rank}, got shape {x.shape}"))
        return x

    def _shape(self, i, x, shape):
        if x.shape != tuple(shape):
            raise ValueError(self._input_error(i, f"must have shape {tuple(shape)}, got {x.shape}"))

    def _run(self, *args):
        op = self.onnx_node.op_type
        if self._attr_error:
            raise ValueError(self._attr_error)
        if len(args) > len(INPUTS):
            raise ValueError(f"{op}: at most {len(INPUTS)} inputs, got {len(args)}")
        x = dict(zip(INPUTS, args + (None,) * (len(INPUTS) - len(args))))
        for i in (12, 13, 14, 15):
            if x[INPUTS[i]] is not None:
                raise NotImplementedError(self._input_error(
                    i, "is not supported (quantized KV caches and q/k norms are not implemented)"))
        if self._unsupported:
            raise NotImplementedError(self._unsupported)
        q = x["query"]
        if q is None or x["seqlens_k"] is None or x["total_sequence_length"] is None:
            raise ValueError(f"{op}: inputs query, seqlens_k and total_sequence_length "
                             "are required")
        self._tensor(0, q, rank=3)
        dt = q.dtype
        if dt not in _FLOATS:
            raise TypeError(self._input_error(
                0, f"has element type {dt}, expected one of {', '.join(self.element_types)}"))
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
                self._tensor(i, t, dt, 3)
                self._shape(i, t, (B, S, Nkv * H))
        if H == 0:
            raise ValueError(self._input_error(0, f"gives head size 0 (shape {q.shape})"))
        pk, pv = x["past_key"], x["past_value"]
        if (pk is None) != (pv is None):
            raise ValueError(f"{op}: past_key and past_value must be given together")
        P = 0
        if pk is not None:
            if isinstance(pk, np.ndarray) and pk.dtype != dt and pk.dtype.kind in "iuV":
                raise NotImplementedError(self._input_error(
                    3, "quantized KV caches are not implemented"))
            self._tensor(3, pk, dt, 4)
            self._tensor(4, pv, dt, 4)
            P = pk.shape[2]
            self._shape(3, pk, (B, Nkv, P, H))
            self._shape(4, pv, (B, Nkv, P, H))
        seqlens = self._tensor(5, x["seqlens_k"], np.dtype(np.int32))
        self._shape(5, seqlens, (B,))
        tot = self._tensor(6, x["total_sequence_length"], np.dtype(np.int32))
        if tot.size != 1 or tot.ndim > 1:
            raise ValueError(self._input_error(6, f"must be a scalar, got shape {tot.shape}"))
        total = int(tot.reshape(()))
        if total <= 0 and B:
            raise ValueError(self._input_error(6, f"must be positive, got {total}"))
        if x["query_seqlens"] is None and total < S:
            raise ValueError(self._input_error(
                6, f"({total}) must be at least the sequence length {S}"))
        lens = seqlens.astype(np.int64) + 1                      # total length per entry
        if B and lens.min() < 1:
            raise ValueError(self._input_error(5, f"values must be >= 0, got {seqlens.tolist()}"))
        if B and lens.max() > total:
            raise ValueError(self._input_error(
                5, f"values {seqlens.tolist()}: seqlens_k + 1 must not exceed "
                   f"total_sequence_length ({total})"))
        qsl = x["query_seqlens"]
        first = False
        if qsl is not None:
            # right-padded chunks: entry b appends its first Q[b] rows
            self._tensor(16, qsl, np.dtype(np.int32), 1)
            self._shape(16, qsl, (B,))
            if not self.causal:
                raise ValueError(self._input_error(16, "requires causal=1"))
            if pk is None:
                raise ValueError(self._input_error(16, "requires past_key and past_value"))
            append = qsl.astype(np.int64)
            if B and (append.min() < 0 or (append > np.minimum(lens, S)).any()):
                raise ValueError(self._input_error(
                    16, f"values {qsl.tolist()} must be in [0, min(sequence_length {S}, "
                        f"seqlens_k + 1)] per entry (seqlens_k {seqlens.tolist()})"))
            past_len = lens - append
        else:
            first = S == total
            append = np.full(B, S, np.int64)
            if first:       # every entry starts at 0 (shorter ones right-padded)
                past_len = np.zeros(B, np.int64)
            else:
                past_len = lens - S
                if B and past_len.min() < 0:
                    raise ValueError(self._input_error(
                        5, f"values {seqlens.tolist()} give fewer than the {S} new tokens "
                           f"(seqlens_k + 1 - sequence_length must be >= 0)"))
                if B > 1 and S > 1:
                    raise ValueError(f"{op}: batch_size must be 1 when sequence_length > 1 and "
                                     f"past context is given (got batch {B}, sequence {S})")
        if self.sliding:
            if self.window <= 0:
                raise ValueError(f"{op}: sliding_window_cache=1 needs local_window_size > 0")
            if pk is None:
                raise ValueError(f"{op}: sliding_window_cache=1 needs past_key and past_value "
                                 "(their length is the cache capacity)")
            if P < self.window:
                raise ValueError(self._input_error(
                    3, f"sliding_window_cache: capacity {P} must be at least local_window_size "
                       f"({self.window})"))
            if self._want_qk:
                raise NotImplementedError(f"{op}: output_qk with sliding_window_cache=1 is not "
                                          "implemented")
            L = P
        else:
            L = max(P, total)                                      # present length
            if B and past_len.max() > P:
                raise ValueError(self._input_error(
                    3, f"holds {P} positions but seqlens_k {seqlens.tolist()} needs "
                       f"{int(past_len.max())} past positions"))
            if qsl is None and total != P + S and total > P:
                # ONNX Runtime's rule, without a past cache too (P = 0): the
                # present buffers hold max(P, total) rows, so a larger total
                # would allocate for nothing
                raise ValueError(self._input_error(
                    6, f"({total}) must equal the past length + sequence_length "
                       f"({P} + {S}) for a growing cache, or be at most past_key's length "
                       f"{P} for a static one"))
            if qsl is not None and B and (past_len + S).max() > L:
                raise ValueError(self._input_error(
                    16, f"values {qsl.tolist()}: the padded chunk of {S} rows after "
                        f"{int((past_len + S).max())- S} cached ones does not fit the KV cache "
                        f"capacity {L}"))

        # rotary
        positions = None
        cos, sin = x["cos_cache"], x["sin_cache"]
        if self.do_rotary:   # (without do_rotary the caches are ignored, as ORT does)
            if cos is None or sin is None:
                raise ValueError(f"{op}: do_rotary=1 needs inputs cos_cache and sin_cache")
            self._tensor(7, cos, dt, 2)
            self._tensor(8, sin, dt, 2)
            if sin.shape != cos.shape:
                raise ValueError(self._input_error(8, f"has shape {sin.shape}, expected "
                                                      f"{cos.shape} like cos_cache"))
            if cos.shape[1] == 0 or 2 * cos.shape[1] > H:
                raise ValueError(self._input_error(
                    7, f"shape {cos.shape}: the rotary dimension 2 * {cos.shape[1]} must be in "
                       f"[2, head size {H}]"))
            pid = x["position_ids"]
            if pid is not None:
                self._tensor(9, pid, np.dtype(np.int64), 2)
                self._shape(9, pid, (B, S))
                # ONNX Runtime's first prompt reads only position_ids[0, 0]:
                # every entry counts up from it.
                positions = (np.broadcast_to(pid[0, 0] + np.arange(S, dtype=np.int64), (B, S))
                             if first and B and S else pid)
            else:
                positions = past_len[:, None] + np.arange(S, dtype=np.int64)[None, :]
            if positions.size and (positions.min() < 0 or positions.max() >= cos.shape[0]):
                raise ValueError(self._input_error(
                    7 if pid is None else 9,
                    f"cos/sin caches have {cos.shape[0]} positions but positions up to "
                    f"{int(positions.max())} (min {int(positions.min())}) are needed"))

        bias = x["attention_bias"]
        if bias is not None:
            self._tensor(10, bias, dt, 4)
            if (bias.shape[0] not in (1, B) or bias.shape[1] not in (1, N)
                    or bias.shape[2] != S or bias.shape[3] != total):
                raise ValueError(self._input_error(
                    10, f"must have shape (1 or {B}, 1 or {N}, {S}, {total}), got {bias.shape}"))
        sink = x["head_sink"]
        if sink is not None:
            self._tensor(11, sink, dt, 1)
            self._shape(11, sink, (N,))

        # Sizes first, nothing allocated yet (a broadcast past or query can
        # describe more than memory holds)
        for i, name in ((1, "present_key"), (2, "present_value")):
            check_buffer(op, f"output {i} ({name}, from past_key / total_sequence_length)",
                        (B, Nkv, L, H), dt.itemsize)
        check_buffer(op, "output 0", (B, S, N, H), dt.itemsize)
        if self.do_rotary:
            check_buffer(op, "the rotated query and key (input 0)", (B, S, N + Nkv, H),
                        dt.itemsize)
        if self._want_qk:
            # output_qk (B, N, S, total) and its float32 work
            check_buffer(op, "output 3 (output_qk)", (3, B, N, S, total), 4)

        # Q, new K/V as [B, S, heads, H] views (a strided or broadcast input:
        # a compact copy whose last axis the engine can read)
        q = engine_ready(q)
        if not packed:
            key, value = engine_ready(key), engine_ready(value)
        if packed:
            q4 = q.reshape(B, S, N + 2 * Nkv, H)
            qv, kv, vv = q4[:, :, :N], q4[:, :, N:N + Nkv], q4[:, :, N + Nkv:]
        else:
            qv = q.reshape(B, S, N, H)
            kv = key.reshape(B, S, Nkv, H)
            vv = value.reshape(B, S, Nkv, H)
        if self.do_rotary:
            qv = self._rotate(qv, cos, sin, positions)
            kv = self._rotate(kv, cos, sin, positions)

        scale = self.scale_attr if self.scale_attr != 0.0 else 1.0 / math.sqrt(H)
        fbias = None
        if bias is not None:
            fbias = np.broadcast_to(engine_ready(bias, np.float32), (B, N, S, total))
        if sink is not None:
            fsink = sink.astype(np.float32)
        elif self.smooth:
            fsink = np.zeros(N, np.float32)
        else:
            fsink = None
        present_k = self._new_output((B, Nkv, L, H), dt, 1)
        present_v = self._new_output((B, Nkv, L, H), dt, 2)
        out = self._new_output((B, S, N, H), dt, 0)
        qt, ot = qv.transpose(0, 2, 1, 3), out.transpose(0, 2, 1, 3)
        pos_q = past_len[:, None] + np.arange(S, dtype=np.int64)[None, :]   # absolute
        qk = None
        if self.sliding:
            self._windowed(qt, kv, vv, pk, pv, present_k, present_v, ot, lens, past_len, append,
                           scale, fbias, fsink)
        else:
            # The new rows now; the engine copies the past rows (while it
            # reads them).
            self._append(kv, vv, past_len, append, present_k, present_v)
            past = None
            if pk is not None and P:
                past = (engine_ready(pk), engine_ready(pv),
                        np.ascontiguousarray(past_len, dtype=np.int32))
            if self.causal:
                end = np.minimum(pos_q + 1, lens[:, None])
                begin = np.maximum(end - self.window, 0) if self.window > 0 else 0 * end
            else:
                end = np.broadcast_to(lens[:, None], (B, S))
                begin = 0 * end
            key_begin = np.ascontiguousarray(np.minimum(begin, end), dtype=np.int32)
            key_end = np.ascontiguousarray(end, dtype=np.int32)
            kt, vt = present_k[:, :, :total], present_v[:, :, :total]
            self._attend(qt, kt, vt, ot, scale, fbias, key_begin, key_end, fsink, past)
            if self._want_qk:
                qk = self._qk(qv, kt, scale, fbias, key_begin, key_end, fsink)
        outputs = [out.reshape(B, S, N * H), present_k, present_v]
        if self._n_outputs > 3:
            outputs.append(qk)
        return tuple(outputs[: max(self._n_outputs, 1)])

    def _windowed(self, qt, kv, vv, pk, pv, present_k, present_v, ot, lens, past_len, append,
                  scale, fbias, fsink):
        """sliding_window_cache=1: the buffers hold the L(T) most recent
        positions at rows [0, L(T)), L(T) = T if T <= C else
        T - G ceil((T - C) / G) with G = C - W + 1.  Each entry attends over
        its resident past rows followed by its new rows (staged), then keeps
        the newest L(T) of them."""
        C, W = present_k.shape[2], self.window
        G = C - W + 1

        def resident(t):
            return t if t <= C else t - G * -(-(t - C) // G)

        S = qt.shape[2]
        for b in range(qt.shape[0]):
            t, p0, a = int(lens[b]), int(past_len[b]), int(append[b])
            lp = resident(p0)
            base = p0 - lp                     # absolute position of staged row 0
            n = min(lp + a, t - base)          # staged keys that exist after this step
            ks = np.concatenate([pk[b, :, :lp], kv[b, :a].transpose(1, 0, 2)], axis=1)[:, :n]
            vs = np.concatenate([pv[b, :, :lp], vv[b, :a].transpose(1, 0, 2)], axis=1)[:, :n]
            lt = resident(t)
            for dst, st in ((present_k, ks), (present_v, vs)):
                dst[b, :, :lt] = st[:, t - lt - base:t - base]
                dst[b, :, lt:] = 0
            end = np.minimum(lp + np.arange(S) + 1, n)
            begin = np.minimum(np.maximum(end - W, 0), end)
            bias = None if fbias is None else fbias[b:b + 1, :, :, base:base + n]
            self._attend(qt[b:b + 1], ks[None], vs[None], ot[b:b + 1], scale, bias,
                         np.ascontiguousarray(begin[None], dtype=np.int32),
                         np.ascontiguousarray(end[None], dtype=np.int32), fsink)

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

    def _rotate(self, x, cos, sin, positions):
        raise NotImplementedError

    def _append(self, new_k, new_v, start, count, present_k, present_v):
        """Rows [start[b], start[b] + count[b]) of the present caches [B, Nkv,
        L, H] from rows [0, count[b]) of new_k/new_v [B, S, Nkv, H], zeros
        after them (int64 start, count)."""
        raise NotImplementedError

    def _attend(self, q, k, v, out, scale, bias, key_begin, key_end, sink, past=None):
        """Attention into ``out``; ``past`` (past_k, past_v, lens): rows t <
        lens[b] of k and v come from the past cache first."""
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
                           np.ascontiguousarray(positions, dtype=np.int64), out, self.interleaved,
                           2 * cos.shape[1], simd.state.level, threads)
        return out

    def _append(self, new_k, new_v, start, count, present_k, present_v):
        core.append_rows(new_k, new_v, start, count, present_k, present_v)

    def _attend(self, q, k, v, out, scale, bias, key_begin, key_end, sink, past=None):
        level = simd.state.level
        if self._usage.enabled:
            key = (out.dtype, level)
            path = self._paths.get(key)
            if path is None:
                used = simd.LEVEL_NAMES[core.level_used(level)]
                path = self._paths[key] = f"group_query_attention_{out.dtype.name}_{used}"
            self._usage.record(self.kernel_name, path)
        B, N, S, H = q.shape
        work = B * N * S * max(k.shape[2], 1) * H
        threads = self._num_threads(work, self.min_work_per_thread)
        core.attend(q, k, v, out, scale=scale, bias=bias, key_begin=key_begin, key_end=key_end,
                    softcap=self.softcap, softcap_first=True, sink=sink, threads=threads,
                    level=level, past=past)


KERNELS = {
    "RegisterMicrosoftKernels": (GroupQueryAttention,),
}
