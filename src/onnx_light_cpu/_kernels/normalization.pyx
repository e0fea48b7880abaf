# cython: language_level=3
"""Normalization cores on the row engine of olc_norm.h.

``rows`` serves LayerNormalization, RMSNormalization and
SimplifiedLayerNormalization (a scale vector per row); ``affine`` serves
BatchNormalization, InstanceNormalization, GroupNormalization,
LpNormalization and MeanVarianceNormalization (one multiplier per channel
segment).  Rows are split over the OpenMP team in whole rows, each reduced
by one thread in a fixed order, so the thread count never changes a result.
"""

cimport numpy as cnp
from cython.parallel cimport prange
from libc.stdint cimport int64_t

cnp.import_array()

cdef extern from "normalization/olc_normalization.h" nogil:
    ctypedef void (*olc_norm_stats_fn)(const void *x, int64_t n, int mode, double *mean,
                                       double *var)
    ctypedef void (*olc_norm_apply_fn)(const void *x, int64_t n, double mean, double inv,
                                       const void *scale, const void *bias, void *y)
    ctypedef void (*olc_norm_affine_fn)(const void *x, int64_t n, double mean, double mul,
                                        double add, void *y)
    int OLC_NORM_CENTERED, OLC_NORM_SQUARES, OLC_NORM_L1, OLC_NORM_L2
    int OLC_NORM_HOW_GIVEN, OLC_NORM_HOW_STD, OLC_NORM_HOW_MVN, OLC_NORM_HOW_LP, OLC_NORM_HOW_STATS
    int olc_norm_level(int acc_double, int tx, int ts, int level)
    olc_norm_stats_fn olc_norm_select_stats(int acc_double, int tx, int level)
    olc_norm_apply_fn olc_norm_select_apply(int acc_double, int tx, int ts, int level)
    olc_norm_affine_fn olc_norm_select_affine(int acc_double, int tx, int level)

    ctypedef struct olc_norm_rows_plan:
        olc_norm_stats_fn stats
        olc_norm_apply_fn apply
        const char *x
        char *y
        const char *scale
        const char *bias
        int64_t n, x_item, y_item, scale_stride, bias_stride
        const int64_t *scale_row
        int mode, acc_double
        double eps
        void *mean_out
        void *inv_out
        int stat_type
    void olc_norm_rows(const olc_norm_rows_plan *p, int64_t r0, int64_t r1)

    ctypedef struct olc_norm_affine_plan:
        olc_norm_stats_fn stats
        olc_norm_affine_fn affine
        const char *x
        char *y
        int64_t item, segs, seg_len, groups
        const double *ch_mul
        const double *ch_add
        const double *ch_mean
        const double *ch_var
        double eps
        int how, mode, acc_double
        double *row_mean
        double *row_var
    void olc_norm_affine_rows(const olc_norm_affine_plan *p, int64_t r0, int64_t r1)

CENTERED = OLC_NORM_CENTERED
SQUARES = OLC_NORM_SQUARES
L1 = OLC_NORM_L1
L2 = OLC_NORM_L2
HOW_GIVEN = OLC_NORM_HOW_GIVEN
HOW_STD = OLC_NORM_HOW_STD
HOW_MVN = OLC_NORM_HOW_MVN
HOW_LP = OLC_NORM_HOW_LP
HOW_STATS = OLC_NORM_HOW_STATS


def level_used(int acc_double, int tx, int ts, int level):
    """The instruction-set level the functions for these types run at."""
    return olc_norm_level(acc_double, tx, ts, level)


cdef inline char *_ptr(object a):
    return NULL if a is None else <char *>cnp.PyArray_DATA(<cnp.ndarray>a)


cdef int64_t _chunks(int64_t rows, int nthreads) noexcept nogil:
    # A few chunks per thread balance uneven rows without splitting any row.
    cdef int64_t c = 4 * nthreads
    return rows if rows < c else c


def rows(int tx, int ts, int level, int acc_double, int mode, double eps,
         cnp.ndarray x, cnp.ndarray scale, object bias, cnp.ndarray y,
         int64_t nrows, int64_t n, int64_t scale_stride, object scale_row,
         object mean_out, object inv_out, int stat_type, int nthreads):
    """y[r] = (x[r] - mean) * inv_std * scale[row r] (+ bias) for each row.

    ``scale_stride``: elements between the scale (and bias) vectors of
    consecutive rows (0: one shared vector); ``scale_row`` (int64 array or
    None) overrides it with a scale row index per row.
    """
    cdef olc_norm_rows_plan p
    p.stats = olc_norm_select_stats(acc_double, tx, level)
    p.apply = olc_norm_select_apply(acc_double, tx, ts, level)
    if p.stats == NULL or p.apply == NULL:
        raise TypeError(f"norm core: no function for element types {tx}, {ts}")
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
    cdef int64_t nchunks, c
    if nrows <= 0:
        return
    if nthreads <= 1 or nrows == 1:
        with nogil:
            olc_norm_rows(&p, 0, nrows)
        return
    nchunks = _chunks(nrows, nthreads)
    for c in prange(nchunks, nogil=True, num_threads=nthreads, schedule="static"):
        olc_norm_rows(&p, c * nrows // nchunks, (c + 1) * nrows // nchunks)


def affine(int tx, int level, int acc_double, int how, int mode, double eps,
           cnp.ndarray x, cnp.ndarray y, int64_t nrows, int64_t segs, int64_t seg_len,
           int64_t groups, object ch_mul, object ch_add, object ch_mean, object ch_var,
           object row_mean, object row_var, int nthreads):
    """Per-segment y = (x - mean) * mul + add over ``nrows`` rows of
    ``segs * seg_len`` elements; channel arrays are float64 (see olc_norm.h)."""
    cdef olc_norm_affine_plan p
    p.stats = olc_norm_select_stats(acc_double, tx, level)
    p.affine = olc_norm_select_affine(acc_double, tx, level)
    if p.stats == NULL or p.affine == NULL:
        raise TypeError(f"norm core: no function for element type {tx}")
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
    cdef int64_t nchunks, c
    if nrows <= 0:
        return
    if nthreads <= 1 or nrows == 1:
        with nogil:
            olc_norm_affine_rows(&p, 0, nrows)
        return
    nchunks = _chunks(nrows, nthreads)
    for c in prange(nchunks, nogil=True, num_threads=nthreads, schedule="static"):
        olc_norm_affine_rows(&p, c * nrows // nchunks, (c + 1) * nrows // nchunks)
