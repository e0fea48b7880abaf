/* One vector level and one element type: a body file (common/olc_level.h)
 * that olc_causal_conv_with_state.h includes per level (OLC_LVL,
 * OLC_LVL_ATTR, OLC_CCONV_W lanes, OLC_CCONV_MASKED) and type (OLC_CCONV_T,
 * OLC_CCONV_TN).  It uses the level's primitives OLC_FN(olc_cconv_set1),
 * ... and the type's OLC_CCONV_FN(olc_cconv_ldv), _stv, _gather; it
 * defines OLC_CCONV_FN(olc_cconv_cf) and OLC_CCONV_FN(olc_cconv_cl).
 * No include guard.
 *
 * Channels-first: the head of W rows at a time, vectorised over the rows
 * (decode is all head), then each row's remaining outputs vectorised over
 * time.  Channels-last: vectorised over channels.  Partial vectors go
 * through the same vector code (AVX2: stack buffers, AVX-512: masks). */

/* The channels-first head block's v, taps and bias by gathers: lane i reads
 * row ra + i.  16-bit types gather 32-bit words, so the block holding the
 * array's last element, and blocks wrapping a batch, take the scalar fill. */
static OLC_LVL_ATTR void OLC_CCONV_FN(olc_cconv_cf_fill)(const olc_cconv_args *p, int64_t ra,
        int64_t rb, int64_t c, float *vb, float *wb, float *bb) {
    const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL, n = rb - ra;
    const int64_t head = olc_cconv_block_len(L, SL);
    if ((sizeof(OLC_CCONV_T) == 2 && rb == p->B * C) || c + n > C || L > (1 << 24)) {
        OLC_CCONV_TFN(olc_cconv_cf_gather)(p, ra, rb, c, OLC_CCONV_W, vb, wb, bb);
        return;
    }
    OLC_FN(olc_cconv_m) m = OLC_FN(olc_cconv_mask)(n);
    OLC_FN(olc_cconv_v) zero = OLC_FN(olc_cconv_zero)();
    OLC_FN(olc_cconv_i) is = OLC_FN(olc_cconv_idx)((int)SL), ix = OLC_FN(olc_cconv_idx)((int)L);
    const OLC_CCONV_T *sr = p->state ? (const OLC_CCONV_T *)p->state + ra * SL : NULL;
    const OLC_CCONV_T *xr = (const OLC_CCONV_T *)p->x + ra * L;
    for (int64_t i = 0; i < SL; ++i)
        OLC_FN(olc_cconv_stf)(vb + i * OLC_CCONV_W, sr ? OLC_CCONV_FN(olc_cconv_gather)(sr + i, is, m) : zero);
    for (int64_t i = 0; i < head; ++i)
        OLC_FN(olc_cconv_stf)(vb + (SL + i) * OLC_CCONV_W, OLC_CCONV_FN(olc_cconv_gather)(xr + i, ix, m));
    for (int64_t j = 0; j < K; ++j)
        OLC_FN(olc_cconv_stf)(wb + j * OLC_CCONV_W, OLC_FN(olc_cconv_ldm)(p->w + j * C + c, m));
    OLC_FN(olc_cconv_stf)(bb, p->bias ? OLC_FN(olc_cconv_ldm)(p->bias + c, m) : zero);
}

/* The head of rows [ra, rb) (at most W), one row per lane. */
static OLC_LVL_ATTR void OLC_CCONV_FN(olc_cconv_cf_head_block)(const olc_cconv_args *p, int64_t ra,
                                                               int64_t rb, int64_t ca) {
    enum { W = OLC_CCONV_W };
    float vb[(2 * OLC_CCONV_MAX_SL + OLC_CCONV_SHORT) * W], wb[OLC_CCONV_MAX_K * W], bb[W];
    OLC_CCONV_T ob[W];
    const int64_t L = p->L, K = p->K, SL = p->SL, d = p->dil;
    const int64_t head = olc_cconv_block_len(L, SL);
    OLC_CCONV_FN(olc_cconv_cf_fill)(p, ra, rb, ca, vb, wb, bb);
    for (int64_t t = 0; t < head; ++t) {
        OLC_FN(olc_cconv_v) acc = OLC_FN(olc_cconv_ldf)(bb);
        for (int64_t j = 0; j < K; ++j)
            acc = OLC_FN(olc_cconv_add)(acc, OLC_FN(olc_cconv_mul)(OLC_FN(olc_cconv_ldf)(wb + j * W),
                      OLC_FN(olc_cconv_ldf)(vb + (t + SL - (K - 1 - j) * d) * W)));
        OLC_CCONV_FN(olc_cconv_stv)(ob, OLC_FN(olc_cconv_act)(acc, p->silu));
        for (int64_t r = ra; r < rb; ++r) ((OLC_CCONV_T *)p->y)[r * L + t] = ob[r - ra];
    }
}

