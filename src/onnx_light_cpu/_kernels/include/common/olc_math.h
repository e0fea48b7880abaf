/* Element-wise exp, log, sigmoid and tanh.
 *
 * API: olc_<op>_<type>_<level>(const T *x, T *y, int64_t n)
 *   op    exp, log, sigmoid, tanh
 *   type  f32 (float), f16 (uint16_t IEEE half bits), bf16 (uint16_t bfloat16 bits)
 *   level scalar, avx2 (only #if OLC_X86), avx512 (only #if OLC_X86 && OLC_HAVE_AVX512)
 * plus olc_<op>_f64_scalar(const double *x, double *y, int64_t n) (libm).
 * The Gelu family's helpers olc_exp_half_ps_<level> and
 * olc_onepexp_ps_<level> (see "x / (1 + e^z)" below) have no array loops.
 *
 * float32 is computed by one algorithm per op, written three times: a scalar
 * twin in portable C and one vector function per instruction set.  The twins
 * perform the same IEEE operations in the same order (fused multiply-adds
 * included), so every level returns the same bits, within 2 ulp (in practice
 * about 1) of the correctly rounded result over the whole float range,
 * subnormals, infinities and NaN included.  f16 and bf16 are widened to
 * float32, computed by the same function and rounded back to nearest-even.
 *
 * Notes for editing:
 *  - The vector code is built with GCC's default -ffp-contract=fast, so a
 *    plain multiply whose every use is an add may be fused into an FMA there
 *    but not in the scalar twin (baseline x86-64 has no FMA).  Keep each
 *    multiply feeding an add an explicit FMA in both versions, unless the
 *    product is exact.
 *  - x86 min/max return their second operand when either is NaN; clamps are
 *    written min(limit, x) so that a NaN x passes through (olc_minf_ and
 *    olc_maxf_ reproduce this in C).
 */
#ifndef OLC_MATH_H
#define OLC_MATH_H
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_vec.h"

/* ---- constants shared by the scalar and vector code ---- */

/* exp: n = round(x log2(e)) by adding 1.5*2^23 (the sum's low mantissa bits
 * are then n); r = x - n ln2 in two FMAs with ln2 = HI + LO, HI = float(ln2).
 * The input is clamped to [-104, 89]: beyond, the result is 0 or inf anyway
 * and 2^n stays within two float factors. */
#define OLC_EXP_LO (-104.0f)
#define OLC_EXP_HI 89.0f
#define OLC_LOG2E 0x1.715476p+0f
#define OLC_SHIFTER 0x1.8p23f          /* bits 0x4b400000 */
#define OLC_LN2_HI 0x1.62e430p-1f
#define OLC_LN2_LO (-0x1.05c610p-29f)
/* e^r = 1 + r q(r) on |r| <= ln2/2, q(r) = 1 + r (E1 + r (E2 + ... + r E5)):
 * minimax for the relative error of e^r (Lawson/IRLS fit, coefficients
 * rounded to float one at a time with refits), error 2^-28.2. */
#define OLC_EXP_E1 0x1.fffffcp-2f
#define OLC_EXP_E2 0x1.555494p-3f
#define OLC_EXP_E3 0x1.5558bep-5f
#define OLC_EXP_E4 0x1.123856p-7f
#define OLC_EXP_E5 0x1.6a3d10p-10f

/* log: x = 2^k m with m in [sqrt(1/2), sqrt(2)) (0x3f3504f3 = float just
 * below sqrt(1/2)), f = m - 1 exact; log x = k ln2 + log1p(f).
 * ln2 = HI + LO with HI = 0x1.62e4p-1 (15 significant bits), so k*HI is
 * exact for |k| <= 256 and k*HI + f is summed exactly (Fast2Sum). */
#define OLC_SQRTH_BITS 0x3f3504f3
#define OLC_LOG_LN2_HI 0x1.62e4p-1f
#define OLC_LOG_LN2_LO 0x1.7f7d1cp-20f
/* log1p(f) = f + f^2 P(f), P(f) = -1/2 + f (L1 + f (L2 + ... + f L8)) on
 * f in [sqrt(1/2)-1, sqrt(2)-1]: minimax for the error relative to log1p(f),
 * 2^-27.4. */
#define OLC_LOG_L1 0x1.555554p-2f
#define OLC_LOG_L2 (-0x1.000226p-2f)
#define OLC_LOG_L3 0x1.99a01cp-3f
#define OLC_LOG_L4 (-0x1.54728ap-3f)
#define OLC_LOG_L5 0x1.22d92ep-3f
#define OLC_LOG_L6 (-0x1.0d8242p-3f)
#define OLC_LOG_L7 0x1.055ec6p-3f
#define OLC_LOG_L8 (-0x1.38c9dep-4f)

