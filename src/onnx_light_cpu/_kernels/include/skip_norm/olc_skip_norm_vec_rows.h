/* The vector rows olc_sn_<norm>_<type>_<level> of one element type
 * (OLC_SN_TN) and norm (OLC_SN_SIMPLE 0: LayerNorm, 1: RMS) at a vector
 * level: OLC_SN_W lanes a vector, two accumulators, then the tail after the
 * last whole vector in scalar code, as olc_skip_norm_scalar_rows.h.
 * Included by olc_skip_norm_vec.h; no include guard. */

OLC_LVL_ATTR static void OLC_SN_FN(olc_sn)(const olc_sn_args *a, int64_t r0, int64_t r1) {
    const int64_t H = a->H, hv = H - H % OLC_SN_W;
    const OLC_SN_T *g = (const OLC_SN_T *)a->gamma, *be = (const OLC_SN_T *)a->beta,
                   *bi = (const OLC_SN_T *)a->bias;
    for (int64_t r = r0; r < r1; ++r) {
        const OLC_SN_T *x = (const OLC_SN_T *)a->x + r * H;
        const OLC_SN_T *s = (const OLC_SN_T *)a->skip + (r % a->skip_rows) * H;
        OLC_SN_T *y = (OLC_SN_T *)a->y + r * H;
        OLC_SN_T *keep = a->sum ? (OLC_SN_T *)a->sum + r * H : (OLC_SN_F32 ? y : (OLC_SN_T *)0);
        /* pass 1: v = x + s (+ bias), kept; sum(v) or sum(v * v) */
        OLC_SN_VT acc0 = OLC_SN_VZERO(), acc1 = OLC_SN_VZERO();
        int64_t i = 0;
        for (; i + 2 * OLC_SN_W <= hv; i += 2 * OLC_SN_W) {
            OLC_SN_VT v0 = OLC_SN_VSUM(i);
            OLC_SN_VT v1 = OLC_SN_VSUM(i + OLC_SN_W);
            if (keep) {
                OLC_SN_VST(keep + i, v0);
                OLC_SN_VST(keep + i + OLC_SN_W, v1);
            }
            if (OLC_SN_SIMPLE) {
                acc0 = OLC_SN_VFMA(v0, v0, acc0);
                acc1 = OLC_SN_VFMA(v1, v1, acc1);
            } else {
                acc0 = OLC_SN_VADD(acc0, v0);
                acc1 = OLC_SN_VADD(acc1, v1);
            }
        }
        for (; i < hv; i += OLC_SN_W) {
            OLC_SN_VT v0 = OLC_SN_VSUM(i);
            if (keep) OLC_SN_VST(keep + i, v0);
            acc0 = OLC_SN_SIMPLE ? OLC_SN_VFMA(v0, v0, acc0) : OLC_SN_VADD(acc0, v0);
        }
        float tail = 0.0f, mean = 0.0f, inv;
        for (int64_t i = hv; i < H; ++i) {
            float v = bi ? OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i) + OLC_SN_LDF(bi + i)
                         : OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i);
            if (keep) OLC_SN_STF(keep + i, v);
            tail += OLC_SN_SIMPLE ? v * v : v;
        }
        float total = OLC_SN_VHSUM(OLC_SN_VADD(acc0, acc1)) + tail;
        if (OLC_SN_SIMPLE) {
            inv = olc_sn_inv_(total, H, a->eps);
        } else {
            /* pass 2: deviations from the first-pass mean, whose sum (that
             * mean's rounding error) is added back */
            mean = total / (float)H;
            OLC_SN_VT vm = OLC_SN_VSET1(mean);
            OLC_SN_VT q0 = OLC_SN_VZERO(), q1 = OLC_SN_VZERO();
            acc0 = acc1 = OLC_SN_VZERO();
            for (i = 0; i + 2 * OLC_SN_W <= hv; i += 2 * OLC_SN_W) {
                OLC_SN_VT d0 = OLC_SN_VSUB(OLC_SN_F32 ? OLC_SN_VLD(keep + i) : OLC_SN_VSUM(i), vm);
                OLC_SN_VT d1 = OLC_SN_VSUB(OLC_SN_F32 ? OLC_SN_VLD(keep + i + OLC_SN_W)
                                                      : OLC_SN_VSUM(i + OLC_SN_W), vm);
                acc0 = OLC_SN_VADD(acc0, d0);
                acc1 = OLC_SN_VADD(acc1, d1);
                q0 = OLC_SN_VFMA(d0, d0, q0);
                q1 = OLC_SN_VFMA(d1, d1, q1);
            }
            for (; i < hv; i += OLC_SN_W) {
                OLC_SN_VT d0 = OLC_SN_VSUB(OLC_SN_F32 ? OLC_SN_VLD(keep + i) : OLC_SN_VSUM(i), vm);
                acc0 = OLC_SN_VADD(acc0, d0);
                q0 = OLC_SN_VFMA(d0, d0, q0);
            }
            float dsum = 0.0f, dsq = 0.0f;
            for (int64_t i = hv; i < H; ++i) {
                float d = (OLC_SN_F32 ? OLC_SN_LDF(keep + i)
                           : bi ? OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i) + OLC_SN_LDF(bi + i)
                                : OLC_SN_LDF(x + i) + OLC_SN_LDF(s + i)) - mean;
                dsum += d;
                dsq += d * d;
            }
            dsum += OLC_SN_VHSUM(OLC_SN_VADD(acc0, acc1));
            dsq += OLC_SN_VHSUM(OLC_SN_VADD(q0, q1));
            {
                float shift = dsum / (float)H;
                mean += shift;
                float var = dsq / (float)H - shift * shift;
                inv = 1.0f / sqrtf((var < 0.0f ? 0.0f : var) + a->eps); /* NaN stays */
            }
        }
        /* pass 3: y = (v - mean) * inv * gamma (+ beta) */
        {
            OLC_SN_VT vi = OLC_SN_VSET1(inv), vm = OLC_SN_VSET1(mean);
            for (i = 0; i < hv; i += OLC_SN_W) {
                OLC_SN_VT v = OLC_SN_F32 ? OLC_SN_VLD(keep + i) : OLC_SN_VSUM(i);
                OLC_SN_VT t = OLC_SN_SIMPLE ? OLC_SN_VMUL(v, vi) : OLC_SN_VMUL(OLC_SN_VSUB(v, vm), vi);
                OLC_SN_VT gv = OLC_SN_VLD(g + i);
                OLC_SN_VT o = be ? OLC_SN_VFMA(t, gv, OLC_SN_VLD(be + i)) : OLC_SN_VMUL(t, gv);
                OLC_SN_VST(y + i, o);
            }
        }
        for (int64_t i = hv; i < H; ++i) {
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
