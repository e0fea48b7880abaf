/* Body (no include guard): one plane of the 8-bit depthwise convolution,
 * compiled once per level (olc_qconv.h includes it through
 * common/olc_each_level.h); the same C at every level, which the compiler
 * vectorises for the level's target (the scalar level is the twin).
 *
 * y (OD x OH x OW int32) = sum over the taps inside the image of
 * (x - zp) (w - w_zp): the bytes of x read as (byte ^ flip), zp in that
 * domain, w the plane's kd*kh*kw weights already minus their zero point
 * (both factors fit int16, so the product widens from int16).  Sums are
 * taken modulo 2^32, as int32 accumulation is. */

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