/* tanh: for |x| < 0.55 (tanh < 0.5) tanh(x) = x + x^3 P(x^2), minimax
 * relative to tanh on [0, 0.55], 2^-29.7; above, 1 - 2/(e^(2|x|) + 1)
 * where the subtraction loses at most one bit.  tanh(9.1) rounds to 1, so
 * |x| is clamped there (keeps e^(2|x|) finite). */
#define OLC_TANH_SMALL 0.55f
#define OLC_TANH_CLAMP 9.1f
#define OLC_TANH_T0 (-0x1.55554ap-2f)
#define OLC_TANH_T1 0x1.110ceep-3f
#define OLC_TANH_T2 (-0x1.b91e7ep-5f)
#define OLC_TANH_T3 0x1.58e518p-6f
#define OLC_TANH_T4 (-0x1.9921a2p-8f)

/* sigmoid(x) = num / (1 + e) with e = exp(-|x|), num = 1 (x >= 0) or e
 * (x < 0, so large negative x gives correctly rounded subnormals).  tanh's
 * 2/(e + 1) is done the same way.  The quotient is refined with the exact
 * rounding error of the denominator (Fast2Sum) and the FMA residual of the
 * division, so only exp's error and one final rounding remain. */

/* x / (1 + e^z), the form of the tanh Gelu (z = -2 sqrt(2/pi) (x + 0.044715
 * x^3)) and of QuickGelu (z = -alpha x), takes one exp and one division.
 * Only 1 + e^z is needed, so exp is cut down (exp_half, onepexp):
 *  - e^z / 2 = p 2^(n-1) with p = e^r as in exp and 2^(n-1) built from n
 *    directly: one product, exact while n - 1 is in [-125, 127];
 *  - r = z - n ln2 with ln2 in one float (FMA): |n| 2^-28.9 more relative
 *    error, below the error that z itself carries (|z| 2^-24);
 *  - onepexp clamps z to [-86, 89] (n in [-124, 128]): below, 1 + e^z
 *    rounds to 1; above, e^z overflows and 1 + e^z = fma(e^z/2, 2, 1)
 *    rounds once, to inf from e^z > FLT_MAX on.  NaN passes (min/max).
 * exp_half has no clamp: the erf Gelu calls it on [-17, -0.7] only. */
#define OLC_ONEPEXP_LO (-86.0f)
#define OLC_ONEPEXP_HI 89.0f

/* ---- scalar twins ---- */

