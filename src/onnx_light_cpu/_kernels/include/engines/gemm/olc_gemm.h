/* Matrix multiplication engine: C = alpha * op(A) op(B) (+ C).
 *
 * float32 (and float16/bfloat16, widened to float32 while packing, summed
 * in float32 and rounded once by the adapter) follows the usual scheme:
 *   - B goes into panels of NR columns, block by block of KC rows: panel
 *     (pc, j) holds kc x NR floats, row after row, zero-padded past N.  A
 *     constant B is packed once by its adapter (olc_sgemm_pack_b); any
 *     other B is packed tile by tile, each block used while still in cache.
 *   - A is read in place when it is float32 with unit column stride (the
 *     "direct" micro-kernels broadcast from its rows); otherwise it is
 *     packed once into micro-panels of MR rows.
 *   - the output is cut into tiles (rows m0..m1, columns n0..n1), the tasks
 *     of one olc_parallel_for (common/olc_pool.h); each runs the
 *     register-blocked micro-kernel over its (MR rows, NR columns) blocks,
 *     the B micro-panel (kc x NR, 32 KB at most) staying in L1 while the
 *     row blocks pass by.  K is never split:
 *     an output element is summed in the same order whatever the tiling and
 *     the thread count, so results do not depend on either.
 * The micro-kernels of a level are one function with the row count as a
 * parameter (olc_ukr_<level>_rows), inlined into one entry per row count
 * (olc_ukr_<level>_<R>, olc_ukr_<level>_direct_<R>; olc_sgemm_cfg); a
 * panel's last NR/2 columns or fewer take its half-width twin
 * (olc_ukr_<level>_half), at AVX-512 the last 8 or fewer an 8-lane one
 * (olc_ukr_avx512_narrow); both sum each lane as the full one does.
 * AVX2 and AVX-512 share these kernels' code (olc_gemm_ukr.h, compiled
 * once per level over the level's steps olc_gemm_<step>_<level>).
 * M = 1 with a row-major float32 B takes a streaming path (olc_sgemv): B is
 * read once, never packed.
 *
 * double and the integer types use a plain blocked loop (olc_gemm_loop.h),
 * compiled per level and arithmetic type (olc_gemm_generic.h) so that the
 * compiler vectorises it for each level; integers wrap around as in NumPy
 * (computed in unsigned arithmetic).
 *
 * An int8 path (u8 x s8 -> int32) can join as its own packing + micro-kernel
 * pair behind the same tiling (olc_sgemm_tiling, olc_split).
 */
#ifndef OLC_GEMM_H
#define OLC_GEMM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_pool.h"


/* Rows of B per packed block: a micro-panel of B (KC x 32 floats = 32 KB)
 * fits Zen 5's 48 KB L1 beside the A micro-panel it meets. */
#define OLC_GEMM_KC 256

/* A product of a few rows (a decode step's) reads each panel of B once,
 * straight from memory, faster than the hardware prefetcher alone brings
 * it: the micro-kernels of up to OLC_GEMM_STREAM_ROWS rows ask for the
 * panel OLC_GEMM_AHEAD bytes ahead, into L2.  Measured on an Intel Xeon
 * (AVX-512), MatMul by a constant 896x151936 B (a Qwen2-0.5B LM head) at
 * one thread: 1 row 38.5 -> 32 ms (1.04 -> 0.86 of ONNX Runtime's time),
 * 4 rows 49 -> 39 ms; 2048 bytes ahead was no better, and the
 * non-temporal hint (locality 0) made it twice as slow.  Not on AMD's
 * (olc_cpu_is_amd): on a 2-core Zen 4 the prefetch made the Qwen2-0.5B
 * float32 decode step slower at one thread, 70.6 -> 79.7 ms (the LM head
 * alone 18.0 -> 19.5 ms; 2 threads 66 ms either way, 512 to 4096 bytes
 * ahead and every locality no better). */
#define OLC_GEMM_STREAM_ROWS 4
#define OLC_GEMM_AHEAD 1024
/* Bytes of A (M x K floats) over which each thread takes 4 column tiles
 * rather than 8 (olc_sgemm_tiling). */
#define OLC_GEMM_BIG_A (1 << 20)
/* Rows of an output tile up to which a raw float32 B is read in place
 * rather than packed (olc_sgemm_tile). */
#ifndef OLC_GEMM_STRIDED_ROWS
#define OLC_GEMM_STRIDED_ROWS 64
#endif
/* Rows and columns of an output tile, at most. */
#ifndef OLC_GEMM_MC
#define OLC_GEMM_MC 512
#endif
#ifndef OLC_GEMM_NC
#define OLC_GEMM_NC 512
#endif

/* What the AVX2 and AVX-512 micro-kernels apply to a whole micro-tile (NR
 * columns) before they store it, when the caller passes one: + bias[r]
 * (NULL: none), + z[r * ldz + column] (NULL: none), then the activation:
 * max(0, v) (ReLU) or min(b, max(a, v)) (Clip, a <= b).  The operations
 * of olc_conv_epilogue in its order, on values still in registers: the
 * same bits, one pass over C fewer (olc_sgemm_tile). */
enum { OLC_UKR_EPI_NONE = 0, OLC_UKR_EPI_RELU, OLC_UKR_EPI_CLIP };
typedef struct {
    const float *bias, *z;
    int64_t ldz;
    int act;
    float a, b;
} olc_ukr_epi;

/* Micro-kernel: c[r][0:ncols] = alpha * sum_k a[k][r] b[k][:] (+ c if acc)
 * for r < rows; a is a packed micro-panel (kc x MR; lda unused), b one
 * (kc x NR).  The "direct" AVX2/AVX-512 kernels read A where it lies instead,
 * row r at a + r * lda (float32 A with unit column stride: no A packing).
 * epi (NULL: none) is applied before the store: callers pass one for
 * whole panels (ncols == NR) only, at levels with cfg.epi. */
typedef void (*olc_ukr_fn)(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                           int64_t ldc, float alpha, int acc, int64_t ncols,
                           const olc_ukr_epi *epi);
/* A and B both read in place, NR whole columns: row k of B at b + k * ldb. */
typedef void (*olc_ukr_strided_fn)(int64_t kc, const float *a, int64_t lda, const float *b,
                                   int64_t ldb, float *c, int64_t ldc, float alpha, int acc,
                                   const olc_ukr_epi *epi);

typedef struct {
    int mr, nr, level;
    int epi; /* whether the kernels apply an olc_ukr_epi (the portable ones do not) */
    olc_ukr_fn ukr[17];             /* by number of rows, 1..mr */
    olc_ukr_fn direct[17];          /* A read in place; NULL where the level has none */
    olc_ukr_strided_fn strided[17]; /* A and B read in place; NULL likewise */
} olc_sgemm_cfg;

/* ---- portable micro-kernel (level 0): MR=4, NR=16 ---- */

#define OLC_S_MR 4
#define OLC_S_NR 16

/* The kernels of every level are written once with the row count R as a
 * parameter and inlined into one small function per R (olc_ukr_<level>_R,
 * the entries of olc_sgemm_cfg): R is then a constant, the loops over rows
 * unroll and the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
olc_ukr_scalar_rows(const int R, int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                    float alpha, int acc, int64_t ncols) {
    float t[OLC_S_MR][OLC_S_NR];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < OLC_S_NR; ++v) t[r][v] = 0.0f;
    for (int64_t k = 0; k < kc; ++k) {
        const float *bk = b + k * OLC_S_NR;
        for (int r = 0; r < R; ++r) {
            float ar = a[k * OLC_S_MR + r];
            for (int v = 0; v < OLC_S_NR; ++v) t[r][v] += ar * bk[v];
        }
    }
    for (int r = 0; r < R; ++r) {
        float *cr = c + r * ldc;
        for (int64_t v = 0; v < ncols; ++v)
            cr[v] = acc ? cr[v] + alpha * t[r][v] : alpha * t[r][v];
    }
}

static void
olc_ukr_scalar_1(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                 int64_t ldc, float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    (void)lda;
    (void)epi;
    olc_ukr_scalar_rows(1, kc, a, b, c, ldc, alpha, acc, ncols);
}
static void
olc_ukr_scalar_2(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                 int64_t ldc, float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    (void)lda;
    (void)epi;
    olc_ukr_scalar_rows(2, kc, a, b, c, ldc, alpha, acc, ncols);
}
static void
olc_ukr_scalar_3(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                 int64_t ldc, float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    (void)lda;
    (void)epi;
    olc_ukr_scalar_rows(3, kc, a, b, c, ldc, alpha, acc, ncols);
}
static void
olc_ukr_scalar_4(int64_t kc, const float *a, int64_t lda, const float *b, float *c,
                 int64_t ldc, float alpha, int acc, int64_t ncols, const olc_ukr_epi *epi) {
    (void)lda;
    (void)epi;
    olc_ukr_scalar_rows(4, kc, a, b, c, ldc, alpha, acc, ncols);
}

/* ---- AVX2 + FMA and AVX-512 micro-kernels: one body, olc_gemm_ukr.h ---- */

