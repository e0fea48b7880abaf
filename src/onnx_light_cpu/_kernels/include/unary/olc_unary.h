/* Element-wise unary kernels and their dispatch: Abs, Exp, Log, Sigmoid,
 * Tanh, Not, Neg, Reciprocal, Gelu (erf and tanh forms) and Clip.
 *
 * olc_unary_select(op, dtype, level) returns the function for one operator,
 * element type and instruction-set level, or NULL when the pair is not
 * supported; olc_unary_level() says which level that function really uses
 * (types without a vector path always run the portable loop).
 *
 * The functions: the bit loops (Abs and Neg of a float type, Neg of a
 * signed integer, Not) of unary/olc_unary_bits.h, compiled per level; exp,
 * log, sigmoid and tanh from common/olc_math.h; Reciprocal and Gelu of
 * unary/olc_unary_math.h on the vector functions below; Abs of an integer
 * type, portable, below.
 *
 * Clip takes its bounds too: olc_clip_select(dtype, level) returns an
 * olc_clip_fn (the loops of unary/olc_unary_clip.h, per level),
 * olc_clip_level() the level it runs at.
 */
#ifndef OLC_UNARY_H
#define OLC_UNARY_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_math.h"
#include "engines/activation/olc_activation.h"

enum { OLC_OP_ABS = 0, OLC_OP_EXP, OLC_OP_LOG, OLC_OP_SIGMOID, OLC_OP_TANH, OLC_OP_NOT,
       OLC_OP_NEG, OLC_OP_RECIPROCAL, OLC_OP_GELU, OLC_OP_GELU_TANH,
       OLC_OP_RELU, OLC_OP_LEAKY_RELU, OLC_OP_HARD_SIGMOID, OLC_OP_HARD_SWISH, OLC_OP_ELU,
       OLC_OP_SELU, OLC_OP_CELU, OLC_OP_SOFTPLUS, OLC_OP_MISH, OLC_OP_SIGN, OLC_OP_ERF,
       OLC_OP_SOFTSIGN, OLC_OP_THRESHOLDED_RELU, OLC_OP_SQRT };

typedef void (*olc_unary_fn)(const void *x, void *y, int64_t n);
typedef void (*olc_clip_fn)(const void *x, void *y, int64_t n, const void *lo, const void *hi);
#define OLC_BODY "unary/olc_unary_bits.h"
#include "common/olc_each_level.h"
/* A float16 or bfloat16 (sign, then magnitude bits) as an integer in the
 * order of its value, -0 equal to +0; NaN (magnitude above inf) is for
 * the caller to keep apart. */
static inline int32_t olc_clip_key16(uint16_t b) {
    return (b & 0x8000u) ? -(int32_t)(b & 0x7fffu) : (int32_t)b;
}
#define OLC_BODY "unary/olc_unary_clip.h"
#include "common/olc_each_level.h"

/* The vector functions of Reciprocal and the tanh Gelu, one per level, the
 * same IEEE operations in the same order (fused multiply-adds explicit),
 * so that every level returns the same bits (the erf Gelu is
 * engines/activation's olc_gelu_erf_ps, shared with BiasGelu).
 *   reciprocal  1 / x
 *   gelu_tanh   x / (1 + e^z), z = -2 sqrt(2/pi) (x + 0.044715 x^3): the
 *               same as x (1 + tanh(-z/2)) / 2, without its cancellation
 *               below zero (common/olc_math.h's onepexp; no refinement of
 *               the division, whose 0.5 ulp is below z's error).  Large x
 *               gives x, large negative x -0 (1 + e^z = inf), -inf NaN.
 * Error, float32, all 2^32 inputs against a double-precision reference
 * (scalar, AVX2 and AVX-512 checked to give the same bits on all of them):
 *   gelu_tanh  x >= 0: 1.9 ulp; x < 0: z's rounding, amplified by |z|:
 *              2.6 ulp on [-1, 0), 12 on [-3, -1), 55 on [-6, -3), 214 on
 *              [-10.07, -6); below, -0 (|y| < 3e-38)
 * The former form (h + h tanh throughout) gave 1.3 ulp above zero but an
 * absolute error of about |x| ulp(1) below it. */
