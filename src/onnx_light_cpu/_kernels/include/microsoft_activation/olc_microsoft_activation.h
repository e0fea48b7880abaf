/* The com.microsoft activations that the unary core cannot run alone:
 * FastGelu with a bias on the last axis, QuickGelu (x sigmoid(alpha x)),
 * and the activation FusedGemm applies to its float32 product in place.
 *
 *   fast_gelu   y = g(a + bias), g the tanh Gelu of unary/olc_unary.h
 *               (olc_gelu_tanh_ps_<level>); the bias is added in float32
 *   quick_gelu  y = x sigmoid(alpha x), as x / (1 + e^(-alpha x)) (onepexp
 *               of common/olc_math.h).  Error, float32, alpha = 1.702, all
 *               2^32 inputs: x >= 0: 1.7 ulp (the former x sigmoid: 1.75);
 *               x < 0: the rounding of alpha x, amplified: 2 ulp on [-1, 0),
 *               19 on [-10, -6), 69 on [-52, -20); -0 below x = -52.1
 *               (1 + e^(-alpha x) = inf, |y| < 1.6e-37)
 *   fused       y = act(y) for FusedGemm's activations (OLC_MSACT_*),
 *               float32 only: the product is float32 before its rounding
 *
 * float16 and bfloat16 are computed in float32 and rounded once at the
 * store; double runs scalar loops on libm.  olc_msact_select(op, dtype,
 * level) returns the range function, olc_msact_level() its level.  The
 * FastGelu and QuickGelu loops are a body file compiled per level
 * (microsoft_activation/olc_microsoft_activation_loops.h): tails go
 * through the same vector code, so an element's result does not depend on
 * its position.  FusedGemm's activations are a scalar loop (the product
 * costs K times more), except Tanh and Sigmoid, which run the level's
 * array loops of common/olc_math.h.
 */
#ifndef OLC_MICROSOFT_ACTIVATION_H
#define OLC_MICROSOFT_ACTIVATION_H

#include <math.h>
#include <stdint.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_types.h"
#include "unary/olc_unary.h"

enum { OLC_MSACT_FAST_GELU = 0, OLC_MSACT_QUICK_GELU = 1, OLC_MSACT_FUSED = 2 };

/* FusedGemm's activations, as ONNX Runtime names them. */
enum {
    OLC_MSACT_RELU = 0, OLC_MSACT_TANH, OLC_MSACT_SIGMOID, OLC_MSACT_LEAKY_RELU,
    OLC_MSACT_HARD_SIGMOID, OLC_MSACT_ELU, OLC_MSACT_SELU, OLC_MSACT_THRESHOLDED_RELU,
    OLC_MSACT_SOFTPLUS, OLC_MSACT_SOFTSIGN, OLC_MSACT_SCALED_TANH,
    OLC_MSACT_PARAMETRIC_SOFTPLUS, OLC_MSACT_CELU
};

/* FastGelu: x rows of n and the bias (n); QuickGelu and the FusedGemm
 * activation: elements [i0, i1) of x.  act and beta, gamma: FusedGemm's. */
typedef struct {
    const void *x, *bias;
    void *y;
    int64_t n;
    float alpha, beta, gamma;
    int act;
} olc_msact_args;
typedef void (*olc_msact_fn)(const olc_msact_args *p, int64_t i0, int64_t i1);

#define OLC_BODY "microsoft_activation/olc_microsoft_activation_loops.h"
#include "common/olc_each_level.h"

/* ---- double: libm ---- */
static void olc_msact_fast_gelu_f64_scalar(const olc_msact_args *p, int64_t r0, int64_t r1) {
    const double *x = (const double *)p->x, *b = (const double *)p->bias;
    double *y = (double *)p->y;
    const double c = 0.7978845608028654;  /* sqrt(2/pi) */
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < p->n; ++j) {
            double v = x[r * p->n + j] + b[j];
            y[r * p->n + j] = 0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v)));
        }
}
static void olc_msact_quick_gelu_f64_scalar(const olc_msact_args *p, int64_t i0, int64_t i1) {
    const double *x = (const double *)p->x;
    double *y = (double *)p->y, alpha = p->alpha;
    for (int64_t i = i0; i < i1; ++i) y[i] = x[i] * olc_sigmoid_d_(alpha * x[i]);
}

