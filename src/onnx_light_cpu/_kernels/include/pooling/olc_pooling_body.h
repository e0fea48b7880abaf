/* The pooling functions of one level (OLC_LVL) and element type
 * (OLC_POOLING_TN: f32, f64, i8, u8; OLC_POOLING_FLOAT 1 for the first two).
 * Included by olc_pooling_types.h; no include guard. */

#define OLC_POOLING_T OLC_CAT(olc_pooling_t, OLC_POOLING_TN)
#define OLC_POOLING_NAME(name) OLC_FN(OLC_CAT(name, OLC_POOLING_TN))

/* The output columns [*lo, *hi) whose input column ow * s + off lies in
 * [0, W). */
#ifndef OLC_POOLING_RANGE_DEFINED
#define OLC_POOLING_RANGE_DEFINED
static inline void olc_pooling_range(int64_t off, int64_t s, int64_t W, int64_t OW, int64_t *lo,
                                  int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = W - 1 - off < 0 ? 0 : (W - 1 - off) / s + 1;
    *lo = a;
    *hi = b < OW ? b : OW;
}
#endif

#if OLC_POOLING_F32
/* float32 planes [p0, p1) a row at a time (olc_pooling_rows_f32_<level>): the
 * valid input rows of each output row's window, then the row's columns;
 * AveragePool's division and LpPool's root follow in olc_pooling_sum. */
OLC_LVL_ATTR static void OLC_FN(olc_pooling_rowwise_f32)(const olc_pooling_args *a, int64_t p0, int64_t p1,
                                                     int op, float init, int divide) {
    const int64_t D = a->in[0], H = a->in[1], W = a->in[2];
    const int64_t OD = a->out[0], OH = a->out[1], OW = a->out[2];
    olc_pooling_rowspec spec = {OW, W, a->s[2], a->k[2], a->d[2], a->pb[2], op, init,
                             divide ? (const float *)a->cnt[2] : NULL, 1.0f, 0, 0, NULL};
    float t[op == OLC_POOLING_OP_MAX ? 1 : OLC_POOLING_TROW + 16];  /* once a task; + a vector's tail */
    spec.t = op == OLC_POOLING_OP_MAX ? NULL : t;
    olc_pooling_interior(&spec, &spec.a, &spec.b);
    if (op != OLC_POOLING_OP_SQ && D == 1 && a->k[0] == 1 && a->pb[0] == 0 && a->k[1] == 2
        && a->k[2] == 2 && a->s[1] == 2 && a->s[2] == 2 && a->d[1] == 1 && a->d[2] == 1
        && a->pb[1] == 0 && 2 * OH <= H && spec.a == 0 && spec.b == OW
        && OLC_FN(olc_pooling_pairs)(a, p0, p1, op, divide))
        return;
    const float *rows[OLC_POOLING_MAX_ROWS];
    for (int64_t pl = p0; pl < p1; ++pl) {
        const float *xp = (const float *)a->x + pl * D * H * W;
        float *yp = (float *)a->y + pl * OD * OH * OW;
        for (int64_t od = 0; od < OD; ++od)
            for (int64_t oh = 0; oh < OH; ++oh) {
                int nrows = 0;
                for (int64_t kd = 0; kd < a->k[0]; ++kd) {
                    int64_t id = od * a->s[0] - a->pb[0] + kd * a->d[0];
                    if (id < 0 || id >= D) continue;
                    for (int64_t kh = 0; kh < a->k[1]; ++kh) {
                        int64_t ih = oh * a->s[1] - a->pb[1] + kh * a->d[1];
                        if (ih < 0 || ih >= H) continue;
                        rows[nrows++] = xp + (id * H + ih) * W;
                    }
                }
                if (divide) spec.cdh = ((const float *)a->cnt[0])[od] * ((const float *)a->cnt[1])[oh];
                OLC_FN(olc_pooling_rows_sep)(yp + (od * OH + oh) * OW, rows, nrows, &spec);
            }
    }
}
#endif

OLC_LVL_ATTR static void OLC_POOLING_NAME(olc_pooling_maxidx)(const olc_pooling_args *a, int64_t p0,
                                                       int64_t p1);