/* Outputs [t0, L) of one row (t0 >= SL): every tap reads x. */
static OLC_LVL_ATTR void OLC_CCONV_FN(olc_cconv_cf_body)(const olc_cconv_args *p, const OLC_CCONV_T *xr,
        OLC_CCONV_T *yr, const float *wr, float b0, int64_t t0) {
    enum { W = OLC_CCONV_W };
    const int64_t C = p->C, L = p->L, K = p->K, d = p->dil;
    int64_t t = t0;
    for (; t + W <= L; t += W) {
        OLC_FN(olc_cconv_v) acc = OLC_FN(olc_cconv_set1)(b0);
        for (int64_t j = 0; j < K; ++j)
            acc = OLC_FN(olc_cconv_add)(acc, OLC_FN(olc_cconv_mul)(OLC_FN(olc_cconv_set1)(wr[j * C]),
                      OLC_CCONV_FN(olc_cconv_ldv)(xr + t - (K - 1 - j) * d)));
        OLC_CCONV_FN(olc_cconv_stv)(yr + t, OLC_FN(olc_cconv_act)(acc, p->silu));
    }
    if (t < L) { /* the last partial vector, from a zero-padded window */
        int64_t n = L - t, span = (K - 1) * d + n;
        OLC_CCONV_T win[W + OLC_CCONV_WIN], out[W];
        if ((K - 1) * d > OLC_CCONV_WIN) { /* long taps: scalar */
            for (; t < L; ++t) {
                float acc = b0;
                for (int64_t j = 0; j < K; ++j)
                    acc = acc + wr[j * C] * OLC_CCONV_TFN(olc_cconv_ld)(xr[t - (K - 1 - j) * d]);
                yr[t] = OLC_CCONV_TFN(olc_cconv_st)(olc_cconv_act_(acc, p->silu));
            }
            return;
        }
        memcpy(win, xr + t - (K - 1) * d, (size_t)span * sizeof(OLC_CCONV_T));
        memset(win + span, 0, (size_t)(W - n) * sizeof(OLC_CCONV_T));
        OLC_FN(olc_cconv_v) acc = OLC_FN(olc_cconv_set1)(b0);
        for (int64_t j = 0; j < K; ++j)
            acc = OLC_FN(olc_cconv_add)(acc, OLC_FN(olc_cconv_mul)(OLC_FN(olc_cconv_set1)(wr[j * C]),
                      OLC_CCONV_FN(olc_cconv_ldv)(win + j * d)));
        OLC_CCONV_FN(olc_cconv_stv)(out, OLC_FN(olc_cconv_act)(acc, p->silu));
        memcpy(yr + t, out, (size_t)n * sizeof(OLC_CCONV_T));
    }
}

