/* The row helpers of one element type and its scalar level: a body file
 * (common/olc_level.h) that olc_causal_conv_with_state.h includes once per
 * type with OLC_CCONV_T (the C type), OLC_CCONV_TN (f32, f16, bf16) and
 * OLC_LVL scalar.  OLC_CCONV_TFN(olc_cconv_cf_head) is
 * olc_cconv_cf_head_<type>, OLC_CCONV_FN(olc_cconv_cf) olc_cconv_cf_<type>_scalar.
 * No include guard. */

/* Channels-first: the first `end` outputs of one row (those that read the
 * state, or the whole of a short row). */
static inline void OLC_CCONV_TFN(olc_cconv_cf_head)(const olc_cconv_args *p, const OLC_CCONV_T *xr,
        const OLC_CCONV_T *sr, OLC_CCONV_T *yr, const float *wr, float b0, int64_t end) {
    const int64_t K = p->K, SL = p->SL, d = p->dil;
    for (int64_t t = 0; t < end; ++t) {
        float acc = b0;
        for (int64_t j = 0; j < K; ++j) {
            int64_t i = t + SL - (K - 1 - j) * d;
            float v = i >= SL ? OLC_CCONV_TFN(olc_cconv_ld)(xr[i - SL])
                    : sr ? OLC_CCONV_TFN(olc_cconv_ld)(sr[i]) : 0.0f;
            acc = acc + wr[j * p->C] * v;
        }
        yr[t] = OLC_CCONV_TFN(olc_cconv_st)(olc_cconv_act_(acc, p->silu));
    }
}
/* The row's present state: a copy of v's last SL positions. */
static inline void OLC_CCONV_TFN(olc_cconv_cf_present)(const olc_cconv_args *p, const OLC_CCONV_T *xr,
        const OLC_CCONV_T *sr, OLC_CCONV_T *pr) {
    const int64_t L = p->L, SL = p->SL;
    int64_t i = 0;
    if (L < SL) { /* the state's tail, then all of x */
        for (; i < SL - L; ++i) pr[i] = sr ? sr[L + i] : (OLC_CCONV_T)0;
        for (; i < SL; ++i) pr[i] = xr[i - (SL - L)];
    } else {
        for (; i < SL; ++i) pr[i] = xr[L - SL + i];
    }
}
/* The present state of rows [ra, rb) at once (sequences no longer than
 * SL: the state rows shifted by L in one copy, then x's values). */
static inline void OLC_CCONV_TFN(olc_cconv_cf_present_block)(const olc_cconv_args *p, int64_t ra,
                                                            int64_t rb) {
    const int64_t L = p->L, SL = p->SL, n = rb - ra;
    OLC_CCONV_T *pr = (OLC_CCONV_T *)p->present + ra * SL;
    const OLC_CCONV_T *xr = (const OLC_CCONV_T *)p->x + ra * L;
    if (SL == 0) return;
    if (L < SL) {
        if (p->state)
            memcpy(pr, (const OLC_CCONV_T *)p->state + ra * SL + L,
                   (size_t)(n * SL - L) * sizeof(OLC_CCONV_T));
        else
            memset(pr, 0, (size_t)(n * SL) * sizeof(OLC_CCONV_T));
        for (int64_t r = 0; r < n; ++r)
            for (int64_t i = 0; i < L; ++i) pr[r * SL + SL - L + i] = xr[r * L + i];
    } else {
        for (int64_t r = 0; r < n; ++r)
            for (int64_t i = 0; i < SL; ++i) pr[r * SL + i] = xr[r * L + L - SL + i];
    }
}
/* The head of up to W rows [ra, rb), transposed into lanes: vb[pos][lane]
 * holds v's first SL + head positions, wb[j][lane] the taps, bb the bias. */
static inline void OLC_CCONV_TFN(olc_cconv_cf_gather)(const olc_cconv_args *p, int64_t ra, int64_t rb,
        int64_t c, int W, float *vb, float *wb, float *bb) {
    const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL;
    const int64_t P = SL + olc_cconv_block_len(L, SL);
    const int64_t n = rb - ra, head = P - SL;
    memset(vb, 0, (size_t)(P * W) * sizeof(float));
    memset(wb, 0, (size_t)(K * W) * sizeof(float));
    memset(bb, 0, (size_t)W * sizeof(float));
    if (c + n <= C) { /* one batch: the taps and biases are contiguous */
        for (int64_t j = 0; j < K; ++j)
            memcpy(wb + j * W, p->w + j * C + c, (size_t)n * sizeof(float));
        if (p->bias) memcpy(bb, p->bias + c, (size_t)n * sizeof(float));
    } else {
        for (int64_t lane = 0, cc = c; lane < n; ++lane, cc = cc + 1 == C ? 0 : cc + 1) {
            for (int64_t j = 0; j < K; ++j) wb[j * W + lane] = p->w[j * C + cc];
            if (p->bias) bb[lane] = p->bias[cc];
        }
    }
    const OLC_CCONV_T *xr = (const OLC_CCONV_T *)p->x + ra * L;
    const OLC_CCONV_T *sr = p->state ? (const OLC_CCONV_T *)p->state + ra * SL : NULL;
    for (int64_t lane = 0; lane < n; ++lane, xr += L) {
        if (sr) {
            for (int64_t i = 0; i < SL; ++i) vb[i * W + lane] = OLC_CCONV_TFN(olc_cconv_ld)(sr[i]);
            sr += SL;
        }
        for (int64_t i = 0; i < head; ++i) vb[(SL + i) * W + lane] = OLC_CCONV_TFN(olc_cconv_ld)(xr[i]);
    }
}

