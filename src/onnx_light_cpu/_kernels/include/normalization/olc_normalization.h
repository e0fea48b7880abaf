/* The normalization row engine.
 *
 * Every normalization is a row problem: a row of n contiguous elements, its
 * statistics (one reduction), then an apply pass that writes the output.
 *
 *   LayerNormalization, RMSNormalization, SimplifiedLayerNormalization
 *     -> olc_norm_rows(): a scale (and bias) vector of length n per row.
 *   BatchNormalization, InstanceNormalization, GroupNormalization,
 *   LpNormalization, MeanVarianceNormalization
 *     -> olc_norm_affine_rows(): one multiplier and offset per segment of a
 *        row (a channel), y = (x - mean) * mul + add.
 *
 * Reusable building blocks (for SkipLayerNormalization & co.), each chosen
 * once per call with olc_norm_select_*(acc_double, types..., level):
 *
 *   olc_norm_stats_fn(x, n, mode, &mean, &var)
 *       mode OLC_NORM_CENTERED: mean and mean squared deviation (two passes
 *       over the row, which is in cache), OLC_NORM_SQUARES: 0 and mean of
 *       squares, OLC_NORM_L1: 0 and sum |x|, OLC_NORM_L2: 0 and sum x^2.
 *   olc_norm_apply_fn(x, n, mean, inv, scale, bias|NULL, y)
 *       y = (x - mean) * inv * scale (+ bias); x of one type, scale, bias
 *       and y of another.
 *   olc_norm_affine_fn(x, n, mean, mul, add, y)
 *       y = (x - mean) * mul + add, x and y of one type.
 *
 * Element types are the ONNX numbers: 1 float, 10 float16, 11 double,
 * 16 bfloat16.  acc_double=0 computes in float32 (float16 and bfloat16 are
 * widened on load and rounded once on store), acc_double=1 in float64.
 * Float32 arithmetic on float, float16 and bfloat16 has AVX2+FMA/F16C and
 * AVX-512 intrinsics (bfloat16 widened by a 16-bit shift); double
 * arithmetic, and float arithmetic on pairs with a double tensor, run plain
 * loops compiled per level (vectorised by the compiler, `omp simd`
 * reductions); the same loops at level 0 are the scalar twins.  A row is always
 * reduced by one thread in one fixed order: results never depend on the
 * thread count.  No function allocates memory.
 */
#ifndef OLC_NORMALIZATION_H
#define OLC_NORMALIZATION_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_math.h"

#define OLC_NORM_FLOAT 1
#define OLC_NORM_FLOAT16 10
#define OLC_NORM_DOUBLE 11
#define OLC_NORM_BFLOAT16 16

enum { OLC_NORM_CENTERED = 0, OLC_NORM_SQUARES = 1, OLC_NORM_L1 = 2, OLC_NORM_L2 = 3 };

typedef void (*olc_norm_stats_fn)(const void *x, int64_t n, int mode, double *mean, double *var);
typedef void (*olc_norm_apply_fn)(const void *x, int64_t n, double mean, double inv,
                                  const void *scale, const void *bias, void *y);
typedef void (*olc_norm_affine_fn)(const void *x, int64_t n, double mean, double mul, double add,
                                   void *y);

/* ---- scalar element access per type ---- */
#define OLC_NORM_LD_f32(p, i) ((p)[i])
#define OLC_NORM_LD_f64(p, i) ((p)[i])
#define OLC_NORM_LD_f16(p, i) olc_h2f((p)[i])
#define OLC_NORM_LD_bf16(p, i) olc_bf2f((p)[i])
#define OLC_NORM_ST_f32(v) ((float)(v))
#define OLC_NORM_ST_f64(v) ((double)(v))
#define OLC_NORM_ST_f16(v) olc_f2h((float)(v))
#define OLC_NORM_ST_bf16(v) olc_f2bf((float)(v))
#define OLC_NORM_T_f32 float
#define OLC_NORM_T_f64 double
#define OLC_NORM_T_f16 uint16_t
#define OLC_NORM_T_bf16 uint16_t

/* ---- plain loops: every type pair, float or double arithmetic ----
 * A float16/bfloat16 value converted to double goes through float first
 * (exact), so `(A)LD(...)` is exact for every type but double -> float. */
