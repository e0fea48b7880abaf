/* Convolution family: Conv, ConvTranspose, Col2Im, com.microsoft FusedConv.
 *
 * Every shape is seen as 3-D (1-D and 2-D get leading unit axes); the
 * geometry travels as 19 int64 (olc_conv_geom).  Half types are widened
 * to float32 by the adapter; the cores take float32 or double.
 *
 * float32 Conv runs the GEMM engine (engines/gemm/olc_gemm.h): per image,
 * group and tile of output columns, the columns (im2col) are written
 * straight into the engine's packed-B layout (olc_conv_pack_cols), then
 * Y[rows of the group, tile] = W_g (read in place: the "direct"
 * micro-kernels) x packed columns.  A 1x1, stride-1, unpadded convolution
 * is a plain GEMM on X (no im2col).  Tiles hold at most OLC_CONV_TILE_FLOATS
 * floats of columns, never one huge column buffer.  Bias, the Z input of
 * FusedConv and the activation are applied to each tile while it is in
 * cache (olc_conv_epilogue).  K is never split: an output element is summed
 * in the same order whatever the tiling and the thread count.
 *
 * Depthwise (group == C == M) and double run a direct loop
 * (olc_conv_direct.h, per level and type), vectorised over the output
 * width; ConvTranspose in float32 is W_g^T X_g by the GEMM engine into a
 * column tile, then a scatter-add (olc_conv_col2im) per output channel, in
 * a fixed order.  Col2Im is that scatter-add alone.
 */
#ifndef OLC_CONV_H
#define OLC_CONV_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "engines/gemm/olc_gemm.h"

/* Floats of one packed column tile, at most (1 MB): it stays in L2 while
 * the micro-kernels sweep it. */
#define OLC_CONV_TILE_FLOATS (256 * 1024)

/* Geometry: C (channels of one group's input), D, H, W (input), kd, kh, kw,
 * sd, sh, sw (strides), pd, ph, pw (pads at the start), dd, dh, dw
 * (dilations), OD, OH, OW (output; for ConvTranspose and Col2Im the roles
 * swap: D, H, W is the grid of columns, OD, OH, OW the image). */
typedef struct {
    int64_t C, D, H, W, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, OD, OH, OW;
} olc_conv_geom;

enum { OLC_CONV_NONE = 0, OLC_CONV_RELU, OLC_CONV_TANH, OLC_CONV_SIGMOID, OLC_CONV_LEAKY,
       OLC_CONV_CLIP, OLC_CONV_HARDSIGMOID };

static inline float olc_conv_act(float v, int act, float a, float b) {
    switch (act) {
    case OLC_CONV_RELU: return v > 0.0f ? v : 0.0f;
    case OLC_CONV_TANH: return tanhf(v);
    case OLC_CONV_SIGMOID: return v >= 0.0f ? 1.0f / (1.0f + expf(-v)) : expf(v) / (1.0f + expf(v));
    case OLC_CONV_LEAKY: return v >= 0.0f ? v : a * v;
    case OLC_CONV_CLIP: return v < a ? a : (v > b ? b : v);
    case OLC_CONV_HARDSIGMOID: {
        float h = a * v + b;
        return h < 0.0f ? 0.0f : (h > 1.0f ? 1.0f : h);
    }
    default: return v;
    }
}

/* rows x cols of y (rows ld apart): + bias[row], + z (same layout), then
 * the activation.  NaN passes through Relu and Clip as it comes. */
static void olc_conv_epilogue(float *y, const float *z, int64_t ld, int64_t rows, int64_t cols,
                              const float *bias, int act, float a, float b) {
    for (int64_t r = 0; r < rows; ++r) {
        float *yr = y + r * ld;
        const float *zr = z != NULL ? z + r * ld : NULL;
        float bv = bias != NULL ? bias[r] : 0.0f;
        if (bias != NULL)
            for (int64_t j = 0; j < cols; ++j) yr[j] += bv;
        if (zr != NULL)
            for (int64_t j = 0; j < cols; ++j) yr[j] += zr[j];
        if (act == OLC_CONV_RELU) {
            for (int64_t j = 0; j < cols; ++j) yr[j] = yr[j] < 0.0f ? 0.0f : yr[j];
        } else if (act != OLC_CONV_NONE) {
            for (int64_t j = 0; j < cols; ++j) yr[j] = olc_conv_act(yr[j], act, a, b);
        }
    }
}

/* ---- im2col into the GEMM engine's packed-B layout ---- */

/* Column j of row k of a packed K x n tile (panels of nr columns, blocks of
 * OLC_GEMM_KC rows: see olc_gemm.h). */
