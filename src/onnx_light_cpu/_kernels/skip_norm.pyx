# cython: language_level=3
"""Fused residual add + LayerNorm / RMS norm over the last axis (the core of
com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization).

The adapter passes validated C-contiguous arrays; this module picks the row
function for the element type and SIMD level once and splits whole rows
over the OpenMP team, so the result does not depend on the thread count.
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int64_t

from olc_skip_norm cimport olc_sn_args, olc_sn_fn, olc_sn_level, olc_sn_select

cnp.import_array()


def level_used(int dtype, int level):
    """The instruction-set level the row function for dtype runs at."""
    return olc_sn_level(dtype, level)


cdef inline void *_data(object a):
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


def apply(cnp.ndarray x, cnp.ndarray skip, cnp.ndarray gamma, beta, bias, cnp.ndarray y,
          sum_, mean, inv, bint simplified, float eps, int dtype, int level, int threads):
    """Normalise the rows of x + skip (+ bias) into y (and the optional outputs).

    Every array is C-contiguous with the last axis H; skip has a whole number
    of rows that repeats over x's rows; beta, bias, sum_, mean, inv may be None.
    """
    cdef olc_sn_fn fn = olc_sn_select(dtype, level, simplified)
    if fn == NULL:
        raise TypeError(f"skip_norm core: no function for element type {dtype}")
    cdef olc_sn_args a
    cdef int64_t H = cnp.PyArray_DIM(x, cnp.PyArray_NDIM(x) - 1)
    cdef int64_t rows = cnp.PyArray_SIZE(x) // H
    a.x = cnp.PyArray_DATA(x)
    a.skip = cnp.PyArray_DATA(skip)
    a.gamma = cnp.PyArray_DATA(gamma)
    a.beta = _data(beta)
    a.bias = _data(bias)
    a.y = cnp.PyArray_DATA(y)
    a.sum = _data(sum_)
    a.mean = <float *>_data(mean)
    a.inv = <float *>_data(inv)
    a.H = H
    a.skip_rows = cnp.PyArray_SIZE(skip) // H
    a.eps = eps
    cdef int64_t t, r0, r1, nblocks
    if rows == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            fn(&a, 0, rows)
        return
    # One contiguous block of rows per thread.
    nblocks = threads if threads < rows else rows
    for t in prange(nblocks, nogil=True, num_threads=threads, schedule="static"):
        r0 = rows * t // nblocks
        r1 = rows * (t + 1) // nblocks
        fn(&a, r0, r1)