/* Spatial max over planes [p0, p1): Y only. */
OLC_LVL_ATTR static void OLC_POOLING_NAME(olc_pooling_max)(const olc_pooling_args *a, int64_t p0, int64_t p1) {
    typedef OLC_POOLING_T T;
    const int64_t D = a->in[0], H = a->in[1], W = a->in[2];
    const int64_t OD = a->out[0], OH = a->out[1], OW = a->out[2];
    const int64_t sw = a->s[2];
#if OLC_POOLING_F32
    if (a->k[0] * a->k[1] <= OLC_POOLING_MAX_ROWS) {
        OLC_FN(olc_pooling_rowwise_f32)(a, p0, p1, OLC_POOLING_OP_MAX, -FLT_MAX, 0);
        return;
    }
#endif
#if OLC_POOLING_FLOAT
    /* the window's first tap seeds the max, as below (NaN there stays) */
    OLC_FN(OLC_CAT(olc_pooling_maxidx, OLC_POOLING_TN))(a, p0, p1);
    return;
#endif
    for (int64_t pl = p0; pl < p1; ++pl) {
        const T *xp = (const T *)a->x + pl * D * H * W;
        T *yp = (T *)a->y + pl * OD * OH * OW;
        for (int64_t od = 0; od < OD; ++od)
            for (int64_t oh = 0; oh < OH; ++oh) {
                T *restrict yr = yp + (od * OH + oh) * OW;
                for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = OLC_CAT(OLC_POOLING_LOWEST, OLC_POOLING_TN);
                for (int64_t kd = 0; kd < a->k[0]; ++kd) {
                    int64_t id = od * a->s[0] - a->pb[0] + kd * a->d[0];
                    if (id < 0 || id >= D) continue;
                    for (int64_t kh = 0; kh < a->k[1]; ++kh) {
                        int64_t ih = oh * a->s[1] - a->pb[1] + kh * a->d[1];
                        if (ih < 0 || ih >= H) continue;
                        const T *row = xp + (id * H + ih) * W;
                        for (int64_t kw = 0; kw < a->k[2]; ++kw) {
                            int64_t off = kw * a->d[2] - a->pb[2], lo, hi;
                            olc_pooling_range(off, sw, W, OW, &lo, &hi);
                            if (lo >= hi) continue;
                            const T *restrict b = row + lo * sw + off;
                            T *restrict yo = yr + lo;
                            const int64_t n = hi - lo;
                            if (sw == 1) {
                                for (int64_t j = 0; j < n; ++j) yo[j] = b[j] > yo[j] ? b[j] : yo[j];
                            } else if (sw == 2) {
                                for (int64_t j = 0; j < n; ++j)
                                    yo[j] = b[2 * j] > yo[j] ? b[2 * j] : yo[j];
                            } else {
                                for (int64_t j = 0; j < n; ++j)
                                    yo[j] = b[j * sw] > yo[j] ? b[j * sw] : yo[j];
                            }
                        }
                    }
                }
            }
    }
}

/* Spatial max with Indices (or without: a->idx NULL): the window's first
 * tap seeds the max, a later one replaces it only when greater (as ONNX
 * Runtime's loops: a NaN first tap stays, later NaN never win), so the
 * index is the first maximum in row-major order over the whole input (row-
 * or column-major spatial part). */
OLC_LVL_ATTR static void OLC_POOLING_NAME(olc_pooling_maxidx)(const olc_pooling_args *a, int64_t p0,
                                                       int64_t p1) {
    typedef OLC_POOLING_T T;
    const int64_t D = a->in[0], H = a->in[1], W = a->in[2];
    const int64_t OD = a->out[0], OH = a->out[1], OW = a->out[2];
    const int64_t plane = D * H * W;
    /* index strides of (d, h, w) */
    const int64_t sd = a->storage_order ? 1 : H * W, sh = a->storage_order ? D : W,
                  sx = a->storage_order ? D * H : 1;
    for (int64_t pl = p0; pl < p1; ++pl) {
        const T *xp = (const T *)a->x + pl * plane;
        T *yp = (T *)a->y + pl * OD * OH * OW;
        int64_t *ip = a->idx ? a->idx + pl * OD * OH * OW : NULL;
        for (int64_t od = 0; od < OD; ++od)
            for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow) {
                    T best = OLC_CAT(OLC_POOLING_LOWEST, OLC_POOLING_TN);
                    int64_t where = -1;
                    for (int64_t kd = 0; kd < a->k[0]; ++kd) {
                        int64_t id = od * a->s[0] - a->pb[0] + kd * a->d[0];
                        if (id < 0 || id >= D) continue;
                        for (int64_t kh = 0; kh < a->k[1]; ++kh) {
                            int64_t ih = oh * a->s[1] - a->pb[1] + kh * a->d[1];
                            if (ih < 0 || ih >= H) continue;
                            for (int64_t kw = 0; kw < a->k[2]; ++kw) {
                                int64_t iw = ow * a->s[2] - a->pb[2] + kw * a->d[2];
                                if (iw < 0 || iw >= W) continue;
                                T v = xp[(id * H + ih) * W + iw];
                                int64_t at = id * sd + ih * sh + iw * sx;
                                if (where < 0 || v > best) { best = v; where = at; }
                            }
                        }
                    }
                    int64_t o = (od * OH + oh) * OW + ow;
                    yp[o] = best;
                    if (ip) ip[o] = pl * plane + (where >= 0 ? where : 0);
                }
    }
}

