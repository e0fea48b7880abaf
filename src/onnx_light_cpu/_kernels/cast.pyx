# cython: language_level=3
"""Cast cores: element-type conversions.

The adapter passes contiguous arrays (and, for a lookup, the table), the
target element type ``to``, flags where the pair has some, the ONNX element
type of the input, the SIMD level and a thread count; this
module picks the function once and splits the elements into chunks over the
worker pool (the split is on element boundaries, so the result does not
depend on the thread count).
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_cast cimport (
    OLC_CAST_ROUND_DOWN, OLC_CAST_ROUND_NEAREST, OLC_CAST_SATURATE, olc_cast_f8_select, olc_cast_fn,
    olc_cast_level, olc_cast_select, olc_lut_select,
)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

SATURATE = OLC_CAST_SATURATE
ROUND_DOWN = OLC_CAST_ROUND_DOWN
ROUND_NEAREST = OLC_CAST_ROUND_NEAREST

# Elements per parallel chunk: a multiple of every vector width, large
# enough to amortise scheduling.
cdef enum:
    CHUNK = 16384


def has_native(int to, int dtype):
    """Whether a native loop converts dtype to ``to`` (both native types)."""
    return olc_cast_select(dtype, to, 0) != NULL


def has_float8(int to, int dtype):
    """Whether a native loop converts dtype to the float 8 type ``to``."""
    return olc_cast_f8_select(dtype, to) != NULL


def level_used(int level):
    """The instruction-set level the native loops run at."""
    return olc_cast_level(level)


cdef struct _CastJob:
    olc_cast_fn fn
    const char *x
    char *y
    const void *aux
    int64_t n, xsize, ysize


cdef void _cast_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _CastJob *job = <_CastJob *>arg
    cdef int64_t start = c * CHUNK
    cdef int64_t count = job.n - start if job.n - start < CHUNK else CHUNK
    job.fn(job.x + start * job.xsize, job.y + start * job.ysize, count, job.aux)


cdef void _run(olc_cast_fn fn, cnp.ndarray x, cnp.ndarray y, const void *aux, int threads):
    cdef int64_t n = cnp.PyArray_SIZE(x)
    cdef int64_t xsize = cnp.PyArray_ITEMSIZE(x), ysize = cnp.PyArray_ITEMSIZE(y)
    cdef const char *px = <const char *>cnp.PyArray_DATA(x)
    cdef char *py = <char *>cnp.PyArray_DATA(y)
    cdef int64_t nchunks = (n + CHUNK - 1) // CHUNK
    cdef _CastJob job
    if threads <= 1 or nchunks <= 1:
        with nogil:
            fn(px, py, n, aux)
        return
    job.fn, job.x, job.y, job.aux = fn, px, py, aux
    job.n, job.xsize, job.ysize = n, xsize, ysize
    with nogil:
        olc_parallel_for(nchunks, _cast_task, &job, threads)


def convert(cnp.ndarray x, cnp.ndarray y, int to, int dtype, int level, int threads):
    """y = x converted from element type dtype to ``to``, both native types,
    C-contiguous, same size."""
    cdef olc_cast_fn fn = olc_cast_select(dtype, to, level)
    if fn == NULL:
        raise TypeError(f"cast core: no conversion from element type {dtype} to {to}")
    _run(fn, x, y, NULL, threads)


def convert_float8(cnp.ndarray x, cnp.ndarray y, int to, int flags, int dtype, int threads):
    """y = x converted to the float 8 type ``to``; flags: SATURATE, ROUND_DOWN,
    ROUND_NEAREST."""
    cdef olc_cast_fn fn = olc_cast_f8_select(dtype, to)
    if fn == NULL:
        raise TypeError(f"cast core: no conversion from element type {dtype} to {to}")
    cdef int f = flags
    _run(fn, x, y, &f, threads)


def lookup(cnp.ndarray x, cnp.ndarray table, cnp.ndarray y, int threads):
    """y[i] = table[x[i]] with x read as unsigned 1- or 2-byte codes; the
    table (C-contiguous, y's itemsize) has an entry for every code."""
    cdef int in_bytes = cnp.PyArray_ITEMSIZE(x), out_bytes = cnp.PyArray_ITEMSIZE(y)
    cdef olc_cast_fn fn = olc_lut_select(in_bytes, out_bytes)
    if fn == NULL:
        raise TypeError(f"cast core: no lookup from {in_bytes} to {out_bytes} bytes")
    if (cnp.PyArray_ITEMSIZE(table) != out_bytes or not cnp.PyArray_IS_C_CONTIGUOUS(table)
            or cnp.PyArray_SIZE(table) != (1 << (8 * in_bytes))):
        raise ValueError("cast core: the table must hold one entry per input code")
    _run(fn, x, y, cnp.PyArray_DATA(table), threads)
