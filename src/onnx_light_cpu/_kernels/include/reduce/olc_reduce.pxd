# The C API of reduce/olc_reduce.h.

from libc.stdint cimport int64_t, uint64_t

cdef extern from "reduce/olc_reduce.h" nogil:
    ctypedef double (*olc_bsum_fn)(const void *x, int64_t n)
    ctypedef uint64_t (*olc_isum_fn)(const void *x, int64_t n)
    ctypedef void (*olc_csum_fn)(const void *x, void *out, int64_t R, int64_t B, int64_t b0, int64_t b1)
    int OLC_SUM_BLOCK, OLC_COL_BLOCK
    int olc_reduce_level(int level)
    olc_bsum_fn olc_bsum_select(int dtype, int level)
    olc_isum_fn olc_isum_select(int dtype)
    olc_csum_fn olc_csum_select(int dtype, int level)
    void olc_store_sums(int dtype, const double *partial, const uint64_t *ipartial,
                        int64_t A, int64_t nblk, void *out)
    int olc_softmax_rows(int dtype, int level, const void *px, void *py, int64_t n,
                         int64_t r0, int64_t r1)
    void olc_softmax_cols_f32(const float *x, float *y, int64_t N, int64_t inner, int64_t c0, int64_t c1)
    void olc_softmax_cols_f64(const double *x, double *y, int64_t N, int64_t inner, int64_t c0, int64_t c1)
    ctypedef void (*olc_redx_rows_fn)(const void *x, void *out, int64_t R, int64_t a0, int64_t a1)
    ctypedef void (*olc_redx_cols_fn)(const void *x, void *out, int64_t R, int64_t B, int64_t b0, int64_t b1)
    int OLC_REDX_KIND_MAX, OLC_REDX_KIND_MIN, OLC_REDX_KIND_PROD, OLC_REDX_KIND_SUM, OLC_SUM_LANES
    olc_redx_rows_fn olc_redx_rows_select(int kind, int dtype, int level)
    olc_redx_cols_fn olc_redx_cols_select(int kind, int dtype, int level)
