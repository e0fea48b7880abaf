"""NAIVE com.microsoft RotaryEmbedding: the formula in NumPy, float32
arithmetic, one rounding to the input type.  A test oracle, not registered
(the policy does not cover RotaryEmbedding).

    y = rotary_embedding(x, position_ids, cos_cache, sin_cache,
                         interleaved=0, num_heads=0, rotary_embedding_dim=0)

x is (B, S, N*H) or (B, N, S, H); position_ids is (B, S) or a one-element
offset (token s of every batch takes position offset + s); the caches are
(max_position, rotary_dim / 2).

    y = rotate(x, cos, sin, positions, interleaved)

is the twin of the rotary engine on (B, S, N, H) rows, as NAIVE
GroupQueryAttention's do_rotary uses it.
"""

from __future__ import annotations

import numpy as np


def rotary_embedding(x: np.ndarray, position_ids: np.ndarray, cos_cache: np.ndarray,
                     sin_cache: np.ndarray, interleaved: int = 0, num_heads: int = 0,
                     rotary_embedding_dim: int = 0) -> np.ndarray:
    dtype = x.dtype
    if x.ndim == 4:  # (B, N, S, H) -> (B, S, N, H)
        v = x.transpose(0, 2, 1, 3)
    else:
        b, s, hidden = x.shape
        head = hidden // num_heads if num_heads else 2 * cos_cache.shape[1]
        v = x.reshape(b, s, hidden // head, head)
    v = v.astype(np.float32)
    batch, seq, _, head = v.shape
    rot = rotary_embedding_dim or head
    half = rot // 2

    if position_ids.size == 1 and position_ids.ndim <= 1:
        start = int(position_ids.reshape(()))
        positions = np.broadcast_to(np.arange(start, start + seq), (batch, seq))
    else:
        positions = position_ids
    if positions.size and (positions.min() < 0 or positions.max() >= cos_cache.shape[0]):
        raise ValueError("RotaryEmbedding: position_ids outside the cos/sin caches")
    cos = cos_cache.astype(np.float32)[positions][:, :, None, :]  # (B, S, 1, half)
    sin = sin_cache.astype(np.float32)[positions][:, :, None, :]

    out = v.copy()
    if interleaved:
        first, second = v[..., 0:rot:2], v[..., 1:rot:2]
    else:
        first, second = v[..., :half], v[..., half:rot]
    real = first * cos - second * sin
    imag = first * sin + second * cos
    if interleaved:
        out[..., 0:rot:2], out[..., 1:rot:2] = real, imag
    else:
        out[..., :half], out[..., half:rot] = real, imag

    out = out.astype(dtype)
    if x.ndim == 4:
        return out.transpose(0, 2, 1, 3).copy()
    return out.reshape(x.shape)


def rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, positions: np.ndarray,
           interleaved: bool) -> np.ndarray:
    """x [B, S, N, H] rotated by the cache rows at positions [B, S] (float32
    arithmetic, one rounding); cos/sin [P, R/2] rotate the first R dims.
    The twin of ``_kernels.engines.rotary.rotate`` (GroupQueryAttention's
    ``do_rotary``)."""
    half = cos.shape[1]
    R = 2 * half
    c = cos[positions].astype(np.float32)[:, :, None, :]   # [B, S, 1, R/2]
    s = sin[positions].astype(np.float32)[:, :, None, :]
    xf = x.astype(np.float32)
    out = xf.copy()
    if interleaved:
        x1, x2 = xf[..., 0:R:2], xf[..., 1:R:2]
        out[..., 0:R:2] = x1 * c - x2 * s
        out[..., 1:R:2] = x2 * c + x1 * s
    else:
        x1, x2 = xf[..., :half], xf[..., half:R]
        out[..., :half] = x1 * c - x2 * s
        out[..., half:R] = x2 * c + x1 * s
    return out.astype(x.dtype)
