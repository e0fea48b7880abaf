/* BiasGelu (exact erf Gelu of a + bias) and SwiGLU (a * sigmoid(alpha a) * b).
 *
 * float16 and bfloat16 are computed in float32 and rounded once at the
 * store; double runs a scalar loop on libm.  olc_act_select(op, dtype,
 * level) returns the row function, olc_act_level() the level it uses;
 * dtype is an olc_types.h code (OLC_FLOAT, OLC_FLOAT16, OLC_DOUBLE,
 * OLC_BFLOAT16).  The row functions of float, float16 and bfloat16 are
 * bodies included per type: olc_activation_scalar.h, olc_activation_avx2.h,
 * olc_activation_avx512.h.
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
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_types.h"

enum { OLC_ACT_BIAS_GELU = 0, OLC_ACT_SWIGLU = 1 };

#define OLC_ERF_SPLIT 0.875f
#define OLC_ERF_ONE 3.92f
/* P(u) = ((((P0 u + P1) u + P2) u + P3) u + P4) u + P5, Q of degree 7 alike. */
#define OLC_ERF_P0 (-0x1.46075ep-11f)
#define OLC_ERF_P1 0x1.49fb5ep-8f
#define OLC_ERF_P2 (-0x1.b6fbe6p-6f)
#define OLC_ERF_P3 0x1.ce21b2p-4f
#define OLC_ERF_P4 (-0x1.81270ep-2f)
#define OLC_ERF_P5 0x1.20dd74p+0f
#define OLC_ERF_Q0 0x1.ea47bap-17f
#define OLC_ERF_Q1 (-0x1.06cc82p-12f)
#define OLC_ERF_Q2 0x1.0c929ep-9f
#define OLC_ERF_Q3 (-0x1.6ac8dap-7f)
#define OLC_ERF_Q4 0x1.7e3fd4p-5f
#define OLC_ERF_Q5 0x1.a73d26p-1f
#define OLC_ERF_Q6 0x1.3710f6p+1f
#define OLC_ERF_Q7 0x1.886734p+0f
#define OLC_SQRT1_2 0x1.6a09e6p-1f

/* ---- scalar twins ---- */
/* erf's polynomials in Horner's order: P(u), u = x^2, below the split;
 * Q(t), t = |x| - split, on the tail (erf = 1 - e^-Q).  The Gelu of
 * unary/olc_unary.h takes them too. */
static inline float olc_erf_pf_(float u) {
    float p = olc_fmaf_(OLC_ERF_P0, u, OLC_ERF_P1);
    p = olc_fmaf_(p, u, OLC_ERF_P2);
    p = olc_fmaf_(p, u, OLC_ERF_P3);
    p = olc_fmaf_(p, u, OLC_ERF_P4);
    return olc_fmaf_(p, u, OLC_ERF_P5);
}
static inline float olc_erf_qf_(float t) {
    float q = olc_fmaf_(OLC_ERF_Q0, t, OLC_ERF_Q1);
    q = olc_fmaf_(q, t, OLC_ERF_Q2);
    q = olc_fmaf_(q, t, OLC_ERF_Q3);
    q = olc_fmaf_(q, t, OLC_ERF_Q4);
    q = olc_fmaf_(q, t, OLC_ERF_Q5);
    q = olc_fmaf_(q, t, OLC_ERF_Q6);
    return olc_fmaf_(q, t, OLC_ERF_Q7);
}
static inline float olc_erff_(float x) {
    float a = fabsf(x), r;
    if (a < OLC_ERF_SPLIT) {
        r = a * olc_erf_pf_(a * a);
    } else if (a < OLC_ERF_ONE) {
        r = 1.0f - olc_expf_(-olc_erf_qf_(a - OLC_ERF_SPLIT));
    } else {
        r = a == a ? 1.0f : a;  /* NaN stays NaN */
    }
    return copysignf(r, x);
}

/* Gelu, erf form: x Phi(x), Phi(x) = 1/2 + erf(v)/2, v = x / sqrt 2, on
 * erf's polynomials (P/2 and -Q are exact): |v| < 0.875: Phi = 1/2 +
 * v P(v^2)/2, one rounding; |v| < 3.92: h = erfc(|v|)/2 =
 * exp(-Q(|v| - 0.875))/2 and Phi = h (x < 0) or 1 - h, so that x < 0 keeps
 * relative precision down to x = -5.54; beyond, Phi = 0 or 1 (-0 for finite
 * x; -inf gives NaN as the operator's definition, -inf * 0, and ONNX
 * Runtime's Gelu and BiasGelu do).  The same bits at every level.  Error,
 * all 2^32 float32 inputs against a double-precision reference: x >= 0:
 * 1.9 ulp; x in [-1.24, 0): 4.8 ulp (1/2 + v P/2 cancels a little); x in
 * [-5.54, -1.24): 62 ulp (Q's fit error, 3.9e-6 relative); below, -0
 * (|y| < 2.3e-8).  The former 1/2 + erf/2 throughout had an absolute error
 * of about |x| ulp(1) below zero (0 from about x = -5.3 on, where |y| is
 * still 2e-7).  Unary Gelu (ai.onnx, com.microsoft) and BiasGelu run it. */
