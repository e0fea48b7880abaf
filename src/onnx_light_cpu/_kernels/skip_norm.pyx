# cython: language_level=3
"""Fused residual add + LayerNorm / RMS norm over the last axis (the core of
com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization).

The adapter passes validated C-contiguous arrays; this module picks the row
function for the element type and SIMD level once and splits whole rows
into tasks for the worker pool, so the result does not depend on the thread
count.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_pool cimport olc_parallel_for, olc_pool_import
from olc_skip_norm cimport olc_sn_args, olc_sn_fn, olc_sn_level, olc_sn_select

cnp.import_array()
olc_pool_import()


def level_used(int dtype, int level):
    """The instruction-set level the row function for dtype runs at."""
    return olc_sn_level(dtype, level)


cdef inline void *_data(object a):
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


cdef struct _SkipNormJob:
    olc_sn_fn fn
    olc_sn_args *a
    int64_t rows, nblocks


cdef void _skip_norm_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _SkipNormJob *job = <_SkipNormJob *>arg
    job.fn(job.a, job.rows * t // job.nblocks, job.rows * (t + 1) // job.nblocks)


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
    cdef _SkipNormJob job
    if rows == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            fn(&a, 0, rows)
        return
    # Contiguous blocks of rows, a few per thread so the caller can take over
    # the share of a worker that does not wake.
    job.fn, job.a, job.rows, job.nblocks = fn, &a, rows, min(rows, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _skip_norm_task, &job, threads)
