/* BiasGelu (exact erf Gelu of a + bias) and SwiGLU (a * sigmoid(alpha a) * b).
 *
 * float16 and bfloat16 are computed in float32 and rounded once at the
 * store; double runs a scalar loop on libm.  olc_act_select(op, dtype,
 * level) returns the row function, olc_act_level() the level it uses.
 *
 * erf(x), float32, max error 2.5 ulp (measured on a dense grid against
 * math.erf): for |x| < 0.875 erf = x P(x^2) (P of degree 5); below 3.92 erf = 1 - exp(-Q(|x| - 0.875))
 * with Q a degree-7 fit of -log(erfc); above, erf rounds to 1.  Coefficients are
 * least-squares fits on Chebyshev nodes rounded to float32.
 */
#ifndef OLC_ACTIVATION_H
#define OLC_ACTIVATION_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_math.h"

enum { OLC_ACT_BIAS_GELU = 0, OLC_ACT_SWIGLU = 1 };

#define OLC_ERF_SPLIT 0.875f
#define OLC_ERF_ONE 3.92f
#define OLC_ERF_P(X) X(-0x1.46075ep-11f) X(0x1.49fb5ep-8f) X(-0x1.b6fbe6p-6f) X(0x1.ce21b2p-4f) \
    X(-0x1.81270ep-2f)
#define OLC_ERF_P_LAST 0x1.20dd74p+0f
#define OLC_ERF_Q(X) X(0x1.ea47bap-17f) X(-0x1.06cc82p-12f) X(0x1.0c929ep-9f) X(-0x1.6ac8dap-7f) \
    X(0x1.7e3fd4p-5f) X(0x1.a73d26p-1f) X(0x1.3710f6p+1f)
#define OLC_ERF_Q_LAST 0x1.886734p+0f
#define OLC_SQRT1_2 0x1.6a09e6p-1f

/* ---- scalar twins ---- */
static inline float olc_erff_(float x) {
    float a = fabsf(x), r;
    if (a < OLC_ERF_SPLIT) {
        float u = a * a, p = 0.0f;
#define OLC_H_(c) p = olc_fmaf_(p, u, c);
        OLC_ERF_P(OLC_H_)
        p = olc_fmaf_(p, u, OLC_ERF_P_LAST);
        r = a * p;
    } else if (a < OLC_ERF_ONE) {
        float t = a - OLC_ERF_SPLIT, q = 0.0f;
#define OLC_HQ_(c) q = olc_fmaf_(q, t, c);
        OLC_ERF_Q(OLC_HQ_)
        q = olc_fmaf_(q, t, OLC_ERF_Q_LAST);
        r = 1.0f - olc_expf_(-q);
    } else {
        r = a == a ? 1.0f : a;  /* NaN stays NaN */
    }
    return copysignf(r, x);
}

/* x Phi(x); Phi == 0 (x below about -5.5, and -inf) gives -0 instead of
 * -inf * 0 = NaN. */
static inline float olc_geluf_(float x) {
    float phi = 0.5f + 0.5f * olc_erff_(x * OLC_SQRT1_2);
    return phi == 0.0f ? -0.0f : x * phi;
}

static inline float olc_swishf_(float a, float alpha) { return a * olc_sigmoidf_(alpha * a); }

#if OLC_X86
/* ---- AVX2 ---- */
static inline OLC_TARGET_AVX2 __m256 olc_erf_ps_avx2(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign, x);
    __m256 u = _mm256_mul_ps(a, a), p = _mm256_setzero_ps();
#define OLC_V2P_(c) p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(c));
    OLC_ERF_P(OLC_V2P_)
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(OLC_ERF_P_LAST));
    __m256 small = _mm256_mul_ps(a, p);
    __m256 t = _mm256_sub_ps(_mm256_min_ps(a, _mm256_set1_ps(OLC_ERF_ONE)), _mm256_set1_ps(OLC_ERF_SPLIT));
    __m256 q = _mm256_setzero_ps();
