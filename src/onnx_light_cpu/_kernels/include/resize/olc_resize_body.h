/* Resize axis passes, one level (see resize/olc_resize.h): lines
 * [i0, i1) of one pass, float32 then float64, plane by plane.  Lines that
 * are rows (inner > 1) are sums of scaled source rows, which the level's
 * target attribute lets the compiler vectorize; lines of one element
 * (the last axis) are gather-dots.  Every line sums its taps in order (the
 * first product, then each next one added).  No include guard: included
 * once per level by common/olc_each_level.h. */

/* Lines of single elements (the last axis): gather-dots, kept scalar at
 * every level (gathers were slower here than scalar loads). */
__attribute__((noinline)) static void OLC_FN(olc_resize_f32_line)(float *restrict dst, const float *restrict base, const int64_t *restrict idx,
                               const float *restrict w, int64_t taps, int64_t y0, int64_t y1) {
    if (taps == 2) {
#if defined(__clang__)
#pragma clang loop vectorize(disable)
#endif
        for (int64_t y = y0; y < y1; ++y) {
            float acc = w[2 * y] * base[idx[2 * y]];
            acc += w[2 * y + 1] * base[idx[2 * y + 1]];
            dst[y - y0] = acc;
        }
        return;
    }
    for (int64_t y = y0; y < y1; ++y) {
        const int64_t *ix = idx + y * taps;
        const float *wy = w + y * taps;
        float acc = wy[0] * base[ix[0]];
        for (int64_t t = 1; t < taps; ++t) acc += wy[t] * base[ix[t]];
        dst[y - y0] = acc;
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_resize_f32)(const olc_resize_axis *a, int64_t i0, int64_t i1) {
    const float *in = (const float *)a->in;
    float *out = (float *)a->out;
    const float *w = (const float *)a->w;
    const int64_t inner = a->inner, taps = a->taps, out_len = a->out_len;
    int64_t o = i0 / out_len, y0 = i0 % out_len;
    for (int64_t i = i0; i < i1; o++, y0 = 0) {
        /* lines (o, y0) .. (o, y1 - 1): one input plane */
        int64_t y1 = out_len < y0 + (i1 - i) ? out_len : y0 + (i1 - i);
        const float *base = in + o * a->in_len * inner;
        float *row = out + i * inner;
        if (inner == 1) {
            OLC_FN(olc_resize_f32_line)(row, base, a->idx, w, taps, y0, y1);
        } else {
            for (int64_t y = y0; y < y1; ++y) {
                float *dst = row + (y - y0) * inner;
                const int64_t *ix = a->idx + y * taps;
                const float *wy = w + y * taps;
                const float *s0 = base + ix[0] * inner;
                const float w0 = wy[0];
                for (int64_t k = 0; k < inner; ++k) dst[k] = w0 * s0[k];
                for (int64_t t = 1; t < taps; ++t) {
                    const float *st = base + ix[t] * inner;
                    const float wt = wy[t];
                    for (int64_t k = 0; k < inner; ++k) dst[k] += wt * st[k];
                }
            }
        }
        if (a->extrap) {
            for (int64_t y = y0; y < y1; ++y)
                if (a->extrap[y])
                    for (int64_t k = 0; k < inner; ++k) row[(y - y0) * inner + k] = (float)a->ext;
        }
        i += y1 - y0;
    }
}

/* Lines of single elements (the last axis): gather-dots, kept scalar at
 * every level (gathers were slower here than scalar loads). */
__attribute__((noinline)) static void OLC_FN(olc_resize_f64_line)(double *restrict dst, const double *restrict base, const int64_t *restrict idx,
                               const double *restrict w, int64_t taps, int64_t y0, int64_t y1) {
    if (taps == 2) {
#if defined(__clang__)
#pragma clang loop vectorize(disable)
#endif
        for (int64_t y = y0; y < y1; ++y) {
            double acc = w[2 * y] * base[idx[2 * y]];
            acc += w[2 * y + 1] * base[idx[2 * y + 1]];
            dst[y - y0] = acc;
        }
        return;
    }
    for (int64_t y = y0; y < y1; ++y) {
        const int64_t *ix = idx + y * taps;
        const double *wy = w + y * taps;
        double acc = wy[0] * base[ix[0]];
        for (int64_t t = 1; t < taps; ++t) acc += wy[t] * base[ix[t]];
        dst[y - y0] = acc;
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_resize_f64)(const olc_resize_axis *a, int64_t i0, int64_t i1) {
    const double *in = (const double *)a->in;
    double *out = (double *)a->out;
    const double *w = (const double *)a->w;
    const int64_t inner = a->inner, taps = a->taps, out_len = a->out_len;
    int64_t o = i0 / out_len, y0 = i0 % out_len;
    for (int64_t i = i0; i < i1; o++, y0 = 0) {
        /* lines (o, y0) .. (o, y1 - 1): one input plane */
        int64_t y1 = out_len < y0 + (i1 - i) ? out_len : y0 + (i1 - i);
        const double *base = in + o * a->in_len * inner;
        double *row = out + i * inner;
        if (inner == 1) {
            OLC_FN(olc_resize_f64_line)(row, base, a->idx, w, taps, y0, y1);
        } else {
            for (int64_t y = y0; y < y1; ++y) {
                double *dst = row + (y - y0) * inner;
                const int64_t *ix = a->idx + y * taps;
                const double *wy = w + y * taps;
                const double *s0 = base + ix[0] * inner;
                const double w0 = wy[0];
                for (int64_t k = 0; k < inner; ++k) dst[k] = w0 * s0[k];
                for (int64_t t = 1; t < taps; ++t) {
                    const double *st = base + ix[t] * inner;
                    const double wt = wy[t];
                    for (int64_t k = 0; k < inner; ++k) dst[k] += wt * st[k];
                }
            }
        }
        if (a->extrap) {
            for (int64_t y = y0; y < y1; ++y)
                if (a->extrap[y])
                    for (int64_t k = 0; k < inner; ++k) row[(y - y0) * inner + k] = (double)a->ext;
        }
        i += y1 - y0;
    }
}