#define OLC_GELU_Z1 (-0x1.988454p+0f)          /* -2 sqrt(2/pi) */
#define OLC_GELU_Z3 (-0x1.2444f2p-4f)          /* -2 * 0.044715 sqrt(2/pi) */
static inline float olc_reciprocal_ps_scalar(float x) { return 1.0f / x; }
/* a * b where a NaN gives a, quieted (a + a), whatever order the compiler
 * gives the multiply its operands: the NaN the Mul kernel returns for
 * Mul(a, b) when both are NaN (the SiLU gate below; Sigmoid of a NaN is a
 * NaN of the other sign). */
static inline float olc_mul_left_nan_ps_scalar(float a, float b) { return a != a ? a + a : a * b; }
static inline float olc_gelu_tanh_ps_scalar(float x) {
    return x / olc_onepexpf_(x * olc_fmaf_(OLC_GELU_Z3, x * x, OLC_GELU_Z1));
}
#if OLC_X86
static inline OLC_TARGET_AVX2 __m256 olc_reciprocal_ps_avx2(__m256 x) {
    return _mm256_div_ps(_mm256_set1_ps(1.0f), x);
}
static inline OLC_TARGET_AVX2 __m256 olc_mul_left_nan_ps_avx2(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_mul_ps(a, b), _mm256_add_ps(a, a), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
static inline OLC_TARGET_AVX2 __m256 olc_gelu_tanh_ps_avx2(__m256 x) {
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(OLC_GELU_Z3), _mm256_mul_ps(x, x), _mm256_set1_ps(OLC_GELU_Z1));
    return _mm256_div_ps(x, olc_onepexp_ps_avx2(_mm256_mul_ps(x, p)));
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512 olc_reciprocal_ps_avx512(__m512 x) {
    return _mm512_div_ps(_mm512_set1_ps(1.0f), x);
}
static inline OLC_TARGET_AVX512 __m512 olc_mul_left_nan_ps_avx512(__m512 a, __m512 b) {
    return _mm512_mask_add_ps(_mm512_mul_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a, a);
}
static inline OLC_TARGET_AVX512 __m512 olc_gelu_tanh_ps_avx512(__m512 x) {
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(OLC_GELU_Z3), _mm512_mul_ps(x, x), _mm512_set1_ps(OLC_GELU_Z1));
    return _mm512_div_ps(x, olc_onepexp_ps_avx512(_mm512_mul_ps(x, p)));
}
#endif
#define OLC_BODY "unary/olc_unary_math.h"
#include "common/olc_each_level.h"

/* The SiLU gate's loop (olc_silu_gate_f32) at the level it runs at. */
typedef void (*olc_silu_gate_fn)(const float *x, const float *u, float *y, int64_t n);
static olc_silu_gate_fn olc_silu_gate_select(int level) {
    return OLC_LEVEL_FN(olc_build_level(level), olc_silu_gate_f32);
}

/* float64 Gelu: engines/activation's olc_gelu_erf_d_ (Phi first, so that
 * x Phi(x) does not overflow). */
static void olc_gelu_f64_scalar(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = olc_gelu_erf_d_(x[i]);
}
static void olc_gelu_tanh_f64_scalar(const double *x, double *y, int64_t n) {
    const double c = 0.7978845608028654;  /* sqrt(2/pi) */
    for (int64_t i = 0; i < n; ++i) {
        double v = x[i];
        y[i] = 0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v)));
    }
}

/* Abs of a signed integer wraps at the minimum as NumPy does. */
static void olc_abs_i8(const void *px, void *py, int64_t n) {
    const int8_t *x = (const int8_t *)px;
    int8_t *y = (int8_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int8_t)(uint8_t)(0u - (uint8_t)x[i]) : x[i];
}
static void olc_abs_i16(const void *px, void *py, int64_t n) {
    const int16_t *x = (const int16_t *)px;
    int16_t *y = (int16_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int16_t)(uint16_t)(0u - (uint16_t)x[i]) : x[i];
}
static void olc_abs_i32(const void *px, void *py, int64_t n) {
    const int32_t *x = (const int32_t *)px;
    int32_t *y = (int32_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int32_t)(uint32_t)(0u - (uint32_t)x[i]) : x[i];
}
static void olc_abs_i64(const void *px, void *py, int64_t n) {
    const int64_t *x = (const int64_t *)px;
    int64_t *y = (int64_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int64_t)(uint64_t)(0u - (uint64_t)x[i]) : x[i];
}

