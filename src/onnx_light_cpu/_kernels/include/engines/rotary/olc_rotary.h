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
 * The spans (one row's rotation) of every level are written once per pair
 * of element types in olc_rotary_span.h, included below for the five
 * pairs (x, caches): (f32, f32), (f16, f16), (f16, f32), (bf16, bf16),
 * (bf16, f32); each span has its row-range function olc_rope_<x>_<c>_<level>
 * (olc_ropei_... interleaved) around olc_rope_rows_.
 *
 * olc_rope_select(xtype, ctype, interleaved, level) returns the row-range
 * function for element types xtype (x, y) and ctype (the caches: xtype or
 * OLC_FLOAT), or NULL.
 */
#ifndef OLC_ROTARY_H
#define OLC_ROTARY_H

#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

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
/* One row: y[0, 2 half) from x[0, 2 half) and the cos/sin rows c, s. */
typedef void (*olc_rope_span_fn)(const void *x, void *y, const void *c, const void *s, int64_t half);

/* Rows [r0, r1) of B*S*N: the span of each row, then its unrotated rest
 * copied.  Always inlined into the row-range functions, where span is a
 * constant (a direct call).  xsize, csize: bytes per element of x, caches. */
static inline __attribute__((always_inline)) void olc_rope_rows_(const olc_rope_args *p, int64_t r0,
        int64_t r1, olc_rope_span_fn span, int64_t xsize, int64_t csize) {
    const char *x = (const char *)p->x, *cc = (const char *)p->cos, *ss = (const char *)p->sin;
    char *y = (char *)p->y;
    const int64_t N = p->N, S = p->S, half = p->half, rot = 2 * half;
    for (int64_t r = r0; r < r1; ++r) {
        int64_t n = r % N, bs = r / N, s = bs % S, b = bs / S;
        const char *xr = x + (b * p->xs_b + s * p->xs_s + n * p->xs_n) * xsize;
        char *yr = y + (b * p->ys_b + s * p->ys_s + n * p->ys_n) * xsize;
        int64_t row = p->pos[bs] * half;
        span(xr, yr, cc + row * csize, ss + row * csize, half);
        if (p->H > rot && (const char *)yr != xr)
            memcpy(yr + rot * xsize, xr + rot * xsize, (size_t)(p->H - rot) * (size_t)xsize);
    }
}

/* Scalar element <-> float32 of each type. */
static inline float olc_rope_ld_f32_scalar(float v) { return v; }
static inline float olc_rope_ld_f16_scalar(uint16_t v) { return olc_h2f(v); }
static inline float olc_rope_ld_bf16_scalar(uint16_t v) { return olc_bf2f(v); }
static inline float olc_rope_st_f32_scalar(float v) { return v; }
static inline uint16_t olc_rope_st_f16_scalar(float v) { return olc_f2h(v); }
static inline uint16_t olc_rope_st_bf16_scalar(float v) { return olc_f2bf(v); }

#if OLC_X86
/* AVX2: 8 pairs a step; tails through the same code on stack buffers. */
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
#endif

/* The name NAME_<x>_<c>_<LVL> of the span body's pair, and of the
 * element-type functions NAME_<x>_<LVL> / NAME_<c>_<LVL> it calls
 * (olc_ld_f16_avx2 from common/olc_vec.h, olc_rope_ld_f16_scalar, ...). */
#define OLC_ROPE_FN(name, LVL) OLC_CAT(OLC_CAT(OLC_CAT(name, OLC_ROPE_X), OLC_ROPE_C), LVL)
#define OLC_ROPE_XFN(name, LVL) OLC_CAT(OLC_CAT(name, OLC_ROPE_X), LVL)
#define OLC_ROPE_CFN(name, LVL) OLC_CAT(OLC_CAT(name, OLC_ROPE_C), LVL)

#define OLC_ROPE_X f32
#define OLC_ROPE_C f32
#define OLC_ROPE_T float
#define OLC_ROPE_CT float
#include "engines/rotary/olc_rotary_span.h"
#undef OLC_ROPE_X
#undef OLC_ROPE_C
#undef OLC_ROPE_T
#undef OLC_ROPE_CT

#define OLC_ROPE_X f16
#define OLC_ROPE_C f16
#define OLC_ROPE_T uint16_t
#define OLC_ROPE_CT uint16_t
#include "engines/rotary/olc_rotary_span.h"
#undef OLC_ROPE_X
#undef OLC_ROPE_C
#undef OLC_ROPE_T
#undef OLC_ROPE_CT

#define OLC_ROPE_X f16
#define OLC_ROPE_C f32
#define OLC_ROPE_T uint16_t
#define OLC_ROPE_CT float
#include "engines/rotary/olc_rotary_span.h"
#undef OLC_ROPE_X
#undef OLC_ROPE_C
#undef OLC_ROPE_T
#undef OLC_ROPE_CT

#define OLC_ROPE_X bf16
#define OLC_ROPE_C bf16
#define OLC_ROPE_T uint16_t
#define OLC_ROPE_CT uint16_t
#include "engines/rotary/olc_rotary_span.h"
#undef OLC_ROPE_X
#undef OLC_ROPE_C
#undef OLC_ROPE_T
#undef OLC_ROPE_CT

#define OLC_ROPE_X bf16
#define OLC_ROPE_C f32
#define OLC_ROPE_T uint16_t
#define OLC_ROPE_CT float
#include "engines/rotary/olc_rotary_span.h"
#undef OLC_ROPE_X
#undef OLC_ROPE_C
#undef OLC_ROPE_T
#undef OLC_ROPE_CT

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static int olc_rope_level(int level) { return olc_build_level(level); }

/* Row-range functions per level: [pair][interleaved], pairs in the order
 * of olc_rope_pair_. */
static const olc_rope_fn olc_rope_fns_scalar[5][2] = {
    {olc_rope_f32_f32_scalar, olc_ropei_f32_f32_scalar},
    {olc_rope_f16_f16_scalar, olc_ropei_f16_f16_scalar},
    {olc_rope_f16_f32_scalar, olc_ropei_f16_f32_scalar},
    {olc_rope_bf16_bf16_scalar, olc_ropei_bf16_bf16_scalar},
    {olc_rope_bf16_f32_scalar, olc_ropei_bf16_f32_scalar},
};
#if OLC_X86
static const olc_rope_fn olc_rope_fns_avx2[5][2] = {
    {olc_rope_f32_f32_avx2, olc_ropei_f32_f32_avx2},
    {olc_rope_f16_f16_avx2, olc_ropei_f16_f16_avx2},
    {olc_rope_f16_f32_avx2, olc_ropei_f16_f32_avx2},
    {olc_rope_bf16_bf16_avx2, olc_ropei_bf16_bf16_avx2},
    {olc_rope_bf16_f32_avx2, olc_ropei_bf16_f32_avx2},
};
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static const olc_rope_fn olc_rope_fns_avx512[5][2] = {
    {olc_rope_f32_f32_avx512, olc_ropei_f32_f32_avx512},
    {olc_rope_f16_f16_avx512, olc_ropei_f16_f16_avx512},
    {olc_rope_f16_f32_avx512, olc_ropei_f16_f32_avx512},
    {olc_rope_bf16_bf16_avx512, olc_ropei_bf16_bf16_avx512},
    {olc_rope_bf16_f32_avx512, olc_ropei_bf16_f32_avx512},
};
#endif

/* The pair's row in the tables, or -1. */
static int olc_rope_pair_(int xtype, int ctype) {
    if (xtype == OLC_FLOAT && ctype == OLC_FLOAT) return 0;
    if (xtype == OLC_FLOAT16 && ctype == OLC_FLOAT16) return 1;
    if (xtype == OLC_FLOAT16 && ctype == OLC_FLOAT) return 2;
    if (xtype == OLC_BFLOAT16 && ctype == OLC_BFLOAT16) return 3;
    if (xtype == OLC_BFLOAT16 && ctype == OLC_FLOAT) return 4;
    return -1;
}

static olc_rope_fn olc_rope_select(int xtype, int ctype, int interleaved, int level) {
    const int pair = olc_rope_pair_(xtype, ctype), i = interleaved ? 1 : 0;
    if (pair < 0) return NULL;
    return OLC_LEVEL_FN(olc_rope_level(level), olc_rope_fns)[pair][i];
}

#endif /* OLC_ROTARY_H */