#if OLC_POOLING_FLOAT
/* Spatial average (mode OLC_POOLING_AVG: divided by the counts a->cnt) or Lp
 * norm (OLC_POOLING_LP: |x|^p summed, then the 1/p power; padding adds 0). */
OLC_LVL_ATTR static void OLC_POOLING_NAME(olc_pooling_sum)(const olc_pooling_args *a, int64_t p0, int64_t p1) {
    typedef OLC_POOLING_T T;
    const int64_t D = a->in[0], H = a->in[1], W = a->in[2];
    const int64_t OD = a->out[0], OH = a->out[1], OW = a->out[2];
    const int64_t sw = a->s[2];
    const int lp = a->mode == OLC_POOLING_LP;
    const int how = !lp ? 0 : a->p == 1 ? 1 : a->p == 2 ? 2 : 3;
    const T p = (T)a->p, inv_p = (T)(1.0 / a->p);
    int fast = 0;
#if OLC_POOLING_F32
    if ((how == 0 || how == 2) && a->k[0] * a->k[1] <= OLC_POOLING_MAX_ROWS) {
        /* AveragePool divides as it stores; LpPool's root follows below */
        OLC_FN(olc_pooling_rowwise_f32)(a, p0, p1, how == 0 ? OLC_POOLING_OP_ADD : OLC_POOLING_OP_SQ, 0.0f,
                                     how == 0);
        if (how == 0) return;
        fast = 1;
    }
#endif
    for (int64_t pl = p0; pl < p1; ++pl) {
        const T *xp = (const T *)a->x + pl * D * H * W;
        T *yp = (T *)a->y + pl * OD * OH * OW;
        for (int64_t od = 0; od < OD; ++od)
            for (int64_t oh = 0; oh < OH; ++oh) {
                T *restrict yr = yp + (od * OH + oh) * OW;
                if (fast) goto finish;
                for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = 0;
                for (int64_t kd = 0; kd < a->k[0]; ++kd) {
                    int64_t id = od * a->s[0] - a->pb[0] + kd * a->d[0];
                    if (id < 0 || id >= D) continue;
                    for (int64_t kh = 0; kh < a->k[1]; ++kh) {
                        int64_t ih = oh * a->s[1] - a->pb[1] + kh * a->d[1];
                        if (ih < 0 || ih >= H) continue;
                        const T *row = xp + (id * H + ih) * W;
                        for (int64_t kw = 0; kw < a->k[2]; ++kw) {
                            int64_t off = kw * a->d[2] - a->pb[2], lo, hi;
                            olc_pooling_range(off, sw, W, OW, &lo, &hi);
                            if (lo >= hi) continue;
                            const T *restrict b = row + lo * sw + off;
                            T *restrict yo = yr + lo;
                            const int64_t n = hi - lo;
                            if (how == 0) {
                                if (sw == 1) for (int64_t j = 0; j < n; ++j) yo[j] += b[j];
                                else if (sw == 2) for (int64_t j = 0; j < n; ++j) yo[j] += b[2 * j];
                                else for (int64_t j = 0; j < n; ++j) yo[j] += b[j * sw];
                            } else if (how == 2) {
                                if (sw == 1) for (int64_t j = 0; j < n; ++j) yo[j] += b[j] * b[j];
                                else for (int64_t j = 0; j < n; ++j) yo[j] += b[j * sw] * b[j * sw];
                            } else if (how == 1) {
                                for (int64_t j = 0; j < n; ++j)
                                    yo[j] += OLC_CAT(OLC_POOLING_ABS, OLC_POOLING_TN)(b[j * sw]);
                            } else {
                                for (int64_t j = 0; j < n; ++j)
                                    yo[j] += OLC_CAT(OLC_POOLING_POW, OLC_POOLING_TN)(
                                        OLC_CAT(OLC_POOLING_ABS, OLC_POOLING_TN)(b[j * sw]), p);
                            }
                        }
                    }
                }
            finish:
                if (!lp) {
                    const T cdh = ((const T *)a->cnt[0])[od] * ((const T *)a->cnt[1])[oh];
                    const T *restrict cw = (const T *)a->cnt[2];
                    for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = yr[ow] / (cdh * cw[ow]);
                } else if (how == 2) {
                    for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = OLC_CAT(OLC_POOLING_SQRT, OLC_POOLING_TN)(yr[ow]);
                } else if (how == 3) {
                    for (int64_t ow = 0; ow < OW; ++ow)
                        yr[ow] = OLC_CAT(OLC_POOLING_POW, OLC_POOLING_TN)(yr[ow], inv_p);
                }
            }
    }
}

