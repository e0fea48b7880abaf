/* Body (no include guard): col2im of one element type OLC_CT (named
 * OLC_CN); olc_conv.h includes it once per type. */

/* Channel c of the image y (OD x OH x OW, one plane) += the columns of its
 * taps: rows c * kk + tap of col (ld apart), columns l0 .. l0+lt of the
 * D x H x W grid.  Order: tap, then column: fixed. */
static void OLC_CAT(olc_conv_col2im, OLC_CN)(const olc_conv_geom *g, const OLC_CT *col, int64_t ld,
                                             int64_t l0, int64_t lt, OLC_CT *plane) {
    int64_t kk = g->kd * g->kh * g->kw;
    for (int64_t tap = 0; tap < kk; ++tap) {
        int64_t a = tap / (g->kh * g->kw), b = (tap / g->kw) % g->kh, e = tap % g->kw;
        const OLC_CT *cr = col + tap * ld;
        int64_t l = l0, j = 0;
        while (j < lt) {
            int64_t iw = l % g->W, ih = (l / g->W) % g->H, id = l / (g->W * g->H);
            int64_t L = g->W - iw < lt - j ? g->W - iw : lt - j;
            int64_t od = id * g->sd - g->pd + a * g->dd, oh = ih * g->sh - g->ph + b * g->dh;
            if (od >= 0 && od < g->OD && oh >= 0 && oh < g->OH) {
                OLC_CT *yr = plane + (od * g->OH + oh) * g->OW;
                const OLC_CT *src = cr + j;
                int64_t ow0 = iw * g->sw - g->pw + e * g->dw, s = g->sw;
                int64_t lo = ow0 >= 0 ? 0 : (-ow0 + s - 1) / s;
                int64_t hi = g->OW - ow0 > 0 ? (g->OW - ow0 + s - 1) / s : 0;
                if (hi > L) hi = L;
                if (s == 1) {
                    OLC_CT *yo = yr + ow0;
                    for (int64_t t = lo; t < hi; ++t) yo[t] += src[t];
                } else {
                    for (int64_t t = lo; t < hi; ++t) yr[ow0 + t * s] += src[t];
                }
            }
            j += L;
            l += L;
        }
    }
}