#define OLC_V2Q_(c) q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(c));
    OLC_ERF_Q(OLC_V2Q_)
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(OLC_ERF_Q_LAST));
    __m256 large = _mm256_sub_ps(_mm256_set1_ps(1.0f), olc_exp_ps_avx2(_mm256_sub_ps(_mm256_setzero_ps(), q)));
    large = _mm256_blendv_ps(large, _mm256_set1_ps(1.0f), _mm256_cmp_ps(a, _mm256_set1_ps(OLC_ERF_ONE), _CMP_GE_OQ));
    __m256 r = _mm256_blendv_ps(large, small, _mm256_cmp_ps(a, _mm256_set1_ps(OLC_ERF_SPLIT), _CMP_LT_OQ));
    r = _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_or_ps(r, _mm256_and_ps(sign, x));
}
static inline OLC_TARGET_AVX2 __m256 olc_gelu_ps_avx2(__m256 x) {
    const __m256 half = _mm256_set1_ps(0.5f);
    __m256 phi = _mm256_fmadd_ps(half, olc_erf_ps_avx2(_mm256_mul_ps(x, _mm256_set1_ps(OLC_SQRT1_2))), half);
    __m256 y = _mm256_mul_ps(x, phi);
    return _mm256_blendv_ps(y, _mm256_set1_ps(-0.0f), _mm256_cmp_ps(phi, _mm256_setzero_ps(), _CMP_EQ_OQ));
}
static inline OLC_TARGET_AVX2 __m256 olc_swish_ps_avx2(__m256 a, __m256 alpha) {
    return _mm256_mul_ps(a, olc_sigmoid_ps_avx2(_mm256_mul_ps(alpha, a)));
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
/* ---- AVX-512 ---- */
static inline OLC_TARGET_AVX512 __m512 olc_erf_ps_avx512(__m512 x) {
    __m512 a = _mm512_abs_ps(x);
    __m512 u = _mm512_mul_ps(a, a), p = _mm512_setzero_ps();
#define OLC_V5P_(c) p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(c));
    OLC_ERF_P(OLC_V5P_)
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(OLC_ERF_P_LAST));
    __m512 small = _mm512_mul_ps(a, p);
    __m512 t = _mm512_sub_ps(_mm512_min_ps(a, _mm512_set1_ps(OLC_ERF_ONE)), _mm512_set1_ps(OLC_ERF_SPLIT));
    __m512 q = _mm512_setzero_ps();
#define OLC_V5Q_(c) q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(c));
    OLC_ERF_Q(OLC_V5Q_)
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(OLC_ERF_Q_LAST));
    /* exp(-q) for q in [0.7, 17]: olc_exp_ps_avx512 without its range clamp. */
    __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(q, _mm512_set1_ps(-OLC_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 e = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_HI), _mm512_sub_ps(_mm512_setzero_ps(), q));
    e = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_LO), e);
    __m512 ep = _mm512_fmadd_ps(_mm512_set1_ps(OLC_EXP_E5), e, _mm512_set1_ps(OLC_EXP_E4));
    ep = _mm512_fmadd_ps(ep, e, _mm512_set1_ps(OLC_EXP_E3));
    ep = _mm512_fmadd_ps(ep, e, _mm512_set1_ps(OLC_EXP_E2));
    ep = _mm512_fmadd_ps(ep, e, _mm512_set1_ps(OLC_EXP_E1));
    ep = _mm512_fmadd_ps(ep, e, _mm512_set1_ps(1.0f));
    ep = _mm512_scalef_ps(_mm512_fmadd_ps(ep, e, _mm512_set1_ps(1.0f)), kf);
    __m512 r = _mm512_sub_ps(_mm512_set1_ps(1.0f), ep);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, _mm512_set1_ps(OLC_ERF_ONE), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, _mm512_set1_ps(OLC_ERF_SPLIT), _CMP_LT_OQ), small);
    /* NaN fails both compares and would leave a finite r (Gelu's Phi == 0
     * guard then made inf - inf a -0): it stays NaN, as in the twins. */
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r),
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}
static inline OLC_TARGET_AVX512 __m512 olc_gelu_ps_avx512(__m512 x) {
    const __m512 half = _mm512_set1_ps(0.5f);
    __m512 phi = _mm512_fmadd_ps(half, olc_erf_ps_avx512(_mm512_mul_ps(x, _mm512_set1_ps(OLC_SQRT1_2))), half);
    __m512 y = _mm512_mul_ps(x, phi);
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(phi, _mm512_setzero_ps(), _CMP_EQ_OQ), _mm512_set1_ps(-0.0f));
}
static inline OLC_TARGET_AVX512 __m512 olc_swish_ps_avx512(__m512 a, __m512 alpha) {
    return _mm512_mul_ps(a, olc_sigmoid_ps_avx512(_mm512_mul_ps(alpha, a)));
}
#endif

/* One signature for both operators: BiasGelu reads x = a rows of n and
 * b = the bias (n); SwiGLU reads a and b of rows * n elements.  Rows
 * [r0, r1) only, so threads split whole rows. */
typedef struct {
    const void *a, *b;
    void *y;
    int64_t n;      /* row length (BiasGelu: the bias length; SwiGLU: whole size) */
    float alpha;
} olc_act_args;
typedef void (*olc_act_fn)(const olc_act_args *p, int64_t r0, int64_t r1);