/* Global pools over planes [p0, p1) of a->HW elements: mode MAX, AVG or
 * LP.  Sixteen partial results per plane (element j into partial j % 16,
 * the lanes of one vector or two), combined in a fixed order. */
OLC_LVL_ATTR static void OLC_POOLING_NAME(olc_pooling_global)(const olc_pooling_args *a, int64_t p0,
                                                       int64_t p1) {
    typedef OLC_POOLING_T T;
    const int64_t n = a->HW;
    const int how = a->mode == OLC_POOLING_MAX ? 4 : a->mode == OLC_POOLING_AVG ? 0
                  : a->p == 1 ? 1 : a->p == 2 ? 2 : 3;
    const T p = (T)a->p, inv_p = (T)(1.0 / a->p);
    for (int64_t pl = p0; pl < p1; ++pl) {
        const T *restrict x = (const T *)a->x + pl * n;
#if OLC_POOLING_F32
        if (OLC_CAT(OLC_POOLING_GPLANE, OLC_LVL) && how != 3 && n > 0) {
            float r = OLC_FN(olc_pooling_gplane_f32)(x, n, how);
            if (how == 0) r = r / (float)n;
            else if (how == 2) r = sqrtf(r);
            ((float *)a->y)[pl] = r;
            continue;
        }
#endif
        T s[16];
        /* the max starts from the first element in every lane: a NaN there
         * stays, later ones never win (as MaxPool over the whole plane) */
        const T init = how == 4 ? (n > 0 ? x[0] : OLC_CAT(OLC_POOLING_LOWEST, OLC_POOLING_TN)) : 0;
        for (int l = 0; l < 16; ++l) s[l] = init;
        int64_t j = 0;
        if (how == 4) {
            for (; j + 16 <= n; j += 16)
                for (int l = 0; l < 16; ++l) s[l] = x[j + l] > s[l] ? x[j + l] : s[l];
            for (int l = 0; j + l < n; ++l) s[l] = x[j + l] > s[l] ? x[j + l] : s[l];
        } else if (how == 0) {
            for (; j + 16 <= n; j += 16)
                for (int l = 0; l < 16; ++l) s[l] += x[j + l];
            for (int l = 0; j + l < n; ++l) s[l] += x[j + l];
        } else if (how == 2) {
            for (; j + 16 <= n; j += 16)
                for (int l = 0; l < 16; ++l) s[l] += x[j + l] * x[j + l];
            for (int l = 0; j + l < n; ++l) s[l] += x[j + l] * x[j + l];
        } else if (how == 1) {
            for (; j + 16 <= n; j += 16)
                for (int l = 0; l < 16; ++l) s[l] += OLC_CAT(OLC_POOLING_ABS, OLC_POOLING_TN)(x[j + l]);
            for (int l = 0; j + l < n; ++l) s[l] += OLC_CAT(OLC_POOLING_ABS, OLC_POOLING_TN)(x[j + l]);
        } else {
            for (; j < n; ++j)
                s[j & 15] += OLC_CAT(OLC_POOLING_POW, OLC_POOLING_TN)(
                    OLC_CAT(OLC_POOLING_ABS, OLC_POOLING_TN)(x[j]), p);
        }
        T r;
        if (how == 4) {
            for (int w = 8; w >= 1; w /= 2)
                for (int l = 0; l < w; ++l) s[l] = s[l + w] > s[l] ? s[l + w] : s[l];
            r = s[0];
        } else {
            for (int w = 8; w >= 1; w /= 2)
                for (int l = 0; l < w; ++l) s[l] = s[l] + s[l + w];
            r = s[0];
            if (how == 0) r = r / (T)n;
            else if (how == 2) r = OLC_CAT(OLC_POOLING_SQRT, OLC_POOLING_TN)(r);
            else if (how == 3) r = OLC_CAT(OLC_POOLING_POW, OLC_POOLING_TN)(r, inv_p);
        }
        ((T *)a->y)[pl] = r;
    }
}

/* LRN over output planes [p0, p1) (t = n * C + c): the output plane holds
 * the sum of squares of the window's input planes, in channel order, then
 * x * (bias + alpha / size * sum)^-beta. */
