/* Gather of block-quantized rows (com.microsoft GatherBlockQuantized).
 *
 * The table is UINT8 [V, inner..., P]: each byte packs 8/bits codes, low
 * bits first, so a row holds D = P * 8 / bits codes.  Codes of a row are
 * grouped in blocks of `block` (a power of two >= 16, the last one may be
 * short); each group g has a scale (float32 or float16) and a zero point
 * (packed like the codes, ceil(G / (8/bits)) bytes a row, or 2^(bits-1)
 * when absent).  Output row r (of n_idx * inner) is source row
 * idx[r / inner] * inner + r % inner, dequantized as
 *     y = (float)(code - zero_point) * scale
 * and stored as float32, or rounded once to float16.  An index below -V or
 * at least V gives a row of zeros (ONNX Runtime's CPU kernel does so);
 * negative indices wrap.
 *
 * API: olc_gbq_select(bits, out_f16, level) -> olc_gbq_fn, which writes
 * output rows [r0, r1).  One multiply per element at every level, so the
 * SIMD paths and the scalar twin give the same bits, and rows are
 * independent, so any split over threads does too.  No scratch memory.
 */
#ifndef OLC_GATHER_BLOCK_QUANTIZED_H
#define OLC_GATHER_BLOCK_QUANTIZED_H
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_math.h"

typedef struct {
    const uint8_t *data;   /* [V * inner, P] */
    const void *idx;       /* int32 or int64, n_idx of them */
    const void *scales;    /* [V * inner, G], float32 or float16 */
    const uint8_t *zp;     /* [V * inner, zp_bytes] or NULL */
    void *out;             /* [n_idx * inner, D], float32 or float16 */
    int64_t V, inner, P, D, G, zp_bytes, block;
    int idx64, scale_f16;
} olc_gbq_args;

typedef void (*olc_gbq_fn)(const olc_gbq_args *a, int64_t r0, int64_t r1);

/* Source row of output row r, or -1 for a row of zeros. */
static inline int64_t olc_gbq_src_row_(const olc_gbq_args *a, int64_t r) {
    int64_t n = r / a->inner, k = r - n * a->inner;
    int64_t i = a->idx64 ? ((const int64_t *)a->idx)[n] : (int64_t)((const int32_t *)a->idx)[n];
    if (i < 0) i += a->V;
    if (i < 0 || i >= a->V) return -1;
    return i * a->inner + k;
}

static inline float olc_gbq_scale_(const olc_gbq_args *a, int64_t row, int64_t g) {
    return a->scale_f16 ? olc_h2f(((const uint16_t *)a->scales)[row * a->G + g])
                        : ((const float *)a->scales)[row * a->G + g];
}

static inline int olc_gbq_zp_(const olc_gbq_args *a, int64_t row, int64_t g, int bits) {
    if (!a->zp) return 1 << (bits - 1);
    int per = 8 / bits;
    uint8_t b = a->zp[row * a->zp_bytes + g / per];
    return (b >> ((g % per) * bits)) & ((1 << bits) - 1);
}

static inline int olc_gbq_code_(const uint8_t *src, int64_t j, int bits) {
    int per = 8 / bits;
    return (src[j / per] >> ((j % per) * bits)) & ((1 << bits) - 1);
}

static inline void olc_gbq_zero_row_(const olc_gbq_args *a, int out_f16, int64_t r) {
    size_t width = out_f16 ? 2 : 4;
    memset((char *)a->out + (size_t)r * (size_t)a->D * width, 0, (size_t)a->D * width);
}

/* Codes [j0, j1) of a row into out (float32 or float16 elements). */
static inline void olc_gbq_span_scalar_(const uint8_t *src, void *out, int out_f16, int64_t j0,
                                        int64_t j1, int bits, int zp, float scale) {
    for (int64_t j = j0; j < j1; ++j) {
        float v = (float)(olc_gbq_code_(src, j, bits) - zp) * scale;
        if (out_f16) ((uint16_t *)out)[j] = olc_f2h(v);
        else ((float *)out)[j] = v;
    }
}