/* Abs of an unsigned integer is a copy. */
static void olc_copy_u8(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n); }
static void olc_copy_u16(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 2); }
static void olc_copy_u32(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
static void olc_copy_u64(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 8); }

/* The math loops take typed pointers; the dispatch returns them behind the
 * common signature. */
#define OLC_AS_UNARY(fn) ((olc_unary_fn)(void (*)(void))(fn))

/* The level a (op, dtype) pair really runs at: only the float types and
 * the bit loops have per-level code. */
static int olc_unary_level(int op, int dtype, int level) {
    int vectorised =
        (op == OLC_OP_NOT && dtype == OLC_BOOL) ||
        (dtype == OLC_FLOAT || dtype == OLC_FLOAT16 || dtype == OLC_BFLOAT16) ||
        ((op == OLC_OP_ABS || op == OLC_OP_RECIPROCAL) && dtype == OLC_DOUBLE) ||
        op == OLC_OP_NEG;
    return vectorised ? olc_build_level(level) : OLC_SCALAR;
}

static olc_unary_fn olc_unary_abs(int dtype, int level) {
    switch (dtype) {
    case OLC_FLOAT: return OLC_LEVEL_FN(level, olc_abs_bits32);
    case OLC_DOUBLE: return OLC_LEVEL_FN(level, olc_abs_bits64);
    case OLC_FLOAT16:
    case OLC_BFLOAT16: return OLC_LEVEL_FN(level, olc_abs_bits16);
    case OLC_INT8: return olc_abs_i8;
    case OLC_INT16: return olc_abs_i16;
    case OLC_INT32: return olc_abs_i32;
    case OLC_INT64: return olc_abs_i64;
    case OLC_UINT8: return olc_copy_u8;
    case OLC_UINT16: return olc_copy_u16;
    case OLC_UINT32: return olc_copy_u32;
    case OLC_UINT64: return olc_copy_u64;
    default: return NULL;
    }
}

static olc_unary_fn olc_unary_neg(int dtype, int level) {
    switch (dtype) {
    case OLC_FLOAT: return OLC_LEVEL_FN(level, olc_neg_bits32);
    case OLC_DOUBLE: return OLC_LEVEL_FN(level, olc_neg_bits64);
    case OLC_FLOAT16:
    case OLC_BFLOAT16: return OLC_LEVEL_FN(level, olc_neg_bits16);
    case OLC_INT8: return OLC_LEVEL_FN(level, olc_neg_i8);
    case OLC_INT16: return OLC_LEVEL_FN(level, olc_neg_i16);
    case OLC_INT32: return OLC_LEVEL_FN(level, olc_neg_i32);
    case OLC_INT64: return OLC_LEVEL_FN(level, olc_neg_i64);
    default: return NULL;
    }
}

static olc_unary_fn olc_unary_select(int op, int dtype, int level) {
    level = olc_unary_level(op, dtype, level);
    int t = dtype == OLC_FLOAT ? 0 : dtype == OLC_FLOAT16 ? 1 : dtype == OLC_BFLOAT16 ? 2
          : dtype == OLC_DOUBLE ? 3 : -1;
    switch (op) {
    case OLC_OP_ABS:
        return olc_unary_abs(dtype, level);
    case OLC_OP_NOT:
        return dtype == OLC_BOOL ? OLC_LEVEL_FN(level, olc_not_bool) : NULL;
    case OLC_OP_NEG:
        return olc_unary_neg(dtype, level);
    case OLC_OP_RECIPROCAL:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_reciprocal_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_reciprocal_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_reciprocal_bf16))
             : t == 3 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_reciprocal_f64)) : NULL;
    case OLC_OP_GELU:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_gelu_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_gelu_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_gelu_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_gelu_f64_scalar) : NULL;
    case OLC_OP_GELU_TANH:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_gelu_tanh_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_gelu_tanh_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_gelu_tanh_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_gelu_tanh_f64_scalar) : NULL;
    case OLC_OP_EXP:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_exp_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_exp_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_exp_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_exp_f64_scalar) : NULL;
    case OLC_OP_LOG:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_log_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_log_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_log_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_log_f64_scalar) : NULL;
    case OLC_OP_SIGMOID:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_sigmoid_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_sigmoid_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_sigmoid_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_sigmoid_f64_scalar) : NULL;
    case OLC_OP_TANH:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_tanh_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_tanh_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_tanh_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_tanh_f64_scalar) : NULL;
    default:
        return NULL;
    }
}