static inline float *olc_conv_packed_row(float *dst, int64_t K, int64_t npad, int64_t nr,
                                         int64_t k, int64_t *kc_out) {
    int64_t pc = k / OLC_GEMM_KC * OLC_GEMM_KC;
    int64_t kc = K - pc < OLC_GEMM_KC ? K - pc : OLC_GEMM_KC;
    *kc_out = kc;
    (void)nr;
    return dst + pc * npad + (k - pc) * nr;
}

/* n values src[0], src[s], ... (or zeros when src is NULL) into columns
 * j .. j+n of a packed row (row: its column 0; panels nr * kc apart). */
static inline void olc_conv_put(float *row, int64_t nr, int64_t kc, int64_t j, const float *src,
                                int64_t s, int64_t n) {
    while (n > 0) {
        int64_t col = j % nr, m = nr - col < n ? nr - col : n;
        float *d = row + (j / nr) * nr * kc + col;
        if (src == NULL) {
            for (int64_t t = 0; t < m; ++t) d[t] = 0.0f;
        } else if (s == 1) {
            for (int64_t t = 0; t < m; ++t) d[t] = src[t];
            src += m;
        } else {
            for (int64_t t = 0; t < m; ++t) d[t] = src[t * s];
            src += m * s;
        }
        j += m;
        n -= m;
    }
}

/* Rows k0..k1 of the column tile of output positions p0 .. p0+pt (flat over
 * OD, OH, OW) of one image-group block x (C x D x H x W floats). */
static void olc_conv_pack_cols(const olc_conv_geom *g, const float *x, int64_t p0, int64_t pt,
                               int64_t k0, int64_t k1, int64_t nr, float *dst) {
    int64_t kk = g->kd * g->kh * g->kw, K = g->C * kk;
    int64_t npad = (pt + nr - 1) / nr * nr;
    for (int64_t k = k0; k < k1; ++k) {
        int64_t c = k / kk, r = k % kk;
        int64_t a = r / (g->kh * g->kw), b = (r / g->kw) % g->kh, e = r % g->kw;
        int64_t kc;
        float *row = olc_conv_packed_row(dst, K, npad, nr, k, &kc);
        int64_t p = p0, j = 0;
        while (j < pt) {
            int64_t ow = p % g->OW, oh = (p / g->OW) % g->OH, od = p / (g->OW * g->OH);
            int64_t L = g->OW - ow < pt - j ? g->OW - ow : pt - j;
            int64_t id = od * g->sd - g->pd + a * g->dd, ih = oh * g->sh - g->ph + b * g->dh;
            if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) {
                olc_conv_put(row, nr, kc, j, NULL, 0, L);
            } else {
                const float *xr = x + ((c * g->D + id) * g->H + ih) * g->W;
                int64_t iw0 = ow * g->sw - g->pw + e * g->dw, s = g->sw;
                int64_t lo = iw0 >= 0 ? 0 : (-iw0 + s - 1) / s;
                int64_t hi = g->W - iw0 > 0 ? (g->W - iw0 + s - 1) / s : 0;
                if (hi > L) hi = L;
                if (lo > hi) lo = hi;
                if (lo > 0) olc_conv_put(row, nr, kc, j, NULL, 0, lo);
                if (hi > lo) olc_conv_put(row, nr, kc, j + lo, xr + iw0 + lo * s, s, hi - lo);
                if (L > hi) olc_conv_put(row, nr, kc, j + hi, NULL, 0, L - hi);
            }
            j += L;
            p += L;
        }
        if (npad > pt) olc_conv_put(row, nr, kc, pt, NULL, 0, npad - pt);
    }
}

/* ---- float32 Conv by the GEMM engine ---- */

typedef struct {
    olc_conv_geom g;
    int level, act, failed;
    float a, b;
    const float *x, *w, *bias, *z;
    float *y, *cols;
    int64_t N, G, M, Mg, K, P, nr, pt;
    /* the current block */
    const float *xb, *wb, *bb, *zb;
    float *yb;
    int64_t p0, n1, rows_per_task;
} olc_conv_job;

#define OLC_CONV_PACK_ROWS 16

static void olc_conv_pack_task(void *arg, ptrdiff_t t, int slot) {
    olc_conv_job *p = (olc_conv_job *)arg;
    int64_t k0 = (int64_t)t * OLC_CONV_PACK_ROWS;
    int64_t k1 = k0 + OLC_CONV_PACK_ROWS < p->K ? k0 + OLC_CONV_PACK_ROWS : p->K;
    (void)slot;
    olc_conv_pack_cols(&p->g, p->xb, p->p0, p->n1, k0, k1, p->nr, p->cols);
}

