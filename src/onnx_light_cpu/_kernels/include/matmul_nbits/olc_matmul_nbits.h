/* Block-quantized matrix product (com.microsoft MatMulNBits):
 *
 *   y[m, n] = bias[n] + sum_k a[m, k] * (q[n, k] - z[n, k / block]) * s[n, k / block]
 *
 * q are 2, 3, 4 or 8-bit codes packed along K, column after column (B is
 * [N, nb, blob] bytes, nb = ceil(K / block)); the dequantized matrix is
 * never materialised.  Two engines:
 *
 * Float (accuracy level 0 and every format), three routes:
 *   - direct (SIMD levels, M <= 8, or 3 with the copy below; 4-bit codes
 *     in blocks of 32 and more or 8-bit codes; finite scales and zero
 *     points): each column's codes are converted in registers and
 *     multiplied with up to 4 (AVX2) or 8 rows at a time (one row: two
 *     columns at a time), nothing stored; the zero point is folded in with
 *     the activations' block sums;
 *   - GEMM panels (SIMD levels, larger M): a thread owns a tile of up to
 *     OLC_NB_GEMM_MB rows and two GEMM panel widths of columns; each chunk
 *     of OLC_NB_GEMM_KC reduction elements is decoded to float32 in the
 *     packed layout of the float GEMM's micro-kernels (olc_gemm.h; from a
 *     column-interleaved copy of constant codes, else transposed) and
 *     multiplied with the rows of A where they lie;
 *   - dot panels (the portable level, and small M on formats the direct
 *     route lacks): a tile of OLC_NB_NC columns decoded OLC_NB_KC elements
 *     at a time, a dot-product micro-kernel of up to 4 x 4 vectorised
 *     along K.
 * Scratch is a few panels a thread (or the reordered rows on the direct
 * route, M x K floats), whatever N; the copy of constant codes is made once.
 *
 * Int8 (accuracy level 4): each block of an activation row (the weight
 * block, or 256 elements of it when larger) is quantized to int8 with the
 * full signed range, qa = rint(a * 127 / max|a|) (scale max|a| / 127), as
 * ONNX Runtime does (decode-sized M once, shared by the threads); weights
 * are prepared once in tiles of 16 columns, four consecutive k of a column
 * side by side (the operand order of vpdpbusd: unsigned codes times signed
 * activations), 4-bit codes kept two a byte.  A block's int32 dot
 * product is corrected for the zero point with the block sum of qa,
 * converted to float and accumulated with the product of the two scales.
 * AVX2 and AVX-512 without VNNI use vpmaddubsw, whose int16 pair sums
 * saturate for 8-bit codes (2 x 255 x 127): those split the codes' high bit
 * off and multiply the two halves separately.
 *
 * Activations or weight parameters that are not finite keep the float
 * semantics of dequantizing element by element (the panels): the int8
 * engine and the direct route's folded zero point would not.
 *
 * Threads take disjoint (row block, column tile) tiles and never split K,
 * so every output is computed the same way whatever the thread count.
 *
 * Code: codes are unpacked by engines/block_codes/olc_block_codes.h; the
 * int8 engine's dot-product steps are those of
 * engines/gemm_int8/olc_int8_dot.h (shared with MatMulInteger), and its
 * AVX-512 tile is one body, olc_matmul_nbits_q8.h, compiled for avx512 and
 * avx512vnni.  Micro-kernels for 1 to 4 (8) rows are one rows function per
 * level taking the row count, and one small function a row count calling
 * it with a constant (olc_nb_dot<mr>_<level>, olc_nb_direct<mr>_<level>,
 * olc_q8_tile<mr>_<level>).
 * API: see olc_matmul_nbits.pxd.
 */
#ifndef OLC_MATMUL_NBITS_H
#define OLC_MATMUL_NBITS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_pool.h"
#include "common/olc_vec.h"
#include "engines/block_codes/olc_block_codes.h"
#include "engines/gemm/olc_gemm.h"
#include "engines/gemm_int8/olc_int8_dot.h"

#define OLC_NB_NC 4      /* columns of a decoded panel */
#define OLC_NB_KC 1024   /* reduction elements of a decoded panel */
#define OLC_NB_MB 64     /* rows of a panel-engine tile */
#define OLC_NB_MR 4      /* rows of a micro-kernel */
#define OLC_Q8_NR 16     /* columns of a prepared int8 tile */
#define OLC_Q8_MB 32     /* rows of an int8-engine tile (past decode) */
/* Tasks a thread where a route's tasks are runs of consecutive column
 * chunks or tiles: long enough that each streams its codes, short enough
 * that a thread the OS runs late holds up a quarter of its share. */
#define OLC_NB_RUNS 4


/* The quantized weights as the panel engine reads them. */
typedef struct {
    const uint8_t *b;     /* codes [N][nb][blob] */
    const float *scales;  /* [N][nb] */
    const float *zp;      /* [N][nb], or NULL for zp_default everywhere */
    float zp_default;
    int64_t K, N, nb, blob, block;
    int bits;
    int finite; /* scales and zero points all finite: the direct route may
                   fold z s into one term (else per-element semantics) */
    int panel_rows; /* the caller makes `rows` before any call on panels */
    /* Optional layout prepared for the GEMM panels (4 and 8 bits, see
     * olc_nb_prepare_rows), or NULL. */
    const uint8_t *rows;  /* [ceil(N / 16)][nb * block][8 or 16 bytes] */
    const float *rscales; /* [ceil(N / 16)][nb][16]: s */
    const float *roffs;   /* [ceil(N / 16)][nb][16]: -z * s */
} olc_nb_w;

/* ---- decoding codes (olc_block_codes.h) ---- */

/* dst[k - k0] = (q[n, k] - z) * s for k in [k0, k1), portable. */
static void olc_nb_decode_scalar(const olc_nb_w *w, int64_t n, int64_t k0, int64_t k1,
                                 float *dst) {
    int64_t k = k0;
    while (k < k1) {
        int64_t b = k / w->block, end = (b + 1) * w->block;
        if (end > k1) end = k1;
        const uint8_t *blob = w->b + (n * w->nb + b) * w->blob;
        float s = w->scales[n * w->nb + b];
        float z = w->zp ? w->zp[n * w->nb + b] : w->zp_default;
        for (int64_t p = k - b * w->block; k < end; ++k, ++p)
            dst[k - k0] = ((float)olc_bc_code(blob, w->bits, p) - z) * s;
    }
}

#if OLC_X86
/* The same decode, 16 codes at a time for 2, 4 and 8 bits. */
OLC_TARGET_AVX2
static void olc_nb_decode_avx2(const olc_nb_w *w, int64_t n, int64_t k0, int64_t k1,
                               float *dst) {
    if (w->bits == 3) {
        olc_nb_decode_scalar(w, n, k0, k1, dst);
        return;
    }
    int64_t k = k0;
    while (k < k1) {
        int64_t b = k / w->block, end = (b + 1) * w->block;
        if (end > k1) end = k1;
        const uint8_t *blob = w->b + (n * w->nb + b) * w->blob;
        float s = w->scales[n * w->nb + b];
        float z = w->zp ? w->zp[n * w->nb + b] : w->zp_default;
        __m256 vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z);
        int64_t p = k - b * w->block;
        for (; k + 16 <= end; k += 16, p += 16) {
            __m256i c0, c1;
            if (w->bits == 2) {
                olc_bc_codes2x16_avx2(blob, p, &c0, &c1);
            } else {
                __m128i c = olc_bc_codes16(blob, w->bits, p);
                c0 = _mm256_cvtepu8_epi32(c);
                c1 = _mm256_cvtepu8_epi32(_mm_srli_si128(c, 8));
            }
            __m256 lo = _mm256_cvtepi32_ps(c0), hi = _mm256_cvtepi32_ps(c1);
            _mm256_storeu_ps(dst + (k - k0), _mm256_mul_ps(_mm256_sub_ps(lo, vz), vs));
            _mm256_storeu_ps(dst + (k - k0) + 8, _mm256_mul_ps(_mm256_sub_ps(hi, vz), vs));
        }
        for (; k < end; ++k, ++p)
            dst[k - k0] = ((float)olc_bc_code(blob, w->bits, p) - z) * s;
    }
}

#if OLC_HAVE_AVX512
OLC_TARGET_AVX512
static void olc_nb_decode_avx512(const olc_nb_w *w, int64_t n, int64_t k0, int64_t k1,
                                 float *dst) {
    if (w->bits == 3) {
        olc_nb_decode_scalar(w, n, k0, k1, dst);
        return;
    }
    int64_t k = k0;
    while (k < k1) {
        int64_t b = k / w->block, end = (b + 1) * w->block;
        if (end > k1) end = k1;
        const uint8_t *blob = w->b + (n * w->nb + b) * w->blob;
        float s = w->scales[n * w->nb + b];
        float z = w->zp ? w->zp[n * w->nb + b] : w->zp_default;
        __m512 vs = _mm512_set1_ps(s), vz = _mm512_set1_ps(z);
        int64_t p = k - b * w->block;
        for (; k + 16 <= end; k += 16, p += 16) {
            __m512 q = _mm512_cvtepi32_ps(olc_bc_codes16_avx512(blob, w->bits, p));
            _mm512_storeu_ps(dst + (k - k0), _mm512_mul_ps(_mm512_sub_ps(q, vz), vs));
        }
        for (; k < end; ++k, ++p)
            dst[k - k0] = ((float)olc_bc_code(blob, w->bits, p) - z) * s;
    }
}
#endif
#endif

/* ---- the dot-panel micro-kernels: y[r, c] += sum_k a[r, k] w[c, k] ----
 * Up to OLC_NB_MR rows and up to 4 panel columns (missing ones read column
 * 0 and are not stored).  One rows function a level takes the row count
 * mr; olc_nb_dot<mr>_<level> calls it with mr constant, so that each row
 * count gets its own copy with the row loops fully unrolled. */

static inline __attribute__((always_inline)) void olc_nb_dot_rows_scalar(
    int mr, const float *a, int64_t lda, const float *w, int64_t ldw, int nr, int64_t kc,
    float *y, int64_t ldy) {
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nr; ++c) {
            const float *ar = a + r * lda, *wc = w + c * ldw;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            int64_t k = 0;
            for (; k + 4 <= kc; k += 4)
                for (int l = 0; l < 4; ++l) acc[l] += ar[k + l] * wc[k + l];
            for (; k < kc; ++k) acc[0] += ar[k] * wc[k];
            y[r * ldy + c] += (acc[0] + acc[1]) + (acc[2] + acc[3]);
        }
}

/* One function per row count, the rows function inlined with it constant. */
static void olc_nb_dot1_scalar(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_scalar(1, a, lda, w, ldw, nr, kc, y, ldy);
}
static void olc_nb_dot2_scalar(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_scalar(2, a, lda, w, ldw, nr, kc, y, ldy);
}
static void olc_nb_dot3_scalar(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_scalar(3, a, lda, w, ldw, nr, kc, y, ldy);
}
static void olc_nb_dot4_scalar(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_scalar(4, a, lda, w, ldw, nr, kc, y, ldy);
}

