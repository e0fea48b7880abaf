/* 8-bit integer matrix products with int32 results (MatMulInteger and the
 * product inside QLinearMatMul).
 *
 * Every type pair is brought to unsigned A times signed B, the one form
 * the dot-product instructions take: a signed A is shifted by +128
 * (a' = a + 128), an unsigned B by -128 (b' = b - 128).  With the zero
 * points shifted the same way (za' = za + 128, zb' = zb - 128 where
 * applied),
 *
 *   sum_k (a - za)(b - zb) = sum a'b' - zb' sum a' - za' sum b' + K za' zb'
 *
 * so the hot loop computes the raw sum a'b' and the epilogue folds in the
 * row sums of A (taken while packing A) and the column sums of B (taken
 * while packing B).  Everything is modulo 2^32, as int32 accumulation is.
 *
 * Packing: B in panels of 16 columns, K padded to a multiple of 4 with
 * zeros.  AVX-512 VNNI reads 4 k of one column as a group (vpdpbusd sums
 * four u8 x s8 products into an int32, no intermediate saturation); the
 * other levels read pairs (k, k+1) sign-extended to int16 and use vpmaddwd,
 * exact as well (vpmaddubsw would saturate at 2 x 255 x 128).  A rows are
 * copied with K padded the same way (u8 for VNNI, int16 otherwise) and M
 * padded to the micro-kernel's row count.  Micro-kernels: 8 rows x 32
 * columns (two panels) for VNNI, 8 x 16 for AVX-512, 6 x 16 for AVX2, 4 x 16
 * for the portable C loop; at the VNNI level, where the CPU has AMX-INT8
 * and Linux grants the tile state, 32 x 32 blocks of tdpbusd on the same
 * panels (A then padded to 64 in K), from 16 rows of A.  Packing B
 * interleaves rows and sums a pair-layout panel's columns with SSE2, the
 * x86-64 baseline, and has a plain C twin elsewhere.
 *
 * Threads take (batch, column panel, row block) tiles (AMX: (batch, 128
 * rows, two panels)), each writing its own output elements: results do
 * not depend on the thread count.
 *
 * The level (olc_i8_level: the SIMD level, VNNI kept) picks the layout and
 * the micro-kernel; the dot-product steps are those of olc_int8_dot.h,
 * shared with MatMulNBits' int8 engine; the epilogue and the
 * requantization are plain C loops compiled per level
 * (olc_gemm_int8_rows.h).
 *
 * API: olc_i8_packed_size, olc_i8_pack_b, olc_i8_gemm (olc_i8_gemm_float:
 * float32 output, scale and bias in the epilogue), olc_i8_requantize
 * (see olc_gemm_int8.pxd).
 */
#ifndef OLC_GEMM_INT8_H
#define OLC_GEMM_INT8_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_pool.h"
#include "engines/gemm_int8/olc_int8_dot.h"

#define OLC_I8_NR 16
#define OLC_I8_LDACC (2 * OLC_I8_NR) /* row stride of a micro-kernel's results */

/* The level the engine runs at: the SIMD level, VNNI kept where the CPU
 * has it (olc_int8_level); the packed layout of B depends on it. */
static int olc_i8_level(int level) { return olc_int8_level(level); }

static int olc_i8_mr(int level) {
    return level == OLC_AVX2 ? 6 : level == OLC_SCALAR ? 4 : 8;
}

static inline int64_t olc_i8_kpad(int64_t K) { return (K + 3) & ~(int64_t)3; }
static inline int64_t olc_i8_panels(int64_t N) { return (N + OLC_I8_NR - 1) / OLC_I8_NR; }

#if OLC_X86 && OLC_HAVE_AVX512
/* Column sums of a packed VNNI panel: a dot product with ones. */
OLC_TARGET_AVX512_VNNI
static void olc_i8_colsum_avx512vnni(const int8_t *panel, int64_t Kp, int32_t *s) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    for (int64_t j = 0; j < Kp; j += 4)
        acc = olc_i8_dot4_avx512vnni(acc, ones,
                                     _mm512_loadu_si512((const void *)(panel + j * OLC_I8_NR)));
    _mm512_storeu_si512((void *)s, acc);
}
#endif

/* Bytes of one packed K x N matrix B (the same at every level). */
static int64_t olc_i8_packed_size(int64_t K, int64_t N) {
    return olc_i8_panels(N) * OLC_I8_NR * olc_i8_kpad(K);
}

typedef struct {
    const uint8_t *b;
    const int64_t *b_offsets;
    int64_t K, N;
    int b_signed, level;
    int8_t *dst;
    int32_t *colsum;
} olc_i8_pack_b_job;

/* Task t: four panels of one matrix (each row's 64-byte line read once). */
static void olc_i8_pack_b_task(void *arg, ptrdiff_t t, int slot) {
    const olc_i8_pack_b_job *job = (const olc_i8_pack_b_job *)arg;
    const uint8_t *b = job->b;
    const int64_t *b_offsets = job->b_offsets;
    const int64_t K = job->K, N = job->N;
    const int level = job->level;
    int8_t *dst = job->dst;
    int32_t *colsum = job->colsum;
    const int64_t Kp = olc_i8_kpad(K), np_ = olc_i8_panels(N), nquads = (np_ + 3) / 4;
    const int group = level == OLC_AVX512_VNNI ? 4 : 2;
    const uint8_t flip = job->b_signed ? 0 : 0x80; /* u8 -> s8: b - 128 */
    (void)slot;
    const int64_t q = t / nquads, p0 = t % nquads * 4;
    const int64_t p1 = p0 + 4 < np_ ? p0 + 4 : np_;
    const uint8_t *src = b + b_offsets[q];
    int8_t *matrix = dst + q * np_ * OLC_I8_NR * Kp;
    int64_t whole = p1; /* panels with 16 real columns */
    if (p1 * OLC_I8_NR > N) whole = p1 - 1;
    int64_t k = 0;
#if OLC_X86
    /* Whole groups of whole panels: interleave rows with SSE2 (the
     * x86-64 baseline), 16 columns at a time. */
    const __m128i f = _mm_set1_epi8((char)flip);
    for (; k + group <= K; k += group) {
        for (int64_t p = p0; p < whole; p++) {
            const uint8_t *row = src + k * N + p * OLC_I8_NR;
            int8_t *g = matrix + p * OLC_I8_NR * Kp + k * OLC_I8_NR;
            const __m128i r0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)row), f);
            const __m128i r1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(row + N)), f);
            const __m128i p01l = _mm_unpacklo_epi8(r0, r1), p01h = _mm_unpackhi_epi8(r0, r1);
            if (group == 2) {
                _mm_storeu_si128((__m128i *)g, p01l);
                _mm_storeu_si128((__m128i *)(g + 16), p01h);
                continue;
            }
            const __m128i r2 =
                _mm_xor_si128(_mm_loadu_si128((const __m128i *)(row + 2 * N)), f);
            const __m128i r3 =
                _mm_xor_si128(_mm_loadu_si128((const __m128i *)(row + 3 * N)), f);
            const __m128i p23l = _mm_unpacklo_epi8(r2, r3), p23h = _mm_unpackhi_epi8(r2, r3);
            _mm_storeu_si128((__m128i *)g, _mm_unpacklo_epi16(p01l, p23l));
            _mm_storeu_si128((__m128i *)(g + 16), _mm_unpackhi_epi16(p01l, p23l));
            _mm_storeu_si128((__m128i *)(g + 32), _mm_unpacklo_epi16(p01h, p23h));
            _mm_storeu_si128((__m128i *)(g + 48), _mm_unpackhi_epi16(p01h, p23h));
        }
    }