OLC_LVL_ATTR static void OLC_POOLING_NAME(olc_pooling_lrn)(const olc_pooling_args *a, int64_t p0, int64_t p1) {
    typedef OLC_POOLING_T T;
    const int64_t C = a->C, HW = a->HW;
    const T k = (T)a->alpha_over_size, bias = (T)a->bias, nbeta = (T)(-a->beta);
    for (int64_t t = p0; t < p1; ++t) {
        const int64_t n = t / C, c = t % C;
        const int64_t c0 = c - a->lo < 0 ? 0 : c - a->lo, c1 = c + a->hi >= C ? C - 1 : c + a->hi;
        T *restrict yr = (T *)a->y + t * HW;
        const T *restrict xr = (const T *)a->x + t * HW;
        for (int64_t j = 0; j < HW; ++j) yr[j] = 0;
        for (int64_t cc = c0; cc <= c1; ++cc) {
            const T *restrict xc = (const T *)a->x + (n * C + cc) * HW;
            for (int64_t j = 0; j < HW; ++j) yr[j] += xc[j] * xc[j];
        }
#if OLC_POOLING_FLOAT
        if (sizeof(T) == 4) {
            float *yf = (float *)yr;
            for (int64_t j = 0; j < HW; ++j) yf[j] = olc_fmaf_((float)k, yf[j], (float)bias);
            OLC_FN(olc_log_f32)(yf, yf, HW);
            for (int64_t j = 0; j < HW; ++j) yf[j] *= (float)nbeta;
            OLC_FN(olc_exp_f32)(yf, yf, HW);
            for (int64_t j = 0; j < HW; ++j) yr[j] *= xr[j];
        } else {
            for (int64_t j = 0; j < HW; ++j) yr[j] = xr[j] * pow(bias + k * yr[j], nbeta);
        }
#endif
    }
}

/* MaxRoiPool over tasks [p0, p1) (t = roi * C + c): rois [R, 5] as
 * (batch, x1, y1, x2, y2), scaled and rounded to cells; each of the
 * ph x pw bins takes the max of its cells, 0 when it has none (as ONNX
 * Runtime). */
OLC_LVL_ATTR static void OLC_POOLING_NAME(olc_pooling_roi)(const olc_pooling_args *a, int64_t p0, int64_t p1) {
    typedef OLC_POOLING_T T;
    const int64_t C = a->C, H = a->in[1], W = a->in[2], PH = a->ph, PW = a->pw;
    const float sc = a->spatial_scale;
    for (int64_t t = p0; t < p1; ++t) {
        const int64_t r = t / C, c = t % C;
        const T *roi = (const T *)a->rois + r * 5;
        const int64_t b = (int64_t)roi[0];
        const int64_t ws = (int64_t)roundf((float)roi[1] * sc), hs = (int64_t)roundf((float)roi[2] * sc);
        const int64_t we = (int64_t)roundf((float)roi[3] * sc), he = (int64_t)roundf((float)roi[4] * sc);
        const int64_t rh = he - hs + 1 > 1 ? he - hs + 1 : 1, rw = we - ws + 1 > 1 ? we - ws + 1 : 1;
        const float bh = (float)rh / (float)PH, bw = (float)rw / (float)PW;
        const T *xp = (const T *)a->x + (b * C + c) * H * W;
        T *yp = (T *)a->y + t * PH * PW;
        for (int64_t i = 0; i < PH; ++i) {
            int64_t h0 = (int64_t)floorf((float)i * bh) + hs, h1 = (int64_t)ceilf((float)(i + 1) * bh) + hs;
            h0 = h0 < 0 ? 0 : h0 > H ? H : h0;
            h1 = h1 < 0 ? 0 : h1 > H ? H : h1;
            for (int64_t j = 0; j < PW; ++j) {
                int64_t w0 = (int64_t)floorf((float)j * bw) + ws, w1 = (int64_t)ceilf((float)(j + 1) * bw) + ws;
                w0 = w0 < 0 ? 0 : w0 > W ? W : w0;
                w1 = w1 < 0 ? 0 : w1 > W ? W : w1;
                T m = (h1 <= h0 || w1 <= w0) ? 0 : OLC_CAT(OLC_POOLING_LOWEST, OLC_POOLING_TN);
                for (int64_t h = h0; h < h1; ++h)
                    for (int64_t w = w0; w < w1; ++w) m = xp[h * W + w] > m ? xp[h * W + w] : m;
                yp[i * PW + j] = m;
            }
        }
    }
}
#endif /* OLC_POOLING_FLOAT */

#undef OLC_POOLING_T
#undef OLC_POOLING_NAME