#if OLC_X86
/* AVX2 has 16 registers: 4 rows x 2 columns of accumulators a pass. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX2 void olc_nb_dot_rows_avx2(
    int mr, const float *a, int64_t lda, const float *w, int64_t ldw, int nr, int64_t kc,
    float *y, int64_t ldy) {
    int64_t tail = kc & 7;
    __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)tail),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int c0 = 0; c0 < nr; c0 += 2) {
        const float *w0 = w + c0 * ldw, *w1 = c0 + 1 < nr ? w0 + ldw : w0;
        __m256 acc[OLC_NB_MR][2];
        for (int r = 0; r < mr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 x0 = _mm256_loadu_ps(w0 + k), x1 = _mm256_loadu_ps(w1 + k);
            for (int r = 0; r < mr; ++r) {
                __m256 v = _mm256_loadu_ps(a + r * lda + k);
                acc[r][0] = _mm256_fmadd_ps(v, x0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(v, x1, acc[r][1]);
            }
        }
        if (tail) {
            __m256 x0 = _mm256_maskload_ps(w0 + k, mask);
            __m256 x1 = _mm256_maskload_ps(w1 + k, mask);
            for (int r = 0; r < mr; ++r) {
                __m256 v = _mm256_maskload_ps(a + r * lda + k, mask);
                acc[r][0] = _mm256_fmadd_ps(v, x0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(v, x1, acc[r][1]);
            }
        }
        for (int r = 0; r < mr; ++r) {
            y[r * ldy + c0] += olc_hsum_ps_avx2(acc[r][0]);
            if (c0 + 1 < nr) y[r * ldy + c0 + 1] += olc_hsum_ps_avx2(acc[r][1]);
        }
    }
}

OLC_TARGET_AVX2
static void olc_nb_dot1_avx2(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                             int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx2(1, a, lda, w, ldw, nr, kc, y, ldy);
}
OLC_TARGET_AVX2
static void olc_nb_dot2_avx2(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                             int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx2(2, a, lda, w, ldw, nr, kc, y, ldy);
}
OLC_TARGET_AVX2
static void olc_nb_dot3_avx2(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                             int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx2(3, a, lda, w, ldw, nr, kc, y, ldy);
}
OLC_TARGET_AVX2
static void olc_nb_dot4_avx2(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                             int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx2(4, a, lda, w, ldw, nr, kc, y, ldy);
}

#if OLC_HAVE_AVX512
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void olc_nb_dot_rows_avx512(
    int mr, const float *a, int64_t lda, const float *w, int64_t ldw, int nr, int64_t kc,
    float *y, int64_t ldy) {
    const float *wc[4];
    for (int c = 0; c < 4; ++c) wc[c] = w + (c < nr ? c : 0) * ldw;
    __m512 acc[OLC_NB_MR][4];
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16) {
        __m512 x[4];
        for (int c = 0; c < 4; ++c) x[c] = _mm512_loadu_ps(wc[c] + k);
        for (int r = 0; r < mr; ++r) {
            __m512 v = _mm512_loadu_ps(a + r * lda + k);
            for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(v, x[c], acc[r][c]);
        }
    }
    if (k < kc) {
        __mmask16 m = (__mmask16)((1u << (kc - k)) - 1);
        __m512 x[4];
        for (int c = 0; c < 4; ++c) x[c] = _mm512_maskz_loadu_ps(m, wc[c] + k);
        for (int r = 0; r < mr; ++r) {
            __m512 v = _mm512_maskz_loadu_ps(m, a + r * lda + k);
            for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(v, x[c], acc[r][c]);
        }
    }
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nr; ++c) y[r * ldy + c] += _mm512_reduce_add_ps(acc[r][c]);
}

OLC_TARGET_AVX512
static void olc_nb_dot1_avx512(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx512(1, a, lda, w, ldw, nr, kc, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_dot2_avx512(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx512(2, a, lda, w, ldw, nr, kc, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_dot3_avx512(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx512(3, a, lda, w, ldw, nr, kc, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_dot4_avx512(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                               int64_t kc, float *y, int64_t ldy) {
    olc_nb_dot_rows_avx512(4, a, lda, w, ldw, nr, kc, y, ldy);
}
#endif
#endif

typedef void (*olc_nb_dot_fn)(const float *a, int64_t lda, const float *w, int64_t ldw, int nr,
                              int64_t kc, float *y, int64_t ldy);
typedef void (*olc_nb_decode_fn)(const olc_nb_w *w, int64_t n, int64_t k0, int64_t k1,
                                 float *dst);

/* The level the panel engine runs at for these codes. */
static int olc_nb_panel_level(int level) { return olc_build_level(level); }

/* Scratch bytes of one dot-panel thread. */
static int64_t olc_nb_panel_scratch(void) { return (int64_t)OLC_NB_NC * OLC_NB_KC * 4; }

typedef struct {
    const olc_nb_w *w;
    const float *a, *bias;
    float *y;
    int64_t M, ct, tiles, parts;
    olc_nb_dot_fn dots[OLC_NB_MR];
    olc_nb_decode_fn decode;
    float **panel; /* decoded columns, one buffer a slot */
    int failed;
} olc_nb_panel_job;

/* One tile t of the panel route: row block t / ct, column tile t % ct. */
static void olc_nb_panel_tile(const olc_nb_panel_job *p, int64_t t, float *panel) {
    const olc_nb_w *w = p->w;
    const float *a = p->a, *bias = p->bias;
    float *y = p->y;
    const int64_t K = w->K, N = w->N, M = p->M;
    int64_t m0 = (t / p->ct) * OLC_NB_MB, n0 = (t % p->ct) * OLC_NB_NC;
    int64_t m1 = m0 + OLC_NB_MB < M ? m0 + OLC_NB_MB : M;
    int nc = (int)(N - n0 < OLC_NB_NC ? N - n0 : OLC_NB_NC);
    for (int64_t m = m0; m < m1; ++m)
        for (int c = 0; c < nc; ++c) y[m * N + n0 + c] = bias ? bias[n0 + c] : 0.f;
    for (int64_t k0 = 0; k0 < K; k0 += OLC_NB_KC) {
        int64_t kc = K - k0 < OLC_NB_KC ? K - k0 : OLC_NB_KC;
        for (int c = 0; c < nc; ++c) p->decode(w, n0 + c, k0, k0 + kc, panel + c * OLC_NB_KC);
        for (int64_t m = m0; m < m1; m += OLC_NB_MR) {
            int mr = (int)(m1 - m < OLC_NB_MR ? m1 - m : OLC_NB_MR);
            p->dots[mr - 1](a + m * K + k0, K, panel, OLC_NB_KC, nc, kc, y + m * N + n0, N);
        }
    }
}

/* Run `task` of the parts runs of consecutive tiles (column tiles
 * outermost within a row block: neighbours share A rows). */
static void olc_nb_panel_task(void *arg, ptrdiff_t task, int slot) {
    olc_nb_panel_job *p = (olc_nb_panel_job *)arg;
    float *panel = olc_slot_buffer(p->panel, slot, (size_t)olc_nb_panel_scratch() / 4);
    int64_t t0, t1;
    if (panel == NULL) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    olc_split(p->tiles, 1, p->parts, task, &t0, &t1);
    for (int64_t t = t0; t < t1; ++t) olc_nb_panel_tile(p, t, panel);
}

/* y[M, N] = a[M, K] x dequantized(w) (+ bias); returns 0, or -1 when out of
 * memory.  Threads take runs of (row block, column tile) tiles. */
static int olc_nb_panel(const olc_nb_w *w, const float *a, int64_t M, const float *bias, float *y,
                        int level, int nthreads) {
    olc_nb_dot_fn dots[OLC_NB_MR] = {olc_nb_dot1_scalar, olc_nb_dot2_scalar, olc_nb_dot3_scalar,
                                     olc_nb_dot4_scalar};
    olc_nb_decode_fn decode = olc_nb_decode_scalar;
    level = olc_nb_panel_level(level);
#if OLC_X86
    if (level == OLC_AVX2) {
        decode = olc_nb_decode_avx2;
        dots[0] = olc_nb_dot1_avx2; dots[1] = olc_nb_dot2_avx2;
        dots[2] = olc_nb_dot3_avx2; dots[3] = olc_nb_dot4_avx2;
    }
#if OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        decode = olc_nb_decode_avx512;
        dots[0] = olc_nb_dot1_avx512; dots[1] = olc_nb_dot2_avx512;
        dots[2] = olc_nb_dot3_avx512; dots[3] = olc_nb_dot4_avx512;
    }
#endif
#endif
    const int64_t N = w->N;
    const int64_t ct = (N + OLC_NB_NC - 1) / OLC_NB_NC, mt = (M + OLC_NB_MB - 1) / OLC_NB_MB;
    const int64_t tiles = ct * mt;
    if (tiles < nthreads) nthreads = (int)(tiles > 0 ? tiles : 1);
    olc_nb_panel_job job = {w, a, bias, y, M, ct, tiles, 1, {NULL}, decode, NULL, 0};
    for (int r = 0; r < OLC_NB_MR; ++r) job.dots[r] = dots[r];
    if (nthreads > 1) job.parts = tiles < OLC_NB_RUNS * nthreads ? tiles : OLC_NB_RUNS * nthreads;
    if ((job.panel = olc_slot_buffers(nthreads)) == NULL) return -1;
    olc_parallel_for(job.parts, olc_nb_panel_task, &job, nthreads);
    olc_slot_buffers_free(job.panel, nthreads);
    return job.failed ? -1 : 0;
}

/* ---- decode-sized rows: codes multiplied where they lie ----
 * For small M (groups of up to 4 or 8 rows) with 4-bit (blocks of 32 and
 * more) or 8-bit codes, nothing is stored:
 *   sum_k a[k] (q[k] - z) s = s (sum_k a[k] q[k]) - z s sum_k a[k],
 * the block sums of a taken once a call.  The 16 bytes of 32 4-bit codes
 * give the even k in their low nibbles and the odd k in their high ones, in
 * the order the kernel's lanes read the bytes, so the activations are
 * copied once with each group of 32 reordered that way, padded with zeros
 * to whole blocks (the padded codes then add nothing). */

#define OLC_NB_ROUTE_DOT 0     /* panels, dot-product micro-kernel */
#define OLC_NB_ROUTE_DIRECT 1  /* decode-sized rows, no panel */
#define OLC_NB_ROUTE_GEMM 2    /* panels, the float GEMM's micro-kernels */
/* Rows up to which the direct route wins (CPU time at 1 thread, 4-bit,
 * K=512, N=1376): on panels decoded from B, to 8 rows (0.155 ms direct vs
 * 0.157 on panels; 16 rows 0.243 vs 0.215: past a register-full of rows
 * the codes are decoded again); on panels from the column-interleaved copy,
 * to 3 rows (3: 41 vs 49 µs, 4: 63 vs 47 µs, 8: 136 vs 71 µs). */
#define OLC_NB_DIRECT_MAX 8
#define OLC_NB_DIRECT_MAX_ROWS 3

