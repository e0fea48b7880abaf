# cython: language_level=3
"""Cores of the quantization family (see quantization/olc_quantization.h):
ONNX Runtime's dynamic uint8 quantization of a float tensor, QuantizeLinear
per tensor to an 8-bit type, and the float epilogue of an int32 product
(multiplier and bias per column).  The adapter
passes contiguous arrays of the right dtypes; the GIL is released for the
arithmetic.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from olc_pool cimport olc_pool_import
from olc_quantization cimport (OLC_Q_CHUNK, olc_q_binary_8, olc_q_dynamic_u8, olc_q_gemm_float,
                              olc_q_quantize_linear_8, olc_q_scale_rows)

cnp.import_array()
olc_pool_import()


def dynamic_quantize_u8(cnp.ndarray x, cnp.ndarray q, int level, int threads):
    """q (uint8, x's size) = x (float32) quantized; returns (scale, zero point)."""
    cdef int64_t n = cnp.PyArray_SIZE(x)
    if cnp.PyArray_SIZE(q) < n:
        raise ValueError("quantization core: output buffer too small")
    cdef int64_t tasks = (n + OLC_Q_CHUNK - 1) // OLC_Q_CHUNK
    cdef cnp.ndarray bounds = np.empty(2 * tasks + 2, dtype=np.float32)
    cdef float *pb = <float *>cnp.PyArray_DATA(bounds)
    cdef const float *px = <const float *>cnp.PyArray_DATA(x)
    cdef uint8_t *pq = <uint8_t *>cnp.PyArray_DATA(q)
    cdef float scale = 1.0
    cdef int32_t zp = 0
    with nogil:
        olc_q_dynamic_u8(px, n, pq, pb, pb + tasks + 1, &scale, &zp, level, threads)
    return scale, zp


def quantize_linear_8(cnp.ndarray x, cnp.ndarray q, float scale, int32_t zp, int32_t qmin,
                      int32_t qmax, int level, int threads):
    """q (8-bit, x's size, as bytes) = saturate(round_half_even(x / scale) +
    zp) into [qmin, qmax]; x float32."""
    cdef int64_t n = cnp.PyArray_SIZE(x)
    if cnp.PyArray_NBYTES(q) < n:
        raise ValueError("quantization core: output buffer too small")
    cdef const float *px = <const float *>cnp.PyArray_DATA(x)
    cdef uint8_t *pq = <uint8_t *>cnp.PyArray_DATA(q)
    with nogil:
        olc_q_quantize_linear_8(px, n, scale, zp, qmin, qmax, pq, level, threads)


def binary_8(cnp.ndarray x, cnp.ndarray y, cnp.ndarray out, bint mul, int mode,
             bint is_signed, float sx, float sy, float sc, int32_t zx, int32_t zy, int32_t zc,
             int level, int threads):
    """out = QLinearAdd (mul False) or QLinearMul of x and y: contiguous
    8-bit arrays of out's size (broadcast already)."""
    cdef int64_t n = cnp.PyArray_SIZE(out)
    if cnp.PyArray_NBYTES(x) < n or cnp.PyArray_NBYTES(y) < n or cnp.PyArray_NBYTES(out) < n:
        raise ValueError("quantization core: buffers too small")
    cdef const uint8_t *px = <const uint8_t *>cnp.PyArray_DATA(x)
    cdef const uint8_t *py = <const uint8_t *>cnp.PyArray_DATA(y)
    cdef uint8_t *po = <uint8_t *>cnp.PyArray_DATA(out)
    with nogil:
        olc_q_binary_8(px, py, n, mul, mode, is_signed, sx, sy, sc, zx, zy, zc, po, level,
                       threads)


def gemm_float(cnp.ndarray a, cnp.ndarray a_offsets, cnp.ndarray packed, cnp.ndarray colsum,
               cnp.ndarray b_index, cnp.ndarray za, cnp.ndarray zb, cnp.ndarray y, int64_t za_bs,
               int64_t za_rs, int64_t zb_bs, int64_t zb_cs, int64_t M, int64_t N, int64_t K,
               bint a_signed, int level, int threads, cnp.ndarray m, int64_t m_bs,
               int64_t m_cs, bias):
    """y (float32) = float(acc) * m + bias, acc the int32 products of the
    gemm_int8 engine's ``gemm`` (the same arguments, ``level`` its level),
    converted tile by tile; m read at batch * m_bs + column * m_cs, bias
    (float32 [N]) or None."""
    if m_cs not in (0, 1):
        raise ValueError("quantization core: the multiplier's column stride must be 0 or 1")
    if cnp.PyArray_NBYTES(y) < cnp.PyArray_SIZE(a_offsets) * M * N * 4:
        raise ValueError("quantization core: output buffer too small")
    cdef const uint8_t *pa = <const uint8_t *>cnp.PyArray_DATA(a)
    cdef const int64_t *aoff = <const int64_t *>cnp.PyArray_DATA(a_offsets)
    cdef const int8_t *pp = <const int8_t *>cnp.PyArray_DATA(packed)
    cdef const int32_t *pc = <const int32_t *>cnp.PyArray_DATA(colsum)
    cdef const int64_t *bidx = <const int64_t *>cnp.PyArray_DATA(b_index)
    cdef const int32_t *pza = <const int32_t *>cnp.PyArray_DATA(za)
    cdef const int32_t *pzb = <const int32_t *>cnp.PyArray_DATA(zb)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    cdef const float *pm = <const float *>cnp.PyArray_DATA(m)
    cdef const float *pbias = NULL
    if bias is not None:
        pbias = <const float *>cnp.PyArray_DATA(bias)
    cdef int64_t batch = cnp.PyArray_SIZE(a_offsets)
    cdef int status
    with nogil:
        status = olc_q_gemm_float(pa, aoff, batch, pp, pc, bidx, pza, za_bs, za_rs, pzb, zb_bs,
                                  zb_cs, py, M, N, K, a_signed, pm, m_bs, m_cs, pbias, level,
                                  threads)
    if status != 0:
        raise MemoryError("quantization core: no memory for packing buffers")


def scale_rows(cnp.ndarray c, int64_t rows, int64_t N, int64_t rows_per_batch,
               cnp.ndarray m, int64_t m_bs, int64_t m_cs, bias, cnp.ndarray y, int level,
               int threads):
    """y (float32, rows x N) = float(c) * m + bias, m read at batch * m_bs +
    column * m_cs (m_cs 0 or 1), bias (float32 [N]) or None."""
    if m_cs not in (0, 1):
        raise ValueError("quantization core: the multiplier's column stride must be 0 or 1")
    if cnp.PyArray_SIZE(c) < rows * N or cnp.PyArray_SIZE(y) < rows * N:
        raise ValueError("quantization core: buffers too small")
    cdef const int32_t *pc = <const int32_t *>cnp.PyArray_DATA(c)
    cdef const float *pm = <const float *>cnp.PyArray_DATA(m)
    cdef const float *pb = NULL
    if bias is not None:
        pb = <const float *>cnp.PyArray_DATA(bias)
    cdef float *py = <float *>cnp.PyArray_DATA(y)
    with nogil:
        olc_q_scale_rows(pc, rows, N, rows_per_batch, pm, m_bs, m_cs, pb, py, level, threads)