static inline uint32_t olc_fbits_(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float olc_bitsf_(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
#if defined(__GNUC__) || defined(__clang__)
#define OLC_UNLIKELY_(c) __builtin_expect(!!(c), 0)
#else
#define OLC_UNLIKELY_(c) (c)
#endif
/* x86 maxps/minps semantics: the second operand when either is NaN. */
static inline float olc_maxf_(float a, float b) { return a > b ? a : b; }
static inline float olc_minf_(float a, float b) { return a < b ? a : b; }

/* Fused multiply-add, correctly rounded, for the scalar twins.  Where the
 * compiler has a hardware FMA it is used.  On baseline x86-64 (no FMA, and a
 * call to libm's fmaf costs more than the rest) it is emulated: a*b is exact
 * in double, and s = a*b + c rounded to double and then to float is right
 * unless s is exactly halfway between two floats.  That (or a result below
 * the normal range, where the halfway bit is higher) is checked for, and
 * then s is moved one double ulp toward the exact sum (TwoSum error) if its
 * last bit is even: round-to-odd, which makes the float rounding exact. */
#if defined(__FP_FAST_FMAF) || !(defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0)
#define olc_fmaf_ fmaf
#else
static inline float olc_fmaf_(float a, float b, float c) {
    double p = (double)a * b, s = p + c;
    uint64_t u;
    memcpy(&u, &s, 8);
    /* halfway between two normal floats, or 0 < |s| < 2^-126 (rare) */
    if (OLC_UNLIKELY_((u & 0x1fffffff) == 0x10000000 || ((u >> 52) & 0x7ff) - 1u < 896u)) {
        double bp = s - p, err = (p - (s - bp)) + (c - bp);
        if (err != 0 && !(u & 1)) u += ((err > 0) == (s > 0)) ? 1 : (uint64_t)-1;
        memcpy(&s, &u, 8);
    }
    return (float)s;
}
#endif

/* e^r on |r| <= ln2/2: 1 + r q(r), the minimax above, in Horner's order
 * (every exp of this file, erf's tail and softmax's take it). */
static inline float olc_exp_polyf_(float r) {
    float q = olc_fmaf_(OLC_EXP_E5, r, OLC_EXP_E4);
    q = olc_fmaf_(q, r, OLC_EXP_E3);
    q = olc_fmaf_(q, r, OLC_EXP_E2);
    q = olc_fmaf_(q, r, OLC_EXP_E1);
    q = olc_fmaf_(q, r, 1.0f);
    return olc_fmaf_(q, r, 1.0f);
}

static inline float olc_expf_(float x) {
    x = olc_minf_(OLC_EXP_HI, olc_maxf_(OLC_EXP_LO, x));
    float kf = olc_fmaf_(x, OLC_LOG2E, OLC_SHIFTER);
    uint32_t n = olc_fbits_(kf) - 0x4b400000u;
    kf -= OLC_SHIFTER;
    float r = olc_fmaf_(kf, -OLC_LN2_HI, x);
    r = olc_fmaf_(kf, -OLC_LN2_LO, r);
    float p = olc_exp_polyf_(r);
    /* p * 2^n with n in [-150, 128] as two factors 2^n1 2^n2 (n1 = floor(n/2)),
     * both normal: p 2^n1 is exact, the second product rounds once (also
     * into the subnormal range or to inf).  The last product is an FMA with
     * +0 (same rounding) so that it is never fused into a caller's add. */
    uint32_t n1 = (uint32_t)((int32_t)n >> 1), n2 = n - n1;
    return olc_fmaf_(p * olc_bitsf_((n1 + 127u) << 23), olc_bitsf_((n2 + 127u) << 23), 0.0f);
}

static inline float olc_logf_(float x) {
    if (!(x > 0.0f && x < INFINITY)) /* negative, 0, inf, NaN */
        return x < 0.0f ? NAN : x == 0.0f ? -INFINITY : x;
    int32_t kadj = 0;
    if (x < 0x1p-126f) { x *= 0x1p23f; kadj = -23; } /* subnormal: normalise */
    uint32_t ix = olc_fbits_(x) - OLC_SQRTH_BITS;
    float kf = (float)(((int32_t)ix >> 23) + kadj);
    float f = olc_bitsf_((ix & 0x7fffff) + OLC_SQRTH_BITS) - 1.0f;
    float P = olc_fmaf_(OLC_LOG_L8, f, OLC_LOG_L7);
    P = olc_fmaf_(P, f, OLC_LOG_L6);
    P = olc_fmaf_(P, f, OLC_LOG_L5);
    P = olc_fmaf_(P, f, OLC_LOG_L4);
    P = olc_fmaf_(P, f, OLC_LOG_L3);
    P = olc_fmaf_(P, f, OLC_LOG_L2);
    P = olc_fmaf_(P, f, OLC_LOG_L1);
    P = olc_fmaf_(P, f, -0.5f);
    float lo = olc_fmaf_(kf, OLC_LOG_LN2_LO, (f * f) * P);
    float hi = kf * OLC_LOG_LN2_HI; /* exact, so contracting it is harmless */
    float s = hi + f, e = (hi - s) + f; /* Fast2Sum: |hi| >= |f| or hi = 0 */
    return s + (e + lo);
}

/* num / (d + derr) for d >= 1, derr tiny: rounded division, then one
 * correction by the exact residual num - q d (FMA) less q derr. */
static inline float olc_divf_(float num, float d, float derr) {
    float r = 1.0f / d, q = num * r;
    float t = olc_fmaf_(-q, d, num);
    t = olc_fmaf_(-q, derr, t);
    return olc_fmaf_(t, r, q);
}

static inline float olc_sigmoidf_(float x) {
    float e = olc_expf_(-fabsf(x));
    float d = 1.0f + e, derr = (1.0f - d) + e; /* Fast2Sum, e <= 1 */
    return olc_divf_(x < 0.0f ? e : 1.0f, d, derr);
}

static inline float olc_tanhf_(float x) {
    float a = fabsf(x), y;
    if (a < OLC_TANH_SMALL) {
        float u = a * a;
        float P = olc_fmaf_(OLC_TANH_T4, u, OLC_TANH_T3);
        P = olc_fmaf_(P, u, OLC_TANH_T2);
        P = olc_fmaf_(P, u, OLC_TANH_T1);
        P = olc_fmaf_(P, u, OLC_TANH_T0);
        y = olc_fmaf_(a * u, P, a);
    } else {
        float e = olc_expf_(2.0f * olc_minf_(OLC_TANH_CLAMP, a));
        float d = e + 1.0f, derr = (e - d) + 1.0f; /* Fast2Sum, e >= 1 */
        y = 1.0f - 2.0f * olc_divf_(1.0f, d, derr); /* 2q exact: fusing is harmless */
    }
    return copysignf(y, x);
}

/* e^z / 2 without a range clamp (see "x / (1 + e^z)" above). */
static inline float olc_exp_halff_(float z) {
    float kf = olc_fmaf_(z, OLC_LOG2E, OLC_SHIFTER);
    /* 2^(n-1): the low bits of kf are n (two's complement), so n + 126 is
     * the biased exponent; the shift drops the rest of kf */
    float s = olc_bitsf_((olc_fbits_(kf) + (126u - 0x4b400000u)) << 23);
    kf -= OLC_SHIFTER;
    float r = olc_fmaf_(kf, -OLC_LN2_HI, z);
    return olc_exp_polyf_(r) * s;
}

/* 1 + e^z, one rounding of (1 + e^z with exp's error). */
static inline float olc_onepexpf_(float z) {
    z = olc_minf_(OLC_ONEPEXP_HI, olc_maxf_(OLC_ONEPEXP_LO, z));
    return olc_fmaf_(olc_exp_halff_(z), 2.0f, 1.0f);
}

/* ---- AVX2 ---- */
#if OLC_X86

/* e^r on |r| <= ln2/2, as olc_exp_polyf_ */
static inline OLC_TARGET_AVX2 __m256 olc_exp_poly_ps_avx2(__m256 r) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(OLC_EXP_E5), r, _mm256_set1_ps(OLC_EXP_E4));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(OLC_EXP_E3));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(OLC_EXP_E2));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(OLC_EXP_E1));
    q = _mm256_fmadd_ps(q, r, one);
    return _mm256_fmadd_ps(q, r, one);
}

