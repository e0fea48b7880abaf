/* float32 arithmetic with AVX-512 intrinsics for x type OLC_NORM_TX (f32,
 * f16, bf16): the row statistics and the affine, then the apply for each
 * scale type.  32 elements an iteration in two accumulators, a masked tail
 * (lanes past the row stay zero: the subtraction is zero-masked too).
 * Included by olc_normalization.h at level avx512; no include guard. */

#define OLC_NORM_AN v32

OLC_LVL_ATTR static void OLC_NORM_FN_X(olc_norm_stats)(const void *px, int64_t n, int mode,
                                                      double *mean, double *var) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    float m = 0.0f;
    int64_t i;
    if (mode == OLC_NORM_CENTERED) {
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        for (i = 0; i + 32 <= n; i += 32) {
            a0 = _mm512_add_ps(a0, OLC_NORM_VLD_X(x + i, 0xffff));
            a1 = _mm512_add_ps(a1, OLC_NORM_VLD_X(x + i + 16, 0xffff));
        }
        for (; i < n; i += 16) a0 = _mm512_add_ps(a0, OLC_NORM_VLD_X(x + i, olc_tail_mask16(n - i)));
        m = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) / (float)n;
    }
    const __m512 vm = _mm512_set1_ps(m);
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (i = 0; i + 32 <= n; i += 32) {
        __m512 d0 = _mm512_sub_ps(OLC_NORM_VLD_X(x + i, 0xffff), vm);
        __m512 d1 = _mm512_sub_ps(OLC_NORM_VLD_X(x + i + 16, 0xffff), vm);
        if (mode == OLC_NORM_L1) {
            a0 = _mm512_add_ps(a0, _mm512_abs_ps(d0));
            a1 = _mm512_add_ps(a1, _mm512_abs_ps(d1));
        } else {
            a0 = _mm512_fmadd_ps(d0, d0, a0);
            a1 = _mm512_fmadd_ps(d1, d1, a1);
        }
    }
    for (; i < n; i += 16) {
        __mmask16 k = olc_tail_mask16(n - i);
        __m512 d = _mm512_maskz_sub_ps(k, OLC_NORM_VLD_X(x + i, k), vm);
        a0 = mode == OLC_NORM_L1 ? _mm512_add_ps(a0, _mm512_abs_ps(d)) : _mm512_fmadd_ps(d, d, a0);
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    *mean = m;
    *var = mode <= OLC_NORM_SQUARES ? s / (float)n : s;
}

OLC_LVL_ATTR static void OLC_NORM_FN_X(olc_norm_affine)(const void *px, int64_t n, double mean_,
                                                       double mul_, double add_, int relu,
                                                       void *py) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    OLC_NORM_X *y = (OLC_NORM_X *)py;
    const __m512 vm = _mm512_set1_ps((float)mean_), vk = _mm512_set1_ps((float)mul_),
                 va = _mm512_set1_ps((float)add_);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = olc_tail_mask16(n - i);
        __m512 v = _mm512_fmadd_ps(_mm512_sub_ps(OLC_NORM_VLD_X(x + i, k), vm), vk, va);
        /* max(0, v) keeps a NaN and -0 (the second operand), as Relu does */
        if (relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
        OLC_NORM_VST_X(y + i, k, v);
    }
}

#define OLC_NORM_TS f32
#include "normalization/olc_normalization_avx512_apply.h"
#undef OLC_NORM_TS
#define OLC_NORM_TS f16
#include "normalization/olc_normalization_avx512_apply.h"
#undef OLC_NORM_TS
#define OLC_NORM_TS bf16
#include "normalization/olc_normalization_avx512_apply.h"
#undef OLC_NORM_TS

#undef OLC_NORM_AN
