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

/* Depthwise rows of three taps at unit width stride (2-D or 1-D, one input
 * channel): output rows r0..r1 of one plane from xp, a zero-padded copy of
 * the input rows they read (row i of xp: padded row r0 * sh + i, Wp =
 * OW + 2 dw columns, column j: input column j - pw).  No bounds inside:
 * three taps a pass over the row. */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_conv_dw3, OLC_CN))(
        const olc_conv_geom *g, const OLC_CT *xp, int64_t Wp, const OLC_CT *w, OLC_CT bias,
        OLC_CT *restrict y, int64_t r0, int64_t r1) {
    const int64_t OW = g->OW, dw = g->dw;
    for (int64_t r = r0; r < r1; ++r) {
        OLC_CT *restrict yr = y + r * OW;
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = bias;
        for (int64_t b = 0; b < g->kh; ++b) {
            const OLC_CT *restrict xs = xp + ((r - r0) * g->sh + b * g->dh) * Wp;
            const OLC_CT w0 = w[3 * b], w1 = w[3 * b + 1], w2 = w[3 * b + 2];
            for (int64_t ow = 0; ow < OW; ++ow)
                yr[ow] += w0 * xs[ow] + w1 * xs[ow + dw] + w2 * xs[ow + 2 * dw];
        }
    }
}
