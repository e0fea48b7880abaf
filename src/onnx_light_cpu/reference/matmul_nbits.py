"""Readable NumPy MatMulNBits (com.microsoft): unpack the codes, dequantize,
multiply.  A test oracle, not registered under the policy (the operator is
standalone).  See ``onnx_light_cpu.ops.matmul_nbits`` for the formats.

    y = a @ ((q - zero_point) * scale).T + bias

With ``accuracy_level=4`` (integer zero points, finite values) it follows
the int8 scheme instead: every block
of an activation row (min(block_size, 256) elements) is quantized to
rint(a * 127 / max|a|), and the integer dot products with (q - zero_point)
are scaled by both scales.
"""

from __future__ import annotations

import numpy as np


def unpack_codes(b: np.ndarray, bits: int, count: int) -> np.ndarray:
    """The first ``count`` codes of each row of ``b`` (uint8 [rows, bytes]),
    packed low bits first; for bits=3, code p is bits [3p, 3p+3) of the
    row read as one little-endian integer."""
    b = np.asarray(b, dtype=np.uint8)
    if bits == 3:
        bitsarr = np.unpackbits(b, axis=-1, bitorder="little")
        n = bitsarr.shape[-1] // 3
        groups = bitsarr[..., : 3 * n].reshape(b.shape[:-1] + (n, 3)).astype(np.int64)
        codes = groups[..., 0] | (groups[..., 1] << 1) | (groups[..., 2] << 2)
    else:
        per_byte = 8 // bits
        shifts = np.arange(per_byte, dtype=np.uint8) * bits
        codes = ((b[..., None] >> shifts) & ((1 << bits) - 1)).reshape(b.shape[:-1] + (-1,))
    return codes[..., :count].astype(np.int64)


def codes_matrix(b: np.ndarray, K: int, N: int, bits: int, block_size: int) -> np.ndarray:
    """Integer codes q as an [N, K] matrix (B is [N, nb, blob])."""
    nb = -(-K // block_size)
    per_block = unpack_codes(np.asarray(b).reshape(N, nb, -1), bits, block_size)
    return per_block.reshape(N, nb * block_size)[:, :K]


def zero_point_matrix(zero_points, K: int, N: int, bits: int, block_size: int,
                      dtype) -> np.ndarray:
    """Zero points as float [N, nb]: the default 2^(bits-1), packed uint8
    (each column starting a byte; for bits=3 one byte a block) or floating."""
    nb = -(-K // block_size)
    if zero_points is None:
        default = 4 if bits == 3 else 1 << (bits - 1)
        return np.full((N, nb), float(default))
    zp = np.asarray(zero_points)
    if zp.dtype == np.uint8:
        if bits in (3, 8):
            return zp.reshape(N, nb).astype(np.float64)
        return unpack_codes(zp.reshape(N, -1), bits, nb).astype(np.float64)
    return zp.reshape(N, nb).astype(np.float32).astype(np.float64)


def dequantize(b, scales, zero_points, K: int, N: int, bits: int, block_size: int) -> np.ndarray:
    """The float32 weights [K, N], (q - zero_point) * scale rounded to float32."""
    nb = -(-K // block_size)
    q = codes_matrix(b, K, N, bits, block_size)
    s = np.asarray(scales).reshape(N, nb).astype(np.float32)
    z = zero_point_matrix(zero_points, K, N, bits, block_size, s.dtype)
    block = np.arange(K) // block_size
    w = (q.astype(np.float32) - z[:, block].astype(np.float32)) * s[:, block]
    return w.T.astype(np.float32)


def _int8_product(a2: np.ndarray, q: np.ndarray, s: np.ndarray, z: np.ndarray,
                  K: int, block_size: int) -> np.ndarray:
    """Accuracy level 4: the block-wise int8 scheme, in float64."""
    per = block_size // min(block_size, 256)
    s, z = np.repeat(s, per, axis=1), np.repeat(z, per, axis=1)
    block_size //= per
    M, N, nb = a2.shape[0], q.shape[0], s.shape[1]
    pad = nb * block_size - K
    ap = np.pad(a2.astype(np.float32), ((0, 0), (0, pad))).reshape(M, nb, block_size)
    amax = np.abs(ap).max(axis=-1)
    inv = np.where(amax != 0, np.float32(127) / np.where(amax == 0, 1, amax), 0)
    qa = np.rint(ap * inv.astype(np.float32)[..., None]).astype(np.int64)
    sa = (amax / np.float32(127)).astype(np.float32)
    qp = np.pad(q, ((0, 0), (0, pad))).reshape(N, nb, block_size)
    dots = np.einsum("mbk,nbk->mnb", qa, qp) - z.astype(np.int64)[None] * qa.sum(-1)[:, None]
    return np.einsum("mnb,mb,nb->mn", dots.astype(np.float64), sa.astype(np.float64),
                     s.astype(np.float64))


def matmul_nbits(a, b, scales, zero_points=None, bias=None, K: int = 0, N: int = 0,
                 bits: int = 4, block_size: int = 32, accuracy_level: int = 0) -> np.ndarray:
    """MatMulNBits on NumPy arrays; the result has a's dtype and shape
    a.shape[:-1] + (N,)."""
    a = np.asarray(a)
    a2 = a.reshape(-1, K).astype(np.float32)
    nb = -(-K // block_size)
    integer_zp = zero_points is None or np.asarray(zero_points).dtype == np.uint8
    int8_format = bits != 2 or 32 <= block_size <= 128
    s = np.asarray(scales).reshape(N, nb).astype(np.float32)
    finite = np.isfinite(a2).all() and np.isfinite(s).all() and (
        zero_points is None or np.isfinite(np.asarray(zero_points, dtype=np.float32)).all())
    if accuracy_level == 4 and integer_zp and int8_format and finite:
        q = codes_matrix(b, K, N, bits, block_size)
        z = zero_point_matrix(zero_points, K, N, bits, block_size, np.float32)
        y = _int8_product(a2, q, s, z, K, block_size)
    else:  # float semantics, element by element (also for values not finite)
        with np.errstate(invalid="ignore", over="ignore"):
            w = dequantize(b, scales, zero_points, K, N, bits, block_size)
            y = a2.astype(np.float64) @ w.astype(np.float64)
    if bias is not None:
        y = y + np.asarray(bias).astype(np.float64)
    return y.astype(a.dtype).reshape(a.shape[:-1] + (N,))
