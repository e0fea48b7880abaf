# cython: language_level=3
"""8-bit integer matrix product cores (see olc_gemm_int8.h for the scheme).

The adapter passes uint8/int8 arrays (viewed as bytes), int64 arrays of
element offsets per batch, shifted zero points as int32 arrays with element
strides, the SIMD level and a thread count.  The packed layout of B depends
on the level the engine runs at (:func:`level_used`).  The GIL is released
for the arithmetic.
"""

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from olc_gemm_int8 cimport (olc_i8_gemm, olc_i8_level, olc_i8_pack_b, olc_i8_packed_size,
                            olc_i8_panels, olc_i8_requantize, olc_i8_uses_amx)
from olc_pool cimport olc_pool_import

cnp.import_array()
olc_pool_import()


def level_used(int level):
    """The level the engine runs at for a SIMD level (an index into
    simd.LEVEL_NAMES; AVX-512 VNNI kept)."""
    return olc_i8_level(level)


def uses_amx(int level, int64_t M):
    """Whether a product of M rows (per matrix) runs on AMX tiles at this
    SIMD level (the CPU has AMX-INT8 and the OS grants it)."""
    return bool(olc_i8_uses_amx(level, M))


def packed_size(int64_t K, int64_t N):
    """Bytes of one packed K x N matrix B."""
    return olc_i8_packed_size(K, N)


def colsum_size(int64_t N):
    """int32 column sums kept per packed matrix."""
    return olc_i8_panels(N) * 16


def pack_b(cnp.ndarray b, cnp.ndarray b_offsets, cnp.ndarray dst, cnp.ndarray colsum,
           int64_t K, int64_t N, bint b_signed, int level, int threads):
    """Packs len(b_offsets) row-major K x N matrices of ``b`` into ``dst``
    (int8) and their column sums into ``colsum`` (int32), for ``level``."""
    cdef int64_t nb = cnp.PyArray_SIZE(b_offsets)
    if (cnp.PyArray_NBYTES(dst) < nb * olc_i8_packed_size(K, N)
            or cnp.PyArray_SIZE(colsum) < nb * olc_i8_panels(N) * 16):
        raise ValueError("gemm_int8 core: packing buffer too small")
    cdef const uint8_t *pb = <const uint8_t *>cnp.PyArray_DATA(b)
    cdef const int64_t *off = <const int64_t *>cnp.PyArray_DATA(b_offsets)
    cdef int8_t *pd = <int8_t *>cnp.PyArray_DATA(dst)
    cdef int32_t *ps = <int32_t *>cnp.PyArray_DATA(colsum)
    with nogil:
        olc_i8_pack_b(pb, off, nb, K, N, b_signed, pd, ps, level, threads)


def gemm(cnp.ndarray a, cnp.ndarray a_offsets, cnp.ndarray packed, cnp.ndarray colsum,
         cnp.ndarray b_index, cnp.ndarray za, cnp.ndarray zb, cnp.ndarray y, int64_t za_bs,
         int64_t za_rs, int64_t zb_bs, int64_t zb_cs, int64_t M, int64_t N, int64_t K,
         bint a_signed, int level, int threads):
    """y[q] = (a[q] - za)(B[b_index[q]] - zb), int32, for q < len(a_offsets);
    ``packed``/``colsum`` from :func:`pack_b` at the same level."""
    cdef const uint8_t *pa = <const uint8_t *>cnp.PyArray_DATA(a)
    cdef const int64_t *aoff = <const int64_t *>cnp.PyArray_DATA(a_offsets)
    cdef const int8_t *pp = <const int8_t *>cnp.PyArray_DATA(packed)
    cdef const int32_t *pc = <const int32_t *>cnp.PyArray_DATA(colsum)
    cdef const int64_t *bidx = <const int64_t *>cnp.PyArray_DATA(b_index)
    cdef const int32_t *pza = <const int32_t *>cnp.PyArray_DATA(za)
    cdef const int32_t *pzb = <const int32_t *>cnp.PyArray_DATA(zb)
    cdef int32_t *py = <int32_t *>cnp.PyArray_DATA(y)
    cdef int64_t batch = cnp.PyArray_SIZE(a_offsets)
    cdef int status
    with nogil:
        status = olc_i8_gemm(pa, aoff, batch, pp, pc, bidx, pza, za_bs, za_rs, pzb, zb_bs,
                             zb_cs, py, M, N, K, a_signed, level, threads)
    if status != 0:
        raise MemoryError("gemm_int8 core: no memory for packing buffers")


def requantize(cnp.ndarray c, cnp.ndarray mult, cnp.ndarray y, int64_t batch, int64_t M,
               int64_t N, int64_t m_bs, int64_t m_rs, int64_t m_cs, double zp,
               bint out_signed, int level, int threads):
    """y = saturate(rint(c * mult + zp)) as int8/uint8 (mult: float64 read
    with element strides per batch, row, column; the column stride 0 or 1)."""
    if m_cs not in (0, 1):
        raise ValueError("gemm_int8 core: the multiplier's column stride must be 0 or 1")
    cdef const int32_t *pc = <const int32_t *>cnp.PyArray_DATA(c)
    cdef const double *pm = <const double *>cnp.PyArray_DATA(mult)
    cdef void *py = cnp.PyArray_DATA(y)
    with nogil:
        olc_i8_requantize(pc, pm, m_bs, m_rs, m_cs, py, batch, M, N, zp, out_signed, level,
                          threads)
