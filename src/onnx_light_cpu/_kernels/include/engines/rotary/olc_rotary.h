/* Rotary position embedding (RoPE) over rows of [B, S, N, H] tensors.
 *
 * Row r = (b, s, n) of x is rotated with the cos/sin row pos[b, s] of the
 * caches ([P, half], half = rotary_dim / 2):
 *   non-interleaved, pairs (i, i + half):  y_i = x_i c_i - x_{i+half} s_i,
 *                                          y_{i+half} = x_i s_i + x_{i+half} c_i
 *   interleaved, pairs (2i, 2i + 1):       the same with x_{2i}, x_{2i+1}.
 * Elements h >= rotary_dim are copied.  The arithmetic is float32 for every
 * element type, rounded once at the store, and never contracted to FMA so
 * every level (and numpy's float32 formula) gives the same bits.  x and y
 * may be the same buffer: each row is read completely before it is written.
 *
 * olc_rope_select(xtype, ctype, interleaved, level) returns the row-range
 * function for ONNX element types xtype (x, y) and ctype (the caches: xtype
 * or FLOAT), or NULL.
 */
#ifndef OLC_ROTARY_H
#define OLC_ROTARY_H

#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_math.h"

/* No a*c - b*s -> fma(a, c, -b*s): the levels must agree bit for bit. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

typedef struct {
    const void *x;
    void *y;
    const void *cos, *sin;  /* [P, half], C-contiguous */
    const int64_t *pos;     /* [B, S], each in [0, P) (checked by the caller) */
    int64_t S, N, H, half;
    int64_t xs_b, xs_s, xs_n;  /* element strides of x; the last axis is contiguous */
    int64_t ys_b, ys_s, ys_n;
} olc_rope_args;
typedef void (*olc_rope_fn)(const olc_rope_args *p, int64_t r0, int64_t r1);

/* Rows [r0, r1) of B*S*N, calling SPAN(x_row, y_row, cos_row, sin_row, half)
 * and copying the unrotated rest of the row. */
#define OLC_ROPE_ROWS_(name, T, C, SPAN, ATTR)                                       \
    static ATTR void name(const olc_rope_args *p, int64_t r0, int64_t r1) {          \
        const T *x = (const T *)p->x; T *y = (T *)p->y;                              \
        const C *cc = (const C *)p->cos, *ss = (const C *)p->sin;                   \
        const int64_t N = p->N, S = p->S, half = p->half, rot = 2 * half;           \
        for (int64_t r = r0; r < r1; ++r) {                                          \
            int64_t n = r % N, bs = r / N, s = bs % S, b = bs / S;                   \
            const T *xr = x + b * p->xs_b + s * p->xs_s + n * p->xs_n;               \
            T *yr = y + b * p->ys_b + s * p->ys_s + n * p->ys_n;                     \
            int64_t row = p->pos[bs] * half;                                         \
            SPAN(xr, yr, cc + row, ss + row, half);                                  \
            if (p->H > rot && (const T *)yr != xr)                                   \
                memcpy(yr + rot, xr + rot, (size_t)(p->H - rot) * sizeof(T));       \
        }                                                                            \
    }

