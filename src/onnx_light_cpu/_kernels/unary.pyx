# cython: language_level=3
"""Element-wise unary cores: Abs, Exp, Log, Sigmoid, Tanh, Not, Neg,
Reciprocal, Gelu (erf and tanh forms) and Clip.

The adapter passes contiguous arrays, the operator, the ONNX element type,
the SIMD level and a thread count; this module picks the level's function
once and splits the array into cache-sized chunks over the worker pool.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_unary cimport (
    OLC_OP_ABS, OLC_OP_EXP, OLC_OP_GELU, OLC_OP_GELU_TANH, OLC_OP_LOG, OLC_OP_NEG, OLC_OP_NOT,
    OLC_OP_RECIPROCAL, OLC_OP_SIGMOID, OLC_OP_TANH, olc_clip_fn, olc_clip_level, olc_clip_select,
    olc_unary_fn, olc_unary_level, olc_unary_select,
)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

ABS = OLC_OP_ABS
EXP = OLC_OP_EXP
LOG = OLC_OP_LOG
SIGMOID = OLC_OP_SIGMOID
TANH = OLC_OP_TANH
NOT = OLC_OP_NOT
NEG = OLC_OP_NEG
RECIPROCAL = OLC_OP_RECIPROCAL
GELU = OLC_OP_GELU
GELU_TANH = OLC_OP_GELU_TANH

# Elements per parallel chunk: large enough to amortise scheduling, small
# enough that both threads get work at the parallel threshold.
cdef enum:
    CHUNK = 16384


def supports(int op, int dtype):
    """Whether the core has a function for this operator and element type."""
    return olc_unary_select(op, dtype, 0) != NULL


def level_used(int op, int dtype, int level):
    """The instruction-set level the function for (op, dtype) runs at."""
    return olc_unary_level(op, dtype, level)


cdef struct _UnaryJob:
    olc_unary_fn fn
    const char *x
    char *y
    int64_t n, itemsize


cdef void _unary_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _UnaryJob *job = <_UnaryJob *>arg
    cdef int64_t start = c * CHUNK
    cdef int64_t count = job.n - start if job.n - start < CHUNK else CHUNK
    job.fn(job.x + start * job.itemsize, job.y + start * job.itemsize, count)


def apply(cnp.ndarray x, cnp.ndarray y, int op, int dtype, int level, int threads):
    """y = op(x) for C-contiguous arrays of the same size and element type."""
    cdef olc_unary_fn fn = olc_unary_select(op, dtype, level)
    if fn == NULL:
        raise TypeError(f"unary core: no function for op {op} and element type {dtype}")
    cdef int64_t n = cnp.PyArray_SIZE(x)
    cdef int64_t itemsize = cnp.PyArray_ITEMSIZE(x)
    cdef const char *px = <const char *>cnp.PyArray_DATA(x)
    cdef char *py = <char *>cnp.PyArray_DATA(y)
    cdef int64_t nchunks = (n + CHUNK - 1) // CHUNK
    cdef _UnaryJob job
    if threads <= 1 or nchunks <= 1:
        with nogil:
            fn(px, py, n)
        return
    job.fn, job.x, job.y, job.n, job.itemsize = fn, px, py, n, itemsize
    with nogil:
        olc_parallel_for(nchunks, _unary_task, &job, threads)


cdef struct _ClipJob:
    olc_clip_fn fn
    const char *x
    char *y
    const void *lo
    const void *hi
    int64_t n, itemsize


cdef void _clip_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _ClipJob *job = <_ClipJob *>arg
    cdef int64_t start = c * CHUNK
    cdef int64_t count = job.n - start if job.n - start < CHUNK else CHUNK
    job.fn(job.x + start * job.itemsize, job.y + start * job.itemsize, count, job.lo, job.hi)


def clip_level_used(int dtype, int level):
    """The instruction-set level Clip of this element type runs at."""
    return olc_clip_level(dtype, level)


def clip(cnp.ndarray x, cnp.ndarray y, cnp.ndarray lo, cnp.ndarray hi, int dtype, int level,
         int threads):
    """y = min(max(x, lo), hi) for C-contiguous x and y and one-element
    bounds, all of the same element type."""
    cdef olc_clip_fn fn = olc_clip_select(dtype, level)
    if fn == NULL:
        raise TypeError(f"unary core: no Clip function for element type {dtype}")
    cdef int64_t n = cnp.PyArray_SIZE(x)
    cdef int64_t itemsize = cnp.PyArray_ITEMSIZE(x)
    cdef const char *px = <const char *>cnp.PyArray_DATA(x)
    cdef char *py = <char *>cnp.PyArray_DATA(y)
    cdef const void *plo = cnp.PyArray_DATA(lo)
    cdef const void *phi = cnp.PyArray_DATA(hi)
    cdef int64_t nchunks = (n + CHUNK - 1) // CHUNK
    cdef _ClipJob job
    if threads <= 1 or nchunks <= 1:
        with nogil:
            fn(px, py, n, plo, phi)
        return
    job.fn, job.x, job.y, job.lo, job.hi = fn, px, py, plo, phi
    job.n, job.itemsize = n, itemsize
    with nogil:
        olc_parallel_for(nchunks, _clip_task, &job, threads)