/* Channels-first rows [r0, r1). */
static OLC_LVL_ATTR void OLC_CCONV_FN(olc_cconv_cf)(const olc_cconv_args *p, int64_t r0, int64_t r1) {
    enum { W = OLC_CCONV_W };
    const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL;
    const int64_t head = olc_cconv_block_len(L, SL);
    const int block_head = SL <= OLC_CCONV_MAX_SL && K <= OLC_CCONV_MAX_K;
    int64_t c = r0 % C;
    for (int64_t ra = r0; ra < r1; ra += W) {
        int64_t rb = ra + W < r1 ? ra + W : r1;
        if (block_head && head > 0) OLC_CCONV_FN(olc_cconv_cf_head_block)(p, ra, rb, c);
        if (block_head && head == L) { /* the block did the whole rows */
            OLC_CCONV_TFN(olc_cconv_cf_present_block)(p, ra, rb);
            for (c += rb - ra; c >= C; c -= C) {}
            continue;
        }
        for (int64_t r = ra; r < rb; ++r, c = c + 1 == C ? 0 : c + 1) {
            const OLC_CCONV_T *xr = (const OLC_CCONV_T *)p->x + r * L;
            const OLC_CCONV_T *sr = p->state ? (const OLC_CCONV_T *)p->state + r * SL : NULL;
            OLC_CCONV_T *yr = (OLC_CCONV_T *)p->y + r * L, *pr = (OLC_CCONV_T *)p->present + r * SL;
            const float *wr = p->w + c; /* tap j at wr[j * C] */
            float b0 = p->bias ? p->bias[c] : 0.0f;
            if (!block_head) OLC_CCONV_TFN(olc_cconv_cf_head)(p, xr, sr, yr, wr, b0, head);
            if (head < L) OLC_CCONV_FN(olc_cconv_cf_body)(p, xr, yr, wr, b0, head);
            OLC_CCONV_TFN(olc_cconv_cf_present)(p, xr, sr, pr);
        }
    }
}

/* Channels-last tasks [r0, r1): (b, OLC_CCONV_TILE time steps). */
static OLC_LVL_ATTR void OLC_CCONV_FN(olc_cconv_cl)(const olc_cconv_args *p, int64_t r0, int64_t r1) {
    const float *wts = p->w, *bias = p->bias;
    const int silu = p->silu;
    const int64_t C = p->C, L = p->L, K = p->K, ntile = olc_cconv_cl_tiles(L);
    const OLC_CCONV_T *rows[K];
    for (int64_t task = r0; task < r1; ++task) {
        int64_t b = task / ntile, t0 = (task % ntile) * OLC_CCONV_TILE;
        int64_t t1 = t0 + OLC_CCONV_TILE < L ? t0 + OLC_CCONV_TILE : L;
        if (t0 == 0) OLC_CCONV_TFN(olc_cconv_cl_present)(p, b);
        for (int64_t t = t0; t < t1; ++t) {
            OLC_CCONV_T *yr = (OLC_CCONV_T *)p->y + (b * L + t) * C;
            OLC_CCONV_TFN(olc_cconv_cl_taps)(p, b, t, rows);
#if OLC_CCONV_MASKED
            for (int64_t c = 0; c < C; c += 16) {
                __mmask16 m = olc_cconv_mask_avx512(C - c);
                __m512 acc = bias ? _mm512_maskz_loadu_ps(m, bias + c) : _mm512_setzero_ps();
                for (int64_t j = 0; j < K; ++j) {
                    __m512 v = rows[j] ? OLC_CCONV_FN(olc_ld)(rows[j] + c, m) : _mm512_setzero_ps();
                    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, wts + j * C + c), v));
                }
                OLC_CCONV_FN(olc_st)(yr + c, m, olc_cconv_act_avx512(acc, silu));
            }
#else
            int64_t c = 0;
            for (; c + 8 <= C; c += 8) {
                __m256 acc = bias ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();
                for (int64_t j = 0; j < K; ++j) {
                    __m256 v = rows[j] ? OLC_CCONV_FN(olc_ld)(rows[j] + c) : _mm256_setzero_ps();
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(wts + j * C + c), v));
                }
                OLC_CCONV_FN(olc_st)(yr + c, olc_cconv_act_avx2(acc, silu));
            }
            if (c < C) { /* the partial vector, through stack buffers */
                int64_t n = C - c;
                float bw[8] = {0};
                OLC_CCONV_T bx[8] = {0};
                if (bias) memcpy(bw, bias + c, (size_t)n * sizeof(float));
                __m256 acc = _mm256_loadu_ps(bw);
                for (int64_t j = 0; j < K; ++j) {
                    __m256 v = _mm256_setzero_ps();
                    if (rows[j]) {
                        memcpy(bx, rows[j] + c, (size_t)n * sizeof(OLC_CCONV_T));
                        v = OLC_CCONV_FN(olc_ld)(bx);
                    }
                    memcpy(bw, wts + j * C + c, (size_t)n * sizeof(float));
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(bw), v));
                }
                OLC_CCONV_FN(olc_st)(bx, olc_cconv_act_avx2(acc, silu));
                memcpy(yr + c, bx, (size_t)n * sizeof(OLC_CCONV_T));
            }
#endif
        }
    }
}
