# The C API of the float GEMM engine (olc_gemm.h) that the cores use.

from libc.stdint cimport int64_t

cdef extern from "engines/gemm/olc_gemm.h" nogil:
    int OLC_GEMM_KC
    int olc_gemm_level(int level)
    int olc_sgemm_nr(int level)
    int64_t olc_gemm_spread_ld(int64_t n)
    int64_t olc_sgemm_packed_size(int level, int64_t K, int64_t N)
    void olc_sgemm_pack_b(int level, int dtype, int64_t nb, const void *b,
                          const int64_t *b_offsets, int64_t rsb, int64_t csb, int64_t K,
                          int64_t N, float *dst, int nthreads)
    int olc_sgemm(int level, int dtype, int64_t batch, const void *a,
                  const int64_t *a_offsets, int64_t rsa, int64_t csa, const float *bp,
                  const int64_t *b_index, const void *b, const int64_t *b_offsets,
                  int64_t rsb, int64_t csb, int64_t M, int64_t N, int64_t K, float *c,
                  int64_t ldc, int64_t c_stride, float alpha, int accumulate, int nthreads)
    void olc_sgemv(int level, int64_t K, int64_t N, const float *a, const float *b,
                   int64_t rsb, float *c, float alpha, int acc, int nthreads)
    int olc_gemm_generic(int level, int dtype, int64_t batch, const void *a,
                         const int64_t *a_offsets, int64_t rsa, int64_t csa, const void *b,
                         const int64_t *b_offsets, int64_t M, int64_t N, int64_t K, void *c,
                         int nthreads)
    int olc_fma_peak(int level, int64_t iters, float *sink)
