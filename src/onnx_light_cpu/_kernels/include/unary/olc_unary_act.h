/* The activation loops of one level (a body file: see common/olc_level.h):
 * Relu, LeakyRelu, HardSigmoid, HardSwish, Elu, Selu, Celu, Mish, Sign,
 * Erf, Softplus, Softsign, ThresholdedRelu and Sqrt on float32, float16
 * and bfloat16 (computed in float32, rounded once at the store).
 *
 * Each operator is one function of a float vector and the parameters
 * (alpha, beta, gamma as float32 vectors), written with the level's
 * helpers olc_av_* (unary/olc_unary.h) and the GCC vector operators, so the
 * scalar twin performs the same IEEE operations in the same order.  A
 * product that feeds an addition goes through olc_av_keep, which the
 * compiler cannot fuse into an FMA (the vector levels allow fusing, the
 * scalar one has no FMA): the levels agree, and the exact operators
 * (Relu, LeakyRelu, HardSigmoid, HardSwish, Sign, Softsign,
 * ThresholdedRelu, Sqrt) round as NumPy's float32 does. */

typedef struct { OLC_FN(olc_vf) a, b, c; } OLC_FN(olc_uact_par);

#define OLC_V OLC_FN(olc_vf)
#define OLC_P const OLC_FN(olc_uact_par) *
#define OLC_S(v) OLC_FN(olc_av_set)(v)

/* max(0, x): NaN stays NaN, -0 stays -0 (as np.maximum(x, 0)). */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_relu)(OLC_V x, OLC_P p) {
    (void)p;
    return OLC_FN(olc_av_max)(OLC_S(0.0f), x);
}
/* x > 0 ? x : alpha x */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_leaky_relu)(OLC_V x, OLC_P p) {
    return OLC_FN(olc_av_sel_gt)(x, OLC_S(0.0f), x, x * p->a);
}
/* max(0, min(1, alpha x + beta)), multiply and add rounded apart */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_hard_sigmoid)(OLC_V x, OLC_P p) {
    OLC_V t = OLC_FN(olc_av_keep)(x * p->a) + p->b;
    return OLC_FN(olc_av_max)(OLC_S(0.0f), OLC_FN(olc_av_min)(OLC_S(1.0f), t));
}
/* x hardsigmoid(x) with alpha = 1/6, beta = 1/2 (the adapter's parameters) */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_hard_swish)(OLC_V x, OLC_P p) {
    return x * OLC_FN(olc_uact_hard_sigmoid)(x, p);
}
/* exp(x) - 1 without the cancellation near 0 (as np.expm1, which the
 * built-ins use): for |x| < 1/2 Kahan's (u - 1) x / log(u), u = exp(x)
 * (x itself where u rounds to 1); elsewhere u - 1. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_expm1)(OLC_V x) {
    OLC_V u = OLC_FN(olc_exp_ps)(x), d = u - 1.0f;
    OLC_V k = OLC_FN(olc_av_sel_gt)(OLC_FN(olc_av_abs)(d), OLC_S(0.0f),
                                     d * (x / OLC_FN(olc_log_ps)(u)), x);
    return OLC_FN(olc_av_sel_lt)(OLC_FN(olc_av_abs)(x), OLC_S(0.5f), k, d);
}
/* x < 0 ? alpha expm1(x) : x */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_elu)(OLC_V x, OLC_P p) {
    OLC_V e = OLC_FN(olc_uact_expm1)(x) * p->a;
    return OLC_FN(olc_av_sel_lt)(x, OLC_S(0.0f), e, x);
}
/* gamma (x > 0 ? x : alpha expm1(x)) */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_selu)(OLC_V x, OLC_P p) {
    OLC_V e = OLC_FN(olc_uact_expm1)(x) * p->a;
    return OLC_FN(olc_av_sel_gt)(x, OLC_S(0.0f), x, e) * p->c;
}
/* max(0, x) + min(0, alpha expm1(x / alpha)) */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_celu)(OLC_V x, OLC_P p) {
    OLC_V e = OLC_FN(olc_av_keep)(OLC_FN(olc_uact_expm1)(x / p->a) * p->a);
    return OLC_FN(olc_av_max)(OLC_S(0.0f), x) + OLC_FN(olc_av_min)(OLC_S(0.0f), e);
}
/* log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), log1p(e) for e in [0, 1]
 * as log(u) e / (u - 1), u = 1 + e (exact where u rounds to 1): no overflow
 * for large x, full precision for large negative x. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_softplus)(OLC_V x, OLC_P p) {
    (void)p;
    OLC_V e = OLC_FN(olc_exp_ps)(-OLC_FN(olc_av_abs)(x));
    OLC_V u = e + 1.0f, d = u - 1.0f;
    OLC_V l = OLC_FN(olc_av_keep)(OLC_FN(olc_av_sel_gt)(d, OLC_S(0.0f), OLC_FN(olc_log_ps)(u) * (e / d), e));
    return OLC_FN(olc_av_max)(OLC_S(0.0f), x) + l;
}
/* x tanh(softplus(x)) */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_mish)(OLC_V x, OLC_P p) {
    return x * OLC_FN(olc_tanh_ps)(OLC_FN(olc_uact_softplus)(x, p));
}
/* 1, -1, or +0 for ±0; NaN stays NaN (as np.sign) */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_sign)(OLC_V x, OLC_P p) {
    (void)p;
    OLC_V z = OLC_S(0.0f);
    return OLC_FN(olc_av_sel_gt)(x, z, OLC_S(1.0f), OLC_FN(olc_av_sel_lt)(x, z, OLC_S(-1.0f), x - x));
}
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_erf)(OLC_V x, OLC_P p) {
    (void)p;
    return OLC_FN(olc_erf_ps)(x);
}
/* x / (1 + |x|) */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_softsign)(OLC_V x, OLC_P p) {
    (void)p;
    return x / (OLC_FN(olc_av_abs)(x) + 1.0f);
}
/* x > alpha ? x : 0 */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_thresholded_relu)(OLC_V x, OLC_P p) {
    return OLC_FN(olc_av_sel_gt)(x, p->a, x, OLC_S(0.0f));
}
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_V OLC_FN(olc_uact_sqrt)(OLC_V x, OLC_P p) {
    (void)p;
    return OLC_FN(olc_av_sqrt)(x);
}

