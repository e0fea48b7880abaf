/* Gather of block-quantized rows (com.microsoft GatherBlockQuantized).
 *
 * The table is UINT8 [V, inner..., P]: each byte packs 8/bits codes, low
 * bits first, so a row holds D = P * 8 / bits codes.  Codes of a row are
 * grouped in blocks of `block` (a power of two >= 16, the last one may be
 * short); each group g has a scale (float32 or float16) and a zero point
 * (packed like the codes, ceil(G / (8/bits)) bytes a row, or 2^(bits-1)
 * when absent; the rules of engines/block_codes/olc_block_codes.h).  Output
 * row r (of n_idx * inner) is source row idx[r / inner] * inner + r % inner,
 * dequantized as
 *     y = (float)(code - zero_point) * scale
 * and stored as float32, or rounded once to float16 (dtype OLC_FLOAT or
 * OLC_FLOAT16: the scales' type and the output's).  An index below -V or at
 * least V gives a row of zeros (ONNX Runtime's CPU kernel does so);
 * negative indices wrap.
 *
 * API: olc_gbq_select(bits, dtype, level) -> olc_gbq_fn, which writes output rows
 * [r0, r1) of the olc_gbq_args.  The row loop is one body
 * (olc_gather_block_quantized_rows.h) compiled per level around the
 * level's group function (olc_gbq_group_<level>); 2-bit rows run at the
 * portable level.  One multiply per element at every level, so the SIMD paths and
 * the scalar twin give the same bits, and rows are independent, so any
 * split over threads does too.  No scratch memory.
 */
#ifndef OLC_GATHER_BLOCK_QUANTIZED_H
#define OLC_GATHER_BLOCK_QUANTIZED_H
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"
#include "engines/block_codes/olc_block_codes.h"

typedef struct {
    const uint8_t *data;   /* [V * inner, P] */
    const void *idx;       /* int32 or int64, n_idx of them */
    const void *scales;    /* [V * inner, G], dtype */
    const uint8_t *zp;     /* [V * inner, zp_bytes] or NULL */
    void *out;             /* [n_idx * inner, D], dtype */
    int64_t V, inner, P, D, G, zp_bytes, block;
    int idx64, bits, dtype; /* dtype: OLC_FLOAT or OLC_FLOAT16 */
} olc_gbq_args;

typedef void (*olc_gbq_fn)(const olc_gbq_args *a, int64_t r0, int64_t r1);

/* Source row of output row r, or -1 for a row of zeros. */
static inline int64_t olc_gbq_src_row(const olc_gbq_args *a, int64_t r) {
    int64_t n = r / a->inner, k = r - n * a->inner;
    int64_t i = a->idx64 ? ((const int64_t *)a->idx)[n] : (int64_t)((const int32_t *)a->idx)[n];
    if (i < 0) i += a->V;
    if (i < 0 || i >= a->V) return -1;
    return i * a->inner + k;
}

static inline float olc_gbq_scale(const olc_gbq_args *a, int64_t row, int64_t g) {
    return a->dtype == OLC_FLOAT16 ? olc_h2f(((const uint16_t *)a->scales)[row * a->G + g])
                                   : ((const float *)a->scales)[row * a->G + g];
}

static inline void olc_gbq_zero_row(const olc_gbq_args *a, int f16, int64_t r) {
    size_t width = f16 ? 2 : 4;
    memset((char *)a->out + (size_t)r * (size_t)a->D * width, 0, (size_t)a->D * width);
}

/* Codes [j0, j1) of a row into out (float32 or float16 elements). */
static inline void olc_gbq_span(const uint8_t *src, int bits, int f16, int64_t j0, int64_t j1,
                                int zp, float scale, void *out) {
    for (int64_t j = j0; j < j1; ++j) {
        float v = (float)((int)olc_bc_code(src, bits, j) - zp) * scale;
        if (f16) ((uint16_t *)out)[j] = olc_f2h(v);
        else ((float *)out)[j] = v;
    }
}

/* ---- each level's group: codes [j0, j1) of a row, dequantized (j0 a
 * multiple of 16: whole bytes).  The vector levels widen 16 codes at a time
 * to 32-bit integers, take off the zero point, convert exactly to float
 * and multiply once; the tail goes through the portable span, and 2-bit
 * codes (which run at the portable level) through it entirely. ---- */

static inline void olc_gbq_group_scalar(const uint8_t *src, int bits, int f16, int64_t j0,
                                        int64_t j1, int zp, float scale, void *out) {
    olc_gbq_span(src, bits, f16, j0, j1, zp, scale, out);
}

#if OLC_X86
static inline OLC_TARGET_AVX2 void olc_gbq_group_avx2(const uint8_t *src, int bits, int f16,
                                                      int64_t j0, int64_t j1, int zp,
                                                      float scale, void *out) {
    int64_t j = j0;
    if (bits != 2) {
        const __m256i vz = _mm256_set1_epi32(zp);
        const __m256 vs = _mm256_set1_ps(scale);
        for (; j + 16 <= j1; j += 16) {
            __m128i c = olc_bc_codes16(src, bits, j);
            __m256i c0 = _mm256_cvtepu8_epi32(c), c1 = _mm256_cvtepu8_epi32(_mm_srli_si128(c, 8));
            __m256 lo = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(c0, vz)), vs);
            __m256 hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(c1, vz)), vs);
            if (f16) {
                olc_st_f16_avx2((uint16_t *)out + j, lo);
                olc_st_f16_avx2((uint16_t *)out + j + 8, hi);
            } else {
                olc_st_f32_avx2((float *)out + j, lo);
                olc_st_f32_avx2((float *)out + j + 8, hi);
            }
        }
    }
    olc_gbq_span(src, bits, f16, j, j1, zp, scale, out);
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 void olc_gbq_group_avx512(const uint8_t *src, int bits, int f16,
                                                          int64_t j0, int64_t j1, int zp,
                                                          float scale, void *out) {
    int64_t j = j0;
    if (bits != 2) {
        const __m512i vz = _mm512_set1_epi32(zp);
        const __m512 vs = _mm512_set1_ps(scale);
        for (; j + 16 <= j1; j += 16) {
            __m512i c = _mm512_cvtepu8_epi32(olc_bc_codes16(src, bits, j));
            __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(c, vz)), vs);
            if (f16)
                olc_st_f16_avx512((uint16_t *)out + j, (__mmask16)0xffff, v);
            else
                olc_st_f32_avx512((float *)out + j, (__mmask16)0xffff, v);
        }
    }
    olc_gbq_span(src, bits, f16, j, j1, zp, scale, out);
}
#endif

/* ---- the row functions, olc_gbq_rows_<level> ---- */
#define OLC_BODY "gather_block_quantized/olc_gather_block_quantized_rows.h"
#include "common/olc_each_level.h"

/* The level the function for (bits, level) runs at: 2-bit rows are scalar. */
static inline int olc_gbq_level(int bits, int level) {
    level = olc_build_level(level);
    return bits == 2 ? OLC_SCALAR : level;
}

/* The row function for bits (2, 4 or 8) and dtype (OLC_FLOAT or
 * OLC_FLOAT16) at a level, or NULL. */
static inline olc_gbq_fn olc_gbq_select(int bits, int dtype, int level) {
    if ((bits != 2 && bits != 4 && bits != 8) || (dtype != OLC_FLOAT && dtype != OLC_FLOAT16))
        return 0;
    return OLC_LEVEL_FN(olc_gbq_level(bits, level), olc_gbq_rows);
}

#endif
