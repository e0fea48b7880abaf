/* The attention task and the decode-chunk combine of one level: a body
 * file (common/olc_level.h), included by olc_attention.h once per level
 * with OLC_LVL, OLC_LVL_ATTR and OLC_ATTN_WIDE (1: the level has the wide
 * tile path, OLC_FN(olc_attn_wide_tile)).  It calls the level's helpers
 * OLC_FN(olc_attn_load), _store, _load_scaled, _qk_block, _pv_block,
 * _max, _expsum and _tanh.  No include guard. */

/* dst[d] = code d * scale[d] (float32) for d < n: int8 codes (bits 8) or
 * nibbles of uint8 bytes holding code + 8, low nibble first (bits 4).
 * Plain loops, vectorised by the level's target. */
OLC_LVL_ATTR static void OLC_FN(olc_attn_dequant)(int bits, const void *src, const float *scale,
                                                  float *dst, int64_t n) {
    if (bits == 8) {
        const int8_t *c = (const int8_t *)src;
        for (int64_t d = 0; d < n; ++d) dst[d] = (float)c[d] * scale[d];
    } else {
        const uint8_t *c = (const uint8_t *)src;
        for (int64_t d = 0; d < n / 2; ++d) {
            dst[2 * d] = (float)((int)(c[d] & 15) - 8) * scale[2 * d];
            dst[2 * d + 1] = (float)((int)(c[d] >> 4) - 8) * scale[2 * d + 1];
        }
    }
}

