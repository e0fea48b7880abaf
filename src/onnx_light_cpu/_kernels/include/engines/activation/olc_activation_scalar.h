/* The scalar twins olc_bias_gelu_<type>_scalar and olc_swiglu_<type>_scalar
 * of element type OLC_ACT_TN (f32, f16, bf16), computed in float32.
 * Included by olc_activation.h; no include guard. */

static void OLC_ACT_FN(olc_bias_gelu)(const olc_act_args *p, int64_t r0, int64_t r1) {
    const OLC_ACT_T *a = (const OLC_ACT_T *)p->a, *b = (const OLC_ACT_T *)p->b;
    OLC_ACT_T *y = (OLC_ACT_T *)p->y;
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < p->n; ++j)
            y[r * p->n + j] = OLC_ACT_ST(olc_gelu_erf_ps_scalar(OLC_ACT_LD(a[r * p->n + j]) + OLC_ACT_LD(b[j])));
}

static void OLC_ACT_FN(olc_swiglu)(const olc_act_args *p, int64_t r0, int64_t r1) {
    const OLC_ACT_T *a = (const OLC_ACT_T *)p->a, *b = (const OLC_ACT_T *)p->b;
    OLC_ACT_T *y = (OLC_ACT_T *)p->y;
    for (int64_t i = r0 * p->n; i < r1 * p->n; ++i)
        y[i] = OLC_ACT_ST(olc_swishf_(OLC_ACT_LD(a[i]), p->alpha) * OLC_ACT_LD(b[i]));
}