static inline OLC_TARGET_AVX2 __m256 olc_exp_ps_avx2(__m256 x) {
    const __m256 shifter = _mm256_set1_ps(OLC_SHIFTER);
    x = _mm256_min_ps(_mm256_set1_ps(OLC_EXP_HI), _mm256_max_ps(_mm256_set1_ps(OLC_EXP_LO), x));
    __m256 kf = _mm256_fmadd_ps(x, _mm256_set1_ps(OLC_LOG2E), shifter);
    __m256i n = _mm256_sub_epi32(_mm256_castps_si256(kf), _mm256_set1_epi32(0x4b400000));
    kf = _mm256_sub_ps(kf, shifter);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(OLC_LN2_HI), x);
    r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(OLC_LN2_LO), r);
    __m256 p = olc_exp_poly_ps_avx2(r);
    /* p * 2^n1 * 2^n2 as in olc_expf_ */
    __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    /* the last product as an FMA with +0, as in olc_expf_ */
    return _mm256_fmadd_ps(_mm256_mul_ps(p, s1), s2, _mm256_setzero_ps());
}

static inline OLC_TARGET_AVX2 __m256 olc_log_ps_avx2(__m256 x) {
    const __m256i sqrth = _mm256_set1_epi32(OLC_SQRTH_BITS);
    /* subnormal (and 0, negative) inputs: scale by 2^23, k -= 23 */
    __m256 sub = _mm256_cmp_ps(x, _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ);
    __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(0x1p23f)), sub);
    __m256i kadj = _mm256_and_si256(_mm256_castps_si256(sub), _mm256_set1_epi32(-23));
    __m256i ix = _mm256_sub_epi32(_mm256_castps_si256(xs), sqrth);
    __m256 kf = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_srai_epi32(ix, 23), kadj));
    __m256i mb = _mm256_add_epi32(_mm256_and_si256(ix, _mm256_set1_epi32(0x7fffff)), sqrth);
    __m256 f = _mm256_sub_ps(_mm256_castsi256_ps(mb), _mm256_set1_ps(1.0f));
    __m256 P = _mm256_fmadd_ps(_mm256_set1_ps(OLC_LOG_L8), f, _mm256_set1_ps(OLC_LOG_L7));
    P = _mm256_fmadd_ps(P, f, _mm256_set1_ps(OLC_LOG_L6));
    P = _mm256_fmadd_ps(P, f, _mm256_set1_ps(OLC_LOG_L5));
    P = _mm256_fmadd_ps(P, f, _mm256_set1_ps(OLC_LOG_L4));
    P = _mm256_fmadd_ps(P, f, _mm256_set1_ps(OLC_LOG_L3));
    P = _mm256_fmadd_ps(P, f, _mm256_set1_ps(OLC_LOG_L2));
    P = _mm256_fmadd_ps(P, f, _mm256_set1_ps(OLC_LOG_L1));
    P = _mm256_fmadd_ps(P, f, _mm256_set1_ps(-0.5f));
    __m256 lo = _mm256_fmadd_ps(kf, _mm256_set1_ps(OLC_LOG_LN2_LO), _mm256_mul_ps(_mm256_mul_ps(f, f), P));
    __m256 hi = _mm256_mul_ps(kf, _mm256_set1_ps(OLC_LOG_LN2_HI));
    __m256 s = _mm256_add_ps(hi, f);
    __m256 e = _mm256_add_ps(_mm256_sub_ps(hi, s), f);
    __m256 y = _mm256_add_ps(s, _mm256_add_ps(e, lo));
    /* x <= 0, inf, NaN (rare): fix up as in olc_logf_ */
    __m256 ok = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ),
                              _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_LT_OQ));
    if (OLC_UNLIKELY_(_mm256_movemask_ps(ok) != 0xff)) {
        __m256 nonfinite = _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_NLT_UQ); /* inf, NaN */
        y = _mm256_blendv_ps(y, x, nonfinite);
        y = _mm256_blendv_ps(y, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
        y = _mm256_blendv_ps(y, _mm256_set1_ps(NAN), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    }
    return y;
}