static void olc_conv_epilogue_task(void *arg, ptrdiff_t t, int slot) {
    olc_conv_job *p = (olc_conv_job *)arg;
    int64_t r0 = (int64_t)t * p->rows_per_task;
    int64_t r1 = r0 + p->rows_per_task < p->Mg ? r0 + p->rows_per_task : p->Mg;
    (void)slot;
    olc_conv_epilogue(p->yb + r0 * p->P + p->p0, p->zb != NULL ? p->zb + r0 * p->P + p->p0 : NULL,
                      p->P, r1 - r0, p->n1, p->bb != NULL ? p->bb + r0 : NULL, p->act, p->a,
                      p->b);
}

static void olc_conv_run_epilogue(olc_conv_job *p, int nthreads) {
    if (p->bb == NULL && p->zb == NULL && p->act == OLC_CONV_NONE) return;
    int64_t rows = 8192 / (p->n1 > 0 ? p->n1 : 1);
    p->rows_per_task = rows < 1 ? 1 : rows;
    olc_parallel_for((p->Mg + p->rows_per_task - 1) / p->rows_per_task, olc_conv_epilogue_task, p,
                     nthreads);
}

/* Columns a tile holds for K rows at a level: a multiple of nr. */
static int64_t olc_conv_tile_cols(int level, int64_t K, int64_t P) {
    int64_t nr = olc_sgemm_nr(level);
    int64_t pt = OLC_CONV_TILE_FLOATS / (K > 0 ? K : 1) / nr * nr;
    if (pt < nr) pt = nr;
    int64_t ppad = (P + nr - 1) / nr * nr;
    return pt < ppad ? pt : ppad;
}

/* Floats of the column scratch olc_conv_f32 needs (0 for the plain GEMM). */
static int64_t olc_conv_scratch(int level, int64_t K, int64_t P, int pointwise) {
    if (pointwise) return 0;
    int64_t pt = olc_conv_tile_cols(level, K, P);
    return olc_sgemm_packed_size(level, K, pt);
}

/* y (N x G*Mg x P) = conv(x (N x G*C x D*H*W), w (G*Mg x K)) + bias (+ z),
 * activation.  pointwise: 1x1 kernel, unit strides, no pads (columns are
 * X itself).  Returns -1 without memory. */
static int olc_conv_f32(int level, const olc_conv_geom *g, const float *x, const float *w,
                        const float *bias, const float *z, float *y, int64_t N, int64_t G,
                        int64_t Mg, int pointwise, int act, float a, float b, int nthreads) {
    olc_conv_job p;
    memset(&p, 0, sizeof p);
    p.g = *g;
    p.level = olc_gemm_level(level);
    p.act = act;
    p.a = a;
    p.b = b;
    p.Mg = Mg;
    p.K = g->C * g->kd * g->kh * g->kw;
    p.P = g->OD * g->OH * g->OW;
    p.nr = olc_sgemm_nr(p.level);
    int64_t xplane = g->C * g->D * g->H * g->W, ZERO = 0;
    if (p.P == 0 || Mg == 0 || N == 0) return 0;
    if (p.K == 0) { /* no input channels: the bias alone */
        for (int64_t i = 0; i < N * G * Mg; ++i) {
            int64_t m = i % (G * Mg);
            float *yr = y + i * p.P;
            for (int64_t j = 0; j < p.P; ++j) yr[j] = 0.0f;
            olc_conv_epilogue(yr, z != NULL ? z + i * p.P : NULL, p.P, 1, p.P,
                              bias != NULL ? bias + m : NULL, act, a, b);
        }
        return 0;
    }
    p.pt = pointwise ? p.P : olc_conv_tile_cols(p.level, p.K, p.P);
    if (!pointwise) {
        p.cols = olc_gemm_alloc((size_t)olc_sgemm_packed_size(p.level, p.K, p.pt));
        if (p.cols == NULL) return -1;
    }
    int status = 0;
    for (int64_t n = 0; n < N && status == 0; ++n) {
        for (int64_t gi = 0; gi < G && status == 0; ++gi) {
            p.xb = x + (n * G + gi) * xplane;
            p.wb = w + gi * Mg * p.K;
            p.bb = bias != NULL ? bias + gi * Mg : NULL;
            p.yb = y + (n * G + gi) * Mg * p.P;
            p.zb = z != NULL ? z + (n * G + gi) * Mg * p.P : NULL;
            if (pointwise) {
                p.p0 = 0;
                p.n1 = p.P;
                status = olc_sgemm(p.level, OLC_FLOAT, 1, p.wb, &ZERO, p.K, 1, NULL, &ZERO, p.xb,
                                   &ZERO, p.P, 1, Mg, p.P, p.K, p.yb, p.P, 0, 1.0f, 0, nthreads);
                if (status == 0) olc_conv_run_epilogue(&p, nthreads);
                continue;
            }
            for (int64_t p0 = 0; p0 < p.P && status == 0; p0 += p.pt) {
                p.p0 = p0;
                p.n1 = p.P - p0 < p.pt ? p.P - p0 : p.pt;
                olc_parallel_for((p.K + OLC_CONV_PACK_ROWS - 1) / OLC_CONV_PACK_ROWS,
                                 olc_conv_pack_task, &p, nthreads);
                status = olc_sgemm(p.level, OLC_FLOAT, 1, p.wb, &ZERO, p.K, 1, p.cols, &ZERO, NULL,
                                   &ZERO, 0, 0, Mg, p.n1, p.K, p.yb + p0, p.P, 0, 1.0f, 0,
                                   nthreads);
                if (status == 0) olc_conv_run_epilogue(&p, nthreads);
            }
        }
    }
    free(p.cols);
    return status;
}

