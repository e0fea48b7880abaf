/* Body (no include guard): olc_conv_epilogue's rows at one level;
 * olc_conv.h includes it once per level (common/olc_each_level.h).  The
 * bias, the residual and the piecewise-linear activations in one pass over
 * each row, which the compiler vectorises at the level's width; each element
 * takes the same operations in the same order at every level (y + bias,
 * + z, then the activation: no product feeds an add, so nothing can be
 * fused into an FMA).  The other activations go through olc_conv_act. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_conv_epilogue_row)(
        float *restrict y, const float *restrict z, int64_t cols, int has_bias, float bv,
        int act, float a, float b) {
    for (int64_t j = 0; j < cols; ++j) {
        float v = y[j];
        if (has_bias) v += bv;
        if (z != NULL) v += z[j];
        if (act == OLC_CONV_RELU) v = v < 0.0f ? 0.0f : v;
        else if (act == OLC_CONV_CLIP) v = v < a ? a : (v > b ? b : v);
        else if (act == OLC_CONV_LEAKY) v = v >= 0.0f ? v : a * v;
        y[j] = v;
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_conv_epilogue_rows)(
        float *y, const float *z, int64_t ld, int64_t rows, int64_t cols, const float *bias,
        int act, float a, float b) {
    for (int64_t r = 0; r < rows; ++r) {
        float *yr = y + r * ld;
        const float *zr = z != NULL ? z + r * ld : NULL;
        const int has_bias = bias != NULL;
        const float bv = has_bias ? bias[r] : 0.0f;
        /* one pass an element, the activation a constant in each loop */
        if (act == OLC_CONV_RELU) {
            OLC_FN(olc_conv_epilogue_row)(yr, zr, cols, has_bias, bv, OLC_CONV_RELU, a, b);
        } else if (act == OLC_CONV_CLIP) {
            OLC_FN(olc_conv_epilogue_row)(yr, zr, cols, has_bias, bv, OLC_CONV_CLIP, a, b);
        } else if (act == OLC_CONV_LEAKY) {
            OLC_FN(olc_conv_epilogue_row)(yr, zr, cols, has_bias, bv, OLC_CONV_LEAKY, a, b);
        } else {  /* none, or one of the others by olc_conv_act after */
            OLC_FN(olc_conv_epilogue_row)(yr, zr, cols, has_bias, bv, OLC_CONV_NONE, a, b);
            if (act != OLC_CONV_NONE)
                for (int64_t j = 0; j < cols; ++j) yr[j] = olc_conv_act(yr[j], act, a, b);
        }
    }
}