static inline OLC_TARGET_AVX2 __m256 olc_div_ps_avx2(__m256 num, __m256 d, __m256 derr) {
    __m256 r = _mm256_div_ps(_mm256_set1_ps(1.0f), d), q = _mm256_mul_ps(num, r);
    __m256 t = _mm256_fnmadd_ps(q, d, num);
    t = _mm256_fnmadd_ps(q, derr, t);
    return _mm256_fmadd_ps(t, r, q);
}

static inline OLC_TARGET_AVX2 __m256 olc_sigmoid_ps_avx2(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f);
    __m256 e = olc_exp_ps_avx2(_mm256_or_ps(x, _mm256_set1_ps(-0.0f)));
    __m256 d = _mm256_add_ps(one, e), derr = _mm256_add_ps(_mm256_sub_ps(one, d), e);
    __m256 num = _mm256_blendv_ps(one, e, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    return olc_div_ps_avx2(num, d, derr);
}

static inline OLC_TARGET_AVX2 __m256 olc_tanh_ps_avx2(__m256 x) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    __m256 a = _mm256_andnot_ps(sign, x);
    /* small |x|: odd polynomial */
    __m256 u = _mm256_mul_ps(a, a);
    __m256 P = _mm256_fmadd_ps(_mm256_set1_ps(OLC_TANH_T4), u, _mm256_set1_ps(OLC_TANH_T3));
    P = _mm256_fmadd_ps(P, u, _mm256_set1_ps(OLC_TANH_T2));
    P = _mm256_fmadd_ps(P, u, _mm256_set1_ps(OLC_TANH_T1));
    P = _mm256_fmadd_ps(P, u, _mm256_set1_ps(OLC_TANH_T0));
    __m256 ys = _mm256_fmadd_ps(_mm256_mul_ps(a, u), P, a);
    /* larger |x|: 1 - 2/(e + 1) */
    __m256 ac = _mm256_min_ps(_mm256_set1_ps(OLC_TANH_CLAMP), a);
    __m256 e = olc_exp_ps_avx2(_mm256_add_ps(ac, ac));
    __m256 d = _mm256_add_ps(e, one), derr = _mm256_add_ps(_mm256_sub_ps(e, d), one);
    __m256 q = olc_div_ps_avx2(one, d, derr);
    __m256 yb = _mm256_fnmadd_ps(_mm256_set1_ps(2.0f), q, one);
    __m256 y = _mm256_blendv_ps(yb, ys, _mm256_cmp_ps(a, _mm256_set1_ps(OLC_TANH_SMALL), _CMP_LT_OQ));
    return _mm256_or_ps(y, _mm256_and_ps(x, sign));
}

static inline OLC_TARGET_AVX2 __m256 olc_exp_half_ps_avx2(__m256 z) {
    const __m256 shifter = _mm256_set1_ps(OLC_SHIFTER);
    __m256 kf = _mm256_fmadd_ps(z, _mm256_set1_ps(OLC_LOG2E), shifter);
    __m256i e = _mm256_add_epi32(_mm256_castps_si256(kf), _mm256_set1_epi32(126 - 0x4b400000));
    __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)); /* 2^(n-1) */
    kf = _mm256_sub_ps(kf, shifter);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(OLC_LN2_HI), z);
    return _mm256_mul_ps(olc_exp_poly_ps_avx2(r), s);
}

static inline OLC_TARGET_AVX2 __m256 olc_onepexp_ps_avx2(__m256 z) {
    z = _mm256_min_ps(_mm256_set1_ps(OLC_ONEPEXP_HI), _mm256_max_ps(_mm256_set1_ps(OLC_ONEPEXP_LO), z));
    return _mm256_fmadd_ps(olc_exp_half_ps_avx2(z), _mm256_set1_ps(2.0f), _mm256_set1_ps(1.0f));
}

#endif /* OLC_X86 */

/* ---- AVX-512 ---- */
#if OLC_X86 && OLC_HAVE_AVX512

/* e^r on |r| <= ln2/2, as olc_exp_polyf_ */
static inline OLC_TARGET_AVX512 __m512 olc_exp_poly_ps_avx512(__m512 r) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(OLC_EXP_E5), r, _mm512_set1_ps(OLC_EXP_E4));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(OLC_EXP_E3));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(OLC_EXP_E2));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(OLC_EXP_E1));
    q = _mm512_fmadd_ps(q, r, one);
    return _mm512_fmadd_ps(q, r, one);
}

