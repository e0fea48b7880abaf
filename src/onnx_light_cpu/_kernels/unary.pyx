# cython: language_level=3
"""Element-wise unary cores: Abs, Exp, Log, Sigmoid, Tanh, Not, Neg,
Reciprocal, Gelu (erf and tanh forms) and Clip.

The adapter passes contiguous arrays, the operator, the ONNX element type,
the SIMD level and a thread count; this module picks the level's function
once and splits the array into cache-sized chunks over the OpenMP team.
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int64_t

from olc_unary cimport (
    OLC_OP_ABS, OLC_OP_EXP, OLC_OP_GELU, OLC_OP_GELU_TANH, OLC_OP_LOG, OLC_OP_NEG, OLC_OP_NOT,
    OLC_OP_RECIPROCAL, OLC_OP_SIGMOID, OLC_OP_TANH, olc_clip_fn, olc_clip_level, olc_clip_select,
    olc_unary_fn, olc_unary_level, olc_unary_select,
)

cnp.import_array()

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
    cdef int64_t c, start, count
    if threads <= 1 or nchunks <= 1:
        with nogil:
            fn(px, py, n)
        return
    for c in prange(nchunks, nogil=True, num_threads=threads, schedule="static"):
        start = c * CHUNK
        count = n - start if n - start < CHUNK else CHUNK
        fn(px + start * itemsize, py + start * itemsize, count)


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
    cdef int64_t c, start, count
    if threads <= 1 or nchunks <= 1:
        with nogil:
            fn(px, py, n, plo, phi)
        return
    for c in prange(nchunks, nogil=True, num_threads=threads, schedule="static"):
        start = c * CHUNK
        count = n - start if n - start < CHUNK else CHUNK
        fn(px + start * itemsize, py + start * itemsize, count, plo, phi)
