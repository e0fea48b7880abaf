/* Body (no include guard): DeformConv's sampling of one element type
 * OLC_CT (named OLC_CN) at one level; conv/olc_conv_deform.h includes it
 * once per level (common/olc_each_level.h) and type.  Plain C, no vector
 * intrinsics (the scalar level is the twin of the others, which differ by
 * the multiply-adds the target fuses): per sample, four loads and four
 * multiply-adds from corners and weights held in registers (AVX2 gathers
 * over eight columns measured slower on Zen 3: 7.2 against 6.3 ms for 64
 * -> 64 channels at 56x56). */

/* The bilinear taps of one kernel tap, offset group and image at columns
 * j0 .. j1 of a tile starting at output position p0 (only columns below n1
 * are real; the others, the packed layout's padding, sample nothing):
 * s->idx[c][j - j0] is the flat input index of corner c (top-left,
 * top-right, bottom-left, bottom-right) or -1 where the corner lies outside
 * the image, s->wt[c][j - j0] its weight times the mask.  The corner rows
 * and columns come from floor(offset) added as integers and the fractions
 * from offset - floor(offset), both exact, so a sample on the grid reads
 * one pixel with weight 1 whatever the position. */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_conv_deform_taps, OLC_CN))(
        const olc_conv_deform_geom *d, const OLC_CT *off_h, const OLC_CT *off_w,
        const OLC_CT *mask, int64_t tap, int64_t p0, int64_t n1, int64_t j0, int64_t j1,
        OLC_CAT(olc_conv_deform_samples, OLC_CN) *s) {
    const int64_t H = d->H, W = d->W, OW = d->OW;
    const int64_t bh = (tap / d->kw) * d->dh - d->ph, bw = (tap % d->kw) * d->dw - d->pw;
    for (int64_t j = j0; j < j1; ++j) {
        int64_t q = j - j0;
        OLC_CT oy = 0, ox = 0, m = 0;
        int inside = 0;
        double y0 = 0.0, x0 = 0.0;
        if (j < n1) {
            int64_t p = p0 + j, oh = p / OW, ow = p % OW;
            oy = off_h[p];
            ox = off_w[p];
            m = mask != NULL ? mask[p] : (OLC_CT)1;
            OLC_CT fy = (OLC_CT)floor((double)oy), fx = (OLC_CT)floor((double)ox);
            y0 = (double)(oh * d->sh + bh) + (double)fy;
            x0 = (double)(ow * d->sw + bw) + (double)fx;
            oy -= fy; /* the fractions, exact */
            ox -= fx;
            /* NaN fails every comparison: no sample */
            inside = y0 >= -1.0 && y0 <= (double)(H - 1) && x0 >= -1.0
                     && x0 <= (double)(W - 1);
        }
        if (!inside) {
            /* no pixel, but 0 times the mask: a NaN or infinite mask gives
             * NaN, as in ONNX Runtime and the onnx.reference built-in */
            for (int c = 0; c < 4; ++c) {
                s->idx[c][q] = -1;
                s->wt[c][q] = (OLC_CT)0 * m;
            }
            continue;
        }
        int64_t iy = (int64_t)y0, ix = (int64_t)x0;
        OLC_CT ay = (OLC_CT)1 - oy, ax = (OLC_CT)1 - ox;
        int top = iy >= 0, bottom = iy + 1 < H, left = ix >= 0, right = ix + 1 < W;
        int64_t at = iy * W + ix;
        s->idx[0][q] = top && left ? (int32_t)at : -1;
        s->idx[1][q] = top && right ? (int32_t)(at + 1) : -1;
        s->idx[2][q] = bottom && left ? (int32_t)(at + W) : -1;
        s->idx[3][q] = bottom && right ? (int32_t)(at + W + 1) : -1;
        s->wt[0][q] = ay * ax * m;
        s->wt[1][q] = ay * ox * m;
        s->wt[2][q] = oy * ax * m;
        s->wt[3][q] = oy * ox * m;
    }
}

/* The rows of channels c0 .. c1 of one tap for columns j0 .. j1 of x's
 * planes (plane elements apart, rows W wide), channel after channel for
 * each column (its corners and weights stay in registers): column j of
 * channel c goes to out[row[c - c0] + (q / nr) * pst[c - c0] + q % nr],
 * q = j - j0 (panels of nr columns pst apart; plain rows: pst 0, nr past
 * j1); at most OLC_CONV_DEFORM_ROWS channels.  A corner outside the image adds nothing, not 0 times a pixel. */
OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_conv_deform_rows, OLC_CN))(
        const OLC_CAT(olc_conv_deform_samples, OLC_CN) *s, const OLC_CT *x, int64_t plane,
        int64_t W, int64_t c0, int64_t c1, const int64_t *row, const int64_t *pst, int64_t j0,
        int64_t j1, int64_t nr, OLC_CT *out) {
    OLC_CT *dst[OLC_CONV_DEFORM_ROWS];
    for (int64_t j = j0; j < j1; ++j) {
        const int64_t q = j - j0, qb = q % nr;
        if (q == 0 || qb == 0) /* a new panel: the rows' starts in it */
            for (int64_t c = c0; c < c1; ++c)
                dst[c - c0] = out + row[c - c0] + (q / nr) * pst[c - c0];
        const int32_t i0 = s->idx[0][q], i1 = s->idx[1][q], i2 = s->idx[2][q],
                      i3 = s->idx[3][q];
        const OLC_CT w0 = s->wt[0][q], w1 = s->wt[1][q], w2 = s->wt[2][q], w3 = s->wt[3][q];
        const OLC_CT *xc = x + c0 * plane;
        if (i0 >= 0 && i3 >= 0) { /* all four inside: i1 = i0 + 1, i2 = i0 + W */
            for (int64_t c = c0; c < c1; ++c, xc += plane) {
                const OLC_CT *t = xc + i0;
                dst[c - c0][qb] = w0 * t[0] + w1 * t[1] + w2 * t[W] + w3 * t[W + 1];
            }
            continue;
        }
        for (int64_t c = c0; c < c1; ++c, xc += plane) {
            OLC_CT v = w0 * (i0 >= 0 ? xc[i0] : (OLC_CT)0);
            v = v + w1 * (i1 >= 0 ? xc[i1] : (OLC_CT)0);
            v = v + w2 * (i2 >= 0 ? xc[i2] : (OLC_CT)0);
            dst[c - c0][qb] = v + w3 * (i3 >= 0 ? xc[i3] : (OLC_CT)0);
        }
    }
}
