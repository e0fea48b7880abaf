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

/* y = (x * Sigmoid(x)) * u, or x * Sigmoid(x) where u is NULL: the SiLU
 * gate of Llama and Qwen MLPs (Sigmoid, Mul, Mul) in one pass, for the run
 * plan's fusion (registry/conv_chains.py, SiluGate).  Each step gives its
 * node's bits: Sigmoid as olc_sigmoid_f32, each product rounded once, a
 * NaN left operand kept as the Mul kernel keeps it. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR OLC_FN(olc_vf)
OLC_FN(olc_silu_gate_step)(const float *x, const float *u, int64_t i, int64_t k) {
    OLC_FN(olc_vf) v = OLC_FN(olc_ld_f32_part)(x + i, k);
    OLC_FN(olc_vf) g = OLC_FN(olc_mul_left_nan_ps)(v, OLC_FN(olc_sigmoid_ps)(v));
    return u != NULL ? OLC_FN(olc_mul_left_nan_ps)(g, OLC_FN(olc_ld_f32_part)(u + i, k)) : g;
}

OLC_LVL_ATTR static void OLC_FN(olc_silu_gate_f32)(const float *x, const float *u, float *y,
                                                   int64_t n) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    int64_t i = 0;
    for (; i + w <= n; i += w) OLC_FN(olc_st_f32_part)(y + i, w, OLC_FN(olc_silu_gate_step)(x, u, i, w));
    if (i < n) OLC_FN(olc_st_f32_part)(y + i, n - i, OLC_FN(olc_silu_gate_step)(x, u, i, n - i));
}