static inline float olc_gelu_erf_ps_scalar(float x) {
    float v = x * OLC_SQRT1_2, a = fabsf(v), phi;
    if (a < OLC_ERF_SPLIT) {
        phi = olc_fmaf_(v, 0.5f * olc_erf_pf_(v * v), 0.5f);
    } else {
        float h = a < OLC_ERF_ONE ? olc_exp_halff_(-olc_erf_qf_(a - OLC_ERF_SPLIT)) : 0.0f;
        phi = signbit(x) ? h : 1.0f - h;
    }
    return x * phi;
}
/* float64: x Phi(x) on libm's erfc, precise below zero as well. */
static inline double olc_gelu_erf_d_(double x) { return x * (0.5 * erfc(-x * 0.70710678118654752440)); }

static inline float olc_swishf_(float a, float alpha) { return a * olc_sigmoidf_(alpha * a); }

#if OLC_X86
/* ---- AVX2 ---- */
/* erf's polynomials, as olc_erf_pf_ and olc_erf_qf_ */
static inline OLC_TARGET_AVX2 __m256 olc_erf_p_ps_avx2(__m256 u) {
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(OLC_ERF_P0), u, _mm256_set1_ps(OLC_ERF_P1));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(OLC_ERF_P2));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(OLC_ERF_P3));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(OLC_ERF_P4));
    return _mm256_fmadd_ps(p, u, _mm256_set1_ps(OLC_ERF_P5));
}
static inline OLC_TARGET_AVX2 __m256 olc_erf_q_ps_avx2(__m256 t) {
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(OLC_ERF_Q0), t, _mm256_set1_ps(OLC_ERF_Q1));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(OLC_ERF_Q2));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(OLC_ERF_Q3));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(OLC_ERF_Q4));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(OLC_ERF_Q5));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(OLC_ERF_Q6));
    return _mm256_fmadd_ps(q, t, _mm256_set1_ps(OLC_ERF_Q7));
}
static inline OLC_TARGET_AVX2 __m256 olc_erf_ps_avx2(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign, x);
    __m256 small = _mm256_mul_ps(a, olc_erf_p_ps_avx2(_mm256_mul_ps(a, a)));
    __m256 t = _mm256_sub_ps(_mm256_min_ps(a, _mm256_set1_ps(OLC_ERF_ONE)), _mm256_set1_ps(OLC_ERF_SPLIT));
    __m256 q = olc_erf_q_ps_avx2(t);
    __m256 large = _mm256_sub_ps(_mm256_set1_ps(1.0f), olc_exp_ps_avx2(_mm256_sub_ps(_mm256_setzero_ps(), q)));
    large = _mm256_blendv_ps(large, _mm256_set1_ps(1.0f), _mm256_cmp_ps(a, _mm256_set1_ps(OLC_ERF_ONE), _CMP_GE_OQ));
    __m256 r = _mm256_blendv_ps(large, small, _mm256_cmp_ps(a, _mm256_set1_ps(OLC_ERF_SPLIT), _CMP_LT_OQ));
    r = _mm256_blendv_ps(r, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_or_ps(r, _mm256_and_ps(sign, x));
}
static inline OLC_TARGET_AVX2 __m256 olc_gelu_erf_ps_avx2(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 v = _mm256_mul_ps(x, _mm256_set1_ps(OLC_SQRT1_2));
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    __m256 p = _mm256_mul_ps(_mm256_set1_ps(0.5f), olc_erf_p_ps_avx2(_mm256_mul_ps(v, v)));
    __m256 small = _mm256_fmadd_ps(v, p, _mm256_set1_ps(0.5f));
    /* the tail for every lane; where |v| >= 3.92 (NaN included) t runs
     * outside Q's range and h, whatever it is, is masked to 0 */
    __m256 t = _mm256_sub_ps(a, _mm256_set1_ps(OLC_ERF_SPLIT));
    __m256 q = _mm256_xor_ps(olc_erf_q_ps_avx2(t), _mm256_set1_ps(-0.0f)); /* -Q, exact */
    __m256 h = _mm256_and_ps(olc_exp_half_ps_avx2(q), _mm256_cmp_ps(a, _mm256_set1_ps(OLC_ERF_ONE), _CMP_LT_OQ));
    __m256 large = _mm256_blendv_ps(_mm256_sub_ps(one, h), h, x); /* h where x's sign bit is set */
    __m256 phi = _mm256_blendv_ps(large, small, _mm256_cmp_ps(a, _mm256_set1_ps(OLC_ERF_SPLIT), _CMP_LT_OQ));
    return _mm256_mul_ps(x, phi);
}
static inline OLC_TARGET_AVX2 __m256 olc_swish_ps_avx2(__m256 a, __m256 alpha) {
    return _mm256_mul_ps(a, olc_sigmoid_ps_avx2(_mm256_mul_ps(alpha, a)));
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
/* ---- AVX-512 ---- */
/* erf's polynomials, as olc_erf_pf_ and olc_erf_qf_ */
static inline OLC_TARGET_AVX512 __m512 olc_erf_p_ps_avx512(__m512 u) {
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(OLC_ERF_P0), u, _mm512_set1_ps(OLC_ERF_P1));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(OLC_ERF_P2));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(OLC_ERF_P3));
    p = _mm512_fmadd_ps(p, u, _mm512_set1_ps(OLC_ERF_P4));
    return _mm512_fmadd_ps(p, u, _mm512_set1_ps(OLC_ERF_P5));
}
static inline OLC_TARGET_AVX512 __m512 olc_erf_q_ps_avx512(__m512 t) {
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(OLC_ERF_Q0), t, _mm512_set1_ps(OLC_ERF_Q1));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(OLC_ERF_Q2));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(OLC_ERF_Q3));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(OLC_ERF_Q4));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(OLC_ERF_Q5));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(OLC_ERF_Q6));
    return _mm512_fmadd_ps(q, t, _mm512_set1_ps(OLC_ERF_Q7));
}
static inline OLC_TARGET_AVX512 __m512 olc_erf_ps_avx512(__m512 x) {
    __m512 a = _mm512_abs_ps(x);
    __m512 small = _mm512_mul_ps(a, olc_erf_p_ps_avx512(_mm512_mul_ps(a, a)));
    __m512 t = _mm512_sub_ps(_mm512_min_ps(a, _mm512_set1_ps(OLC_ERF_ONE)), _mm512_set1_ps(OLC_ERF_SPLIT));
    __m512 q = olc_erf_q_ps_avx512(t);
    /* exp(-q) for q in [0.7, 17]: olc_exp_ps_avx512 without its range clamp. */
    __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(q, _mm512_set1_ps(-OLC_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 e = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_HI), _mm512_sub_ps(_mm512_setzero_ps(), q));
    e = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_LO), e);
    __m512 ep = _mm512_scalef_ps(olc_exp_poly_ps_avx512(e), kf);
    __m512 r = _mm512_sub_ps(_mm512_set1_ps(1.0f), ep);
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, _mm512_set1_ps(OLC_ERF_ONE), _CMP_GE_OQ), _mm512_set1_ps(1.0f));
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, _mm512_set1_ps(OLC_ERF_SPLIT), _CMP_LT_OQ), small);
    /* NaN fails both compares and would leave a finite r (Gelu's Phi == 0
     * guard then made inf - inf a -0): it stays NaN, as in the twins. */
    r = _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r),
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}
static inline OLC_TARGET_AVX512 __m512 olc_gelu_erf_ps_avx512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 v = _mm512_mul_ps(x, _mm512_set1_ps(OLC_SQRT1_2));
    __m512 a = _mm512_abs_ps(v);
    __m512 p = _mm512_mul_ps(_mm512_set1_ps(0.5f), olc_erf_p_ps_avx512(_mm512_mul_ps(v, v)));
    __m512 small = _mm512_fmadd_ps(v, p, _mm512_set1_ps(0.5f));
    __m512 t = _mm512_sub_ps(a, _mm512_set1_ps(OLC_ERF_SPLIT));
    __m512 q = _mm512_xor_ps(olc_erf_q_ps_avx512(t), _mm512_set1_ps(-0.0f)); /* -Q, exact */
    __m512 h = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(OLC_ERF_ONE), _CMP_LT_OQ),
                                   olc_exp_half_ps_avx512(q));
    __mmask16 neg = _mm512_movepi32_mask(_mm512_castps_si512(x)); /* x's sign bit */
    __m512 large = _mm512_mask_mov_ps(_mm512_sub_ps(one, h), neg, h);
    __m512 phi = _mm512_mask_mov_ps(large, _mm512_cmp_ps_mask(a, _mm512_set1_ps(OLC_ERF_SPLIT), _CMP_LT_OQ), small);
    return _mm512_mul_ps(x, phi);
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

