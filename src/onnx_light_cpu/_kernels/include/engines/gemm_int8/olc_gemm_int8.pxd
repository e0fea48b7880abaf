# The C API of olc_gemm_int8.h that the gemm_int8 core uses.
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

cdef extern from "engines/gemm_int8/olc_gemm_int8.h" nogil:
    int olc_i8_level(int level)
    int olc_i8_uses_amx(int level, int64_t M)
    int64_t olc_i8_packed_size(int64_t K, int64_t N)
    int64_t olc_i8_panels(int64_t N)
    void olc_i8_pack_b(const uint8_t *b, const int64_t *b_offsets, int64_t nb, int64_t K,
                       int64_t N, int b_signed, int8_t *dst, int32_t *colsum, int level,
                       int nthreads)
    int olc_i8_gemm(const uint8_t *a, const int64_t *a_offsets, int64_t batch,
                    const int8_t *bp, const int32_t *colsum, const int64_t *b_index,
                    const int32_t *za, int64_t za_bs, int64_t za_rs, const int32_t *zb,
                    int64_t zb_bs, int64_t zb_cs, int32_t *y, int64_t M, int64_t N,
                    int64_t K, int a_signed, int level, int nthreads)
    void olc_i8_requantize(const int32_t *c, const double *mult, int64_t m_bs, int64_t m_rs,
                           int64_t m_cs, void *y, int64_t batch, int64_t M, int64_t N,
                           double zp, int out_signed, int level, int nthreads)
