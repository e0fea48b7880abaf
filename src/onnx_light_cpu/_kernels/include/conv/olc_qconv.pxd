# The C API of olc_qconv.h that conv.pyx uses.

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t
from olc_conv cimport olc_conv_geom

cdef extern from "conv/olc_qconv.h" nogil:
    void olc_qconv_im2col(const olc_conv_geom *g, const uint8_t *x, int64_t img_stride,
                          int64_t nimg, int64_t G, uint8_t pad, uint8_t *col, int nthreads)
    ctypedef struct olc_qconv_rq_job:
        const int32_t *acc
        const int32_t *bias
        const float *scale
        int64_t M, P
        int32_t zp
        int out_signed, level
        void *y
    int olc_qconv_depthwise(const olc_conv_geom *g, const uint8_t *x, int x_signed,
                            int32_t xzp, const int32_t *w, int64_t planes, int64_t channels,
                            int32_t *y, const olc_qconv_rq_job *rq, int level, int nthreads)
    void olc_qconv_requantize(const int32_t *acc, const int32_t *bias, const float *scale,
                              int64_t rows, int64_t M, int64_t P, int32_t zp, int out_signed,
                              void *y, int level, int nthreads)
    int olc_qconv_direct_fits(const olc_conv_geom *g, int level)
    int64_t olc_qconv_direct_scratch(const olc_conv_geom *g, int64_t nimg)
    ctypedef struct olc_qconv_direct_rq:
        const int32_t *bias
        const float *scale
        int32_t zp
        int out_signed
    void olc_qconv_direct(const olc_conv_geom *g, const uint8_t *x, int64_t img_stride,
                          int64_t nimg, int x_signed, int32_t xzp, const int8_t *w,
                          const int32_t *wsum, int64_t M, uint8_t *xp, void *y,
                          const olc_qconv_direct_rq *rq, int nthreads)
