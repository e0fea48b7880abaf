/* Gather of block-quantized elements whose data has a typed element type
 * (com.microsoft GatherBlockQuantized with INT4, UINT4, FLOAT8* or
 * FLOAT4E2M1 data).
 *
 * Data arrives one element a byte (as ml_dtypes holds them); `lut` maps each
 * byte to its float value, so one loop serves every type.  Data has any rank
 * r <= OLC_GBQT_MAX_RANK; the output is data.shape[:g] + indices.shape +
 * data.shape[g+1:].  Element (a_0, ..., a_{r-1}) takes the scale at
 *     sum_k contrib_k(a_k),  contrib_k(a) = (k == q ? a / block : a) * sstride[k]
 * (sstride 0 on an axis the scales broadcast) and is dequantized as
 *     y = (lut[data] - lut[zero_point]) * scale      (zero point 0 when absent)
 * in float32, then stored as float32, float16 or bfloat16 (rounded once).
 * The subtraction is exact (small integers), so this is one multiply per
 * element, as ONNX Runtime computes it.  Indices below -A or at least A give
 * a slice of zeros; negative ones wrap.
 *
 * Output row r (of M * n_idx) is the slice data[m, idx[n], ...] of
 * B = J * L elements: J runs of L elements along the last axis (L = 1 and
 * J = 1 when the gather axis is the last one).  Rows are independent, so any
 * split over threads gives the same bits.  No scratch.
 *
 * API: olc_gbqt_select(level) -> the row function (olc_gbqt_fn) writing
 * output rows [r0, r1).  The row loop is one body
 * (olc_gather_block_typed_rows.h) compiled per level around the level's
 * span function: the vector levels look 8 or 16 values up at once with a
 * gather from the table, then subtract and multiply as the scalar twin
 * does (no fused multiply-add), so every level gives the same bits.
 */
#ifndef OLC_GATHER_BLOCK_TYPED_H
#define OLC_GATHER_BLOCK_TYPED_H
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

#define OLC_GBQT_MAX_RANK 16

typedef struct {
    const uint8_t *data;   /* one byte an element, data's shape */
    const void *idx;       /* int32 or int64, n_idx of them */
    const void *scales;    /* dtype */
    const uint8_t *zp;     /* one byte an element, the scales' shape, or NULL */
    const float *lut;      /* 256 entries: byte -> value */
    void *out;             /* dtype */
    int64_t dims[OLC_GBQT_MAX_RANK];
    int64_t sstride[OLC_GBQT_MAX_RANK];  /* scale stride per data axis; 0: broadcast */
    int64_t n_idx, M, A, J, L, block;
    int rank, g, q, idx64, dtype;      /* dtype: OLC_FLOAT, OLC_FLOAT16 or OLC_BFLOAT16 */
} olc_gbqt_args;

typedef void (*olc_gbqt_fn)(const olc_gbqt_args *a, int64_t r0, int64_t r1);

static inline int64_t olc_gbqt_contrib(const olc_gbqt_args *a, int k, int64_t i) {
    return (k == a->q ? i / a->block : i) * a->sstride[k];
}

static inline float olc_gbqt_scale(const olc_gbqt_args *a, int64_t s) {
    if (a->dtype == OLC_FLOAT) return ((const float *)a->scales)[s];
    if (a->dtype == OLC_FLOAT16) return olc_h2f(((const uint16_t *)a->scales)[s]);
    return olc_bf2f(((const uint16_t *)a->scales)[s]);
}

/* ---- each level's span: y[e] = (lut[src[e]] - zp) * scale for e in
 * [0, n), y float32, float16 or bfloat16 (dtype) ---- */

static inline void olc_gbqt_span_scalar(const float *lut, const uint8_t *src, float zp,
                                        float scale, void *out, int64_t n, int dtype) {
    if (dtype == OLC_FLOAT) {
        float *y = (float *)out;
        for (int64_t e = 0; e < n; ++e) y[e] = (lut[src[e]] - zp) * scale;
    } else if (dtype == OLC_FLOAT16) {
        uint16_t *y = (uint16_t *)out;
        for (int64_t e = 0; e < n; ++e) y[e] = olc_f2h((lut[src[e]] - zp) * scale);
    } else {
        uint16_t *y = (uint16_t *)out;
        for (int64_t e = 0; e < n; ++e) y[e] = olc_f2bf((lut[src[e]] - zp) * scale);
    }
}

#if OLC_X86
static inline OLC_TARGET_AVX2 void olc_gbqt_span_avx2(const float *lut, const uint8_t *src,
                                                      float zp, float scale, void *out,
                                                      int64_t n, int dtype) {
    const __m256 vz = _mm256_set1_ps(zp), vs = _mm256_set1_ps(scale);
    int64_t e = 0;
    for (; e + 8 <= n; e += 8) {
        __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + e)));
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_i32gather_ps(lut, c, 4), vz), vs);
        if (dtype == OLC_FLOAT) olc_st_f32_avx2((float *)out + e, v);
        else if (dtype == OLC_FLOAT16) olc_st_f16_avx2((uint16_t *)out + e, v);
        else olc_st_bf16_avx2((uint16_t *)out + e, v);
    }
    olc_gbqt_span_scalar(lut, src + e, zp, scale,
                         (char *)out + e * (dtype == OLC_FLOAT ? 4 : 2), n - e, dtype);
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 void olc_gbqt_span_avx512(const float *lut, const uint8_t *src,
                                                          float zp, float scale, void *out,
                                                          int64_t n, int dtype) {
    const __m512 vz = _mm512_set1_ps(zp), vs = _mm512_set1_ps(scale);
    for (int64_t e = 0; e < n; e += 16) {
        __mmask16 m = n - e >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - e)) - 1);
        __m512i c = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src + e));
        __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, c, lut, 4);
        v = _mm512_mul_ps(_mm512_sub_ps(v, vz), vs);
        if (dtype == OLC_FLOAT) olc_st_f32_avx512((float *)out + e, m, v);
        else if (dtype == OLC_FLOAT16) olc_st_f16_avx512((uint16_t *)out + e, m, v);
        else olc_st_bf16_avx512((uint16_t *)out + e, m, v);
    }
}
#endif

/* ---- the row functions, olc_gbqt_rows_<level> ---- */
#define OLC_BODY "gather_block_quantized/olc_gather_block_typed_rows.h"
#include "common/olc_each_level.h"

/* The row function at a level (capped to the levels this build has). */
static inline olc_gbqt_fn olc_gbqt_select(int level) {
    return OLC_LEVEL_FN(olc_build_level(level), olc_gbqt_rows);
}

#endif