/* Task index -> (b, kv head g, head block, position block, key chunk). */
OLC_LVL_ATTR static void OLC_FN(olc_attn_task)(const olc_attn_args *p, int64_t task, float *scratch) {
    const int64_t Dk = p->Dk, Dv = p->Dv, S = p->S, T = p->T, group = p->Nq / p->Nkv;
    const int64_t es = p->dtype == OLC_FLOAT ? 4 : 2;
    int64_t rest = task;
    const int64_t c = rest % p->nchunks; rest /= p->nchunks;
    const int64_t sblk = rest % p->nsb; rest /= p->nsb;
    const int64_t hblk = rest % p->nhb; rest /= p->nhb;
    const int64_t g = rest % p->Nkv, b = rest / p->Nkv;
    const int64_t h0 = g * group + hblk * p->hb;
    const int64_t nh = (hblk + 1) * p->hb <= group ? p->hb : group - hblk * p->hb;
    const int64_t s0 = sblk * p->sb, ns = s0 + p->sb <= S ? p->sb : S - s0;
    const int64_t R = nh * ns;
    const int64_t c0 = c * p->chunk, c1 = c0 + p->chunk < T ? c0 + p->chunk : T;
    if (p->fuse_copy) olc_attn_copy_rows_(p, b, g, c0, c1);   /* then read it while hot */
    float *qf = scratch, *acc = qf + OLC_ATTN_RMAX * Dk, *mrow = acc + OLC_ATTN_RMAX * Dv;
    float *lrow = mrow + OLC_ATTN_RMAX, *sc = lrow + OLC_ATTN_RMAX;
    float *kbuf = sc + OLC_ATTN_RMAX * OLC_ATTN_WTB + 16, *vbuf = kbuf + OLC_ATTN_WTB * Dk;
    int64_t lo[OLC_ATTN_RMAX], hi[OLC_ATTN_RMAX];
    int64_t ulo = c1, uhi = c0;
    const float qscale = p->scale;
    for (int64_t r = 0; r < R; ++r) {
        const int64_t h = h0 + r / ns, s = s0 + r % ns;
        OLC_FN(olc_attn_load_scaled)(p->dtype, (const char *)p->q +   /* (scale q) . k */
            (b * p->qs[0] + h * p->qs[1] + s * p->qs[2]) * es, qf + r * Dk, Dk, qscale);
        int64_t a = p->kbeg ? p->kbeg[b * S + s] : 0, e = p->kend ? p->kend[b * S + s] : T;
        if (a < c0) a = c0;
        if (e > c1) e = c1;
        lo[r] = a; hi[r] = e;
        if (a < e) { if (a < ulo) ulo = a; if (e > uhi) uhi = e; }
        mrow[r] = -INFINITY; lrow[r] = 0.0f;
        memset(acc + r * Dv, 0, (size_t)Dv * 4);
    }
    const int64_t kes = p->kvbits ? 1 : es;              /* codes: strides in bytes */
    const char *kb = (const char *)p->k + (b * p->ks[0] + g * p->ks[1]) * kes;
    const char *vb = (const char *)p->v + (b * p->vs[0] + g * p->vs[1]) * kes;
    const float cap = p->softcap;
#if OLC_ATTN_WIDE
    const int wide = R >= OLC_ATTN_WIDE_MIN && !p->kvbits;
#else
    const int wide = 0;
#endif
    const int64_t tb = wide ? OLC_ATTN_WTB : OLC_ATTN_TB;
    for (int64_t t0 = ulo; t0 < uhi; t0 += tb) {
        const int64_t t1 = t0 + tb < uhi ? t0 + tb : uhi;
        int64_t ta = t1, te = t0;                      /* the rows' keys in this tile */
        for (int64_t r = 0; r < R; ++r) {
            const int64_t a = lo[r] > t0 ? lo[r] : t0, e = hi[r] < t1 ? hi[r] : t1;
            if (a < e) { if (a < ta) ta = a; if (e > te) te = e; }
        }
        if (ta >= te) continue;
        const int64_t nu = te - ta;
#if OLC_ATTN_WIDE
        if (wide) {
            OLC_FN(olc_attn_wide_tile)(p, b, h0, s0, ns, R, ta, te, kb, vb, qf, acc, mrow, lrow,
                                       lo, hi, sc, kbuf, vbuf, vbuf + OLC_ATTN_WTB * Dv);
            continue;
        }
#endif
        const float *kt, *vt;
        int64_t kst, vst;
        if (p->kvbits) {
            for (int64_t j = 0; j < nu; ++j) {
                OLC_FN(olc_attn_dequant)(p->kvbits, kb + (ta + j) * p->ks[2], p->kscale + g * Dk,
                                         kbuf + j * Dk, Dk);
                OLC_FN(olc_attn_dequant)(p->kvbits, vb + (ta + j) * p->vs[2], p->vscale + g * Dv,
                                         vbuf + j * Dv, Dv);
            }
            kt = kbuf; kst = Dk; vt = vbuf; vst = Dv;
        } else if (p->dtype == OLC_FLOAT) {
            kt = (const float *)kb + ta * p->ks[2]; kst = p->ks[2];
            vt = (const float *)vb + ta * p->vs[2]; vst = p->vs[2];
        } else {
            /* contiguous rows (a BNSH cache) convert in one sweep */
            if (p->ks[2] == Dk)
                OLC_FN(olc_attn_load)(p->dtype, kb + ta * Dk * es, kbuf, nu * Dk);
            else
                for (int64_t j = 0; j < nu; ++j)
                    OLC_FN(olc_attn_load)(p->dtype, kb + (ta + j) * p->ks[2] * es, kbuf + j * Dk, Dk);
            if (p->vs[2] == Dv)
                OLC_FN(olc_attn_load)(p->dtype, vb + ta * Dv * es, vbuf, nu * Dv);
            else
                for (int64_t j = 0; j < nu; ++j)
                    OLC_FN(olc_attn_load)(p->dtype, vb + (ta + j) * p->vs[2] * es, vbuf + j * Dv, Dv);
            kt = kbuf; kst = Dk; vt = vbuf; vst = Dv;
        }
        OLC_FN(olc_attn_qk_block)(qf, R, Dk, kt, kst, nu, sc, OLC_ATTN_TB);
        for (int64_t r = 0; r < R; ++r) {
            float *row = sc + r * OLC_ATTN_TB;
            const int64_t a = lo[r] > ta ? lo[r] : ta, e = hi[r] < te ? hi[r] : te;
            if (a >= e) { memset(row, 0, (size_t)nu * 4); continue; }
            const int64_t n = e - a;
            float *x = row + (a - ta);
            const float *bias = NULL;
            if (p->bias) {
                const int64_t h = h0 + r / ns, s = s0 + r % ns;
                bias = p->bias + b * p->bs[0] + h * p->bs[1] + s * p->bs[2] + a;
            }
            if (cap > 0.0f) {
                const float inv = 1.0f / cap;
                if (bias && !p->softcap_first) {
                    for (int64_t j = 0; j < n; ++j) x[j] = (x[j] + bias[j]) * inv;
                    OLC_FN(olc_attn_tanh)(x, n);
                    for (int64_t j = 0; j < n; ++j) x[j] *= cap;
                } else {
                    for (int64_t j = 0; j < n; ++j) x[j] *= inv;
                    OLC_FN(olc_attn_tanh)(x, n);
                    for (int64_t j = 0; j < n; ++j) x[j] *= cap;
                    if (bias) for (int64_t j = 0; j < n; ++j) x[j] += bias[j];
                }
            } else if (bias) {
                for (int64_t j = 0; j < n; ++j) x[j] += bias[j];
            }
            const float mt = OLC_FN(olc_attn_max)(x, n);
            if (!(mt > -INFINITY)) {
                if (!olc_attn_has_nan_(x, bias, n)) { memset(row, 0, (size_t)nu * 4); continue; }
                mrow[r] = NAN;                /* a NaN score: the row is NaN, as softmax's */
            }
            float *ar = acc + r * Dv;
            if (mt > mrow[r]) {
                if (mrow[r] > -INFINITY) {
                    const float corr = olc_expf_(mrow[r] - mt);
                    lrow[r] *= corr;
                    for (int64_t d = 0; d < Dv; ++d) ar[d] *= corr;
                }
                mrow[r] = mt;
            }
            const float m = mrow[r];
            lrow[r] += OLC_FN(olc_attn_expsum)(x, n, m);
            /* keys of the tile outside this row's range weigh nothing */
            memset(row, 0, (size_t)(a - ta) * 4);
            memset(row + (e - ta), 0, (size_t)(te - e) * 4);
        }
        OLC_FN(olc_attn_pv_block)(acc, R, Dv, sc, OLC_ATTN_TB, vt, vst, nu);
    }
    if (p->nchunks > 1) {
        float *part = p->partial + task * p->prow * (Dv + 2);
        for (int64_t r = 0; r < R; ++r) {
            part[r * (Dv + 2)] = mrow[r]; part[r * (Dv + 2) + 1] = lrow[r];
            memcpy(part + r * (Dv + 2) + 2, acc + r * Dv, (size_t)Dv * 4);
        }
        return;
    }
    for (int64_t r = 0; r < R; ++r) {
        const int64_t h = h0 + r / ns, s = s0 + r % ns;
        float *ar = acc + r * Dv;
        olc_attn_finish_(p, h, mrow[r], lrow[r], ar);
        OLC_FN(olc_attn_store)(p->dtype, ar, (char *)p->out +
            (b * p->os[0] + h * p->os[1] + s * p->os[2]) * es, Dv);
    }
}
/* Split mode: row = (b, h, s) combines its chunks' partials in chunk order. */
OLC_LVL_ATTR static void OLC_FN(olc_attn_combine)(const olc_attn_args *p, int64_t row) {
    const int64_t Dv = p->Dv, S = p->S, group = p->Nq / p->Nkv;
    const int64_t es = p->dtype == OLC_FLOAT ? 4 : 2;
    const int64_t s = row % S, h = (row / S) % p->Nq, b = row / (S * p->Nq);
    const int64_t g = h / group, hblk = (h % group) / p->hb, sblk = s / p->sb;
    const int64_t nh = (hblk + 1) * p->hb <= group ? p->hb : group - hblk * p->hb;
    const int64_t s0 = sblk * p->sb, ns = s0 + p->sb <= S ? p->sb : S - s0;
    (void)nh;
    const int64_t r = (h % group - hblk * p->hb) * ns + (s - s0);
    const int64_t base = (((b * p->Nkv + g) * p->nhb + hblk) * p->nsb + sblk) * p->nchunks;
    float m = -INFINITY;
    int nan = 0;
    for (int64_t c = 0; c < p->nchunks; ++c) {
        const float mc = p->partial[((base + c) * p->prow + r) * (Dv + 2)];
        m = mc > m ? mc : m;
        nan |= mc != mc;
    }
    if (nan) m = NAN;                        /* a chunk saw a NaN score */
    float small[256];                        /* head sizes past 256: heap */
    float *acc = Dv <= 256 ? small : (float *)malloc((size_t)Dv * 4);
    if (!acc) return;
    memset(acc, 0, (size_t)Dv * 4);
    float l = 0.0f;
    if (m > -INFINITY)
        for (int64_t c = 0; c < p->nchunks; ++c) {
            const float *part = p->partial + ((base + c) * p->prow + r) * (Dv + 2);
            if (!(part[0] > -INFINITY)) continue;
            const float w = olc_expf_(part[0] - m);
            l = olc_fmaf_(part[1], w, l);
            for (int64_t d = 0; d < Dv; ++d) acc[d] = olc_fmaf_(part[2 + d], w, acc[d]);
        }
    olc_attn_finish_(p, h, m, l, acc);
    OLC_FN(olc_attn_store)(p->dtype, acc, (char *)p->out +
        (b * p->os[0] + h * p->os[1] + s * p->os[2]) * es, Dv);
    if (acc != small) free(acc);
}
