# cython: language_level=3
"""Element-wise unary cores: Abs, Exp, Log, Sigmoid, Tanh, Not, Neg,
Reciprocal, Gelu (erf and tanh forms), Clip, and the activations (Relu,
LeakyRelu, HardSigmoid, HardSwish, Elu, Selu, Celu, Softplus, Mish, Sign,
Erf, Softsign, ThresholdedRelu, Sqrt) with their alpha, beta, gamma.

The adapter passes contiguous arrays, the operator, the ONNX element type,
the SIMD level and a thread count; this module picks the level's function
once and splits the array into cache-sized chunks over the worker pool.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_unary cimport (
    OLC_OP_ABS, OLC_OP_EXP, OLC_OP_GELU, OLC_OP_GELU_TANH, OLC_OP_LOG, OLC_OP_NEG, OLC_OP_NOT,
    OLC_OP_RECIPROCAL, OLC_OP_SIGMOID, OLC_OP_TANH, olc_clip_fn, olc_clip_level, olc_clip_select,
    olc_silu_gate_fn, olc_silu_gate_select, olc_unary_fn, olc_unary_level, olc_unary_select,
    OLC_OP_CELU, OLC_OP_ELU, OLC_OP_ERF, OLC_OP_HARD_SIGMOID, OLC_OP_HARD_SWISH, OLC_OP_LEAKY_RELU,
    OLC_OP_MISH, OLC_OP_RELU, OLC_OP_SELU, OLC_OP_SIGN, OLC_OP_SOFTPLUS, OLC_OP_SOFTSIGN,
    OLC_OP_SQRT, OLC_OP_THRESHOLDED_RELU, olc_uact_fn, olc_uact_level, olc_uact_select,
)
from olc_cpu cimport olc_build_level, olc_line_head
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
RELU = OLC_OP_RELU
LEAKY_RELU = OLC_OP_LEAKY_RELU
HARD_SIGMOID = OLC_OP_HARD_SIGMOID
HARD_SWISH = OLC_OP_HARD_SWISH
ELU = OLC_OP_ELU
SELU = OLC_OP_SELU
CELU = OLC_OP_CELU
SOFTPLUS = OLC_OP_SOFTPLUS
MISH = OLC_OP_MISH
SIGN = OLC_OP_SIGN
ERF = OLC_OP_ERF
SOFTSIGN = OLC_OP_SOFTSIGN
THRESHOLDED_RELU = OLC_OP_THRESHOLDED_RELU
SQRT = OLC_OP_SQRT

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
    cdef int64_t head = olc_line_head(py, itemsize, n)
    if head:
        with nogil:
            fn(px, py, head)
        px += head * itemsize
        py += head * itemsize
        n -= head
    cdef int64_t nchunks = (n + CHUNK - 1) // CHUNK
    cdef _UnaryJob job
    if threads <= 1 or nchunks <= 1:
        with nogil:
            fn(px, py, n)
        return
    job.fn, job.x, job.y, job.n, job.itemsize = fn, px, py, n, itemsize
    with nogil:
        olc_parallel_for(nchunks, _unary_task, &job, threads)


cdef struct _SiluGateJob:
    olc_silu_gate_fn fn
    const float *x
    const float *u
    float *y
    int64_t n


cdef void _silu_gate_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _SiluGateJob *job = <_SiluGateJob *>arg
    cdef int64_t start = c * CHUNK
    cdef int64_t count = job.n - start if job.n - start < CHUNK else CHUNK
    job.fn(job.x + start, NULL if job.u == NULL else job.u + start, job.y + start, count)


def silu_gate(cnp.ndarray x, u, cnp.ndarray y, int level, int threads):
    """y = (x Sigmoid(x)) u, or x Sigmoid(x) where u is None: C-contiguous
    float32 arrays of one size, each step rounded as its node rounds."""
    cdef _SiluGateJob job
    job.fn = olc_silu_gate_select(level)
    job.x = <const float *>cnp.PyArray_DATA(x)
    job.u = NULL if u is None else <const float *>cnp.PyArray_DATA(<cnp.ndarray>u)
    job.y = <float *>cnp.PyArray_DATA(y)
    job.n = cnp.PyArray_SIZE(x)
    cdef int64_t head = olc_line_head(job.y, 4, job.n)
    cdef int64_t nchunks
    with nogil:
        if head:  # then the chunks store whole cache lines, as apply's do
            job.fn(job.x, job.u, job.y, head)
            job.x += head
            job.u = NULL if job.u == NULL else job.u + head
            job.y += head
            job.n -= head
        nchunks = (job.n + CHUNK - 1) // CHUNK
        if threads <= 1 or nchunks <= 1:
            job.fn(job.x, job.u, job.y, job.n)
        else:
            olc_parallel_for(nchunks, _silu_gate_task, &job, threads)


def silu_gate_level_used(int level):
    """The instruction-set level silu_gate runs at."""
    return olc_build_level(level)


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
    cdef int64_t head = olc_line_head(py, itemsize, n)
    if head:
        with nogil:
            fn(px, py, head, plo, phi)
        px += head * itemsize
        py += head * itemsize
        n -= head
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


cdef struct _ActJob:
    olc_uact_fn fn
    const char *x
    char *y
    int64_t n, itemsize
    double p[3]


cdef void _act_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _ActJob *job = <_ActJob *>arg
    cdef int64_t start = c * CHUNK
    cdef int64_t count = job.n - start if job.n - start < CHUNK else CHUNK
    job.fn(job.x + start * job.itemsize, job.y + start * job.itemsize, count, job.p)


def act_supports(int op, int dtype):
    """Whether the core has an activation function for this operator and type."""
    return olc_uact_select(op, dtype, 0) != NULL


def act_level_used(int op, int dtype, int level):
    """The instruction-set level the activation (op, dtype) runs at."""
    return olc_uact_level(op, dtype, level)


def activate(cnp.ndarray x, cnp.ndarray y, int op, int dtype, int level, int threads,
             double alpha, double beta, double gamma):
    """y = op(x; alpha, beta, gamma) for C-contiguous arrays of the same size
    and element type (the parameters an operator does not have are ignored)."""
    cdef olc_uact_fn fn = olc_uact_select(op, dtype, level)
    if fn == NULL:
        raise TypeError(f"unary core: no activation for op {op} and element type {dtype}")
    cdef _ActJob job
    job.fn = fn
    job.n = cnp.PyArray_SIZE(x)
    job.itemsize = cnp.PyArray_ITEMSIZE(x)
    job.x = <const char *>cnp.PyArray_DATA(x)
    job.y = <char *>cnp.PyArray_DATA(y)
    job.p[0], job.p[1], job.p[2] = alpha, beta, gamma
    cdef int64_t head = olc_line_head(job.y, job.itemsize, job.n)
    if head:
        with nogil:
            fn(job.x, job.y, head, job.p)
        job.x += head * job.itemsize
        job.y += head * job.itemsize
        job.n -= head
    cdef int64_t nchunks = (job.n + CHUNK - 1) // CHUNK
    if threads <= 1 or nchunks <= 1:
        with nogil:
            fn(job.x, job.y, job.n, job.p)
        return
    with nogil:
        olc_parallel_for(nchunks, _act_task, &job, threads)