/* The route the float engine takes for M rows at a level. */
static int olc_nb_route(const olc_nb_w *w, int64_t M, int level) {
    level = olc_build_level(level);
    if (level == OLC_SCALAR) return OLC_NB_ROUTE_DOT;
    if (M <= (w->panel_rows ? OLC_NB_DIRECT_MAX_ROWS : OLC_NB_DIRECT_MAX) && w->finite &&
        ((w->bits == 4 && w->block >= 32) || w->bits == 8))
        return OLC_NB_ROUTE_DIRECT;
    return M <= OLC_NB_MR && !w->panel_rows ? OLC_NB_ROUTE_DOT : OLC_NB_ROUTE_GEMM;
}

#if OLC_X86
/* Rows [0, mr) of the AVX2 route, mr a constant at each call
 * (olc_nb_direct<mr>_avx2 below). */
static inline __attribute__((always_inline)) OLC_TARGET_AVX2 void olc_nb_direct_rows_avx2(
    int mr, const olc_nb_w *w, const float *ap, int64_t kp, const float *asum, int64_t n0,
    int64_t n1, const float *bias, float *y, int64_t ldy) {
    const int64_t nb = w->nb, block = w->block;
    const __m128i m15 = _mm_set1_epi8(15);
    for (int64_t n = n0; n < n1; ++n) {
        __m256 acc[OLC_NB_MR];
        float corr[OLC_NB_MR];
        for (int r = 0; r < mr; ++r) {
            acc[r] = _mm256_setzero_ps();
            corr[r] = 0.f;
        }
        for (int64_t b = 0; b < nb; ++b) {
            const uint8_t *blob = w->b + (n * nb + b) * w->blob;
            const float *x = ap + b * block;
            float s = w->scales[n * nb + b];
            float zs = (w->zp ? w->zp[n * nb + b] : w->zp_default) * s;
            __m256 ba[OLC_NB_MR];
            for (int r = 0; r < mr; ++r) ba[r] = _mm256_setzero_ps();
            if (w->bits == 4) {
                for (int64_t g = 0; g < block; g += 32) {
                    __m128i v = _mm_loadu_si128((const __m128i *)(blob + g / 2));
                    __m128i lo = _mm_and_si128(v, m15);
                    __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m15);
                    __m256 q0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
                    __m256 q1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
                    __m256 q2 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
                    __m256 q3 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
                    for (int r = 0; r < mr; ++r) {
                        const float *xr = x + r * kp + g;
                        ba[r] = _mm256_fmadd_ps(q0, _mm256_loadu_ps(xr), ba[r]);
                        ba[r] = _mm256_fmadd_ps(q1, _mm256_loadu_ps(xr + 8), ba[r]);
                        ba[r] = _mm256_fmadd_ps(q2, _mm256_loadu_ps(xr + 16), ba[r]);
                        ba[r] = _mm256_fmadd_ps(q3, _mm256_loadu_ps(xr + 24), ba[r]);
                    }
                }
            } else {
                for (int64_t g = 0; g < block; g += 8) {
                    __m256 q = _mm256_cvtepi32_ps(
                        _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blob + g))));
                    for (int r = 0; r < mr; ++r)
                        ba[r] = _mm256_fmadd_ps(q, _mm256_loadu_ps(x + r * kp + g), ba[r]);
                }
            }
            __m256 vs = _mm256_set1_ps(s);
            for (int r = 0; r < mr; ++r) {
                acc[r] = _mm256_fmadd_ps(ba[r], vs, acc[r]);
                corr[r] += zs * asum[r * nb + b];
            }
        }
        for (int r = 0; r < mr; ++r)
            y[r * ldy + n] = (olc_hsum_ps_avx2(acc[r]) - corr[r]) + (bias ? bias[n] : 0.f);
    }
}

/* One function per row count, the rows function inlined with it constant. */
OLC_TARGET_AVX2
static void olc_nb_direct1_avx2(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                int64_t n0, int64_t n1, const float *bias, float *y, int64_t ldy) {
    olc_nb_direct_rows_avx2(1, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX2
static void olc_nb_direct2_avx2(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                int64_t n0, int64_t n1, const float *bias, float *y, int64_t ldy) {
    olc_nb_direct_rows_avx2(2, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX2
static void olc_nb_direct3_avx2(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                int64_t n0, int64_t n1, const float *bias, float *y, int64_t ldy) {
    olc_nb_direct_rows_avx2(3, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX2
static void olc_nb_direct4_avx2(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                int64_t n0, int64_t n1, const float *bias, float *y, int64_t ldy) {
    olc_nb_direct_rows_avx2(4, w, ap, kp, asum, n0, n1, bias, y, ldy);
}

#if OLC_HAVE_AVX512
/* Bytes ahead of the codes in use the direct route asks for: the codes of
 * large matrices stream from memory. */
#define OLC_NB_PREFETCH 1024

/* Rows [0, mr) of the AVX-512 route, mr a constant at each call.  The
 * zero-point term z s sum(a) is summed after the blocks, 16 blocks a
 * vector (the scales of a column are contiguous). */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void olc_nb_direct_rows_avx512(
    int mr, const olc_nb_w *w, const float *ap, int64_t kp, const float *asum, int64_t n0,
    int64_t n1, const float *bias, float *y, int64_t ldy) {
    const int64_t nb = w->nb, block = w->block;
    /* 4-bit: lane j takes byte 4 (j % 4) + j / 4 of the 16 bytes broadcast to
     * each quarter, its low nibble then its high one (a shift, no shuffle;
     * olc_nb_direct orders the activations to match) */
    const __m512i sh0 = _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24,
                                          24);
    const __m512i sh1 = _mm512_add_epi32(sh0, _mm512_set1_epi32(4));
    const __m512i m15d = _mm512_set1_epi32(15);
    for (int64_t n = n0; n < n1; ++n) {
        const uint8_t *blob = w->b + n * nb * w->blob;
        const float *sc = w->scales + n * nb;
        __m512 acc[OLC_NB_DIRECT_MAX];
        for (int r = 0; r < mr; ++r) acc[r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b, blob += w->blob) {
            const float *x = ap + b * block;
            _mm_prefetch((const char *)(blob + OLC_NB_PREFETCH), _MM_HINT_T0);
            __m512 ba[OLC_NB_DIRECT_MAX];
            for (int r = 0; r < mr; ++r) ba[r] = _mm512_setzero_ps();
            if (w->bits == 4) {
                for (int64_t g = 0; g < block; g += 32) {
                    __m512i v =
                        _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(blob + g / 2)));
                    __m512i c0 = _mm512_and_si512(_mm512_srlv_epi32(v, sh0), m15d);
                    __m512i c1 = _mm512_and_si512(_mm512_srlv_epi32(v, sh1), m15d);
                    __m512 q0 = _mm512_cvtepi32_ps(c0), q1 = _mm512_cvtepi32_ps(c1);
                    for (int r = 0; r < mr; ++r) {
                        const float *xr = x + r * kp + g;
                        ba[r] = _mm512_fmadd_ps(q0, _mm512_loadu_ps(xr), ba[r]);
                        ba[r] = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xr + 16), ba[r]);
                    }
                }
            } else {
                for (int64_t g = 0; g < block; g += 16) {
                    __m512 q = _mm512_cvtepi32_ps(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blob + g))));
                    for (int r = 0; r < mr; ++r)
                        ba[r] = _mm512_fmadd_ps(q, _mm512_loadu_ps(x + r * kp + g), ba[r]);
                }
            }
            __m512 vs = _mm512_set1_ps(sc[b]);
            for (int r = 0; r < mr; ++r) acc[r] = _mm512_fmadd_ps(ba[r], vs, acc[r]);
        }
        __m512 corr[OLC_NB_DIRECT_MAX];
        for (int r = 0; r < mr; ++r) corr[r] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b += 16) {
            __mmask16 m = olc_tail_mask16(nb - b);
            __m512 zs = _mm512_maskz_loadu_ps(m, sc + b);
            zs = w->zp ? _mm512_mul_ps(zs, _mm512_maskz_loadu_ps(m, w->zp + n * nb + b))
                       : _mm512_mul_ps(zs, _mm512_set1_ps(w->zp_default));
            for (int r = 0; r < mr; ++r)
                corr[r] =
                    _mm512_fmadd_ps(zs, _mm512_maskz_loadu_ps(m, asum + r * nb + b), corr[r]);
        }
        for (int r = 0; r < mr; ++r)
            y[r * ldy + n] = _mm512_reduce_add_ps(_mm512_sub_ps(acc[r], corr[r])) +
                             (bias ? bias[n] : 0.f);
    }
}

/* One row, 4-bit codes: two columns at a time, so that two independent
 * chains of block accumulations are in flight and the activations are
 * loaded once for both (a lone last column takes the generic rows). */
OLC_TARGET_AVX512
static void olc_nb_direct1x2_avx512(const olc_nb_w *w, const float *ap, int64_t kp,
                                    const float *asum, int64_t n0, int64_t n1, const float *bias,
                                    float *y, int64_t ldy) {
    if (w->bits != 4) {
        olc_nb_direct_rows_avx512(1, w, ap, kp, asum, n0, n1, bias, y, ldy);
        return;
    }
    const int64_t nb = w->nb, block = w->block;
    const __m512i sh0 = _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24,
                                          24);
    const __m512i sh1 = _mm512_add_epi32(sh0, _mm512_set1_epi32(4));
    const __m512i m15d = _mm512_set1_epi32(15);
    int64_t n = n0;
    for (; n + 2 <= n1; n += 2) {
        const uint8_t *b0 = w->b + n * nb * w->blob, *b1 = b0 + nb * w->blob;
        const float *s0 = w->scales + n * nb, *s1 = s0 + nb;
        __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b, b0 += w->blob, b1 += w->blob) {
            const float *x = ap + b * block;
            _mm_prefetch((const char *)(b0 + OLC_NB_PREFETCH), _MM_HINT_T0);
            _mm_prefetch((const char *)(b1 + OLC_NB_PREFETCH), _MM_HINT_T0);
            __m512 ba0 = _mm512_setzero_ps(), ba1 = _mm512_setzero_ps();
            for (int64_t g = 0; g < block; g += 32) {
                __m512 x0 = _mm512_loadu_ps(x + g), x1 = _mm512_loadu_ps(x + g + 16);
                __m512i v0 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(b0 + g / 2)));
                __m512i v1 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(b1 + g / 2)));
                __m512i c00 = _mm512_and_si512(_mm512_srlv_epi32(v0, sh0), m15d);
                __m512i c01 = _mm512_and_si512(_mm512_srlv_epi32(v0, sh1), m15d);
                __m512i c10 = _mm512_and_si512(_mm512_srlv_epi32(v1, sh0), m15d);
                __m512i c11 = _mm512_and_si512(_mm512_srlv_epi32(v1, sh1), m15d);
                __m512 q00 = _mm512_cvtepi32_ps(c00), q01 = _mm512_cvtepi32_ps(c01);
                __m512 q10 = _mm512_cvtepi32_ps(c10), q11 = _mm512_cvtepi32_ps(c11);
                ba0 = _mm512_fmadd_ps(q00, x0, _mm512_fmadd_ps(q01, x1, ba0));
                ba1 = _mm512_fmadd_ps(q10, x0, _mm512_fmadd_ps(q11, x1, ba1));
            }
            acc0 = _mm512_fmadd_ps(ba0, _mm512_set1_ps(s0[b]), acc0);
            acc1 = _mm512_fmadd_ps(ba1, _mm512_set1_ps(s1[b]), acc1);
        }
        __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b += 16) {
            __mmask16 m = olc_tail_mask16(nb - b);
            __m512 x = _mm512_maskz_loadu_ps(m, asum + b);
            __m512 z0 = w->zp ? _mm512_maskz_loadu_ps(m, w->zp + n * nb + b)
                              : _mm512_set1_ps(w->zp_default);
            __m512 z1 = w->zp ? _mm512_maskz_loadu_ps(m, w->zp + (n + 1) * nb + b) : z0;
            c0 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, s0 + b), z0), x, c0);
            c1 = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, s1 + b), z1), x, c1);
        }
        y[n] = _mm512_reduce_add_ps(_mm512_sub_ps(acc0, c0)) + (bias ? bias[n] : 0.f);
        y[n + 1] = _mm512_reduce_add_ps(_mm512_sub_ps(acc1, c1)) + (bias ? bias[n + 1] : 0.f);
    }
    if (n < n1) olc_nb_direct_rows_avx512(1, w, ap, kp, asum, n, n1, bias, y, ldy);
}