#endif
    for (int64_t p = p0; p < p1; p++) {
        const int64_t n0 = p * OLC_I8_NR;
        const int64_t nc = N - n0 < OLC_I8_NR ? N - n0 : OLC_I8_NR;
        int8_t *panel = matrix + p * OLC_I8_NR * Kp;
        /* The rest (all of it without SSE2, or a partial panel), zero
         * padding, and the column sums of b'. */
        int64_t from = p < whole ? k : 0;
        memset(panel + from * OLC_I8_NR, 0, (size_t)((Kp - from) * OLC_I8_NR));
        for (int64_t j = from; j < K; j++) {
            const uint8_t *row = src + j * N + n0;
            int8_t *g = panel + (j / group) * OLC_I8_NR * group + (j % group);
            for (int64_t c = 0; c < nc; c++) g[c * group] = (int8_t)(row[c] ^ flip);
        }
        /* Column sums from the packed panel: sequential and in cache. */
        int32_t s[OLC_I8_NR] = {0};
#if OLC_X86 && OLC_HAVE_AVX512
        if (level == OLC_AVX512_VNNI)
            olc_i8_colsum_avx512vnni(panel, Kp, s);
        else
#endif
        if (group == 4)
            for (int64_t j = 0; j < Kp; j += 4)
                for (int c = 0; c < OLC_I8_NR; c++)
                    s[c] += panel[j * OLC_I8_NR + 4 * c] + panel[j * OLC_I8_NR + 4 * c + 1] +
                            panel[j * OLC_I8_NR + 4 * c + 2] + panel[j * OLC_I8_NR + 4 * c + 3];
        else {
            int64_t j = 0;
#if OLC_X86
            /* SSE2: a pair row is 32 bytes, (k, k+1) of columns 0..15;
             * sign-extended halves added as int16, then widened. */
            __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
            for (; j < Kp; j += 2) {
                const __m128i v0 = _mm_loadu_si128((const __m128i *)(panel + j * OLC_I8_NR));
                const __m128i v1 =
                    _mm_loadu_si128((const __m128i *)(panel + j * OLC_I8_NR + 16));
                const __m128i p0 = _mm_add_epi16(_mm_srai_epi16(_mm_slli_epi16(v0, 8), 8),
                                                 _mm_srai_epi16(v0, 8));
                const __m128i p1 = _mm_add_epi16(_mm_srai_epi16(_mm_slli_epi16(v1, 8), 8),
                                                 _mm_srai_epi16(v1, 8));
                a0 = _mm_add_epi32(a0, _mm_srai_epi32(_mm_unpacklo_epi16(p0, p0), 16));
                a1 = _mm_add_epi32(a1, _mm_srai_epi32(_mm_unpackhi_epi16(p0, p0), 16));
                a2 = _mm_add_epi32(a2, _mm_srai_epi32(_mm_unpacklo_epi16(p1, p1), 16));
                a3 = _mm_add_epi32(a3, _mm_srai_epi32(_mm_unpackhi_epi16(p1, p1), 16));
            }
            _mm_storeu_si128((__m128i *)s, a0);
            _mm_storeu_si128((__m128i *)(s + 4), a1);
            _mm_storeu_si128((__m128i *)(s + 8), a2);
            _mm_storeu_si128((__m128i *)(s + 12), a3);
#endif
            for (; j < Kp; j += 2)
                for (int c = 0; c < OLC_I8_NR; c++)
                    s[c] += panel[j * OLC_I8_NR + 2 * c] + panel[j * OLC_I8_NR + 2 * c + 1];
        }
        memcpy(colsum + q * np_ * OLC_I8_NR + n0, s, sizeof(s));
    }
}

/* Packs nb matrices of B (row-major K x N, element offsets b_offsets) into
 * dst (nb * olc_i8_packed_size bytes) and their column sums of b' into
 * colsum (nb * panels * 16 int32), in the layout of the engine's level. */
static void olc_i8_pack_b(const uint8_t *b, const int64_t *b_offsets, int64_t nb, int64_t K,
                          int64_t N, int b_signed, int8_t *dst, int32_t *colsum, int level,
                          int nthreads) {
    olc_i8_pack_b_job job = {b, b_offsets, K, N, b_signed, olc_i8_level(level), dst, colsum};
    olc_parallel_for(nb * ((olc_i8_panels(N) + 3) / 4), olc_i8_pack_b_task, &job, nthreads);
}

/* Rows of packed A a task of olc_i8_pack_a and olc_i8_requantize. */
#define OLC_I8_ROWS 16

typedef struct {
    const uint8_t *a;
    const int64_t *a_offsets;
    int64_t M, K, Mp, total, ld;
    int a_signed, level;
    void *dst;
    int32_t *rowsum;
} olc_i8_pack_a_job;

/* Rows OLC_I8_ROWS task .. of the batch * Mp padded rows. */
static void olc_i8_pack_a_task(void *arg, ptrdiff_t task, int slot) {
    const olc_i8_pack_a_job *job = (const olc_i8_pack_a_job *)arg;
    const uint8_t *a = job->a;
    const int64_t *a_offsets = job->a_offsets;
    const int64_t M = job->M, K = job->K, Mp = job->Mp, Kp = job->ld;
    void *dst = job->dst;
    int32_t *rowsum = job->rowsum;
    const uint8_t flip = job->a_signed ? 0x80 : 0; /* s8 -> u8: a + 128 */
    const int wide = job->level != OLC_AVX512_VNNI;
    const int64_t t1 = (task + 1) * OLC_I8_ROWS < job->total ? (task + 1) * OLC_I8_ROWS
                                                              : job->total;
    (void)slot;
    for (int64_t t = task * OLC_I8_ROWS; t < t1; t++) {
        const int64_t q = t / Mp, m = t % Mp;
        int32_t s = 0;
        if (wide) {
            int16_t *row = (int16_t *)dst + t * Kp;
            int64_t k = 0;
            if (m < M) {
                const uint8_t *src = a + a_offsets[q] + m * K;
                for (; k < K; k++) {
                    row[k] = (int16_t)(uint8_t)(src[k] ^ flip);
                    s += row[k];
                }
            }
            for (; k < Kp; k++) row[k] = 0;
        } else { /* dst NULL: A is read in place, its row sums only */
            uint8_t *row = dst != NULL ? (uint8_t *)dst + t * Kp : NULL;
            int64_t k = 0;
            if (m < M) {
                const uint8_t *src = a + a_offsets[q] + m * K;
#if OLC_X86
                /* 16 bytes a step; psadbw sums each 8 (SSE2, the baseline) */
                const __m128i f = _mm_set1_epi8((char)flip), zero = _mm_setzero_si128();
                __m128i sum = zero;
                for (; k + 16 <= K; k += 16) {
                    const __m128i v =
                        _mm_xor_si128(_mm_loadu_si128((const __m128i *)(src + k)), f);
                    if (row != NULL) _mm_storeu_si128((__m128i *)(row + k), v);
                    sum = _mm_add_epi64(sum, _mm_sad_epu8(v, zero));
                }
                s = (int32_t)(_mm_cvtsi128_si64(sum) +
                              _mm_cvtsi128_si64(_mm_unpackhi_epi64(sum, sum)));
#endif
                for (; k < K; k++) {
                    const uint8_t v = (uint8_t)(src[k] ^ flip);
                    if (row != NULL) row[k] = v;
                    s += v;
                }
            }
            if (row != NULL)
                for (; k < Kp; k++) row[k] = 0;
        }
        if (m < M) rowsum[q * M + m] = s;
    }
}