/* bias_row: whether b is indexed per row (BiasGelu) or alongside a (SwiGLU). */
#define OLC_ACT_SCALAR(tname, T, load, store)                                        \
    static void olc_bias_gelu_##tname##_scalar(const olc_act_args *p, int64_t r0, int64_t r1) { \
        const T *a = (const T *)p->a, *b = (const T *)p->b; T *y = (T *)p->y;      \
        for (int64_t r = r0; r < r1; ++r)                                          \
            for (int64_t j = 0; j < p->n; ++j)                                     \
                y[r * p->n + j] = store(olc_geluf_(load(a[r * p->n + j]) + load(b[j]))); \
    }                                                                              \
    static void olc_swiglu_##tname##_scalar(const olc_act_args *p, int64_t r0, int64_t r1) { \
        const T *a = (const T *)p->a, *b = (const T *)p->b; T *y = (T *)p->y;      \
        for (int64_t i = r0 * p->n; i < r1 * p->n; ++i)                            \
            y[i] = store(olc_swishf_(load(a[i]), p->alpha) * load(b[i]));          \
    }
OLC_ACT_SCALAR(f32, float, OLC_IDENTITY_, OLC_IDENTITY_)
OLC_ACT_SCALAR(f16, uint16_t, olc_h2f, olc_f2h)
OLC_ACT_SCALAR(bf16, uint16_t, olc_bf2f, olc_f2bf)

static void olc_bias_gelu_f64_scalar(const olc_act_args *p, int64_t r0, int64_t r1) {
    const double *a = (const double *)p->a, *b = (const double *)p->b; double *y = (double *)p->y;
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < p->n; ++j) {
            double x = a[r * p->n + j] + b[j], phi = 0.5 * erfc(-x * 0.70710678118654752440);
            y[r * p->n + j] = phi == 0.0 ? -0.0 : x * phi;
        }
}
static void olc_swiglu_f64_scalar(const olc_act_args *p, int64_t r0, int64_t r1) {
    const double *a = (const double *)p->a, *b = (const double *)p->b; double *y = (double *)p->y;
    double alpha = p->alpha;
    for (int64_t i = r0 * p->n; i < r1 * p->n; ++i) {
        double z = alpha * a[i];
        double s = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
        y[i] = a[i] * s * b[i];
    }
}

/* Vector loops: whole vectors, then the tail through the same code
 * (AVX2 via a stack buffer, AVX-512 masked). */
#if OLC_X86
#define OLC_ACT_AVX2(tname, T)                                                       \
    static OLC_TARGET_AVX2 void olc_gelu_span_##tname##_avx2(const T *a, const T *b, T *y, int64_t n) { \
        int64_t j = 0;                                                             \
        for (; j + 8 <= n; j += 8)                                                 \
            olc_st_##tname##_avx2(y + j, olc_gelu_ps_avx2(_mm256_add_ps(           \
                olc_ld_##tname##_avx2(a + j), olc_ld_##tname##_avx2(b + j))));     \
        if (j < n) {                                                               \
            T ba[8] = {0}, bb[8] = {0};                                            \
            memcpy(ba, a + j, (size_t)(n - j) * sizeof(T));                        \
            memcpy(bb, b + j, (size_t)(n - j) * sizeof(T));                        \
            olc_st_##tname##_avx2(ba, olc_gelu_ps_avx2(_mm256_add_ps(              \
                olc_ld_##tname##_avx2(ba), olc_ld_##tname##_avx2(bb))));           \
            memcpy(y + j, ba, (size_t)(n - j) * sizeof(T));                        \
        }                                                                          \
    }                                                                              \
    static OLC_TARGET_AVX2 void olc_bias_gelu_##tname##_avx2(const olc_act_args *p, int64_t r0, int64_t r1) { \
        const T *a = (const T *)p->a, *b = (const T *)p->b; T *y = (T *)p->y;      \
        for (int64_t r = r0; r < r1; ++r)                                          \
            olc_gelu_span_##tname##_avx2(a + r * p->n, b, y + r * p->n, p->n);     \
    }                                                                              \
    static OLC_TARGET_AVX2 void olc_swiglu_##tname##_avx2(const olc_act_args *p, int64_t r0, int64_t r1) { \
        const T *a = (const T *)p->a, *b = (const T *)p->b; T *y = (T *)p->y;      \
        const __m256 alpha = _mm256_set1_ps(p->alpha);                             \
        int64_t i = r0 * p->n, end = r1 * p->n;                                    \
        for (; i + 8 <= end; i += 8)                                               \
            olc_st_##tname##_avx2(y + i, _mm256_mul_ps(olc_swish_ps_avx2(          \
                olc_ld_##tname##_avx2(a + i), alpha), olc_ld_##tname##_avx2(b + i))); \
        if (i < end) {                                                             \
            T ba[8] = {0}, bb[8] = {0};                                            \
            memcpy(ba, a + i, (size_t)(end - i) * sizeof(T));                      \
            memcpy(bb, b + i, (size_t)(end - i) * sizeof(T));                      \
            olc_st_##tname##_avx2(ba, _mm256_mul_ps(olc_swish_ps_avx2(             \
                olc_ld_##tname##_avx2(ba), alpha), olc_ld_##tname##_avx2(bb)));    \
            memcpy(y + i, ba, (size_t)(end - i) * sizeof(T));                      \
        }                                                                          \
    }