static inline OLC_TARGET_AVX512 __m512 olc_exp_ps_avx512(__m512 x) {
    const __m512 shifter = _mm512_set1_ps(OLC_SHIFTER);
    x = _mm512_min_ps(_mm512_set1_ps(OLC_EXP_HI), _mm512_max_ps(_mm512_set1_ps(OLC_EXP_LO), x));
    __m512 kf = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(OLC_LOG2E), shifter), shifter);
    __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_HI), x);
    r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_LO), r);
    __m512 p = olc_exp_poly_ps_avx512(r);
    /* vscalefps rounds p * 2^n once, like the two-factor product */
    return _mm512_scalef_ps(p, kf);
}

static inline OLC_TARGET_AVX512 __m512 olc_log_ps_avx512(__m512 x) {
    const __m512i sqrth = _mm512_set1_epi32(OLC_SQRTH_BITS);
    __mmask16 sub = _mm512_cmp_ps_mask(x, _mm512_set1_ps(0x1p-126f), _CMP_LT_OQ);
    __m512 xs = _mm512_mask_mul_ps(x, sub, x, _mm512_set1_ps(0x1p23f));
    __m512i kadj = _mm512_maskz_mov_epi32(sub, _mm512_set1_epi32(-23));
    __m512i ix = _mm512_sub_epi32(_mm512_castps_si512(xs), sqrth);
    __m512 kf = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_srai_epi32(ix, 23), kadj));
    __m512i mb = _mm512_add_epi32(_mm512_and_si512(ix, _mm512_set1_epi32(0x7fffff)), sqrth);
    __m512 f = _mm512_sub_ps(_mm512_castsi512_ps(mb), _mm512_set1_ps(1.0f));
    __m512 P = _mm512_fmadd_ps(_mm512_set1_ps(OLC_LOG_L8), f, _mm512_set1_ps(OLC_LOG_L7));
    P = _mm512_fmadd_ps(P, f, _mm512_set1_ps(OLC_LOG_L6));
    P = _mm512_fmadd_ps(P, f, _mm512_set1_ps(OLC_LOG_L5));
    P = _mm512_fmadd_ps(P, f, _mm512_set1_ps(OLC_LOG_L4));
    P = _mm512_fmadd_ps(P, f, _mm512_set1_ps(OLC_LOG_L3));
    P = _mm512_fmadd_ps(P, f, _mm512_set1_ps(OLC_LOG_L2));
    P = _mm512_fmadd_ps(P, f, _mm512_set1_ps(OLC_LOG_L1));
    P = _mm512_fmadd_ps(P, f, _mm512_set1_ps(-0.5f));
    __m512 lo = _mm512_fmadd_ps(kf, _mm512_set1_ps(OLC_LOG_LN2_LO), _mm512_mul_ps(_mm512_mul_ps(f, f), P));
    __m512 hi = _mm512_mul_ps(kf, _mm512_set1_ps(OLC_LOG_LN2_HI));
    __m512 s = _mm512_add_ps(hi, f);
    __m512 e = _mm512_add_ps(_mm512_sub_ps(hi, s), f);
    __m512 y = _mm512_add_ps(s, _mm512_add_ps(e, lo));
    __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ) &
                   _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
    if (OLC_UNLIKELY_(ok != 0xffff)) {
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ), x);
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), _mm512_set1_ps(-INFINITY));
        y = _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), _mm512_set1_ps(NAN));
    }
    return y;
}

static inline OLC_TARGET_AVX512 __m512 olc_div_ps_avx512(__m512 num, __m512 d, __m512 derr) {
    __m512 r = _mm512_div_ps(_mm512_set1_ps(1.0f), d), q = _mm512_mul_ps(num, r);
    __m512 t = _mm512_fnmadd_ps(q, d, num);
    t = _mm512_fnmadd_ps(q, derr, t);
    return _mm512_fmadd_ps(t, r, q);
}

static inline OLC_TARGET_AVX512 __m512 olc_sigmoid_ps_avx512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 e = olc_exp_ps_avx512(_mm512_or_ps(x, _mm512_set1_ps(-0.0f)));
    __m512 d = _mm512_add_ps(one, e), derr = _mm512_add_ps(_mm512_sub_ps(one, d), e);
    __m512 num = _mm512_mask_mov_ps(one, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), e);
    return olc_div_ps_avx512(num, d, derr);
}