/* Copies A (batch matrices of M x K at a_offsets) to dst with a' = a (+128
 * when signed), rows padded to Mp and K to ld (>= K) with zeros, as u8
 * (VNNI) or int16; rowsum gets sum_k a' per (batch, row).  dst NULL (VNNI,
 * A read in place): the row sums only. */
static void olc_i8_pack_a(int level, int a_signed, int64_t batch, const uint8_t *a,
                          const int64_t *a_offsets, int64_t M, int64_t K, int64_t Mp,
                          int64_t ld, void *dst, int32_t *rowsum, int nthreads) {
    olc_i8_pack_a_job job = {a, a_offsets, M, K, Mp, batch * Mp, ld, a_signed, level, dst,
                             rowsum};
    olc_parallel_for((job.total + OLC_I8_ROWS - 1) / OLC_I8_ROWS, olc_i8_pack_a_task, &job,
                     nthreads);
}

/* A finished tile's way out of the VNNI micro-kernel's registers, for two
 * whole panels (32 columns): y = acc - zb' u_r - w_r colsum (modulo 2^32,
 * as olc_i8_epilogue), stored as int32, or as float32 y * m + bias (each
 * product rounded before the add, as olc_i8_epilogue_float).  Converting in
 * registers saves storing the sums and reading them back in a C loop: 13 %
 * of a 384 x 768 by 768 x 3072 product at one thread. */
typedef struct {
    const uint32_t *u, *w;   /* per row: rowsum - K za', za' */
    const uint32_t *zb, *cs; /* per column */
    const float *m, *bias;   /* per column (float output; bias may be NULL) */
    void *y;                 /* the tile's first output element */
    int64_t rows, ldy;       /* rows <= 8 */
    int to_float, stream;    /* stream: rows on 64-byte boundaries, streaming stores */
} olc_i8_out;

/* ---- micro-kernels: acc[MR][16] = A rows (packed) x one B panel ---- */

static void olc_i8_kernel_scalar(const int16_t *a, int64_t Kp, const int8_t *b,
                                 int32_t *acc) {
    enum { MR = 4 };
    for (int r = 0; r < MR; r++)
        for (int c = 0; c < OLC_I8_NR; c++) acc[r * OLC_I8_LDACC + c] = 0;
    for (int64_t kp = 0; kp < Kp / 2; kp++) {
        const int8_t *g = b + kp * 2 * OLC_I8_NR;
        for (int r = 0; r < MR; r++) {
            const int32_t a0 = a[r * Kp + 2 * kp], a1 = a[r * Kp + 2 * kp + 1];
            for (int c = 0; c < OLC_I8_NR; c++)
                acc[r * OLC_I8_LDACC + c] += a0 * g[2 * c] + a1 * g[2 * c + 1];
        }
    }
}

#if OLC_X86
OLC_TARGET_AVX2
static void olc_i8_kernel_avx2(const int16_t *a, int64_t Kp, const int8_t *b, int32_t *acc) {
    enum { MR = 6 };
    __m256i c0[MR], c1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm256_setzero_si256();
    for (int64_t kp = 0; kp < Kp / 2; kp++) {
        const int8_t *g = b + kp * 2 * OLC_I8_NR;
        /* 16 columns x (k, k+1), sign-extended: columns 0-7 and 8-15. */
        const __m256i lo = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)g));
        const __m256i hi = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(g + 16)));
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            int32_t pair;
            memcpy(&pair, a + r * Kp + 2 * kp, 4);
            const __m256i av = _mm256_set1_epi32(pair);
            c0[r] = olc_i8_madd16_avx2(c0[r], lo, av);
            c1[r] = olc_i8_madd16_avx2(c1[r], hi, av);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        _mm256_storeu_si256((__m256i *)(acc + r * OLC_I8_LDACC), c0[r]);
        _mm256_storeu_si256((__m256i *)(acc + r * OLC_I8_LDACC + 8), c1[r]);
    }
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
OLC_TARGET_AVX512
static void olc_i8_kernel_avx512(const int16_t *a, int64_t Kp, const int8_t *b,
                                 int32_t *acc) {
    enum { MR = 8 };
    __m512i c[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) c[r] = _mm512_setzero_si512();
    for (int64_t kp = 0; kp < Kp / 2; kp++) {
        const __m512i bv =
            _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)(b + kp * 2 * OLC_I8_NR)));
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            int32_t pair;
            memcpy(&pair, a + r * Kp + 2 * kp, 4);
            c[r] = olc_i8_madd16_avx512(c[r], bv, _mm512_set1_epi32(pair));
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) _mm512_storeu_si512((void *)(acc + r * OLC_I8_LDACC), c[r]);
}

