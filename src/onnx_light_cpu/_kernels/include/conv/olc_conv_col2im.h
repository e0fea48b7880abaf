/* Body (no include guard): col2im of one element type OLC_CT (named
 * OLC_CN); olc_conv.h includes it once per type. */

/* Channel c of the image y (OD x OH x OW, one plane) += the columns of its
 * taps: rows c * kk + tap of col (ld apart), columns l0 .. l0+lt of the
 * D x H x W grid.  Order: tap, then column: fixed. */
static void OLC_CAT(olc_conv_col2im, OLC_CN)(const olc_conv_geom *g, const OLC_CT *col, int64_t ld,
                                             int64_t l0, int64_t lt, OLC_CT *plane) {
    int64_t kk = g->kd * g->kh * g->kw, s = g->sw;
    /* the grid position of column l0 and the tap's offsets, stepped along
     * (a division per row cost more than the adds of a 32-column row:
     * ConvTranspose 4x4/2 64 -> 32 at 32x32, in one process alternating,
     * 1 thread 989 -> 930 us, 2 threads 607 -> 574, batch 8 4.61 -> 4.33 ms) */
    int64_t iw0 = l0 % g->W, ih0 = (l0 / g->W) % g->H, id0 = l0 / (g->W * g->H);
    int64_t a = 0, b = 0, e = 0;
    for (int64_t tap = 0; tap < kk; ++tap) {
        const OLC_CT *cr = col + tap * ld;
        int64_t iw = iw0, ih = ih0, id = id0;
        for (int64_t j = 0; j < lt;) {
            int64_t L = g->W - iw < lt - j ? g->W - iw : lt - j;
            int64_t od = id * g->sd - g->pd + a * g->dd, oh = ih * g->sh - g->ph + b * g->dh;
            if (od >= 0 && od < g->OD && oh >= 0 && oh < g->OH) {
                OLC_CT *yr = plane + (od * g->OH + oh) * g->OW;
                const OLC_CT *src = cr + j;
                int64_t ow0 = iw * s - g->pw + e * g->dw;
                int64_t lo = ow0 >= 0 ? 0 : olc_conv_ceil_div(-ow0, s);
                int64_t hi = g->OW - ow0 > 0 ? olc_conv_ceil_div(g->OW - ow0, s) : 0;
                if (hi > L) hi = L;
                if (s == 1) {
                    OLC_CT *yo = yr + ow0;
                    for (int64_t t = lo; t < hi; ++t) yo[t] += src[t];
                } else {
                    for (int64_t t = lo; t < hi; ++t) yr[ow0 + t * s] += src[t];
                }
            }
            j += L; /* the next row of the grid */
            iw = 0;
            if (++ih == g->H) {
                ih = 0;
                ++id;
            }
        }
        olc_conv_next_tap(g, &a, &b, &e);
    }
}
