/* Body (no include guard): the direct convolution loops of one element type
 * OLC_CT (named OLC_CN) at one level; olc_conv.h includes it once per level
 * (common/olc_each_level.h) and type.  Plain C written so that the
 * compiler vectorises the inner loops over the output width for the
 * level's target: the scalar level is the twin of the vector ones. */

/* Output rows r0..r1 (flat over OD x OH) of one output plane y = bias +
 * sum over the C input channels x (C x D x H x W) and the taps of w (this
 * output channel's C x kd x kh x kw weights).  Each element is summed in
 * the order (channel, tap) whatever the rows. */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_conv_direct, OLC_CN))(
        const olc_conv_geom *g, const OLC_CT *x, const OLC_CT *w, OLC_CT bias,
        OLC_CT *restrict y, int64_t r0, int64_t r1) {
    const int64_t W = g->W, OW = g->OW, sw = g->sw;
    for (int64_t r = r0; r < r1; ++r) {
        int64_t od = r / g->OH, oh = r % g->OH;
        OLC_CT *restrict yr = y + r * OW;
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = bias;
        for (int64_t c = 0; c < g->C; ++c) {
            for (int64_t a = 0; a < g->kd; ++a) {
                int64_t id = od * g->sd - g->pd + a * g->dd;
                if (id < 0 || id >= g->D) continue;
                for (int64_t b = 0; b < g->kh; ++b) {
                    int64_t ih = oh * g->sh - g->ph + b * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    const OLC_CT *restrict xr = x + ((c * g->D + id) * g->H + ih) * W;
                    const OLC_CT *wk = w + ((c * g->kd + a) * g->kh + b) * g->kw;
                    for (int64_t e = 0; e < g->kw; ++e) {
                        OLC_CT wv = wk[e];
                        int64_t iw0 = e * g->dw - g->pw;
                        int64_t lo = iw0 >= 0 ? 0 : (-iw0 + sw - 1) / sw;
                        int64_t hi = W - iw0 > 0 ? (W - iw0 + sw - 1) / sw : 0;
                        if (hi > OW) hi = OW;
                        if (sw == 1) {
                            const OLC_CT *restrict xs = xr + iw0;
                            for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xs[ow];
                        } else {
                            for (int64_t ow = lo; ow < hi; ++ow) yr[ow] += wv * xr[ow * sw + iw0];
                        }
                    }
                }
            }
        }
    }
}

/* One output plane of a transposed convolution: y (OD x OH x OW) = bias +
 * sum over the input channels c of x (C x D x H x W) and the taps of
 * w[c][m] (C x Mg x kk), scattered; order (channel, position, tap). */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_conv_tdirect, OLC_CN))(
        const olc_conv_geom *g, const OLC_CT *x, const OLC_CT *w, int64_t Mg, int64_t m,
        OLC_CT bias, OLC_CT *restrict y) {
    int64_t kk = g->kd * g->kh * g->kw, L = g->D * g->H * g->W;
    int64_t plane = g->OD * g->OH * g->OW;
    for (int64_t i = 0; i < plane; ++i) y[i] = bias;
    for (int64_t c = 0; c < g->C; ++c) {
        const OLC_CT *wc = w + (c * Mg + m) * kk;
        for (int64_t l = 0; l < L; ++l) {
            OLC_CT v = x[c * L + l];
            int64_t iw = l % g->W, ih = (l / g->W) % g->H, id = l / (g->W * g->H);
            for (int64_t a = 0; a < g->kd; ++a) {
                int64_t od = id * g->sd - g->pd + a * g->dd;
                if (od < 0 || od >= g->OD) continue;
                for (int64_t b = 0; b < g->kh; ++b) {
                    int64_t oh = ih * g->sh - g->ph + b * g->dh;
                    if (oh < 0 || oh >= g->OH) continue;
                    OLC_CT *yr = y + (od * g->OH + oh) * g->OW;
                    const OLC_CT *wk = wc + (a * g->kh + b) * g->kw;
                    for (int64_t e = 0; e < g->kw; ++e) {
                        int64_t ow = iw * g->sw - g->pw + e * g->dw;
                        if (ow >= 0 && ow < g->OW) yr[ow] += v * wk[e];
                    }
                }
            }
        }
    }
}

