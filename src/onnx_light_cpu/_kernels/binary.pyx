# cython: language_level=3
"""Element-wise binary cores with multidirectional broadcasting.

The adapter passes the inputs, a C-contiguous output of the broadcast
shape, the operator, the ONNX element type of the inputs, the SIMD level
and a thread count.  The core plans the broadcast walk (olc_broadcast.h), picks the
level's loops once and splits the output elements into tasks for the
worker pool; each element is computed the same way whatever the split.
"""

cimport numpy as cnp
import numpy as np
from libc.stdint cimport int64_t

from olc_binary cimport (
    OLC_BIN_ADD, OLC_BIN_AND, OLC_BIN_BAND, OLC_BIN_BOR, OLC_BIN_BXOR, OLC_BIN_DIV, OLC_BIN_EQ,
    OLC_BIN_FMOD, OLC_BIN_GE, OLC_BIN_GT, OLC_BIN_LE, OLC_BIN_LT, OLC_BIN_MAX, OLC_BIN_MIN,
    OLC_BIN_MOD, OLC_BIN_MUL, OLC_BIN_OR, OLC_BIN_POW, OLC_BIN_PRELU, OLC_BIN_SHL, OLC_BIN_SHR,
    OLC_BIN_SUB, OLC_BIN_XOR, OLC_VV, olc_bin_kernel, olc_bin_variant, olc_binary_run,
    olc_binary_select,
)
from olc_broadcast cimport olc_bcast, olc_bcast_plan, olc_bcast_shape
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

ADD, SUB, MUL, DIV = OLC_BIN_ADD, OLC_BIN_SUB, OLC_BIN_MUL, OLC_BIN_DIV
MOD, FMOD, POW = OLC_BIN_MOD, OLC_BIN_FMOD, OLC_BIN_POW
EQ, GT, GE, LT, LE = OLC_BIN_EQ, OLC_BIN_GT, OLC_BIN_GE, OLC_BIN_LT, OLC_BIN_LE
AND, OR, XOR = OLC_BIN_AND, OLC_BIN_OR, OLC_BIN_XOR
BAND, BOR, BXOR = OLC_BIN_BAND, OLC_BIN_BOR, OLC_BIN_BXOR
SHL, SHR, PRELU, MIN, MAX = OLC_BIN_SHL, OLC_BIN_SHR, OLC_BIN_PRELU, OLC_BIN_MIN, OLC_BIN_MAX

# Output elements a task boundary is rounded to (whole cache lines), and the
# fewest elements a task gets.
cdef enum:
    ALIGN = 64
    MIN_TASK = 4 * ALIGN


def supports(int op, int dtype):
    """Whether the core has a kernel for this operator and element type."""
    cdef olc_bin_kernel k
    return olc_binary_select(op, dtype, 0, &k) == 0


def level_used(int op, int dtype, int level):
    """The instruction-set level the kernel for (op, dtype) runs at."""
    cdef olc_bin_kernel k
    if olc_binary_select(op, dtype, level, &k) != 0:
        return 0
    return k.level


def broadcast_shape(tuple arrays):
    """The broadcast shape of the arrays' shapes (a tuple), or the index of
    the first array that does not broadcast with those before it (an int)."""
    cdef int nin = len(arrays)
    cdef int ndims[64]
    cdef const int64_t *shapes[64]
    cdef int64_t out[64]
    cdef cnp.ndarray arr
    cdef int k, rank
    if nin > 64:
        # Many inputs: fold them pairwise.
        shape = broadcast_shape(arrays[:64])
        for k in range(64, nin):
            if isinstance(shape, int):
                return shape
            # a zero-stride view stands for the shape so far (no allocation)
            shape = broadcast_shape((np.broadcast_to(np.uint8(0), shape), arrays[k]))
            if isinstance(shape, int):
                return k
        return shape
    for k in range(nin):
        arr = <cnp.ndarray>arrays[k]
        ndims[k] = cnp.PyArray_NDIM(arr)
        shapes[k] = <const int64_t *>cnp.PyArray_DIMS(arr)
    rank = olc_bcast_shape(nin, ndims, shapes, out)
    if rank < 0:
        return -1 - rank
    return tuple([out[k] for k in range(rank)])


