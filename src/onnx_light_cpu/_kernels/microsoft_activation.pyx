# cython: language_level=3
"""com.microsoft activation cores: FastGelu with a bias, QuickGelu, and the
activation FusedGemm applies to its float32 product (in place).

The adapter passes C-contiguous arrays, the ONNX element type, the SIMD
level and a thread count; the level's function is chosen once, outside the
parallel loop, and the pool gets blocks of fixed boundaries (functions of
the sizes only), so results do not depend on the thread count.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_microsoft_activation cimport (
    OLC_MSACT_CELU, OLC_MSACT_ELU, OLC_MSACT_FAST_GELU, OLC_MSACT_FUSED, OLC_MSACT_HARD_SIGMOID,
    OLC_MSACT_LEAKY_RELU, OLC_MSACT_PARAMETRIC_SOFTPLUS, OLC_MSACT_QUICK_GELU, OLC_MSACT_RELU,
    OLC_MSACT_SCALED_TANH, OLC_MSACT_SELU, OLC_MSACT_SIGMOID, OLC_MSACT_SOFTPLUS,
    OLC_MSACT_SOFTSIGN, OLC_MSACT_TANH, OLC_MSACT_THRESHOLDED_RELU, olc_msact_args, olc_msact_fn,
    olc_msact_level, olc_msact_select,
)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

#: FusedGemm's activation names (as ONNX Runtime spells them) -> core codes.
ACTIVATIONS = {
    "Relu": OLC_MSACT_RELU, "Tanh": OLC_MSACT_TANH, "Sigmoid": OLC_MSACT_SIGMOID,
    "LeakyRelu": OLC_MSACT_LEAKY_RELU, "HardSigmoid": OLC_MSACT_HARD_SIGMOID,
    "Elu": OLC_MSACT_ELU, "Selu": OLC_MSACT_SELU, "ThresholdedRelu": OLC_MSACT_THRESHOLDED_RELU,
    "Softplus": OLC_MSACT_SOFTPLUS, "Softsign": OLC_MSACT_SOFTSIGN,
    "ScaledTanh": OLC_MSACT_SCALED_TANH, "ParametricSoftplus": OLC_MSACT_PARAMETRIC_SOFTPLUS,
    "Celu": OLC_MSACT_CELU,
}

# Elements per parallel block: large enough to amortise scheduling, small
# enough that two threads share the work at the parallel threshold.
cdef enum:
    CHUNK = 16384


def level_used(int dtype, int level):
    """The instruction-set level the functions for dtype run at."""
    return olc_msact_level(dtype, level)


cdef struct _Job:
    olc_msact_fn fn
    const olc_msact_args *p
    int64_t count, step


cdef void _task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _Job *job = <_Job *>arg
    cdef int64_t start = t * job.step
    cdef int64_t stop = start + job.step if start + job.step < job.count else job.count
    job.fn(job.p, start, stop)


cdef void _run(olc_msact_fn fn, const olc_msact_args *p, int64_t count, int64_t step,
               int threads) noexcept nogil:
    """fn over [0, count) in blocks of step (rows or elements)."""
    cdef _Job job
    cdef int64_t blocks = (count + step - 1) // step
    if count == 0:
        return
    if threads <= 1 or blocks <= 1:
        fn(p, 0, count)
        return
    job.fn, job.p, job.count, job.step = fn, p, count, step
    olc_parallel_for(blocks, _task, &job, threads)


cdef olc_msact_fn _select(int op, int dtype, int level, str what) except NULL:
    cdef olc_msact_fn fn = olc_msact_select(op, dtype, level)
    if fn == NULL:
        raise TypeError(f"microsoft_activation core: no {what} function for element type {dtype}")
    return fn


def fast_gelu(cnp.ndarray x, cnp.ndarray bias, cnp.ndarray y, int dtype, int level,
              int threads):
    """y = FastGelu(x + bias) row by row; bias has the length of x's last
    axis (> 0)."""
    cdef olc_msact_fn fn = _select(OLC_MSACT_FAST_GELU, dtype, level, "FastGelu")
    cdef olc_msact_args p
    p.x = cnp.PyArray_DATA(x)
    p.bias = cnp.PyArray_DATA(bias)
    p.y = cnp.PyArray_DATA(y)
    p.n = cnp.PyArray_SIZE(bias)
    cdef int64_t rows = cnp.PyArray_SIZE(x) // p.n
    cdef int64_t step = max(1, CHUNK // p.n)
    with nogil:
        _run(fn, &p, rows, step, threads)


def quick_gelu(cnp.ndarray x, cnp.ndarray y, float alpha, int dtype, int level, int threads):
    """y = x sigmoid(alpha x) for arrays of one size and type."""
    cdef olc_msact_fn fn = _select(OLC_MSACT_QUICK_GELU, dtype, level, "QuickGelu")
    cdef olc_msact_args p
    p.x = cnp.PyArray_DATA(x)
    p.y = cnp.PyArray_DATA(y)
    p.alpha = alpha
    with nogil:
        _run(fn, &p, cnp.PyArray_SIZE(x), CHUNK, threads)


def fused_activation(cnp.ndarray y, int act, float alpha, float beta, float gamma, int level,
                     int threads):
    """y = act(y) in place, y float32 and C-contiguous (FusedGemm)."""
    cdef olc_msact_fn fn = _select(OLC_MSACT_FUSED, 1, level, "FusedGemm activation")
    cdef olc_msact_args p
    p.y = cnp.PyArray_DATA(y)
    p.act, p.alpha, p.beta, p.gamma = act, alpha, beta, gamma
    with nogil:
        _run(fn, &p, cnp.PyArray_SIZE(y), CHUNK, threads)
