# The C API of pooling/olc_pooling.h that pooling.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "pooling/olc_pooling.h" nogil:
    enum:
        OLC_POOLING_MAX
        OLC_POOLING_AVG
        OLC_POOLING_LP
    ctypedef struct olc_pooling_args:
        const void *x
        void *y
        int64_t *idx
        int64_t in_ "in"[3]
        int64_t out[3]
        int64_t k[3]
        int64_t s[3]
        int64_t pb[3]
        int64_t d[3]
        const void *cnt[3]
        int mode
        int storage_order
        double p
        int64_t C, HW, lo, hi
        double alpha_over_size, beta, bias
        const void *rois
        int64_t ph, pw
        float spatial_scale
    ctypedef void (*olc_pooling_fn)(const olc_pooling_args *p, int64_t p0, int64_t p1)
    olc_pooling_fn olc_pooling_select(int what, int dtype, int level)
    int olc_pooling_level(int level)
