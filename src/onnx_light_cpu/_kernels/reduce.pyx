# cython: language_level=3
"""ReduceSum, ReduceMax, ReduceMin, ReduceProd and Softmax cores.

ReduceSum takes a contiguous tensor viewed as [A, R, B] and sums over R;
Softmax takes [rows, n] (last axis) or [outer, N, inner] (another axis).
Work is split over whole blocks, rows or column ranges, never inside one
sum, so the thread count never changes a result (see olc_reduce.h).
"""

cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport malloc, free

from olc_reduce cimport (
    OLC_COL_BLOCK, OLC_SUM_BLOCK, olc_bsum_fn, olc_bsum_select, olc_csum_fn, olc_csum_select,
    olc_isum_fn, olc_isum_select, olc_reduce_level, olc_softmax_cols_f32, olc_softmax_cols_f64,
    olc_softmax_rows, olc_store_sums,
    OLC_REDX_KIND_MAX, OLC_REDX_KIND_MIN, OLC_REDX_KIND_PROD, OLC_REDX_KIND_SUM, OLC_SUM_LANES,
    olc_redx_cols_fn,
    olc_redx_cols_select, olc_redx_rows_fn, olc_redx_rows_select,
)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

MAX = OLC_REDX_KIND_MAX
MIN = OLC_REDX_KIND_MIN
PROD = OLC_REDX_KIND_PROD

# Elements of a task of the row-wise cores (Max, Min, Prod with B == 1,
# Softmax over rows): whole rows, at least one; each row is computed alone,
# so any split gives the same bits.
cdef enum:
    ROW_TASK_WORK = 16384


def level_used(int dtype, int level):
    """The instruction-set level the float cores run at (integers: scalar)."""
    if olc_bsum_select(dtype, 0) == NULL:
        return 0
    return olc_reduce_level(level)


cdef struct _SumJob:
    const char *x
    char *out
    int64_t R, B, itemsize, ncb, nblk
    olc_csum_fn csum
    olc_bsum_fn bsum
    olc_isum_fn isum
    double *partial
    uint64_t *ipartial


cdef void _col_sum_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    # Column block t % ncb of slice a = t // ncb.
    cdef _SumJob *job = <_SumJob *>arg
    cdef int64_t a = t // job.ncb
    cdef int64_t b0 = (t % job.ncb) * OLC_COL_BLOCK
    cdef int64_t b1 = b0 + OLC_COL_BLOCK
    job.csum(job.x + a * job.R * job.B * job.itemsize, job.out + a * job.B * job.itemsize,
             job.R, job.B, b0, b1 if b1 < job.B else job.B)