/* Clip: every type has per-level loops. */
static int olc_clip_level(int dtype, int level) {
    (void)dtype;
    return olc_build_level(level);
}

static olc_clip_fn olc_clip_select(int dtype, int level) {
    level = olc_clip_level(dtype, level);
    switch (dtype) {
    case OLC_FLOAT: return OLC_LEVEL_FN(level, olc_clip_f32);
    case OLC_DOUBLE: return OLC_LEVEL_FN(level, olc_clip_f64);
    case OLC_FLOAT16: return OLC_LEVEL_FN(level, olc_clip_f16);
    case OLC_BFLOAT16: return OLC_LEVEL_FN(level, olc_clip_bf16);
    case OLC_INT8: return OLC_LEVEL_FN(level, olc_clip_i8);
    case OLC_INT16: return OLC_LEVEL_FN(level, olc_clip_i16);
    case OLC_INT32: return OLC_LEVEL_FN(level, olc_clip_i32);
    case OLC_INT64: return OLC_LEVEL_FN(level, olc_clip_i64);
    case OLC_UINT8: return OLC_LEVEL_FN(level, olc_clip_u8);
    case OLC_UINT16: return OLC_LEVEL_FN(level, olc_clip_u16);
    case OLC_UINT32: return OLC_LEVEL_FN(level, olc_clip_u32);
    case OLC_UINT64: return OLC_LEVEL_FN(level, olc_clip_u64);
    default: return NULL;
    }
}

/* ---------------------------------------------------------- Activations
 * Relu, LeakyRelu, HardSigmoid, HardSwish, Elu, Selu, Celu, Mish, Sign,
 * Erf, Softplus, Softsign, ThresholdedRelu, Sqrt: olc_uact_select(op, dtype,
 * level) returns an olc_uact_fn taking the operator's parameters
 * p[0..2] = alpha, beta, gamma (float32 loops round them to float32, as
 * NumPy's float32 arithmetic with a Python float does).
 *
 * The level helpers olc_av_* of the body unary/olc_unary_act.h, one set
 * per level, with x86's NaN rules written out in the scalar twin:
 *   set(v)             every lane v
 *   max(a, b), min(a, b)  a > b ? a : b, a < b ? a : b (b when unordered)
 *   sel_gt(a, b, t, f) a > b ? t : f;  sel_lt: a < b ? t : f (f when unordered)
 *   abs, sqrt          IEEE
 *   keep(v)            v, opaque to the compiler (no FMA contraction)
 */
typedef void (*olc_uact_fn)(const void *x, void *y, int64_t n, const double *p);

