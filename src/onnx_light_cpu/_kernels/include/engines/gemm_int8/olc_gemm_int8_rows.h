/* Row loops of the int8 engine in plain C, compiled once per level (see
 * common/olc_level.h) for the compiler to vectorise them with that level's
 * registers: included by olc_gemm_int8.h for scalar, avx2 and avx512. */

/* One tile's results with the zero-point terms folded in (unsigned: wraps
 * like int32 sums). */
OLC_LVL_ATTR static void OLC_FN(olc_i8_epilogue)(const int32_t *restrict acc, int64_t rows,
                                                 int64_t cols, const uint32_t *restrict u,
                                                 const uint32_t *restrict w,
                                                 const uint32_t *restrict zb,
                                                 const uint32_t *restrict cs,
                                                 int32_t *restrict y, int64_t ldy) {
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *restrict a = (const uint32_t *)acc + r * OLC_I8_LDACC;
        uint32_t *restrict out = (uint32_t *)y + r * ldy;
        const uint32_t ur = u[r], wr = w[r];
        for (int64_t c = 0; c < cols; c++) out[c] = a[c] - zb[c] * ur - wr * cs[c];
    }
}

/* y = saturate(round_half_even(c * mult + zp)) as int8/uint8, in double as
 * the reference does it; mult is one value (mcs 0) or one per column (mcs
 * 1).  Adding and subtracting 1.5 * 2^52 rounds to the nearest integer,
 * ties to even, for |x| < 2^51 (the value is clamped first); NaN gives 0 as
 * NumPy's cast does on x86.  No fused multiply-add: the reference rounds
 * c * mult, then adds zp. */
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
OLC_LVL_ATTR static void OLC_FN(olc_i8_requant_row)(const int32_t *c, int64_t n,
                                                    const double *m, int64_t mcs, double zp,
                                                    int out_signed, void *y) {
    const double lo = out_signed ? -128.0 : 0.0, hi = out_signed ? 127.0 : 255.0;
    const double magic = 6755399441055744.0, m0 = m[0];
    int8_t *ys = (int8_t *)y;
    uint8_t *yu = (uint8_t *)y;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)c[i] * (mcs ? m[i] : m0) + zp;
        d = d == d ? d : 0.0;
        d = d < lo - 1.0 ? lo - 1.0 : d;
        d = d > hi + 1.0 ? hi + 1.0 : d;
        d = (d + magic) - magic;
        d = d < lo ? lo : d;
        d = d > hi ? hi : d;
        const int32_t v = (int32_t)d;
        if (out_signed)
            ys[i] = (int8_t)v;
        else
            yu[i] = (uint8_t)v;
    }
}

/* The same tile as olc_i8_epilogue, written as float32 (float)y * m +
 * bias: m and bias (or NULL) one value per column of the tile, products
 * rounded before the add (MLAS' output processor). */
OLC_LVL_ATTR static void OLC_FN(olc_i8_epilogue_float)(
    const int32_t *restrict acc, int64_t rows, int64_t cols, const uint32_t *restrict u,
    const uint32_t *restrict w, const uint32_t *restrict zb, const uint32_t *restrict cs,
    const float *restrict m, const float *restrict bias, float *restrict y, int64_t ldy) {
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *restrict a = (const uint32_t *)acc + r * OLC_I8_LDACC;
        float *restrict out = y + r * ldy;
        const uint32_t ur = u[r], wr = w[r];
        if (bias)
            for (int64_t c = 0; c < cols; c++)
                out[c] = (float)(int32_t)(a[c] - zb[c] * ur - wr * cs[c]) * m[c] + bias[c];
        else
            for (int64_t c = 0; c < cols; c++)
                out[c] = (float)(int32_t)(a[c] - zb[c] * ur - wr * cs[c]) * m[c];
    }
}
#pragma GCC pop_options