/* ---- FusedGemm's activation, float32 in place ---- */
/* log(1 + exp(v)) without overflow: v + log(1 + exp(-v)) above 0. */
static inline float olc_msact_softplusf_(float v) {
    float e = olc_expf_(-fabsf(v));
    return olc_maxf_(v, 0.0f) + log1pf(e);
}
static void olc_msact_fused_scalar(const olc_msact_args *p, int64_t i0, int64_t i1, int level) {
    float *y = (float *)p->y + i0;
    const float a = p->alpha, b = p->beta, g = p->gamma;
    const int64_t n = i1 - i0;
    switch (p->act) {
    case OLC_MSACT_RELU:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] > 0.0f ? y[i] : (y[i] == y[i] ? 0.0f : y[i]);
        break;
    case OLC_MSACT_TANH:
        OLC_LEVEL_FN(level, olc_tanh_f32)(y, y, n);
        break;
    case OLC_MSACT_SIGMOID:
        OLC_LEVEL_FN(level, olc_sigmoid_f32)(y, y, n);
        break;
    case OLC_MSACT_LEAKY_RELU:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] >= 0.0f ? y[i] : a * y[i];
        break;
    case OLC_MSACT_HARD_SIGMOID:
        for (int64_t i = 0; i < n; ++i) {
            float v = a * y[i] + b;
            y[i] = v != v ? v : v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        }
        break;
    case OLC_MSACT_ELU:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] >= 0.0f ? y[i] : a * (olc_expf_(y[i]) - 1.0f);
        break;
    case OLC_MSACT_SELU:
        for (int64_t i = 0; i < n; ++i)
            y[i] = y[i] > 0.0f ? g * y[i] : g * (a * olc_expf_(y[i]) - a);
        break;
    case OLC_MSACT_THRESHOLDED_RELU:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] > a ? y[i] : 0.0f;
        break;
    case OLC_MSACT_SOFTPLUS:
        for (int64_t i = 0; i < n; ++i) y[i] = olc_msact_softplusf_(y[i]);
        break;
    case OLC_MSACT_SOFTSIGN:
        for (int64_t i = 0; i < n; ++i) y[i] = y[i] / (1.0f + fabsf(y[i]));
        break;
    case OLC_MSACT_SCALED_TANH:
        for (int64_t i = 0; i < n; ++i) y[i] = b * y[i];
        OLC_LEVEL_FN(level, olc_tanh_f32)(y, y, n);
        for (int64_t i = 0; i < n; ++i) y[i] = a * y[i];
        break;
    case OLC_MSACT_PARAMETRIC_SOFTPLUS:
        for (int64_t i = 0; i < n; ++i) y[i] = a * olc_msact_softplusf_(b * y[i]);
        break;
    case OLC_MSACT_CELU:
        for (int64_t i = 0; i < n; ++i)
            y[i] = y[i] >= 0.0f ? y[i] : a * (olc_expf_(y[i] / a) - 1.0f);
        break;
    default:
        break;
    }
}
static void olc_msact_fused_f32_scalar(const olc_msact_args *p, int64_t i0, int64_t i1) {
    olc_msact_fused_scalar(p, i0, i1, OLC_SCALAR);
}
#if OLC_X86
static void olc_msact_fused_f32_avx2(const olc_msact_args *p, int64_t i0, int64_t i1) {
    olc_msact_fused_scalar(p, i0, i1, OLC_AVX2);
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static void olc_msact_fused_f32_avx512(const olc_msact_args *p, int64_t i0, int64_t i1) {
    olc_msact_fused_scalar(p, i0, i1, OLC_AVX512);
}
#endif

static int olc_msact_level(int dtype, int level) {
    if (dtype == OLC_DOUBLE) return OLC_SCALAR;
    return olc_build_level(level);
}

/* The range function of op for dtype at the highest level <= level; NULL
 * for a pair the core does not have (FusedGemm's activation: float32). */
static olc_msact_fn olc_msact_select(int op, int dtype, int level) {
    level = olc_msact_level(dtype, level);
    if (op == OLC_MSACT_FUSED)
        return dtype == OLC_FLOAT ? OLC_LEVEL_FN(level, olc_msact_fused_f32) : NULL;
    if (dtype == OLC_DOUBLE)
        return op == OLC_MSACT_FAST_GELU ? olc_msact_fast_gelu_f64_scalar
                                         : olc_msact_quick_gelu_f64_scalar;
    if (op == OLC_MSACT_FAST_GELU)
        return dtype == OLC_FLOAT ? OLC_LEVEL_FN(level, olc_msact_fast_gelu_f32)
             : dtype == OLC_FLOAT16 ? OLC_LEVEL_FN(level, olc_msact_fast_gelu_f16)
             : dtype == OLC_BFLOAT16 ? OLC_LEVEL_FN(level, olc_msact_fast_gelu_bf16) : NULL;
    if (op == OLC_MSACT_QUICK_GELU)
        return dtype == OLC_FLOAT ? OLC_LEVEL_FN(level, olc_msact_quick_gelu_f32)
             : dtype == OLC_FLOAT16 ? OLC_LEVEL_FN(level, olc_msact_quick_gelu_f16)
             : dtype == OLC_BFLOAT16 ? OLC_LEVEL_FN(level, olc_msact_quick_gelu_bf16) : NULL;
    return NULL;
}

#endif /* OLC_MICROSOFT_ACTIVATION_H */
