# The C API of normalization/olc_normalization.h that normalization.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "normalization/olc_normalization.h" nogil:
    ctypedef void (*olc_norm_stats_fn)(const void *x, int64_t n, int mode, double *mean,
                                       double *var)
    ctypedef void (*olc_norm_apply_fn)(const void *x, int64_t n, double mean, double inv,
                                       const void *scale, const void *bias, void *y)
    ctypedef void (*olc_norm_affine_fn)(const void *x, int64_t n, double mean, double mul,
                                        double add, void *y)
    int OLC_NORM_CENTERED, OLC_NORM_SQUARES, OLC_NORM_L1, OLC_NORM_L2
    int OLC_NORM_HOW_GIVEN, OLC_NORM_HOW_STD, OLC_NORM_HOW_MVN, OLC_NORM_HOW_LP, OLC_NORM_HOW_STATS
    int olc_norm_level(int level)
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
        int relu
        double *row_mean
        double *row_var
        const char *const *row_x
    void olc_norm_affine_rows(const olc_norm_affine_plan *p, int64_t r0, int64_t r1)
