# The C API of olc_quantization.h that the quantization core uses.
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

cdef extern from "quantization/olc_quantization.h" nogil:
    int64_t OLC_Q_CHUNK
    void olc_q_dynamic_u8(const float *x, int64_t n, uint8_t *q, float *lo, float *hi,
                          float *scale_out, int32_t *zp_out, int level, int nthreads)
    void olc_q_quantize_linear_8(const float *x, int64_t n, float scale, int32_t zp,
                                 int32_t qmin, int32_t qmax, uint8_t *q, int level,
                                 int nthreads)
    void olc_q_binary_8(const uint8_t *x, const uint8_t *y, int64_t n, int mul, int mode,
                        int is_signed, float sx, float sy, float sc, int32_t zx, int32_t zy,
                        int32_t zc, uint8_t *out, int level, int nthreads)
    int olc_q_gemm_float(const uint8_t *a, const int64_t *a_offsets, int64_t batch,
                         const int8_t *bp, const int32_t *colsum, const int64_t *b_index,
                         const int32_t *za, int64_t za_bs, int64_t za_rs, const int32_t *zb,
                         int64_t zb_bs, int64_t zb_cs, float *y, int64_t M, int64_t N,
                         int64_t K, int a_signed, const float *m, int64_t m_bs, int64_t m_cs,
                         const float *bias, int level, int nthreads)
    void olc_q_scale_rows(const int32_t *c, int64_t rows, int64_t N, int64_t rows_per_batch,
                          const float *m, int64_t m_bs, int64_t m_cs, const float *bias,
                          float *y, int level, int nthreads)
