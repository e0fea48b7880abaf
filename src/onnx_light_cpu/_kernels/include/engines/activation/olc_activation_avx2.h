/* The AVX2 rows olc_bias_gelu_<type>_avx2 and olc_swiglu_<type>_avx2 of
 * element type OLC_ACT_TN (f32, f16, bf16): 8 elements a vector, the tail
 * through the same code via a stack buffer.  Included by olc_activation.h;
 * no include guard. */

/* y = Gelu(a + b) over n elements. */
OLC_LVL_ATTR static void OLC_ACT_FN(olc_gelu_span)(const OLC_ACT_T *a, const OLC_ACT_T *b,
                                                   OLC_ACT_T *y, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
        OLC_ACT_VST(y + j, olc_gelu_erf_ps_avx2(_mm256_add_ps(OLC_ACT_VLD(a + j), OLC_ACT_VLD(b + j))));
    if (j < n) {
        OLC_ACT_T ba[8] = {0}, bb[8] = {0};
        memcpy(ba, a + j, (size_t)(n - j) * sizeof(OLC_ACT_T));
        memcpy(bb, b + j, (size_t)(n - j) * sizeof(OLC_ACT_T));
        OLC_ACT_VST(ba, olc_gelu_erf_ps_avx2(_mm256_add_ps(OLC_ACT_VLD(ba), OLC_ACT_VLD(bb))));
        memcpy(y + j, ba, (size_t)(n - j) * sizeof(OLC_ACT_T));
    }
}

OLC_LVL_ATTR static void OLC_ACT_FN(olc_bias_gelu)(const olc_act_args *p, int64_t r0, int64_t r1) {
    const OLC_ACT_T *a = (const OLC_ACT_T *)p->a, *b = (const OLC_ACT_T *)p->b;
    OLC_ACT_T *y = (OLC_ACT_T *)p->y;
    for (int64_t r = r0; r < r1; ++r)
        OLC_ACT_FN(olc_gelu_span)(a + r * p->n, b, y + r * p->n, p->n);
}

OLC_LVL_ATTR static void OLC_ACT_FN(olc_swiglu)(const olc_act_args *p, int64_t r0, int64_t r1) {
    const OLC_ACT_T *a = (const OLC_ACT_T *)p->a, *b = (const OLC_ACT_T *)p->b;
    OLC_ACT_T *y = (OLC_ACT_T *)p->y;
    const __m256 alpha = _mm256_set1_ps(p->alpha);
    int64_t i = r0 * p->n, end = r1 * p->n;
    for (; i + 8 <= end; i += 8)
        OLC_ACT_VST(y + i, _mm256_mul_ps(olc_swish_ps_avx2(OLC_ACT_VLD(a + i), alpha),
                                         OLC_ACT_VLD(b + i)));
    if (i < end) {
        OLC_ACT_T ba[8] = {0}, bb[8] = {0};
        memcpy(ba, a + i, (size_t)(end - i) * sizeof(OLC_ACT_T));
        memcpy(bb, b + i, (size_t)(end - i) * sizeof(OLC_ACT_T));
        OLC_ACT_VST(ba, _mm256_mul_ps(olc_swish_ps_avx2(OLC_ACT_VLD(ba), alpha), OLC_ACT_VLD(bb)));
        memcpy(y + i, ba, (size_t)(end - i) * sizeof(OLC_ACT_T));
    }
}