cdef int _plan(olc_bcast *p, cnp.ndarray a, cnp.ndarray b, cnp.ndarray y) except -1:
    cdef int ndims[2]
    cdef const int64_t *shapes[2]
    ndims[0] = cnp.PyArray_NDIM(a)
    ndims[1] = cnp.PyArray_NDIM(b)
    shapes[0] = <const int64_t *>cnp.PyArray_DIMS(a)
    shapes[1] = <const int64_t *>cnp.PyArray_DIMS(b)
    if olc_bcast_plan(p, cnp.PyArray_NDIM(y), <const int64_t *>cnp.PyArray_DIMS(y), 2,
                      ndims, shapes) != 0:
        raise ValueError(f"binary core: shapes {(<object>a).shape} and {(<object>b).shape} do not broadcast "
                         f"to {(<object>y).shape}")
    return 0


def pattern(cnp.ndarray a, cnp.ndarray b, cnp.ndarray y):
    """How the inputs walk the output: '' (same shape), 'scalar',
    'broadcast_row', 'broadcast_col' or 'broadcast' (the general N-d walk)."""
    cdef olc_bcast p
    _plan(&p, a, b, y)
    variant = olc_bin_variant(&p)
    if p.ndim == 1:
        return "" if variant == OLC_VV else "scalar"
    if p.ndim == 2:
        return "broadcast_row" if variant == OLC_VV else "broadcast_col"
    return "broadcast"


cdef struct _BinaryJob:
    olc_bin_kernel *k
    olc_bcast *p
    const char *a
    const char *b
    char *y
    int64_t n, chunk


cdef void _binary_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _BinaryJob *job = <_BinaryJob *>arg
    cdef int64_t begin = t * job.chunk
    cdef int64_t end = begin + job.chunk
    olc_binary_run(job.k, job.p, job.a, job.b, job.y, begin, end if end < job.n else job.n)


def apply(cnp.ndarray a, cnp.ndarray b, cnp.ndarray y, int op, int dtype, int level,
          int threads):
    """y = a op b; y is C-contiguous with the broadcast shape of a and b, and
    may be a itself (the variadic operators accumulate in place)."""
    cdef olc_bin_kernel k
    cdef olc_bcast p
    if olc_binary_select(op, dtype, level, &k) != 0:
        raise TypeError(f"binary core: no kernel for op {op} and element type {dtype}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(a):
        a = np.ascontiguousarray(a)
    if not cnp.PyArray_IS_C_CONTIGUOUS(b):
        b = np.ascontiguousarray(b)
    _plan(&p, a, b, y)
    cdef int64_t n = p.size
    if n == 0:
        return
    cdef const char *pa = <const char *>cnp.PyArray_DATA(a)
    cdef const char *pb = <const char *>cnp.PyArray_DATA(b)
    cdef char *py = <char *>cnp.PyArray_DATA(y)
    cdef _BinaryJob job
    if threads <= 1 or n < 2 * ALIGN:
        with nogil:
            olc_binary_run(&k, &p, pa, pb, py, 0, n)
        return
    # About four tasks per thread, so the caller can take over the share of a
    # worker that does not wake; whole cache lines of at least MIN_TASK.
    job.chunk = (n + 4 * threads - 1) // (4 * threads)
    job.chunk = max(MIN_TASK, (job.chunk + ALIGN - 1) // ALIGN * ALIGN)
    job.k, job.p, job.a, job.b, job.y, job.n = &k, &p, pa, pb, py, n
    with nogil:
        olc_parallel_for((n + job.chunk - 1) // job.chunk, _binary_task, &job, threads)
