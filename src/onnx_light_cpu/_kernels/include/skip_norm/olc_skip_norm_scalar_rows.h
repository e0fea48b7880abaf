/* The scalar twin olc_sn_<norm>_<type>_scalar of one element type
 * (OLC_SN_TN) and norm (OLC_SN_SIMPLE 0: LayerNorm, 1: RMS), one loop per
 * pass over the whole row.  Included by olc_skip_norm_scalar.h; no include
 * guard. */

OLC_LVL_ATTR static void OLC_SN_FN(olc_sn)(const olc_sn_args *a, int64_t r0, int64_t r1) {
    const int64_t H = a->H;
    const OLC_SN_T *g = (const OLC_SN_T *)a->gamma, *be = (const OLC_SN_T *)a->beta,
                   *bi = (const OLC_SN_T *)a->bias;
    for (int64_t r = r0; r < r1; ++r) {
        const OLC_SN_T *x = (const OLC_SN_T *)a->x + r * H;
        const OLC_SN_T *s = (const OLC_SN_T *)a->skip + (r % a->skip_rows) * H;
        OLC_SN_T *y = (OLC_SN_T *)a->y + r * H;
        OLC_SN_T *keep = a->sum ? (OLC_SN_T *)a->sum + r * H : (OLC_SN_F32 ? y : (OLC_SN_T *)0);
        float acc = 0.0f, mean = 0.0f, inv;
        /* pass 1: v = x + s (+ bias), kept; sum(v) or sum(v * v) */
        for (int64_t i = 0; i < H; ++i) {
            float v = bi ? OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i) + OLC_SN_LDF(bi + i)
                         : OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i);
            if (keep) OLC_SN_STF(keep + i, v);
            acc += OLC_SN_SIMPLE ? v * v : v;
        }
        if (OLC_SN_SIMPLE) {
            inv = olc_sn_inv_(acc, H, a->eps);
        } else {
            mean = acc / (float)H;
            /* pass 2: the deviations from the first-pass mean also sum to
             * that mean's rounding error, which is added back (the
             * sequential float32 sum of a long row of large values is off
             * by many ulps of the spread) */
            float dsum = 0.0f, dsq = 0.0f;
            for (int64_t i = 0; i < H; ++i) {
                float d = (OLC_SN_F32 ? OLC_SN_LDF(keep + i)
                           : bi ? OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i) + OLC_SN_LDF(bi + i)
                                : OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i)) - mean;
                dsum += d;
                dsq += d * d;
            }
            {
                float shift = dsum / (float)H;
                mean += shift;
                float var = dsq / (float)H - shift * shift;
                inv = 1.0f / sqrtf((var < 0.0f ? 0.0f : var) + a->eps); /* NaN stays */
            }
        }
        /* pass 3: y = (v - mean) * inv * gamma (+ beta) */
        for (int64_t i = 0; i < H; ++i) {
            float v = OLC_SN_F32 ? OLC_SN_LDF(keep + i)
                    : bi ? OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i) + OLC_SN_LDF(bi + i)
                         : OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i);
            float t = OLC_SN_SIMPLE ? v * inv : (v - mean) * inv;
            float o = t * OLC_SN_LDF(g + i);
            if (be) o += OLC_SN_LDF(be + i);
            OLC_SN_STF(y + i, o);
        }
        if (a->mean) a->mean[r] = OLC_SN_SIMPLE ? 0.0f : mean;
        if (a->inv) a->inv[r] = inv;
    }
}