/* Depthwise rows of three taps (2-D or 1-D, one input channel, width
 * stride 1 or 2): output rows r0..r1 of one plane from xp, a zero-padded
 * copy of the input rows they read (row i of xp: padded row r0 * sh + i,
 * Wp = olc_conv_dw3_width columns, column j: input column j - pw; at
 * width stride 2 and dilation 1 split into even and odd columns).  No
 * bounds inside: three taps a pass over the row.  Every element is summed
 * in the same order (bias, then the taps row by row) on every path. */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_conv_dw3, OLC_CN))(
        const olc_conv_geom *g, const OLC_CT *xp, int64_t Wp, const OLC_CT *w, OLC_CT bias,
        OLC_CT *restrict t, OLC_CT *restrict y, int64_t r0, int64_t r1) {
    const int64_t OW = g->OW, dw = g->dw, kh = g->kh;
    if (g->sw == 1 && g->sh == 1) {
        /* Unit strides: the rows laid end to end are one 1-D convolution
         * (each row Wp - OW scratch columns longer), long enough to
         * vectorise however narrow the plane; t (rows x Wp) holds it. */
        const int64_t rows = r1 - r0, n = (rows - 1) * Wp + OW;
        for (int64_t i = 0; i < n; ++i) t[i] = bias;
        for (int64_t b = 0; b < kh; ++b) {
            const OLC_CT *restrict xs = xp + b * g->dh * Wp;
            const OLC_CT w0 = w[3 * b], w1 = w[3 * b + 1], w2 = w[3 * b + 2];
            for (int64_t i = 0; i < n; ++i)
                t[i] += w0 * xs[i] + w1 * xs[i + dw] + w2 * xs[i + 2 * dw];
        }
        for (int64_t r = 0; r < rows; ++r)
            memcpy(y + (r0 + r) * OW, t + r * Wp, (size_t)OW * sizeof(OLC_CT));
        return;
    }
    for (int64_t r = r0; r < r1; ++r) {
        OLC_CT *restrict yr = y + r * OW;
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = bias;
        for (int64_t b = 0; b < kh; ++b) {
            const OLC_CT *restrict xs = xp + ((r - r0) * g->sh + b * g->dh) * Wp;
            const OLC_CT w0 = w[3 * b], w1 = w[3 * b + 1], w2 = w[3 * b + 2];
            if (g->sw == 1) {
                for (int64_t ow = 0; ow < OW; ++ow)
                    yr[ow] += w0 * xs[ow] + w1 * xs[ow + dw] + w2 * xs[ow + 2 * dw];
            } else if (dw == 1) { /* width stride 2: xs holds the even columns, then
                                     * the odd ones (olc_conv_pad_rows) */
                const OLC_CT *restrict ev = xs, *restrict od = xs + OW + 1;
                for (int64_t ow = 0; ow < OW; ++ow)
                    yr[ow] += w0 * ev[ow] + w1 * od[ow] + w2 * ev[ow + 1];
            } else {
                for (int64_t ow = 0; ow < OW; ++ow)
                    yr[ow] += w0 * xs[2 * ow] + w1 * xs[2 * ow + dw] + w2 * xs[2 * ow + 2 * dw];
            }
        }
    }
}