/* Two adjacent panels (32 columns) at once: 16 accumulators, and each
 * broadcast of A feeds two vpdpbusd.  The row loops are unrolled early
 * (pragma): unrolled late, GCC 12 keeps the accumulators in memory across
 * the loop and copies every one around each vpdpbusd (1.35x slower).
 * out NULL: the raw sums go to acc; else (two panels) out says where the
 * finished rows go.  No contraction: the float output rounds the product
 * before adding the bias. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
OLC_TARGET_AVX512_VNNI
static void olc_i8_kernel_avx512vnni(const uint8_t *a, int64_t Kp, const int8_t *b, int two,
                                     int32_t *acc, const olc_i8_out *out) {
    enum { MR = 8 };
    __m512i c0[MR], c1[MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) c0[r] = c1[r] = _mm512_setzero_si512();
    const int8_t *b1 = b + OLC_I8_NR * Kp;
    /* The output's lines are fetched for writing while the sums are made:
     * stored after the loop, each row's 128 bytes started a read of lines
     * not in cache and the stores waited (384 x 768 by 768 x 3072, one
     * thread: 0.90 of the time without). */
    if (out != NULL && !out->stream)
        for (int r = 0; r < out->rows; r++) {
            const char *y = (const char *)out->y + r * out->ldy * 4;
            __builtin_prefetch(y, 1, 3);
            __builtin_prefetch(y + 64, 1, 3);
            __builtin_prefetch(y + 127, 1, 3); /* a row not on a line boundary */
        }
    if (two) {
        for (int64_t kg = 0; kg < Kp / 4; kg++) {
            const __m512i bv0 = _mm512_loadu_si512((const void *)(b + kg * 4 * OLC_I8_NR));
            const __m512i bv1 = _mm512_loadu_si512((const void *)(b1 + kg * 4 * OLC_I8_NR));
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                int32_t quad;
                memcpy(&quad, a + r * Kp + 4 * kg, 4);
                const __m512i av = _mm512_set1_epi32(quad);
                c0[r] = olc_i8_dot4_avx512vnni(c0[r], av, bv0);
                c1[r] = olc_i8_dot4_avx512vnni(c1[r], av, bv1);
            }
        }
    } else {
        for (int64_t kg = 0; kg < Kp / 4; kg++) {
            const __m512i bv0 = _mm512_loadu_si512((const void *)(b + kg * 4 * OLC_I8_NR));
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) {
                int32_t quad;
                memcpy(&quad, a + r * Kp + 4 * kg, 4);
                c0[r] = olc_i8_dot4_avx512vnni(c0[r], _mm512_set1_epi32(quad), bv0);
            }
        }
    }
    if (out == NULL) {
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            _mm512_storeu_si512((void *)(acc + r * OLC_I8_LDACC), c0[r]);
            _mm512_storeu_si512((void *)(acc + r * OLC_I8_LDACC + OLC_I8_NR), c1[r]);
        }
        return;
    }
    const __m512i zb0 = _mm512_loadu_si512((const void *)out->zb);
    const __m512i zb1 = _mm512_loadu_si512((const void *)(out->zb + OLC_I8_NR));
    const __m512i cs0 = _mm512_loadu_si512((const void *)out->cs);
    const __m512i cs1 = _mm512_loadu_si512((const void *)(out->cs + OLC_I8_NR));
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        if (r == out->rows) break;
        const __m512i ur = _mm512_set1_epi32((int)out->u[r]);
        const __m512i wr = _mm512_set1_epi32((int)out->w[r]);
        const __m512i y0 = _mm512_sub_epi32(
            _mm512_sub_epi32(c0[r], _mm512_mullo_epi32(zb0, ur)), _mm512_mullo_epi32(wr, cs0));
        const __m512i y1 = _mm512_sub_epi32(
            _mm512_sub_epi32(c1[r], _mm512_mullo_epi32(zb1, ur)), _mm512_mullo_epi32(wr, cs1));
        if (!out->to_float) {
            int32_t *y = (int32_t *)out->y + r * out->ldy;
            _mm512_storeu_si512((void *)y, y0);
            _mm512_storeu_si512((void *)(y + OLC_I8_NR), y1);
            continue;
        }
        __m512 f0 = _mm512_mul_ps(_mm512_cvtepi32_ps(y0), _mm512_loadu_ps(out->m));
        __m512 f1 = _mm512_mul_ps(_mm512_cvtepi32_ps(y1), _mm512_loadu_ps(out->m + OLC_I8_NR));
        if (out->bias != NULL) {
            f0 = _mm512_add_ps(f0, _mm512_loadu_ps(out->bias));
            f1 = _mm512_add_ps(f1, _mm512_loadu_ps(out->bias + OLC_I8_NR));
        }
        float *y = (float *)out->y + r * out->ldy;
        if (out->stream) {
            _mm512_stream_ps(y, f0);
            _mm512_stream_ps(y + OLC_I8_NR, f1);
        } else {
            _mm512_storeu_ps(y, f0);
            _mm512_storeu_ps(y + OLC_I8_NR, f1);
        }
    }
}
#pragma GCC pop_options
#endif

/* Runs the level's micro-kernel on MR packed rows starting at row m. */
static void olc_i8_tile(int level, const void *ap, int64_t m, int64_t Kp, const int8_t *bp,
                        int two, int32_t *acc) {
    switch (level) {
#if OLC_X86
    case OLC_AVX2:
        olc_i8_kernel_avx2((const int16_t *)ap + m * Kp, Kp, bp, acc);
        return;
#endif
#if OLC_X86 && OLC_HAVE_AVX512
    case OLC_AVX512:
        olc_i8_kernel_avx512((const int16_t *)ap + m * Kp, Kp, bp, acc);
        return;
    case OLC_AVX512_VNNI:
        olc_i8_kernel_avx512vnni((const uint8_t *)ap + m * Kp, Kp, bp, two, acc, NULL);
        return;
#endif
    default:
        olc_i8_kernel_scalar((const int16_t *)ap + m * Kp, Kp, bp, acc);
    }
}
#define OLC_BODY "engines/gemm_int8/olc_gemm_int8_rows.h"
#include "common/olc_each_level.h"

/* ---- AMX (tdpbusd on 16 x 64-byte tiles), where the CPU and OS allow ----
 *
 * The VNNI panel of B is already an AMX tile: 16 k-groups of 4 bytes x 16
 * columns are 16 rows of 64 bytes.  A is packed as u8 rows with K padded
 * to 64 (one tile step).  A block is 32 rows x 32 columns: tiles 0-3 the
 * int32 results, 4-5 two 16-row slices of A, 6-7 two panels of B.  Same
 * exact int32 sums as vpdpbusd (no saturation, modulo 2^32). */
#if OLC_X86 && OLC_HAVE_AVX512 && defined(__linux__)
#define OLC_I8_HAVE_AMX 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define OLC_TARGET_AMX __attribute__((target("amx-tile,amx-int8,avx512f")))
#else
#define OLC_I8_HAVE_AMX 0
#endif

#define OLC_I8_AMX_MB 32  /* rows of a block */
#define OLC_I8_AMX_KB 64  /* k of one tile step */
#define OLC_I8_AMX_KC 768 /* k of one pass over a task's row blocks: B's two panels
                             (2 x 16 x 768 bytes) stay in L1 */
#define OLC_I8_AMX_CH 4   /* row blocks a task (128 rows): more is slower at M = 3072
                             (each task's output rows span more pages) */
#define OLC_I8_MR_MAX OLC_I8_AMX_MB

static int olc_i8_amx_state = -1;

/* Whether the engine may use AMX-INT8: the CPU has it (CPUID 7.0 EDX bits
 * 24, 25) and Linux grants this process the tile state (arch_prctl
 * ARCH_REQ_XCOMP_PERM, asked once).  ONNX_LIGHT_CPU_INT8_AMX=0 keeps the
 * VNNI micro-kernel (read once per process). */
static int olc_i8_amx_usable(void) {
    int state = __atomic_load_n(&olc_i8_amx_state, __ATOMIC_ACQUIRE);
    if (state >= 0) return state;
    state = 0;
#if OLC_I8_HAVE_AMX
    unsigned eax, ebx, ecx, edx;
    const char *env = getenv("ONNX_LIGHT_CPU_INT8_AMX");
    if (!(env && env[0] == '0') && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) &&
        (edx >> 24 & 1) && (edx >> 25 & 1) &&
        syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0)
        state = 1;
#endif
    __atomic_store_n(&olc_i8_amx_state, state, __ATOMIC_RELEASE);
    return state;
}

