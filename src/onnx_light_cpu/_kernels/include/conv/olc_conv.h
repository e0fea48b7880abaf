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

/* The output rows a column tile crosses: segment t covers columns j[t] ..
 * j[t] + len[t] of the tile, one output row (od, oh) from column ow; the
 * input offsets at tap 0 are d0, h0 (row) and w0 (first column).  Made
 * once per tile, read for every row k. */
typedef struct {
    int64_t j, len, d0, h0, w0;
} olc_conv_seg;

static int64_t olc_conv_segments(const olc_conv_geom *g, int64_t p0, int64_t pt,
                                 olc_conv_seg *seg) {
    int64_t n = 0, p = p0, j = 0;
    while (j < pt) {
        int64_t ow = p % g->OW, oh = (p / g->OW) % g->OH, od = p / (g->OW * g->OH);
        int64_t L = g->OW - ow < pt - j ? g->OW - ow : pt - j;
        seg[n].j = j;
        seg[n].len = L;
        seg[n].d0 = od * g->sd - g->pd;
        seg[n].h0 = oh * g->sh - g->ph;
        seg[n].w0 = ow * g->sw - g->pw;
        ++n;
        j += L;
        p += L;
    }
    return n;
}

/* Columns of a tile, at most. */
#define OLC_CONV_MAX_TILE 4096
/* Rows of the column tile one packing task assembles, then writes a panel
 * at a time (its rows are consecutive there). */
#define OLC_CONV_PACK_ROWS 16

/* Rows k0..k1 (at most OLC_CONV_PACK_ROWS) of the column tile (nseg
 * segments, pt columns) of one image-group block x (C x D x H x W floats),
 * written into the GEMM engine's packed-B layout (panels of nr columns,
 * blocks of OLC_GEMM_KC rows; see olc_gemm.h): the rows are assembled in
 * lines (OLC_CONV_PACK_ROWS x npad floats of scratch), then copied panel
 * after panel, so that the writes run through memory in order. */
static void olc_conv_pack_cols(const olc_conv_geom *g, const float *x, const olc_conv_seg *seg,
                               int64_t nseg, int64_t pt, int64_t k0, int64_t k1, int64_t nr,
                               float *lines, float *dst) {
    int64_t kk = g->kd * g->kh * g->kw, K = g->C * kk, s = g->sw;
    int64_t npad = (pt + nr - 1) / nr * nr;
    for (int64_t k = k0; k < k1; ++k) {
        float *line = lines + (k - k0) * npad;
        int64_t c = k / kk, r = k % kk;
        int64_t a = r / (g->kh * g->kw), b = (r / g->kw) % g->kh, e = r % g->kw;
        const float *xc = x + c * g->D * g->H * g->W;
        for (int64_t j = pt; j < npad; ++j) line[j] = 0.0f;
        for (int64_t t = 0; t < nseg; ++t) {
            float *out = line + seg[t].j;
            int64_t L = seg[t].len;
            int64_t id = seg[t].d0 + a * g->dd, ih = seg[t].h0 + b * g->dh;
            if (id < 0 || id >= g->D || ih < 0 || ih >= g->H) {
                memset(out, 0, (size_t)L * sizeof(float));
                continue;
            }
            const float *xr = xc + (id * g->H + ih) * g->W;
            int64_t iw0 = seg[t].w0 + e * g->dw;
            int64_t lo = iw0 >= 0 ? 0 : (-iw0 + s - 1) / s;
            int64_t hi = g->W - iw0 > 0 ? (g->W - iw0 + s - 1) / s : 0;
            if (hi > L) hi = L;
            if (lo > hi) lo = hi;
            for (int64_t q = 0; q < lo; ++q) out[q] = 0.0f;
            if (s == 1)
                memcpy(out + lo, xr + iw0 + lo, (size_t)(hi - lo) * sizeof(float));
            else
                for (int64_t q = lo; q < hi; ++q) out[q] = xr[iw0 + q * s];
            for (int64_t q = hi; q < L; ++q) out[q] = 0.0f;
        }
    }
    /* k0..k1 never cross a block of OLC_GEMM_KC rows (both multiples of 16) */
    int64_t pc = k0 / OLC_GEMM_KC * OLC_GEMM_KC;
    int64_t kc = K - pc < OLC_GEMM_KC ? K - pc : OLC_GEMM_KC;
    float *base = dst + pc * npad + (k0 - pc) * nr;
    int64_t rows = k1 - k0;
    for (int64_t jb = 0; jb < npad; jb += nr) {
        float *d = base + jb * kc;
        if (nr == 16)
            for (int64_t q = 0; q < rows; ++q) memcpy(d + q * 16, lines + q * npad + jb, 64);
        else if (nr == 32)
            for (int64_t q = 0; q < rows; ++q) memcpy(d + q * 32, lines + q * npad + jb, 128);
        else
            for (int64_t q = 0; q < rows; ++q)
                memcpy(d + q * nr, lines + q * npad + jb, (size_t)nr * sizeof(float));
    }
}

/* ---- float32 Conv by the GEMM engine ---- */