#if OLC_X86
#define OLC_AV_KEEP_(v, c) __asm__("" : c(v))
#else
#define OLC_AV_KEEP_(v, c) ((void)0)
#endif
static inline float olc_av_set_scalar(float v) { return v; }
static inline float olc_av_max_scalar(float a, float b) { return a > b ? a : b; }
static inline float olc_av_min_scalar(float a, float b) { return a < b ? a : b; }
static inline float olc_av_sel_gt_scalar(float a, float b, float t, float f) { return a > b ? t : f; }
static inline float olc_av_sel_lt_scalar(float a, float b, float t, float f) { return a < b ? t : f; }
static inline float olc_av_abs_scalar(float a) { return fabsf(a); }
static inline float olc_av_sqrt_scalar(float a) { return __builtin_sqrtf(a); }
static inline float olc_av_keep_scalar(float v) { OLC_AV_KEEP_(v, "+x"); return v; }
static inline float olc_erf_ps_scalar(float x) { return olc_erff_(x); }
#if OLC_X86
static inline OLC_TARGET_AVX2 __m256 olc_av_set_avx2(float v) { return _mm256_set1_ps(v); }
static inline OLC_TARGET_AVX2 __m256 olc_av_max_avx2(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
static inline OLC_TARGET_AVX2 __m256 olc_av_min_avx2(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
static inline OLC_TARGET_AVX2 __m256 olc_av_sel_gt_avx2(__m256 a, __m256 b, __m256 t, __m256 f) {
    return _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_GT_OQ));
}
static inline OLC_TARGET_AVX2 __m256 olc_av_sel_lt_avx2(__m256 a, __m256 b, __m256 t, __m256 f) {
    return _mm256_blendv_ps(f, t, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
static inline OLC_TARGET_AVX2 __m256 olc_av_abs_avx2(__m256 a) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
}
static inline OLC_TARGET_AVX2 __m256 olc_av_sqrt_avx2(__m256 a) { return _mm256_sqrt_ps(a); }
static inline OLC_TARGET_AVX2 __m256 olc_av_keep_avx2(__m256 v) { OLC_AV_KEEP_(v, "+x"); return v; }
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512 olc_av_set_avx512(float v) { return _mm512_set1_ps(v); }
static inline OLC_TARGET_AVX512 __m512 olc_av_max_avx512(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
static inline OLC_TARGET_AVX512 __m512 olc_av_min_avx512(__m512 a, __m512 b) { return _mm512_min_ps(a, b); }
static inline OLC_TARGET_AVX512 __m512 olc_av_sel_gt_avx512(__m512 a, __m512 b, __m512 t, __m512 f) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), f, t);
}
static inline OLC_TARGET_AVX512 __m512 olc_av_sel_lt_avx512(__m512 a, __m512 b, __m512 t, __m512 f) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), f, t);
}
static inline OLC_TARGET_AVX512 __m512 olc_av_abs_avx512(__m512 a) { return _mm512_abs_ps(a); }
static inline OLC_TARGET_AVX512 __m512 olc_av_sqrt_avx512(__m512 a) { return _mm512_sqrt_ps(a); }
static inline OLC_TARGET_AVX512 __m512 olc_av_keep_avx512(__m512 v) { OLC_AV_KEEP_(v, "+v"); return v; }
#endif

#define OLC_BODY "unary/olc_unary_act.h"
#include "common/olc_each_level.h"

/* float64 on libm, the operators' formulas as written (the built-ins'). */
static inline double olc_uact_softplus_d_(double x) {
    return x != x ? x : (x > 0 ? x : 0.0) + log1p(exp(-fabs(x)));
}
/* One loop per operator (unary/olc_unary_f64.h), in the order of the ops. */
#define OLC_UACT_OP relu
#define OLC_UACT_EXPR (0.0 > v ? 0.0 : v)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP leaky_relu
#define OLC_UACT_EXPR (v > 0 ? v : v * a)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP hard_sigmoid
#define OLC_UACT_EXPR v != v ? v : fmax(0.0, fmin(1.0, v * a + b))
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP hard_swish
#define OLC_UACT_EXPR v != v ? v : v * fmax(0.0, fmin(1.0, v * a + b))
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP elu
#define OLC_UACT_EXPR (v < 0 ? expm1(v) * a : v)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP selu
#define OLC_UACT_EXPR (v > 0 ? v : expm1(v) * a) * c
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP celu
#define OLC_UACT_EXPR v != v ? v : fmax(0.0, v) + fmin(0.0, a * expm1(v / a))
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP softplus
#define OLC_UACT_EXPR olc_uact_softplus_d_(v)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP mish
#define OLC_UACT_EXPR v * tanh(olc_uact_softplus_d_(v))
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP sign
#define OLC_UACT_EXPR (v > 0 ? 1.0 : v < 0 ? -1.0 : v - v)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP erf
#define OLC_UACT_EXPR erf(v)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP softsign
#define OLC_UACT_EXPR v / (1.0 + fabs(v))
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP thresholded_relu
#define OLC_UACT_EXPR (v > a ? v : 0.0)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
#define OLC_UACT_OP sqrt
#define OLC_UACT_EXPR sqrt(v)
#include "unary/olc_unary_f64.h"
#undef OLC_UACT_OP
#undef OLC_UACT_EXPR
static const olc_uact_fn olc_uact_f64_fns[OLC_OP_SQRT - OLC_OP_RELU + 1] = {
    olc_uact_relu_f64,
    olc_uact_leaky_relu_f64,
    olc_uact_hard_sigmoid_f64,
    olc_uact_hard_swish_f64,
    olc_uact_elu_f64,
    olc_uact_selu_f64,
    olc_uact_celu_f64,
    olc_uact_softplus_f64,
    olc_uact_mish_f64,
    olc_uact_sign_f64,
    olc_uact_erf_f64,
    olc_uact_softsign_f64,
    olc_uact_thresholded_relu_f64,
    olc_uact_sqrt_f64};

