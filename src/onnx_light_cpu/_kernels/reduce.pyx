# cython: language_level=3
"""ReduceSum and Softmax cores.

ReduceSum takes a contiguous tensor viewed as [A, R, B] and sums over R;
Softmax takes [rows, n] (last axis) or [outer, N, inner] (another axis).
Work is split over whole blocks, rows or column ranges, never inside one
sum, so the thread count never changes a result (see olc_reduce.h).
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport malloc, free

from olc_reduce cimport (
    OLC_COL_BLOCK, OLC_SUM_BLOCK, olc_bsum_fn, olc_bsum_select, olc_csum_fn, olc_csum_select,
    olc_isum_fn, olc_isum_select, olc_reduce_level, olc_softmax_cols_f32, olc_softmax_cols_f64,
    olc_softmax_rows, olc_store_sums,
)

cnp.import_array()

def level_used(int dtype, int level):
    """The instruction-set level the float cores run at (integers: scalar)."""
    if olc_bsum_select(dtype, 0) == NULL:
        return 0
    return olc_reduce_level(level)


def reduce_sum(cnp.ndarray x, cnp.ndarray out, int64_t A, int64_t R, int64_t B, int dtype,
               int level, int threads):
    """out[a, b] = sum over r of x[a, r, b] (both contiguous)."""
    level = olc_reduce_level(level)
    cdef const char *px = <const char *>cnp.PyArray_DATA(x)
    cdef char *po = <char *>cnp.PyArray_DATA(out)
    cdef int64_t itemsize = cnp.PyArray_ITEMSIZE(x)
    cdef olc_bsum_fn bsum = olc_bsum_select(dtype, level)
    cdef olc_isum_fn isum = olc_isum_select(dtype)
    cdef olc_csum_fn csum = olc_csum_select(dtype, level)
    cdef int64_t nblk, ntasks, t, a, k, n, ncb, b0, b1
    cdef double *partial = NULL
    cdef uint64_t *ipartial = NULL
    if csum == NULL:
        raise TypeError(f"reduce core: no function for element type {dtype}")
    if A == 0 or B == 0:
        return
    if B > 1:
        ncb = (B + OLC_COL_BLOCK - 1) // OLC_COL_BLOCK
        ntasks = A * ncb
        if threads <= 1 or ntasks < 2:
            with nogil:
                for a in range(A):
                    csum(px + a * R * B * itemsize, po + a * B * itemsize, R, B, 0, B)
            return
        for t in prange(ntasks, nogil=True, num_threads=threads, schedule="static"):
            a = t // ncb
            b0 = (t % ncb) * OLC_COL_BLOCK
            b1 = b0 + OLC_COL_BLOCK
            csum(px + a * R * B * itemsize, po + a * B * itemsize, R, B, b0, b1 if b1 < B else B)
        return
    # B == 1: block sums of each row, then added in block order.
    nblk = (R + OLC_SUM_BLOCK - 1) // OLC_SUM_BLOCK if R > 0 else 1
    ntasks = A * nblk
    if isum != NULL:
        ipartial = <uint64_t *>malloc(sizeof(uint64_t) * ntasks)
        if ipartial == NULL:
            raise MemoryError()
    else:
        partial = <double *>malloc(sizeof(double) * ntasks)
        if partial == NULL:
            raise MemoryError()
    try:
        if threads <= 1 or ntasks < 2:
            with nogil:
                for t in range(ntasks):
                    k = (t % nblk) * OLC_SUM_BLOCK
                    n = R - k if R - k < OLC_SUM_BLOCK else OLC_SUM_BLOCK
                    if isum != NULL:
                        ipartial[t] = isum(px + ((t // nblk) * R + k) * itemsize, n)
                    else:
                        partial[t] = bsum(px + ((t // nblk) * R + k) * itemsize, n)
        else:
            for t in prange(ntasks, nogil=True, num_threads=threads, schedule="static"):
                k = (t % nblk) * OLC_SUM_BLOCK
                n = R - k if R - k < OLC_SUM_BLOCK else OLC_SUM_BLOCK
                if isum != NULL:
                    ipartial[t] = isum(px + ((t // nblk) * R + k) * itemsize, n)
                else:
                    partial[t] = bsum(px + ((t // nblk) * R + k) * itemsize, n)
        with nogil:
            olc_store_sums(dtype, partial, ipartial, A, nblk, po)
    finally:
        free(partial)
        free(ipartial)


def softmax_rows(cnp.ndarray x, cnp.ndarray y, int64_t rows, int64_t n, int dtype, int level,
                 int threads):
    """Softmax of each of ``rows`` contiguous rows of ``n`` elements."""
    level = olc_reduce_level(level)
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int status = 0
    cdef int64_t t, r0, r1, per
    if rows == 0 or n == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            status = olc_softmax_rows(dtype, level, px, py, n, 0, rows)
    else:
        # Contiguous row ranges, one per task, a few tasks per thread.
        per = (rows + 4 * threads - 1) // (4 * threads)
        for t in prange((rows + per - 1) // per, nogil=True, num_threads=threads,
                        schedule="static"):
            r0 = t * per
            r1 = r0 + per
            if olc_softmax_rows(dtype, level, px, py, n, r0, r1 if r1 < rows else rows) != 0:
                status = -1
    if status != 0:
        raise MemoryError()


def softmax_axis(cnp.ndarray x, cnp.ndarray y, int64_t outer, int64_t N, int64_t inner,
                 int threads):
    """Softmax over the middle axis of a contiguous float32/double [outer, N, inner]."""
    cdef bint single = cnp.PyArray_ITEMSIZE(x) == 4
    cdef char *px = <char *>cnp.PyArray_DATA(x)
    cdef char *py = <char *>cnp.PyArray_DATA(y)
    cdef int64_t block = N * inner * cnp.PyArray_ITEMSIZE(x)
    cdef int64_t ncb = (inner + OLC_COL_BLOCK - 1) // OLC_COL_BLOCK
    cdef int64_t t, o, c0, c1
    if outer == 0 or N == 0 or inner == 0:
        return
    if threads <= 1:
        with nogil:
            for o in range(outer):
                if single:
                    olc_softmax_cols_f32(<const float *>(px + o * block),
                                         <float *>(py + o * block), N, inner, 0, inner)
                else:
                    olc_softmax_cols_f64(<const double *>(px + o * block),
                                         <double *>(py + o * block), N, inner, 0, inner)
        return
    for t in prange(outer * ncb, nogil=True, num_threads=threads, schedule="static"):
        o = t // ncb
        c0 = (t % ncb) * OLC_COL_BLOCK
        c1 = c0 + OLC_COL_BLOCK
        if c1 > inner:
            c1 = inner
        if single:
            olc_softmax_cols_f32(<const float *>(px + o * block), <float *>(py + o * block),
                                 N, inner, c0, c1)
        else:
            olc_softmax_cols_f64(<const double *>(px + o * block), <double *>(py + o * block),
                                 N, inner, c0, c1)
