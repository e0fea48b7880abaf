/* Resize axis passes, one level (see resize/olc_resize.h): lines
 * [i0, i1) of one pass, float32 then float64.  Two taps on the last axis
 * (bilinear) sum as w0 * x0 + w1 * x1, as the general loop does.  No
 * include guard: included once per level by common/olc_each_level.h. */

OLC_LVL_ATTR static void OLC_FN(olc_resize_f32)(const olc_resize_axis *a, int64_t i0, int64_t i1) {
    const float *in = (const float *)a->in;
    float *out = (float *)a->out;
    const float *w = (const float *)a->w;
    const int64_t inner = a->inner, taps = a->taps, out_len = a->out_len;
    int64_t o = i0 / out_len, y = i0 % out_len;
    const float *base = in + o * a->in_len * inner;
    for (int64_t i = i0; i < i1; ++i) {
        float *dst = out + i * inner;
        const int64_t *ix = a->idx + y * taps;
        const float *wy = w + y * taps;
        if (a->extrap && a->extrap[y]) {
            for (int64_t k = 0; k < inner; ++k) dst[k] = (float)a->ext;
        } else if (inner == 1 && taps == 2) {
            float acc = wy[0] * base[ix[0]];
            acc += wy[1] * base[ix[1]];
            dst[0] = acc;
        } else if (inner == 1) {
            float acc = wy[0] * base[ix[0]];
            for (int64_t t = 1; t < taps; ++t) acc += wy[t] * base[ix[t]];
            dst[0] = acc;
        } else {
            const float *s0 = base + ix[0] * inner;
            const float w0 = wy[0];
            for (int64_t k = 0; k < inner; ++k) dst[k] = w0 * s0[k];
            for (int64_t t = 1; t < taps; ++t) {
                const float *st = base + ix[t] * inner;
                const float wt = wy[t];
                for (int64_t k = 0; k < inner; ++k) dst[k] += wt * st[k];
            }
        }
        if (++y == out_len) {
            y = 0;
            base += a->in_len * inner;
        }
    }
}

OLC_LVL_ATTR static void OLC_FN(olc_resize_f64)(const olc_resize_axis *a, int64_t i0, int64_t i1) {
    const double *in = (const double *)a->in;
    double *out = (double *)a->out;
    const double *w = (const double *)a->w;
    const int64_t inner = a->inner, taps = a->taps, out_len = a->out_len;
    int64_t o = i0 / out_len, y = i0 % out_len;
    const double *base = in + o * a->in_len * inner;
    for (int64_t i = i0; i < i1; ++i) {
        double *dst = out + i * inner;
        const int64_t *ix = a->idx + y * taps;
        const double *wy = w + y * taps;
        if (a->extrap && a->extrap[y]) {
            for (int64_t k = 0; k < inner; ++k) dst[k] = (double)a->ext;
        } else if (inner == 1 && taps == 2) {
            double acc = wy[0] * base[ix[0]];
            acc += wy[1] * base[ix[1]];
            dst[0] = acc;
        } else if (inner == 1) {
            double acc = wy[0] * base[ix[0]];
            for (int64_t t = 1; t < taps; ++t) acc += wy[t] * base[ix[t]];
            dst[0] = acc;
        } else {
            const double *s0 = base + ix[0] * inner;
            const double w0 = wy[0];
            for (int64_t k = 0; k < inner; ++k) dst[k] = w0 * s0[k];
            for (int64_t t = 1; t < taps; ++t) {
                const double *st = base + ix[t] * inner;
                const double wt = wy[t];
                for (int64_t k = 0; k < inner; ++k) dst[k] += wt * st[k];
            }
        }
        if (++y == out_len) {
            y = 0;
            base += a->in_len * inner;
        }
    }
}
