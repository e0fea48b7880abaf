/* FastGelu with bias and QuickGelu at one level (a body file: see
 * common/olc_level.h; olc_microsoft_activation.h includes it once per
 * level).  A vector is the level's olc_vf (one float at the scalar level);
 * loads and stores of the first m elements come from common/olc_math.h.
 * Only IEEE adds and products besides the math functions, so every level
 * returns the same bits.  No include guard. */

/* g(a + b) for one vector: the tanh Gelu of unary/olc_unary.h. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_FN(olc_vf) OLC_FN(olc_msact_fast)(
    OLC_FN(olc_vf) a, OLC_FN(olc_vf) b) {
    return OLC_FN(olc_gelu_tanh_ps)(a + b);
}
/* x sigmoid(alpha x) for one vector. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_FN(olc_vf) OLC_FN(olc_msact_quick)(
    OLC_FN(olc_vf) x, float alpha) {
    return x * OLC_FN(olc_sigmoid_ps)(x * alpha);
}

/* FastGelu over rows [r0, r1) of n elements, the bias repeated per row. */
OLC_LVL_ATTR static void OLC_FN(olc_msact_fast_gelu_f32)(const olc_msact_args *p, int64_t r0,
                                                          int64_t r1) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float)), n = p->n;
    const float *b = (const float *)p->bias;
    for (int64_t r = r0; r < r1; ++r) {
        const float *x = (const float *)p->x + r * n;
        float *y = (float *)p->y + r * n;
        for (int64_t j = 0; j < n; j += w) {
            int64_t m = n - j < w ? n - j : w;
            OLC_FN(olc_st_f32_part)(y + j, m, OLC_FN(olc_msact_fast)(
                OLC_FN(olc_ld_f32_part)(x + j, m), OLC_FN(olc_ld_f32_part)(b + j, m)));
        }
    }
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_fast_gelu_f16)(const olc_msact_args *p, int64_t r0,
                                                          int64_t r1) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float)), n = p->n;
    const uint16_t *b = (const uint16_t *)p->bias;
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t *x = (const uint16_t *)p->x + r * n;
        uint16_t *y = (uint16_t *)p->y + r * n;
        for (int64_t j = 0; j < n; j += w) {
            int64_t m = n - j < w ? n - j : w;
            OLC_FN(olc_st_f16_part)(y + j, m, OLC_FN(olc_msact_fast)(
                OLC_FN(olc_ld_f16_part)(x + j, m), OLC_FN(olc_ld_f16_part)(b + j, m)));
        }
    }
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_fast_gelu_bf16)(const olc_msact_args *p, int64_t r0,
                                                           int64_t r1) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float)), n = p->n;
    const uint16_t *b = (const uint16_t *)p->bias;
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t *x = (const uint16_t *)p->x + r * n;
        uint16_t *y = (uint16_t *)p->y + r * n;
        for (int64_t j = 0; j < n; j += w) {
            int64_t m = n - j < w ? n - j : w;
            OLC_FN(olc_st_bf16_part)(y + j, m, OLC_FN(olc_msact_fast)(
                OLC_FN(olc_ld_bf16_part)(x + j, m), OLC_FN(olc_ld_bf16_part)(b + j, m)));
        }
    }
}

/* QuickGelu over elements [i0, i1). */
OLC_LVL_ATTR static void OLC_FN(olc_msact_quick_gelu_f32)(const olc_msact_args *p, int64_t i0,
                                                           int64_t i1) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    const float *x = (const float *)p->x;
    float *y = (float *)p->y;
    for (int64_t i = i0; i < i1; i += w) {
        int64_t m = i1 - i < w ? i1 - i : w;
        OLC_FN(olc_st_f32_part)(y + i, m, OLC_FN(olc_msact_quick)(
            OLC_FN(olc_ld_f32_part)(x + i, m), p->alpha));
    }
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_quick_gelu_f16)(const olc_msact_args *p, int64_t i0,
                                                           int64_t i1) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    const uint16_t *x = (const uint16_t *)p->x;
    uint16_t *y = (uint16_t *)p->y;
    for (int64_t i = i0; i < i1; i += w) {
        int64_t m = i1 - i < w ? i1 - i : w;
        OLC_FN(olc_st_f16_part)(y + i, m, OLC_FN(olc_msact_quick)(
            OLC_FN(olc_ld_f16_part)(x + i, m), p->alpha));
    }
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_quick_gelu_bf16)(const olc_msact_args *p, int64_t i0,
                                                            int64_t i1) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    const uint16_t *x = (const uint16_t *)p->x;
    uint16_t *y = (uint16_t *)p->y;
    for (int64_t i = i0; i < i1; i += w) {
        int64_t m = i1 - i < w ? i1 - i : w;
        OLC_FN(olc_st_bf16_part)(y + i, m, OLC_FN(olc_msact_quick)(
            OLC_FN(olc_ld_bf16_part)(x + i, m), p->alpha));
    }
}
