/* Resize axis passes, one level and element type (see resize/olc_resize.h):
 * lines [i0, i1) of one pass, plane by plane, on OLC_RT (float or double,
 * named OLC_RN: f32, f64): olc_resize_<type>_<level>.  Lines that
 * are rows (inner > 1) are sums of scaled source rows, which the level's
 * target attribute lets the compiler vectorize; lines of one element
 * (the last axis) are gather-dots.  Every line sums its taps in order (the
 * first product, then each next one added).  No include guard: included
 * once per level by common/olc_each_level.h, once per type. */

/* Lines of single elements (the last axis): gather-dots, kept scalar at
 * every level (gathers were slower here than scalar loads). */
__attribute__((noinline)) static void OLC_FN(OLC_CAT(OLC_CAT(olc_resize, OLC_RN), line))(
        OLC_RT *restrict dst, const OLC_RT *restrict base, const int64_t *restrict idx, const OLC_RT *restrict w,
        int64_t taps, int64_t y0, int64_t y1) {
    if (taps == 2) {
#if defined(__clang__)
#pragma clang loop vectorize(disable)
#endif
        for (int64_t y = y0; y < y1; ++y) {
            OLC_RT acc = w[2 * y] * base[idx[2 * y]];
            acc += w[2 * y + 1] * base[idx[2 * y + 1]];
            dst[y - y0] = acc;
        }
        return;
    }
    for (int64_t y = y0; y < y1; ++y) {
        const int64_t *ix = idx + y * taps;
        const OLC_RT *wy = w + y * taps;
        OLC_RT acc = wy[0] * base[ix[0]];
        for (int64_t t = 1; t < taps; ++t) acc += wy[t] * base[ix[t]];
        dst[y - y0] = acc;
    }
}

OLC_LVL_ATTR static void OLC_FN(OLC_CAT(olc_resize, OLC_RN))(const olc_resize_axis *a, int64_t i0, int64_t i1) {
    const OLC_RT *in = (const OLC_RT *)a->in;
    OLC_RT *out = (OLC_RT *)a->out;
    const OLC_RT *w = (const OLC_RT *)a->w;
    const int64_t inner = a->inner, taps = a->taps, out_len = a->out_len;
    int64_t o = i0 / out_len, y0 = i0 % out_len;
    for (int64_t i = i0; i < i1; o++, y0 = 0) {
        /* lines (o, y0) .. (o, y1 - 1): one input plane */
        int64_t y1 = out_len < y0 + (i1 - i) ? out_len : y0 + (i1 - i);
        const OLC_RT *base = in + o * a->in_len * inner;
        OLC_RT *row = out + i * inner;
        if (inner == 1) {
            OLC_FN(OLC_CAT(OLC_CAT(olc_resize, OLC_RN), line))(row, base, a->idx, w, taps, y0, y1);
        } else {
            for (int64_t y = y0; y < y1; ++y) {
                OLC_RT *dst = row + (y - y0) * inner;
                const int64_t *ix = a->idx + y * taps;
                const OLC_RT *wy = w + y * taps;
                const OLC_RT *s0 = base + ix[0] * inner;
                const OLC_RT w0 = wy[0];
                for (int64_t k = 0; k < inner; ++k) dst[k] = w0 * s0[k];
                for (int64_t t = 1; t < taps; ++t) {
                    const OLC_RT *st = base + ix[t] * inner;
                    const OLC_RT wt = wy[t];
                    for (int64_t k = 0; k < inner; ++k) dst[k] += wt * st[k];
                }
            }
        }
        if (a->extrap) {
            for (int64_t y = y0; y < y1; ++y)
                if (a->extrap[y])
                    for (int64_t k = 0; k < inner; ++k) row[(y - y0) * inner + k] = (OLC_RT)a->ext;
        }
        i += y1 - y0;
    }
}

