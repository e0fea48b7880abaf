# cython: language_level=3
"""8-bit integer matrix product cores (see olc_gemm_int8.h for the scheme).

The adapter passes uint8/int8 arrays (viewed as bytes), int64 arrays of
element offsets per batch, shifted zero points as int32 arrays with element
strides, the SIMD level and a thread count.  The GIL is released for the
arithmetic.
"""

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

cnp.import_array()

cdef extern from "engines/gemm_int8/olc_gemm_int8.h" nogil:
    int olc_i8_kind(int level)
    int64_t olc_i8_packed_size(int64_t K, int64_t N)
    int64_t olc_i8_panels(int64_t N)
    void olc_i8_pack_b(int kind, int b_signed, int64_t nb, const uint8_t *b,
                       const int64_t *b_offsets, int64_t K, int64_t N, int8_t *dst,
                       int32_t *colsum, int nthreads)
    int olc_i8_gemm(int kind, int a_signed, int64_t batch, const uint8_t *a,
                    const int64_t *a_offsets, const int8_t *bp, const int32_t *colsum,
                    const int64_t *b_index, const int32_t *za, int64_t za_bs, int64_t za_rs,
                    const int32_t *zb, int64_t zb_bs, int64_t zb_cs, int64_t M, int64_t N,
                    int64_t K, int32_t *y, int nthreads)
    void olc_i8_requantize(int level, int64_t batch, int64_t M, int64_t N, const int32_t *c,
                           const double *mult, int64_t m_bs, int64_t m_rs, int64_t m_cs,
                           double zp, int out_signed, void *y, int nthreads)

#: Names of the engine kinds olc_i8_kind returns.
KIND_NAMES = ("scalar", "avx2", "avx512", "avx512vnni")


def kind(int level):
    """The engine kind (index into KIND_NAMES) used at a SIMD level."""
    return olc_i8_kind(level)


def packed_size(int64_t K, int64_t N):
    """Bytes of one packed K x N matrix B."""
    return olc_i8_packed_size(K, N)


def colsum_size(int64_t N):
    """int32 column sums kept per packed matrix."""
    return olc_i8_panels(N) * 16


def pack_b(int kind, bint b_signed, cnp.ndarray b, cnp.ndarray b_offsets, int64_t K, int64_t N,
           cnp.ndarray dst, cnp.ndarray colsum, int nthreads):
    """Packs len(b_offsets) row-major K x N matrices of ``b`` into ``dst``
    (int8) and their column sums into ``colsum`` (int32)."""
    cdef int64_t nb = cnp.PyArray_SIZE(b_offsets)
    if (cnp.PyArray_NBYTES(dst) < nb * olc_i8_packed_size(K, N)
            or cnp.PyArray_SIZE(colsum) < nb * olc_i8_panels(N) * 16):
        raise ValueError("gemm_int8 core: packing buffer too small")
    cdef const uint8_t *pb = <const uint8_t *>cnp.PyArray_DATA(b)
    cdef const int64_t *off = <const int64_t *>cnp.PyArray_DATA(b_offsets)
    cdef int8_t *pd = <int8_t *>cnp.PyArray_DATA(dst)
    cdef int32_t *ps = <int32_t *>cnp.PyArray_DATA(colsum)
    with nogil:
        olc_i8_pack_b(kind, b_signed, nb, pb, off, K, N, pd, ps, nthreads)


def gemm(int kind, bint a_signed, cnp.ndarray a, cnp.ndarray a_offsets, cnp.ndarray packed,
         cnp.ndarray colsum, cnp.ndarray b_index, cnp.ndarray za, int64_t za_bs, int64_t za_rs,
         cnp.ndarray zb, int64_t zb_bs, int64_t zb_cs, int64_t M, int64_t N, int64_t K,
         cnp.ndarray y, int nthreads):
    """y[q] = (a[q] - za)(B[b_index[q]] - zb), int32, for q < len(a_offsets)."""
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
        status = olc_i8_gemm(kind, a_signed, batch, pa, aoff, pp, pc, bidx, pza, za_bs, za_rs,
                             pzb, zb_bs, zb_cs, M, N, K, py, nthreads)
    if status != 0:
        raise MemoryError("gemm_int8 core: no memory for packing buffers")


def requantize(int level, cnp.ndarray c, int64_t batch, int64_t M, int64_t N, cnp.ndarray mult,
               int64_t m_bs, int64_t m_rs, int64_t m_cs, double zp, bint out_signed,
               cnp.ndarray y, int nthreads):
    """y = saturate(rint(c * mult + zp)) as int8/uint8 (mult: float64 read
    with element strides per batch, row, column; the column stride 0 or 1)."""
    if m_cs not in (0, 1):
        raise ValueError("gemm_int8 core: the multiplier's column stride must be 0 or 1")
    cdef const int32_t *pc = <const int32_t *>cnp.PyArray_DATA(c)
    cdef const double *pm = <const double *>cnp.PyArray_DATA(mult)
    cdef void *py = cnp.PyArray_DATA(y)
    with nogil:
        olc_i8_requantize(level, batch, M, N, pc, pm, m_bs, m_rs, m_cs, zp, out_signed, py,
                          nthreads)