/* Two to eight rows (one row: olc_nb_direct1x2_avx512). */
OLC_TARGET_AVX512
static void olc_nb_direct2_avx512(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                  int64_t n0, int64_t n1, const float *bias, float *y,
                                  int64_t ldy) {
    olc_nb_direct_rows_avx512(2, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_direct3_avx512(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                  int64_t n0, int64_t n1, const float *bias, float *y,
                                  int64_t ldy) {
    olc_nb_direct_rows_avx512(3, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_direct4_avx512(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                  int64_t n0, int64_t n1, const float *bias, float *y,
                                  int64_t ldy) {
    olc_nb_direct_rows_avx512(4, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_direct5_avx512(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                  int64_t n0, int64_t n1, const float *bias, float *y,
                                  int64_t ldy) {
    olc_nb_direct_rows_avx512(5, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_direct6_avx512(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                  int64_t n0, int64_t n1, const float *bias, float *y,
                                  int64_t ldy) {
    olc_nb_direct_rows_avx512(6, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_direct7_avx512(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                  int64_t n0, int64_t n1, const float *bias, float *y,
                                  int64_t ldy) {
    olc_nb_direct_rows_avx512(7, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
OLC_TARGET_AVX512
static void olc_nb_direct8_avx512(const olc_nb_w *w, const float *ap, int64_t kp, const float *asum,
                                  int64_t n0, int64_t n1, const float *bias, float *y,
                                  int64_t ldy) {
    olc_nb_direct_rows_avx512(8, w, ap, kp, asum, n0, n1, bias, y, ldy);
}
#endif
#endif

typedef void (*olc_nb_direct_fn)(const olc_nb_w *w, const float *ap, int64_t kp,
                                 const float *asum, int64_t n0, int64_t n1, const float *bias,
                                 float *y, int64_t ldy);

/* Row m of the direct route's activations, in the kernels' order (see
 * olc_nb_direct), and its block sums; 0 when a sum is not finite. */
static int olc_nb_direct_row(const olc_nb_w *w, const float *x, int lane_order, float *d,
                             float *asum) {
    const int64_t K = w->K;
    int finite = 1;
    for (int64_t b = 0; b < w->nb; ++b) {
        float sum = 0.f;
        for (int64_t p = 0; p < w->block; ++p) {
            int64_t k = b * w->block + p;
            float v = k < K ? x[k] : 0.f;
            int64_t pos = k;
            if (w->bits == 4) { /* the order the kernel's lanes take the codes */
                int64_t kk = k & 31, byte = kk >> 1;
                pos = (k - kk) + 16 * (kk & 1) +
                      (lane_order ? 4 * (byte & 3) + (byte >> 2) : byte);
            }
            d[pos] = v;
            sum += v;
        }
        asum[b] = sum;
        if (!(sum - sum == 0.f)) finite = 0;
    }
    return finite;
}

#if OLC_X86 && OLC_HAVE_AVX512
/* The same for the AVX-512 kernels, 32 elements a step (blocks that end
 * past K take the portable loop). */
OLC_TARGET_AVX512
static int olc_nb_direct_row_avx512(const olc_nb_w *w, const float *x, float *d, float *asum) {
    const int64_t K = w->K, block = w->block;
    const int four = w->bits == 4;
    /* even k of byte 4 (j % 4) + j / 4 in lane j, then the odd ones */
    const __m512i ie = _mm512_setr_epi32(0, 8, 16, 24, 2, 10, 18, 26, 4, 12, 20, 28, 6, 14, 22,
                                         30);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
    int finite = 1;
    for (int64_t b = 0; b < w->nb; ++b) {
        int64_t k0 = b * block;
        if (k0 + block > K) { /* the padded last block */
            olc_nb_w one = *w;
            one.nb = 1;
            one.K = K - k0;
            finite &= olc_nb_direct_row(&one, x + k0, 1, d + k0, asum + b);
            continue;
        }
        __m512 vs = _mm512_setzero_ps();
        for (int64_t k = k0; k < k0 + block; k += 32) {
            __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
            vs = _mm512_add_ps(vs, _mm512_add_ps(x0, x1));
            if (four) {
                _mm512_storeu_ps(d + k, _mm512_permutex2var_ps(x0, ie, x1));
                _mm512_storeu_ps(d + k + 16, _mm512_permutex2var_ps(x0, io, x1));
            } else {
                _mm512_storeu_ps(d + k, x0);
                _mm512_storeu_ps(d + k + 16, x1);
            }
        }
        float sum = _mm512_reduce_add_ps(vs);
        asum[b] = sum;
        if (!(sum - sum == 0.f)) finite = 0;
    }
    return finite;
}
#endif

/* Columns summed together on the direct route. */
#define OLC_NB_DIRECT_COLS 8

typedef struct {
    const olc_nb_w *w;
    const float *ap, *asum, *bias;
    float *y;
    int64_t M, kp, group, chunks, parts;
    olc_nb_direct_fn fns[OLC_NB_DIRECT_MAX];
} olc_nb_direct_job;

/* Run t of the parts runs of column chunks; each chunk meets every row
 * group while its codes are in cache. */
static void olc_nb_direct_task(void *arg, ptrdiff_t t, int slot) {
    const olc_nb_direct_job *p = (const olc_nb_direct_job *)arg;
    const int64_t N = p->w->N, nb = p->w->nb;
    int64_t c0, c1;
    (void)slot;
    olc_split(p->chunks, 1, p->parts, t, &c0, &c1);
    for (int64_t c = c0; c < c1; ++c) {
        int64_t n0 = c * OLC_NB_DIRECT_COLS;
        int64_t n1 = n0 + OLC_NB_DIRECT_COLS < N ? n0 + OLC_NB_DIRECT_COLS : N;
        for (int64_t m = 0; m < p->M; m += p->group) {
            int mr = (int)(p->M - m < p->group ? p->M - m : p->group);
            p->fns[mr - 1](p->w, p->ap + m * p->kp, p->kp, p->asum + m * nb, n0, n1, p->bias,
                           p->y + m * N, N);
        }
    }
}

/* The direct route: returns 0, -1 out of memory, 1 when an activation block
 * sums to a value that is not finite (the caller keeps per-element float
 * semantics with the panels). */
static int olc_nb_direct(const olc_nb_w *w, const float *a, int64_t M, const float *bias,
                         float *y, int level, int nthreads) {
    /* rows a pass: 4 in AVX2's 16 registers, 8 in AVX-512's 32 */
    olc_nb_direct_fn fns[OLC_NB_DIRECT_MAX] = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int group = OLC_NB_MR;
#if OLC_X86
    level = olc_build_level(level);
    if (level == OLC_AVX2) {
        fns[0] = olc_nb_direct1_avx2; fns[1] = olc_nb_direct2_avx2;
        fns[2] = olc_nb_direct3_avx2; fns[3] = olc_nb_direct4_avx2;
    }
#if OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        fns[0] = olc_nb_direct1x2_avx512; fns[1] = olc_nb_direct2_avx512;
        fns[2] = olc_nb_direct3_avx512; fns[3] = olc_nb_direct4_avx512;
        fns[4] = olc_nb_direct5_avx512; fns[5] = olc_nb_direct6_avx512;
        fns[6] = olc_nb_direct7_avx512; fns[7] = olc_nb_direct8_avx512;
        group = OLC_NB_DIRECT_MAX;
    }
#endif
#endif
    if (M < 1 || !fns[0]) return -1;
    /* AVX-512 widens codes with per-lane shifts of a 16-byte broadcast, so
     * lane j holds byte 4 (j % 4) + j / 4; AVX2 widens bytes in order */
    const int lane_order = group == OLC_NB_DIRECT_MAX;
    const int64_t K = w->K, nb = w->nb, kp = nb * w->block, N = w->N;
    float *ap = (float *)malloc((size_t)(M * kp + M * nb) * sizeof(float));
    if (!ap) return -1;
    float *asum = ap + M * kp;
    int finite = 1;
    for (int64_t m = 0; m < M; ++m) {
#if OLC_X86 && OLC_HAVE_AVX512
        if (lane_order && w->block >= 32) {
            finite &= olc_nb_direct_row_avx512(w, a + m * K, ap + m * kp, asum + m * nb);
            continue;
        }
#endif
        finite &= olc_nb_direct_row(w, a + m * K, lane_order, ap + m * kp, asum + m * nb);
    }
    if (!finite) {
        free(ap);
        return 1;
    }
    const int64_t chunks = (N + OLC_NB_DIRECT_COLS - 1) / OLC_NB_DIRECT_COLS;
    if (chunks < nthreads) nthreads = (int)chunks;
    olc_nb_direct_job job = {w, ap, asum, bias, y, M, kp, group, chunks, 1, {NULL}};
    for (int r = 0; r < OLC_NB_DIRECT_MAX; ++r) job.fns[r] = fns[r];
    if (nthreads > 1)
        job.parts = chunks < OLC_NB_RUNS * nthreads ? chunks : OLC_NB_RUNS * nthreads;
    olc_parallel_for(job.parts, olc_nb_direct_task, &job, nthreads);
    free(ap);
    return 0;
}

/* ---- panels for the float GEMM's micro-kernels ----
 * A tile of NR columns (the GEMM's panel width) and up to OLC_NB_GEMM_MB
 * rows; each chunk of OLC_NB_GEMM_KC reduction elements is decoded column by
 * column, transposed to the GEMM's packed layout (kc rows of NR floats) and
 * multiplied with rows of A read in place, into a tile of C of its own
 * (rows of y lie N floats apart: for large N, those strides alias in the
 * caches) copied to y at the end. */
#define OLC_NB_GEMM_MB 144
#define OLC_NB_GEMM_KC 128
#define OLC_NB_GEMM_PANELS 2 /* GEMM panels a tile: rows of A are read once for both */

static int64_t olc_nb_gemm_scratch(int level) {
    olc_sgemm_cfg cfg;
    olc_sgemm_config(level, &cfg);
    int64_t tw = OLC_NB_GEMM_PANELS * cfg.nr;
    return (2 * tw * OLC_NB_GEMM_KC + OLC_NB_GEMM_MB * tw) * 4;
}

static void olc_nb_transpose(int level, const float *src, int64_t lds, int nc, int64_t kc,
                             float *dst, int nr) {
    int64_t k0 = 0;
#if OLC_X86 && OLC_HAVE_AVX512
    if (level >= OLC_AVX512)
        for (; k0 + 16 <= kc; k0 += 16)
            for (int c = 0; c + 16 <= nc; c += 16)
                olc_transpose16_avx512(src + c * lds + k0, lds, dst + k0 * nr + c, nr);
    int cdone = level >= OLC_AVX512 ? nc & ~15 : 0;
#else
    int cdone = 0;
    (void)level;
#endif
    for (int64_t k = 0; k < kc; ++k) {
        int c = k < k0 ? cdone : 0;
        for (; c < nc; ++c) dst[k * nr + c] = src[c * lds + k];
        for (; c < nr; ++c) dst[k * nr + c] = 0.f;
    }
}

#if OLC_X86 && OLC_HAVE_AVX512
/* 16 columns x 16 k of 2, 4 or 8-bit codes (k0 a multiple of 16) decoded and
 * transposed in registers: dst[k * ldd + c] = (q[n0 + c, k0 + k] - z) * s
 * for k < 16, c < 16 (columns past nc give zeros). */
OLC_TARGET_AVX512
static void olc_nb_decode16x16_avx512(const olc_nb_w *w, int64_t n0, int nc, int64_t k0,
                                      float *dst, int64_t ldd) {
    __m512 r[16];
    const int64_t b = k0 / w->block, p = k0 - b * w->block;
    for (int c = 0; c < 16; ++c) {
        if (c >= nc) {
            r[c] = _mm512_setzero_ps();
            continue;
        }
        int64_t n = n0 + c;
        const uint8_t *blob = w->b + (n * w->nb + b) * w->blob;
        float s = w->scales[n * w->nb + b];
        float z = w->zp ? w->zp[n * w->nb + b] : w->zp_default;
        __m512 q = _mm512_cvtepi32_ps(olc_bc_codes16_avx512(blob, w->bits, p));
        r[c] = _mm512_fmadd_ps(q, _mm512_set1_ps(s), _mm512_set1_ps(-z * s));
    }
    olc_transpose16_regs_avx512(r);
    for (int i = 0; i < 16; ++i) _mm512_storeu_ps(dst + i * ldd, r[i]);
}
#endif

/* ---- a layout prepared for the GEMM panels (constant 4/8-bit weights) ----
 * The panels want, for each k, consecutive columns side by side; B holds
 * each column's k side by side.  Prepared once, row k of a group of 16
 * columns is 16 codes, 8 bytes for 4 bits, 16 for 8 bits, placed where a
 * per-lane shift of the row broadcast to a register finds them: for 4 bits
 * (a 64-bit broadcast) column c at byte 4 (c % 2) + c / 4, nibble (c / 2) % 2,
 * i.e. bits 4 (c / 2) of 32-bit half c % 2; for 8 bits (a 128-bit broadcast)
 * column c at byte 4 (c % 4) + c / 4.  The scales s and offsets -z s of a
 * block are 16 floats.  A panel row is then one broadcast load, a shift, a
 * mask, a conversion and one FMA.  Columns past N have code, scale and
 * offset 0. */

static int64_t olc_nb_rows_bytes(const olc_nb_w *w) {
    return (w->N + 15) / 16 * w->nb * w->block * (w->bits == 4 ? 8 : 16);
}

static int64_t olc_nb_rows_params(const olc_nb_w *w) { return (w->N + 15) / 16 * w->nb * 16; }

static void olc_nb_prepare_rows(const olc_nb_w *w, uint8_t *rows, float *rscales, float *roffs) {
    const int64_t groups = (w->N + 15) / 16, kp = w->nb * w->block;
    const int rb = w->bits == 4 ? 8 : 16;
    memset(rows, 0, (size_t)olc_nb_rows_bytes(w));
    for (int64_t g = 0; g < groups; ++g)
        for (int c = 0; c < 16; ++c) {
            int64_t n = g * 16 + c;
            for (int64_t b = 0; b < w->nb; ++b) {
                float s = 0.f, z = 0.f;
                if (n < w->N) {
                    s = w->scales[n * w->nb + b];
                    z = w->zp ? w->zp[n * w->nb + b] : w->zp_default;
                    const uint8_t *blob = w->b + (n * w->nb + b) * w->blob;
                    for (int64_t p = 0; p < w->block && b * w->block + p < w->K; ++p) {
                        unsigned q = olc_bc_code(blob, w->bits, p);
                        uint8_t *row = rows + (g * kp + b * w->block + p) * rb;
                        if (rb == 8)
                            row[4 * (c % 2) + c / 4] |= (uint8_t)(q << (4 * ((c / 2) % 2)));
                        else
                            row[4 * (c % 4) + c / 4] = (uint8_t)q;
                    }
                }
                rscales[(g * w->nb + b) * 16 + c] = s;
                roffs[(g * w->nb + b) * 16 + c] = -z * s;
            }
        }
}

#if OLC_X86
/* Panel rows k0..k0+kc of columns n0..n0+nr (n0 a multiple of 16) from the
 * prepared layout; groups past N give zeros. */
OLC_TARGET_AVX2
static void olc_nb_rows_panel_avx2(const olc_nb_w *w, int64_t n0, int64_t k0, int64_t kc,
                                   float *dst, int nr) {
    const int64_t kp = w->nb * w->block;
    const int four = w->bits == 4;
    /* shifts of columns 0-7 and 8-15 (see the layout above) */
    const __m256i sh0 = four ? _mm256_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12)
                             : _mm256_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8);
    const __m256i sh1 = _mm256_add_epi32(sh0, _mm256_set1_epi32(16));
    const __m256i mask = _mm256_set1_epi32(four ? 15 : 255);
    for (int c0 = 0; c0 < nr; c0 += 16) {
        int64_t g = (n0 + c0) / 16;
        if (n0 + c0 >= w->N) {
            for (int64_t k = 0; k < kc; ++k) memset(dst + k * nr + c0, 0, 16 * sizeof(float));
            continue;
        }
        for (int64_t k = 0; k < kc;) {
            int64_t b = (k0 + k) / w->block, end = (b + 1) * w->block - k0;
            if (end > kc) end = kc;
            const float *sp = w->rscales + (g * w->nb + b) * 16;
            const float *op = w->roffs + (g * w->nb + b) * 16;
            __m256 s0 = _mm256_loadu_ps(sp), s1 = _mm256_loadu_ps(sp + 8);
            __m256 o0 = _mm256_loadu_ps(op), o1 = _mm256_loadu_ps(op + 8);
            for (; k < end; ++k) {
                __m256i v;
                if (four) {
                    int64_t x;
                    memcpy(&x, w->rows + (g * kp + k0 + k) * 8, 8);
                    v = _mm256_set1_epi64x(x);
                } else {
                    v = _mm256_broadcastsi128_si256(
                        _mm_loadu_si128((const __m128i *)(w->rows + (g * kp + k0 + k) * 16)));
                }
                __m256 q0 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(v, sh0), mask));
                __m256 q1 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(v, sh1), mask));
                _mm256_storeu_ps(dst + k * nr + c0, _mm256_fmadd_ps(q0, s0, o0));
                _mm256_storeu_ps(dst + k * nr + c0 + 8, _mm256_fmadd_ps(q1, s1, o1));
            }
        }
    }
}

#if OLC_HAVE_AVX512
OLC_TARGET_AVX512
static void olc_nb_rows_panel_avx512(const olc_nb_w *w, int64_t n0, int64_t k0, int64_t kc,
                                     float *dst, int nr) {
    const int64_t kp = w->nb * w->block;
    const int four = w->bits == 4;
    const __m512i sh = four ? _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24,
                                                24, 28, 28)
                            : _mm512_setr_epi32(0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24,
                                                24, 24, 24);
    const __m512i mask = _mm512_set1_epi32(four ? 15 : 255);
    for (int c0 = 0; c0 < nr; c0 += 16) {
        int64_t g = (n0 + c0) / 16;
        if (n0 + c0 >= w->N) {
            for (int64_t k = 0; k < kc; ++k)
                _mm512_storeu_ps(dst + k * nr + c0, _mm512_setzero_ps());
            continue;
        }
        const uint8_t *rows = w->rows + g * kp * (four ? 8 : 16);
        for (int64_t k = 0; k < kc;) {
            int64_t b = (k0 + k) / w->block, end = (b + 1) * w->block - k0;
            if (end > kc) end = kc;
            __m512 s = _mm512_loadu_ps(w->rscales + (g * w->nb + b) * 16);
            __m512 o = _mm512_loadu_ps(w->roffs + (g * w->nb + b) * 16);
            if (four) {
                for (; k < end; ++k) {
                    int64_t x;
                    memcpy(&x, rows + (k0 + k) * 8, 8);
                    __m512i v = _mm512_set1_epi64(x);
                    __m512i c = _mm512_and_si512(_mm512_srlv_epi32(v, sh), mask);
                    _mm512_storeu_ps(dst + k * nr + c0,
                                     _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), s, o));
                }
            } else {
                for (; k < end; ++k) {
                    __m512i v = _mm512_broadcast_i32x4(
                        _mm_loadu_si128((const __m128i *)(rows + (k0 + k) * 16)));
                    __m512i c = _mm512_and_si512(_mm512_srlv_epi32(v, sh), mask);
                    _mm512_storeu_ps(dst + k * nr + c0,
                                     _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), s, o));
                }
            }
        }
    }
}
#endif
#endif