/* Channels-last: virtual row i (all channels) of batch b, or NULL (zeros). */
static inline const OLC_CCONV_T *OLC_CCONV_TFN(olc_cconv_cl_row)(const olc_cconv_args *p, int64_t b,
                                                                 int64_t i) {
    const int64_t C = p->C, L = p->L, SL = p->SL;
    return i >= SL ? (const OLC_CCONV_T *)p->x + (b * L + i - SL) * C
         : p->state ? (const OLC_CCONV_T *)p->state + (b * SL + i) * C : NULL;
}
/* Channels-last: the present state rows of batch b (the first task of a
 * batch writes them). */
static inline void OLC_CCONV_TFN(olc_cconv_cl_present)(const olc_cconv_args *p, int64_t b) {
    const int64_t C = p->C, L = p->L, SL = p->SL;
    for (int64_t i = 0; i < SL; ++i) {
        const OLC_CCONV_T *src = OLC_CCONV_TFN(olc_cconv_cl_row)(p, b, L + i);
        OLC_CCONV_T *dst = (OLC_CCONV_T *)p->present + (b * SL + i) * C;
        if (src) memcpy(dst, src, (size_t)C * sizeof(OLC_CCONV_T));
        else memset(dst, 0, (size_t)C * sizeof(OLC_CCONV_T));
    }
}
/* Channels-last: rows[j] = the virtual row tap j of output t reads. */
static inline void OLC_CCONV_TFN(olc_cconv_cl_taps)(const olc_cconv_args *p, int64_t b, int64_t t,
                                                    const OLC_CCONV_T **rows) {
    const int64_t K = p->K, SL = p->SL, d = p->dil;
    for (int64_t j = 0; j < K; ++j)
        rows[j] = OLC_CCONV_TFN(olc_cconv_cl_row)(p, b, t + SL - (K - 1 - j) * d);
}

/* ---- the scalar level ---- */

static void OLC_CCONV_FN(olc_cconv_cf)(const olc_cconv_args *p, int64_t r0, int64_t r1) {
    const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL, d = p->dil;
    const int64_t head = olc_cconv_block_len(L, SL);
    for (int64_t r = r0, c = r0 % C; r < r1; ++r, c = c + 1 == C ? 0 : c + 1) {
        const OLC_CCONV_T *xr = (const OLC_CCONV_T *)p->x + r * L;
        const OLC_CCONV_T *sr = p->state ? (const OLC_CCONV_T *)p->state + r * SL : NULL;
        OLC_CCONV_T *yr = (OLC_CCONV_T *)p->y + r * L, *pr = (OLC_CCONV_T *)p->present + r * SL;
        const float *wr = p->w + c; /* tap j at wr[j * C] */
        float b0 = p->bias ? p->bias[c] : 0.0f;
        OLC_CCONV_TFN(olc_cconv_cf_head)(p, xr, sr, yr, wr, b0, head);
        for (int64_t t = head; t < L; ++t) {
            float acc = b0;
            for (int64_t j = 0; j < K; ++j)
                acc = acc + wr[j * C] * OLC_CCONV_TFN(olc_cconv_ld)(xr[t - (K - 1 - j) * d]);
            yr[t] = OLC_CCONV_TFN(olc_cconv_st)(olc_cconv_act_(acc, p->silu));
        }
        OLC_CCONV_TFN(olc_cconv_cf_present)(p, xr, sr, pr);
    }
}
static void OLC_CCONV_FN(olc_cconv_cl)(const olc_cconv_args *p, int64_t r0, int64_t r1) {
    const int64_t C = p->C, L = p->L, K = p->K, ntile = olc_cconv_cl_tiles(L);
    const OLC_CCONV_T *rows[K];
    for (int64_t task = r0; task < r1; ++task) {
        int64_t b = task / ntile, t0 = (task % ntile) * OLC_CCONV_TILE;
        int64_t t1 = t0 + OLC_CCONV_TILE < L ? t0 + OLC_CCONV_TILE : L;
        if (t0 == 0) OLC_CCONV_TFN(olc_cconv_cl_present)(p, b);
        for (int64_t t = t0; t < t1; ++t) {
            OLC_CCONV_T *yr = (OLC_CCONV_T *)p->y + (b * L + t) * C;
            OLC_CCONV_TFN(olc_cconv_cl_taps)(p, b, t, rows);
            for (int64_t c = 0; c < C; ++c) {
                float acc = p->bias ? p->bias[c] : 0.0f;
                for (int64_t j = 0; j < K; ++j)
                    acc = acc + p->w[j * C + c] * (rows[j] ? OLC_CCONV_TFN(olc_cconv_ld)(rows[j][c]) : 0.0f);
                yr[c] = OLC_CCONV_TFN(olc_cconv_st)(olc_cconv_act_(acc, p->silu));
            }
        }
    }
}
