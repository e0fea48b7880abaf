/* Reciprocal and Gelu array loops at one level (a body file: see
 * common/olc_level.h), built like common/olc_math_loops.h: the level's
 * olc_math_map_<type> runs one vector function (defined per level in
 * unary/olc_unary.h) over the array, tails included, so that an element's
 * result does not depend on its position.  float16 and bfloat16 are
 * computed in float32 and rounded once at the store. */

OLC_LVL_ATTR static void OLC_FN(olc_reciprocal_f32)(const float *x, float *y, int64_t n) {
    OLC_FN(olc_math_map_f32)(OLC_FN(olc_reciprocal_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_reciprocal_f16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_f16)(OLC_FN(olc_reciprocal_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_reciprocal_bf16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_bf16)(OLC_FN(olc_reciprocal_ps), x, y, n);
}
/* IEEE division: the compiler vectorises it without changing a bit. */
OLC_LVL_ATTR static void OLC_FN(olc_reciprocal_f64)(const double *x, double *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 1.0 / x[i];
}

OLC_LVL_ATTR static void OLC_FN(olc_gelu_f32)(const float *x, float *y, int64_t n) {
    OLC_FN(olc_math_map_f32)(OLC_FN(olc_gelu_erf_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_gelu_f16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_f16)(OLC_FN(olc_gelu_erf_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_gelu_bf16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_bf16)(OLC_FN(olc_gelu_erf_ps), x, y, n);
}

OLC_LVL_ATTR static void OLC_FN(olc_gelu_tanh_f32)(const float *x, float *y, int64_t n) {
    OLC_FN(olc_math_map_f32)(OLC_FN(olc_gelu_tanh_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_gelu_tanh_f16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_f16)(OLC_FN(olc_gelu_tanh_ps), x, y, n);
}
OLC_LVL_ATTR static void OLC_FN(olc_gelu_tanh_bf16)(const uint16_t *x, uint16_t *y, int64_t n) {
    OLC_FN(olc_math_map_bf16)(OLC_FN(olc_gelu_tanh_ps), x, y, n);
}