/* One GEMM panel: columns n0..n0+nc (nc <= nr) and k0..k0+kc decoded into
 * dst[k * nr + c] (columns past nc zero; rows up to kc rounded to 16 may be
 * written).  tmp holds nr * KC floats. */
static void olc_nb_panel_for_gemm(const olc_nb_w *w, int level, olc_nb_decode_fn decode,
                                  int64_t n0, int nc, int64_t k0, int64_t kc, float *tmp,
                                  float *dst, int nr) {
#if OLC_X86
    if (w->rows && level >= OLC_AVX2 && nr % 16 == 0 && n0 % 16 == 0) {
#if OLC_HAVE_AVX512
        if (level >= OLC_AVX512) {
            olc_nb_rows_panel_avx512(w, n0, k0, kc, dst, nr);
            return;
        }
#endif
        olc_nb_rows_panel_avx2(w, n0, k0, kc, dst, nr);
        return;
    }
#endif
#if OLC_X86 && OLC_HAVE_AVX512
    if (level >= OLC_AVX512 && w->bits != 3 && nr % 16 == 0) {
        for (int c0 = 0; c0 < nr; c0 += 16)
            for (int64_t k = 0; k < kc; k += 16)
                olc_nb_decode16x16_avx512(w, n0 + c0, nc - c0, k0 + k, dst + k * nr + c0, nr);
        return;
    }
#endif
    for (int c = 0; c < nc; ++c) decode(w, n0 + c, k0, k0 + kc, tmp + c * OLC_NB_GEMM_KC);
    olc_nb_transpose(level, tmp, OLC_NB_GEMM_KC, nc, kc, dst, nr);
}