/* Element types by name (f32, f16, bf16), as the bodies use them: the C
 * type, the load to float32 and the store from it. */
typedef float olc_act_t_f32;
typedef uint16_t olc_act_t_f16;
typedef uint16_t olc_act_t_bf16;
#define OLC_ACT_LD_f32(v) (v)
#define OLC_ACT_LD_f16(v) olc_h2f(v)
#define OLC_ACT_LD_bf16(v) olc_bf2f(v)
#define OLC_ACT_ST_f32(v) (v)
#define OLC_ACT_ST_f16(v) olc_f2h(v)
#define OLC_ACT_ST_bf16(v) olc_f2bf(v)
#define OLC_ACT_T OLC_CAT(olc_act_t, OLC_ACT_TN)
#define OLC_ACT_LD OLC_CAT(OLC_ACT_LD, OLC_ACT_TN)
#define OLC_ACT_ST OLC_CAT(OLC_ACT_ST, OLC_ACT_TN)
#define OLC_ACT_VLD OLC_FN(OLC_CAT(olc_ld, OLC_ACT_TN))
#define OLC_ACT_VST OLC_FN(OLC_CAT(olc_st, OLC_ACT_TN))
#define OLC_ACT_FN(name) OLC_FN(OLC_CAT(name, OLC_ACT_TN))