static inline OLC_TARGET_AVX512 __m512 olc_tanh_ps_avx512(__m512 x) {
    const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    __m512 a = _mm512_andnot_ps(sign, x);
    __m512 u = _mm512_mul_ps(a, a);
    __m512 P = _mm512_fmadd_ps(_mm512_set1_ps(OLC_TANH_T4), u, _mm512_set1_ps(OLC_TANH_T3));
    P = _mm512_fmadd_ps(P, u, _mm512_set1_ps(OLC_TANH_T2));
    P = _mm512_fmadd_ps(P, u, _mm512_set1_ps(OLC_TANH_T1));
    P = _mm512_fmadd_ps(P, u, _mm512_set1_ps(OLC_TANH_T0));
    __m512 ys = _mm512_fmadd_ps(_mm512_mul_ps(a, u), P, a);
    __m512 ac = _mm512_min_ps(_mm512_set1_ps(OLC_TANH_CLAMP), a);
    __m512 e = olc_exp_ps_avx512(_mm512_add_ps(ac, ac));
    __m512 d = _mm512_add_ps(e, one), derr = _mm512_add_ps(_mm512_sub_ps(e, d), one);
    __m512 q = olc_div_ps_avx512(one, d, derr);
    __m512 yb = _mm512_fnmadd_ps(_mm512_set1_ps(2.0f), q, one);
    __m512 y = _mm512_mask_mov_ps(yb, _mm512_cmp_ps_mask(a, _mm512_set1_ps(OLC_TANH_SMALL), _CMP_LT_OQ), ys);
    return _mm512_or_ps(y, _mm512_and_ps(x, sign));
}

static inline OLC_TARGET_AVX512 __m512 olc_exp_half_ps_avx512(__m512 z) {
    const __m512 shifter = _mm512_set1_ps(OLC_SHIFTER), one = _mm512_set1_ps(1.0f);
    __m512 kf = _mm512_sub_ps(_mm512_fmadd_ps(z, _mm512_set1_ps(OLC_LOG2E), shifter), shifter);
    __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_HI), z);
    /* vscalefps by n - 1: the same exact product as the twins' p * 2^(n-1) */
    return _mm512_scalef_ps(olc_exp_poly_ps_avx512(r), _mm512_sub_ps(kf, one));
}

static inline OLC_TARGET_AVX512 __m512 olc_onepexp_ps_avx512(__m512 z) {
    z = _mm512_min_ps(_mm512_set1_ps(OLC_ONEPEXP_HI), _mm512_max_ps(_mm512_set1_ps(OLC_ONEPEXP_LO), z));
    return _mm512_fmadd_ps(olc_exp_half_ps_avx512(z), _mm512_set1_ps(2.0f), _mm512_set1_ps(1.0f));
}

#endif /* OLC_X86 && OLC_HAVE_AVX512 */

/* ---- array loops ---- */

/* olc_<op>_<type>_<level>(const T *x, T *y, int64_t n): y = op(x) for op
 * exp, log, sigmoid, tanh and type f32, f16, bf16, written once in
 * common/olc_math_loops.h and compiled per level.  What a level gives them:
 * its float vector olc_vf_<level> (one float at the scalar level), the op
 * on one vector (olc_<op>_ps_<level>) and loads/stores of the first m
 * elements of an array into a vector (m up to its width; the lanes past m
 * are loaded as 0).  Tails go through the same vector code, so an
 * element's result does not depend on its position. */
#if defined(__GNUC__) || defined(__clang__)
#define OLC_ALWAYS_INLINE __attribute__((always_inline))
#else
#define OLC_ALWAYS_INLINE
#endif
#define OLC_IDENTITY_(v) (v)

typedef float olc_vf_scalar;
static inline float olc_exp_ps_scalar(float x) { return olc_expf_(x); }
static inline float olc_log_ps_scalar(float x) { return olc_logf_(x); }
static inline float olc_sigmoid_ps_scalar(float x) { return olc_sigmoidf_(x); }
static inline float olc_tanh_ps_scalar(float x) { return olc_tanhf_(x); }
static inline float olc_onepexp_ps_scalar(float z) { return olc_onepexpf_(z); }
static inline float olc_ld_f32_part_scalar(const float *p, int64_t m) { (void)m; return *p; }
static inline float olc_ld_f16_part_scalar(const uint16_t *p, int64_t m) { (void)m; return olc_h2f(*p); }
static inline float olc_ld_bf16_part_scalar(const uint16_t *p, int64_t m) { (void)m; return olc_bf2f(*p); }
static inline void olc_st_f32_part_scalar(float *p, int64_t m, float v) { (void)m; *p = v; }
static inline void olc_st_f16_part_scalar(uint16_t *p, int64_t m, float v) { (void)m; *p = olc_f2h(v); }
static inline void olc_st_bf16_part_scalar(uint16_t *p, int64_t m, float v) { (void)m; *p = olc_f2bf(v); }
#define OLC_LVL scalar
#define OLC_LVL_ATTR
#include "common/olc_math_loops.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR

