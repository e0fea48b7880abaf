"""ai.onnx Attention (opsets 23, 24 and 25) on the shared attention engine.

    Y = softmax(softcap(scale * Q Kᵀ) + bias) V

The adapter turns the operator's masks into what the engine takes: the
causal frontier, the sliding windows (opset 25), ``nonpad_kv_seqlen`` (24)
and a mask shorter than the keys become per-query key ranges
``[begin, end)``; a bool or float ``attn_mask`` becomes a float32 bias of its
own (broadcast) shape, never expanded to (B, N, S, T).  Rank-3 inputs are
read as (B, N, S, H) views, grouped heads share their K/V head, the past
cache is concatenated once into ``present_key`` / ``present_value``.

The scores are softcapped before the bias is added (the built-in's order),
a query row with no attended key is zeros (the built-in decides on the bias,
so does the engine), ``softmax_precision`` is accepted and the softmax runs
in float32 (float64 for DOUBLE).  DOUBLE and BFLOAT16 run a materialised
NumPy path in their own precision (``attention_float64_numpy``,
``attention_bfloat16_numpy``: the backend's bfloat16 cases expect the
built-in's bfloat16 roundings); the optional ``qk_matmul_output`` is
computed apart, materialised, only when a node asks for it.

One divergence from the built-in, on purpose: with ``is_causal`` it sizes
the causal mask from ``attn_mask``'s own query dimension, so a mask
broadcast over the queries (query dimension 1) makes every query causal
like the first; here the causal frontier always follows the query index,
as the operator's text says.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import onnx
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels.engines import attention as engine
from ..memory import check_buffer
from ._base import ELEMENT_TYPES, EVERY_INPUT, Attr, Input, KernelOp
from ._layout import compact, engine_ready

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16, T.DOUBLE)
ENGINE_TYPES = frozenset((T.FLOAT, T.FLOAT16, T.BFLOAT16))
SOFTMAX_PRECISIONS = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)
# Types computed by the materialised NumPy path, in their own precision:
# DOUBLE, and BFLOAT16 because the ONNX backend cases expect the built-in's
# bfloat16 rounding of the scores and probabilities at rtol 1e-3, below
# bfloat16's own resolution (the engine's float32 result is 1-2 ulps away).
NUMPY_TYPES = {T.DOUBLE: np.float64, T.BFLOAT16: bfloat16}


def heads_view(x: np.ndarray, heads: int) -> np.ndarray:
    """(B, S, heads * D) -> a (B, heads, S, D) view (no copy when the last
    axis of ``x`` is contiguous; else a compact copy first)."""
    x = engine_ready(x)
    b, s, width = x.shape
    return x.reshape(b, s, heads, width // heads).transpose(0, 2, 1, 3)


def fresh(x4: np.ndarray, given: np.ndarray) -> np.ndarray:
    """A contiguous array of ``x4`` that is not (and shares no memory with)
    the caller's input ``given``: a present output never aliases an input."""
    out = np.ascontiguousarray(x4)
    return out.copy() if out is given or np.shares_memory(out, given) else out


def concat_cache(past: np.ndarray, new: np.ndarray) -> np.ndarray:
    """A fresh (B, N, P + L, D) array: the past cache, then the new keys."""
    b, n, p, d = past.shape
    out = np.empty((b, n, p + new.shape[2], d), dtype=past.dtype)
    out[:, :, :p] = past
    out[:, :, p:] = new
    return out


