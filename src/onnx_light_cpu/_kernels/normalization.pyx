# cython: language_level=3
"""Normalization cores on the row engine of normalization/olc_normalization.h.

``rows`` serves LayerNormalization, RMSNormalization and
SimplifiedLayerNormalization (a scale vector per row); ``affine`` serves
BatchNormalization, InstanceNormalization, GroupNormalization,
LpNormalization and MeanVarianceNormalization (one multiplier per channel
segment).  Rows are split into tasks of whole rows for the worker pool, each
row reduced by one thread in a fixed order, so the thread count never
changes a result.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc

from olc_normalization cimport (
    OLC_NORM_CENTERED, OLC_NORM_HOW_GIVEN, OLC_NORM_HOW_LP, OLC_NORM_HOW_MVN, OLC_NORM_HOW_STATS,
    OLC_NORM_HOW_STD, OLC_NORM_L1, OLC_NORM_L2, OLC_NORM_SQUARES, olc_norm_affine_plan,
    olc_norm_affine_rows, olc_norm_level, olc_norm_rows, olc_norm_rows_plan, olc_norm_select_affine,
    olc_norm_select_apply, olc_norm_select_stats,
)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

CENTERED = OLC_NORM_CENTERED
SQUARES = OLC_NORM_SQUARES
L1 = OLC_NORM_L1
L2 = OLC_NORM_L2
HOW_GIVEN = OLC_NORM_HOW_GIVEN
HOW_STD = OLC_NORM_HOW_STD
HOW_MVN = OLC_NORM_HOW_MVN
HOW_LP = OLC_NORM_HOW_LP
HOW_STATS = OLC_NORM_HOW_STATS


def level_used(int level):
    """The instruction-set level the functions run at."""
    return olc_norm_level(level)


cdef inline char *_ptr(object a):
    return NULL if a is None else <char *>cnp.PyArray_DATA(<cnp.ndarray>a)


cdef int64_t _chunks(int64_t rows, int threads) noexcept nogil:
    # A few chunks per thread balance uneven rows without splitting any row.
    cdef int64_t c = 4 * threads
    return rows if rows < c else c


cdef struct _RowsJob:
    olc_norm_rows_plan *p
    int64_t nrows, nchunks


cdef void _rows_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _RowsJob *job = <_RowsJob *>arg
    olc_norm_rows(job.p, c * job.nrows // job.nchunks, (c + 1) * job.nrows // job.nchunks)


cdef struct _AffineJob:
    olc_norm_affine_plan *p
    int64_t nrows, nchunks


cdef void _affine_task(void *arg, Py_ssize_t c, int slot) noexcept nogil:
    cdef _AffineJob *job = <_AffineJob *>arg
    olc_norm_affine_rows(job.p, c * job.nrows // job.nchunks,
                         (c + 1) * job.nrows // job.nchunks)


def rows(cnp.ndarray x, cnp.ndarray scale, object bias, object scale_row, cnp.ndarray y,
         object mean_out, object inv_out, int64_t nrows, int64_t n, int64_t scale_stride,
         int mode, double eps, int acc_double, int stat_type, int scale_dtype, int dtype,
         int level, int threads):
    """y[r] = (x[r] - mean) * inv_std * scale[row r] (+ bias) for each row.

    ``dtype`` is x's element type, ``scale_dtype`` that of scale, bias and y
    (TensorProto codes); ``stat_type`` that of mean_out and inv_out.
    ``scale_stride``: elements between the scale (and bias) vectors of
    consecutive rows (0: one shared vector); ``scale_row`` (int64 array or
    None) overrides it with a scale row index per row.
    """
    cdef olc_norm_rows_plan p
    p.stats = olc_norm_select_stats(acc_double, dtype, level)
    p.apply = olc_norm_select_apply(acc_double, dtype, scale_dtype, level)
    if p.stats == NULL or p.apply == NULL:
        raise TypeError(f"norm core: no function for element types {dtype}, {scale_dtype}")
    p.x = _ptr(x)
    p.y = <char *>cnp.PyArray_DATA(y)
    p.scale = _ptr(scale)
    p.bias = _ptr(bias)
    p.n = n
    p.x_item = cnp.PyArray_ITEMSIZE(x)
    p.y_item = cnp.PyArray_ITEMSIZE(y)
    p.scale_stride = scale_stride * p.y_item
    p.bias_stride = p.scale_stride
    p.scale_row = <const int64_t *>_ptr(scale_row)
    p.mode = mode
    p.acc_double = acc_double
    p.eps = eps
    p.mean_out = <void *>_ptr(mean_out)
    p.inv_out = <void *>_ptr(inv_out)
    p.stat_type = stat_type
    cdef _RowsJob job
    if nrows <= 0:
        return
    if threads <= 1 or nrows == 1:
        with nogil:
            olc_norm_rows(&p, 0, nrows)
        return
    job.p, job.nrows, job.nchunks = &p, nrows, _chunks(nrows, threads)
    with nogil:
        olc_parallel_for(job.nchunks, _rows_task, &job, threads)


def join_channels(tuple parts, int typenum):
    """The channels of the join along axis 1 of ``parts``: arrays of
    element type ``typenum``, C-contiguous, of rank 2 or more, alike but
    for that axis and with elements in every image (a Concat's inputs that
    BatchNormalization can read where they lie: native byte order); -1
    where they are not.  One call instead of a Python loop over them."""
    cdef Py_ssize_t i, n = len(parts)
    cdef int d, nd
    cdef int64_t channels = 0
    cdef cnp.ndarray first, part
    if n == 0 or type(parts[0]) is not cnp.ndarray:
        return -1
    first = <cnp.ndarray>parts[0]
    nd = first.ndim
    if nd < 2 or first.shape[0] == 0:
        return -1
    for d in range(2, nd):
        if first.shape[d] == 0:
            return -1
    for i in range(n):
        if type(parts[i]) is not cnp.ndarray:
            return -1
        part = <cnp.ndarray>parts[i]
        if (part.ndim != nd or part.dtype.num != typenum or not cnp.PyArray_ISNOTSWAPPED(part)
                or not cnp.PyArray_IS_C_CONTIGUOUS(part) or part.shape[0] != first.shape[0]):
            return -1
        for d in range(2, nd):
            if part.shape[d] != first.shape[d]:
                return -1
        channels += part.shape[1]
    return channels


def affine(cnp.ndarray x, object ch_mul, object ch_add, object ch_mean, object ch_var,
           cnp.ndarray y, object row_mean, object row_var, int64_t nrows, int64_t segs,
           int64_t seg_len, int64_t groups, int how, int mode, double eps, int acc_double,
           int dtype, int level, int threads, bint relu=False, list parts=None):
    """Per-segment y = (x - mean) * mul + add over ``nrows`` rows of
    ``segs * seg_len`` elements; channel arrays are float64 (see
    olc_normalization.h); y is None for HOW_STATS (row_mean, row_var).
    relu: then y = max(y, 0) as Relu computes it (float32 y only).
    parts: x's rows are those of these C-contiguous arrays of x's type
    joined along axis 1 (a Concat's inputs, each (N, C_i, ...) with
    C_i * segs * seg_len elements an image; x is then the first of them)."""
    cdef olc_norm_affine_plan p
    cdef const char **table = NULL
    cdef int64_t n_img, i, c, r, ci, row_bytes
    cdef cnp.ndarray part
    if relu and (y is None or y.dtype.num != cnp.NPY_FLOAT32):
        raise ValueError("norm core: relu needs a float32 y")
    # the Relu inside the affine's vectors (olc_norm_affine), as each segment is stored
    p.relu = relu
    p.stats = olc_norm_select_stats(acc_double, dtype, level)
    p.affine = olc_norm_select_affine(acc_double, dtype, level)
    if p.stats == NULL or p.affine == NULL:
        raise TypeError(f"norm core: no function for element type {dtype}")
    p.x = _ptr(x)
    p.y = NULL if y is None else <char *>cnp.PyArray_DATA(<cnp.ndarray>y)
    p.item = cnp.PyArray_ITEMSIZE(x)
    p.segs = segs
    p.seg_len = seg_len
    p.groups = groups
    p.ch_mul = <const double *>_ptr(ch_mul)
    p.ch_add = <const double *>_ptr(ch_add)
    p.ch_mean = <const double *>_ptr(ch_mean)
    p.ch_var = <const double *>_ptr(ch_var)
    p.eps = eps
    p.how = how
    p.mode = mode
    p.acc_double = acc_double
    p.row_mean = <double *>_ptr(row_mean)
    p.row_var = <double *>_ptr(row_var)
    p.row_x = NULL
    cdef _AffineJob job
    if nrows <= 0:
        return
    if parts is not None:
        # row r of image n: channel r % groups, in the part holding it
        row_bytes = segs * seg_len * p.item
        n_img = nrows // groups
        table = <const char **>malloc(nrows * sizeof(char *))
        if table == NULL:
            raise MemoryError()
        c = 0
        for part in parts:
            if (not cnp.PyArray_IS_C_CONTIGUOUS(part) or part.dtype.num != x.dtype.num
                    or cnp.PyArray_NBYTES(part) % (n_img * row_bytes)
                    or c + cnp.PyArray_NBYTES(part) // (n_img * row_bytes) > groups):
                free(table)
                raise ValueError("norm core: parts that do not make x's rows")
            ci = cnp.PyArray_NBYTES(part) // (n_img * row_bytes)
            for i in range(n_img):
                for r in range(ci):
                    table[i * groups + c + r] = (<const char *>cnp.PyArray_DATA(part)
                                                 + (i * ci + r) * row_bytes)
            c += ci
        if c != groups:
            free(table)
            raise ValueError("norm core: parts that do not make x's rows")
        p.row_x = table
    try:
        if threads <= 1 or nrows == 1:
            with nogil:
                olc_norm_affine_rows(&p, 0, nrows)
            return
        job.p, job.nrows, job.nchunks = &p, nrows, _chunks(nrows, threads)
        with nogil:
            olc_parallel_for(job.nchunks, _affine_task, &job, threads)
    finally:
        free(table)