typedef struct {
    const olc_nb_w *w;
    const float *a, *bias;
    float *y;
    int64_t M, ct, scratch;
    int level;
    olc_sgemm_cfg cfg;
    olc_nb_decode_fn decode;
    float **tmp; /* decoded panels and a C tile, one buffer a slot */
    int failed;
} olc_nb_gemm_job;

/* Tile t: row block t / ct, columns of OLC_NB_GEMM_PANELS panels t % ct. */
static void olc_nb_gemm_task(void *arg, ptrdiff_t t, int slot) {
    olc_nb_gemm_job *p = (olc_nb_gemm_job *)arg;
    const olc_nb_w *w = p->w;
    const float *a = p->a, *bias = p->bias;
    float *y = p->y;
    const int nr = p->cfg.nr, mr = p->cfg.mr, tw = OLC_NB_GEMM_PANELS * p->cfg.nr;
    const int64_t K = w->K, N = w->N, M = p->M, KC = OLC_NB_GEMM_KC;
    float *tmp = olc_slot_buffer(p->tmp, slot, (size_t)p->scratch / 4);
    if (tmp == NULL) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    float *panels = tmp + tw * KC, *ctile = panels + tw * KC;
    int64_t m0 = (t / p->ct) * OLC_NB_GEMM_MB, n0 = (t % p->ct) * tw;
    int64_t m1 = m0 + OLC_NB_GEMM_MB < M ? m0 + OLC_NB_GEMM_MB : M;
    int nc = (int)(N - n0 < tw ? N - n0 : tw);
    int np = (nc + nr - 1) / nr;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        int64_t kc = K - k0 < KC ? K - k0 : KC;
        for (int q = 0; q < np; ++q) {
            int pc = nc - q * nr < nr ? nc - q * nr : nr;
            olc_nb_panel_for_gemm(w, p->level, p->decode, n0 + q * nr, pc, k0, kc, tmp,
                                  panels + q * nr * KC, nr);
        }
        /* each group of rows meets every panel while it is in L1 */
        for (int64_t m = m0; m < m1; m += mr) {
            int rows = (int)(m1 - m < mr ? m1 - m : mr);
            for (int q = 0; q < np; ++q)
                p->cfg.direct[rows](kc, a + m * K + k0, K, panels + q * nr * KC,
                                    ctile + (m - m0) * tw + q * nr, tw, 1.0f, k0 > 0, nr,
                                    NULL);
        }
    }
    /* the first chunk stored its sums: the bias joins on the way out */
    for (int64_t m = m0; m < m1; ++m) {
        const float *src = ctile + (m - m0) * tw;
        float *dst = y + m * N + n0;
        if (bias)
            for (int c = 0; c < nc; ++c) dst[c] = src[c] + bias[n0 + c];
        else
            memcpy(dst, src, (size_t)nc * sizeof(float));
    }
}

static int olc_nb_gemm(const olc_nb_w *w, const float *a, int64_t M, const float *bias, float *y,
                       int level, int nthreads) {
    level = olc_build_level(level);
    olc_nb_gemm_job job = {w, a, bias, y, M, 0, olc_nb_gemm_scratch(level), level};
    olc_sgemm_config(level, &job.cfg);
    job.decode = OLC_LEVEL_FN(job.level, olc_nb_decode);
    const int64_t tw = OLC_NB_GEMM_PANELS * job.cfg.nr;
    const int64_t mt = (M + OLC_NB_GEMM_MB - 1) / OLC_NB_GEMM_MB;
    job.ct = (w->N + tw - 1) / tw;
    const int64_t tiles = job.ct * mt;
    if (tiles < nthreads) nthreads = (int)(tiles > 0 ? tiles : 1);
    if ((job.tmp = olc_slot_buffers(nthreads)) == NULL) return -1;
    olc_parallel_for(tiles, olc_nb_gemm_task, &job, nthreads);
    olc_slot_buffers_free(job.tmp, nthreads);
    return job.failed ? -1 : 0;
}

/* Scratch bytes of one call on M rows with nthreads threads. */
static int64_t olc_nb_scratch(const olc_nb_w *w, int64_t M, int level, int nthreads) {
    switch (olc_nb_route(w, M, level)) {
    case OLC_NB_ROUTE_DIRECT: return M * (w->nb * w->block + w->nb) * 4;
    case OLC_NB_ROUTE_GEMM: return olc_nb_gemm_scratch(level) * nthreads;
    default: return olc_nb_panel_scratch() * nthreads;
    }
}

/* The float engine on its route: 0, or -1 when out of memory. */
static int olc_nb_float(const olc_nb_w *w, const float *a, int64_t M, const float *bias, float *y,
                        int level, int nthreads, int *route) {
    *route = olc_nb_route(w, M, level);
    if (*route == OLC_NB_ROUTE_DIRECT) {
        int status = olc_nb_direct(w, a, M, bias, y, level, nthreads);
        if (status <= 0) return status;
        *route = OLC_NB_ROUTE_DOT; /* not finite: element by element */
    }
    if (*route == OLC_NB_ROUTE_GEMM) return olc_nb_gemm(w, a, M, bias, y, level, nthreads);
    return olc_nb_panel(w, a, M, bias, y, level, nthreads);
}

/* ---- the int8 engine ---- */

/* The level the int8 engine runs at: the SIMD level, VNNI kept where the
 * CPU has it (olc_int8_level). */
static int olc_q8_level(int level) { return olc_int8_level(level); }

/* Prepared weights, in tiles of 16 columns and blocks of `block` codes:
 * 8-bit (and 2/3-bit) codes one a byte, [tiles][nb][block / 4][16][4]
 * (column c of a tile holds its codes k..k+3 side by side); 4-bit codes
 * stay 4 bits, [tiles][nb][block / 8][16][4] bytes whose low nibbles are
 * codes k..k+3 and high nibbles k+4..k+7 (a mask gives the first quad, a
 * shift the second).  Scales float and zero points uint8 [tiles][nb][16];
 * padded columns and codes past K are 0. */
typedef struct {
    const uint8_t *codes;
    const float *scales;
    const uint8_t *zp;
    int64_t K, N, nb, block, tiles;
    int split;   /* codes above 127: vpmaddubsw needs the high-bit split */
    int packed4; /* 4-bit codes, two a byte */
} olc_q8_w;

static int64_t olc_q8_tiles(int64_t N) { return (N + OLC_Q8_NR - 1) / OLC_Q8_NR; }

/* Bytes of the prepared codes of one (tile, block). */
static int64_t olc_q8_block_bytes(int64_t block, int packed4) {
    return packed4 ? block * OLC_Q8_NR / 2 : block * OLC_Q8_NR;
}

/* Fills the prepared arrays from the packed codes of w (its scales and
 * zero points, integers here, are re-laid out; zp NULL means zp_default).
 * The prepared blocks have ablock codes (a divisor of w->block): each
 * weight block's scale and zero point repeat over its sub-blocks. */
static void olc_q8_prepare(const olc_nb_w *w, int64_t ablock, uint8_t *codes, float *scales,
                           uint8_t *zp) {
    const int64_t tiles = olc_q8_tiles(w->N), per = w->block / ablock, nba = w->nb * per;
    const int packed4 = w->bits == 4;
    const int64_t bb = olc_q8_block_bytes(ablock, packed4);
    for (int64_t t = 0; t < tiles; ++t)
        for (int64_t ba = 0; ba < nba; ++ba) {
            int64_t b = ba / per, p0 = (ba % per) * ablock;
            uint8_t *dst = codes + (t * nba + ba) * bb;
            float *sd = scales + (t * nba + ba) * OLC_Q8_NR;
            uint8_t *zd = zp + (t * nba + ba) * OLC_Q8_NR;
            int64_t valid = w->K - ba * ablock;
            valid = valid < 0 ? 0 : valid > ablock ? ablock : valid;
            memset(dst, 0, (size_t)bb);
            for (int c = 0; c < OLC_Q8_NR; ++c) {
                int64_t n = t * OLC_Q8_NR + c;
                if (n >= w->N) {
                    sd[c] = 0.f;
                    zd[c] = 0;
                    continue;
                }
                const uint8_t *blob = w->b + (n * w->nb + b) * w->blob;
                for (int64_t p = 0; p < valid; ++p) {
                    unsigned q = olc_bc_code(blob, w->bits, p0 + p);
                    if (packed4)
                        dst[(p >> 3) * 4 * OLC_Q8_NR + c * 4 + (p & 3)] |=
                            (uint8_t)(q << ((p & 4) ? 4 : 0));
                    else
                        dst[(p >> 2) * 4 * OLC_Q8_NR + c * 4 + (p & 3)] = (uint8_t)q;
                }
                sd[c] = w->scales[n * w->nb + b];
                zd[c] = (uint8_t)(w->zp ? w->zp[n * w->nb + b] : w->zp_default);
            }
        }
}

/* Quantizes rows [m0, m1) of a[M, K] block by block: qa [M][nb * block]
 * (zeros past K), scales sa [M][nb], sums [M][nb].  Returns 1 when a block
 * holds a value that is not finite (the caller then keeps float
 * semantics), else 0. */
static int olc_q8_quantize(const float *a, int64_t K, int64_t nb, int64_t block, int64_t m0,
                           int64_t m1, int8_t *qa, float *sa, int32_t *sums) {
    int bad = 0;
    for (int64_t m = m0; m < m1; ++m)
        for (int64_t b = 0; b < nb; ++b) {
            const float *x = a + m * K + b * block;
            int64_t len = K - b * block;
            len = len < 0 ? 0 : len > block ? block : len;
            float amax = 0.f;
            for (int64_t p = 0; p < len; ++p) {
                float v = fabsf(x[p]);
                amax = v > amax ? v : amax;
                if (!(v <= 3.4028235e38f)) bad = 1;
            }
            float inv = amax != 0.f ? 127.f / amax : 0.f;
            int8_t *q = qa + m * nb * block + b * block;
            int32_t sum = 0;
            for (int64_t p = 0; p < len; ++p) {
                /* round half to even, as vcvtps2dq does: |x * inv| <= 127 */
                int v = (int)((x[p] * inv + 12582912.f) - 12582912.f);
                q[p] = (int8_t)v;
                sum += v;
            }
            for (int64_t p = len; p < block; ++p) q[p] = 0;
            sa[m * nb + b] = amax / 127.f;
            sums[m * nb + b] = sum;
        }
    return bad;
}