#define OLC_LVL scalar
#define OLC_LVL_ATTR
#define OLC_ACT_TN f32
#include "engines/activation/olc_activation_scalar.h"
#undef OLC_ACT_TN
#define OLC_ACT_TN f16
#include "engines/activation/olc_activation_scalar.h"
#undef OLC_ACT_TN
#define OLC_ACT_TN bf16
#include "engines/activation/olc_activation_scalar.h"
#undef OLC_ACT_TN
#undef OLC_LVL
#undef OLC_LVL_ATTR

static void olc_bias_gelu_f64_scalar(const olc_act_args *p, int64_t r0, int64_t r1) {
    const double *a = (const double *)p->a, *b = (const double *)p->b; double *y = (double *)p->y;
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < p->n; ++j) {
            y[r * p->n + j] = olc_gelu_erf_d_(a[r * p->n + j] + b[j]);
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
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_ACT_TN f32
#include "engines/activation/olc_activation_avx2.h"
#undef OLC_ACT_TN
#define OLC_ACT_TN f16
#include "engines/activation/olc_activation_avx2.h"
#undef OLC_ACT_TN
#define OLC_ACT_TN bf16
#include "engines/activation/olc_activation_avx2.h"
#undef OLC_ACT_TN
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_ACT_TN f32
#include "engines/activation/olc_activation_avx512.h"
#undef OLC_ACT_TN
#define OLC_ACT_TN f16
#include "engines/activation/olc_activation_avx512.h"
#undef OLC_ACT_TN
#define OLC_ACT_TN bf16
#include "engines/activation/olc_activation_avx512.h"
#undef OLC_ACT_TN
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

static int olc_act_level(int dtype, int level) {
    if (dtype == OLC_DOUBLE) return OLC_SCALAR;  /* double: libm */
    return olc_build_level(level);
}

/* The row function of op (OLC_ACT_BIAS_GELU, OLC_ACT_SWIGLU) for dtype at
 * the highest level <= level; NULL for an unsupported dtype. */
static olc_act_fn olc_act_select(int op, int dtype, int level) {
    /* [op][type: float, float16, bfloat16] */
    static const olc_act_fn fns_scalar[2][3] = {
        {olc_bias_gelu_f32_scalar, olc_bias_gelu_f16_scalar, olc_bias_gelu_bf16_scalar},
        {olc_swiglu_f32_scalar, olc_swiglu_f16_scalar, olc_swiglu_bf16_scalar},
    };
#if OLC_X86
    static const olc_act_fn fns_avx2[2][3] = {
        {olc_bias_gelu_f32_avx2, olc_bias_gelu_f16_avx2, olc_bias_gelu_bf16_avx2},
        {olc_swiglu_f32_avx2, olc_swiglu_f16_avx2, olc_swiglu_bf16_avx2},
    };
#endif
#if OLC_X86 && OLC_HAVE_AVX512
    static const olc_act_fn fns_avx512[2][3] = {
        {olc_bias_gelu_f32_avx512, olc_bias_gelu_f16_avx512, olc_bias_gelu_bf16_avx512},
        {olc_swiglu_f32_avx512, olc_swiglu_f16_avx512, olc_swiglu_bf16_avx512},
    };
#endif
    int k = op == OLC_ACT_BIAS_GELU ? 0 : 1;
    if (dtype == OLC_DOUBLE) return k == 0 ? olc_bias_gelu_f64_scalar : olc_swiglu_f64_scalar;
    int t = dtype == OLC_FLOAT ? 0 : dtype == OLC_FLOAT16 ? 1 : dtype == OLC_BFLOAT16 ? 2 : -1;
    if (t < 0) return NULL;
    level = olc_act_level(dtype, level);
    return OLC_LEVEL_FN(level, fns)[k][t];
}

#endif /* OLC_ACTIVATION_H */