/* Integers: Relu of the signed types, Sign of every integer type. */
#define OLC_UACT_T int8_t
#define OLC_UACT_TN i8
#define OLC_UACT_SIGNED 1
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED
#define OLC_UACT_T int16_t
#define OLC_UACT_TN i16
#define OLC_UACT_SIGNED 1
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED
#define OLC_UACT_T int32_t
#define OLC_UACT_TN i32
#define OLC_UACT_SIGNED 1
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED
#define OLC_UACT_T int64_t
#define OLC_UACT_TN i64
#define OLC_UACT_SIGNED 1
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED
#define OLC_UACT_T uint8_t
#define OLC_UACT_TN u8
#define OLC_UACT_SIGNED 0
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED
#define OLC_UACT_T uint16_t
#define OLC_UACT_TN u16
#define OLC_UACT_SIGNED 0
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED
#define OLC_UACT_T uint32_t
#define OLC_UACT_TN u32
#define OLC_UACT_SIGNED 0
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED
#define OLC_UACT_T uint64_t
#define OLC_UACT_TN u64
#define OLC_UACT_SIGNED 0
#include "unary/olc_unary_int.h"
#undef OLC_UACT_T
#undef OLC_UACT_TN
#undef OLC_UACT_SIGNED

/* The level an activation runs at: float32/16/bfloat16 have per-level code. */
static int olc_uact_level(int op, int dtype, int level) {
    (void)op;
    return dtype == OLC_FLOAT || dtype == OLC_FLOAT16 || dtype == OLC_BFLOAT16
        ? olc_build_level(level) : OLC_SCALAR;
}

static olc_uact_fn olc_uact_int(int op, int dtype) {
    if (op == OLC_OP_RELU) {
        switch (dtype) {
        case OLC_INT8: return olc_uact_relu_i8;
        case OLC_INT16: return olc_uact_relu_i16;
        case OLC_INT32: return olc_uact_relu_i32;
        case OLC_INT64: return olc_uact_relu_i64;
        default: return NULL;
        }
    }
    if (op == OLC_OP_SIGN) {
        switch (dtype) {
        case OLC_INT8: return olc_uact_sign_i8;
        case OLC_INT16: return olc_uact_sign_i16;
        case OLC_INT32: return olc_uact_sign_i32;
        case OLC_INT64: return olc_uact_sign_i64;
        case OLC_UINT8: return olc_uact_sign_u8;
        case OLC_UINT16: return olc_uact_sign_u16;
        case OLC_UINT32: return olc_uact_sign_u32;
        case OLC_UINT64: return olc_uact_sign_u64;
        default: return NULL;
        }
    }
    return NULL;
}

static olc_uact_fn olc_uact_select(int op, int dtype, int level) {
    level = olc_uact_level(op, dtype, level);
    if (dtype != OLC_FLOAT && dtype != OLC_FLOAT16 && dtype != OLC_BFLOAT16 && dtype != OLC_DOUBLE)
        return olc_uact_int(op, dtype);
    if (op < OLC_OP_RELU || op > OLC_OP_SQRT) return NULL;
    if (dtype == OLC_DOUBLE) return olc_uact_f64_fns[op - OLC_OP_RELU];
    /* the level tables olc_uact_fns_<level> close unary/olc_unary_act.h */
    return OLC_LEVEL_FN(level, olc_uact_fns)[op - OLC_OP_RELU][dtype == OLC_FLOAT ? 0 : dtype == OLC_FLOAT16 ? 1 : 2];
}

#endif
