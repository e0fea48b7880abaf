/* The AVX2 apply of x type OLC_NORM_TX and scale type OLC_NORM_TS.
 * Included by olc_normalization_avx2.h; no include guard. */

OLC_LVL_ATTR static void OLC_NORM_FN_XS(olc_norm_apply)(const void *px, int64_t n, double mean_,
                                                       double inv_, const void *ps, const void *pb,
                                                       void *py) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    const OLC_NORM_S *s = (const OLC_NORM_S *)ps, *b = (const OLC_NORM_S *)pb;
    OLC_NORM_S *y = (OLC_NORM_S *)py;
    const float mean = (float)mean_, inv = (float)inv_;
    const __m256 vm = _mm256_set1_ps(mean), vi = _mm256_set1_ps(inv);
    int64_t i = 0;
    if (b) {
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_sub_ps(OLC_NORM_VLD_X(x + i), vm), vi);
            OLC_NORM_VST_S(y + i, _mm256_fmadd_ps(v, OLC_NORM_VLD_S(s + i), OLC_NORM_VLD_S(b + i)));
        }
        for (; i < n; ++i)
            y[i] = OLC_NORM_ST_S(fmaf((OLC_NORM_LD_X(x, i) - mean) * inv, OLC_NORM_LD_S(s, i),
                                      OLC_NORM_LD_S(b, i)));
    } else {
        for (; i + 8 <= n; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_sub_ps(OLC_NORM_VLD_X(x + i), vm), vi);
            OLC_NORM_VST_S(y + i, _mm256_mul_ps(v, OLC_NORM_VLD_S(s + i)));
        }
        for (; i < n; ++i)
            y[i] = OLC_NORM_ST_S((OLC_NORM_LD_X(x, i) - mean) * inv * OLC_NORM_LD_S(s, i));
    }
}
