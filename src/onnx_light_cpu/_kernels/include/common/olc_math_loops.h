/* The array loops of olc_math.h at one level (a body file: see
 * common/olc_level.h; olc_math.h includes it once per level after the
 * level's pieces: olc_vf_<level>, olc_<op>_ps_<level>, olc_ld_<type>_part_<level>
 * and olc_st_<type>_part_<level>).
 *
 * olc_math_map_<type> runs one op over an array: whole vectors, then the
 * tail as one part vector.  It is always inlined with a constant op, so
 * each olc_<op>_<type> below compiles to its own loop with the op inlined.
 */

static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_math_map_f32)(
    OLC_FN(olc_vf) (*op)(OLC_FN(olc_vf)), const float *x, float *y, int64_t n) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    /* two vectors a step: the long dependency chains of the ops (erf's
     * polynomials and exp) overlap better (Gelu: 10-20 % at AVX2) */
    for (; i + 2 * w <= n; i += 2 * w) {
        OLC_FN(olc_st_f32_part)(y + i, w, op(OLC_FN(olc_ld_f32_part)(x + i, w)));
        OLC_FN(olc_st_f32_part)(y + i + w, w, op(OLC_FN(olc_ld_f32_part)(x + i + w, w)));
    }
    for (; i + w <= n; i += w) OLC_FN(olc_st_f32_part)(y + i, w, op(OLC_FN(olc_ld_f32_part)(x + i, w)));
    if (i < n) OLC_FN(olc_st_f32_part)(y + i, n - i, op(OLC_FN(olc_ld_f32_part)(x + i, n - i)));
}
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_math_map_f16)(
    OLC_FN(olc_vf) (*op)(OLC_FN(olc_vf)), const uint16_t *x, uint16_t *y, int64_t n) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    for (; i + w <= n; i += w) OLC_FN(olc_st_f16_part)(y + i, w, op(OLC_FN(olc_ld_f16_part)(x + i, w)));
    if (i < n) OLC_FN(olc_st_f16_part)(y + i, n - i, op(OLC_FN(olc_ld_f16_part)(x + i, n - i)));
}
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_math_map_bf16)(
    OLC_FN(olc_vf) (*op)(OLC_FN(olc_vf)), const uint16_t *x, uint16_t *y, int64_t n) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    for (; i + w <= n; i += w) OLC_FN(olc_st_bf16_part)(y + i, w, op(OLC_FN(olc_ld_bf16_part)(x + i, w)));
    if (i < n) OLC_FN(olc_st_bf16_part)(y + i, n - i, op(OLC_FN(olc_ld_bf16_part)(x + i, n - i)));
}

OLC_LVL_ATTR static void OLC_FN(olc_exp_f32)(const float *x, float *y, int64_t n) {
    OLC_FN(olc_math_map_f32)(OLC_FN(olc_exp_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_exp_f16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_f16)(OLC_FN(olc_exp_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_exp_bf16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_bf16)(OLC_FN(olc_exp_ps), x, y, n);
}

OLC_LVL_ATTR static void OLC_FN(olc_log_f32)(const float *x, float *y, int64_t n) {
    OLC_FN(olc_math_map_f32)(OLC_FN(olc_log_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_log_f16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_f16)(OLC_FN(olc_log_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_log_bf16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_bf16)(OLC_FN(olc_log_ps), x, y, n);
}

OLC_LVL_ATTR static void OLC_FN(olc_sigmoid_f32)(const float *x, float *y, int64_t n) {
    OLC_FN(olc_math_map_f32)(OLC_FN(olc_sigmoid_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_sigmoid_f16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_f16)(OLC_FN(olc_sigmoid_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_sigmoid_bf16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_bf16)(OLC_FN(olc_sigmoid_ps), x, y, n);
}

OLC_LVL_ATTR static void OLC_FN(olc_tanh_f32)(const float *x, float *y, int64_t n) {
    OLC_FN(olc_math_map_f32)(OLC_FN(olc_tanh_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_tanh_f16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_f16)(OLC_FN(olc_tanh_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_tanh_bf16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_bf16)(OLC_FN(olc_tanh_ps), x, y, n);
}