#if OLC_X86
/* A part of 8 goes straight to memory; a shorter one through a buffer. */
typedef __m256 olc_vf_avx2;
static inline OLC_TARGET_AVX2 __m256 olc_ld_f32_part_avx2(const float *p, int64_t m) {
    if (m == 8) return olc_ld_f32_avx2(p);
    float buf[8] = {0};
    memcpy(buf, p, (size_t)m * sizeof(float));
    return olc_ld_f32_avx2(buf);
}
static inline OLC_TARGET_AVX2 __m256 olc_ld_f16_part_avx2(const uint16_t *p, int64_t m) {
    if (m == 8) return olc_ld_f16_avx2(p);
    uint16_t buf[8] = {0};
    memcpy(buf, p, (size_t)m * sizeof(uint16_t));
    return olc_ld_f16_avx2(buf);
}
static inline OLC_TARGET_AVX2 __m256 olc_ld_bf16_part_avx2(const uint16_t *p, int64_t m) {
    if (m == 8) return olc_ld_bf16_avx2(p);
    uint16_t buf[8] = {0};
    memcpy(buf, p, (size_t)m * sizeof(uint16_t));
    return olc_ld_bf16_avx2(buf);
}
static inline OLC_TARGET_AVX2 void olc_st_f32_part_avx2(float *p, int64_t m, __m256 v) {
    if (m == 8) { olc_st_f32_avx2(p, v); return; }
    float buf[8];
    olc_st_f32_avx2(buf, v);
    memcpy(p, buf, (size_t)m * sizeof(float));
}
static inline OLC_TARGET_AVX2 void olc_st_f16_part_avx2(uint16_t *p, int64_t m, __m256 v) {
    if (m == 8) { olc_st_f16_avx2(p, v); return; }
    uint16_t buf[8];
    olc_st_f16_avx2(buf, v);
    memcpy(p, buf, (size_t)m * sizeof(uint16_t));
}
static inline OLC_TARGET_AVX2 void olc_st_bf16_part_avx2(uint16_t *p, int64_t m, __m256 v) {
    if (m == 8) { olc_st_bf16_avx2(p, v); return; }
    uint16_t buf[8];
    olc_st_bf16_avx2(buf, v);
    memcpy(p, buf, (size_t)m * sizeof(uint16_t));
}
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#include "common/olc_math_loops.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

#if OLC_X86 && OLC_HAVE_AVX512
/* Masked loads and stores of the first m lanes (plain ones for 16 float32
 * lanes, which the compiler can keep in registers). */
typedef __m512 olc_vf_avx512;
static inline OLC_TARGET_AVX512 __m512 olc_ld_f32_part_avx512(const float *p, int64_t m) {
    if (m >= 16) return _mm512_loadu_ps(p);
    return olc_ld_f32_avx512(p, olc_tail_mask16(m));
}
static inline OLC_TARGET_AVX512 __m512 olc_ld_f16_part_avx512(const uint16_t *p, int64_t m) {
    return olc_ld_f16_avx512(p, olc_tail_mask16(m));
}
static inline OLC_TARGET_AVX512 __m512 olc_ld_bf16_part_avx512(const uint16_t *p, int64_t m) {
    return olc_ld_bf16_avx512(p, olc_tail_mask16(m));
}
static inline OLC_TARGET_AVX512 void olc_st_f32_part_avx512(float *p, int64_t m, __m512 v) {
    if (m >= 16) _mm512_storeu_ps(p, v);
    else olc_st_f32_avx512(p, olc_tail_mask16(m), v);
}
static inline OLC_TARGET_AVX512 void olc_st_f16_part_avx512(uint16_t *p, int64_t m, __m512 v) {
    olc_st_f16_avx512(p, olc_tail_mask16(m), v);
}
static inline OLC_TARGET_AVX512 void olc_st_bf16_part_avx512(uint16_t *p, int64_t m, __m512 v) {
    olc_st_bf16_avx512(p, olc_tail_mask16(m), v);
}
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#include "common/olc_math_loops.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

/* ---- float64: libm ---- */

/* e = exp(-|x|) never overflows; x < 0 uses e/(1+e) so that the result
 * keeps its precision (and subnormals) for large negative x. */
static inline double olc_sigmoid_d_(double x) {
    double e = exp(-fabs(x));
    return x < 0 ? e / (1.0 + e) : 1.0 / (1.0 + e);
}
static void olc_exp_f64_scalar(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = exp(x[i]);
}
static void olc_log_f64_scalar(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = log(x[i]);
}
static void olc_sigmoid_f64_scalar(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = olc_sigmoid_d_(x[i]);
}
static void olc_tanh_f64_scalar(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = tanh(x[i]);
}

#endif