/* ---- scalar twins ---- */
#define OLC_ROPE_SCALAR(tname, T, cname, C, LDT, STT, LDC)                           \
    static void olc_rope_span_##tname##_##cname##_scalar(const T *x, T *y, const C *c, \
                                                         const C *s, int64_t half) { \
        for (int64_t i = 0; i < half; ++i) {                                         \
            float a = LDT(x[i]), b = LDT(x[i + half]), cv = LDC(c[i]), sv = LDC(s[i]); \
            y[i] = STT(a * cv - b * sv);                                             \
            y[i + half] = STT(a * sv + b * cv);                                      \
        }                                                                            \
    }                                                                                \
    static void olc_ropei_span_##tname##_##cname##_scalar(const T *x, T *y, const C *c, \
                                                          const C *s, int64_t half) { \
        for (int64_t i = 0; i < half; ++i) {                                         \
            float a = LDT(x[2 * i]), b = LDT(x[2 * i + 1]), cv = LDC(c[i]), sv = LDC(s[i]); \
            y[2 * i] = STT(a * cv - b * sv);                                         \
            y[2 * i + 1] = STT(a * sv + b * cv);                                     \
        }                                                                            \
    }                                                                                \
    OLC_ROPE_ROWS_(olc_rope_##tname##_##cname##_scalar, T, C,                        \
                   olc_rope_span_##tname##_##cname##_scalar, )                       \
    OLC_ROPE_ROWS_(olc_ropei_##tname##_##cname##_scalar, T, C,                       \
                   olc_ropei_span_##tname##_##cname##_scalar, )

OLC_ROPE_SCALAR(f32, float, f32, float, OLC_IDENTITY_, OLC_IDENTITY_, OLC_IDENTITY_)
OLC_ROPE_SCALAR(f16, uint16_t, f16, uint16_t, olc_h2f, olc_f2h, olc_h2f)
OLC_ROPE_SCALAR(f16, uint16_t, f32, float, olc_h2f, olc_f2h, OLC_IDENTITY_)
OLC_ROPE_SCALAR(bf16, uint16_t, bf16, uint16_t, olc_bf2f, olc_f2bf, olc_bf2f)
OLC_ROPE_SCALAR(bf16, uint16_t, f32, float, olc_bf2f, olc_f2bf, OLC_IDENTITY_)

/* ---- AVX2: 8 pairs a step; tails through the same code on stack buffers ---- */
#if OLC_X86
static inline OLC_TARGET_AVX2 void olc_rope_rot_avx2(__m256 a, __m256 b, __m256 c, __m256 s,
                                                     __m256 *re, __m256 *im) {
    *re = _mm256_sub_ps(_mm256_mul_ps(a, c), _mm256_mul_ps(b, s));
    *im = _mm256_add_ps(_mm256_mul_ps(a, s), _mm256_mul_ps(b, c));
}
/* (x0..x7), (x8..x15) -> evens, odds in order. */
static inline OLC_TARGET_AVX2 void olc_rope_deinterleave_avx2(__m256 u, __m256 v, __m256 *e, __m256 *o) {
    *e = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(u, v, 0x88)), 0xD8));
    *o = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(u, v, 0xDD)), 0xD8));
}
static inline OLC_TARGET_AVX2 void olc_rope_interleave_avx2(__m256 re, __m256 im, __m256 *u, __m256 *v) {
    __m256 lo = _mm256_unpacklo_ps(re, im), hi = _mm256_unpackhi_ps(re, im);
    *u = _mm256_permute2f128_ps(lo, hi, 0x20);
    *v = _mm256_permute2f128_ps(lo, hi, 0x31);
}

