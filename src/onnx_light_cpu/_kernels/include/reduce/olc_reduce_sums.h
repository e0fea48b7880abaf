/* The block and column sums of one level (a body file: see
 * common/olc_level.h), written once and compiled per level so that the
 * compiler vectorises them with that level's registers (across the lanes
 * of a block or the columns, never reassociating one sum).  float32 block
 * sums have hand-written loops in olc_reduce.h. */

/* 64 float16 / bfloat16 values as float32. */
static inline OLC_LVL_ATTR void OLC_FN(olc_widen64_f16)(const uint16_t *p, float *f) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    for (int64_t j = 0; j < OLC_SUM_LANES; j += w) OLC_FN(olc_st_f32_part)(f + j, w, OLC_FN(olc_ld_f16_part)(p + j, w));
}
static inline OLC_LVL_ATTR void OLC_FN(olc_widen64_bf16)(const uint16_t *p, float *f) {
    const int64_t w = (int64_t)(sizeof(OLC_FN(olc_vf)) / sizeof(float));
    for (int64_t j = 0; j < OLC_SUM_LANES; j += w) OLC_FN(olc_st_f32_part)(f + j, w, OLC_FN(olc_ld_bf16_part)(p + j, w));
}

/* Block sum of n 16-bit floats in the lanes of olc_reduce.h: element i
 * goes to lane i % 64 in float32, then the lanes fold in a fixed tree.
 * Always inlined with constant widen and load. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR double OLC_FN(olc_bsum_half)(
    void (*widen64)(const uint16_t *, float *), float (*load)(uint16_t), const uint16_t *x, int64_t n) {
    float acc[OLC_SUM_LANES] = {0};
    float tmp[OLC_SUM_LANES];
    int64_t i = 0;
    for (; i + OLC_SUM_LANES <= n; i += OLC_SUM_LANES) {
        widen64(x + i, tmp);
        for (int j = 0; j < OLC_SUM_LANES; ++j) acc[j] += tmp[j];
    }
    for (int j = 0; i + j < n; ++j) acc[j] += load(x[i + j]);
    for (int w = OLC_SUM_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return (double)acc[0];
}
OLC_LVL_ATTR static double OLC_FN(olc_bsum_f16)(const void *x, int64_t n) {
    return OLC_FN(olc_bsum_half)(OLC_FN(olc_widen64_f16), olc_h2f, (const uint16_t *)x, n);
}
OLC_LVL_ATTR static double OLC_FN(olc_bsum_bf16)(const void *x, int64_t n) {
    return OLC_FN(olc_bsum_half)(OLC_FN(olc_widen64_bf16), olc_bf2f, (const uint16_t *)x, n);
}

/* float64: 16 lanes. */
OLC_LVL_ATTR static double OLC_FN(olc_bsum_f64)(const void *px, int64_t n) {
    const double *x = (const double *)px;
    double acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
    for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return acc[0];
}

/* Column sums out[b0:b1] of an [R, B] block, row after row. */
OLC_LVL_ATTR static void OLC_FN(olc_csum_f32)(const void *px, void *po, int64_t R, int64_t B,
                                              int64_t b0, int64_t b1) {
    const float *x = (const float *)px;
    float *out = (float *)po;
    for (int64_t b = b0; b < b1; ++b) out[b] = R > 0 ? x[b] : 0.0f;
    for (int64_t r = 1; r < R; ++r) {
        const float *row = x + r * B;
        for (int64_t b = b0; b < b1; ++b) out[b] += row[b];
    }
}
OLC_LVL_ATTR static void OLC_FN(olc_csum_f64)(const void *px, void *po, int64_t R, int64_t B,
                                              int64_t b0, int64_t b1) {
    const double *x = (const double *)px;
    double *out = (double *)po;
    for (int64_t b = b0; b < b1; ++b) out[b] = R > 0 ? x[b] : 0.0;
    for (int64_t r = 1; r < R; ++r) {
        const double *row = x + r * B;
        for (int64_t b = b0; b < b1; ++b) out[b] += row[b];
    }
}

/* 16-bit floats: float32 accumulators of OLC_COL_BLOCK columns on the
 * stack, rounded once at the end.  Always inlined with constant load and
 * store. */
static inline OLC_ALWAYS_INLINE OLC_LVL_ATTR void OLC_FN(olc_csum_half)(
    float (*load)(uint16_t), uint16_t (*store)(float), const uint16_t *x, uint16_t *out, int64_t R,
    int64_t B, int64_t b0, int64_t b1) {
    float acc[OLC_COL_BLOCK];
    for (int64_t c0 = b0; c0 < b1; c0 += OLC_COL_BLOCK) {
        int64_t m = b1 - c0 < OLC_COL_BLOCK ? b1 - c0 : OLC_COL_BLOCK;
        for (int64_t b = 0; b < m; ++b) acc[b] = 0.0f;
        for (int64_t r = 0; r < R; ++r) {
            const uint16_t *row = x + r * B + c0;
            for (int64_t b = 0; b < m; ++b) acc[b] += load(row[b]);
        }
        for (int64_t b = 0; b < m; ++b) out[c0 + b] = store(acc[b]);
    }
}
OLC_LVL_ATTR static void OLC_FN(olc_csum_f16)(const void *x, void *out, int64_t R, int64_t B,
                                              int64_t b0, int64_t b1) {
    OLC_FN(olc_csum_half)(olc_h2f, olc_f2h, (const uint16_t *)x, (uint16_t *)out, R, B, b0, b1);
}
OLC_LVL_ATTR static void OLC_FN(olc_csum_bf16)(const void *x, void *out, int64_t R, int64_t B,
                                               int64_t b0, int64_t b1) {
    OLC_FN(olc_csum_half)(olc_bf2f, olc_f2bf, (const uint16_t *)x, (uint16_t *)out, R, B, b0, b1);
}