#if OLC_I8_HAVE_AMX
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} olc_i8_tilecfg;

/* All eight tiles 16 rows x 64 bytes.  ldtilecfg (which also zeroes the
 * tiles) is slow: skipped when the thread's configuration is already this
 * one (sttilecfg; another AMX user of the thread may have changed it).
 * Tiles stay configured after a task, as every kernel starts by zeroing or
 * loading its result tiles. */
OLC_TARGET_AMX
static void olc_i8_amx_config(void) {
    olc_i8_tilecfg cfg, cur;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    /* Inline asm that names the whole structs: GCC 12 drops the stores
     * before its _tile_loadconfig as dead. */
    __asm__ volatile("sttilecfg %0" : "=m"(cur));
    if (memcmp(&cur, &cfg, sizeof(cfg)) == 0) return;
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

/* acc (32 rows x 2 panels, row stride OLC_I8_LDACC) += A rows a (row
 * stride lda) x B panels b0, b1 over tile steps [kb0, kb1).  first: start
 * from zero instead of acc.  tail0/tail1 (or NULL): the last step's B
 * tiles when K does not fill it (zero-padded copies). */
OLC_TARGET_AMX
static void olc_i8_kernel_amx(const uint8_t *a, int64_t lda, const int8_t *b0,
                              const int8_t *b1, const int8_t *tail0, const int8_t *tail1,
                              int64_t kb0, int64_t kb1, int64_t kfull, int first, int two,
                              int32_t *acc) {
    const int64_t ldc = OLC_I8_LDACC * sizeof(int32_t);
    int32_t *acc1 = acc + 16 * OLC_I8_LDACC;
    if (first) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    } else {
        _tile_loadd(0, acc, ldc);
        _tile_loadd(1, acc + 16, ldc);
        _tile_loadd(2, acc1, ldc);
        _tile_loadd(3, acc1 + 16, ldc);
    }
    const uint8_t *a1 = a + 16 * lda;
    for (int64_t kb = kb0; kb < kb1; kb++) {
        const int full = kb < kfull;
        _tile_loadd(4, a + kb * OLC_I8_AMX_KB, lda);
        _tile_loadd(6, full ? b0 + kb * 16 * OLC_I8_AMX_KB : tail0, OLC_I8_AMX_KB);
        _tile_loadd(5, a1 + kb * OLC_I8_AMX_KB, lda);
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(2, 5, 6);
        if (two) {
            _tile_loadd(7, full ? b1 + kb * 16 * OLC_I8_AMX_KB : tail1, OLC_I8_AMX_KB);
            _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(3, 5, 7);
        }
    }
    _tile_stored(0, acc, ldc);
    _tile_stored(1, acc + 16, ldc);
    _tile_stored(2, acc1, ldc);
    _tile_stored(3, acc1 + 16, ldc);
}
#endif

typedef void (*olc_i8_epilogue_fn)(const int32_t *, int64_t, int64_t, const uint32_t *,
                                   const uint32_t *, const uint32_t *, const uint32_t *,
                                   int32_t *, int64_t);
typedef void (*olc_i8_epilogue_float_fn)(const int32_t *, int64_t, int64_t, const uint32_t *,
                                         const uint32_t *, const uint32_t *, const uint32_t *,
                                         const float *, const float *, float *, int64_t);

typedef struct {
    const void *ap;
    const int8_t *bp;
    const int32_t *colsum, *rowsum, *za, *zb;
    const int64_t *b_index;
    int64_t za_bs, za_rs, zb_bs, zb_cs, M, N, K, Kp, lda, Mp, np_, nmb, ntiles, nchunks, cmb, group;
    size_t elem;
    int level, mr, width, amx;
    olc_i8_epilogue_fn epilogue;
    int32_t *y;
    /* float output (fy non-NULL): fy = (float)y * fm + fbias */
    olc_i8_epilogue_float_fn epilogue_float;
    const float *fm, *fbias;
    int64_t fm_bs, fm_cs;
    float *fy;
    /* full tiles of fy go out through this (olc_i8_stream_rows_<level>);
     * NULL: stored as they are computed */
    void (*stream)(const float *tile, int64_t rows, int64_t cols, float *dst, int64_t ld);
} olc_i8_gemm_job;

/* The per-column terms of one tile of B panels (columns n0 .., at most
 * span), set once for all its row blocks. */
typedef struct {
    int64_t n0, cols;
    const uint32_t *cs;
    const float *m, *bias;
    uint32_t zb[OLC_I8_LDACC];
    float mv[OLC_I8_LDACC];
} olc_i8_cols;

static void olc_i8_cols_set(const olc_i8_gemm_job *p, int64_t q, int64_t n0, int64_t span,
                            olc_i8_cols *c) {
    c->n0 = n0;
    c->cols = p->N - n0 < span ? p->N - n0 : span;
    c->cs = (const uint32_t *)(p->colsum + p->b_index[q] * p->np_ * OLC_I8_NR + n0);
    for (int64_t j = 0; j < c->cols; j++)
        c->zb[j] = (uint32_t)p->zb[q * p->zb_bs + (n0 + j) * p->zb_cs];
    if (!p->fy) return;
    const float *m = p->fm + q * p->fm_bs + n0 * p->fm_cs;
    if (p->fm_cs) {
        c->m = m;
    } else { /* one multiplier: spread over the tile */
        for (int64_t j = 0; j < c->cols; j++) c->mv[j] = m[0];
        c->m = c->mv;
    }
    c->bias = p->fbias ? p->fbias + n0 : NULL;
}

/* Float outputs of at least this many bytes go to memory with streaming
 * stores, whole cache lines that skip the read a store to a line not in
 * cache starts with: the next node does not find such an output in cache
 * anyway.  On a 2-core Zen 4 (L3 32 MB), DynamicQuantizeMatMul at 2
 * threads, 3072 x 768 by 768 x 3072 (37.7 MB of output) 19.3-19.5 -> 18.1-18.3
 * ms, 1024 x 768 by 768 x 3072 (12.6 MB) 6.6-6.9 -> 6.0-6.4, 3072 x 768 by
 * 768 x 768 (9.4 MB) 5.2-5.6 -> 4.7-5.2 (docs/ARCHITECTURE.md). */
#define OLC_I8_STREAM_BYTES (8 << 20)

/* The rows of a finished tile (row stride OLC_I8_LDACC, 64-byte aligned)
 * to dst, rows ld floats apart, with streaming stores: cols is 16 or 32
 * and every dst row starts on a 64-byte boundary.  olc_i8_stream_fence
 * orders them before the task reports done. */
