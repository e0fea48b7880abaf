/* Row loops of the quantization family in plain C, compiled once per level
 * (common/olc_level.h) for the compiler to vectorise them: included by
 * olc_quantization.h for scalar, avx2 and avx512.  No fused multiply-add
 * anywhere: ONNX Runtime rounds each product before adding. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")

/* The smallest and largest of x[0..n), NaN skipped (both stay +inf/-inf
 * when every element is NaN), one by one: the tail of olc_q_minmax. */
OLC_LVL_ATTR static void OLC_FN(olc_q_minmax_plain)(const float *x, int64_t n, float *lo,
                                                   float *hi) {
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    *lo = mn;
    *hi = mx;
}

/* The smallest and largest of x[0..n), NaN skipped: whole vectors with the
 * level's olc_q_vmin/olc_q_vmax (x first: NaN keeps the running value),
 * then the tail and the lanes as olc_q_minmax_plain (a vector is one float
 * at the scalar level). */
OLC_LVL_ATTR static void OLC_FN(olc_q_minmax)(const float *x, int64_t n, float *lo, float *hi) {
    enum { W = sizeof(OLC_FN(olc_vf)) / sizeof(float) };
    const OLC_FN(olc_vf) zero = {0};
    OLC_FN(olc_vf) mn = zero + INFINITY, mx = zero - INFINITY;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        const OLC_FN(olc_vf) v = OLC_FN(olc_ld_f32_part)(x + i, W);
        mn = OLC_FN(olc_q_vmin)(v, mn);
        mx = OLC_FN(olc_q_vmax)(v, mx);
    }
    float l[W], h[W];
    memcpy(l, &mn, sizeof mn);
    memcpy(h, &mx, sizeof mx);
    OLC_FN(olc_q_minmax_plain)(x + i, n - i, lo, hi);
    for (int j = 0; j < W; j++) {
        *lo = l[j] < *lo ? l[j] : *lo;
        *hi = h[j] > *hi ? h[j] : *hi;
    }
}

/* q = saturate(round_half_even(x / scale) + zp) into [qmin, qmax] (an
 * 8-bit type, written as bytes: an int8 result is stored as its two's
 * complement byte): the quotient is clamped to [qmin - zp, qmax - zp]
 * first (a NaN quotient becomes qmin - zp, so q = qmin, as MLAS' maxps
 * does), then adding and subtracting 1.5 * 2^23 rounds it, ties to even. */
OLC_LVL_ATTR static void OLC_FN(olc_q_quantize_8)(const float *x, int64_t n, float scale,
                                                 int32_t zp, int32_t qmin, int32_t qmax,
                                                 uint8_t *q) {
    const float lo = (float)(qmin - zp), hi = (float)(qmax - zp), magic = 12582912.0f;
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] / scale;
        v = v > lo ? v : lo; /* NaN -> lo */
        v = v < hi ? v : hi;
        v = (v + magic) - magic;
        q[i] = (uint8_t)((int32_t)v + zp);
    }
}

/* y = (float)c * m + bias for one row of n columns; m is one value (mcs 0)
 * or one per column (mcs 1); bias one per column or NULL.  y may be c
 * itself (a tile converted in place): each element is read before it is
 * written, so the loops carry no dependence (ivdep). */
OLC_LVL_ATTR static void OLC_FN(olc_q_scale_row)(const int32_t *c, int64_t n, const float *m,
                                                int64_t mcs, const float *bias, float *y) {
    const float m0 = m[0];
    if (bias == NULL) {
        if (mcs) {
#pragma GCC ivdep
            for (int64_t i = 0; i < n; i++) y[i] = (float)c[i] * m[i];
        } else {
#pragma GCC ivdep
            for (int64_t i = 0; i < n; i++) y[i] = (float)c[i] * m0;
        }
    } else if (mcs) {
#pragma GCC ivdep
        for (int64_t i = 0; i < n; i++) y[i] = (float)c[i] * m[i] + bias[i];
    } else {
#pragma GCC ivdep
        for (int64_t i = 0; i < n; i++) y[i] = (float)c[i] * m0 + bias[i];
    }
}

/* The 8-bit result of a float: rounded half to even, out-of-range and NaN
 * values as cvtps2dq gives them (INT32_MIN), then saturated (packs). */
static inline int32_t OLC_FN(olc_q_sat8)(float v, int is_signed) {
    const int32_t lo = is_signed ? -128 : 0, hi = is_signed ? 127 : 255;
    int32_t r = v > -2147483648.0f && v < 2147483648.0f ? (int32_t)nearbyintf(v) : INT32_MIN;
    return r < lo ? lo : r > hi ? hi : r;
}

/* QLinearAdd as MLAS' AVX2 kernel computes it, its fused multiply-adds
 * included: mode 0 v = fma(x, rxc, fma(y, ryc, fixed)), mode 1 (a span of
 * one element, which MLAS takes as a scalar x) v = fma(y, ryc, fma(x, rxc,
 * fixed)).  Elements are int8 or uint8 (is_signed) read from bytes. */
OLC_LVL_ATTR static void OLC_FN(olc_q_add_8)(const uint8_t *x, const uint8_t *y, int64_t n,
                                            int mode, int is_signed, float rxc, float ryc,
                                            float fixed, uint8_t *out) {
    for (int64_t i = 0; i < n; i++) {
        const float fx = is_signed ? (float)(int8_t)x[i] : (float)x[i];
        const float fy = is_signed ? (float)(int8_t)y[i] : (float)y[i];
        const float v = mode == 1 ? fmaf(fy, ryc, fmaf(fx, rxc, fixed))
                                  : fmaf(fx, rxc, fmaf(fy, ryc, fixed));
        out[i] = (uint8_t)OLC_FN(olc_q_sat8)(v, is_signed);
    }
}

/* QLinearMul as MLAS computes it: the int32 product of the shifted values
 * rounded to float, times the ratio, plus zc (two roundings), then rounded
 * half to even and saturated. */
OLC_LVL_ATTR static void OLC_FN(olc_q_mul_8)(const uint8_t *a, const uint8_t *b, int64_t n,
                                            int is_signed, int32_t za, int32_t zb, float zc,
                                            float ratio, uint8_t *y) {
    for (int64_t i = 0; i < n; i++) {
        const int32_t ia = (is_signed ? (int32_t)(int8_t)a[i] : (int32_t)a[i]) - za;
        const int32_t ib = (is_signed ? (int32_t)(int8_t)b[i] : (int32_t)b[i]) - zb;
        const float v = (float)(ia * ib) * ratio + zc;
        y[i] = (uint8_t)OLC_FN(olc_q_sat8)(v, is_signed);
    }
}

#pragma GCC pop_options