#if OLC_X86
/* The same quantization, 8 (AVX2) or 16 (AVX-512) values a step, for
 * whole blocks (a last block cut by K takes the portable loop); the
 * products and their rounding (vcvtps2dq: to nearest, ties to even) are
 * those of the portable loop, so the codes are identical. */
OLC_TARGET_AVX2
static int olc_q8_quantize_avx2(const float *a, int64_t K, int64_t nb, int64_t block, int64_t m,
                                int8_t *qa, float *sa, int32_t *sums) {
    const __m256 sign = _mm256_set1_ps(-0.f), big = _mm256_set1_ps(3.4028235e38f);
    int bad = 0;
    for (int64_t b = 0; b < nb; ++b) {
        if ((b + 1) * block > K) {
            bad |= olc_q8_quantize(a + m * K + b * block, K - b * block, 1, block, 0, 1,
                                   qa + m * nb * block + b * block, sa + m * nb + b,
                                   sums + m * nb + b);
            continue;
        }
        const float *x = a + m * K + b * block;
        __m256 vmax = _mm256_setzero_ps();
        int nonfinite = 0;
        for (int64_t p = 0; p < block; p += 8) {
            __m256 v = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + p));
            nonfinite |= _mm256_movemask_ps(_mm256_cmp_ps(v, big, _CMP_NLE_UQ));
            vmax = _mm256_max_ps(vmax, v);
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        float amax = _mm_cvtss_f32(h);
        __m256 inv = _mm256_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
        __m256i vsum = _mm256_setzero_si256();
        int8_t *q = qa + m * nb * block + b * block;
        for (int64_t p = 0; p < block; p += 8) {
            __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + p), inv));
            vsum = _mm256_add_epi32(vsum, c);
            __m128i c16 =
                _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
            _mm_storel_epi64((__m128i *)(q + p), _mm_packs_epi16(c16, c16));
        }
        sa[m * nb + b] = amax / 127.f;
        sums[m * nb + b] = olc_i8_hsum_avx2(vsum);
        bad |= nonfinite != 0;
    }
    return bad;
}

#if OLC_HAVE_AVX512
OLC_TARGET_AVX512
static int olc_q8_quantize_avx512(const float *a, int64_t K, int64_t nb, int64_t block,
                                  int64_t m, int8_t *qa, float *sa, int32_t *sums) {
    const __m512 big = _mm512_set1_ps(3.4028235e38f);
    int bad = 0;
    for (int64_t b = 0; b < nb; ++b) {
        if ((b + 1) * block > K) {
            bad |= olc_q8_quantize(a + m * K + b * block, K - b * block, 1, block, 0, 1,
                                   qa + m * nb * block + b * block, sa + m * nb + b,
                                   sums + m * nb + b);
            continue;
        }
        const float *x = a + m * K + b * block;
        __m512 vmax = _mm512_setzero_ps();
        __mmask16 nonfinite = 0;
        for (int64_t p = 0; p < block; p += 16) {
            __m512 v = _mm512_abs_ps(_mm512_loadu_ps(x + p));
            nonfinite |= _mm512_cmp_ps_mask(v, big, _CMP_NLE_UQ);
            vmax = _mm512_max_ps(vmax, v);
        }
        float amax = _mm512_reduce_max_ps(vmax);
        __m512 inv = _mm512_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
        __m512i vsum = _mm512_setzero_si512();
        int8_t *q = qa + m * nb * block + b * block;
        for (int64_t p = 0; p < block; p += 16) {
            __m512i c = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + p), inv));
            vsum = _mm512_add_epi32(vsum, c);
            _mm_storeu_si128((__m128i *)(q + p), _mm512_cvtepi32_epi8(c));
        }
        sa[m * nb + b] = amax / 127.f;
        sums[m * nb + b] = olc_i8_hsum_avx512(vsum);
        bad |= nonfinite != 0;
    }
    return bad;
}
#endif
#endif

static inline int32_t olc_q8_load4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Bytes of codes ahead of the block in use that the int8 engine asks the
 * memory for.  A column tile's blocks lie one after another and the next
 * tile's follow, so this runs ahead across tiles too.  In a decode step the
 * weights come from memory, not the cache: with it, a chain of 48 cold
 * 896 x 4864 products and a Qwen2-0.5B int4 decode step ran about 15 %
 * faster at 1 and at 2 threads (Zen 3; 1024 and 4096 bytes did less). */
#define OLC_Q8_PREFETCH 2048

/* Asks for the codes, scales and zero points of block b of tile t plus
 * OLC_Q8_PREFETCH bytes of codes (the parameters at the same distance in
 * blocks).  A hint: past the end of the arrays it does nothing. */
static inline __attribute__((always_inline)) void olc_q8_prefetch(const olc_q8_w *w, int64_t t,
                                                                  int64_t b, int64_t bb) {
    const int64_t ahead = OLC_Q8_PREFETCH / bb, i = t * w->nb + b + ahead;
    const char *q = (const char *)(w->codes + i * bb);
    for (int64_t l = 0; l < bb; l += 64) __builtin_prefetch(q + l, 0, 3);
    __builtin_prefetch(w->scales + i * OLC_Q8_NR, 0, 3);
    __builtin_prefetch(w->zp + i * OLC_Q8_NR, 0, 3);
}

/* One tile of 16 columns times mr rows: y[r, c] = bias[c] + sum over blocks
 * of sa[r, b] s[c, b] (dot(qa[r, b], q[c, b]) - z[c, b] sum(qa[r, b])).
 * nc of the 16 columns are stored.  olc_q8_tile<mr>_<level> calls the
 * level's rows function with mr (1 to OLC_NB_MR) a constant. */
static inline __attribute__((always_inline)) void olc_q8_rows_scalar(
    int mr, const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa, const int32_t *sums,
    const float *bias, int nc, float *y, int64_t ldy) {
    const int64_t nb = w->nb, block = w->block, kp = nb * block;
    const int64_t bb = olc_q8_block_bytes(block, w->packed4);
    float acc[OLC_NB_MR][OLC_Q8_NR];
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < OLC_Q8_NR; ++c) acc[r][c] = 0.f;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *q = w->codes + (t * nb + b) * bb;
        const float *s = w->scales + (t * nb + b) * OLC_Q8_NR;
        const uint8_t *z = w->zp + (t * nb + b) * OLC_Q8_NR;
        olc_q8_prefetch(w, t, b, bb);
        for (int r = 0; r < mr; ++r) {
            const int8_t *x = qa + r * kp + b * block;
            int32_t dot[OLC_Q8_NR];
            for (int c = 0; c < OLC_Q8_NR; ++c) dot[c] = 0;
            for (int64_t p = 0; p < block; p += 4)
                for (int c = 0; c < OLC_Q8_NR; ++c) {
                    const uint8_t *qc;
                    int sh = 0;
                    if (w->packed4) {
                        qc = q + (p >> 3) * 4 * OLC_Q8_NR + c * 4;
                        sh = (p & 4) ? 4 : 0;
                    } else {
                        qc = q + p * OLC_Q8_NR + c * 4;
                    }
                    int32_t d = 0;
                    for (int i = 0; i < 4; ++i)
                        d += (int32_t)(w->packed4 ? (qc[i] >> sh) & 15 : qc[i]) * x[p + i];
                    dot[c] += d;
                }
            float f = sa[r * nb + b];
            int32_t sum = sums[r * nb + b];
            for (int c = 0; c < OLC_Q8_NR; ++c)
                acc[r][c] += (float)(dot[c] - (int32_t)z[c] * sum) * (s[c] * f);
        }
    }
    for (int r = 0; r < mr; ++r)
        for (int c = 0; c < nc; ++c) y[r * ldy + c] = acc[r][c] + (bias ? bias[c] : 0.f);
}

/* One function per row count, the rows function inlined with it constant. */
static void olc_q8_tile1_scalar(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                                const int32_t *sums, const float *bias, int nc, float *y,
                                int64_t ldy) {
    olc_q8_rows_scalar(1, w, t, qa, sa, sums, bias, nc, y, ldy);
}
static void olc_q8_tile2_scalar(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                                const int32_t *sums, const float *bias, int nc, float *y,
                                int64_t ldy) {
    olc_q8_rows_scalar(2, w, t, qa, sa, sums, bias, nc, y, ldy);
}
static void olc_q8_tile3_scalar(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                                const int32_t *sums, const float *bias, int nc, float *y,
                                int64_t ldy) {
    olc_q8_rows_scalar(3, w, t, qa, sa, sums, bias, nc, y, ldy);
}
static void olc_q8_tile4_scalar(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                                const int32_t *sums, const float *bias, int nc, float *y,
                                int64_t ldy) {
    olc_q8_rows_scalar(4, w, t, qa, sa, sums, bias, nc, y, ldy);
}

#if OLC_X86
/* AVX2: the 16 columns as two halves of 8 (the steps of olc_int8_dot.h:
 * 8-bit codes split their high bit, two quads of 4-bit codes share one
 * int16 sum). */
static inline __attribute__((always_inline)) OLC_TARGET_AVX2 void olc_q8_rows_avx2(
    int mr, const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa, const int32_t *sums,
    const float *bias, int nc, float *y, int64_t ldy) {
    const int64_t nb = w->nb, block = w->block, kp = nb * block;
    const int64_t bb = olc_q8_block_bytes(block, w->packed4);
    const __m256i m15 = _mm256_set1_epi8(15);
    __m256 acc[OLC_NB_MR][2];
    for (int r = 0; r < mr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t *q = w->codes + (t * nb + b) * bb;
        const int8_t *x0 = qa + b * block;
        olc_q8_prefetch(w, t, b, bb);
        __m256i dot[OLC_NB_MR][2];
        for (int r = 0; r < mr; ++r) dot[r][0] = dot[r][1] = _mm256_setzero_si256();
        if (w->packed4) {
            for (int64_t p = 0; p < block; p += 8)
                for (int h = 0; h < 2; ++h) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(q + p * 8 + h * 32));
                    __m256i lo = _mm256_and_si256(v, m15);
                    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m15);
                    for (int r = 0; r < mr; ++r) {
                        __m256i xl = _mm256_set1_epi32(olc_q8_load4(x0 + r * kp + p));
                        __m256i xh = _mm256_set1_epi32(olc_q8_load4(x0 + r * kp + p + 4));
                        olc_i8_dot4x2_avx2(&dot[r][h], NULL, lo, xl, hi, xh);
                    }
                }
        } else {
            for (int64_t p = 0; p < block; p += 4)
                for (int h = 0; h < 2; ++h) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(q + p * 16 + h * 32));
                    for (int r = 0; r < mr; ++r) {
                        __m256i x = _mm256_set1_epi32(olc_q8_load4(x0 + r * kp + p));
                        dot[r][h] = w->split ? olc_i8_dot4_split_avx2(dot[r][h], v, x)
                                             : olc_i8_dot4_avx2(dot[r][h], v, x);
                    }
                }
        }
        const float *s = w->scales + (t * nb + b) * OLC_Q8_NR;
        const uint8_t *z = w->zp + (t * nb + b) * OLC_Q8_NR;
        for (int h = 0; h < 2; ++h) {
            __m256 vs = _mm256_loadu_ps(s + 8 * h);
            __m256i vz = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(z + 8 * h)));
            for (int r = 0; r < mr; ++r) {
                __m256i d = _mm256_sub_epi32(
                    dot[r][h], _mm256_mullo_epi32(vz, _mm256_set1_epi32(sums[r * nb + b])));
                __m256 f = _mm256_mul_ps(vs, _mm256_set1_ps(sa[r * nb + b]));
                acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), f, acc[r][h]);
            }
        }
    }
    for (int r = 0; r < mr; ++r) {
        float out[OLC_Q8_NR];
        _mm256_storeu_ps(out, acc[r][0]);
        _mm256_storeu_ps(out + 8, acc[r][1]);
        for (int c = 0; c < nc; ++c) y[r * ldy + c] = out[c] + (bias ? bias[c] : 0.f);
    }
}