def dense_scores(q4: np.ndarray, k4: np.ndarray, scale: float, dtype) -> np.ndarray:
    """scale * Q Kᵀ materialised as (B, Nq, S, T) in ``dtype``; query head h
    reads key head h // (Nq // Nkv).  Only for the outputs that expose the
    scores (and the DOUBLE path): the engine never builds this matrix."""
    b, nq, s, d = q4.shape
    nkv, t = k4.shape[1], k4.shape[2]
    root = dtype(np.sqrt(scale))  # scaled on both sides, as the built-in does
    q5 = (q4.astype(dtype) * root).reshape(b, nkv, nq // nkv, s, d)
    k5 = (k4.astype(dtype) * root)[:, :, None]
    return _matmul(q5, np.swapaxes(k5, -1, -2)).reshape(b, nq, s, t)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in a's type.  NumPy multiplies bfloat16 with float32 sums, one
    element at a time, and returns float32: the same float32 product from
    BLAS (another summation order, far below a bfloat16 ulp) is rounded
    back once, like the built-in."""
    if a.dtype == bfloat16:
        return np.matmul(a.astype(np.float32, order="C"),
                         b.astype(np.float32, order="C")).astype(bfloat16)
    return np.matmul(a, b)


def dense_values(p: np.ndarray, v4: np.ndarray) -> np.ndarray:
    """P V for (B, Nq, S, T) probabilities and grouped (B, Nkv, T, Dv) values."""
    b, nq, s, t = p.shape
    nkv = v4.shape[1]
    out = _matmul(p.reshape(b, nkv, nq // nkv, s, t), v4.astype(p.dtype)[:, :, None])
    return out.reshape(b, nq, s, v4.shape[3])


def guarded_softmax(x: np.ndarray, masked_rows: np.ndarray | None) -> np.ndarray:
    """Softmax over the last axis; rows listed in ``masked_rows`` (every key
    masked out) and rows of nothing but -inf are zeros, not NaN."""
    if x.shape[-1] == 0:
        return np.zeros(x.shape, x.dtype)
    zero, one = np.zeros((), x.dtype), np.ones((), x.dtype)  # keep x's dtype
    top = x.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), zero, top)
    e = np.exp(x - top)
    total = e.sum(axis=-1, keepdims=True)
    p = e / np.where(total == zero, one, total)
    if masked_rows is not None:
        p = np.where(masked_rows, zero, p)
    return p


def run_engine(q4, k4, v4, out4, *, scale, bias, begin, end, softcap, softcap_first,
               threads, level) -> None:
    """One engine call; empty problems write nothing or zeros."""
    if out4.size == 0:
        return
    if k4.shape[2] == 0:  # no key at all: every row is fully masked
        out4[...] = 0
        return
    engine.attend(q4, k4, v4, out4, scale=scale, bias=bias, key_begin=begin, key_end=end,
                  softcap=softcap, softcap_first=softcap_first, threads=threads, level=level)


def engine_level_name(level: int) -> str:
    """Name of the SIMD level the engine runs at when asked for ``level``."""
    return simd.LEVEL_NAMES[engine.level_used(level)]


# ---- shared by com.microsoft Attention and MultiHeadAttention ----

def microsoft_attribute_problem(num_heads, scale: float, mask_filter_value: float) -> str | None:
    """What is wrong with the attributes com.microsoft Attention and
    MultiHeadAttention share (None: nothing), for ``_reject_attribute``."""
    if num_heads is not None and num_heads <= 0:
        return f"attribute num_heads is required and must be positive, got {num_heads}"
    if not math.isfinite(scale):
        return f"attribute scale must be finite (0: 1/sqrt(head_size)), got {scale}"
    if math.isnan(mask_filter_value):
        return "attribute mask_filter_value must not be NaN"
    return None


def check_attention_bias(op: KernelOp, attention_bias: np.ndarray, b: int, n: int, s: int,
                         t: int, position: int = 5) -> None:
    """attention_bias (the node's input ``position``: 5 in both operators,
    elsewhere in QAttention) must be (1 or b, 1 or n, s, t)."""
    ab = attention_bias.shape
    if ab[0] not in (1, b) or ab[1] not in (1, n) or ab[2:] != (s, t):
        raise ValueError(op._input_error(
            position, f"has shape {ab}, expected (1 or {b}, 1 or {n}, {s}, {t}) (batch, "
                      "heads, sequence, total_sequence)"))


def with_attention_bias(bias: np.ndarray | None, attention_bias: np.ndarray | None, s: int,
                        t: int) -> np.ndarray | None:
    """The engine's float32 bias: the mask's ``bias`` (or None) plus
    attention_bias, broadcast to (B or 1, N or 1, s, t); None without either."""
    if attention_bias is not None:
        ab = attention_bias.astype(np.float32, copy=False)
        bias = ab if bias is None else ab + bias
    if bias is not None:
        bias = np.broadcast_to(engine_ready(bias), bias.shape[:2] + (s, t))
    return bias


class Plan(NamedTuple):
    """What a run needs that the inputs' shapes decide."""

    element_type: int
    b: int
    nq: int
    s: int
    dk: int
    nkv: int
    dv: int
    p: int              # past positions
    t: int              # key positions
    mask_shape: tuple | None  # attn_mask as 4-D (size-1 dims broadcast), or None
    width: int          # keys attn_mask covers (the others are masked)
    begin: np.ndarray | None  # key ranges the shapes decide (no nonpad_kv_seqlen)
    end: np.ndarray | None
    scale: float
    threads: int


class Attention(KernelOp):
    """ai.onnx Attention, every version from 23 (window attributes from 25,
    ``nonpad_kv_seqlen`` from 24)."""

    strided_inputs = EVERY_INPUT  # engine_ready copies only what the core cannot read

    since_version = 23
    inputs = (Input("Q", types=FLOATS, ranks=(3, 4)),
              Input("K", like=0, ranks=(3, 4)),
              Input("V", types=FLOATS, ranks=(3, 4)),
              Input("attn_mask", ranks=(1, 2, 3, 4), optional=True),
              Input("past_key", like=1, ranks=(4,), optional=True),
              Input("past_value", like=2, ranks=(4,), optional=True),
              Input("nonpad_kv_seqlen", types=(T.INT64,), optional=True))
    attributes = (Attr("scale", "float", None),
                  Attr("is_causal", "flag", 0),
                  Attr("q_num_heads", "int", 0),
                  Attr("kv_num_heads", "int", 0),
                  Attr("softcap", "float", 0.0),
                  Attr("qk_matmul_output_mode", "int", 0, allowed=(0, 1, 2, 3)),
                  Attr("softmax_precision", "int", None, allowed=SOFTMAX_PRECISIONS),
                  Attr("left_window_size", "int", -1),
                  Attr("right_window_size", "int", -1))
    # Work is B * N * S * T * (Dk + Dv) multiply-adds.  The engine is
    # GroupQueryAttention's, whose measurement on 2 cores puts the break-even
    # of a second thread near 2^18 of B * N * S * T * H: 2^19 here, where
    # the work counts both products.  (On this shared machine under load a
    # second thread cost ~0.8 ms whatever the size: not measurable again.)
    min_work_per_thread = 1 << 19

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self.given = {a.name for a in onnx_node.attribute}
        # float32 like the attribute: the built-in takes its square root in
        # float32 (the default scale's in float64), which DOUBLE can see
        if self.scale is not None:
            self.scale = np.float32(self.scale)
        self.softmax_dtype = {T.FLOAT: np.float32, T.DOUBLE: np.float64}.get(
            self.softmax_precision)
        outputs = list(onnx_node.output)
        self.n_outputs = len(outputs)
        self.wants = [i < len(outputs) and bool(outputs[i]) for i in range(4)]
        if self.left_window_size < -1 or self.right_window_size < -1:
            self._reject_attribute("attributes left_window_size and right_window_size must be "
                                   f"-1 or nonnegative, got {self.left_window_size} and "
                                   f"{self.right_window_size}")
        if self.q_num_heads < 0 or self.kv_num_heads < 0:
            self._reject_attribute("attributes q_num_heads and kv_num_heads must be positive, "
                                   f"got {self.q_num_heads} and {self.kv_num_heads}")

    # -- validation -----------------------------------------------------

    def _layout(self, Q, K, V) -> tuple[int, int, int, int, int, int, int]:
        """(B, Nq, S, Dk, Nkv, T, Dv) of the (B, N, S, D) views of Q, K and V,
        validated."""
        if not (Q.ndim == K.ndim == V.ndim):
            raise ValueError(self._input_error(
                0, f"Q, K and V must all have rank 3 or all rank 4, got shapes {Q.shape}, "
                   f"{K.shape} and {V.shape}"))
        if Q.ndim == 3:
            nq, nkv = self.q_num_heads, self.kv_num_heads
            if nq <= 0 or nkv <= 0:
                raise ValueError("Attention: rank-3 inputs need attributes q_num_heads and "
                                 f"kv_num_heads, got {nq} and {nkv}")
            for i, (x, n) in enumerate(((Q, nq), (K, nkv), (V, nkv))):
                if x.shape[2] % n:
                    raise ValueError(self._input_error(
                        i, f"has shape {x.shape}: its hidden size is not a multiple of the "
                           f"head count {n}"))
            b, s, dk = Q.shape[0], Q.shape[1], Q.shape[2] // nq
            t, kdk, dv = K.shape[1], K.shape[2] // nkv, V.shape[2] // nkv
            vn, vt = nkv, V.shape[1]
        else:
            if self.opset >= 25 and {"q_num_heads", "kv_num_heads"} & self.given:
                raise ValueError("Attention: q_num_heads and kv_num_heads must not be set for "
                                 "rank-4 inputs")
            b, nq, s, dk = Q.shape
            nkv, t, kdk = K.shape[1], K.shape[2], K.shape[3]
            vn, vt, dv = V.shape[1], V.shape[2], V.shape[3]
        if K.shape[0] != b or V.shape[0] != b:
            raise ValueError(self._input_error(
                1, f"batch sizes differ: Q {Q.shape}, K {K.shape}, V {V.shape}"))
        if vn != nkv or vt != t:
            raise ValueError(self._input_error(
                2, f"has shape {V.shape}, which disagrees with K {K.shape} (heads, sequence)"))
        if kdk != dk:
            raise ValueError(self._input_error(
                1, f"has head size {kdk}, expected Q's {dk} (Q {Q.shape}, K {K.shape})"))
        if nkv == 0 or nq % nkv:
            raise ValueError(self._input_error(
                1, f"has {nkv} heads, which do not divide Q's {nq} heads"))
        return b, nq, s, dk, nkv, t, dv

    def _views(self, Q, K, V):
        """The (B, N, S, D) views of Q, K and V."""
        if Q.ndim == 4:
            return Q, K, V
        nq, nkv = self.q_num_heads, self.kv_num_heads
        return heads_view(Q, nq), heads_view(K, nkv), heads_view(V, nkv)

    def _mask_shape(self, mask, b, nq, s, t):
        """``attn_mask``'s shape as 4-D (size-1 dims kept, to broadcast),
        checked."""
        if mask.dtype.kind not in "biuf" and ELEMENT_TYPES.get(mask.dtype) != T.BFLOAT16:
            raise TypeError(self._input_error(3, f"has element type {mask.dtype}, expected bool "
                                                 "or a numeric type"))
        shape = (1,) * (4 - mask.ndim) + mask.shape
        for dim, full, what in zip(shape[:3], (b, nq, s), ("batch", "q_num_heads",
                                                           "q_sequence_length")):
            if dim not in (1, full):
                raise ValueError(self._input_error(
                    3, f"has shape {mask.shape}, which does not broadcast to (batch, q_num_heads,"
                       f" q_sequence_length, total_sequence_length) = {(b, nq, s, t)} ({what})"))
        if shape[3] > t:
            raise ValueError(self._input_error(
                3, f"has shape {mask.shape}: its last dimension exceeds total_sequence_length {t}"))
        return shape

    def _mask_bias(self, mask, shape, double):
        """The float32 bias of ``attn_mask`` as a 4-D array of ``shape``."""
        small = compact(mask)   # a broadcast mask stays broadcast
        if mask.dtype == np.bool_:
            bias = np.where(small, np.float32(0), np.float32(-np.inf))
        else:  # float64 keeps its precision for the DOUBLE path
            wide = mask.dtype == np.float64 and double
            bias = small.astype(np.float64 if wide else np.float32, copy=False)
        return np.broadcast_to(bias, mask.shape).reshape(shape)

    def _key_ranges(self, b, s, t, past, nonpad):
        """[begin, end) of the keys each query may attend (int32 (B, S)), or
        (None, None) when every query sees every key."""
        windowed = self.left_window_size >= 0 or self.right_window_size >= 0
        if not (self.is_causal or windowed or nonpad is not None):
            return None, None
        if nonpad is not None:  # external cache: the queries end at nonpad
            offset = nonpad.astype(np.int64) - s
        else:
            offset = np.full(b, past, dtype=np.int64)
        pos = offset[:, None] + np.arange(s, dtype=np.int64)[None, :]
        end = np.full((b, s), t, dtype=np.int64)
        if self.is_causal:
            end = np.minimum(end, pos + 1)
        if self.right_window_size >= 0:
            end = np.minimum(end, pos + self.right_window_size + 1)
        if nonpad is not None:
            end = np.minimum(end, nonpad.astype(np.int64)[:, None])
        left = self.left_window_size
        begin = np.maximum(pos - left, 0) if left >= 0 else np.zeros((b, s), np.int64)
        end = np.clip(end, 0, t)
        begin = np.minimum(begin, end)
        return begin.astype(np.int32), end.astype(np.int32)

    # -- run --------------------------------------------------------------

    def _plan(self, Q, K, V, attn_mask=None, past_key=None, past_value=None,
              nonpad_kv_seqlen=None):
        tq = ELEMENT_TYPES[Q.dtype]
        b, nq, s, dk, nkv, t, dv = self._layout(Q, K, V)
        if (past_key is None) != (past_value is None):
            raise ValueError(self._input_error(4, "past_key and past_value must be given together"))
        p = 0
        if past_key is not None:
            if nonpad_kv_seqlen is not None:
                raise ValueError(self._input_error(
                    6, "nonpad_kv_seqlen cannot be combined with past_key / past_value"))
            for i, (past, d) in enumerate(((past_key, dk), (past_value, dv)), 4):
                if past.shape[:2] != (b, nkv) or past.shape[3] != d:
                    raise ValueError(self._input_error(
                        i, f"has shape {past.shape}, expected (batch, kv_num_heads, "
                           f"past_sequence_length, head_size) = ({b}, {nkv}, P, {d})"))
            p = past_key.shape[2]
            if past_value.shape[2] != p:
                raise ValueError(self._input_error(
                    5, f"has shape {past_value.shape}: its length differs from past_key's {p}"))
        t += p
        if nonpad_kv_seqlen is not None and nonpad_kv_seqlen.shape != (b,):
            raise ValueError(self._input_error(
                6, f"has shape {nonpad_kv_seqlen.shape}, expected (batch_size,) = ({b},)"))

        mask_shape, width = None, t
        if attn_mask is not None:
            mask_shape = self._mask_shape(attn_mask, b, nq, s, t)
            width = mask_shape[3]
        begin = end = None
        if nonpad_kv_seqlen is None:
            begin, end = self._key_ranges(b, s, t, p, None)
        scale = self.scale if self.scale is not None else (1.0 / math.sqrt(dk) if dk else 1.0)
        work = b * nq * s * min(width, t) * (dk + dv)
        return Plan(tq, b, nq, s, dk, nkv, dv, p, t, mask_shape, width, begin, end, scale,
                    self._num_threads(work, self.min_work_per_thread))

    def _execute(self, plan, Q, K, V, attn_mask=None, past_key=None, past_value=None,
                 nonpad_kv_seqlen=None):
        op = "Attention"
        tq, b, nq, s, t = plan.element_type, plan.b, plan.nq, plan.s, plan.t
        dk, nkv, dv = plan.dk, plan.nkv, plan.dv
        # sizes first, nothing allocated yet
        for i, (x, d) in ((1, (K, dk)), (2, (V, dv))):
            if past_key is not None:
                check_buffer(op, f"output {i} (present, input {i + 3} + new keys)",
                             (b, nkv, t, d), x.itemsize)
            elif self.wants[i]:
                check_buffer(op, f"output {i} (present, from input {i})", (b, nkv, t, d),
                             x.itemsize)
        check_buffer(op, "output 0 (Y)", (b, nq, s, dv), Q.itemsize)
        if tq in NUMPY_TYPES or self.wants[3]:
            # materialised scores, bias and probabilities: a few (B, Nq, S, T)
            check_buffer(op, "the materialised scores (qk_matmul_output)", (4, b, nq, s, t), 8)
        q4, k4, v4 = self._views(Q, K, V)
        if past_key is not None:
            k4 = concat_cache(past_key, k4)
            v4 = concat_cache(past_value, v4)
            present_k, present_v = k4, v4
        else:
            present_k = fresh(k4, K) if self.wants[1] else None
            present_v = fresh(v4, V) if self.wants[2] else None
        begin, end = plan.begin, plan.end
        if nonpad_kv_seqlen is not None:
            nonpad = nonpad_kv_seqlen
            if nonpad.size and (nonpad.min() < 0 or nonpad.max() > t):
                raise ValueError(self._input_error(
                    6, f"has values outside [0, {t}] (the key sequence length): {nonpad}"))
            begin, end = self._key_ranges(b, s, t, plan.p, nonpad)
        bias, width = None, plan.width
        if attn_mask is not None:
            bias = self._mask_bias(attn_mask, plan.mask_shape, tq == T.DOUBLE)
        self._record_path((tq, simd.state.level), lambda: self._path(tq))
        dense = None
        if tq in NUMPY_TYPES:
            dense = self._dense(q4, k4, v4, plan.scale, bias, width, begin, end, NUMPY_TYPES[tq])
            out4 = dense[0]
        else:
            out4 = self._attend(q4, k4, v4, plan.scale, bias, width, begin, end, Q.ndim == 3,
                                plan.threads)
        y = out4 if Q.ndim == 4 else out4.transpose(0, 2, 1, 3).reshape(b, s, nq * dv)
        if y.dtype != Q.dtype:
            y = y.astype(Q.dtype)
        results = [y, present_k, present_v, None]
        if self.wants[3]:
            if dense is None:
                dense = self._dense(q4, k4, v4, plan.scale, bias, width, begin, end, np.float32,
                                    need_y=False)
            results[3] = dense[1].astype(Q.dtype)
        return tuple(results[: max(self.n_outputs, 1)])

    def _path(self, element_type: int) -> str:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(element_type)
        name = "bfloat16" if element_type == T.BFLOAT16 else np.dtype(dtype).name
        used = "numpy" if element_type in NUMPY_TYPES else engine_level_name(simd.state.level)
        return f"attention_{name}_{used}"

    def _attend(self, q4, k4, v4, scale, bias, width, begin, end, fused, threads) -> np.ndarray:
        """Y as (B, Nq, S, Dv) from the engine (for ``fused`` rank-3 outputs
        a view of a (B, S, Nq, Dv) buffer, so no transpose copy follows)."""
        b, nq, s, dk = q4.shape
        dv = v4.shape[3]
        if v4.dtype != q4.dtype:  # T2 differs from T1: the engine takes one type
            v4 = engine_ready(v4, q4.dtype)
        if width < k4.shape[2]:  # keys past a short mask take no part
            k4, v4 = k4[:, :, :width], v4[:, :, :width]
            if end is not None:
                end = np.minimum(end, np.int32(width))
                begin = np.minimum(begin, end)
        if bias is not None:
            bias = np.broadcast_to(engine_ready(bias), bias.shape[:2] + (s, width))
        if fused:
            out4 = np.empty((b, s, nq, dv), dtype=q4.dtype).transpose(0, 2, 1, 3)
        else:
            out4 = np.empty((b, nq, s, dv), dtype=q4.dtype)
        run_engine(engine_ready(q4), engine_ready(k4), engine_ready(v4), out4, scale=float(scale),
                   bias=bias, begin=begin, end=end, softcap=max(self.softcap, 0.0),
                   softcap_first=True, threads=threads, level=simd.state.level)
        return out4

    def _dense(self, q4, k4, v4, scale, bias, width, begin, end, dtype, need_y=True):
        """Materialised (Y, qk_matmul_output) in ``dtype``, as the built-in
        computes them: for DOUBLE and for the optional scores output."""
        b, nq, s, _ = q4.shape
        t = k4.shape[2]
        scores = dense_scores(q4, k4, scale, dtype)
        if self.softcap > 0:
            scores = np.tanh(scores / self.softcap) * self.softcap
        full = None  # the additive bias over every key, -inf where masked
        if bias is not None or begin is not None or width < t:
            full = np.zeros((1, 1, s, t), dtype)
            if bias is not None:
                full = full[..., :width] + bias.astype(dtype)
                if width < t:
                    pad = np.full(full.shape[:3] + (t - width,), -np.inf, dtype)
                    full = np.concatenate((full, pad), axis=-1)
            elif width < t:
                full[..., width:] = -np.inf
            if begin is not None:
                keys = np.arange(t)
                allowed = (keys >= begin[:, None, :, None]) & (keys < end[:, None, :, None])
                full = np.where(allowed, full, dtype(-np.inf))
        with_bias = scores if full is None else scores + full
        probs = None
        if self.qk_matmul_output_mode == 3 or need_y:
            masked = None
            if full is not None and t:
                masked = np.isneginf(full.max(axis=-1, keepdims=True))
            wide = self.softmax_dtype
            if wide is not None and wide != dtype:
                # softmax_precision FLOAT or DOUBLE: the built-in casts there
                # and back (FLOAT16 / BFLOAT16 are not honoured: no lower
                # than the data type, float32 in the engine)
                probs = guarded_softmax(with_bias.astype(wide), masked).astype(dtype)
            else:
                probs = guarded_softmax(with_bias, masked)
        mode = self.qk_matmul_output_mode
        qk = probs if mode == 3 else with_bias if mode == 2 else scores
        y = dense_values(probs, v4) if need_y else None
        return y, qk


KERNELS = {
    "RegisterAttentionKernel": (Attention,),
}
