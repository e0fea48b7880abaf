# cython: language_level=3
"""Activation cores: com.microsoft BiasGelu and ai.onnx SwiGLU.

The adapter passes C-contiguous arrays, the ONNX element type, the SIMD
level and a thread count; the level's function is chosen once, outside the
parallel loop, and the worker pool gets a few contiguous blocks of rows
(BiasGelu) or elements (SwiGLU) per thread, so results do not depend on the
count.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_activation cimport (
    OLC_ACT_BIAS_GELU, OLC_ACT_SWIGLU, olc_act_args, olc_act_fn, olc_act_level, olc_act_select,
)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

BIAS_GELU = OLC_ACT_BIAS_GELU
SWIGLU = OLC_ACT_SWIGLU


def level_used(int dtype, int level):
    """The instruction-set level the function for dtype runs at."""
    return olc_act_level(dtype, level)


cdef struct _ActJob:
    olc_act_fn fn
    olc_act_args *p
    int64_t rows, nblocks


cdef void _act_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _ActJob *job = <_ActJob *>arg
    job.fn(job.p, job.rows * t // job.nblocks, job.rows * (t + 1) // job.nblocks)


cdef void _run(olc_act_fn fn, olc_act_args *p, int64_t rows, int threads) noexcept nogil:
    cdef _ActJob job
    if rows == 0:
        return
    if threads <= 1 or rows < 2:
        fn(p, 0, rows)
        return
    job.fn, job.p, job.rows, job.nblocks = fn, p, rows, min(rows, 4 * threads)
    olc_parallel_for(job.nblocks, _act_task, &job, threads)


def bias_gelu(cnp.ndarray a, cnp.ndarray bias, cnp.ndarray y, int dtype, int level, int threads):
    """y = Gelu(a + bias) row by row; bias has the length of a's last axis (> 0)."""
    cdef olc_act_fn fn = olc_act_select(OLC_ACT_BIAS_GELU, dtype, level)
    if fn == NULL:
        raise TypeError(f"activation core: no BiasGelu function for element type {dtype}")
    cdef olc_act_args p
    p.a = cnp.PyArray_DATA(a)
    p.b = cnp.PyArray_DATA(bias)
    p.y = cnp.PyArray_DATA(y)
    p.n = cnp.PyArray_SIZE(bias)
    p.alpha = 0
    cdef int64_t rows = cnp.PyArray_SIZE(a) // p.n
    with nogil:
        _run(fn, &p, rows, threads)


def swiglu(cnp.ndarray a, cnp.ndarray b, cnp.ndarray y, float alpha, int dtype, int level,
           int threads):
    """y = a * sigmoid(alpha a) * b for arrays of one size and type."""
    cdef olc_act_fn fn = olc_act_select(OLC_ACT_SWIGLU, dtype, level)
    if fn == NULL:
        raise TypeError(f"activation core: no SwiGLU function for element type {dtype}")
    cdef olc_act_args p
    p.a = cnp.PyArray_DATA(a)
    p.b = cnp.PyArray_DATA(b)
    p.y = cnp.PyArray_DATA(y)
    p.n = 1  # "rows" are elements
    p.alpha = alpha
    with nogil:
        _run(fn, &p, cnp.PyArray_SIZE(a), threads)