OLC_ACT_AVX2(f32, float)
OLC_ACT_AVX2(f16, uint16_t)
OLC_ACT_AVX2(bf16, uint16_t)
#endif

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_ACT_AVX512(tname, T)                                                     \
    static OLC_TARGET_AVX512 void olc_bias_gelu_##tname##_avx512(const olc_act_args *p, int64_t r0, int64_t r1) { \
        const T *a = (const T *)p->a, *b = (const T *)p->b; T *y = (T *)p->y;      \
        int64_t n = p->n;                                                          \
        for (int64_t r = r0; r < r1; ++r) {                                        \
            const T *ar = a + r * n; T *yr = y + r * n;                            \
            for (int64_t j = 0; j < n; j += 16) {                                  \
                __mmask16 m = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1); \
                olc_st_##tname##_avx512(yr + j, m, olc_gelu_ps_avx512(_mm512_add_ps( \
                    olc_ld_##tname##_avx512(ar + j, m), olc_ld_##tname##_avx512(b + j, m)))); \
            }                                                                      \
        }                                                                          \
    }                                                                              \
    static OLC_TARGET_AVX512 void olc_swiglu_##tname##_avx512(const olc_act_args *p, int64_t r0, int64_t r1) { \
        const T *a = (const T *)p->a, *b = (const T *)p->b; T *y = (T *)p->y;      \
        const __m512 alpha = _mm512_set1_ps(p->alpha);                             \
        int64_t end = r1 * p->n;                                                   \
        for (int64_t i = r0 * p->n; i < end; i += 16) {                            \
            __mmask16 m = end - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (end - i)) - 1); \
            olc_st_##tname##_avx512(y + i, m, _mm512_mul_ps(olc_swish_ps_avx512(   \
                olc_ld_##tname##_avx512(a + i, m), alpha), olc_ld_##tname##_avx512(b + i, m))); \
        }                                                                          \
    }
OLC_ACT_AVX512(f32, float)
OLC_ACT_AVX512(f16, uint16_t)
OLC_ACT_AVX512(bf16, uint16_t)
#endif

static int olc_act_level(int dtype, int level) {
    if (dtype == 11) return OLC_SCALAR;  /* double: libm */
    return olc_build_level(level);
}

#define OLC_ACT_PICK_(op, tname, level)                                               \
    do {                                                                              \
        OLC_ACT_PICK_512_(op, tname, level)                                           \
        OLC_ACT_PICK_2_(op, tname, level)                                             \
        return olc_##op##_##tname##_scalar;                                           \
    } while (0)
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_ACT_PICK_512_(op, tname, level) if (level >= OLC_AVX512) return olc_##op##_##tname##_avx512;
#else
#define OLC_ACT_PICK_512_(op, tname, level)
#endif
#if OLC_X86
#define OLC_ACT_PICK_2_(op, tname, level) if (level >= OLC_AVX2) return olc_##op##_##tname##_avx2;
#else
#define OLC_ACT_PICK_2_(op, tname, level)
#endif

static olc_act_fn olc_act_select(int op, int dtype, int level) {
    level = olc_act_level(dtype, level);
    if (op == OLC_ACT_BIAS_GELU) {
        switch (dtype) {
        case 1: OLC_ACT_PICK_(bias_gelu, f32, level);
        case 10: OLC_ACT_PICK_(bias_gelu, f16, level);
        case 16: OLC_ACT_PICK_(bias_gelu, bf16, level);
        case 11: return olc_bias_gelu_f64_scalar;
        }
    } else {
        switch (dtype) {
        case 1: OLC_ACT_PICK_(swiglu, f32, level);
        case 10: OLC_ACT_PICK_(swiglu, f16, level);
        case 16: OLC_ACT_PICK_(swiglu, bf16, level);
        case 11: return olc_swiglu_f64_scalar;
        }
    }
    return NULL;
}

#endif /* OLC_ACTIVATION_H */