#define OLC_ROPE_AVX2(tname, T, cname, C)                                            \
    static inline OLC_TARGET_AVX2 void olc_rope_blk_##tname##_##cname##_avx2(        \
            const T *x1, const T *x2, T *y1, T *y2, const C *c, const C *s) {        \
        __m256 re, im;                                                               \
        olc_rope_rot_avx2(olc_ld_##tname##_avx2(x1), olc_ld_##tname##_avx2(x2),      \
                          olc_ld_##cname##_avx2(c), olc_ld_##cname##_avx2(s), &re, &im); \
        olc_st_##tname##_avx2(y1, re);                                               \
        olc_st_##tname##_avx2(y2, im);                                               \
    }                                                                                \
    static OLC_TARGET_AVX2 void olc_rope_span_##tname##_##cname##_avx2(              \
            const T *x, T *y, const C *c, const C *s, int64_t half) {                \
        int64_t i = 0;                                                               \
        for (; i + 8 <= half; i += 8)                                                \
            olc_rope_blk_##tname##_##cname##_avx2(x + i, x + half + i, y + i, y + half + i, \
                                                  c + i, s + i);                     \
        if (i < half) {                                                              \
            size_t k = (size_t)(half - i);                                           \
            T b1[8] = {0}, b2[8] = {0}; C bc[8] = {0}, bs[8] = {0};                  \
            memcpy(b1, x + i, k * sizeof(T)); memcpy(b2, x + half + i, k * sizeof(T)); \
            memcpy(bc, c + i, k * sizeof(C)); memcpy(bs, s + i, k * sizeof(C));      \
            olc_rope_blk_##tname##_##cname##_avx2(b1, b2, b1, b2, bc, bs);           \
            memcpy(y + i, b1, k * sizeof(T)); memcpy(y + half + i, b2, k * sizeof(T)); \
        }                                                                            \
    }                                                                                \
    static inline OLC_TARGET_AVX2 void olc_ropei_blk_##tname##_##cname##_avx2(       \
            const T *x, T *y, const C *c, const C *s) {                              \
        __m256 e, o, re, im, u, v;                                                   \
        olc_rope_deinterleave_avx2(olc_ld_##tname##_avx2(x), olc_ld_##tname##_avx2(x + 8), &e, &o); \
        olc_rope_rot_avx2(e, o, olc_ld_##cname##_avx2(c), olc_ld_##cname##_avx2(s), &re, &im); \
        olc_rope_interleave_avx2(re, im, &u, &v);                                    \
        olc_st_##tname##_avx2(y, u);                                                 \
        olc_st_##tname##_avx2(y + 8, v);                                             \
    }                                                                                \
    static OLC_TARGET_AVX2 void olc_ropei_span_##tname##_##cname##_avx2(             \
            const T *x, T *y, const C *c, const C *s, int64_t half) {                \
        int64_t i = 0;                                                               \
        for (; i + 8 <= half; i += 8)                                                \
            olc_ropei_blk_##tname##_##cname##_avx2(x + 2 * i, y + 2 * i, c + i, s + i); \
        if (i < half) {                                                              \
            size_t k = (size_t)(half - i);                                           \
            T bx[16] = {0}; C bc[8] = {0}, bs[8] = {0};                              \
            memcpy(bx, x + 2 * i, 2 * k * sizeof(T));                                \
            memcpy(bc, c + i, k * sizeof(C)); memcpy(bs, s + i, k * sizeof(C));      \
            olc_ropei_blk_##tname##_##cname##_avx2(bx, bx, bc, bs);                  \
            memcpy(y + 2 * i, bx, 2 * k * sizeof(T));                                \
        }                                                                            \
    }                                                                                \
    OLC_ROPE_ROWS_(olc_rope_##tname##_##cname##_avx2, T, C,                          \
                   olc_rope_span_##tname##_##cname##_avx2, OLC_TARGET_AVX2)          \
    OLC_ROPE_ROWS_(olc_ropei_##tname##_##cname##_avx2, T, C,                         \
                   olc_ropei_span_##tname##_##cname##_avx2, OLC_TARGET_AVX2)

OLC_ROPE_AVX2(f32, float, f32, float)
OLC_ROPE_AVX2(f16, uint16_t, f16, uint16_t)
OLC_ROPE_AVX2(f16, uint16_t, f32, float)
OLC_ROPE_AVX2(bf16, uint16_t, bf16, uint16_t)
OLC_ROPE_AVX2(bf16, uint16_t, f32, float)
#endif

/* ---- AVX-512: 16 pairs a step, masked tails ---- */
#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __mmask16 olc_rope_mask16(int64_t k) {
    return k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << k) - 1);
}