/* The scalar twin: every bit width and output type. */
static void olc_gbq_rows_scalar(const olc_gbq_args *a, int bits, int out_f16, int64_t r0,
                                int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        int64_t row = olc_gbq_src_row_(a, r);
        if (row < 0) { olc_gbq_zero_row_(a, out_f16, r); continue; }
        const uint8_t *src = a->data + row * a->P;
        void *out = (char *)a->out + r * a->D * (out_f16 ? 2 : 4);
        for (int64_t g = 0; g < a->G; ++g) {
            int64_t j0 = g * a->block, j1 = j0 + a->block < a->D ? j0 + a->block : a->D;
            olc_gbq_span_scalar_(src, out, out_f16, j0, j1, bits, olc_gbq_zp_(a, row, g, bits),
                                 olc_gbq_scale_(a, row, g));
        }
    }
}

#define OLC_GBQ_SCALAR_FN_(bits, f16, name)                                   \
    static void name(const olc_gbq_args *a, int64_t r0, int64_t r1) {         \
        olc_gbq_rows_scalar(a, bits, f16, r0, r1);                            \
    }
OLC_GBQ_SCALAR_FN_(2, 0, olc_gbq_b2_f32_scalar)
OLC_GBQ_SCALAR_FN_(2, 1, olc_gbq_b2_f16_scalar)
OLC_GBQ_SCALAR_FN_(4, 0, olc_gbq_b4_f32_scalar)
OLC_GBQ_SCALAR_FN_(4, 1, olc_gbq_b4_f16_scalar)
OLC_GBQ_SCALAR_FN_(8, 0, olc_gbq_b8_f32_scalar)
OLC_GBQ_SCALAR_FN_(8, 1, olc_gbq_b8_f16_scalar)

/* The vector levels: a group starts at a multiple of 16 codes (a whole
 * byte), so 16 codes at a time widen to 32-bit integers, lose the zero
 * point, convert exactly to float and take one multiply; the short tail
 * of a row's last group goes through the scalar span. */
#if OLC_X86
/* 16 codes from 8 bytes (4-bit) or 16 bytes (8-bit), as bytes in order. */
static inline OLC_TARGET_AVX2 __m128i olc_gbq_codes16_avx2_(const uint8_t *p, int bits) {
    if (bits == 8) return _mm_loadu_si128((const __m128i *)p);
    __m128i b = _mm_loadl_epi64((const __m128i *)p), m = _mm_set1_epi8(0x0f);
    /* element 2k is byte k's low nibble, 2k+1 its high one */
    return _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
}

#define OLC_GBQ_AVX2_FN_(bits, f16, name)                                     \
    static OLC_TARGET_AVX2 void name(const olc_gbq_args *a, int64_t r0, int64_t r1) { \
        for (int64_t r = r0; r < r1; ++r) {                                   \
            int64_t row = olc_gbq_src_row_(a, r);                             \
            if (row < 0) { olc_gbq_zero_row_(a, f16, r); continue; }          \
            const uint8_t *src = a->data + row * a->P;                        \
            float *o32 = (float *)a->out + r * a->D;                          \
            uint16_t *o16 = (uint16_t *)a->out + r * a->D;                    \
            for (int64_t g = 0; g < a->G; ++g) {                              \
                int64_t j = g * a->block;                                     \
                int64_t j1 = j + a->block < a->D ? j + a->block : a->D;       \
                int zp = olc_gbq_zp_(a, row, g, bits);                        \
                float scale = olc_gbq_scale_(a, row, g);                      \
                __m256i vz = _mm256_set1_epi32(zp);                           \
                __m256 vs = _mm256_set1_ps(scale);                            \
                for (; j + 16 <= j1; j += 16) {                               \
                    __m128i c = olc_gbq_codes16_avx2_(src + j * bits / 8, bits); \
                    __m256 lo = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32( \
                        _mm256_cvtepu8_epi32(c), vz)), vs);                   \
                    __m256 hi = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32( \
                        _mm256_cvtepu8_epi32(_mm_srli_si128(c, 8)), vz)), vs); \
                    if (f16) {                                                \
                        olc_st_f16_avx2(o16 + j, lo);                         \
                        olc_st_f16_avx2(o16 + j + 8, hi);                     \
                    } else {                                                  \
                        _mm256_storeu_ps(o32 + j, lo);                        \
                        _mm256_storeu_ps(o32 + j + 8, hi);                    \
                    }                                                         \
                }                                                             \
                olc_gbq_span_scalar_(src, f16 ? (void *)o16 : (void *)o32, f16, j, j1, bits, \
                                     zp, scale);                              \
            }                                                                 \
        }                                                                     \
    }