#if OLC_X86
OLC_TARGET_AVX2 static void olc_i8_stream_rows_avx2(const float *tile, int64_t rows,
                                                    int64_t cols, float *dst, int64_t ld) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c += 8)
            _mm256_stream_ps(dst + r * ld + c, _mm256_load_ps(tile + r * OLC_I8_LDACC + c));
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
OLC_TARGET_AVX512 static void olc_i8_stream_rows_avx512(const float *tile, int64_t rows,
                                                        int64_t cols, float *dst, int64_t ld) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c += 16)
            _mm512_stream_ps(dst + r * ld + c, _mm512_load_ps(tile + r * OLC_I8_LDACC + c));
}
#endif

static void olc_i8_stream_fence(void) {
#if OLC_X86
    _mm_sfence();
#endif
}

/* The per-row terms of the block of rows from m0 of matrix q: u = rowsum -
 * K za', w = za' (unsigned: wraps like int32 sums).  Returns its rows. */
static int64_t olc_i8_row_terms(const olc_i8_gemm_job *p, int64_t q, int64_t m0, uint32_t *u,
                                uint32_t *w) {
    const int64_t M = p->M, K = p->K;
    const int64_t rows = M - m0 < p->mr ? M - m0 : p->mr;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t zar = p->za[q * p->za_bs + (m0 + r) * p->za_rs];
        u[r] = (uint32_t)(p->rowsum[q * M + m0 + r] - K * zar);
        w[r] = (uint32_t)zar;
    }
    return rows;
}

/* Writes one finished block (rows from m0 of matrix q, the columns of c;
 * raw sums in acc, row stride OLC_I8_LDACC) with the zero-point terms,
 * modulo 2^32 as the int32 sums:
 * y = acc - zb' (rowsum - K za') - za' colsum; as int32, or converted to
 * float while in registers (a full tile of a streamed output through a
 * buffer in L1, then streamed). */
static void olc_i8_finish(const olc_i8_gemm_job *p, int64_t q, int64_t m0,
                          const olc_i8_cols *c, const int32_t *acc) {
    const int64_t M = p->M, N = p->N;
    uint32_t u[OLC_I8_MR_MAX], w[OLC_I8_MR_MAX];
    const int64_t rows = olc_i8_row_terms(p, q, m0, u, w);
    float *fy = p->fy != NULL ? p->fy + (q * M + m0) * N + c->n0 : NULL;
    if (p->stream != NULL && c->cols == p->width * OLC_I8_NR) {
        float tile[OLC_I8_MR_MAX * OLC_I8_LDACC] __attribute__((aligned(64)));
        p->epilogue_float(acc, rows, c->cols, u, w, c->zb, c->cs, c->m, c->bias, tile,
                          OLC_I8_LDACC);
        p->stream(tile, rows, c->cols, fy, N);
        return;
    }
    if (fy != NULL)
        p->epilogue_float(acc, rows, c->cols, u, w, c->zb, c->cs, c->m, c->bias, fy, N);
    else
        p->epilogue(acc, rows, c->cols, u, w, c->zb, c->cs, p->y + (q * M + m0) * N + c->n0,
                    N);
}

#if OLC_X86 && OLC_HAVE_AVX512
/* The block of rows from m0 of matrix q times two whole B panels (the
 * columns of c) on the VNNI micro-kernel, finished in its registers and
 * written where olc_i8_finish writes it (a streamed output straight from
 * the registers). */
static void olc_i8_finish_vnni(const olc_i8_gemm_job *p, int64_t q, int64_t m0,
                               const olc_i8_cols *c, const uint8_t *a, const int8_t *b) {
    uint32_t u[OLC_I8_MR_MAX], w[OLC_I8_MR_MAX];
    olc_i8_out out;
    out.rows = olc_i8_row_terms(p, q, m0, u, w);
    out.u = u;
    out.w = w;
    out.zb = c->zb;
    out.cs = c->cs;
    out.m = c->m;
    out.bias = c->bias;
    out.ldy = p->N;
    out.to_float = p->fy != NULL;
    out.stream = p->stream != NULL;
    out.y = out.to_float ? (void *)(p->fy + (q * p->M + m0) * p->N + c->n0)
                         : (void *)(p->y + (q * p->M + m0) * p->N + c->n0);
    olc_i8_kernel_avx512vnni(a, p->Kp, b, 1, NULL, &out);
}
#endif

/* Task t: (matrix q, group of tiles of B panels, chunk of cmb row blocks
 * (128 rows)), chunks innermost as olc_i8_gemm_amx_task; in a task each
 * tile's panels stay in L1 across the chunk's row blocks. */
static void olc_i8_gemm_task(void *arg, ptrdiff_t t, int slot) {
    const olc_i8_gemm_job *p = (const olc_i8_gemm_job *)arg;
    const int64_t Kp = p->Kp, np_ = p->np_;
    const int64_t ngroups = (p->ntiles + p->group - 1) / p->group;
    const int64_t q = t / (ngroups * p->nchunks), g = t / p->nchunks % ngroups;
    const int64_t mb0 = t % p->nchunks * p->cmb;
    const int64_t mb1 = mb0 + p->cmb < p->nmb ? mb0 + p->cmb : p->nmb;
    const int64_t j1 = (g + 1) * p->group < p->ntiles ? (g + 1) * p->group : p->ntiles;
    const int64_t panel_bytes = OLC_I8_NR * Kp;
    const char *ap = (const char *)p->ap + (size_t)(q * p->Mp * Kp) * p->elem;
    const int8_t *bm = p->bp + p->b_index[q] * np_ * panel_bytes;
    int32_t acc[8 * OLC_I8_LDACC];
    (void)slot;
    olc_i8_cols c;
    for (int64_t j = g * p->group; j < j1; j++) {
        const int64_t pn = j * p->width;
        const int two = p->width == 2 && pn + 1 < np_;
        olc_i8_cols_set(p, q, pn * OLC_I8_NR, (two ? 2 : 1) * OLC_I8_NR, &c);
        for (int64_t mb = mb0; mb < mb1; mb++) {
#if OLC_X86 && OLC_HAVE_AVX512
            if (p->level == OLC_AVX512_VNNI && c.cols == 2 * OLC_I8_NR) {
                olc_i8_finish_vnni(p, q, mb * p->mr, &c, (const uint8_t *)ap + mb * p->mr * Kp,
                                   bm + pn * panel_bytes);
                continue;
            }
#endif
            olc_i8_tile(p->level, ap, mb * p->mr, Kp, bm + pn * panel_bytes, two, acc);
            olc_i8_finish(p, q, mb * p->mr, &c, acc);
        }
    }
    if (p->stream != NULL) olc_i8_stream_fence();
}

#if OLC_I8_HAVE_AMX
/* Row blocks [mb0, mb1) of matrix q times the two B panels from pn.  K
 * goes in passes of OLC_I8_AMX_KC over the row blocks (the two panels'
 * slice in L1), the partial sums kept in acc between passes; with one
 * pass each block is finished at once. */