/* ---- col2im: scatter-add of columns into an image ---- */

/* Channel c of the image y (OD x OH x OW, one plane) += the columns of its
 * taps: rows c * kk + tap of col (ld apart), columns l0 .. l0+lt of the
 * D x H x W grid.  Order: tap, then column: fixed. */
#define OLC_CONV_COL2IM(NAME, T)                                                                 \
    static void NAME(const olc_conv_geom *g, const T *col, int64_t ld, int64_t l0, int64_t lt,     \
                     T *plane) {                                                                   \
        int64_t kk = g->kd * g->kh * g->kw;                                                        \
        for (int64_t tap = 0; tap < kk; ++tap) {                                                   \
            int64_t a = tap / (g->kh * g->kw), b = (tap / g->kw) % g->kh, e = tap % g->kw;         \
            const T *cr = col + tap * ld;                                                          \
            int64_t l = l0, j = 0;                                                                 \
            while (j < lt) {                                                               \
                int64_t iw = l % g->W, ih = (l / g->W) % g->H, id = l / (g->W * g->H);             \
                int64_t L = g->W - iw < lt - j ? g->W - iw : lt - j;                               \
                int64_t od = id * g->sd - g->pd + a * g->dd, oh = ih * g->sh - g->ph + b * g->dh;  \
                if (od >= 0 && od < g->OD && oh >= 0 && oh < g->OH) {                              \
                    T *yr = plane + (od * g->OH + oh) * g->OW;                                     \
                    int64_t ow = iw * g->sw - g->pw + e * g->dw;                                   \
                    for (int64_t t = 0; t < L; ++t, ow += g->sw)                                   \
                        if (ow >= 0 && ow < g->OW) yr[ow] += cr[j + t];                            \
                }                                                                                  \
                j += L;                                                                            \
                l += L;                                                                            \
            }                                                                                      \
        }                                                                                          \
    }
OLC_CONV_COL2IM(olc_conv_col2im_f32, float)
OLC_CONV_COL2IM(olc_conv_col2im_f64, double)

/* ---- the direct loops, per level and type ---- */
#define OLC_CT float
#define OLC_CN f32
#define OLC_BODY "conv/olc_conv_direct.h"
#include "common/olc_each_level.h"
#undef OLC_CT
#undef OLC_CN
#define OLC_CT double
#define OLC_CN f64
#define OLC_BODY "conv/olc_conv_direct.h"
#include "common/olc_each_level.h"
#undef OLC_CT
#undef OLC_CN

typedef void (*olc_conv_direct_f32_fn)(const olc_conv_geom *, const float *, const float *, float,
                                       float *, int64_t, int64_t);
typedef void (*olc_conv_direct_f64_fn)(const olc_conv_geom *, const double *, const double *,
                                       double, double *, int64_t, int64_t);
typedef void (*olc_conv_tdirect_f64_fn)(const olc_conv_geom *, const double *, const double *,
                                        int64_t, int64_t, double, double *);

static int olc_conv_level(int level) { return olc_build_level(level); }

static olc_conv_direct_f32_fn olc_conv_pick_direct_f32(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_direct_f32);
}

static olc_conv_direct_f64_fn olc_conv_pick_direct_f64(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_direct_f64);
}

static olc_conv_tdirect_f64_fn olc_conv_pick_tdirect_f64(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_tdirect_f64);
}

#endif