typedef struct {
    olc_conv_geom g;
    int level, act, failed;
    float a, b;
    const float *x, *w, *bias, *z;
    float *y, *cols;
    olc_conv_seg *seg;
    float **lines; /* OLC_CONV_PACK_ROWS lines a slot */
    int64_t N, G, M, Mg, K, P, nr, pt, nseg;
    /* the current block */
    const float *xb, *wb, *bb, *zb;
    float *yb;
    int64_t p0, n1, rows_per_task;
} olc_conv_job;

static void olc_conv_pack_task(void *arg, ptrdiff_t t, int slot) {
    olc_conv_job *p = (olc_conv_job *)arg;
    int64_t k0 = (int64_t)t * OLC_CONV_PACK_ROWS;
    int64_t k1 = k0 + OLC_CONV_PACK_ROWS < p->K ? k0 + OLC_CONV_PACK_ROWS : p->K;
    int64_t npad = (p->pt + p->nr - 1) / p->nr * p->nr;
    float *lines = olc_slot_buffer(p->lines, slot, (size_t)(OLC_CONV_PACK_ROWS * npad));
    if (lines == NULL) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    olc_conv_pack_cols(&p->g, p->xb, p->seg, p->nseg, p->n1, k0, k1, p->nr, lines, p->cols);
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
    if (pt > OLC_CONV_MAX_TILE) pt = OLC_CONV_MAX_TILE;
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
        p.seg = (olc_conv_seg *)malloc((size_t)(p.pt + 1) * sizeof(olc_conv_seg));
        p.lines = olc_slot_buffers(nthreads);
        if (p.cols == NULL || p.seg == NULL || p.lines == NULL) {
            free(p.cols);
            free(p.seg);
            olc_slot_buffers_free(p.lines, nthreads);
            return -1;
        }
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
                p.nseg = olc_conv_segments(&p.g, p0, p.n1, p.seg);
                olc_parallel_for((p.K + OLC_CONV_PACK_ROWS - 1) / OLC_CONV_PACK_ROWS,
                                 olc_conv_pack_task, &p, nthreads);
                if (p.failed) {
                    status = -1;
                    break;
                }
                status = olc_sgemm(p.level, OLC_FLOAT, 1, p.wb, &ZERO, p.K, 1, p.cols, &ZERO, NULL,
                                   &ZERO, 0, 0, Mg, p.n1, p.K, p.yb + p0, p.P, 0, 1.0f, 0,
                                   nthreads);
                if (status == 0) olc_conv_run_epilogue(&p, nthreads);
            }
        }
    }
    free(p.cols);
    free(p.seg);
    olc_slot_buffers_free(p.lines, nthreads);
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
                    const T *src = cr + j;                                                         \
                    int64_t ow0 = iw * g->sw - g->pw + e * g->dw, s = g->sw;                       \
                    int64_t lo = ow0 >= 0 ? 0 : (-ow0 + s - 1) / s;                                \
                    int64_t hi = g->OW - ow0 > 0 ? (g->OW - ow0 + s - 1) / s : 0;                  \
                    if (hi > L) hi = L;                                                            \
                    if (s == 1) {                                                                  \
                        T *yo = yr + ow0;                                                          \
                        for (int64_t t = lo; t < hi; ++t) yo[t] += src[t];                         \
                    } else {                                                                       \
                        for (int64_t t = lo; t < hi; ++t) yr[ow0 + t * s] += src[t];               \
                    }                                                                              \
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

typedef void (*olc_conv_dw3_f32_fn)(const olc_conv_geom *, const float *, int64_t, const float *,
                                    float, float *, int64_t, int64_t);

static int olc_conv_level(int level) { return olc_build_level(level); }

static olc_conv_dw3_f32_fn olc_conv_pick_dw3_f32(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_dw3_f32);
}

/* Whether a depthwise plane runs olc_conv_dw3: 2-D or 1-D, 3 taps wide,
 * unit width stride. */
static int olc_conv_dw3_fits(const olc_conv_geom *g) {
    return g->C == 1 && g->D == 1 && g->kd == 1 && g->OD == 1 && g->kw == 3 && g->sw == 1;
}

/* Rows r0..r1's padded input rows of one plane x (H x W) into xp (rows
 * Wp = OW + 2 dw wide): xp row i is padded row r0 * sh + i. */
static void olc_conv_pad_rows(const olc_conv_geom *g, const float *x, int64_t r0, int64_t r1,
                              float *xp) {
    int64_t Wp = g->OW + 2 * g->dw;
    int64_t rows = (r1 - 1 - r0) * g->sh + (g->kh - 1) * g->dh + 1;
    for (int64_t i = 0; i < rows; ++i) {
        float *d = xp + i * Wp;
        int64_t ih = r0 * g->sh + i - g->ph;
        if (ih < 0 || ih >= g->H) {
            memset(d, 0, (size_t)Wp * sizeof(float));
            continue;
        }
        const float *xr = x + ih * g->W;
        for (int64_t j = 0; j < Wp; ++j) {
            int64_t iw = j - g->pw;
            d[j] = iw >= 0 && iw < g->W ? xr[iw] : 0.0f;
        }
    }
}

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
