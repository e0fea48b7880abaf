/* The vector vocabulary every core shares: half and bfloat16 scalars,
 * 8-wide (AVX2) and 16-wide (AVX-512) loads and stores of float32, float16
 * and bfloat16 as float32 vectors, horizontal sums, and whole-array
 * widening to float32 and narrowing back.
 *
 * Rounding is the same everywhere: float32 -> float16 and -> bfloat16
 * round to nearest even; NaN stays a quiet NaN with its high payload bits.
 * The scalar functions and the vector ones give the same bits, with one
 * exception: a signaling float16 NaN widened by olc_h2f stays signaling,
 * while the F16C instructions quiet it (the array widenings below take
 * their tails through olc_h2f).
 */
#ifndef OLC_VEC_H
#define OLC_VEC_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"

/* ---- scalar half / bfloat16 conversions (round to nearest even) ---- */

static inline float olc_h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0) {
        if (m == 0) bits = sign;
        else { float f = (float)m * 5.9604644775390625e-08f; memcpy(&bits, &f, 4); bits |= sign; }
    } else if (e == 31) bits = sign | 0x7f800000 | (m << 13);
    else bits = sign | ((e + 112) << 23) | (m << 13);
    float f; memcpy(&f, &bits, 4); return f;
}
static inline uint16_t olc_f2h(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000; x &= 0x7fffffff;
    if (x > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((x >> 13) & 0x3ff));
    if (x >= 0x477ff000) return (uint16_t)(sign | 0x7c00);
    if (x < 0x38800000) { float a; memcpy(&a, &x, 4); return (uint16_t)(sign | (uint16_t)lrintf(a * 16777216.0f)); }
    uint32_t r = x + 0xfff + ((x >> 13) & 1) - 0x38000000;
    return (uint16_t)(sign | (r >> 13));
}
static inline float olc_bf2f(uint16_t h) { uint32_t b = (uint32_t)h << 16; float f; memcpy(&f, &b, 4); return f; }
static inline uint16_t olc_f2bf(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* ---- vectors ---- */

/* Loads and stores of 8 (AVX2) or 16 (AVX-512) elements as float32.
 * bf16 -> f32 is a 16-bit shift; f32 -> bf16 adds 0x7fff + lsb (nearest
 * even) and keeps NaN a quiet NaN, as olc_f2bf. */
#if OLC_X86
static inline OLC_TARGET_AVX2 __m256 olc_ld_f32_avx2(const float *p) { return _mm256_loadu_ps(p); }
static inline OLC_TARGET_AVX2 void olc_st_f32_avx2(float *p, __m256 v) { _mm256_storeu_ps(p, v); }
static inline OLC_TARGET_AVX2 __m256 olc_ld_f16_avx2(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline OLC_TARGET_AVX2 void olc_st_f16_avx2(uint16_t *p, __m256 v) {
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static inline OLC_TARGET_AVX2 __m256 olc_ld_bf16_avx2(const uint16_t *p) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
static inline OLC_TARGET_AVX2 void olc_st_bf16_avx2(uint16_t *p, __m256 v) {
    __m256i b = _mm256_castps_si256(v), hi = _mm256_srli_epi32(b, 16);
    __m256i rnd = _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, rnd), 16);
    __m256i qnan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    r = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(qnan),
                                             _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1)));
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512 olc_ld_f32_avx512(const float *p, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, p);
}
static inline OLC_TARGET_AVX512 void olc_st_f32_avx512(float *p, __mmask16 m, __m512 v) {
    _mm512_mask_storeu_ps(p, m, v);
}
static inline OLC_TARGET_AVX512 __m512 olc_ld_f16_avx512(const uint16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
static inline OLC_TARGET_AVX512 void olc_st_f16_avx512(uint16_t *p, __mmask16 m, __m512 v) {
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static inline OLC_TARGET_AVX512 __m512 olc_ld_bf16_avx512(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}
static inline OLC_TARGET_AVX512 void olc_st_bf16_avx512(uint16_t *p, __mmask16 m, __m512 v) {
    __m512i b = _mm512_castps_si512(v), hi = _mm512_srli_epi32(b, 16);
    __m512i rnd = _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, rnd), 16);
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
    _mm256_mask_storeu_epi16(p, m, _mm512_cvtepi32_epi16(r));
}
#endif

#if OLC_X86
/* Sum of the 8 lanes: high half onto low, then pairs. */
static inline OLC_TARGET_AVX2 float olc_hsum_ps_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

/* ---- arrays: n half or bfloat16 values to float32 and back ---- */

static void olc_widen_f16_scalar(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = olc_h2f(x[i]);
}
static void olc_narrow_f16_scalar(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = olc_f2h(x[i]);
}
static void olc_widen_bf16_scalar(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = olc_bf2f(x[i]);
}
static void olc_narrow_bf16_scalar(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = olc_f2bf(x[i]);
}

#if OLC_X86
static OLC_TARGET_AVX2 void olc_widen_f16_avx2(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, olc_ld_f16_avx2(x + i));
    if (i < n) olc_widen_f16_scalar(x + i, y + i, n - i);
}
static OLC_TARGET_AVX2 void olc_narrow_f16_avx2(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) olc_st_f16_avx2(y + i, _mm256_loadu_ps(x + i));
    if (i < n) olc_narrow_f16_scalar(x + i, y + i, n - i);
}
static OLC_TARGET_AVX2 void olc_widen_bf16_avx2(const uint16_t *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, olc_ld_bf16_avx2(x + i));
    if (i < n) olc_widen_bf16_scalar(x + i, y + i, n - i);
}
static OLC_TARGET_AVX2 void olc_narrow_bf16_avx2(const float *x, uint16_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) olc_st_bf16_avx2(y + i, _mm256_loadu_ps(x + i));
    if (i < n) olc_narrow_bf16_scalar(x + i, y + i, n - i);
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
/* The mask of the first n - i lanes of 16 (all of them when n - i >= 16). */
static inline __mmask16 olc_tail_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}
static OLC_TARGET_AVX512 void olc_widen_f16_avx512(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = olc_tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, k, olc_ld_f16_avx512(x + i, k));
    }
}
static OLC_TARGET_AVX512 void olc_narrow_f16_avx512(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = olc_tail_mask16(n - i);
        olc_st_f16_avx512(y + i, k, _mm512_maskz_loadu_ps(k, x + i));
    }
}
static OLC_TARGET_AVX512 void olc_widen_bf16_avx512(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = olc_tail_mask16(n - i);
        _mm512_mask_storeu_ps(y + i, k, olc_ld_bf16_avx512(x + i, k));
    }
}
static OLC_TARGET_AVX512 void olc_narrow_bf16_avx512(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = olc_tail_mask16(n - i);
        olc_st_bf16_avx512(y + i, k, _mm512_maskz_loadu_ps(k, x + i));
    }
}
#endif

#endif
