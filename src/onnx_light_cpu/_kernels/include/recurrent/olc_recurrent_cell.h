/* One direction of RNN, GRU or LSTM for one element type (a body file of
 * olc_recurrent.h, included once per type: OLC_RREAL float or double,
 * OLC_RSFX f or d naming olc_rnn_act_<sfx>, olc_rnn_mm_<sfx> and the
 * function it defines, olc_rnn_run_<sfx>). */

#define OLC_RC_(a, b) a##_##b
#define OLC_RC(a, b) OLC_RC_(a, b)
#define OLC_RF(name) OLC_RC(name, OLC_RSFX)

static void OLC_RF(olc_rnn_run)(olc_rnn_dir *d) {
    typedef OLC_RREAL real;
    const int64_t T = d->T, B = d->B, H = d->H, K = d->K;
    const int64_t G = olc_rnn_gates(d->cell) * H;
    const int level = d->level, threads = d->threads, dense = d->r_dense;
    const real *x = (const real *)d->x;
    real *xw = (real *)d->xw;
    const real *bias = (const real *)d->bias;
    real *h = (real *)d->h, *c = (real *)d->c, *y = (real *)d->y;
    real *scratch = (real *)d->scratch;
    const real *rbh = (const real *)d->rbh, *p = (const real *)d->p;
    const int64_t rows = T * B;
    /* 1. every step's input projection: xw = bias + X W^T */
    for (int64_t q = 0; q < rows; ++q) {
        if (bias != NULL)
            memcpy(xw + q * G, bias, (size_t)G * sizeof(real));
        else
            memset(xw + q * G, 0, (size_t)G * sizeof(real));
    }
    if (rows > 0 && OLC_RF(olc_rnn_mm)(d, (const real *)d->w, 0, x, K, xw, G, rows, G, K, 1,
                                       d->proj_threads) != 0) {
        d->failed = 1;
        return;
    }
    /* 2. the recurrence */
    for (int64_t s = 0; s < T; ++s) {
        const int64_t t = d->reverse ? T - 1 - s : s;
        real *xt = xw + t * d->xs_t * G;   /* row b at xt + b * ldx */
        const int64_t ldx = d->xs_b * G;
        d->odd_step = (int)(s & 1);
        real *yt = y != NULL ? y + t * d->ys_t : NULL;
        int status = 0;
        if (d->cell == OLC_CELL_GRU) {
            status = OLC_RF(olc_rnn_mm)(d, (const real *)d->r[0], dense, h, H, xt, ldx, B, 2 * H,
                                        H, 1, threads);
            for (int64_t b = 0; b < B; ++b) {
                real *g = xt + b * ldx;
                OLC_RF(olc_rnn_act)(level, d->act[0], d->clip, g, 2 * H); /* z, r */
                if (!d->lbr) {
                    const real *hb = h + b * H, *r = g + H;
                    real *sb = scratch + b * H;
                    for (int64_t j = 0; j < H; ++j) sb[j] = r[j] * hb[j];
                }
            }
            if (status == 0) {
                if (d->lbr)
                    status = OLC_RF(olc_rnn_mm)(d, (const real *)d->r[1], dense, h, H, scratch,
                                                H, B, H, H, 0, threads);
                else
                    status = OLC_RF(olc_rnn_mm)(d, (const real *)d->r[1], dense, scratch, H,
                                                xt + 2 * H, ldx, B, H, H, 1, threads);
            }
        } else {
            status = OLC_RF(olc_rnn_mm)(d, (const real *)d->r[0], dense, h, H, xt, ldx, B, G, H,
                                        1, threads);
        }
        if (status != 0) {
            d->failed = 1;
            return;
        }
        for (int64_t b = 0; b < B; ++b) {
            real *yb = yt != NULL ? yt + b * d->ys_b : NULL;
            if (d->lens != NULL && t >= d->lens[b]) {
                if (yb != NULL) memset(yb, 0, (size_t)H * sizeof(real));
                continue;
            }
            real *g = xt + b * ldx, *hb = h + b * H;
            if (d->cell == OLC_CELL_RNN) {
                OLC_RF(olc_rnn_act)(level, d->act[0], d->clip, g, H);
                memcpy(hb, g, (size_t)H * sizeof(real));
            } else if (d->cell == OLC_CELL_GRU) {
                real *z = g, *r = g + H, *gh = g + 2 * H;
                if (d->lbr) {
                    const real *sb = scratch + b * H;
                    if (rbh != NULL)
                        for (int64_t j = 0; j < H; ++j) gh[j] += r[j] * (sb[j] + rbh[j]);
                    else
                        for (int64_t j = 0; j < H; ++j) gh[j] += r[j] * sb[j];
                }
                OLC_RF(olc_rnn_act)(level, d->act[1], d->clip, gh, H);
                for (int64_t j = 0; j < H; ++j) hb[j] = (1 - z[j]) * gh[j] + z[j] * hb[j];
            } else {
                real *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
                real *cb = c + b * H;
                if (p != NULL) {
                    const real *pi = p, *pf = p + 2 * H;
                    for (int64_t j = 0; j < H; ++j) {
                        gi[j] += pi[j] * cb[j];
                        gf[j] += pf[j] * cb[j];
                    }
                }
                OLC_RF(olc_rnn_act)(level, d->act[0], d->clip, gi, H);
                if (d->input_forget)
                    for (int64_t j = 0; j < H; ++j) gf[j] = 1 - gi[j];
                else
                    OLC_RF(olc_rnn_act)(level, d->act[0], d->clip, gf, H);
                OLC_RF(olc_rnn_act)(level, d->act[1], d->clip, gc, H);
                for (int64_t j = 0; j < H; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
                if (p != NULL) {
                    const real *po = p + H;
                    for (int64_t j = 0; j < H; ++j) go[j] += po[j] * cb[j];
                }
                OLC_RF(olc_rnn_act)(level, d->act[0], d->clip, go, H);
                memcpy(gc, cb, (size_t)H * sizeof(real));
                OLC_RF(olc_rnn_act)(level, d->act[2], 0.0f, gc, H);
                for (int64_t j = 0; j < H; ++j) hb[j] = go[j] * gc[j];
            }
            if (yb != NULL) memcpy(yb, hb, (size_t)H * sizeof(real));
        }
    }
}

#undef OLC_RC_
#undef OLC_RC
#undef OLC_RF
