/* The AVX-512 rows olc_bias_gelu_<type>_avx512 and olc_swiglu_<type>_avx512
 * of element type OLC_ACT_TN (f32, f16, bf16): 16 elements a vector, the
 * tail masked.  Included by olc_activation.h; no include guard. */

OLC_LVL_ATTR static void OLC_ACT_FN(olc_bias_gelu)(const olc_act_args *p, int64_t r0, int64_t r1) {
    const OLC_ACT_T *a = (const OLC_ACT_T *)p->a, *b = (const OLC_ACT_T *)p->b;
    OLC_ACT_T *y = (OLC_ACT_T *)p->y;
    int64_t n = p->n;
    for (int64_t r = r0; r < r1; ++r) {
        const OLC_ACT_T *ar = a + r * n; OLC_ACT_T *yr = y + r * n;
        for (int64_t j = 0; j < n; j += 16) {
            __mmask16 m = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
            OLC_ACT_VST(yr + j, m, olc_gelu_erf_ps_avx512(_mm512_add_ps(OLC_ACT_VLD(ar + j, m),
                                                                    OLC_ACT_VLD(b + j, m))));
        }
    }
}

OLC_LVL_ATTR static void OLC_ACT_FN(olc_swiglu)(const olc_act_args *p, int64_t r0, int64_t r1) {
    const OLC_ACT_T *a = (const OLC_ACT_T *)p->a, *b = (const OLC_ACT_T *)p->b;
    OLC_ACT_T *y = (OLC_ACT_T *)p->y;
    const __m512 alpha = _mm512_set1_ps(p->alpha);
    int64_t end = r1 * p->n;
    for (int64_t i = r0 * p->n; i < end; i += 16) {
        __mmask16 m = end - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (end - i)) - 1);
        OLC_ACT_VST(y + i, m, _mm512_mul_ps(olc_swish_ps_avx512(OLC_ACT_VLD(a + i, m), alpha),
                                            OLC_ACT_VLD(b + i, m)));
    }
}
