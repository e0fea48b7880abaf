# cython: language_level=3
"""Data-movement cores: Concat, Split, Slice, Gather, ScatterND, NonZero,
Transpose, and the index-map copy of Pad and Resize's nearest mode.

The adapters pass contiguous arrays (or, for Slice, a strided NumPy view of
the input) and sizes in bytes; the cores copy blocks, splitting the work
into byte ranges or row ranges for the worker pool.  A copy gives the same
bytes whatever the split, so results never depend on the thread count.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free

from olc_tensor cimport (
    OLC_TRANSPOSE_TILE, olc_check_indices, olc_copy_rows_range, olc_gather_rows,
    olc_nonzero_count, olc_nonzero_fill, olc_nonzero_kind, olc_scatter_fn, olc_scatter_offsets,
    olc_scatter_select, olc_strided_rows, olc_transpose_task,
)
from olc_tensor_map cimport olc_map_plan, olc_map_rows
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

# Bytes one copy task moves: big enough to amortise the task, small enough
# that two threads share a few hundred kilobytes.
cdef enum:
    TASK_BYTES = 1 << 16
    MAX_DIMS = 64


cdef int64_t _tasks_of(int64_t nbytes) noexcept nogil:
    return (nbytes + TASK_BYTES - 1) // TASK_BYTES if nbytes > 0 else 0


cdef struct _CopyRowsJob:
    const int64_t *meta       # 6 values per part, see copy_rows
    const int64_t *task_part  # the part of each task
    int64_t nrows


cdef void _copy_rows_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    # Bytes [b0, b0 + TASK_BYTES) of part p's rows.
    cdef _CopyRowsJob *job = <_CopyRowsJob *>arg
    cdef const int64_t *m = job.meta + 6 * job.task_part[t]
    cdef int64_t total = job.nrows * m[4]
    cdef int64_t b0 = (t - m[5]) * TASK_BYTES
    olc_copy_rows_range(<char *>m[0], m[1], <const char *>m[2], m[3], m[4],
                        b0, b0 + TASK_BYTES if b0 + TASK_BYTES < total else total)


cdef struct _RowRangeJob:
    # strided_copy and gather: rows [c * chunk, (c + 1) * chunk) of `rows`.
    char *dst
    const char *src
    int64_t rows, chunk, itemsize, row_bytes, nidx, dim
    int m
    const int64_t *dims
    const int64_t *strides
    const int64_t *idx


cdef void _strided_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _RowRangeJob *job = <_RowRangeJob *>arg
    cdef int64_t r1 = (c + 1) * job.chunk
    olc_strided_rows(job.dst, job.src, job.m, job.dims, job.strides, job.itemsize,
                     c * job.chunk, r1 if r1 < job.rows else job.rows)


cdef void _gather_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _RowRangeJob *job = <_RowRangeJob *>arg
    cdef int64_t r1 = (c + 1) * job.chunk
    olc_gather_rows(job.dst, job.src, job.idx, job.nidx, job.dim, job.row_bytes,
                    c * job.chunk, r1 if r1 < job.rows else job.rows)


cdef struct _TransposeJob:
    char *dst
    const char *src
    int64_t R, C, size, band_cols


cdef void _transpose_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _TransposeJob *job = <_TransposeJob *>arg
    olc_transpose_task(job.dst, job.src, job.R, job.C, job.size, job.band_cols, t)


def transpose(cnp.ndarray src, cnp.ndarray dst, int64_t batch, int64_t R, int64_t C,
              int threads):
    """dst[b, c, r] = src[b, r, c] for ``batch`` R x C matrices of
    C-contiguous ``src`` into C-contiguous ``dst`` (same element size)."""
    cdef _TransposeJob job
    cdef int64_t size = cnp.PyArray_ITEMSIZE(src), band_bytes, row_bands, col_bands
    if batch * R * C == 0:
        return
    job.dst, job.src = <char *>cnp.PyArray_DATA(dst), <const char *>cnp.PyArray_DATA(src)
    job.R, job.C, job.size = R, C, size
    # a task: one band of TILE rows and as many whole tiles of columns as
    # make about TASK_BYTES
    band_bytes = OLC_TRANSPOSE_TILE * size * OLC_TRANSPOSE_TILE
    job.band_cols = OLC_TRANSPOSE_TILE * max(1, TASK_BYTES // band_bytes)
    row_bands = (R + OLC_TRANSPOSE_TILE - 1) // OLC_TRANSPOSE_TILE
    col_bands = (C + job.band_cols - 1) // job.band_cols
    with nogil:
        olc_parallel_for(batch * row_bands * col_bands, _transpose_task, &job, threads)


def copy_rows(list srcs, list dsts, list src_strides, list dst_strides, list row_bytes,
              int64_t nrows, int threads):
    """For each part p: nrows rows of row_bytes[p] bytes from srcs[p] (rows
    src_strides[p] bytes apart) to dsts[p] (rows dst_strides[p] apart).

    ``srcs``/``dsts`` are (array, byte offset) pairs.  Concat writes every
    part into one strided output, Split reads every part from one input.
    """
    cdef int nparts = len(dsts)
    cdef int64_t *meta = <int64_t *>malloc(sizeof(int64_t) * 6 * (nparts + 1))
    cdef int64_t *task_part
    cdef int64_t ntasks = 0, t, p
    cdef _CopyRowsJob job
    if meta == NULL:
        raise MemoryError()
    try:
        for p in range(nparts):
            dst, doff = dsts[p]
            src, soff = srcs[p]
            meta[6 * p] = <int64_t>cnp.PyArray_DATA(dst) + <int64_t>doff
            meta[6 * p + 1] = dst_strides[p]
            meta[6 * p + 2] = <int64_t>cnp.PyArray_DATA(src) + <int64_t>soff
            meta[6 * p + 3] = src_strides[p]
            meta[6 * p + 4] = row_bytes[p]
            meta[6 * p + 5] = ntasks  # first task of the part
            ntasks += _tasks_of(nrows * <int64_t>row_bytes[p])
        meta[6 * nparts + 5] = ntasks
        if threads <= 1 or ntasks <= 1:
            with nogil:
                for p in range(nparts):
                    olc_copy_rows_range(<char *>meta[6 * p], meta[6 * p + 1],
                                        <const char *>meta[6 * p + 2], meta[6 * p + 3],
                                        meta[6 * p + 4], 0, nrows * meta[6 * p + 4])
            return
        task_part = <int64_t *>malloc(sizeof(int64_t) * ntasks)
        if task_part == NULL:
            raise MemoryError()
        for p in range(nparts):
            for t in range(meta[6 * p + 5], meta[6 * p + 11]):
                task_part[t] = p
        job.meta, job.task_part, job.nrows = meta, task_part, nrows
        with nogil:
            olc_parallel_for(ntasks, _copy_rows_task, &job, threads)
        free(task_part)
    finally:
        free(meta)


def strided_copy(cnp.ndarray view, cnp.ndarray out, int threads):
    """out (C-contiguous) = view (any strides, possibly negative), nd >= 1."""
    cdef int nd = cnp.PyArray_NDIM(view)
    cdef int64_t dims[MAX_DIMS]
    cdef int64_t strides[MAX_DIMS]
    cdef int64_t itemsize = cnp.PyArray_ITEMSIZE(view)
    cdef int k, m = 0
    cdef int64_t rows = 1
    cdef _RowRangeJob job
    if nd > MAX_DIMS:
        raise ValueError(f"strided_copy: {nd} dimensions, at most {MAX_DIMS}")
    # Merge a dimension into the next one when they step as one block.
    for k in range(nd):
        if m > 0 and strides[m - 1] == cnp.PyArray_STRIDE(view, k) * cnp.PyArray_DIM(view, k):
            dims[m - 1] *= cnp.PyArray_DIM(view, k)
            strides[m - 1] = cnp.PyArray_STRIDE(view, k)
        else:
            dims[m] = cnp.PyArray_DIM(view, k)
            strides[m] = cnp.PyArray_STRIDE(view, k)
            m += 1
    for k in range(m - 1):
        rows *= dims[k]
    cdef const char *src = <const char *>cnp.PyArray_DATA(view)
    cdef char *dst = <char *>cnp.PyArray_DATA(out)
    if cnp.PyArray_SIZE(view) == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            olc_strided_rows(dst, src, m, dims, strides, itemsize, 0, rows)
        return
    # Row chunks of about TASK_BYTES each.
    job.dst, job.src, job.m, job.dims, job.strides, job.itemsize = dst, src, m, dims, strides, itemsize
    job.rows, job.chunk = rows, TASK_BYTES // (dims[m - 1] * itemsize) + 1
    with nogil:
        olc_parallel_for((rows + job.chunk - 1) // job.chunk, _strided_task, &job, threads)


def check_indices(cnp.ndarray idx, int64_t dim):
    """Position of the first index outside [-dim, dim) in int64 ``idx``, or -1."""
    return olc_check_indices(<const int64_t *>cnp.PyArray_DATA(idx), cnp.PyArray_SIZE(idx), dim)


def gather(cnp.ndarray data, cnp.ndarray idx, cnp.ndarray out, int64_t outer, int64_t dim,
           int64_t row_bytes, int threads):
    """out[o, j] = data[o, idx[j]] on rows of row_bytes bytes (indices checked)."""
    cdef int64_t nidx = cnp.PyArray_SIZE(idx)
    cdef int64_t rows = outer * nidx
    cdef _RowRangeJob job
    cdef const char *src = <const char *>cnp.PyArray_DATA(data)
    cdef const int64_t *pidx = <const int64_t *>cnp.PyArray_DATA(idx)
    cdef char *dst = <char *>cnp.PyArray_DATA(out)
    if rows == 0 or row_bytes == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            olc_gather_rows(dst, src, pidx, nidx, dim, row_bytes, 0, rows)
        return
    job.dst, job.src, job.idx, job.nidx, job.dim, job.row_bytes = dst, src, pidx, nidx, dim, row_bytes
    job.rows, job.chunk = rows, TASK_BYTES // row_bytes + 1
    with nogil:
        olc_parallel_for((rows + job.chunk - 1) // job.chunk, _gather_task, &job, threads)


def nonzero(cnp.ndarray x, int dtype):
    """int64 [ndim, count] coordinates of the non-zero elements of contiguous x
    (element type dtype)."""
    import numpy as np
    cdef int nd = cnp.PyArray_NDIM(x)
    cdef int64_t dims[MAX_DIMS]
    cdef int k, complex_
    cdef int kind = olc_nonzero_kind(dtype, &complex_)
    cdef int64_t n = cnp.PyArray_SIZE(x), count
    cdef int64_t itemsize = cnp.PyArray_ITEMSIZE(x)
    cdef const char *px = <const char *>cnp.PyArray_DATA(x)
    if kind < 0:
        raise TypeError(f"nonzero: no zero test for element type {dtype}")
    if nd > MAX_DIMS:
        raise ValueError(f"nonzero: {nd} dimensions, at most {MAX_DIMS}")
    for k in range(nd):
        dims[k] = cnp.PyArray_DIM(x, k)
    with nogil:
        count = olc_nonzero_count(px, n, itemsize, kind, complex_)
    cdef cnp.ndarray out = np.empty((nd, count), dtype=np.int64)
    cdef int64_t *po = <int64_t *>cnp.PyArray_DATA(out)
    if count:
        with nogil:
            olc_nonzero_fill(px, n, itemsize, kind, complex_, nd, dims, count, po)
    return out


def scatter_supports(int dtype):
    """Whether ScatterND has a loop for element type dtype."""
    return olc_scatter_select(dtype) != NULL


def scatter_nd(cnp.ndarray indices, cnp.ndarray updates, cnp.ndarray out, int red, int64_t m,
               int k, int dtype):
    """In place on ``out`` (a copy of data), ``indices`` int64 [m, k]:
    returns -1 when fine, else the position of the first index tuple out of
    range (nothing is written then)."""
    import numpy as np
    cdef olc_scatter_fn fn = olc_scatter_select(dtype)
    cdef int64_t dims[MAX_DIMS]
    cdef int64_t slice = 1, status
    cdef int j
    if fn == NULL:
        raise TypeError(f"scatter_nd: no function for element type {dtype}")
    for j in range(k):
        dims[j] = cnp.PyArray_DIM(out, j)
    for j in range(k, cnp.PyArray_NDIM(out)):
        slice *= cnp.PyArray_DIM(out, j)
    cdef cnp.ndarray offsets = np.empty(max(m, 1), dtype=np.int64)
    cdef int64_t *poff = <int64_t *>cnp.PyArray_DATA(offsets)
    with nogil:
        status = olc_scatter_offsets(<const int64_t *>cnp.PyArray_DATA(indices), m, k, dims, slice, poff)
    if status != 0:
        return -1 - status
    with nogil:
        fn(cnp.PyArray_DATA(out), cnp.PyArray_DATA(updates), poff, m, slice, red)
    return -1


cdef struct _MapJob:
    char *out
    const char *inp
    const olc_map_plan *plan
    int64_t rows, chunk


cdef void _map_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _MapJob *job = <_MapJob *>arg
    cdef int64_t r1 = (c + 1) * job.chunk
    olc_map_rows(job.out, job.inp, job.plan, c * job.chunk, r1 if r1 < job.rows else job.rows)


def map_copy(cnp.ndarray inp, cnp.ndarray out, list maps, cnp.ndarray runs, cnp.ndarray cols,
             int64_t elem, cnp.ndarray fill, int threads, int64_t repeat=0):
    """The index-map copy of tensor/olc_tensor_map.h: ``out`` (C-contiguous)
    is rows over the outer axes of ``maps`` (one int64 array of input byte
    offsets per axis, -1 for the fill), each row built from ``runs`` (int64
    [n, 3]: dst offset, src offset or -1, bytes) when it has rows, else from
    ``cols`` (one src offset per ``elem``-byte column).  ``fill`` holds one
    element of the tensor, as bytes.  ``repeat`` > 0: the columns are the
    elements from cols[0] on, each ``repeat`` times (no fill).  Rows are split in fixed chunks: the bytes never depend on the
    thread count."""
    cdef int nd = len(maps), k
    cdef const int64_t *pmaps[MAX_DIMS]
    cdef int64_t dims[MAX_DIMS]
    cdef int64_t rows = 1
    cdef olc_map_plan plan
    cdef _MapJob job
    cdef cnp.ndarray m
    cdef const unsigned char *pf = <const unsigned char *>cnp.PyArray_DATA(fill)
    if nd > MAX_DIMS:
        raise ValueError(f"map_copy: {nd} dimensions, at most {MAX_DIMS}")
    for k in range(nd):
        m = maps[k]
        pmaps[k] = <const int64_t *>cnp.PyArray_DATA(m)
        dims[k] = cnp.PyArray_SIZE(m)
        rows *= dims[k]
    plan.nd, plan.dims, plan.maps = nd, dims, pmaps
    plan.runs = <const int64_t *>cnp.PyArray_DATA(runs)
    plan.nruns = cnp.PyArray_DIM(runs, 0)
    plan.cols = <const int64_t *>cnp.PyArray_DATA(cols)
    plan.ncols = cnp.PyArray_SIZE(cols)
    plan.cols_fill = 0
    plan.repeat = repeat
    for k in range(plan.ncols):
        if plan.cols[k] < 0:
            plan.cols_fill = 1
            break
    plan.elem = elem
    plan.row_bytes = cnp.PyArray_NBYTES(out) // rows if rows else 0
    plan.fill = <const char *>pf
    plan.fill_bytes = cnp.PyArray_NBYTES(fill)
    if plan.fill_bytes <= 0 or elem % plan.fill_bytes:
        raise ValueError(f"map_copy: a fill of {plan.fill_bytes} bytes for columns of {elem}")
    plan.fill_zero = 1
    for k in range(plan.fill_bytes):
        if pf[k] != 0:
            plan.fill_zero = 0
    if rows == 0 or plan.row_bytes == 0:
        return
    job.out, job.inp, job.plan, job.rows = <char *>cnp.PyArray_DATA(out), \
        <const char *>cnp.PyArray_DATA(inp), &plan, rows
    job.chunk = TASK_BYTES // plan.row_bytes + 1
    if threads <= 1 or rows <= job.chunk:
        with nogil:
            olc_map_rows(job.out, job.inp, &plan, 0, rows)
        return
    with nogil:
        olc_parallel_for((rows + job.chunk - 1) // job.chunk, _map_task, &job, threads)
