/* Body (no include guard): the plain loops of one level, written so that
 * the compiler vectorises them with that level's registers.  olc_moe.h
 * includes it once per level (OLC_LVL, OLC_LVL_ATTR: common/olc_level.h;
 * OLC_MOE_NR: the level's GEMM panel width). */

/* dst[k][c] = code[k][c] * scale for the panel of output columns n0..n0+NR
 * and input rows pc..pc+kc (the panel width fixed, so that the loop over c
 * fills whole vectors). */
OLC_LVL_ATTR static void OLC_FN(olc_moe_decode)(const int8_t *codes, const float *scales,
                                                int64_t pc, int64_t kc, int64_t n0,
                                                const olc_moe_proj *p, float *dst) {
    if (p->scale_mode == OLC_MOE_SCALE_OUT) {
        const float *sp = scales + (n0 / OLC_MOE_NR) * p->ngs * OLC_MOE_NR;
        for (int64_t k = 0; k < kc; ++k) {
            const float *s = sp + ((pc + k) >> p->shift) * OLC_MOE_NR;
            const int8_t *q = codes + k * OLC_MOE_NR;
            float *d = dst + k * OLC_MOE_NR;
            for (int c = 0; c < OLC_MOE_NR; ++c) d[c] = (float)q[c] * s[c];
        }
    } else {
        for (int64_t k = 0; k < kc; ++k) {
            const float *s = scales + (pc + k) * p->ngs;
            const int8_t *q = codes + k * OLC_MOE_NR;
            float *d = dst + k * OLC_MOE_NR;
            for (int c = 0; c < OLC_MOE_NR; ++c) d[c] = (float)q[c] * s[(n0 + c) >> p->shift];
        }
    }
}

/* The scatter of one row: out[i] += w * (y[i] + b[i]) (b NULL: w * y[i]). */
OLC_LVL_ATTR static void OLC_FN(olc_moe_axpy)(float *out, const float *y, const float *b, float w,
                                              int64_t n) {
    if (b != NULL)
        for (int64_t i = 0; i < n; ++i) out[i] += w * (y[i] + b[i]);
    else
        for (int64_t i = 0; i < n; ++i) out[i] += w * y[i];
}
