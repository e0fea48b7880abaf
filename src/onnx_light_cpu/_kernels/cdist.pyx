# cython: language_level=3
"""com.microsoft CDist core: pairwise (squared) euclidean distances.

The adapter passes a [M, K] and b transposed [K, N], C-contiguous, float32 or
float64; the level's function is chosen once and each thread gets one
contiguous block of output rows (results do not depend on the count).
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int64_t

cnp.import_array()

cdef extern from "cdist/olc_cdist.h" nogil:
    ctypedef struct olc_cdist_args:
        const void *a
        const void *bt
        void *y
        int64_t N, K
        int sqrt_
    ctypedef void (*olc_cdist_fn)(const olc_cdist_args *p, int64_t r0, int64_t r1)
    olc_cdist_fn olc_cdist_select(int dtype, int level)
    int olc_cdist_level(int level)


def level_used(int level):
    """The instruction-set level the distance loop runs at."""
    return olc_cdist_level(level)


def apply(int dtype, int level, cnp.ndarray a, cnp.ndarray bt, cnp.ndarray y, bint euclidean,
          int nthreads):
    """y[M, N] = distances between the rows of a [M, K] and the columns of bt [K, N]."""
    cdef olc_cdist_fn fn = olc_cdist_select(dtype, level)
    if fn == NULL:
        raise TypeError(f"cdist core: no function for element type {dtype}")
    cdef olc_cdist_args p
    p.a = cnp.PyArray_DATA(a)
    p.bt = cnp.PyArray_DATA(bt)
    p.y = cnp.PyArray_DATA(y)
    p.N = cnp.PyArray_DIM(y, 1)
    p.K = cnp.PyArray_DIM(a, 1)
    p.sqrt_ = euclidean
    cdef int64_t rows = cnp.PyArray_DIM(y, 0)
    cdef int64_t t, nblocks
    if rows == 0 or p.N == 0:
        return
    if nthreads <= 1 or rows < 2:
        with nogil:
            fn(&p, 0, rows)
        return
    # Blocks of whole 8-row tiles (the largest register tile): a row takes
    # the same code path (which tile, or the leftover loop) whatever the
    # thread count.
    cdef int64_t tiles = (rows + 7) // 8
    nblocks = nthreads if nthreads < tiles else tiles
    for t in prange(nblocks, nogil=True, num_threads=nthreads, schedule="static"):
        fn(&p, min(rows, 8 * (tiles * t // nblocks)), min(rows, 8 * (tiles * (t + 1) // nblocks)))
