# cython: language_level=3
"""Embedding gather + sum + LayerNorm (the core of com.microsoft
EmbedLayerNormalization), one pass per row on the row functions of
skip_norm/olc_skip_norm.h:

    v[r] = word[ids[r]] + position[pos[r]] (+ segment[seg[r]])   (float32)
    y[r] = (v - mean) / sqrt(var + eps) * gamma + beta

Each row is SkipLayerNormalization's row with x = the word row, skip = the
position row and bias = the segment row, so the sum, its statistics and y
come from one float32 v, rounded once.  The adapter passes validated
C-contiguous arrays and in-range int64 row indices; whole rows go to the
worker pool's tasks, so the thread count never changes a result.
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


cdef struct _EmbedJob:
    olc_sn_fn fn
    const char *word
    const char *pos
    const char *seg
    const char *gamma
    const char *beta
    char *y
    char *sum
    const int64_t *ids
    const int64_t *pids
    const int64_t *sids
    int64_t rows, nblocks, H, item
    float eps


cdef void _embed_rows(_EmbedJob *job, int64_t r0, int64_t r1) noexcept nogil:
    cdef olc_sn_args a
    cdef int64_t r, row = job.H * job.item
    a.gamma = job.gamma
    a.beta = job.beta
    a.mean = NULL
    a.inv = NULL
    a.H = job.H
    a.skip_rows = 1
    a.eps = job.eps
    for r in range(r0, r1):
        a.x = job.word + job.ids[r] * row
        a.skip = job.pos + job.pids[r] * row
        a.bias = NULL if job.seg == NULL else job.seg + job.sids[r] * row
        a.y = job.y + r * row
        a.sum = NULL if job.sum == NULL else job.sum + r * row
        job.fn(&a, 0, 1)


cdef void _embed_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _EmbedJob *job = <_EmbedJob *>arg
    _embed_rows(job, job.rows * t // job.nblocks, job.rows * (t + 1) // job.nblocks)


cdef inline const char *_data(object a):
    return NULL if a is None else <const char *>cnp.PyArray_DATA(<cnp.ndarray>a)


def embed(cnp.ndarray ids, cnp.ndarray pids, object sids, cnp.ndarray word, cnp.ndarray pos,
          object seg, cnp.ndarray gamma, cnp.ndarray beta, cnp.ndarray y, object sum_,
          float eps, int dtype, int level, int threads):
    """y[r] = LayerNorm(word[ids[r]] + pos[pids[r]] (+ seg[sids[r]])) for
    every row r; ``sum_`` (or None) takes the sum.  ids, pids, sids: int64
    row indices, one per row, trusted in range; the tables, gamma, beta, y
    and sum_ share the element type ``dtype`` and the last axis H."""
    cdef _EmbedJob job
    job.fn = olc_sn_select(dtype, level, 0)
    if job.fn == NULL:
        raise TypeError(f"embed_layer_norm core: no function for element type {dtype}")
    job.rows = cnp.PyArray_SIZE(ids)
    job.H = cnp.PyArray_DIM(word, 1)
    job.item = cnp.PyArray_ITEMSIZE(word)
    job.word, job.pos, job.seg = _data(word), _data(pos), _data(seg)
    job.gamma, job.beta = _data(gamma), _data(beta)
    job.y = <char *>cnp.PyArray_DATA(y)
    job.sum = <char *>_data(sum_)
    job.ids = <const int64_t *>cnp.PyArray_DATA(ids)
    job.pids = <const int64_t *>cnp.PyArray_DATA(pids)
    job.sids = <const int64_t *>_data(sids)
    job.eps = eps
    if job.rows <= 0 or job.H <= 0:
        return
    if threads <= 1 or job.rows == 1:
        with nogil:
            _embed_rows(&job, 0, job.rows)
        return
    # A few blocks per thread balance a busy machine without splitting a row.
    job.nblocks = min(job.rows, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _embed_task, &job, threads)