#define OLC_ROPE_AVX512(tname, T, cname, C)                                          \
    static OLC_TARGET_AVX512 void olc_rope_span_##tname##_##cname##_avx512(          \
            const T *x, T *y, const C *c, const C *s, int64_t half) {                \
        for (int64_t i = 0; i < half; i += 16) {                                     \
            __mmask16 m = olc_rope_mask16(half - i);                                 \
            __m512 a = olc_ld_##tname##_avx512(x + i, m);                            \
            __m512 b = olc_ld_##tname##_avx512(x + half + i, m);                     \
            __m512 cv = olc_ld_##cname##_avx512(c + i, m);                           \
            __m512 sv = olc_ld_##cname##_avx512(s + i, m);                           \
            olc_st_##tname##_avx512(y + i, m,                                        \
                _mm512_sub_ps(_mm512_mul_ps(a, cv), _mm512_mul_ps(b, sv)));          \
            olc_st_##tname##_avx512(y + half + i, m,                                 \
                _mm512_add_ps(_mm512_mul_ps(a, sv), _mm512_mul_ps(b, cv)));          \
        }                                                                            \
    }                                                                                \
    static OLC_TARGET_AVX512 void olc_ropei_span_##tname##_##cname##_avx512(         \
            const T *x, T *y, const C *c, const C *s, int64_t half) {                \
        const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30); \
        const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31); \
        const __m512i il = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23); \
        const __m512i ih = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31); \
        for (int64_t i = 0; i < half; i += 16) {                                     \
            __mmask16 m = olc_rope_mask16(half - i);                                 \
            __mmask16 ma = olc_rope_mask16(2 * (half - i));                          \
            __mmask16 mb = olc_rope_mask16(2 * (half - i) - 16 > 0 ? 2 * (half - i) - 16 : 0); \
            __m512 u = olc_ld_##tname##_avx512(x + 2 * i, ma);                       \
            __m512 v = olc_ld_##tname##_avx512(x + 2 * i + 16, mb);                  \
            __m512 a = _mm512_permutex2var_ps(u, ie, v), b = _mm512_permutex2var_ps(u, io, v); \
            __m512 cv = olc_ld_##cname##_avx512(c + i, m);                           \
            __m512 sv = olc_ld_##cname##_avx512(s + i, m);                           \
            __m512 re = _mm512_sub_ps(_mm512_mul_ps(a, cv), _mm512_mul_ps(b, sv));   \
            __m512 im = _mm512_add_ps(_mm512_mul_ps(a, sv), _mm512_mul_ps(b, cv));   \
            olc_st_##tname##_avx512(y + 2 * i, ma, _mm512_permutex2var_ps(re, il, im)); \
            olc_st_##tname##_avx512(y + 2 * i + 16, mb, _mm512_permutex2var_ps(re, ih, im)); \
        }                                                                            \
    }                                                                                \
    OLC_ROPE_ROWS_(olc_rope_##tname##_##cname##_avx512, T, C,                        \
                   olc_rope_span_##tname##_##cname##_avx512, OLC_TARGET_AVX512)      \
    OLC_ROPE_ROWS_(olc_ropei_##tname##_##cname##_avx512, T, C,                       \
                   olc_ropei_span_##tname##_##cname##_avx512, OLC_TARGET_AVX512)

OLC_ROPE_AVX512(f32, float, f32, float)
OLC_ROPE_AVX512(f16, uint16_t, f16, uint16_t)
OLC_ROPE_AVX512(f16, uint16_t, f32, float)
OLC_ROPE_AVX512(bf16, uint16_t, bf16, uint16_t)
OLC_ROPE_AVX512(bf16, uint16_t, f32, float)
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static int olc_rope_level(int level) { return olc_build_level(level); }

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_ROPE_PICK_512_(f, level) if (level >= OLC_AVX512) return f##_avx512;
#else
#define OLC_ROPE_PICK_512_(f, level)
#endif
#if OLC_X86
#define OLC_ROPE_PICK_2_(f, level) if (level >= OLC_AVX2) return f##_avx2;
#else
#define OLC_ROPE_PICK_2_(f, level)
#endif
#define OLC_ROPE_PICK_(f, level)                                                      \
    do {                                                                              \
        OLC_ROPE_PICK_512_(f, level)                                                  \
        OLC_ROPE_PICK_2_(f, level)                                                    \
        return f##_scalar;                                                            \
    } while (0)
#define OLC_ROPE_PICK_MODE_(t, c, inter, level)                                       \
    do {                                                                              \
        if (inter) OLC_ROPE_PICK_(olc_ropei_##t##_##c, level);                        \
        OLC_ROPE_PICK_(olc_rope_##t##_##c, level);                                    \
    } while (0)

/* ONNX element types: 1 FLOAT, 10 FLOAT16, 16 BFLOAT16. */
static olc_rope_fn olc_rope_select(int xtype, int ctype, int interleaved, int level) {
    level = olc_rope_level(level);
    if (xtype == 1 && ctype == 1) OLC_ROPE_PICK_MODE_(f32, f32, interleaved, level);
    if (xtype == 10 && ctype == 10) OLC_ROPE_PICK_MODE_(f16, f16, interleaved, level);
    if (xtype == 10 && ctype == 1) OLC_ROPE_PICK_MODE_(f16, f32, interleaved, level);
    if (xtype == 16 && ctype == 16) OLC_ROPE_PICK_MODE_(bf16, bf16, interleaved, level);
    if (xtype == 16 && ctype == 1) OLC_ROPE_PICK_MODE_(bf16, f32, interleaved, level);
    return NULL;
}

#endif /* OLC_ROTARY_H */
