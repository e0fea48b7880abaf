# cython: language_level=3
"""Cast cores: element-type conversions.

The adapter passes contiguous arrays, the ONNX element types, the SIMD level,
a thread count and, depending on the pair, flags or a lookup table; this
module picks the function once and splits the elements into chunks over the
OpenMP team (the split is on element boundaries, so the result does not
depend on the thread count).
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int64_t

cnp.import_array()

cdef extern from "cast/olc_cast.h" nogil:
    ctypedef void (*olc_cast_fn)(const void *x, void *y, int64_t n, const void *aux)
    olc_cast_fn olc_cast_select(int src, int dst, int level)
    olc_cast_fn olc_cast_f8_select(int src, int dst)
    olc_cast_fn olc_lut_select(int in_bytes, int out_bytes)
    int olc_cast_level(int level)
    int OLC_CAST_SATURATE, OLC_CAST_ROUND_DOWN, OLC_CAST_ROUND_NEAREST

SATURATE = OLC_CAST_SATURATE
ROUND_DOWN = OLC_CAST_ROUND_DOWN
ROUND_NEAREST = OLC_CAST_ROUND_NEAREST

# Elements per parallel chunk: a multiple of every vector width, large
# enough to amortise scheduling.
cdef enum:
    CHUNK = 16384


def has_native(int src, int dst):
    """Whether a native loop converts src to dst (both native types)."""
    return olc_cast_select(src, dst, 0) != NULL


def has_float8(int src, int dst):
    """Whether a native loop converts src to the float 8 type dst."""
    return olc_cast_f8_select(src, dst) != NULL


def level_used(int level):
    """The instruction-set level the native loops run at."""
    return olc_cast_level(level)


cdef void _run(olc_cast_fn fn, cnp.ndarray x, cnp.ndarray y, const void *aux, int nthreads):
    cdef int64_t n = cnp.PyArray_SIZE(x)
    cdef int64_t xsize = cnp.PyArray_ITEMSIZE(x), ysize = cnp.PyArray_ITEMSIZE(y)
    cdef const char *px = <const char *>cnp.PyArray_DATA(x)
    cdef char *py = <char *>cnp.PyArray_DATA(y)
    cdef int64_t nchunks = (n + CHUNK - 1) // CHUNK
    cdef int64_t c, start, count
    if nthreads <= 1 or nchunks <= 1:
        with nogil:
            fn(px, py, n, aux)
        return
    for c in prange(nchunks, nogil=True, num_threads=nthreads, schedule="static"):
        start = c * CHUNK
        count = n - start if n - start < CHUNK else CHUNK
        fn(px + start * xsize, py + start * ysize, count, aux)


def convert(int src, int dst, int level, cnp.ndarray x, cnp.ndarray y, int nthreads):
    """y = x converted, both native types, C-contiguous, same size."""
    cdef olc_cast_fn fn = olc_cast_select(src, dst, level)
    if fn == NULL:
        raise TypeError(f"cast core: no conversion from element type {src} to {dst}")
    _run(fn, x, y, NULL, nthreads)


def convert_float8(int src, int dst, int flags, cnp.ndarray x, cnp.ndarray y, int nthreads):
    """y = x converted to a float 8 type; flags: SATURATE, ROUND_DOWN, ROUND_NEAREST."""
    cdef olc_cast_fn fn = olc_cast_f8_select(src, dst)
    if fn == NULL:
        raise TypeError(f"cast core: no conversion from element type {src} to {dst}")
    cdef int f = flags
    _run(fn, x, y, &f, nthreads)


def lookup(cnp.ndarray x, cnp.ndarray y, cnp.ndarray table, int nthreads):
    """y[i] = table[x[i]] with x read as unsigned 1- or 2-byte codes; the
    table (C-contiguous, y's itemsize) has an entry for every code."""
    cdef int in_bytes = cnp.PyArray_ITEMSIZE(x), out_bytes = cnp.PyArray_ITEMSIZE(y)
    cdef olc_cast_fn fn = olc_lut_select(in_bytes, out_bytes)
    if fn == NULL:
        raise TypeError(f"cast core: no lookup from {in_bytes} to {out_bytes} bytes")
    if (cnp.PyArray_ITEMSIZE(table) != out_bytes or not cnp.PyArray_IS_C_CONTIGUOUS(table)
            or cnp.PyArray_SIZE(table) != (1 << (8 * in_bytes))):
        raise ValueError("cast core: the table must hold one entry per input code")
    _run(fn, x, y, cnp.PyArray_DATA(table), nthreads)