/* One operator over an array, tails through the same vector code. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_uact_map_f32)(
    OLC_V (*op)(OLC_V, OLC_P), const float *x, float *y, int64_t n, const double *prm) {
    const int64_t w = (int64_t)(sizeof(OLC_V) / sizeof(float));
    OLC_FN(olc_uact_par) p = {OLC_S((float)prm[0]), OLC_S((float)prm[1]), OLC_S((float)prm[2])};
    int64_t i = 0;
    for (; i + w <= n; i += w) OLC_FN(olc_st_f32_part)(y + i, w, op(OLC_FN(olc_ld_f32_part)(x + i, w), &p));
    if (i < n) OLC_FN(olc_st_f32_part)(y + i, n - i, op(OLC_FN(olc_ld_f32_part)(x + i, n - i), &p));
}
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_uact_map_f16)(
    OLC_V (*op)(OLC_V, OLC_P), const uint16_t *x, uint16_t *y, int64_t n, const double *prm) {
    const int64_t w = (int64_t)(sizeof(OLC_V) / sizeof(float));
    OLC_FN(olc_uact_par) p = {OLC_S((float)prm[0]), OLC_S((float)prm[1]), OLC_S((float)prm[2])};
    int64_t i = 0;
    for (; i + w <= n; i += w) OLC_FN(olc_st_f16_part)(y + i, w, op(OLC_FN(olc_ld_f16_part)(x + i, w), &p));
    if (i < n) OLC_FN(olc_st_f16_part)(y + i, n - i, op(OLC_FN(olc_ld_f16_part)(x + i, n - i), &p));
}
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_uact_map_bf16)(
    OLC_V (*op)(OLC_V, OLC_P), const uint16_t *x, uint16_t *y, int64_t n, const double *prm) {
    const int64_t w = (int64_t)(sizeof(OLC_V) / sizeof(float));
    OLC_FN(olc_uact_par) p = {OLC_S((float)prm[0]), OLC_S((float)prm[1]), OLC_S((float)prm[2])};
    int64_t i = 0;
    for (; i + w <= n; i += w) OLC_FN(olc_st_bf16_part)(y + i, w, op(OLC_FN(olc_ld_bf16_part)(x + i, w), &p));
    if (i < n) OLC_FN(olc_st_bf16_part)(y + i, n - i, op(OLC_FN(olc_ld_bf16_part)(x + i, n - i), &p));
}

/* The loops of every operator (unary/olc_unary_act_loops.h). */
#define OLC_UACT_OP relu
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP leaky_relu
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP hard_sigmoid
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP hard_swish
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP elu
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP selu
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP celu
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP softplus
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP mish
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP sign
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP erf
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP softsign
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP thresholded_relu
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP
#define OLC_UACT_OP sqrt
#include "unary/olc_unary_act_loops.h"
#undef OLC_UACT_OP