static void olc_i8_amx_panels(const olc_i8_gemm_job *p, int64_t q, int64_t pn, int64_t mb0,
                              int64_t mb1) {
    const int64_t Kp = p->Kp, np_ = p->np_, lda = p->lda, bq = p->b_index[q];
    const int two = pn + 1 < np_;
    const int64_t panel_bytes = OLC_I8_NR * Kp;
    const int8_t *b0 = p->bp + bq * np_ * panel_bytes + pn * panel_bytes;
    const int8_t *b1 = b0 + panel_bytes;
    /* Tile steps: whole ones of B, and lda / 64 in all (the last one padded). */
    const int64_t kfull = Kp / OLC_I8_AMX_KB, nkb = lda / OLC_I8_AMX_KB;
    const int64_t kc = OLC_I8_AMX_KC / OLC_I8_AMX_KB;
    olc_i8_cols c;
    olc_i8_cols_set(p, q, pn * OLC_I8_NR, (two ? 2 : 1) * OLC_I8_NR, &c);
    int32_t acc[OLC_I8_AMX_CH][OLC_I8_AMX_MB * OLC_I8_LDACC];
    int8_t tail[2][16 * OLC_I8_AMX_KB] __attribute__((aligned(64)));
    const int8_t *t0 = NULL, *t1 = NULL;
    if (kfull < nkb) { /* the last step's k-groups of B, zero-padded */
        const size_t have = (size_t)(Kp - kfull * OLC_I8_AMX_KB) * OLC_I8_NR;
        memset(tail, 0, sizeof(tail));
        memcpy(tail[0], b0 + kfull * 16 * OLC_I8_AMX_KB, have);
        if (two) memcpy(tail[1], b1 + kfull * 16 * OLC_I8_AMX_KB, have);
        t0 = tail[0];
        t1 = tail[1];
    }
    const uint8_t *a = (const uint8_t *)p->ap + (size_t)(q * p->Mp * lda);
    if (nkb <= kc) {
        for (int64_t mb = mb0; mb < mb1; mb++) {
            olc_i8_kernel_amx(a + mb * OLC_I8_AMX_MB * lda, lda, b0, b1, t0, t1, 0, nkb, kfull,
                              1, two, acc[0]);
            olc_i8_finish(p, q, mb * OLC_I8_AMX_MB, &c, acc[0]);
        }
        return;
    }
    for (int64_t k0 = 0; k0 < nkb; k0 += kc) {
        const int64_t k1 = k0 + kc < nkb ? k0 + kc : nkb;
        for (int64_t mb = mb0; mb < mb1; mb++)
            olc_i8_kernel_amx(a + mb * OLC_I8_AMX_MB * lda, lda, b0, b1, t0, t1, k0, k1, kfull,
                              k0 == 0, two, acc[mb - mb0]);
    }
    for (int64_t mb = mb0; mb < mb1; mb++)
        olc_i8_finish(p, q, mb * OLC_I8_AMX_MB, &c, acc[mb - mb0]);
}

/* Task t: (matrix q, group of `group` panel pairs, chunk of OLC_I8_AMX_CH
 * row blocks), chunks innermost: consecutive tasks share the group's
 * panels of B (in L2) while A streams (MLAS' order; with B streaming
 * instead, M = 3072 ran 1.4x slower). */
static void olc_i8_gemm_amx_task(void *arg, ptrdiff_t t, int slot) {
    const olc_i8_gemm_job *p = (const olc_i8_gemm_job *)arg;
    const int64_t ngroups = (p->ntiles + p->group - 1) / p->group;
    const int64_t q = t / (ngroups * p->nchunks), g = t / p->nchunks % ngroups;
    const int64_t mb0 = t % p->nchunks * p->cmb;
    const int64_t mb1 = mb0 + p->cmb < p->nmb ? mb0 + p->cmb : p->nmb;
    const int64_t j1 = (g + 1) * p->group < p->ntiles ? (g + 1) * p->group : p->ntiles;
    (void)slot;
    olc_i8_amx_config();
    for (int64_t j = g * p->group; j < j1; j++) olc_i8_amx_panels(p, q, 2 * j, mb0, mb1);
    if (p->stream != NULL) olc_i8_stream_fence();
}
#endif

/* Whether a product of M rows at this SIMD level runs on AMX tiles: from
 * 16 rows (one tile of A), at the VNNI level, where AMX is usable. */
static int olc_i8_uses_amx(int level, int64_t M) {
    return olc_i8_level(level) == OLC_AVX512_VNNI && M >= 16 && olc_i8_amx_usable();
}

/* The product into y (int32) or, fy non-NULL, into fy (float32) through
 * the float epilogue: see olc_i8_gemm and olc_i8_gemm_float. */