/* The steps of a level the body is written with (olc_gemm_<step>_<level>);
 * they differ only in the vector width and in the column edge of a row. */
#if OLC_X86
/* AVX2 + FMA: MR=6, NR=16 (12 ymm accumulators). */
#define OLC_A2_MR 6
#define OLC_A2_NR 16

static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_zero_avx2(void) {
    return _mm256_setzero_ps();
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_set1_avx2(float v) {
    return _mm256_set1_ps(v);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_bcast_avx2(const float *p) {
    return _mm256_broadcast_ss(p);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_ld_avx2(const float *p) {
    return _mm256_loadu_ps(p);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 void olc_gemm_st_avx2(float *p, __m256 v) {
    _mm256_storeu_ps(p, v);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_fma_avx2(__m256 x, __m256 y,
                                                                           __m256 z) {
    return _mm256_fmadd_ps(x, y, z);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_mul_avx2(__m256 x, __m256 y) {
    return _mm256_mul_ps(x, y);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_add_avx2(__m256 x, __m256 y) {
    return _mm256_add_ps(x, y);
}
/* x > y ? x : y and x < y ? x : y: y where either is NaN */
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_max_avx2(__m256 x, __m256 y) {
    return _mm256_max_ps(x, y);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 __m256 olc_gemm_min_avx2(__m256 x, __m256 y) {
    return _mm256_min_ps(x, y);
}
/* cr[0:n] = va * t0 (+ cr[0:n] if acc), n <= 8, through a buffer. */
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 void
olc_gemm_edge1_avx2(float *cr, int64_t n, __m256 va, __m256 t0, int acc) {
    float buf[8];
    memset(buf, 0, sizeof buf);
    if (acc) memcpy(buf, cr, (size_t)n * sizeof(float));
    __m256 x0 = _mm256_loadu_ps(buf);
    x0 = acc ? _mm256_fmadd_ps(va, t0, x0) : _mm256_mul_ps(va, t0);
    _mm256_storeu_ps(buf, x0);
    memcpy(cr, buf, (size_t)n * sizeof(float));
}
/* The same for two vectors (8 < n < 16), one buffer. */
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 void
olc_gemm_edge2_avx2(float *cr, int64_t n, __m256 va, __m256 t0, __m256 t1, int acc) {
    float buf[OLC_A2_NR];
    memset(buf, 0, sizeof buf);
    if (acc) memcpy(buf, cr, (size_t)n * sizeof(float));
    __m256 x0 = _mm256_loadu_ps(buf), x1 = _mm256_loadu_ps(buf + 8);
    if (acc) { x0 = _mm256_fmadd_ps(va, t0, x0); x1 = _mm256_fmadd_ps(va, t1, x1); }
    else { x0 = _mm256_mul_ps(va, t0); x1 = _mm256_mul_ps(va, t1); }
    _mm256_storeu_ps(buf, x0); _mm256_storeu_ps(buf + 8, x1);
    memcpy(cr, buf, (size_t)n * sizeof(float));
}

#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_UKR_MR OLC_A2_MR
#define OLC_UKR_NR OLC_A2_NR
#include "engines/gemm/olc_gemm_ukr.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_UKR_MR
#undef OLC_UKR_NR
#endif

#if OLC_X86 && OLC_HAVE_AVX512
/* AVX-512: MR=12, NR=32 (24 zmm accumulators); the column edge is masked. */
#define OLC_A5_MR 12
#define OLC_A5_NR 32

static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_zero_avx512(void) {
    return _mm512_setzero_ps();
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_set1_avx512(float v) {
    return _mm512_set1_ps(v);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_bcast_avx512(const float *p) {
    return _mm512_set1_ps(*p);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_ld_avx512(const float *p) {
    return _mm512_loadu_ps(p);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 void olc_gemm_st_avx512(float *p, __m512 v) {
    _mm512_storeu_ps(p, v);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_fma_avx512(__m512 x, __m512 y,
                                                                               __m512 z) {
    return _mm512_fmadd_ps(x, y, z);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_mul_avx512(__m512 x,
                                                                               __m512 y) {
    return _mm512_mul_ps(x, y);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_add_avx512(__m512 x,
                                                                               __m512 y) {
    return _mm512_add_ps(x, y);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_max_avx512(__m512 x,
                                                                               __m512 y) {
    return _mm512_max_ps(x, y);
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 __m512 olc_gemm_min_avx512(__m512 x,
                                                                               __m512 y) {
    return _mm512_min_ps(x, y);
}
/* cr[0:n] = va * t0 (+ cr[0:n] if acc), n <= 16, masked. */
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 void
olc_gemm_edge1_avx512(float *cr, int64_t n, __m512 va, __m512 t0, int acc) {
    __mmask16 m0 = olc_tail_mask16(n);
    if (acc)
        _mm512_mask_storeu_ps(cr, m0, _mm512_fmadd_ps(va, t0, _mm512_maskz_loadu_ps(m0, cr)));
    else
        _mm512_mask_storeu_ps(cr, m0, _mm512_mul_ps(va, t0));
}
/* The same for two vectors (16 < n < 32). */
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 void
olc_gemm_edge2_avx512(float *cr, int64_t n, __m512 va, __m512 t0, __m512 t1, int acc) {
    __mmask16 m0 = olc_tail_mask16(n);
    __mmask16 m1 = n > 16 ? olc_tail_mask16(n - 16) : (__mmask16)0;
    if (acc) {
        __m512 x0 = _mm512_maskz_loadu_ps(m0, cr);
        __m512 x1 = _mm512_maskz_loadu_ps(m1, cr + 16);
        _mm512_mask_storeu_ps(cr, m0, _mm512_fmadd_ps(va, t0, x0));
        _mm512_mask_storeu_ps(cr + 16, m1, _mm512_fmadd_ps(va, t1, x1));
    } else {
        _mm512_mask_storeu_ps(cr, m0, _mm512_mul_ps(va, t0));
        _mm512_mask_storeu_ps(cr + 16, m1, _mm512_mul_ps(va, t1));
    }
}

/* The narrow edge kernel's store (olc_gemm_ukr.h, OLC_UKR_NARROW; its
 * other steps are the AVX2 level's, on 8 lanes of 256 bits): cr[0:n] =
 * alpha * t0 (+ cr[0:n] if acc), n <= 8, masked. */
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX512 void
olc_gemm_nedge_avx512(float *cr, int64_t n, float alpha, __m256 t0, int acc) {
    __mmask8 m = (__mmask8)((1u << n) - 1);
    __m256 va = _mm256_set1_ps(alpha);
    if (acc)
        _mm256_mask_storeu_ps(cr, m, _mm256_fmadd_ps(va, t0, _mm256_maskz_loadu_ps(m, cr)));
    else
        _mm256_mask_storeu_ps(cr, m, _mm256_mul_ps(va, t0));
}

#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_UKR_MR OLC_A5_MR
#define OLC_UKR_NR OLC_A5_NR
#define OLC_UKR_NARROW 8
#define OLC_UKR_NARROW_LVL avx2
#include "engines/gemm/olc_gemm_ukr.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_UKR_MR
#undef OLC_UKR_NR
#undef OLC_UKR_NARROW
#undef OLC_UKR_NARROW_LVL
#endif

/* The configuration of a level (capped to what the build has). */
static int olc_gemm_level(int level) { return olc_build_level(level); }

static void olc_sgemm_config(int level, olc_sgemm_cfg *cfg) {
    memset(cfg, 0, sizeof *cfg);
    level = olc_gemm_level(level);
    cfg->level = level;
#if OLC_X86 && OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        olc_ukr_fn f[] = {olc_ukr_avx512_1, olc_ukr_avx512_2, olc_ukr_avx512_3, olc_ukr_avx512_4,
                          olc_ukr_avx512_5, olc_ukr_avx512_6, olc_ukr_avx512_7, olc_ukr_avx512_8,
                          olc_ukr_avx512_9, olc_ukr_avx512_10, olc_ukr_avx512_11,
                          olc_ukr_avx512_12};
        olc_ukr_fn d[] = {olc_ukr_avx512_direct_1, olc_ukr_avx512_direct_2,
                          olc_ukr_avx512_direct_3, olc_ukr_avx512_direct_4,
                          olc_ukr_avx512_direct_5, olc_ukr_avx512_direct_6,
                          olc_ukr_avx512_direct_7, olc_ukr_avx512_direct_8,
                          olc_ukr_avx512_direct_9, olc_ukr_avx512_direct_10,
                          olc_ukr_avx512_direct_11, olc_ukr_avx512_direct_12};
        olc_ukr_strided_fn s[] = {olc_ukr_avx512_strided_1, olc_ukr_avx512_strided_2,
                                  olc_ukr_avx512_strided_3, olc_ukr_avx512_strided_4,
                                  olc_ukr_avx512_strided_5, olc_ukr_avx512_strided_6,
                                  olc_ukr_avx512_strided_7, olc_ukr_avx512_strided_8,
                                  olc_ukr_avx512_strided_9, olc_ukr_avx512_strided_10,
                                  olc_ukr_avx512_strided_11, olc_ukr_avx512_strided_12};
        cfg->mr = OLC_A5_MR; cfg->nr = OLC_A5_NR; cfg->epi = 1;
        for (int i = 0; i < OLC_A5_MR; ++i) {
            cfg->ukr[i + 1] = f[i]; cfg->direct[i + 1] = d[i]; cfg->strided[i + 1] = s[i];
        }
        return;
    }
#endif
#if OLC_X86
    if (level == OLC_AVX2) {
        olc_ukr_fn f[] = {olc_ukr_avx2_1, olc_ukr_avx2_2, olc_ukr_avx2_3,
                          olc_ukr_avx2_4, olc_ukr_avx2_5, olc_ukr_avx2_6};
        olc_ukr_fn d[] = {olc_ukr_avx2_direct_1, olc_ukr_avx2_direct_2, olc_ukr_avx2_direct_3,
                          olc_ukr_avx2_direct_4, olc_ukr_avx2_direct_5, olc_ukr_avx2_direct_6};
        olc_ukr_strided_fn s[] = {olc_ukr_avx2_strided_1, olc_ukr_avx2_strided_2,
                                  olc_ukr_avx2_strided_3, olc_ukr_avx2_strided_4,
                                  olc_ukr_avx2_strided_5, olc_ukr_avx2_strided_6};
        cfg->mr = OLC_A2_MR; cfg->nr = OLC_A2_NR; cfg->epi = 1;
        for (int i = 0; i < OLC_A2_MR; ++i) {
            cfg->ukr[i + 1] = f[i]; cfg->direct[i + 1] = d[i]; cfg->strided[i + 1] = s[i];
        }
        return;
    }
#endif
    {
        olc_ukr_fn f[] = {olc_ukr_scalar_1, olc_ukr_scalar_2, olc_ukr_scalar_3, olc_ukr_scalar_4};
        cfg->mr = OLC_S_MR; cfg->nr = OLC_S_NR;
        for (int i = 0; i < OLC_S_MR; ++i) cfg->ukr[i + 1] = f[i];
    }
}

static int olc_sgemm_nr(int level) { olc_sgemm_cfg c; olc_sgemm_config(level, &c); return c.nr; }

/* ---- packing (portable: it moves data, the micro-kernel does the work) ---- */

/* Element i of a float32, float16 or bfloat16 array, as float. */
static inline float olc_gemm_load(int dtype, const void *p, int64_t i) {
    return dtype == OLC_FLOAT ? ((const float *)p)[i]
           : dtype == OLC_FLOAT16 ? olc_h2f(((const uint16_t *)p)[i])
                                  : olc_bf2f(((const uint16_t *)p)[i]);
}

/* Rows m0..m1 and columns pc..pc+kc of A (strides rsa, csa in elements)
 * into micro-panels of mr rows: dst[(i / mr) * mr * kc + k * mr + i % mr]. */
static void olc_pack_a(int dtype, const void *a, int64_t rsa, int64_t csa, int64_t m0,
                       int64_t m1, int64_t pc, int64_t kc, int mr, float *dst) {
    for (int64_t i = m0; i < m1; i += mr) {
        int64_t rows = m1 - i < mr ? m1 - i : mr;
        float *d = dst + (i - m0) * kc;
        if (rsa == 1 && csa != 1) { /* transposed A: its stored rows are our columns */
            if (dtype == OLC_FLOAT) {
                const float *s = (const float *)a + pc * csa + i;
                for (int64_t k = 0; k < kc; ++k)
                    memcpy(d + k * mr, s + k * csa, (size_t)rows * sizeof(float));
                continue;
            }
            for (int64_t k = 0; k < kc; ++k)
                for (int64_t r = 0; r < rows; ++r)
                    d[k * mr + r] = olc_gemm_load(dtype, a, (pc + k) * csa + i + r);
            continue;
        }
        for (int64_t r = 0; r < rows; ++r) {
            int64_t base = (i + r) * rsa + pc * csa;
            if (dtype == OLC_FLOAT && csa == 1) {
                const float *s = (const float *)a + base;
                for (int64_t k = 0; k < kc; ++k) d[k * mr + r] = s[k];
            } else {
                for (int64_t k = 0; k < kc; ++k)
                    d[k * mr + r] = olc_gemm_load(dtype, a, base + k * csa);
            }
        }
    }
}

#if OLC_X86 && OLC_HAVE_AVX512
/* Transposes the 16 x 16 floats held in r[] in place: pairs of 32-bit
 * lanes, then 64-bit pairs, then 128-bit quarters twice. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_transpose16_regs_avx512(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]);
        __m512d t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    for (int h = 0; h < 16; h += 8)
        for (int i = 0; i < 4; ++i) {
            t[h + i] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0x88);
            t[h + i + 4] = _mm512_shuffle_f32x4(r[h + i], r[h + i + 4], 0xdd);
        }
    for (int i = 0; i < 8; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* dst[k * ldd + v] = src[v * lds + k] for a 16 x 16 block, in registers. */
static OLC_TARGET_AVX512 void olc_transpose16_avx512(const float *src, int64_t lds, float *dst,
                                                      int64_t ldd) {
    __m512 r[16];
    for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
    olc_transpose16_regs_avx512(r);
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
}
#endif

/* One packed panel: rows pc..pc+kc, columns j..j+nr of B, zero-padded.
 * A transposed B (rsb == 1) is read along its stored rows. */
static void olc_pack_b_panel(int level, int dtype, const void *b, int64_t rsb, int64_t csb,
                             int64_t N, int64_t pc, int64_t kc, int64_t j, int nr, float *dst) {
    int64_t cols = N - j < nr ? N - j : nr;
    if (rsb == 1 && csb != 1) {
        int64_t v0 = 0;
#if OLC_X86 && OLC_HAVE_AVX512
        if (level >= OLC_AVX512 && dtype == OLC_FLOAT) {
            /* Whole 16 x 16 blocks transposed in registers, the rest below. */
            int64_t kf = kc & ~(int64_t)15;
            for (; v0 + 16 <= cols; v0 += 16)
                for (int64_t k = 0; k < kf; k += 16)
                    olc_transpose16_avx512((const float *)b + (j + v0) * csb + pc + k, csb,
                                           dst + k * nr + v0, nr);
            for (int64_t v = 0; v < v0; ++v) {
                const float *s = (const float *)b + (j + v) * csb + pc;
                for (int64_t k = kf; k < kc; ++k) dst[k * nr + v] = s[k];
            }
        }
#endif
        for (int64_t v = v0; v < cols; ++v) {
            int64_t base = (j + v) * csb + pc;
            if (dtype == OLC_FLOAT) {
                const float *s = (const float *)b + base;
                for (int64_t k = 0; k < kc; ++k) dst[k * nr + v] = s[k];
            } else {
                for (int64_t k = 0; k < kc; ++k) dst[k * nr + v] = olc_gemm_load(dtype, b, base + k);
            }
        }
        for (int64_t k = 0; k < kc; ++k)
            for (int64_t v = cols; v < nr; ++v) dst[k * nr + v] = 0.0f;
        return;
    }
    for (int64_t k = 0; k < kc; ++k) {
        float *d = dst + k * nr;
        int64_t base = (pc + k) * rsb + j * csb;
        if (dtype == OLC_FLOAT && csb == 1) {
            memcpy(d, (const float *)b + base, (size_t)cols * sizeof(float));
        } else {
            for (int64_t v = 0; v < cols; ++v) d[v] = olc_gemm_load(dtype, b, base + v * csb);
        }
        for (int64_t v = cols; v < nr; ++v) d[v] = 0.0f;
    }
}

/* Rows pc..pc+kc, columns n0..n1 of B as consecutive panels (panel j at
 * dst + (j - n0) * kc).  A row-major float32 B is copied row by row, so
 * each stored row is read in one sequential sweep.  Without software
 * prefetch: asking for the rows 8 ahead (non-temporal) made every product
 * measured slower, B in cache or not (1 thread: MatMul 128x896 by a fed
 * 896x4864 9.0 -> 6.9-7.7 ms, 1024^3 13.8 -> 12.3-12.8; 1x1 Conv
 * 256 -> 64 at 56x56 1.03 -> 0.71). */
static void olc_pack_b_block(int level, int dtype, const void *b, int64_t rsb, int64_t csb,
                             int64_t N, int64_t pc, int64_t kc, int64_t n0, int64_t n1, int nr,
                             float *dst) {
    if (dtype != OLC_FLOAT || csb != 1) {
        for (int64_t j = n0; j < n1; j += nr)
            olc_pack_b_panel(level, dtype, b, rsb, csb, N, pc, kc, j, nr, dst + (j - n0) * kc);
        return;
    }
    /* Whole panels first, with copies of constant size the compiler turns
     * into a few vector moves (a memcpy call per 128 bytes costs ~10%). */
    int64_t nfull = n1 < N ? n1 : N - (N - n0) % nr;
    for (int64_t k = 0; k < kc; ++k) {
        const float *s = (const float *)b + (pc + k) * rsb;
        float *d = dst + k * nr;
        int64_t j = n0;
        if (nr == 32)
            for (; j < nfull; j += 32) memcpy(d + (j - n0) * kc, s + j, 32 * sizeof(float));
        else if (nr == 16)
            for (; j < nfull; j += 16) memcpy(d + (j - n0) * kc, s + j, 16 * sizeof(float));
        for (; j < n1; j += nr) {
            int64_t cols = N - j < nr ? N - j : nr;
            float *dj = d + (j - n0) * kc;
            memcpy(dj, s + j, (size_t)cols * sizeof(float));
            for (int64_t v = cols; v < nr; ++v) dj[v] = 0.0f;
        }
    }
}

/* Floats of one packed B (K x N) at a level. */
static int64_t olc_sgemm_packed_size(int level, int64_t K, int64_t N) {
    int64_t nr = olc_sgemm_nr(level);
    return K * ((N + nr - 1) / nr) * nr;
}

typedef struct {
    int level, dtype, nr;
    const void *b;
    const int64_t *b_offsets;
    int64_t rsb, csb, K, N, npan, npad, nkb;
    float *dst;
} olc_gemm_pack_b_job;

/* Task t: panel (matrix q, block pc, columns j). */
static void olc_gemm_pack_b_task(void *arg, ptrdiff_t t, int slot) {
    const olc_gemm_pack_b_job *p = (const olc_gemm_pack_b_job *)arg;
    int64_t q = t / (p->nkb * p->npan), rest = t % (p->nkb * p->npan);
    int64_t pc = (rest / p->npan) * OLC_GEMM_KC, j = (rest % p->npan) * p->nr;
    int64_t kc = p->K - pc < OLC_GEMM_KC ? p->K - pc : OLC_GEMM_KC;
    size_t es = p->dtype == OLC_FLOAT ? 4 : 2;
    const char *bq = (const char *)p->b + (size_t)p->b_offsets[q] * es;
    (void)slot;
    olc_pack_b_panel(p->level, p->dtype, bq, p->rsb, p->csb, p->N, pc, kc, j, p->nr,
                     p->dst + q * p->K * p->npad + pc * p->npad + j * kc);
}

/* Packs nb matrices B (matrix q starts at element b_offsets[q]) one after
 * the other, olc_sgemm_packed_size floats each.  Block pc of a matrix
 * starts at pc * Npad, its panel j at pc * Npad + j * kc. */
static void olc_sgemm_pack_b(int level, int dtype, int64_t nb, const void *b,
                             const int64_t *b_offsets, int64_t rsb, int64_t csb, int64_t K,
                             int64_t N, float *dst, int nthreads) {
    olc_gemm_pack_b_job job;
    job.level = olc_gemm_level(level);
    job.dtype = dtype;
    job.nr = olc_sgemm_nr(job.level);
    job.b = b;
    job.b_offsets = b_offsets;
    job.rsb = rsb;
    job.csb = csb;
    job.K = K;
    job.N = N;
    job.npan = (N + job.nr - 1) / job.nr;
    job.npad = job.npan * job.nr;
    job.nkb = (K + OLC_GEMM_KC - 1) / OLC_GEMM_KC;
    job.dst = dst;
    olc_parallel_for(nb * job.nkb * job.npan, olc_gemm_pack_b_task, &job, nthreads);
}

/* One micro-tile: rows i..i+rows and columns j..j+ncols of C over block
 * pc of K (kc rows of B, the packed panel). */
static inline void olc_sgemm_micro(const olc_sgemm_cfg *cfg, const float *ablock,
                                   const float *adirect, int64_t lda, const float *panel,
                                   int64_t pc, int64_t kc, int64_t i, int64_t rows, int64_t j,
                                   int64_t ncols, float *c, int64_t ldc, float alpha, int acc,
                                   const olc_ukr_epi *epi) {
    if (adirect != NULL)
        cfg->direct[rows](kc, adirect + i * lda + pc, lda, panel, c + i * ldc + j, ldc, alpha,
                          acc, ncols, epi);
    else
        cfg->ukr[rows](kc, ablock + i * kc, 1, panel, c + i * ldc + j, ldc, alpha, acc, ncols,
                       epi);
}

/* What a caller does to the finished outputs of matrix q, rows m0..m1 and
 * columns n0..n1 of C[q], on the thread that computed them (olc_sgemm_tile):
 * a bias, a residual, an activation.  With `fused`, regs says the same as
 * an olc_ukr_epi whose bias is C's row 0's and z the element (0, 0) of
 * matrix 0 (matrix q's at + q * zq), with C's row stride: the
 * micro-kernels then apply it in registers to whole panels, and fn does
 * the rest. */
typedef struct {
    void (*fn)(void *arg, int64_t q, int64_t m0, int64_t m1, int64_t n0, int64_t n1);
    void *arg;
    int fused;
    olc_ukr_epi regs;
    int64_t zq;
} olc_sgemm_epilogue;

/* One output tile: rows m0..m1, columns n0..n1 (both multiples of the
 * micro-tile).  ap is this matrix's packed A (block pc at pc * mpad, its
 * micro-panel i at + i * kc).  With bp NULL the tile packs its own block
 * of B (rows pc..pc+kc, its columns) into bbuf, used at once while still
 * in cache; else it reads the pre-packed B.  Where A is read in place, B
 * is float32 with unit column stride and the tile has at most
 * OLC_GEMM_STRIDED_ROWS rows, whole panels of B are read in place too
 * (a last partial panel packed): with few row blocks the copy is not
 * amortised (1x1 Conv 256 -> 64 at 56x56 in ResNet-50, 1 thread:
 * 1.06-1.10 -> 0.96-1.00 ms).  With many, packing wins where B comes
 * from L3: the copy streams whole rows, which the prefetcher follows (64
 * -> 256 at 56x56: 1.20 ms packed, 1.30-1.36 in place).  The bound was
 * 128 rows; at 64, whole models at 2 threads in one process, alternating:
 * MobileNet-V2 batch 8 38.4 -> 37.4 ms (its 16 -> 96 layer at 112x112),
 * DenseNet-121 batch 8 269 -> 262 ms (128-row 1x1 layers), at batch 1
 * and ResNet-50 the same within the noise.
 *
 * With an epilogue, the last block of k stores whole panels with it
 * applied in registers where it is `fused` (olc_ukr_epi), and each row
 * block's other outputs get epilogue->fn as soon as they are final.
 *
 * The order of the micro-tiles changes no sum.  The row blocks go outer:
 * one block of A (12 rows of kc floats) stays in L1 while the tile's
 * panels of B stream past it from L2 (a panel of 256 x 32 floats is 32 KB,
 * a Zen 4's whole L1, so it does not stay there for the next row block
 * either way), and each row block writes its rows of C left to right, a
 * few sequential streams the prefetcher follows.  The first row block
 * reads a pre-packed block of B from memory in one sequential stream.
 * Panels outer, with the next panel prefetched into L2 (the order before),
 * on a 2-core Zen 4 (ours under both orders in one process, alternating):
 * MatMul 128 x 896 by a constant 896 x 60000 1 thread 136.6 -> 127.9 ms,
 * 2 threads 71.0 -> 68.3; 128 x 896 x 4864 1 thread 11.17 -> 10.52; a
 * Qwen2-0.5B-shaped prefill of 128 tokens at 2 threads, float32 653 ->
 * 634 ms, int4 344 -> 316; ResNet-50 batch 1 79.3 -> 76.4 ms at 1 thread,
 * 45.5 -> 44.4 at 2; Winograd 3x3 convolutions 0-3 % faster. */
static void olc_sgemm_tile(const olc_sgemm_cfg *cfg, int dtype, const float *ap, int64_t mpad,
                           const float *adirect, int64_t lda, const float *bp, const void *b,
                           int64_t rsb, int64_t csb, int64_t K,
                           int64_t M, int64_t N, int64_t m0, int64_t m1, int64_t n0, int64_t n1,
                           float *c, int64_t ldc, float alpha, int accumulate, float *bbuf,
                           const olc_sgemm_epilogue *epilogue, int64_t q) {
    int mr = cfg->mr, nr = cfg->nr;
    int64_t npad = (N + nr - 1) / nr * nr;
    /* columns n0..nb read in place, nb..n1 packed */
    int64_t nb = n0;
    if (bp == NULL && adirect != NULL && dtype == OLC_FLOAT && csb == 1 && cfg->strided[1] != NULL
        && m1 - m0 <= OLC_GEMM_STRIDED_ROWS)
        nb = n1 < N ? n1 : n0 + (N - n0) / nr * nr;
    /* the whole panels whose last block of k applies the epilogue in
     * registers (alpha 1: the product alone is the sum, as stored) */
    const int fuse = epilogue != NULL && epilogue->fused && cfg->epi && alpha == 1.0f;
    const int64_t nfull = fuse ? n0 + (n1 - n0) / nr * nr : n0;
    for (int64_t pc = 0; pc < K; pc += OLC_GEMM_KC) {
        int64_t kc = K - pc < OLC_GEMM_KC ? K - pc : OLC_GEMM_KC;
        int acc = accumulate || pc > 0;
        const int last = pc + kc >= K;
        const float *ablock = ap != NULL ? ap + pc * mpad : NULL;
        const float *bk = nb > n0 ? (const float *)b + pc * rsb : NULL;
        /* the packed panel of column nb; the next ones follow it */
        const float *panels = bp != NULL ? bp + pc * npad + n0 * kc : bbuf;
        if (bp == NULL && nb < n1)
            olc_pack_b_block(cfg->level, dtype, b, rsb, csb, N, pc, kc, nb, n1, nr, bbuf);
        /* A read in place: the tile's rows in blocks of even height (49 =
         * 10+10+10+10+9, not 4 x 12 + 1), as many blocks.  A block of a few
         * rows waits on its sums' latency and reloads B as a full one does
         * (2 threads, in one process alternating: 1x1 256 -> 64 at 56x56
         * -6.5 %, 3x3 512 -> 512 at 7x7 -2 %; ResNet-50 -1.9 % at batch 1,
         * -1.2 % at batch 8).  Packed A comes in micro-panels of MR rows. */
        const int64_t span = m1 - m0, blocks = (span + mr - 1) / mr;
        int64_t rows;
        for (int64_t i = m0, blk = 0; i < m1; i += rows, ++blk) {
            rows = ap == NULL ? span / blocks + (blk < span % blocks) : (M - i < mr ? M - i : mr);
            olc_ukr_epi e;
            const olc_ukr_epi *ep = NULL;
            if (fuse && last) {
                e = epilogue->regs;
                if (e.bias != NULL) e.bias += i;
                if (e.z != NULL) e.z += q * epilogue->zq + i * e.ldz;
                ep = &e;
            }
            const float *zrow = ep != NULL ? ep->z : NULL;
            int64_t j = n0;
            for (; j < nb; j += nr) {
                if (zrow != NULL) e.z = zrow + j;
                cfg->strided[rows](kc, adirect + i * lda + pc, lda, bk + j, rsb,
                                   c + i * ldc + j, ldc, alpha, acc, j < nfull ? ep : NULL);
            }
            for (; j < n1; j += nr) {
                if (zrow != NULL) e.z = zrow + j;
                olc_sgemm_micro(cfg, ablock, adirect, lda, panels + (j - nb) * kc, pc, kc, i,
                                rows, j, N - j < nr ? N - j : nr, c, ldc, alpha, acc,
                                j < nfull ? ep : NULL);
            }
            /* the rest of the row block's outputs, while they are in L1 */
            if (epilogue != NULL && last && nfull < n1)
                epilogue->fn(epilogue->arg, q, i, i + rows, nfull, n1);
        }
    }
    if (epilogue != NULL && K == 0) epilogue->fn(epilogue->arg, q, m0, m1, n0, n1);
}

/* A row stride for n floats that spreads rows over the cache sets: whole
 * 64-byte lines, an odd number of them.  The micro-kernels read A's rows
 * in place, 12 at once; at a stride of a multiple of 4 KB (K = 1024 or
 * 2048 floats) all 12 fall in one set of an 8-way L1 and evict each other
 * (single thread on a Zen 4: 49 x 2048 by 2048 x 512 1.01 -> 0.97 ms,
 * 252 x 1024 by 1024 x 196 1.07 -> 0.96 ms). */
static inline int64_t olc_gemm_spread_ld(int64_t n) {
    int64_t lines = (n + 15) / 16;
    return (lines | 1) * 16;
}

/* Scratch floats on a cache-line boundary: a 64-byte vector load from a
 * packed panel then never straddles two lines. */
static float *olc_gemm_alloc(size_t n) {
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    return (float *)aligned_alloc(64, bytes ? bytes : 64);
}

/* Scratch of a parallel loop, one buffer a slot (olc_pool.h), each made by
 * the first task its slot runs: a worker that never wakes allocates
 * nothing.  olc_slot_buffer returns NULL without memory. */
static float **olc_slot_buffers(int nthreads) {
    return (float **)calloc((size_t)(nthreads > 1 ? nthreads : 1), sizeof(float *));
}

static float *olc_slot_buffer(float **bufs, int slot, size_t floats) {
    if (bufs[slot] == NULL) bufs[slot] = olc_gemm_alloc(floats);
    return bufs[slot];
}

static void olc_slot_buffers_free(float **bufs, int nthreads) {
    if (bufs == NULL) return;
    for (int s = 0; s < (nthreads > 1 ? nthreads : 1); ++s) free(bufs[s]);
    free(bufs);
}

/* Splits [0, n) into parts pieces of units of size unit: piece p is
 * [lo, hi).  Piece bounds only move work between tiles, never change
 * how an element is summed. */
static inline void olc_split(int64_t n, int64_t unit, int64_t parts, int64_t p, int64_t *lo,
                             int64_t *hi) {
    int64_t units = (n + unit - 1) / unit;
    int64_t u0 = units * p / parts, u1 = units * (p + 1) / parts;
    *lo = u0 * unit;
    *hi = u1 * unit < n ? u1 * unit : n;
}

/* Tile counts for a (batch, M, N) problem: up to OLC_GEMM_MC rows (a
 * block of packed A, 512 KB at most, stays in L2) by OLC_GEMM_NC columns.
 * With several threads, tiles get narrower until there are 8 per thread
 * (down to one micro-panel of B), so a thread that the OS delays on a
 * shared machine holds at most one narrow tile while the others take the
 * rest; 4 per thread where A is over OLC_GEMM_BIG_A, since every column
 * tile reads all of A, from L3 once A outgrows half of L2. */
static void olc_sgemm_tiling(const olc_sgemm_cfg *cfg, int64_t batch, int64_t M, int64_t N,
                             int64_t K, int nthreads, int64_t *mt, int64_t *nt) {
    int64_t mu = (M + cfg->mr - 1) / cfg->mr, nu = (N + cfg->nr - 1) / cfg->nr;
    /* in micro-tiles; rows rounded up so that M = 512 makes one tile */
    int64_t mc = (OLC_GEMM_MC + cfg->mr - 1) / cfg->mr, nc = OLC_GEMM_NC / cfg->nr;
    *mt = (mu + mc - 1) / mc;
    *nt = (nu + nc - 1) / nc;
    /* enough tiles to share: columns first; where they run out (a late
     * conv layer's 49 pixels by 512 channels made 4 tiles, the last one
     * column wide), rows in two, not more: each row tile packs its B again */
    if (nthreads > 1) {
        int64_t per = M * K * (int64_t)sizeof(float) > OLC_GEMM_BIG_A ? 4 : 8;
        while (batch * *mt * *nt < per * nthreads && *nt < nu) ++*nt;
        if (batch * *mt * *nt < per * nthreads && *mt == 1 && mu > 1) *mt = 2;
    }
}

typedef struct {
    olc_sgemm_cfg cfg;
    int dtype, direct, accumulate;
    const void *a, *b;
    const int64_t *a_offsets, *b_index, *b_offsets;
    const float *bp;
    int64_t rsa, csa, rsb, csb, M, N, K, ldc, c_stride;
    int64_t mt, nt, mu, mpad, nkb, apanels, bsize, ncmax;
    float *apack, *c, alpha;
    float **bbuf; /* B blocks, one buffer a slot */
    const olc_sgemm_epilogue *epilogue;
    int failed;
} olc_sgemm_job;

/* Packs A micro-panels 4t .. 4t+3 (each: matrix q, block pc, rows i). */
static void olc_sgemm_pack_a_task(void *arg, ptrdiff_t t, int slot) {
    const olc_sgemm_job *p = (const olc_sgemm_job *)arg;
    int64_t mr = p->cfg.mr, end = 4 * (int64_t)t + 4 < p->apanels ? 4 * (int64_t)t + 4 : p->apanels;
    size_t es = p->dtype == OLC_FLOAT ? 4 : 2;
    (void)slot;
    for (int64_t u = 4 * (int64_t)t; u < end; ++u) {
        int64_t q = u / (p->nkb * p->mu), rest = u % (p->nkb * p->mu);
        int64_t pc = (rest / p->mu) * OLC_GEMM_KC, i = (rest % p->mu) * mr;
        int64_t kc = p->K - pc < OLC_GEMM_KC ? p->K - pc : OLC_GEMM_KC;
        int64_t i1 = i + mr < p->M ? i + mr : p->M;
        olc_pack_a(p->dtype, (const char *)p->a + (size_t)p->a_offsets[q] * es, p->rsa, p->csa, i,
                   i1, pc, kc, (int)mr, p->apack + q * p->K * p->mpad + pc * p->mpad + i * kc);
    }
}

/* Output tile t: matrix q, rows and columns cut by olc_split. */
static void olc_sgemm_tile_task(void *arg, ptrdiff_t t, int slot) {
    olc_sgemm_job *p = (olc_sgemm_job *)arg;
    int64_t q = t / (p->mt * p->nt), rest = t % (p->mt * p->nt);
    int64_t m0, m1, n0, n1;
    olc_split(p->M, p->cfg.mr, p->mt, rest / p->nt, &m0, &m1);
    olc_split(p->N, p->cfg.nr, p->nt, rest % p->nt, &n0, &n1);
    if (m0 >= m1 || n0 >= n1) return;
    float *bbuf = NULL;
    if (p->bp == NULL
        && (bbuf = olc_slot_buffer(p->bbuf, slot, (size_t)p->ncmax * OLC_GEMM_KC)) == NULL) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    size_t es = p->dtype == OLC_FLOAT ? 4 : 2;
    const float *bq = p->bp != NULL ? p->bp + p->b_index[q] * p->bsize : NULL;
    const char *rq = p->bp != NULL ? NULL : (const char *)p->b + (size_t)p->b_offsets[q] * es;
    const float *aq = p->direct ? (const float *)p->a + p->a_offsets[q] : NULL;
    olc_sgemm_tile(&p->cfg, p->dtype, p->direct ? NULL : p->apack + q * p->K * p->mpad, p->mpad,
                   aq, p->rsa, bq, rq, p->rsb, p->csb, p->K, p->M, p->N, m0, m1, n0, n1,
                   p->c + q * p->c_stride, p->ldc, p->alpha, p->accumulate, bbuf, p->epilogue,
                   q);
}

/* C[q] = alpha * A[q] B[q] (+ C[q] when accumulate) for q < batch.  A[q]
 * starts at element a_offsets[q]; C[q] at q * c_stride.  B is either
 * pre-packed (bp not NULL: matrix q is packed B number b_index[q]) or raw
 * (B[q] starts at element b_offsets[q] of b, strides rsb, csb), packed
 * tile by tile.  A is packed once, first, by all threads; then they share
 * the tiles.  Returns -1 when scratch memory is missing. */
static int olc_sgemm_then(int level, int dtype, int64_t batch, const void *a,
                          const int64_t *a_offsets, int64_t rsa, int64_t csa, const float *bp,
                          const int64_t *b_index, const void *b, const int64_t *b_offsets,
                          int64_t rsb, int64_t csb, int64_t M, int64_t N, int64_t K, float *c,
                          int64_t ldc, int64_t c_stride, float alpha, int accumulate,
                          const olc_sgemm_epilogue *epilogue, int nthreads) {
    olc_sgemm_job p;
    p.epilogue = epilogue;
    olc_sgemm_config(level, &p.cfg);
    if (M == 0 || N == 0 || batch == 0) return 0;
    olc_sgemm_tiling(&p.cfg, batch, M, N, K, nthreads, &p.mt, &p.nt);
    int64_t nu = (N + p.cfg.nr - 1) / p.cfg.nr;
    p.mu = (M + p.cfg.mr - 1) / p.cfg.mr;
    p.mpad = p.mu * p.cfg.mr;
    p.nkb = (K + OLC_GEMM_KC - 1) / OLC_GEMM_KC;
    p.bsize = olc_sgemm_packed_size(level, K, N);
    p.ncmax = ((nu + p.nt - 1) / p.nt) * p.cfg.nr;
    p.dtype = dtype;
    p.accumulate = accumulate;
    p.a = a;
    p.b = b;
    p.a_offsets = a_offsets;
    p.b_index = b_index;
    p.b_offsets = b_offsets;
    p.bp = bp;
    p.rsa = rsa;
    p.csa = csa;
    p.rsb = rsb;
    p.csb = csb;
    p.M = M;
    p.N = N;
    p.K = K;
    p.c = c;
    p.ldc = ldc;
    p.c_stride = c_stride;
    p.alpha = alpha;
    p.failed = 0;
    p.apack = NULL;
    /* float32 A with unit column stride is read in place where the level
     * has such kernels; else it is packed once, first, by all threads. */
    p.direct = dtype == OLC_FLOAT && csa == 1 && p.cfg.direct[1] != NULL;
    p.apanels = p.direct ? 0 : batch * p.nkb * p.mu;
    if (!p.direct && (p.apack = olc_gemm_alloc((size_t)(batch * K * p.mpad))) == NULL) return -1;
    p.bbuf = bp != NULL ? NULL : olc_slot_buffers(nthreads);
    if (bp == NULL && p.bbuf == NULL) {
        free(p.apack);
        return -1;
    }
    olc_parallel_for((p.apanels + 3) / 4, olc_sgemm_pack_a_task, &p, nthreads);
    olc_parallel_for(batch * p.mt * p.nt, olc_sgemm_tile_task, &p, nthreads);
    olc_slot_buffers_free(p.bbuf, nthreads);
    free(p.apack);
    return p.failed ? -1 : 0;
}

/* olc_sgemm_then without an epilogue. */
static int olc_sgemm(int level, int dtype, int64_t batch, const void *a,
                     const int64_t *a_offsets, int64_t rsa, int64_t csa, const float *bp,
                     const int64_t *b_index, const void *b, const int64_t *b_offsets,
                     int64_t rsb, int64_t csb, int64_t M, int64_t N, int64_t K, float *c,
                     int64_t ldc, int64_t c_stride, float alpha, int accumulate, int nthreads) {
    return olc_sgemm_then(level, dtype, batch, a, a_offsets, rsa, csa, bp, b_index, b, b_offsets,
                          rsb, csb, M, N, K, c, ldc, c_stride, alpha, accumulate, NULL, nthreads);
}

/* ---- M = 1, B row-major float32: stream B once ---- */

/* c[n0..n1) = alpha * a B[:, n0..n1) (+ c); B rows are rsb floats apart.
 * Columns go in blocks of OLC_GEMV_NB whose sums stay in L1; each pass
 * over a block reads 8 rows of B, 8 sequential streams the prefetcher
 * follows.  Every column is summed by fused multiply-adds in k order, so
 * its value does not depend on the block or thread it falls in. */
#define OLC_GEMV_NB 2048

typedef void (*olc_sgemv_fn)(int64_t K, const float *a, const float *b, int64_t rsb, int64_t n0,
                             int64_t n1, float *c, float alpha, int acc);

static void olc_sgemv_scalar(int64_t K, const float *a, const float *b, int64_t rsb, int64_t n0,
                             int64_t n1, float *c, float alpha, int acc) {
    float t[OLC_GEMV_NB];
    for (int64_t jb = n0; jb < n1; jb += OLC_GEMV_NB) {
        int64_t w = n1 - jb < OLC_GEMV_NB ? n1 - jb : OLC_GEMV_NB;
        for (int64_t j = 0; j < w; ++j) t[j] = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
            const float *bk = b + k * rsb + jb;
            float ak = a[k];
            for (int64_t j = 0; j < w; ++j) t[j] += ak * bk[j];
        }
        for (int64_t j = 0; j < w; ++j) c[jb + j] = acc ? c[jb + j] + alpha * t[j] : alpha * t[j];
    }
}

#if OLC_X86
static OLC_TARGET_AVX2 void olc_sgemv_avx2(int64_t K, const float *a, const float *b, int64_t rsb,
                                           int64_t n0, int64_t n1, float *c, float alpha, int acc) {
    float t[OLC_GEMV_NB];
    for (int64_t jb = n0; jb < n1; jb += OLC_GEMV_NB) {
        int64_t w = n1 - jb < OLC_GEMV_NB ? n1 - jb : OLC_GEMV_NB, wv = w & ~(int64_t)7;
        memset(t, 0, (size_t)w * sizeof(float));
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            const float *r = b + k * rsb + jb;
            __m256 a0 = _mm256_set1_ps(a[k]), a1 = _mm256_set1_ps(a[k + 1]);
            __m256 a2 = _mm256_set1_ps(a[k + 2]), a3 = _mm256_set1_ps(a[k + 3]);
            __m256 a4 = _mm256_set1_ps(a[k + 4]), a5 = _mm256_set1_ps(a[k + 5]);
            __m256 a6 = _mm256_set1_ps(a[k + 6]), a7 = _mm256_set1_ps(a[k + 7]);
            for (int64_t j = 0; j < wv; j += 8) {
                __m256 x = _mm256_loadu_ps(t + j);
                x = _mm256_fmadd_ps(a0, _mm256_loadu_ps(r + j), x);
                x = _mm256_fmadd_ps(a1, _mm256_loadu_ps(r + rsb + j), x);
                x = _mm256_fmadd_ps(a2, _mm256_loadu_ps(r + 2 * rsb + j), x);
                x = _mm256_fmadd_ps(a3, _mm256_loadu_ps(r + 3 * rsb + j), x);
                x = _mm256_fmadd_ps(a4, _mm256_loadu_ps(r + 4 * rsb + j), x);
                x = _mm256_fmadd_ps(a5, _mm256_loadu_ps(r + 5 * rsb + j), x);
                x = _mm256_fmadd_ps(a6, _mm256_loadu_ps(r + 6 * rsb + j), x);
                x = _mm256_fmadd_ps(a7, _mm256_loadu_ps(r + 7 * rsb + j), x);
                _mm256_storeu_ps(t + j, x);
            }
            for (int64_t j = wv; j < w; ++j)
                for (int q = 0; q < 8; ++q) t[j] = fmaf(a[k + q], r[q * rsb + j], t[j]);
        }
        for (; k < K; ++k) {
            const float *r = b + k * rsb + jb;
            __m256 a0 = _mm256_set1_ps(a[k]);
            for (int64_t j = 0; j < wv; j += 8)
                _mm256_storeu_ps(t + j, _mm256_fmadd_ps(a0, _mm256_loadu_ps(r + j),
                                                        _mm256_loadu_ps(t + j)));
            for (int64_t j = wv; j < w; ++j) t[j] = fmaf(a[k], r[j], t[j]);
        }
        for (int64_t j = 0; j < w; ++j)
            c[jb + j] = acc ? fmaf(alpha, t[j], c[jb + j]) : alpha * t[j];
    }
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static OLC_TARGET_AVX512 void olc_sgemv_avx512(int64_t K, const float *a, const float *b,
                                               int64_t rsb, int64_t n0, int64_t n1, float *c,
                                               float alpha, int acc) {
    float t[OLC_GEMV_NB];
    for (int64_t jb = n0; jb < n1; jb += OLC_GEMV_NB) {
        int64_t w = n1 - jb < OLC_GEMV_NB ? n1 - jb : OLC_GEMV_NB;
        memset(t, 0, (size_t)w * sizeof(float));
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) {
            const float *r = b + k * rsb + jb;
            __m512 a0 = _mm512_set1_ps(a[k]), a1 = _mm512_set1_ps(a[k + 1]);
            __m512 a2 = _mm512_set1_ps(a[k + 2]), a3 = _mm512_set1_ps(a[k + 3]);
            __m512 a4 = _mm512_set1_ps(a[k + 4]), a5 = _mm512_set1_ps(a[k + 5]);
            __m512 a6 = _mm512_set1_ps(a[k + 6]), a7 = _mm512_set1_ps(a[k + 7]);
            for (int64_t j = 0; j < w; j += 16) {
                __mmask16 m = w - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (w - j)) - 1);
                __m512 x = _mm512_maskz_loadu_ps(m, t + j);
                x = _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(m, r + j), x);
                x = _mm512_fmadd_ps(a1, _mm512_maskz_loadu_ps(m, r + rsb + j), x);
                x = _mm512_fmadd_ps(a2, _mm512_maskz_loadu_ps(m, r + 2 * rsb + j), x);
                x = _mm512_fmadd_ps(a3, _mm512_maskz_loadu_ps(m, r + 3 * rsb + j), x);
                x = _mm512_fmadd_ps(a4, _mm512_maskz_loadu_ps(m, r + 4 * rsb + j), x);
                x = _mm512_fmadd_ps(a5, _mm512_maskz_loadu_ps(m, r + 5 * rsb + j), x);
                x = _mm512_fmadd_ps(a6, _mm512_maskz_loadu_ps(m, r + 6 * rsb + j), x);
                x = _mm512_fmadd_ps(a7, _mm512_maskz_loadu_ps(m, r + 7 * rsb + j), x);
                _mm512_mask_storeu_ps(t + j, m, x);
            }
        }
        for (; k < K; ++k) {
            const float *r = b + k * rsb + jb;
            __m512 a0 = _mm512_set1_ps(a[k]);
            for (int64_t j = 0; j < w; j += 16) {
                __mmask16 m = w - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (w - j)) - 1);
                _mm512_mask_storeu_ps(t + j, m, _mm512_fmadd_ps(a0, _mm512_maskz_loadu_ps(m, r + j),
                                                                _mm512_maskz_loadu_ps(m, t + j)));
            }
        }
        for (int64_t j = 0; j < w; ++j)
            c[jb + j] = acc ? fmaf(alpha, t[j], c[jb + j]) : alpha * t[j];
    }
}
#endif

static olc_sgemv_fn olc_sgemv_select(int level) {
    return OLC_LEVEL_FN(olc_gemm_level(level), olc_sgemv);
}

typedef struct {
    olc_sgemv_fn fn;
    const float *a, *b;
    float *c, alpha;
    int64_t K, N, rsb, parts;
    int acc;
} olc_sgemv_job;

static void olc_sgemv_task(void *arg, ptrdiff_t t, int slot) {
    const olc_sgemv_job *p = (const olc_sgemv_job *)arg;
    int64_t lo, hi;
    (void)slot;
    olc_split(p->N, 16, p->parts, t, &lo, &hi);
    if (lo < hi) p->fn(p->K, p->a, p->b, p->rsb, lo, hi, p->c, p->alpha, p->acc);
}

/* Column ranges of 16 columns and more, 4 a thread: as wide as that
 * allows (long sequential runs in each row of B), and a thread the OS runs
 * late holds up a quarter of its share, which the others take over. */
static void olc_sgemv(int level, int64_t K, int64_t N, const float *a, const float *b,
                      int64_t rsb, float *c, float alpha, int acc, int nthreads) {
    olc_sgemv_job job = {olc_sgemv_select(level), a, b, c, alpha, K, N, rsb, 1, acc};
    if (nthreads > 1) job.parts = 4 * (int64_t)nthreads;
    if (job.parts > (N + 15) / 16) job.parts = (N + 15) / 16;
    olc_parallel_for(job.parts, olc_sgemv_task, &job, nthreads);
}

/* ---- double and integers: a blocked loop the compiler vectorises ---- */

/* Rows i0..i1 of C (row-major, N columns) = A B, A strided, B row-major:
 * olc_gemm_<type>_<level> from olc_gemm_generic.h, one per level and per
 * arithmetic type (double; int32 and uint32 in uint32, int64 and uint64 in
 * uint64: unsigned arithmetic wraps around, and gives signed integers the
 * same bits). */
typedef void (*olc_gemm_generic_fn)(const void *a, int64_t rsa, int64_t csa, const void *b,
                                    void *c, int64_t N, int64_t K, int64_t i0, int64_t i1);

#define OLC_BODY "engines/gemm/olc_gemm_generic.h"
#include "common/olc_each_level.h"

static olc_gemm_generic_fn olc_gemm_generic_select(int dtype, int level) {
    return OLC_LEVEL_FN(olc_gemm_level(level), olc_gemm_generic_pick)(dtype);
}

typedef struct {
    olc_gemm_generic_fn fn;
    const char *a, *b;
    char *c;
    const int64_t *a_offsets, *b_offsets;
    int64_t rsa, csa, M, N, K, mb;
    size_t es;
} olc_gemm_generic_job;

/* Rows 16 (t % mb) .. + 16 of matrix t / mb. */
static void olc_gemm_generic_task(void *arg, ptrdiff_t t, int slot) {
    const olc_gemm_generic_job *p = (const olc_gemm_generic_job *)arg;
    int64_t q = t / p->mb, i0 = (t % p->mb) * 16, i1 = i0 + 16 < p->M ? i0 + 16 : p->M;
    (void)slot;
    p->fn(p->a + (size_t)p->a_offsets[q] * p->es, p->rsa, p->csa,
          p->b + (size_t)p->b_offsets[q] * p->es, p->c + (size_t)(q * p->M * p->N) * p->es, p->N,
          p->K, i0, i1);
}

/* C[q] = A[q] B[q] for q < batch (B[q] row-major at b_offsets[q]); work is
 * split over blocks of 16 rows, each summed in one fixed order. */
static int olc_gemm_generic(int level, int dtype, int64_t batch, const void *a,
                            const int64_t *a_offsets, int64_t rsa, int64_t csa, const void *b,
                            const int64_t *b_offsets, int64_t M, int64_t N, int64_t K, void *c,
                            int nthreads) {
    olc_gemm_generic_job job;
    job.fn = olc_gemm_generic_select(dtype, level);
    if (job.fn == NULL) return -1;
    job.a = (const char *)a;
    job.b = (const char *)b;
    job.c = (char *)c;
    job.a_offsets = a_offsets;
    job.b_offsets = b_offsets;
    job.rsa = rsa;
    job.csa = csa;
    job.M = M;
    job.N = N;
    job.K = K;
    job.mb = (M + 15) / 16;
    job.es = (dtype == OLC_INT32 || dtype == OLC_UINT32) ? 4 : 8;
    olc_parallel_for(batch * job.mb, olc_gemm_generic_task, &job, nthreads);
    return 0;
}

/* ---- FMA peak: independent register-only FMA chains, no memory ---- */

#if OLC_X86 && OLC_HAVE_AVX512
/* 24 chains of 16-lane FMAs: more than latency x ports (4 x 2) chains, so
 * the loop is limited only by FMA throughput.  Returns a value derived
 * from the chains so the compiler keeps them. */
static OLC_TARGET_AVX512 float olc_fma_peak_avx512(int64_t iters) {
    __m512 x[24];
    __m512 m = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
    for (int v = 0; v < 24; ++v) x[v] = _mm512_set1_ps((float)v);
    for (int64_t i = 0; i < iters; ++i) {
        _Pragma("GCC unroll 24") for (int v = 0; v < 24; ++v) x[v] = _mm512_fmadd_ps(x[v], m, d);
    }
    __m512 s = x[0];
    for (int v = 1; v < 24; ++v) s = _mm512_add_ps(s, x[v]);
    return _mm512_reduce_add_ps(s);
}
#endif
#if OLC_X86
static OLC_TARGET_AVX2 float olc_fma_peak_avx2(int64_t iters) {
    __m256 x[12];
    __m256 m = _mm256_set1_ps(0.999999f), d = _mm256_set1_ps(1e-7f);
    for (int v = 0; v < 12; ++v) x[v] = _mm256_set1_ps((float)v);
    for (int64_t i = 0; i < iters; ++i) {
        _Pragma("GCC unroll 12") for (int v = 0; v < 12; ++v) x[v] = _mm256_fmadd_ps(x[v], m, d);
    }
    __m256 s = x[0];
    for (int v = 1; v < 12; ++v) s = _mm256_add_ps(s, x[v]);
    float o[8];
    _mm256_storeu_ps(o, s);
    return o[0] + o[7];
}
#endif

/* Runs the FMA loop of a level; returns its lanes x chains (the FMAs per
 * iteration, each 2 flops), or 0 when this build or level has none. */
static int olc_fma_peak(int level, int64_t iters, float *sink) {
    level = olc_gemm_level(level);
#if OLC_X86 && OLC_HAVE_AVX512
    if (level >= OLC_AVX512) { *sink += olc_fma_peak_avx512(iters); return 16 * 24; }
#endif
#if OLC_X86
    if (level == OLC_AVX2) { *sink += olc_fma_peak_avx2(iters); return 8 * 12; }
#endif
    (void)iters; (void)sink;
    return 0;
}

#endif
