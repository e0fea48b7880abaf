# cython: language_level=3
"""Resize core: one axis pass of the linear and cubic modes (and their
antialiased forms), float32 or float64 (resize/olc_resize.h).

The adapter computes, once per shape, each resized axis's source
coordinates and weights; a pass reads [outer, in_len, inner] and writes
[outer, out_len, inner], its lines cut into fixed chunks for the pool.
The nearest mode is an index-map copy (the tensor core's ``map_copy``).
"""

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t

from olc_resize cimport olc_build_level, olc_resize_axis, olc_resize_fn, olc_resize_select
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

# Multiply-adds one task makes: enough to amortise the task.
cdef enum:
    TASK_WORK = 1 << 15


cdef struct _PassJob:
    olc_resize_fn fn
    const olc_resize_axis *axis
    int64_t lines, chunk


cdef void _pass_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _PassJob *job = <_PassJob *>arg
    cdef int64_t i1 = (c + 1) * job.chunk
    job.fn(job.axis, c * job.chunk, i1 if i1 < job.lines else job.lines)


def level_used(int level):
    """The instruction-set level the passes run at."""
    return olc_build_level(level)


def axis_pass(cnp.ndarray src, cnp.ndarray dst, int64_t outer, int64_t in_len, int64_t out_len,
              int64_t inner, cnp.ndarray idx, cnp.ndarray w, cnp.ndarray extrap, double ext,
              int level, int threads):
    """dst[o, y, :] = sum_t w[y, t] * src[o, idx[y, t], :] (or ``ext`` where
    ``extrap[y]``; ``extrap`` empty: nowhere) on C-contiguous float32 or
    float64 arrays (``w`` of their type, ``idx`` int64 [out_len, taps])."""
    cdef olc_resize_axis a
    cdef _PassJob job
    cdef int dbl = cnp.PyArray_TYPE(src) == cnp.NPY_DOUBLE
    cdef int64_t lines = outer * out_len
    a.in_ = cnp.PyArray_DATA(src)
    a.out = cnp.PyArray_DATA(dst)
    a.in_len, a.out_len, a.inner = in_len, out_len, inner
    a.taps = cnp.PyArray_DIM(idx, 1)
    a.idx = <const int64_t *>cnp.PyArray_DATA(idx)
    a.w = cnp.PyArray_DATA(w)
    a.extrap = <const uint8_t *>cnp.PyArray_DATA(extrap) if cnp.PyArray_SIZE(extrap) else NULL
    a.ext = ext
    if lines == 0 or inner == 0:
        return
    job.fn, job.axis, job.lines = olc_resize_select(level, dbl), &a, lines
    job.chunk = TASK_WORK // (inner * a.taps) + 1
    if threads <= 1 or lines <= job.chunk:
        with nogil:
            job.fn(&a, 0, lines)
        return
    with nogil:
        olc_parallel_for((lines + job.chunk - 1) // job.chunk, _pass_task, &job, threads)