/* Depthwise 2-D rows of three taps, OLC_CONV_DWC planes (channels) at a
 * time: nc <= OLC_CONV_DWC consecutive planes of one image x (each H x W),
 * their weights w (kh x 3 each) and biases (NULL: zero) give output rows
 * r0..r1 of the nc output planes y (each OH x OW).  buf
 * (olc_conv_dwc_floats) takes a zero-padded copy of the input rows they
 * read with the channel innermost ((r1 - r0 - 1) * sh + (kh - 1) * dh + 1
 * rows of olc_conv_dw3_width columns of OLC_CONV_DWC lanes), then the
 * output positions with the channel innermost, copied out plane by plane.  An
 * output position's lanes are one vector whatever the plane's width, and
 * the per-plane costs (setup, padded copy) are shared by the block.  Each
 * element is summed as olc_conv_dw3 sums it (bias, then the three taps of
 * each row); lanes past nc are zeros, never written out. */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_conv_dwc, OLC_CN))(
        const olc_conv_geom *g, const OLC_CT *x, const OLC_CT *w, const OLC_CT *bias,
        int64_t nc, OLC_CT *restrict buf, OLC_CT *restrict y, int64_t r0, int64_t r1) {
    enum { L = OLC_CONV_DWC };
    const int64_t H = g->H, W = g->W, OH = r1 - r0, OW = g->OW, kh = g->kh;
    const int64_t sh = g->sh, sw = g->sw, dh = g->dh, dw = g->dw;
    const int64_t Hp = (OH - 1) * sh + (kh - 1) * dh + 1, Wp = olc_conv_dw3_width(g);
    const int64_t P = OH * OW, plane = g->OH * OW;
    y += r0 * OW;
    OLC_CT *restrict xb = buf, *restrict ob = buf + Hp * Wp * L;
    OLC_CT wt[OLC_CONV_DWC_MAX_KH * 3 * L], bs[L];
    for (int64_t i = 0; i < kh * 3 * L; ++i) wt[i] = 0;
    for (int64_t c = 0; c < L; ++c) bs[c] = 0;
    for (int64_t c = 0; c < nc; ++c) {
        for (int64_t i = 0; i < kh * 3; ++i) wt[i * L + c] = w[c * kh * 3 + i];
        if (bias != NULL) bs[c] = bias[c];
    }
    /* the padded copy: columns j < pw and j >= pw + W, rows outside the
     * input and lanes past nc are zeros */
    int64_t lo = g->pw < Wp ? g->pw : Wp;
    int64_t hi = g->pw + W < Wp ? g->pw + W : Wp;
    if (hi < lo) hi = lo;
    if (nc < L) memset(xb, 0, (size_t)(Hp * Wp * L) * sizeof(OLC_CT));
    for (int64_t i = 0; i < Hp; ++i) {
        OLC_CT *restrict d = xb + i * Wp * L;
        int64_t ih = r0 * sh + i - g->ph;
        if (ih < 0 || ih >= H) {
            memset(d, 0, (size_t)(Wp * L) * sizeof(OLC_CT));
            continue;
        }
        memset(d, 0, (size_t)(lo * L) * sizeof(OLC_CT));
        memset(d + hi * L, 0, (size_t)((Wp - hi) * L) * sizeof(OLC_CT));
        const OLC_CT *xr = x + ih * W + (lo - g->pw);
        if (nc == L) {
            int64_t j = 0;
            for (; j + 8 <= hi - lo; j += 8)
                OLC_FN(OLC_CAT(olc_conv_tr8, OLC_CN))(xr + j, H * W, d + (lo + j) * L, L);
            for (; j < hi - lo; ++j)
                for (int64_t c = 0; c < L; ++c) d[(lo + j) * L + c] = xr[c * H * W + j];
        } else {
            for (int64_t c = 0; c < nc; ++c)
                for (int64_t j = 0; j < hi - lo; ++j) d[(lo + j) * L + c] = xr[c * H * W + j];
        }
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
            OLC_CT acc[L];
            for (int64_t c = 0; c < L; ++c) acc[c] = bs[c];
            const OLC_CT *restrict xs = xb + (oh * sh * Wp + ow * sw) * L;
            if (kh == 3) { /* the rows unrolled */
                for (int64_t b = 0; b < 3; ++b) {
                    const OLC_CT *restrict xr = xs + b * dh * Wp * L;
                    const OLC_CT *restrict wb = wt + b * 3 * L;
                    for (int64_t c = 0; c < L; ++c)
                        acc[c] += wb[c] * xr[c] + wb[L + c] * xr[dw * L + c]
                            + wb[2 * L + c] * xr[2 * dw * L + c];
                }
            } else {
                for (int64_t b = 0; b < kh; ++b) {
                    const OLC_CT *restrict xr = xs + b * dh * Wp * L;
                    const OLC_CT *restrict wb = wt + b * 3 * L;
                    for (int64_t c = 0; c < L; ++c)
                        acc[c] += wb[c] * xr[c] + wb[L + c] * xr[dw * L + c]
                            + wb[2 * L + c] * xr[2 * dw * L + c];
                }
            }
            for (int64_t c = 0; c < L; ++c) ob[(oh * OW + ow) * L + c] = acc[c];
        }
    }
    /* back to planes, L positions at a time (a transpose of L x L) */
    int64_t p = 0;
    if (nc == L) {
        for (; p + L <= P; p += L)
            OLC_FN(OLC_CAT(olc_conv_tr8, OLC_CN))(ob + p * L, L, y + p, plane);
    }
    for (int64_t c = 0; c < nc; ++c)
        for (int64_t q = p; q < P; ++q) y[c * plane + q] = ob[q * L + c];
}
