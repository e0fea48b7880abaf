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
       OLC_OP_NEG, OLC_OP_RECIPROCAL, OLC_OP_GELU, OLC_OP_GELU_TANH };

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

/* The vector functions of Reciprocal and Gelu, one per level, the same
 * IEEE operations in the same order (fused multiply-adds explicit), so that
 * every level returns the same bits.
 *   reciprocal  1 / x
 *   gelu        x Phi(x), Phi(x) = 1/2 + erf(x / sqrt 2) / 2 (the erf of
 *               engines/activation, 2.5 ulp); -inf gives NaN as in the
 *               operator's definition (-inf * 0)
 *   gelu_tanh   h + h tanh(c (x + 0.044715 x^3)), h = x / 2, c = sqrt(2/pi)
 * Below zero both subtract nearly equal numbers: the error is absolute,
 * about |x| ulp(1), as in ONNX Runtime's and the built-in's float32. */
#define OLC_GELU_C 0x1.988454p-1f              /* sqrt(2/pi) */
#define OLC_GELU_C3 0x1.2444f2p-5f             /* 0.044715 sqrt(2/pi) */
static inline float olc_reciprocal_ps_scalar(float x) { return 1.0f / x; }
static inline float olc_gelu_erf_ps_scalar(float x) {
    return x * olc_fmaf_(0.5f, olc_erff_(x * OLC_SQRT1_2), 0.5f);
}
static inline float olc_gelu_tanh_ps_scalar(float x) {
    float h = 0.5f * x, t = olc_tanhf_(x * olc_fmaf_(OLC_GELU_C3, x * x, OLC_GELU_C));
    return olc_fmaf_(h, t, h);
}
#if OLC_X86
static inline OLC_TARGET_AVX2 __m256 olc_reciprocal_ps_avx2(__m256 x) {
    return _mm256_div_ps(_mm256_set1_ps(1.0f), x);
}
static inline OLC_TARGET_AVX2 __m256 olc_gelu_erf_ps_avx2(__m256 x) {
    const __m256 half = _mm256_set1_ps(0.5f);
    __m256 e = olc_erf_ps_avx2(_mm256_mul_ps(x, _mm256_set1_ps(OLC_SQRT1_2)));
    return _mm256_mul_ps(x, _mm256_fmadd_ps(half, e, half));
}
static inline OLC_TARGET_AVX2 __m256 olc_gelu_tanh_ps_avx2(__m256 x) {
    __m256 h = _mm256_mul_ps(_mm256_set1_ps(0.5f), x);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(OLC_GELU_C3), _mm256_mul_ps(x, x), _mm256_set1_ps(OLC_GELU_C));
    return _mm256_fmadd_ps(h, olc_tanh_ps_avx2(_mm256_mul_ps(x, p)), h);
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512 olc_reciprocal_ps_avx512(__m512 x) {
    return _mm512_div_ps(_mm512_set1_ps(1.0f), x);
}
static inline OLC_TARGET_AVX512 __m512 olc_gelu_erf_ps_avx512(__m512 x) {
    const __m512 half = _mm512_set1_ps(0.5f);
    __m512 e = olc_erf_ps_avx512(_mm512_mul_ps(x, _mm512_set1_ps(OLC_SQRT1_2)));
    return _mm512_mul_ps(x, _mm512_fmadd_ps(half, e, half));
}
static inline OLC_TARGET_AVX512 __m512 olc_gelu_tanh_ps_avx512(__m512 x) {
    __m512 h = _mm512_mul_ps(_mm512_set1_ps(0.5f), x);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(OLC_GELU_C3), _mm512_mul_ps(x, x), _mm512_set1_ps(OLC_GELU_C));
    return _mm512_fmadd_ps(h, olc_tanh_ps_avx512(_mm512_mul_ps(x, p)), h);
}
#endif
#define OLC_BODY "unary/olc_unary_math.h"
#include "common/olc_each_level.h"

/* float64 Gelu on libm, as the operator defines it (Phi first, so that
 * x Phi(x) does not overflow). */
static void olc_gelu_f64_scalar(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * (0.5 * (1.0 + erf(x[i] / 1.4142135623730951)));
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

#endif