static int olc_i8_gemm_run(const uint8_t *a, const int64_t *a_offsets, int64_t batch,
                           const int8_t *bp, const int32_t *colsum, const int64_t *b_index,
                           const int32_t *za, int64_t za_bs, int64_t za_rs, const int32_t *zb,
                           int64_t zb_bs, int64_t zb_cs, int32_t *y, int64_t M, int64_t N,
                           int64_t K, int a_signed, int level, int nthreads, float *fy,
                           const float *fm, int64_t fm_bs, int64_t fm_cs, const float *fbias) {
    olc_i8_gemm_job p;
    p.level = level = olc_i8_level(level);
    p.amx = olc_i8_uses_amx(level, M); /* else the VNNI kernel */
    p.mr = p.amx ? OLC_I8_AMX_MB : olc_i8_mr(level);
    p.Kp = olc_i8_kpad(K);
    p.lda = p.amx ? (K + OLC_I8_AMX_KB - 1) / OLC_I8_AMX_KB * OLC_I8_AMX_KB : p.Kp;
    p.np_ = olc_i8_panels(N);
    p.nmb = (M + p.mr - 1) / p.mr;
    /* row blocks a chunk: 128 rows */
    p.cmb = p.amx ? OLC_I8_AMX_CH : (128 + p.mr - 1) / p.mr;
    p.nchunks = (p.nmb + p.cmb - 1) / p.cmb;
    p.Mp = p.nmb * p.mr;
    p.elem = level == OLC_AVX512_VNNI ? 1 : 2;
    /* Where the packed layout is A itself (VNNI bytes, unsigned, whole
     * 4-byte groups and row blocks, the matrices one after the other),
     * the kernel reads A in place: packing copied 2.4 MB for a 3072 x 768
     * A, 5 % of a DynamicQuantizeMatMul by 768 x 768 at 2 threads. */
    int in_place = level == OLC_AVX512_VNNI && !p.amx && !a_signed && K % 4 == 0
                && p.Mp == M;
    for (int64_t q = 0; q < batch && in_place; q++) in_place = a_offsets[q] == q * M * K;
    size_t abytes = (size_t)(batch * p.Mp * p.lda) * p.elem;
    void *ap = in_place ? NULL : aligned_alloc(64, (abytes + 63) & ~(size_t)63);
    int32_t *rowsum = (int32_t *)malloc((size_t)(batch * M + 1) * sizeof(int32_t));
    if ((!in_place && !ap) || !rowsum) {
        free(ap);
        free(rowsum);
        return -1;
    }
    olc_i8_pack_a(level, a_signed, batch, a, a_offsets, M, K, p.Mp, p.lda, ap, rowsum,
                  nthreads);
    p.epilogue = OLC_LEVEL_FN(olc_build_level(level), olc_i8_epilogue);
    /* VNNI and AMX take two panels a tile. */
    p.width = level == OLC_AVX512_VNNI ? 2 : 1;
    p.ntiles = (p.np_ + p.width - 1) / p.width;
    p.ap = in_place ? (const void *)a : ap;
    p.bp = bp;
    p.colsum = colsum;
    p.rowsum = rowsum;
    p.za = za;
    p.zb = zb;
    p.b_index = b_index;
    p.za_bs = za_bs;
    p.za_rs = za_rs;
    p.zb_bs = zb_bs;
    p.zb_cs = zb_cs;
    p.M = M;
    p.N = N;
    p.K = K;
    p.y = y;
    p.fy = fy;
    /* whole 64-byte lines: every row starts on one, tiles of 16 or 32 */
    p.stream = NULL;
#if OLC_X86
    if (fy != NULL && level >= OLC_AVX2 && N % 16 == 0 && (uintptr_t)fy % 64 == 0
        && batch * M * N * (int64_t)sizeof(float) >= OLC_I8_STREAM_BYTES)
        p.stream = olc_i8_stream_rows_avx2;
#if OLC_HAVE_AVX512
    if (p.stream != NULL && level >= OLC_AVX512) p.stream = olc_i8_stream_rows_avx512;
#endif
#endif
    p.fm = fm;
    p.fbias = fbias;
    p.fm_bs = fm_bs;
    p.fm_cs = fm_cs;
    p.epilogue_float = OLC_LEVEL_FN(olc_build_level(level), olc_i8_epilogue_float);
    /* Tiles of B panels a task: about 16 tasks a matrix, at most 16 tiles
     * (AMX: 512 columns; 384 KB of B at K = 768, in L2).  Wide tasks keep
     * threads off each other's output lines (two threads writing
     * neighbouring tiles share lines); with about 8, a product of 384
     * rows made 9 tasks, 5 of them on one of 2 threads (DynamicQuantizeMatMul
     * 384 x 768 by 768 x 768 at 2 threads on a Zen 4: 0.68 -> 0.60-0.62 ms). */
    const int64_t want = p.nchunks < 16 ? (16 + p.nchunks - 1) / p.nchunks : 1;
    p.group = (p.ntiles + want - 1) / want;
    p.group = p.group < 16 ? p.group : 16;
    const int64_t ntasks = batch * ((p.ntiles + p.group - 1) / p.group) * p.nchunks;
#if OLC_I8_HAVE_AMX
    if (p.amx)
        olc_parallel_for(ntasks, olc_i8_gemm_amx_task, &p, nthreads);
    else
#endif
        olc_parallel_for(ntasks, olc_i8_gemm_task, &p, nthreads);
    free(ap);
    free(rowsum);
    return 0;
}
/* y[q] (int32, M x N row-major) = (A[q] - za)(B[b_index[q]] - zb) for q <
 * batch.  bp/colsum: packed B matrices (olc_i8_pack_b at this level).  za
 * (shifted, za') is read at q * za_bs + m * za_rs, zb (shifted, zb') at
 * q * zb_bs + n * zb_cs.  Returns -1 when out of memory. */
static int olc_i8_gemm(const uint8_t *a, const int64_t *a_offsets, int64_t batch,
                       const int8_t *bp, const int32_t *colsum, const int64_t *b_index,
                       const int32_t *za, int64_t za_bs, int64_t za_rs, const int32_t *zb,
                       int64_t zb_bs, int64_t zb_cs, int32_t *y, int64_t M, int64_t N,
                       int64_t K, int a_signed, int level, int nthreads) {
    return olc_i8_gemm_run(a, a_offsets, batch, bp, colsum, b_index, za, za_bs, za_rs, zb,
                           zb_bs, zb_cs, y, M, N, K, a_signed, level, nthreads, NULL, NULL, 0,
                           0, NULL);
}

/* The same product as float32, y[q] = (float)product * m + bias (the
 * product rounded first, no fused multiply-add), m read at q * m_bs + n *
 * m_cs (m_cs 0 or 1), bias [N] or NULL. */
static int olc_i8_gemm_float(const uint8_t *a, const int64_t *a_offsets, int64_t batch,
                             const int8_t *bp, const int32_t *colsum, const int64_t *b_index,
                             const int32_t *za, int64_t za_bs, int64_t za_rs,
                             const int32_t *zb, int64_t zb_bs, int64_t zb_cs, float *y,
                             int64_t M, int64_t N, int64_t K, int a_signed, const float *m,
                             int64_t m_bs, int64_t m_cs, const float *bias, int level,
                             int nthreads) {
    return olc_i8_gemm_run(a, a_offsets, batch, bp, colsum, b_index, za, za_bs, za_rs, zb,
                           zb_bs, zb_cs, NULL, M, N, K, a_signed, level, nthreads, y, m, m_bs,
                           m_cs, bias);
}

typedef void (*olc_i8_requant_fn)(const int32_t *, int64_t, const double *, int64_t, double,
                                  int, void *);

typedef struct {
    olc_i8_requant_fn row;
    const int32_t *c;
    const double *mult;
    int64_t m_bs, m_rs, m_cs, M, N, rows;
    double zp;
    int out_signed;
    char *y;
} olc_i8_requant_job;

/* Rows OLC_I8_ROWS task .. of the batch * M output rows. */
static void olc_i8_requant_task(void *arg, ptrdiff_t task, int slot) {
    const olc_i8_requant_job *p = (const olc_i8_requant_job *)arg;
    const int64_t t1 = (task + 1) * OLC_I8_ROWS < p->rows ? (task + 1) * OLC_I8_ROWS : p->rows;
    (void)slot;
    for (int64_t t = task * OLC_I8_ROWS; t < t1; t++) {
        const int64_t q = t / p->M, m = t % p->M;
        p->row(p->c + t * p->N, p->N, p->mult + q * p->m_bs + m * p->m_rs, p->m_cs, p->zp,
               p->out_signed, p->y + t * p->N);
    }
}

/* y (int8 or uint8, batch x M x N) from the int32 products c; mult read at
 * q * m_bs + m * m_rs + n * m_cs (m_cs 0 or 1). */
static void olc_i8_requantize(const int32_t *c, const double *mult, int64_t m_bs, int64_t m_rs,
                              int64_t m_cs, void *y, int64_t batch, int64_t M, int64_t N,
                              double zp, int out_signed, int level, int nthreads) {
    olc_i8_requant_job job = {OLC_LEVEL_FN(olc_build_level(level), olc_i8_requant_row),
                              c, mult, m_bs, m_rs, m_cs, M, N, batch * M, zp, out_signed,
                              (char *)y};
    olc_parallel_for((job.rows + OLC_I8_ROWS - 1) / OLC_I8_ROWS, olc_i8_requant_task, &job,
                     nthreads);
}

#endif
