"""NAIVE attention engine: the readable NumPy twin of
:func:`onnx_light_cpu._kernels.engines.attention.attend` (same signature, same
semantics), used by the NAIVE com.microsoft attention adapters and as the
oracle of the C engine's tests.

    score[s, t] = scale * dot(q[s], k[t])                   (float32)
    softcap_first=False: score = c * tanh((score + bias) / c)
    softcap_first=True:  score = c * tanh(score / c) + bias     (ai.onnx Attention, GQA)
    only keys key_begin[b, s] <= t < key_end[b, s] take part
    p = softmax over the participating keys plus the optional sink logit
    out[s] = sum_t p[t] * v[t], rounded once to out's dtype

A row with no participating key, or whose scores are all -inf (and no
sink), or whose keys the bias masks whole (-inf), is written as zeros; a
row with a NaN score among the keys it attends (a NaN in its query, a key,
the bias) is NaN, as the references' softmax gives it.
"""

from __future__ import annotations

import numpy as np


def attend(q, k, v, out, *, scale, bias=None, key_begin=None, key_end=None,
           softcap=0.0, softcap_first=False, sink=None, past=None, level=None,
           threads=1) -> None:
    """Write attention of ``q`` [B, Nq, S, Dk] over ``k`` [B, Nkv, T, Dk] /
    ``v`` [B, Nkv, T, Dv] into ``out`` [B, Nq, S, Dv].

    ``bias``: None or float32 broadcastable (B|1, Nq|1, S, T).  ``key_begin``
    / ``key_end``: None or int32 (B, S), trusted 0 <= begin <= end <= T.
    ``sink``: None or float32 [Nq], a virtual logit per query head that
    joins the normalisation and contributes no value.  ``threads`` and
    ``level`` are accepted for signature parity and ignored.

    ``past``: None or (past_k [B, Nkv, P, Dk], past_v [B, Nkv, P, Dv], lens
    int32 [B]): rows t < lens[b] of k and v are first copied from the past
    cache (GroupQueryAttention fills its present buffers this way; the C
    engine copies each decode chunk just before it reads it).
    """
    if past is not None:
        for b, n in enumerate(np.asarray(past[2])):
            k[b, :, :n] = past[0][b, :, :n]
            v[b, :, :n] = past[1][b, :, :n]
    B, Nq, S, _ = q.shape
    Nkv, T = k.shape[1], k.shape[2]
    group = Nq // Nkv
    scale = np.float32(scale)
    c = np.float32(softcap)
    for b in range(B):
        for h in range(Nq):
            kh = k[b, h // group].astype(np.float32)   # grouped heads share K/V
            vh = v[b, h // group].astype(np.float32)
            qh = q[b, h].astype(np.float32)
            scores = (qh @ kh.T) * scale                # [S, T]
            if bias is not None:
                bh = np.asarray(bias[min(b, bias.shape[0] - 1), min(h, bias.shape[1] - 1)],
                                dtype=np.float32)
            for s in range(S):
                lo = 0 if key_begin is None else int(key_begin[b, s])
                hi = T if key_end is None else int(key_end[b, s])
                row = scores[s, lo:hi].copy()
                if bias is not None:
                    if c > 0 and not softcap_first:
                        row = c * np.tanh((row + bh[s, lo:hi]) / c)
                    elif c > 0:
                        row = c * np.tanh(row / c) + bh[s, lo:hi]
                    else:
                        row = row + bh[s, lo:hi]
                elif c > 0:
                    row = c * np.tanh(row / c)
                if bias is not None and hi > lo and np.all(bh[s, lo:hi] == -np.inf):
                    out[b, h, s] = 0  # masked whole by the bias: zeros, NaN scores or not
                    continue
                logits = row if sink is None else np.append(row, np.float32(sink[h]))
                m = logits.max() if logits.size else -np.inf
                if not np.isfinite(m) and m < 0:
                    out[b, h, s] = 0
                    continue
                e = np.exp(row - m)
                denom = e.sum(dtype=np.float32)
                if sink is not None:
                    denom += np.exp(np.float32(sink[h]) - m)
                acc = e @ vh[lo:hi] if hi > lo else np.zeros(vh.shape[1], np.float32)
                out[b, h, s] = (acc / denom).astype(out.dtype)


def append_rows(new_k, new_v, start, count, present_k, present_v) -> None:
    """The twin of ``_kernels.engines.attention.append_rows``: for each batch
    b, rows [start[b], start[b] + count[b]) of present_k/present_v [B, Nkv,
    L, H] take rows [0, count[b]) of new_k/new_v [B, S, Nkv, H], and the
    rows after them become zeros."""
    for b in range(present_k.shape[0]):
        p0, a = int(start[b]), int(count[b])
        for dst, new in ((present_k, new_k), (present_v, new_v)):
            dst[b, :, p0:p0 + a] = new[b, :a].transpose(1, 0, 2)
            dst[b, :, p0 + a:] = 0


def quantize_rows(new, start, count, present, inv, bits) -> None:
    """The twin of ``_kernels.engines.attention.quantize_rows``: rows
    [start[b], start[b] + count[b]) of the quantized cache ``present`` (int8
    [B, N, L, H] for 8 bits; uint8 [B, N, L, H / 2] for 4: code + 8, low
    nibble the even channel) take clamp(round-half-even(x * inv)) of rows
    [0, count[b]) of ``new`` (float32 [B, S, N, H]; inv float32 [N * H]),
    NaN giving the largest code; the rows after them become zero bytes."""
    B, _, N, H = new.shape
    lo, hi = (-128, 127) if bits == 8 else (-8, 7)
    inv = np.asarray(inv, np.float32).reshape(N, 1, H)
    for b in range(B):
        p0, a = int(start[b]), int(count[b])
        x = new[b, :a].transpose(1, 0, 2).astype(np.float32) * inv      # [N, a, H]
        codes = np.clip(np.where(np.isnan(x), hi, np.rint(x)), lo, hi).astype(np.int16)
        if bits == 4:
            codes = codes + 8
            codes = codes[..., 0::2] | (codes[..., 1::2] << 4)
        present[b, :, p0:p0 + a] = codes.astype(present.dtype)
        present[b, :, p0 + a:] = 0


def dequantize(codes, scale, bits) -> np.ndarray:
    """float32 values of a quantized cache [B, N, T, H or H / 2] (see
    ``quantize_rows``): code * scale[n * H + d]."""
    c = np.asarray(codes)
    if bits == 4:
        c = np.stack([(c & 15).astype(np.int16) - 8, (c >> 4).astype(np.int16) - 8], axis=-1)
        c = c.reshape(codes.shape[:-1] + (2 * codes.shape[-1],))
    N, H = c.shape[1], c.shape[3]
    with np.errstate(invalid="ignore"):   # 0 * inf: NaN, as the engine
        return c.astype(np.float32) * np.asarray(scale, np.float32).reshape(1, N, 1, H)
