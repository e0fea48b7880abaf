/* Plain loops of one level, arithmetic OLC_NORM_A (named OLC_NORM_AN) and
 * x type OLC_NORM_TX: the row statistics and the per-segment affine, then
 * the apply for each scale type.  Included by olc_normalization_plain.h;
 * no include guard.  The vector levels are the compiler's vectorisation of
 * the same loops (`omp simd` reductions). */

OLC_LVL_ATTR static void OLC_NORM_FN_X(olc_norm_stats)(const void *px, int64_t n, int mode,
                                                      double *mean, double *var) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    OLC_NORM_A m = 0, s = 0;
    if (mode == OLC_NORM_CENTERED) {
#pragma omp simd reduction(+:m)
        for (int64_t i = 0; i < n; ++i) m += (OLC_NORM_A)OLC_NORM_LD_X(x, i);
        m = m / (OLC_NORM_A)n;
#pragma omp simd reduction(+:s)
        for (int64_t i = 0; i < n; ++i) {
            OLC_NORM_A d = (OLC_NORM_A)OLC_NORM_LD_X(x, i) - m;
            s += d * d;
        }
    } else if (mode == OLC_NORM_L1) {
#pragma omp simd reduction(+:s)
        for (int64_t i = 0; i < n; ++i) s += fabs((double)(OLC_NORM_A)OLC_NORM_LD_X(x, i));
    } else {
#pragma omp simd reduction(+:s)
        for (int64_t i = 0; i < n; ++i) {
            OLC_NORM_A v = (OLC_NORM_A)OLC_NORM_LD_X(x, i);
            s += v * v;
        }
    }
    *mean = (double)m;
    *var = (double)(mode <= OLC_NORM_SQUARES ? s / (OLC_NORM_A)n : s);
}

OLC_LVL_ATTR static void OLC_NORM_FN_X(olc_norm_affine)(const void *px, int64_t n, double mean_,
                                                       double mul_, double add_, int relu,
                                                       void *py) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    OLC_NORM_X *y = (OLC_NORM_X *)py;
    OLC_NORM_A mean = (OLC_NORM_A)mean_, mul = (OLC_NORM_A)mul_, add = (OLC_NORM_A)add_;
    for (int64_t i = 0; i < n; ++i) {
        OLC_NORM_X v = OLC_NORM_ST_X(((OLC_NORM_A)OLC_NORM_LD_X(x, i) - mean) * mul + add);
        /* the Relu on the stored value, as the Relu node would see it */
        y[i] = relu && OLC_NORM_LD_X(&v, 0) < 0 ? OLC_NORM_ST_X(0.0f) : v;
    }
}

#define OLC_NORM_TS f32
#include "normalization/olc_normalization_plain_apply.h"
#undef OLC_NORM_TS
#define OLC_NORM_TS f16
#include "normalization/olc_normalization_plain_apply.h"
#undef OLC_NORM_TS
#define OLC_NORM_TS f64
#include "normalization/olc_normalization_plain_apply.h"
#undef OLC_NORM_TS
#define OLC_NORM_TS bf16
#include "normalization/olc_normalization_plain_apply.h"
#undef OLC_NORM_TS
