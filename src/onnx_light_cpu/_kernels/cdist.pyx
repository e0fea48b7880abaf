# cython: language_level=3
"""com.microsoft CDist core: pairwise (squared) euclidean distances.

The adapter passes a [M, K] and b transposed [K, N], C-contiguous, float32 or
float64; the level's function is chosen once and the output rows are split
into contiguous blocks for the worker pool (results do not depend on the
count).
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_cdist cimport olc_cdist_args, olc_cdist_fn, olc_cdist_level, olc_cdist_select
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()


def level_used(int level):
    """The instruction-set level the distance loop runs at."""
    return olc_cdist_level(level)


cdef struct _CdistJob:
    olc_cdist_fn fn
    olc_cdist_args *p
    int64_t rows, tiles, nblocks


cdef void _cdist_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _CdistJob *job = <_CdistJob *>arg
    job.fn(job.p, min(job.rows, 8 * (job.tiles * t // job.nblocks)),
           min(job.rows, 8 * (job.tiles * (t + 1) // job.nblocks)))


def apply(cnp.ndarray a, cnp.ndarray bt, cnp.ndarray y, bint euclidean, int dtype, int level,
          int threads):
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
    cdef _CdistJob job
    if rows == 0 or p.N == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            fn(&p, 0, rows)
        return
    # Blocks of whole 8-row tiles (the largest register tile): a row takes
    # the same code path (which tile, or the leftover loop) whatever the
    # thread count; a few blocks per thread so the caller can take over the
    # share of a worker that does not wake.
    job.fn, job.p, job.rows, job.tiles = fn, &p, rows, (rows + 7) // 8
    job.nblocks = min(job.tiles, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _cdist_task, &job, threads)
