/* Body (no include guard): olc_conv_epilogue's rows at one level;
 * olc_conv.h includes it once per level (common/olc_each_level.h).  The
 * bias, the residual and the piecewise-linear activations in one pass over
 * each row, which the compiler vectorises at the level's width; each element
 * takes the same operations in the same order at every level (y + bias,
 * + z, then the activation: no product feeds an add, so nothing can be
 * fused into an FMA).  The other activations go through olc_conv_act. */
OLC_LVL_ATTR static void OLC_FN(olc_conv_epilogue_rows)(
        float *y, const float *z, int64_t ld, int64_t rows, int64_t cols, const float *bias,
        int act, float a, float b) {
    const int plain = act == OLC_CONV_NONE || act == OLC_CONV_RELU || act == OLC_CONV_CLIP
                      || act == OLC_CONV_LEAKY;
    for (int64_t r = 0; r < rows; ++r) {
        float *restrict yr = y + r * ld;
        const float *restrict zr = z != NULL ? z + r * ld : NULL;
        const int has_bias = bias != NULL;
        const float bv = has_bias ? bias[r] : 0.0f;
        if (plain && zr == NULL && has_bias) {  /* the usual FusedConv / Conv + bias */
            if (act == OLC_CONV_CLIP) {
                for (int64_t j = 0; j < cols; ++j) {
                    float v = yr[j] + bv;
                    yr[j] = v < a ? a : (v > b ? b : v);
                }
            } else if (act == OLC_CONV_RELU) {
                for (int64_t j = 0; j < cols; ++j) {
                    float v = yr[j] + bv;
                    yr[j] = v < 0.0f ? 0.0f : v;
                }
            } else if (act == OLC_CONV_LEAKY) {
                for (int64_t j = 0; j < cols; ++j) {
                    float v = yr[j] + bv;
                    yr[j] = v >= 0.0f ? v : a * v;
                }
            } else {
                for (int64_t j = 0; j < cols; ++j) yr[j] += bv;
            }
            continue;
        }
        if (has_bias)
            for (int64_t j = 0; j < cols; ++j) yr[j] += bv;
        if (zr != NULL)
            for (int64_t j = 0; j < cols; ++j) yr[j] += zr[j];
        if (act == OLC_CONV_RELU) {
            for (int64_t j = 0; j < cols; ++j) yr[j] = yr[j] < 0.0f ? 0.0f : yr[j];
        } else if (act == OLC_CONV_CLIP) {
            for (int64_t j = 0; j < cols; ++j) yr[j] = yr[j] < a ? a : (yr[j] > b ? b : yr[j]);
        } else if (act == OLC_CONV_LEAKY) {
            for (int64_t j = 0; j < cols; ++j) yr[j] = yr[j] >= 0.0f ? yr[j] : a * yr[j];
        } else if (act != OLC_CONV_NONE) {
            for (int64_t j = 0; j < cols; ++j) yr[j] = olc_conv_act(yr[j], act, a, b);
        }
    }
}
