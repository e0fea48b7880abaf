/* float32 arithmetic with AVX2+FMA/F16C intrinsics for x type OLC_NORM_TX
 * (f32, f16, bf16): the row statistics and the affine, then the apply for
 * each scale type.  16 elements an iteration in two accumulators, a scalar
 * tail.  Included by olc_normalization.h at level avx2; no include guard. */

#define OLC_NORM_AN v32

OLC_LVL_ATTR static void OLC_NORM_FN_X(olc_norm_stats)(const void *px, int64_t n, int mode,
                                                      double *mean, double *var) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    float m = 0.0f;
    int64_t i;
    if (mode == OLC_NORM_CENTERED) {
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        for (i = 0; i + 16 <= n; i += 16) {
            a0 = _mm256_add_ps(a0, OLC_NORM_VLD_X(x + i));
            a1 = _mm256_add_ps(a1, OLC_NORM_VLD_X(x + i + 8));
        }
        float tail = 0.0f;
        for (; i < n; ++i) tail += OLC_NORM_LD_X(x, i);
        m = (olc_hsum_ps_avx2(_mm256_add_ps(a0, a1)) + tail) / (float)n;
    }
    const __m256 vm = _mm256_set1_ps(m);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    float tail = 0.0f;
    for (i = 0; i + 16 <= n; i += 16) {
        __m256 d0 = _mm256_sub_ps(OLC_NORM_VLD_X(x + i), vm);
        __m256 d1 = _mm256_sub_ps(OLC_NORM_VLD_X(x + i + 8), vm);
        if (mode == OLC_NORM_L1) {
            a0 = _mm256_add_ps(a0, _mm256_and_ps(d0, absmask));
            a1 = _mm256_add_ps(a1, _mm256_and_ps(d1, absmask));
        } else {
            a0 = _mm256_fmadd_ps(d0, d0, a0);
            a1 = _mm256_fmadd_ps(d1, d1, a1);
        }
    }
    for (; i < n; ++i) {
        float d = OLC_NORM_LD_X(x, i) - m;
        tail += mode == OLC_NORM_L1 ? fabsf(d) : d * d;
    }
    float s = olc_hsum_ps_avx2(_mm256_add_ps(a0, a1)) + tail;
    *mean = m;
    *var = mode <= OLC_NORM_SQUARES ? s / (float)n : s;
}

OLC_LVL_ATTR static void OLC_NORM_FN_X(olc_norm_affine)(const void *px, int64_t n, double mean_,
                                                       double mul_, double add_, int relu,
                                                       void *py) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    OLC_NORM_X *y = (OLC_NORM_X *)py;
    const float mean = (float)mean_, mul = (float)mul_, add = (float)add_;
    const __m256 vm = _mm256_set1_ps(mean), vk = _mm256_set1_ps(mul), va = _mm256_set1_ps(add);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_fmadd_ps(_mm256_sub_ps(OLC_NORM_VLD_X(x + i), vm), vk, va);
        /* max(0, v) keeps a NaN and -0 (the second operand), as Relu does */
        if (relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);
        OLC_NORM_VST_X(y + i, v);
    }
    for (; i < n; ++i) {
        float v = fmaf(OLC_NORM_LD_X(x, i) - mean, mul, add);
        y[i] = OLC_NORM_ST_X(relu && 0.0f > v ? 0.0f : v);
    }
}

#define OLC_NORM_TS f32
#include "normalization/olc_normalization_avx2_apply.h"
#undef OLC_NORM_TS
#define OLC_NORM_TS f16
#include "normalization/olc_normalization_avx2_apply.h"
#undef OLC_NORM_TS
#define OLC_NORM_TS bf16
#include "normalization/olc_normalization_avx2_apply.h"
#undef OLC_NORM_TS

#undef OLC_NORM_AN