OLC_GBQ_AVX2_FN_(4, 0, olc_gbq_b4_f32_avx2)
OLC_GBQ_AVX2_FN_(4, 1, olc_gbq_b4_f16_avx2)
OLC_GBQ_AVX2_FN_(8, 0, olc_gbq_b8_f32_avx2)
OLC_GBQ_AVX2_FN_(8, 1, olc_gbq_b8_f16_avx2)
#endif

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_GBQ_AVX512_FN_(bits, f16, name)                                   \
    static OLC_TARGET_AVX512 void name(const olc_gbq_args *a, int64_t r0, int64_t r1) { \
        for (int64_t r = r0; r < r1; ++r) {                                   \
            int64_t row = olc_gbq_src_row_(a, r);                             \
            if (row < 0) { olc_gbq_zero_row_(a, f16, r); continue; }          \
            const uint8_t *src = a->data + row * a->P;                        \
            float *o32 = (float *)a->out + r * a->D;                          \
            uint16_t *o16 = (uint16_t *)a->out + r * a->D;                    \
            for (int64_t g = 0; g < a->G; ++g) {                              \
                int64_t j = g * a->block;                                     \
                int64_t j1 = j + a->block < a->D ? j + a->block : a->D;       \
                int zp = olc_gbq_zp_(a, row, g, bits);                        \
                float scale = olc_gbq_scale_(a, row, g);                      \
                __m512i vz = _mm512_set1_epi32(zp);                           \
                __m512 vs = _mm512_set1_ps(scale);                            \
                for (; j + 16 <= j1; j += 16) {                               \
                    __m128i c = olc_gbq_codes16_avx2_(src + j * bits / 8, bits); \
                    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32( \
                        _mm512_cvtepu8_epi32(c), vz)), vs);                   \
                    if (f16)                                                  \
                        _mm256_storeu_si256((__m256i *)(o16 + j),             \
                            _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));   \
                    else                                                      \
                        _mm512_storeu_ps(o32 + j, v);                         \
                }                                                             \
                olc_gbq_span_scalar_(src, f16 ? (void *)o16 : (void *)o32, f16, j, j1, bits, \
                                     zp, scale);                              \
            }                                                                 \
        }                                                                     \
    }
OLC_GBQ_AVX512_FN_(4, 0, olc_gbq_b4_f32_avx512)
OLC_GBQ_AVX512_FN_(4, 1, olc_gbq_b4_f16_avx512)
OLC_GBQ_AVX512_FN_(8, 0, olc_gbq_b8_f32_avx512)
OLC_GBQ_AVX512_FN_(8, 1, olc_gbq_b8_f16_avx512)
#endif

/* The level the function for (bits, level) runs at: 2-bit rows are scalar. */
static inline int olc_gbq_level(int bits, int level) {
    level = olc_build_level(level);
    return bits == 2 ? OLC_SCALAR : level;
}

static inline olc_gbq_fn olc_gbq_select(int bits, int out_f16, int level) {
    level = olc_gbq_level(bits, level);
#if OLC_X86 && OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        if (bits == 4) return out_f16 ? olc_gbq_b4_f16_avx512 : olc_gbq_b4_f32_avx512;
        if (bits == 8) return out_f16 ? olc_gbq_b8_f16_avx512 : olc_gbq_b8_f32_avx512;
    }
#endif
#if OLC_X86
    if (level >= OLC_AVX2) {
        if (bits == 4) return out_f16 ? olc_gbq_b4_f16_avx2 : olc_gbq_b4_f32_avx2;
        if (bits == 8) return out_f16 ? olc_gbq_b8_f16_avx2 : olc_gbq_b8_f32_avx2;
    }
#endif
    switch (bits) {
    case 2: return out_f16 ? olc_gbq_b2_f16_scalar : olc_gbq_b2_f32_scalar;
    case 4: return out_f16 ? olc_gbq_b4_f16_scalar : olc_gbq_b4_f32_scalar;
    case 8: return out_f16 ? olc_gbq_b8_f16_scalar : olc_gbq_b8_f32_scalar;
    default: return 0;
    }
}

#endif