cdef void _block_sum_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    # Block t % nblk of row t // nblk (blocks depend on R only).
    cdef _SumJob *job = <_SumJob *>arg
    cdef int64_t k = (t % job.nblk) * OLC_SUM_BLOCK
    cdef int64_t n = job.R - k if job.R - k < OLC_SUM_BLOCK else OLC_SUM_BLOCK
    cdef const char *row = job.x + ((t // job.nblk) * job.R + k) * job.itemsize
    if job.isum != NULL:
        job.ipartial[t] = job.isum(row, n)
    else:
        job.partial[t] = job.bsum(row, n)


def reduce_sum(cnp.ndarray x, cnp.ndarray out, int64_t A, int64_t R, int64_t B, int dtype,
               int level, int threads):
    """out[a, b] = sum over r of x[a, r, b] (both contiguous)."""
    level = olc_reduce_level(level)
    cdef const char *px = <const char *>cnp.PyArray_DATA(x)
    cdef char *po = <char *>cnp.PyArray_DATA(out)
    cdef int64_t itemsize = cnp.PyArray_ITEMSIZE(x)
    cdef olc_bsum_fn bsum = olc_bsum_select(dtype, level)
    cdef olc_isum_fn isum = olc_isum_select(dtype)
    cdef olc_csum_fn csum = olc_csum_select(dtype, level)
    cdef int64_t ntasks, a
    cdef _SumJob job
    if csum == NULL:
        raise TypeError(f"reduce core: no function for element type {dtype}")
    if A == 0 or B == 0:
        return
    job.x, job.out, job.R, job.B, job.itemsize = px, po, R, B, itemsize
    job.csum, job.bsum, job.isum = csum, bsum, isum
    job.partial, job.ipartial = NULL, NULL
    if B > 1:
        job.ncb = (B + OLC_COL_BLOCK - 1) // OLC_COL_BLOCK
        ntasks = A * job.ncb
        if threads <= 1 or ntasks < 2:
            with nogil:
                for a in range(A):
                    csum(px + a * R * B * itemsize, po + a * B * itemsize, R, B, 0, B)
            return
        with nogil:
            olc_parallel_for(ntasks, _col_sum_task, &job, threads)
        return
    # B == 1, short rows (global pooling's 49, a last axis of 7): each row
    # in one sequence (reduce/olc_reduce_ext.h), not 64 lanes and a fold.
    if R < OLC_SUM_LANES:
        reduce_ext(x, out, A, R, 1, OLC_REDX_KIND_SUM, dtype, level, threads)
        return
    # B == 1: block sums of each row, then added in block order.
    job.nblk = (R + OLC_SUM_BLOCK - 1) // OLC_SUM_BLOCK if R > 0 else 1
    ntasks = A * job.nblk
    if isum != NULL:
        job.ipartial = <uint64_t *>malloc(sizeof(uint64_t) * ntasks)
        if job.ipartial == NULL:
            raise MemoryError()
    else:
        job.partial = <double *>malloc(sizeof(double) * ntasks)
        if job.partial == NULL:
            raise MemoryError()
    try:
        with nogil:
            olc_parallel_for(ntasks, _block_sum_task, &job, threads)
            olc_store_sums(dtype, job.partial, job.ipartial, A, job.nblk, po)
    finally:
        free(job.partial)
        free(job.ipartial)


cdef struct _RedxJob:
    const char *x
    char *out
    int64_t A, R, B, itemsize, ncb, per
    olc_redx_rows_fn rows
    olc_redx_cols_fn cols


cdef void _redx_rows_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _RedxJob *job = <_RedxJob *>arg
    cdef int64_t a0 = t * job.per
    cdef int64_t a1 = a0 + job.per
    job.rows(job.x, job.out, job.R, a0, a1 if a1 < job.A else job.A)


cdef void _redx_cols_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    # Column block t % ncb of slice a = t // ncb.
    cdef _RedxJob *job = <_RedxJob *>arg
    cdef int64_t a = t // job.ncb
    cdef int64_t b0 = (t % job.ncb) * OLC_COL_BLOCK
    cdef int64_t b1 = b0 + OLC_COL_BLOCK
    job.cols(job.x + a * job.R * job.B * job.itemsize, job.out + a * job.B * job.itemsize,
             job.R, job.B, b0, b1 if b1 < job.B else job.B)


def redx_supports(int kind, int dtype):
    """Whether Max/Min/Prod (``kind``) has a function for this element type."""
    return olc_redx_rows_select(kind, dtype, 0) != NULL


def reduce_ext(cnp.ndarray x, cnp.ndarray out, int64_t A, int64_t R, int64_t B, int kind,
               int dtype, int level, int threads):
    """out[a, b] = max, min or product (``kind``) over r of x[a, r, b], both
    contiguous, R >= 1.  Tasks are whole rows or column blocks."""
    level = olc_reduce_level(level)
    cdef _RedxJob job
    job.rows = olc_redx_rows_select(kind, dtype, level)
    job.cols = olc_redx_cols_select(kind, dtype, level)
    if job.rows == NULL:
        raise TypeError(f"reduce core: no function for kind {kind} and element type {dtype}")
    job.x = <const char *>cnp.PyArray_DATA(x)
    job.out = <char *>cnp.PyArray_DATA(out)
    job.A, job.R, job.B, job.itemsize = A, R, B, cnp.PyArray_ITEMSIZE(x)
    cdef int64_t ntasks, a
    if A == 0 or B == 0:
        return
    if B > 1:
        job.ncb = (B + OLC_COL_BLOCK - 1) // OLC_COL_BLOCK
        ntasks = A * job.ncb
        if threads <= 1 or ntasks < 2:
            with nogil:
                for a in range(A):
                    job.cols(job.x + a * R * B * job.itemsize, job.out + a * B * job.itemsize,
                             R, B, 0, B)
            return
        with nogil:
            olc_parallel_for(ntasks, _redx_cols_task, &job, threads)
        return
    job.per = ROW_TASK_WORK // R if R < ROW_TASK_WORK else 1
    ntasks = (A + job.per - 1) // job.per
    if threads <= 1 or ntasks < 2:
        with nogil:
            job.rows(job.x, job.out, R, 0, A)
        return
    with nogil:
        olc_parallel_for(ntasks, _redx_rows_task, &job, threads)


cdef struct _SoftmaxRowsJob:
    int dtype, level
    const void *x
    void *y
    int64_t rows, n, per
    int *status  # per task: 0, or -1 when out of memory


cdef struct _SoftmaxColsJob:
    const char *x
    char *y
    int64_t N, inner, block, ncb
    bint single


cdef void _softmax_rows_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _SoftmaxRowsJob *job = <_SoftmaxRowsJob *>arg
    cdef int64_t r0 = t * job.per
    cdef int64_t r1 = r0 + job.per
    job.status[t] = olc_softmax_rows(job.dtype, job.level, job.x, job.y, job.n, r0,
                                     r1 if r1 < job.rows else job.rows)


cdef void _softmax_cols_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    # Column block t % ncb of slice t // ncb.
    cdef _SoftmaxColsJob *job = <_SoftmaxColsJob *>arg
    cdef int64_t o = t // job.ncb
    cdef int64_t c0 = (t % job.ncb) * OLC_COL_BLOCK
    cdef int64_t c1 = c0 + OLC_COL_BLOCK
    cdef const char *x = job.x + o * job.block
    cdef char *y = job.y + o * job.block
    if c1 > job.inner:
        c1 = job.inner
    if job.single:
        olc_softmax_cols_f32(<const float *>x, <float *>y, job.N, job.inner, c0, c1)
    else:
        olc_softmax_cols_f64(<const double *>x, <double *>y, job.N, job.inner, c0, c1)


def softmax_rows(cnp.ndarray x, cnp.ndarray y, int64_t rows, int64_t n, int dtype, int level,
                 int threads):
    """Softmax of each of ``rows`` contiguous rows of ``n`` elements."""
    level = olc_reduce_level(level)
    cdef const void *px = cnp.PyArray_DATA(x)
    cdef void *py = cnp.PyArray_DATA(y)
    cdef int status = 0
    cdef int64_t t, ntasks
    cdef _SoftmaxRowsJob job
    if rows == 0 or n == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            status = olc_softmax_rows(dtype, level, px, py, n, 0, rows)
        if status != 0:
            raise MemoryError()
        return
    # Contiguous row ranges, one per task: a few tasks a thread, no more
    # than ROW_TASK_WORK elements each unless one row has more.  (Only a few
    # tasks a thread were 16 rows of 32000, 225 us, each: a late or preempted
    # worker held the caller that long; 128 x 32000 at 2 threads with the
    # second CPU busy 2 ms out of 4 took 0.97-1.06 of ONNX Runtime's time,
    # 0.87-0.88 with one row a task.)
    job.dtype, job.level, job.x, job.y, job.rows, job.n = dtype, level, px, py, rows, n
    job.per = (rows + 4 * threads - 1) // (4 * threads)
    if job.per > ROW_TASK_WORK // n:
        job.per = max(1, ROW_TASK_WORK // n)
    ntasks = (rows + job.per - 1) // job.per
    job.status = <int *>malloc(sizeof(int) * ntasks)
    if job.status == NULL:
        raise MemoryError()
    try:
        with nogil:
            olc_parallel_for(ntasks, _softmax_rows_task, &job, threads)
        for t in range(ntasks):
            if job.status[t] != 0:
                raise MemoryError()
    finally:
        free(job.status)


def softmax_axis(cnp.ndarray x, cnp.ndarray y, int64_t outer, int64_t N, int64_t inner,
                 int threads):
    """Softmax over the middle axis of a contiguous float32/double [outer, N, inner]."""
    cdef bint single = cnp.PyArray_ITEMSIZE(x) == 4
    cdef char *px = <char *>cnp.PyArray_DATA(x)
    cdef char *py = <char *>cnp.PyArray_DATA(y)
    cdef int64_t block = N * inner * cnp.PyArray_ITEMSIZE(x)
    cdef int64_t ncb = (inner + OLC_COL_BLOCK - 1) // OLC_COL_BLOCK
    cdef int64_t o
    cdef _SoftmaxColsJob job
    if outer == 0 or N == 0 or inner == 0:
        return
    if threads <= 1:
        with nogil:
            for o in range(outer):
                if single:
                    olc_softmax_cols_f32(<const float *>(px + o * block),
                                         <float *>(py + o * block), N, inner, 0, inner)
                else:
                    olc_softmax_cols_f64(<const double *>(px + o * block),
                                         <double *>(py + o * block), N, inner, 0, inner)
        return
    job.x, job.y, job.N, job.inner, job.block = px, py, N, inner, block
    job.ncb, job.single = ncb, single
    with nogil:
        olc_parallel_for(outer * ncb, _softmax_cols_task, &job, threads)