OLC_TARGET_AVX2
static void olc_q8_tile1_avx2(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                              const int32_t *sums, const float *bias, int nc, float *y,
                              int64_t ldy) {
    olc_q8_rows_avx2(1, w, t, qa, sa, sums, bias, nc, y, ldy);
}
OLC_TARGET_AVX2
static void olc_q8_tile2_avx2(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                              const int32_t *sums, const float *bias, int nc, float *y,
                              int64_t ldy) {
    olc_q8_rows_avx2(2, w, t, qa, sa, sums, bias, nc, y, ldy);
}
OLC_TARGET_AVX2
static void olc_q8_tile3_avx2(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                              const int32_t *sums, const float *bias, int nc, float *y,
                              int64_t ldy) {
    olc_q8_rows_avx2(3, w, t, qa, sa, sums, bias, nc, y, ldy);
}
OLC_TARGET_AVX2
static void olc_q8_tile4_avx2(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                              const int32_t *sums, const float *bias, int nc, float *y,
                              int64_t ldy) {
    olc_q8_rows_avx2(4, w, t, qa, sa, sums, bias, nc, y, ldy);
}

#if OLC_HAVE_AVX512
/* AVX-512, with VNNI and without: one body (olc_matmul_nbits_q8.h) around
 * the level's steps of olc_int8_dot.h: olc_q8_tile<mr>_avx512 and
 * olc_q8_tile<mr>_avx512vnni. */
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#include "matmul_nbits/olc_matmul_nbits_q8.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#define OLC_LVL avx512vnni
#define OLC_LVL_ATTR OLC_TARGET_AVX512_VNNI
#include "matmul_nbits/olc_matmul_nbits_q8.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif
#endif

typedef void (*olc_q8_tile_fn)(const olc_q8_w *w, int64_t t, const int8_t *qa, const float *sa,
                               const int32_t *sums, const float *bias, int nc, float *y,
                               int64_t ldy);

/* Bytes of activation scratch the int8 engine uses for M rows. */
static int64_t olc_q8_scratch(int64_t M, int64_t nb, int64_t block) {
    return M * nb * block + M * nb * 8;
}

typedef struct {
    const olc_q8_w *w;
    const int8_t *qa;
    const float *sa;
    const int32_t *sums;
    const float *bias;
    float *y;
    int64_t M, mb, tiles, parts;
    olc_q8_tile_fn fns[OLC_NB_MR];
} olc_q8_gemm_job;

/* Tiles i0..i1 of the job's (row block, column tile) tiles, in order:
 * each streams the codes of its tiles. */
static void olc_q8_gemm_tiles(const olc_q8_gemm_job *p, int64_t i0, int64_t i1) {
    const olc_q8_w *w = p->w;
    const int64_t N = w->N, nb = w->nb, kp = nb * w->block, ct = w->tiles, M = p->M, mb = p->mb;
    for (int64_t i = i0; i < i1; ++i) {
        int64_t m0 = (i / ct) * mb, t = i % ct, n0 = t * OLC_Q8_NR;
        int64_t m1 = m0 + mb < M ? m0 + mb : M;
        int nc = (int)(N - n0 < OLC_Q8_NR ? N - n0 : OLC_Q8_NR);
        for (int64_t m = m0; m < m1; m += OLC_NB_MR) {
            int mr = (int)(m1 - m < OLC_NB_MR ? m1 - m : OLC_NB_MR);
            p->fns[mr - 1](w, t, p->qa + m * kp, p->sa + m * nb, p->sums + m * nb,
                           p->bias ? p->bias + n0 : NULL, nc, p->y + m * N + n0, N);
        }
    }
}

/* Run t of the parts runs of tiles. */
static void olc_q8_gemm_task(void *arg, ptrdiff_t task, int slot) {
    const olc_q8_gemm_job *p = (const olc_q8_gemm_job *)arg;
    int64_t i0, i1;
    (void)slot;
    olc_split(p->tiles, 1, p->parts, task, &i0, &i1);
    olc_q8_gemm_tiles(p, i0, i1);
}

/* The job of y[M, N] = a x w through int8 products, with the activations
 * already quantized (qa, sa, sums as olc_q8_quantize leaves them), at the
 * int8 level `level`.  Decode-sized M (up to 4 rows) splits only columns;
 * larger M takes (row block, column tile) tiles.  parts is left to the
 * caller. */
static olc_q8_gemm_job olc_q8_gemm_setup(const olc_q8_w *w, const int8_t *qa, const float *sa,
                                         const int32_t *sums, int64_t M, const float *bias,
                                         float *y, int level) {
    olc_q8_gemm_job job = {w, qa, sa, sums, bias, y, M, M <= OLC_NB_MR ? OLC_NB_MR : OLC_Q8_MB,
                           0, 1, {olc_q8_tile1_scalar, olc_q8_tile2_scalar,
                                  olc_q8_tile3_scalar, olc_q8_tile4_scalar}};
#if OLC_X86
    if (level == OLC_AVX2) {
        job.fns[0] = olc_q8_tile1_avx2; job.fns[1] = olc_q8_tile2_avx2;
        job.fns[2] = olc_q8_tile3_avx2; job.fns[3] = olc_q8_tile4_avx2;
    }
#if OLC_HAVE_AVX512
    if (level == OLC_AVX512) {
        job.fns[0] = olc_q8_tile1_avx512; job.fns[1] = olc_q8_tile2_avx512;
        job.fns[2] = olc_q8_tile3_avx512; job.fns[3] = olc_q8_tile4_avx512;
    }
    if (level == OLC_AVX512_VNNI) {
        job.fns[0] = olc_q8_tile1_avx512vnni; job.fns[1] = olc_q8_tile2_avx512vnni;
        job.fns[2] = olc_q8_tile3_avx512vnni; job.fns[3] = olc_q8_tile4_avx512vnni;
    }
#endif
#endif
    job.tiles = (M + job.mb - 1) / job.mb * w->tiles;
    return job;
}

/* Parts for `tiles` tiles over nthreads threads: OLC_NB_RUNS runs a thread
 * (a late thread holds up a quarter of its share), one part alone. */
static int64_t olc_q8_parts(int64_t tiles, int nthreads) {
    if (nthreads <= 1 || tiles <= 1) return 1;
    return tiles < OLC_NB_RUNS * nthreads ? tiles : OLC_NB_RUNS * nthreads;
}

/* y[M, N] = a x w (see olc_q8_gemm_setup), over nthreads threads. */
static void olc_q8_gemm(const olc_q8_w *w, const int8_t *qa, const float *sa,
                        const int32_t *sums, int64_t M, const float *bias, float *y, int level,
                        int nthreads) {
    olc_q8_gemm_job job = olc_q8_gemm_setup(w, qa, sa, sums, M, bias, y, level);
    if (job.tiles < nthreads) nthreads = (int)(job.tiles > 0 ? job.tiles : 1);
    job.parts = olc_q8_parts(job.tiles, nthreads);
    olc_parallel_for(job.parts, olc_q8_gemm_task, &job, nthreads);
}

#define OLC_Q8_QROWS 8

typedef struct {
    const olc_q8_w *w;
    const float *a;
    int64_t M;
    int level;
    int8_t *qa;
    float *sa;
    int32_t *sums;
    int bad; /* set when a block is not finite */
} olc_q8_quantize_job;

/* Quantizes row m of a[., w->K] at the int8 level `level` into qa, sa and
 * sums (rows w->nb * w->block codes and w->nb blocks apart); returns 1
 * when a block is not finite. */
static int olc_q8_quantize_row(const olc_q8_w *w, const float *a, int64_t m, int level,
                               int8_t *qa, float *sa, int32_t *sums) {
#if OLC_X86
#if OLC_HAVE_AVX512
    if (level >= OLC_AVX512) return olc_q8_quantize_avx512(a, w->K, w->nb, w->block, m, qa, sa, sums);
#endif
    if (level == OLC_AVX2) return olc_q8_quantize_avx2(a, w->K, w->nb, w->block, m, qa, sa, sums);
#endif
    return olc_q8_quantize(a, w->K, w->nb, w->block, m, m + 1, qa, sa, sums);
}

/* Quantizes rows OLC_Q8_QROWS task .. of a. */
static void olc_q8_quantize_task(void *arg, ptrdiff_t task, int slot) {
    olc_q8_quantize_job *p = (olc_q8_quantize_job *)arg;
    const int64_t m1 = (task + 1) * OLC_Q8_QROWS < p->M ? (task + 1) * OLC_Q8_QROWS : p->M;
    int bad = 0;
    (void)slot;
    for (int64_t m = task * OLC_Q8_QROWS; m < m1; ++m)
        bad |= olc_q8_quantize_row(p->w, p->a, m, p->level, p->qa, p->sa, p->sums);
    if (bad) __atomic_fetch_or(&p->bad, bad, __ATOMIC_RELAXED);
}

/* The whole int8 product at a SIMD level (run at olc_q8_level): quantizes
 * a[M, K] once into scratch of its own (rows split over threads from
 * 2 * OLC_Q8_QROWS rows), then multiplies.  Returns 0, -1 when out of
 * memory, 1 when an activation block is not finite (nothing written: the
 * caller keeps float semantics). */
static int olc_q8_run(const olc_q8_w *w, const float *a, int64_t M, const float *bias, float *y,
                      int level, int nthreads) {
    level = olc_q8_level(level);
    const int64_t nb = w->nb, kp = nb * w->block;
    int8_t *qa = (int8_t *)malloc((size_t)olc_q8_scratch(M, nb, w->block));
    if (!qa) return -1;
    float *sa = (float *)(qa + M * kp); /* kp is a multiple of 16 */
    int32_t *sums = (int32_t *)(sa + M * nb);
    olc_q8_quantize_job job = {w, a, M, level, qa, sa, sums, 0};
    olc_parallel_for((M + OLC_Q8_QROWS - 1) / OLC_Q8_QROWS, olc_q8_quantize_task, &job,
                     M >= 2 * OLC_Q8_QROWS ? nthreads : 1);
    int bad = job.bad;
    if (!bad) olc_q8_gemm(w, qa, sa, sums, M, bias, y, level, nthreads);
    free(qa);
    return bad;
}

#endif