/* The level's table, [op - OLC_OP_RELU][float32, float16, bfloat16]. */
static const olc_uact_fn OLC_FN(olc_uact_fns)[OLC_OP_SQRT - OLC_OP_RELU + 1][3] = {
    {OLC_FN(olc_uact_relu_f32), OLC_FN(olc_uact_relu_f16), OLC_FN(olc_uact_relu_bf16)},
    {OLC_FN(olc_uact_leaky_relu_f32), OLC_FN(olc_uact_leaky_relu_f16), OLC_FN(olc_uact_leaky_relu_bf16)},
    {OLC_FN(olc_uact_hard_sigmoid_f32), OLC_FN(olc_uact_hard_sigmoid_f16), OLC_FN(olc_uact_hard_sigmoid_bf16)},
    {OLC_FN(olc_uact_hard_swish_f32), OLC_FN(olc_uact_hard_swish_f16), OLC_FN(olc_uact_hard_swish_bf16)},
    {OLC_FN(olc_uact_elu_f32), OLC_FN(olc_uact_elu_f16), OLC_FN(olc_uact_elu_bf16)},
    {OLC_FN(olc_uact_selu_f32), OLC_FN(olc_uact_selu_f16), OLC_FN(olc_uact_selu_bf16)},
    {OLC_FN(olc_uact_celu_f32), OLC_FN(olc_uact_celu_f16), OLC_FN(olc_uact_celu_bf16)},
    {OLC_FN(olc_uact_softplus_f32), OLC_FN(olc_uact_softplus_f16), OLC_FN(olc_uact_softplus_bf16)},
    {OLC_FN(olc_uact_mish_f32), OLC_FN(olc_uact_mish_f16), OLC_FN(olc_uact_mish_bf16)},
    {OLC_FN(olc_uact_sign_f32), OLC_FN(olc_uact_sign_f16), OLC_FN(olc_uact_sign_bf16)},
    {OLC_FN(olc_uact_erf_f32), OLC_FN(olc_uact_erf_f16), OLC_FN(olc_uact_erf_bf16)},
    {OLC_FN(olc_uact_softsign_f32), OLC_FN(olc_uact_softsign_f16), OLC_FN(olc_uact_softsign_bf16)},
    {OLC_FN(olc_uact_thresholded_relu_f32), OLC_FN(olc_uact_thresholded_relu_f16), OLC_FN(olc_uact_thresholded_relu_bf16)},
    {OLC_FN(olc_uact_sqrt_f32), OLC_FN(olc_uact_sqrt_f16), OLC_FN(olc_uact_sqrt_bf16)}};

#undef OLC_V
#undef OLC_P
#undef OLC_S
