/* The AVX-512 apply of x type OLC_NORM_TX and scale type OLC_NORM_TS.
 * Included by olc_normalization_avx512.h; no include guard. */

OLC_LVL_ATTR static void OLC_NORM_FN_XS(olc_norm_apply)(const void *px, int64_t n, double mean_,
                                                       double inv_, const void *ps, const void *pb,
                                                       void *py) {
    const OLC_NORM_X *x = (const OLC_NORM_X *)px;
    const OLC_NORM_S *s = (const OLC_NORM_S *)ps, *b = (const OLC_NORM_S *)pb;
    OLC_NORM_S *y = (OLC_NORM_S *)py;
    const __m512 vm = _mm512_set1_ps((float)mean_), vi = _mm512_set1_ps((float)inv_);
    int64_t i = 0;
    if (b) {
        for (; i + 16 <= n; i += 16) {
            __m512 v = _mm512_mul_ps(_mm512_sub_ps(OLC_NORM_VLD_X(x + i, 0xffff), vm), vi);
            OLC_NORM_VST_S(y + i, 0xffff, _mm512_fmadd_ps(v, OLC_NORM_VLD_S(s + i, 0xffff),
                                                          OLC_NORM_VLD_S(b + i, 0xffff)));
        }
        if (i < n) {
            __mmask16 k = olc_tail_mask16(n - i);
            __m512 v = _mm512_mul_ps(_mm512_sub_ps(OLC_NORM_VLD_X(x + i, k), vm), vi);
            OLC_NORM_VST_S(y + i, k, _mm512_fmadd_ps(v, OLC_NORM_VLD_S(s + i, k), OLC_NORM_VLD_S(b + i, k)));
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            __m512 v = _mm512_mul_ps(_mm512_sub_ps(OLC_NORM_VLD_X(x + i, 0xffff), vm), vi);
            OLC_NORM_VST_S(y + i, 0xffff, _mm512_mul_ps(v, OLC_NORM_VLD_S(s + i, 0xffff)));
        }
        if (i < n) {
            __mmask16 k = olc_tail_mask16(n - i);
            __m512 v = _mm512_mul_ps(_mm512_sub_ps(OLC_NORM_VLD_X(x + i, k), vm), vi);
            OLC_NORM_VST_S(y + i, k, _mm512_mul_ps(v, OLC_NORM_VLD_S(s + i, k)));
        }
    }
}
