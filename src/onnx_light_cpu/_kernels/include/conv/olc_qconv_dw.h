/* Body (no include guard): one plane of the 8-bit depthwise convolution,
 * compiled once per level (olc_qconv.h includes it through
 * common/olc_each_level.h); the same C at every level, which the compiler
 * vectorises for the level's target (the scalar level is the twin).
 *
 * y (OD x OH x OW int32) = sum over the taps inside the image of
 * (x - zp) (w - w_zp): the bytes of x read as (byte ^ flip), zp in that
 * domain, w the plane's kd*kh*kw weights already minus their zero point
 * (both factors fit int16, so the product widens from int16).  Sums are
 * taken modulo 2^32, as int32 accumulation is.
 *
 * At unit strides in height and width (olc_qconv_dw_long) a depth slice is
 * first copied, centred and padded with zeros, into int16 rows of the
 * padded width Wp; each tap is then one long loop over OH * Wp sums (the
 * Wp - OW columns past each row are computed and dropped), which the
 * compiler vectorises without the short rows' scalar tails.  The sums of
 * one output take the taps in the same order on both paths. */

/* The unit-stride form; xp (Hp x Wp int16) and acc (OH x Wp int32) are
 * the caller's scratch. */
OLC_LVL_ATTR static void OLC_FN(olc_qconv_dw_long)(const olc_conv_geom *g,
                                                   const uint8_t *restrict src, uint8_t flip,
                                                   int32_t zp, const int32_t *w,
                                                   int32_t *restrict y, int16_t *restrict xp,
                                                   uint32_t *restrict acc) {
    const int64_t OH = g->OH, OW = g->OW;
    const int64_t Hp = OH + (g->kh - 1) * g->dh, Wp = OW + (g->kw - 1) * g->dw;
    const int64_t len = (OH - 1) * Wp + OW;
    const int16_t z = (int16_t)zp;
    for (int64_t od = 0; od < g->OD; od++) {
        memset(acc, 0, (size_t)(OH * Wp) * sizeof(uint32_t));
        for (int64_t a = 0; a < g->kd; a++) {
            const int64_t id = od * g->sd - g->pd + a * g->dd;
            if (id < 0 || id >= g->D) continue;
            /* the centred, zero-padded slice */
            for (int64_t r = 0; r < Hp; r++) {
                int16_t *restrict xr = xp + r * Wp;
                const int64_t ih = r - g->ph;
                if (ih < 0 || ih >= g->H) {
                    memset(xr, 0, (size_t)Wp * sizeof(int16_t));
                    continue;
                }
                const uint8_t *restrict in = src + (id * g->H + ih) * g->W;
                /* columns c = iw + pw: zeros, the row, zeros */
                const int64_t c0 = g->pw < Wp ? g->pw : Wp;
                const int64_t c1 = g->pw + g->W < Wp ? g->pw + g->W : Wp;
                memset(xr, 0, (size_t)c0 * sizeof(int16_t));
                OLC_FN(olc_qconv_dw_widen)(xr + c0, in + c0 - g->pw, c1 - c0, flip, z);
                memset(xr + c1, 0, (size_t)(Wp - c1) * sizeof(int16_t));
            }
            const int64_t done = g->dw == 1 ? OLC_FN(olc_qconv_dw_pairs)(
                                                  xp, Wp, len, w + a * g->kh * g->kw, g->kh,
                                                  g->kw, g->dh, acc)
                                            : 0;
            for (int64_t b = 0; b < g->kh; b++)
                for (int64_t e = 0; e < g->kw; e++) {
                    const int16_t wv = (int16_t)w[(a * g->kh + b) * g->kw + e];
                    const int16_t *restrict xs = xp + b * g->dh * Wp + e * g->dw;
                    for (int64_t i = done; i < len; i++)
                        acc[i] += (uint32_t)((int32_t)xs[i] * (int32_t)wv);
                }
        }
        for (int64_t oh = 0; oh < OH; oh++)
            memcpy(y + (od * OH + oh) * OW, acc + oh * Wp, (size_t)OW * sizeof(int32_t));
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_qconv_dw_plane)(const olc_conv_geom *g,
                                                    const uint8_t *restrict src, uint8_t flip,
                                                    int32_t zp, const int32_t *w,
                                                    int32_t *restrict y) {
    const int64_t OW = g->OW, P = g->OD * g->OH * OW, s = g->sw;
    uint32_t *restrict acc = (uint32_t *)y;
    const int16_t z = (int16_t)zp;
    memset(acc, 0, (size_t)P * sizeof(uint32_t));
    for (int64_t od = 0; od < g->OD; od++)
        for (int64_t a = 0; a < g->kd; a++) {
            const int64_t id = od * g->sd - g->pd + a * g->dd;
            if (id < 0 || id >= g->D) continue;
            for (int64_t oh = 0; oh < g->OH; oh++) {
                uint32_t *restrict row = acc + (od * g->OH + oh) * OW;
                for (int64_t b = 0; b < g->kh; b++) {
                    const int64_t ih = oh * g->sh - g->ph + b * g->dh;
                    if (ih < 0 || ih >= g->H) continue;
                    const uint8_t *restrict line = src + (id * g->H + ih) * g->W;
                    for (int64_t e = 0; e < g->kw; e++) {
                        int64_t lo, hi;
                        olc_qconv_valid(g->W, OW, s, g->pw, e, g->dw, &lo, &hi);
                        const int16_t wv = (int16_t)w[(a * g->kh + b) * g->kw + e];
                        const uint8_t *restrict in = line + e * g->dw - g->pw;
                        if (s == 1)
                            for (int64_t ow = lo; ow < hi; ow++) {
                                const int16_t xv = (int16_t)(uint8_t)(in[ow] ^ flip) - z;
                                row[ow] += (uint32_t)((int32_t)xv * (int32_t)wv);
                            }
                        else
                            for (int64_t ow = lo; ow < hi; ow++) {
                                const int16_t xv = (int16_t)(uint8_t)(in[ow * s] ^ flip) - z;
                                row[ow] += (uint32_t)((int32_t)xv * (int32_t)wv);
                            }
                    }
                }
            }
        }
}
