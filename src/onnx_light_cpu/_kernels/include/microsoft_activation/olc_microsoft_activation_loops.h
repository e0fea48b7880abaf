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
/* x sigmoid(alpha x) = x / (1 + e^(-alpha x)) for one vector (one exp
 * and one division: common/olc_math.h's onepexp). */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_FN(olc_vf) OLC_FN(olc_msact_quick)(
    OLC_FN(olc_vf) x, float alpha) {
    return x / OLC_FN(olc_onepexp_ps)(x * -alpha);
}

/* Loads and stores of the first m elements of x + i, an array of type t
 * (OLC_FLOAT, OLC_FLOAT16 or OLC_BFLOAT16).  Always inlined with a
 * constant t, so each typed loop below keeps only its own load and store. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_FN(olc_vf) OLC_FN(olc_msact_ld)(
    const void *x, int64_t i, int64_t m, int t) {
    if (t == OLC_FLOAT) return OLC_FN(olc_ld_f32_part)((const float *)x + i, m);
    if (t == OLC_FLOAT16) return OLC_FN(olc_ld_f16_part)((const uint16_t *)x + i, m);
    return OLC_FN(olc_ld_bf16_part)((const uint16_t *)x + i, m);
}
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_msact_st)(
    void *y, int64_t i, int64_t m, OLC_FN(olc_vf) v, int t) {
    if (t == OLC_FLOAT) OLC_FN(olc_st_f32_part)((float *)y + i, m, v);
    else if (t == OLC_FLOAT16) OLC_FN(olc_st_f16_part)((uint16_t *)y + i, m, v);
    else OLC_FN(olc_st_bf16_part)((uint16_t *)y + i, m, v);
}

/* FastGelu over rows [r0, r1) of n elements of type t, the bias repeated
 * per row. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_msact_fast_gelu)(
    const olc_msact_args *p, int64_t r0, int64_t r1, int t) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float)), n = p->n;
    for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; j += w) {
            int64_t m = n - j < w ? n - j : w;
            OLC_FN(olc_msact_st)(p->y, r * n + j, m, OLC_FN(olc_msact_fast)(
                OLC_FN(olc_msact_ld)(p->x, r * n + j, m, t),
                OLC_FN(olc_msact_ld)(p->bias, j, m, t)), t);
        }
}
/* QuickGelu over elements [i0, i1) of type t. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_msact_quick_gelu)(
    const olc_msact_args *p, int64_t i0, int64_t i1, int t) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    for (int64_t i = i0; i < i1; i += w) {
        int64_t m = i1 - i < w ? i1 - i : w;
        OLC_FN(olc_msact_st)(p->y, i, m, OLC_FN(olc_msact_quick)(
            OLC_FN(olc_msact_ld)(p->x, i, m, t), p->alpha), t);
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_msact_fast_gelu_f32)(const olc_msact_args *p, int64_t r0,
                                                          int64_t r1) {
    OLC_FN(olc_msact_fast_gelu)(p, r0, r1, OLC_FLOAT);
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_fast_gelu_f16)(const olc_msact_args *p, int64_t r0,
                                                          int64_t r1) {
    OLC_FN(olc_msact_fast_gelu)(p, r0, r1, OLC_FLOAT16);
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_fast_gelu_bf16)(const olc_msact_args *p, int64_t r0,
                                                           int64_t r1) {
    OLC_FN(olc_msact_fast_gelu)(p, r0, r1, OLC_BFLOAT16);
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_quick_gelu_f32)(const olc_msact_args *p, int64_t i0,
                                                           int64_t i1) {
    OLC_FN(olc_msact_quick_gelu)(p, i0, i1, OLC_FLOAT);
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_quick_gelu_f16)(const olc_msact_args *p, int64_t i0,
                                                           int64_t i1) {
    OLC_FN(olc_msact_quick_gelu)(p, i0, i1, OLC_FLOAT16);
}
OLC_LVL_ATTR static void OLC_FN(olc_msact_quick_gelu_bf16)(const olc_msact_args *p, int64_t i0,
                                                            int64_t i1) {
    OLC_FN(olc_msact_quick_gelu)(p, i0, i1, OLC_BFLOAT16);
}