#define OLC_NORM_PLAIN_STATS(A, an, tx, sfx, attr)                                              \
    attr static void olc_norm_stats_##an##_##tx##_##sfx(const void *px, int64_t n, int mode,     \
                                                        double *mean, double *var) {             \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        A m = 0, s = 0;                                                                          \
        if (mode == OLC_NORM_CENTERED) {                                                         \
            _Pragma("omp simd reduction(+:m)")                                                   \
            for (int64_t i = 0; i < n; ++i) m += (A)OLC_NORM_LD_##tx(x, i);                      \
            m = m / (A)n;                                                                        \
            _Pragma("omp simd reduction(+:s)")                                                   \
            for (int64_t i = 0; i < n; ++i) { A d = (A)OLC_NORM_LD_##tx(x, i) - m; s += d * d; } \
        } else if (mode == OLC_NORM_L1) {                                                        \
            _Pragma("omp simd reduction(+:s)")                                                   \
            for (int64_t i = 0; i < n; ++i) s += fabs((double)(A)OLC_NORM_LD_##tx(x, i));       \
        } else {                                                                                 \
            _Pragma("omp simd reduction(+:s)")                                                   \
            for (int64_t i = 0; i < n; ++i) { A v = (A)OLC_NORM_LD_##tx(x, i); s += v * v; }     \
        }                                                                                        \
        *mean = (double)m;                                                                       \
        *var = (double)(mode <= OLC_NORM_SQUARES ? s / (A)n : s);                                \
    }

#define OLC_NORM_PLAIN_APPLY(A, an, tx, ts, sfx, attr)                                          \
    attr static void olc_norm_apply_##an##_##tx##_##ts##_##sfx(                                  \
        const void *px, int64_t n, double mean_, double inv_, const void *ps, const void *pb,    \
        void *py) {                                                                              \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        const OLC_NORM_T_##ts *s = (const OLC_NORM_T_##ts *)ps, *b = (const OLC_NORM_T_##ts *)pb; \
        OLC_NORM_T_##ts *y = (OLC_NORM_T_##ts *)py;                                              \
        A mean = (A)mean_, inv = (A)inv_;                                                        \
        if (b) {                                                                                 \
            for (int64_t i = 0; i < n; ++i)                                                      \
                y[i] = OLC_NORM_ST_##ts(((A)OLC_NORM_LD_##tx(x, i) - mean) * inv *               \
                                        (A)OLC_NORM_LD_##ts(s, i) + (A)OLC_NORM_LD_##ts(b, i));  \
        } else {                                                                                 \
            for (int64_t i = 0; i < n; ++i)                                                      \
                y[i] = OLC_NORM_ST_##ts(((A)OLC_NORM_LD_##tx(x, i) - mean) * inv *               \
                                        (A)OLC_NORM_LD_##ts(s, i));                              \
        }                                                                                        \
    }

#define OLC_NORM_PLAIN_AFFINE(A, an, tx, sfx, attr)                                             \
    attr static void olc_norm_affine_##an##_##tx##_##sfx(const void *px, int64_t n, double mean_, \
                                                         double mul_, double add_, void *py) {   \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        OLC_NORM_T_##tx *y = (OLC_NORM_T_##tx *)py;                                              \
        A mean = (A)mean_, mul = (A)mul_, add = (A)add_;                                         \
        for (int64_t i = 0; i < n; ++i)                                                          \
            y[i] = OLC_NORM_ST_##tx(((A)OLC_NORM_LD_##tx(x, i) - mean) * mul + add);             \
    }

#define OLC_NORM_PLAIN_APPLY_ROW(A, an, tx, sfx, attr)                                          \
    OLC_NORM_PLAIN_APPLY(A, an, tx, f32, sfx, attr)                                              \
    OLC_NORM_PLAIN_APPLY(A, an, tx, f16, sfx, attr)                                              \
    OLC_NORM_PLAIN_APPLY(A, an, tx, f64, sfx, attr)                                              \
    OLC_NORM_PLAIN_APPLY(A, an, tx, bf16, sfx, attr)
#define OLC_NORM_PLAIN_TYPE(A, an, tx, sfx, attr)                                               \
    OLC_NORM_PLAIN_STATS(A, an, tx, sfx, attr)                                                   \
    OLC_NORM_PLAIN_AFFINE(A, an, tx, sfx, attr)                                                  \
    OLC_NORM_PLAIN_APPLY_ROW(A, an, tx, sfx, attr)
#define OLC_NORM_PLAIN_ALL(A, an, sfx, attr)                                                    \
    OLC_NORM_PLAIN_TYPE(A, an, f32, sfx, attr)                                                   \
    OLC_NORM_PLAIN_TYPE(A, an, f16, sfx, attr)                                                   \
    OLC_NORM_PLAIN_TYPE(A, an, f64, sfx, attr)                                                   \
    OLC_NORM_PLAIN_TYPE(A, an, bf16, sfx, attr)

/* a32: float arithmetic (the scalar twins of the intrinsics below);
 * a32p: float arithmetic where a double tensor is involved (X or scale);
 * a64: double arithmetic.  The vector levels are the compiler's AVX2 /
 * AVX-512 vectorisation of the same loops. */
OLC_NORM_PLAIN_ALL(float, a32, scalar, )
OLC_NORM_PLAIN_ALL(float, a32p, scalar, )
OLC_NORM_PLAIN_ALL(double, a64, scalar, )
#if OLC_X86
OLC_NORM_PLAIN_ALL(float, a32p, avx2, OLC_TARGET_AVX2)
OLC_NORM_PLAIN_ALL(double, a64, avx2, OLC_TARGET_AVX2)
#if OLC_HAVE_AVX512
OLC_NORM_PLAIN_ALL(float, a32p, avx512, OLC_TARGET_AVX512)
OLC_NORM_PLAIN_ALL(double, a64, avx512, OLC_TARGET_AVX512)
#endif
#endif

/* ---- float32 arithmetic with intrinsics: float, float16, bfloat16 ---- */
#if OLC_X86

/* AVX2: 16 elements an iteration in two accumulators, a scalar tail. */
#define OLC_NORM_AVX2_STATS(tx)                                                                 \
    static OLC_TARGET_AVX2 void olc_norm_stats_a32_##tx##_avx2(const void *px, int64_t n,       \
                                                               int mode, double *mean,          \
                                                               double *var) {                   \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));               \
        float m = 0.0f;                                                                          \
        int64_t i;                                                                               \
        if (mode == OLC_NORM_CENTERED) {                                                         \
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                           \
            for (i = 0; i + 16 <= n; i += 16) {                                                  \
                a0 = _mm256_add_ps(a0, olc_ld_##tx##_avx2(x + i));                               \
                a1 = _mm256_add_ps(a1, olc_ld_##tx##_avx2(x + i + 8));                           \
            }                                                                                    \
            float tail = 0.0f;                                                                   \
            for (; i < n; ++i) tail += OLC_NORM_LD_##tx(x, i);                                   \
            m = (olc_hsum_ps_avx2(_mm256_add_ps(a0, a1)) + tail) / (float)n;                   \
        }                                                                                        \
        const __m256 vm = _mm256_set1_ps(m);                                                     \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                               \
        float tail = 0.0f;                                                                       \
        for (i = 0; i + 16 <= n; i += 16) {                                                      \
            __m256 d0 = _mm256_sub_ps(olc_ld_##tx##_avx2(x + i), vm);                            \
            __m256 d1 = _mm256_sub_ps(olc_ld_##tx##_avx2(x + i + 8), vm);                        \
            if (mode == OLC_NORM_L1) {                                                           \
                a0 = _mm256_add_ps(a0, _mm256_and_ps(d0, absmask));                              \
                a1 = _mm256_add_ps(a1, _mm256_and_ps(d1, absmask));                              \
            } else {                                                                             \
                a0 = _mm256_fmadd_ps(d0, d0, a0);                                                \
                a1 = _mm256_fmadd_ps(d1, d1, a1);                                                \
            }                                                                                    \
        }                                                                                        \
        for (; i < n; ++i) {                                                                     \
            float d = OLC_NORM_LD_##tx(x, i) - m;                                                \
            tail += mode == OLC_NORM_L1 ? fabsf(d) : d * d;                                      \
        }                                                                                        \
        float s = olc_hsum_ps_avx2(_mm256_add_ps(a0, a1)) + tail;                              \
        *mean = m;                                                                               \
        *var = mode <= OLC_NORM_SQUARES ? s / (float)n : s;                                      \
    }

#define OLC_NORM_AVX2_APPLY(tx, ts)                                                             \
    static OLC_TARGET_AVX2 void olc_norm_apply_a32_##tx##_##ts##_avx2(                           \
        const void *px, int64_t n, double mean_, double inv_, const void *ps, const void *pb,    \
        void *py) {                                                                              \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        const OLC_NORM_T_##ts *s = (const OLC_NORM_T_##ts *)ps, *b = (const OLC_NORM_T_##ts *)pb; \
        OLC_NORM_T_##ts *y = (OLC_NORM_T_##ts *)py;                                              \
        const float mean = (float)mean_, inv = (float)inv_;                                      \
        const __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(inv);                        \
        int64_t i = 0;                                                                           \
        if (b) {                                                                                 \
            for (; i + 8 <= n; i += 8) {                                                         \
                __m256 v = _mm256_mul_ps(_mm256_sub_ps(olc_ld_##tx##_avx2(x + i), vm), vi);      \
                olc_st_##ts##_avx2(y + i, _mm256_fmadd_ps(v, olc_ld_##ts##_avx2(s + i),          \
                                                          olc_ld_##ts##_avx2(b + i)));           \
            }                                                                                    \
            for (; i < n; ++i)                                                                   \
                y[i] = OLC_NORM_ST_##ts(fmaf((OLC_NORM_LD_##tx(x, i) - mean) * inv,              \
                                             OLC_NORM_LD_##ts(s, i), OLC_NORM_LD_##ts(b, i)));   \
        } else {                                                                                 \
            for (; i + 8 <= n; i += 8) {                                                         \
                __m256 v = _mm256_mul_ps(_mm256_sub_ps(olc_ld_##tx##_avx2(x + i), vm), vi);      \
                olc_st_##ts##_avx2(y + i, _mm256_mul_ps(v, olc_ld_##ts##_avx2(s + i)));          \
            }                                                                                    \
            for (; i < n; ++i)                                                                   \
                y[i] = OLC_NORM_ST_##ts((OLC_NORM_LD_##tx(x, i) - mean) * inv *                  \
                                        OLC_NORM_LD_##ts(s, i));                                 \
        }                                                                                        \
    }

#define OLC_NORM_AVX2_AFFINE(tx)                                                                \
    static OLC_TARGET_AVX2 void olc_norm_affine_a32_##tx##_avx2(                                 \
        const void *px, int64_t n, double mean_, double mul_, double add_, void *py) {           \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        OLC_NORM_T_##tx *y = (OLC_NORM_T_##tx *)py;                                              \
        const float mean = (float)mean_, mul = (float)mul_, add = (float)add_;                   \
        const __m256 vm = _mm256_set1_ps(mean), vk = _mm256_set1_ps(mul),                        \
                     va = _mm256_set1_ps(add);                                                   \
        int64_t i = 0;                                                                           \
        for (; i + 8 <= n; i += 8)                                                               \
            olc_st_##tx##_avx2(y + i, _mm256_fmadd_ps(                                           \
                _mm256_sub_ps(olc_ld_##tx##_avx2(x + i), vm), vk, va));                          \
        for (; i < n; ++i) y[i] = OLC_NORM_ST_##tx(fmaf(OLC_NORM_LD_##tx(x, i) - mean, mul, add)); \
    }

#define OLC_NORM_AVX2_TYPE(tx)                                                                  \
    OLC_NORM_AVX2_STATS(tx)                                                                      \
    OLC_NORM_AVX2_AFFINE(tx)                                                                     \
    OLC_NORM_AVX2_APPLY(tx, f32)                                                                 \
    OLC_NORM_AVX2_APPLY(tx, f16)                                                                 \
    OLC_NORM_AVX2_APPLY(tx, bf16)
OLC_NORM_AVX2_TYPE(f32)
OLC_NORM_AVX2_TYPE(f16)
OLC_NORM_AVX2_TYPE(bf16)
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __mmask16 olc_norm_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
}

/* AVX-512: 32 elements an iteration in two accumulators, a masked tail
 * (lanes past the row stay zero: the subtraction is zero-masked too). */
#define OLC_NORM_AVX512_STATS(tx)                                                               \
    static OLC_TARGET_AVX512 void olc_norm_stats_a32_##tx##_avx512(const void *px, int64_t n,   \
                                                                   int mode, double *mean,      \
                                                                   double *var) {               \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        float m = 0.0f;                                                                          \
        int64_t i;                                                                               \
        if (mode == OLC_NORM_CENTERED) {                                                         \
            __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                           \
            for (i = 0; i + 32 <= n; i += 32) {                                                  \
                a0 = _mm512_add_ps(a0, olc_ld_##tx##_avx512(x + i, 0xffff));                     \
                a1 = _mm512_add_ps(a1, olc_ld_##tx##_avx512(x + i + 16, 0xffff));                \
            }                                                                                    \
            for (; i < n; i += 16)                                                               \
                a0 = _mm512_add_ps(a0, olc_ld_##tx##_avx512(x + i, olc_norm_mask16(n - i)));     \
            m = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) / (float)n;                          \
        }                                                                                        \
        const __m512 vm = _mm512_set1_ps(m);                                                     \
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                               \
        for (i = 0; i + 32 <= n; i += 32) {                                                      \
            __m512 d0 = _mm512_sub_ps(olc_ld_##tx##_avx512(x + i, 0xffff), vm);                  \
            __m512 d1 = _mm512_sub_ps(olc_ld_##tx##_avx512(x + i + 16, 0xffff), vm);             \
            if (mode == OLC_NORM_L1) {                                                           \
                a0 = _mm512_add_ps(a0, _mm512_abs_ps(d0));                                       \
                a1 = _mm512_add_ps(a1, _mm512_abs_ps(d1));                                       \
            } else {                                                                             \
                a0 = _mm512_fmadd_ps(d0, d0, a0);                                                \
                a1 = _mm512_fmadd_ps(d1, d1, a1);                                                \
            }                                                                                    \
        }                                                                                        \
        for (; i < n; i += 16) {                                                                 \
            __mmask16 k = olc_norm_mask16(n - i);                                                \
            __m512 d = _mm512_maskz_sub_ps(k, olc_ld_##tx##_avx512(x + i, k), vm);               \
            a0 = mode == OLC_NORM_L1 ? _mm512_add_ps(a0, _mm512_abs_ps(d))                       \
                                     : _mm512_fmadd_ps(d, d, a0);                                \
        }                                                                                        \
        float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));                                   \
        *mean = m;                                                                               \
        *var = mode <= OLC_NORM_SQUARES ? s / (float)n : s;                                      \
    }

#define OLC_NORM_AVX512_APPLY(tx, ts)                                                           \
    static OLC_TARGET_AVX512 void olc_norm_apply_a32_##tx##_##ts##_avx512(                       \
        const void *px, int64_t n, double mean_, double inv_, const void *ps, const void *pb,    \
        void *py) {                                                                              \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        const OLC_NORM_T_##ts *s = (const OLC_NORM_T_##ts *)ps, *b = (const OLC_NORM_T_##ts *)pb; \
        OLC_NORM_T_##ts *y = (OLC_NORM_T_##ts *)py;                                              \
        const __m512 vm = _mm512_set1_ps((float)mean_), vi = _mm512_set1_ps((float)inv_);        \
        int64_t i = 0;                                                                           \
        if (b) {                                                                                 \
            for (; i + 16 <= n; i += 16) {                                                       \
                __m512 v = _mm512_mul_ps(_mm512_sub_ps(olc_ld_##tx##_avx512(x + i, 0xffff), vm), vi); \
                olc_st_##ts##_avx512(y + i, 0xffff, _mm512_fmadd_ps(                             \
                    v, olc_ld_##ts##_avx512(s + i, 0xffff), olc_ld_##ts##_avx512(b + i, 0xffff))); \
            }                                                                                    \
            if (i < n) {                                                                         \
                __mmask16 k = olc_norm_mask16(n - i);                                            \
                __m512 v = _mm512_mul_ps(_mm512_sub_ps(olc_ld_##tx##_avx512(x + i, k), vm), vi); \
                olc_st_##ts##_avx512(y + i, k, _mm512_fmadd_ps(                                  \
                    v, olc_ld_##ts##_avx512(s + i, k), olc_ld_##ts##_avx512(b + i, k)));         \
            }                                                                                    \
        } else {                                                                                 \
            for (; i + 16 <= n; i += 16) {                                                       \
                __m512 v = _mm512_mul_ps(_mm512_sub_ps(olc_ld_##tx##_avx512(x + i, 0xffff), vm), vi); \
                olc_st_##ts##_avx512(y + i, 0xffff,                                              \
                                     _mm512_mul_ps(v, olc_ld_##ts##_avx512(s + i, 0xffff)));     \
            }                                                                                    \
            if (i < n) {                                                                         \
                __mmask16 k = olc_norm_mask16(n - i);                                            \
                __m512 v = _mm512_mul_ps(_mm512_sub_ps(olc_ld_##tx##_avx512(x + i, k), vm), vi); \
                olc_st_##ts##_avx512(y + i, k, _mm512_mul_ps(v, olc_ld_##ts##_avx512(s + i, k))); \
            }                                                                                    \
        }                                                                                        \
    }

#define OLC_NORM_AVX512_AFFINE(tx)                                                              \
    static OLC_TARGET_AVX512 void olc_norm_affine_a32_##tx##_avx512(                             \
        const void *px, int64_t n, double mean_, double mul_, double add_, void *py) {           \
        const OLC_NORM_T_##tx *x = (const OLC_NORM_T_##tx *)px;                                  \
        OLC_NORM_T_##tx *y = (OLC_NORM_T_##tx *)py;                                              \
        const __m512 vm = _mm512_set1_ps((float)mean_), vk = _mm512_set1_ps((float)mul_),        \
                     va = _mm512_set1_ps((float)add_);                                           \
        for (int64_t i = 0; i < n; i += 16) {                                                    \
            __mmask16 k = olc_norm_mask16(n - i);                                                \
            olc_st_##tx##_avx512(y + i, k, _mm512_fmadd_ps(                                      \
                _mm512_sub_ps(olc_ld_##tx##_avx512(x + i, k), vm), vk, va));                     \
        }                                                                                        \
    }

#define OLC_NORM_AVX512_TYPE(tx)                                                                \
    OLC_NORM_AVX512_STATS(tx)                                                                    \
    OLC_NORM_AVX512_AFFINE(tx)                                                                   \
    OLC_NORM_AVX512_APPLY(tx, f32)                                                               \
    OLC_NORM_AVX512_APPLY(tx, f16)                                                               \
    OLC_NORM_AVX512_APPLY(tx, bf16)
OLC_NORM_AVX512_TYPE(f32)
OLC_NORM_AVX512_TYPE(f16)
OLC_NORM_AVX512_TYPE(bf16)
#endif

/* ---- selection ---- */

static inline int olc_norm_narrow(int t) {
    return t == OLC_NORM_FLOAT || t == OLC_NORM_FLOAT16 || t == OLC_NORM_BFLOAT16;
}

/* The level the functions for these types really run at. */
static int olc_norm_level(int acc_double, int tx, int ts, int level) {
    (void)acc_double; (void)tx; (void)ts;
    return olc_build_level(level);
}

#define OLC_NORM_CAST(fn) ((void (*)(void))(fn))
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_NORM_PICK(level, prefix)                                                       \
    ((level) >= OLC_AVX512 ? OLC_NORM_CAST(prefix##avx512)                                  \
     : (level) == OLC_AVX2 ? OLC_NORM_CAST(prefix##avx2) : OLC_NORM_CAST(prefix##scalar))
#elif OLC_X86
#define OLC_NORM_PICK(level, prefix) \
    ((level) >= OLC_AVX2 ? OLC_NORM_CAST(prefix##avx2) : OLC_NORM_CAST(prefix##scalar))
#else
#define OLC_NORM_PICK(level, prefix) OLC_NORM_CAST(prefix##scalar)
#endif

#define OLC_NORM_BY_TYPE(t, level, before, after)                                  \
    switch (t) {                                                                    \
    case OLC_NORM_FLOAT: return OLC_NORM_PICK(level, before##f32##after);           \
    case OLC_NORM_FLOAT16: return OLC_NORM_PICK(level, before##f16##after);         \
    case OLC_NORM_BFLOAT16: return OLC_NORM_PICK(level, before##bf16##after);       \
    default: return NULL;                                                           \
    }
#define OLC_NORM_SCALAR_BY_TYPE(t, before, after)                                  \
    switch (t) {                                                                    \
    case OLC_NORM_FLOAT: return OLC_NORM_CAST(before##f32##after##scalar);          \
    case OLC_NORM_FLOAT16: return OLC_NORM_CAST(before##f16##after##scalar);        \
    case OLC_NORM_DOUBLE: return OLC_NORM_CAST(before##f64##after##scalar);         \
    case OLC_NORM_BFLOAT16: return OLC_NORM_CAST(before##bf16##after##scalar);      \
    default: return NULL;                                                           \
    }
#define OLC_NORM_A64_BY_TYPE(t, level, before, after)                              \
    switch (t) {                                                                    \
    case OLC_NORM_FLOAT: return OLC_NORM_PICK(level, before##f32##after);           \
    case OLC_NORM_FLOAT16: return OLC_NORM_PICK(level, before##f16##after);         \
    case OLC_NORM_DOUBLE: return OLC_NORM_PICK(level, before##f64##after);          \
    case OLC_NORM_BFLOAT16: return OLC_NORM_PICK(level, before##bf16##after);       \
    default: return NULL;                                                           \
    }

static void (*olc_norm_select_stats_(int acc_double, int tx, int level))(void) {
    level = olc_norm_level(acc_double, tx, tx, level);
    if (acc_double) { OLC_NORM_A64_BY_TYPE(tx, level, olc_norm_stats_a64_, _) }
    if (!olc_norm_narrow(tx)) { OLC_NORM_A64_BY_TYPE(tx, level, olc_norm_stats_a32p_, _) }
    if (level == OLC_SCALAR) { OLC_NORM_SCALAR_BY_TYPE(tx, olc_norm_stats_a32_, _) }
    OLC_NORM_BY_TYPE(tx, level, olc_norm_stats_a32_, _)
}
static void (*olc_norm_select_affine_(int acc_double, int tx, int level))(void) {
    level = olc_norm_level(acc_double, tx, tx, level);
    if (acc_double) { OLC_NORM_A64_BY_TYPE(tx, level, olc_norm_affine_a64_, _) }
    if (!olc_norm_narrow(tx)) { OLC_NORM_A64_BY_TYPE(tx, level, olc_norm_affine_a32p_, _) }
    if (level == OLC_SCALAR) { OLC_NORM_SCALAR_BY_TYPE(tx, olc_norm_affine_a32_, _) }
    OLC_NORM_BY_TYPE(tx, level, olc_norm_affine_a32_, _)
}
#define OLC_NORM_APPLY_TX(ts, an, level)                                                  \
    switch (tx) {                                                                         \
    case OLC_NORM_FLOAT: return OLC_NORM_PICK(level, olc_norm_apply_##an##_f32_##ts##_);  \
    case OLC_NORM_FLOAT16: return OLC_NORM_PICK(level, olc_norm_apply_##an##_f16_##ts##_); \
    case OLC_NORM_DOUBLE: return OLC_NORM_PICK(level, olc_norm_apply_##an##_f64_##ts##_); \
    case OLC_NORM_BFLOAT16: return OLC_NORM_PICK(level, olc_norm_apply_##an##_bf16_##ts##_); \
    default: return NULL;                                                                 \
    }
#define OLC_NORM_APPLY_TX_SCALAR(ts, an)                                                  \
    switch (tx) {                                                                         \
    case OLC_NORM_FLOAT: return OLC_NORM_CAST(olc_norm_apply_##an##_f32_##ts##_scalar);   \
    case OLC_NORM_FLOAT16: return OLC_NORM_CAST(olc_norm_apply_##an##_f16_##ts##_scalar); \
    case OLC_NORM_DOUBLE: return OLC_NORM_CAST(olc_norm_apply_##an##_f64_##ts##_scalar);  \
    case OLC_NORM_BFLOAT16: return OLC_NORM_CAST(olc_norm_apply_##an##_bf16_##ts##_scalar); \
    default: return NULL;                                                                 \
    }
#define OLC_NORM_APPLY_TX_A32(ts, level)                                                  \
    switch (tx) {                                                                         \
    case OLC_NORM_FLOAT: return OLC_NORM_PICK(level, olc_norm_apply_a32_f32_##ts##_);     \
    case OLC_NORM_FLOAT16: return OLC_NORM_PICK(level, olc_norm_apply_a32_f16_##ts##_);   \
    case OLC_NORM_BFLOAT16: return OLC_NORM_PICK(level, olc_norm_apply_a32_bf16_##ts##_); \
    default: return NULL;                                                                 \
    }
static void (*olc_norm_select_apply_(int acc_double, int tx, int ts, int level))(void) {
    level = olc_norm_level(acc_double, tx, ts, level);
    if (acc_double) {
        switch (ts) {
        case OLC_NORM_FLOAT: OLC_NORM_APPLY_TX(f32, a64, level)
        case OLC_NORM_FLOAT16: OLC_NORM_APPLY_TX(f16, a64, level)
        case OLC_NORM_DOUBLE: OLC_NORM_APPLY_TX(f64, a64, level)
        case OLC_NORM_BFLOAT16: OLC_NORM_APPLY_TX(bf16, a64, level)
        default: return NULL;
        }
    }
    if (!(olc_norm_narrow(tx) && olc_norm_narrow(ts))) {
        switch (ts) {
        case OLC_NORM_FLOAT: OLC_NORM_APPLY_TX(f32, a32p, level)
        case OLC_NORM_FLOAT16: OLC_NORM_APPLY_TX(f16, a32p, level)
        case OLC_NORM_DOUBLE: OLC_NORM_APPLY_TX(f64, a32p, level)
        case OLC_NORM_BFLOAT16: OLC_NORM_APPLY_TX(bf16, a32p, level)
        default: return NULL;
        }
    }
    if (level == OLC_SCALAR) {
        switch (ts) {
        case OLC_NORM_FLOAT: OLC_NORM_APPLY_TX_SCALAR(f32, a32)
        case OLC_NORM_FLOAT16: OLC_NORM_APPLY_TX_SCALAR(f16, a32)
        case OLC_NORM_DOUBLE: OLC_NORM_APPLY_TX_SCALAR(f64, a32)
        case OLC_NORM_BFLOAT16: OLC_NORM_APPLY_TX_SCALAR(bf16, a32)
        default: return NULL;
        }
    }
    switch (ts) {
    case OLC_NORM_FLOAT: OLC_NORM_APPLY_TX_A32(f32, level)
    case OLC_NORM_FLOAT16: OLC_NORM_APPLY_TX_A32(f16, level)
    case OLC_NORM_BFLOAT16: OLC_NORM_APPLY_TX_A32(bf16, level)
    default: return NULL;
    }
}

static inline olc_norm_stats_fn olc_norm_select_stats(int acc_double, int tx, int level) {
    return (olc_norm_stats_fn)olc_norm_select_stats_(acc_double, tx, level);
}
static inline olc_norm_affine_fn olc_norm_select_affine(int acc_double, int tx, int level) {
    return (olc_norm_affine_fn)olc_norm_select_affine_(acc_double, tx, level);
}
static inline olc_norm_apply_fn olc_norm_select_apply(int acc_double, int tx, int ts, int level) {
    return (olc_norm_apply_fn)olc_norm_select_apply_(acc_double, tx, ts, level);
}

/* 1 / sqrt(var + eps) in the arithmetic's precision. */
static inline double olc_norm_inv_std(int acc_double, double var, double eps) {
    if (acc_double) return 1.0 / sqrt(var + eps);
    return (double)(1.0f / sqrtf((float)var + (float)eps));
}

/* Stores a statistic as float, double, float16 or bfloat16. */
static inline void olc_norm_store_stat(void *out, int type, int64_t i, double v) {
    switch (type) {
    case OLC_NORM_FLOAT: ((float *)out)[i] = (float)v; break;
    case OLC_NORM_DOUBLE: ((double *)out)[i] = v; break;
    case OLC_NORM_FLOAT16: ((uint16_t *)out)[i] = olc_f2h((float)v); break;
    case OLC_NORM_BFLOAT16: ((uint16_t *)out)[i] = olc_f2bf((float)v); break;
    default: break;
    }
}

/* ---- drivers: a range of rows [r0, r1) ---- */

/* LayerNormalization, RMSNormalization, SimplifiedLayerNormalization. */
typedef struct {
    olc_norm_stats_fn stats;
    olc_norm_apply_fn apply;
    const char *x;
    char *y;
    const char *scale, *bias;           /* bias may be NULL */
    int64_t n, x_item, y_item;          /* row length, element sizes */
    int64_t scale_stride;               /* bytes between the scale rows of consecutive rows */
    const int64_t *scale_row;           /* or, when not NULL, the scale row index of each row */
    int64_t bias_stride;
    int mode, acc_double;               /* OLC_NORM_CENTERED or OLC_NORM_SQUARES */
    double eps;
    void *mean_out, *inv_out;           /* optional statistics, one per row */
    int stat_type;
} olc_norm_rows_plan;

static void olc_norm_rows(const olc_norm_rows_plan *p, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        double mean, var;
        const char *x = p->x + r * p->n * p->x_item;
        p->stats(x, p->n, p->mode, &mean, &var);
        double inv = olc_norm_inv_std(p->acc_double, var, p->eps);
        int64_t srow = p->scale_row ? p->scale_row[r] : r;
        const char *b = p->bias ? p->bias + srow * p->bias_stride : NULL;
        p->apply(x, p->n, mean, inv, p->scale + srow * p->scale_stride, b,
                 p->y + r * p->n * p->y_item);
        if (p->mean_out) olc_norm_store_stat(p->mean_out, p->stat_type, r, mean);
        if (p->inv_out) olc_norm_store_stat(p->inv_out, p->stat_type, r, inv);
    }
}

/* Per-segment affine: a row of `segs` segments of `seg_len` elements; the
 * segment's channel is (row % groups) * segs + seg.
 *   how OLC_NORM_HOW_GIVEN: the channel's mean/var are given (BatchNorm)
 *   how OLC_NORM_HOW_STD: row statistics, mul = ch_mul / sqrt(var + eps)
 *   how OLC_NORM_HOW_MVN: row statistics, mul = 1 / (sqrt(var) + eps)
 *   how OLC_NORM_HOW_LP: row L1 or L2 norm, mul = 1 / norm (0 for norm 0)
 *   how OLC_NORM_HOW_STATS: only the row statistics, into row_mean/row_var. */
enum { OLC_NORM_HOW_GIVEN = 0, OLC_NORM_HOW_STD, OLC_NORM_HOW_MVN, OLC_NORM_HOW_LP,
       OLC_NORM_HOW_STATS };

typedef struct {
    olc_norm_stats_fn stats;
    olc_norm_affine_fn affine;
    const char *x;
    char *y;
    int64_t item, segs, seg_len, groups;
    const double *ch_mul, *ch_add, *ch_mean, *ch_var;   /* per channel, NULL = 1 / 0 */
    double eps;
    int how, mode, acc_double;
    double *row_mean, *row_var;
} olc_norm_affine_plan;

static void olc_norm_affine_rows(const olc_norm_affine_plan *p, int64_t r0, int64_t r1) {
    const int64_t n = p->segs * p->seg_len;
    for (int64_t r = r0; r < r1; ++r) {
        const char *x = p->x + r * n * p->item;
        double mean = 0.0, var = 0.0, inv = 1.0;
        if (p->how != OLC_NORM_HOW_GIVEN) {
            p->stats(x, n, p->mode, &mean, &var);
            if (p->how == OLC_NORM_HOW_STATS) {
                p->row_mean[r] = mean;
                p->row_var[r] = var;
                continue;
            }
            if (p->how == OLC_NORM_HOW_STD) inv = olc_norm_inv_std(p->acc_double, var, p->eps);
            else if (p->how == OLC_NORM_HOW_MVN)
                inv = p->acc_double ? 1.0 / (sqrt(var) + p->eps)
                                    : (double)(1.0f / (sqrtf((float)var) + (float)p->eps));
            else {
                double norm = p->mode == OLC_NORM_L2 ? (p->acc_double ? sqrt(var) : (double)sqrtf((float)var))
                                                     : var;
                inv = norm == 0.0 ? 0.0 : (p->acc_double ? 1.0 / norm : (double)(1.0f / (float)norm));
            }
        }
        for (int64_t s = 0; s < p->segs; ++s) {
            int64_t c = (r % p->groups) * p->segs + s;
            double m = mean, k = inv, a = p->ch_add ? p->ch_add[c] : 0.0;
            if (p->how == OLC_NORM_HOW_GIVEN) {
                m = p->ch_mean[c];
                k = olc_norm_inv_std(p->acc_double, p->ch_var[c], p->eps);
            }
            if (p->ch_mul) k = p->acc_double ? k * p->ch_mul[c] : (double)((float)k * (float)p->ch_mul[c]);
            int64_t off = s * p->seg_len * p->item;
            p->affine(x + off, p->seg_len, m, k, a, p->y + r * n * p->item + off);
        }
    }
}

#endif
