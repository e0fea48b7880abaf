/* DeformConv (ai.onnx, 2-D): a convolution whose taps are moved, per
 * output position, by learned offsets and scaled by an optional mask.
 *
 * The deformable im2col: per image, group and tile of output positions,
 * every column row (input channel c, kernel tap) holds the input plane of c
 * sampled bilinearly at the moved tap (zero outside the image) times the
 * mask.  The corners and weights of a sample depend on the offset group,
 * the tap and the position, not on the channel: a task computes them once
 * for a chunk of OLC_CONV_DEFORM_CHUNK columns, then the rows of every
 * channel of that offset group from them.  float32 rows go straight into
 * the GEMM engine's packed-B layout (engines/gemm/olc_gemm.h) and
 * Y[rows of the group, tile] = W_g (read in place) x columns, the bias
 * applied to each output tile by the thread that computed it; double
 * writes plain rows and multiplies them by a loop the compiler vectorises.
 * The sampling (conv/olc_conv_deform_body.h) is compiled once per level
 * and type, picked once per call.
 * Each column value and each output element is computed in one fixed
 * order: the results do not depend on the thread count.
 */
#ifndef OLC_CONV_DEFORM_H
#define OLC_CONV_DEFORM_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "conv/olc_conv.h"

/* Columns whose bilinear taps one task computes and keeps (on its stack). */
#define OLC_CONV_DEFORM_CHUNK 64
/* Channels one pass over a chunk's columns writes (16 or 64 measured alike). */
#define OLC_CONV_DEFORM_ROWS 16

/* Sizes of a 2-D DeformConv: input channels C (all groups), offset groups
 * OG, the plane H x W, kernel kh x kw, strides, start pads, dilations and
 * the output plane OH x OW. */
typedef struct {
    int64_t C, OG, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW;
} olc_conv_deform_geom;

typedef struct {
    int32_t idx[4][OLC_CONV_DEFORM_CHUNK];
    float wt[4][OLC_CONV_DEFORM_CHUNK];
} olc_conv_deform_samples_f32;

typedef struct {
    int32_t idx[4][OLC_CONV_DEFORM_CHUNK];
    double wt[4][OLC_CONV_DEFORM_CHUNK];
} olc_conv_deform_samples_f64;

#define OLC_CT float
#define OLC_CN f32
#define OLC_BODY "conv/olc_conv_deform_body.h"
#include "common/olc_each_level.h"
#undef OLC_CT
#undef OLC_CN
#define OLC_CT double
#define OLC_CN f64
#define OLC_BODY "conv/olc_conv_deform_body.h"
#include "common/olc_each_level.h"
#undef OLC_CT
#undef OLC_CN

typedef void (*olc_conv_deform_taps_f32_fn)(const olc_conv_deform_geom *, const float *,
                                            const float *, const float *, int64_t, int64_t,
                                            int64_t, int64_t, int64_t,
                                            olc_conv_deform_samples_f32 *);
typedef void (*olc_conv_deform_taps_f64_fn)(const olc_conv_deform_geom *, const double *,
                                            const double *, const double *, int64_t, int64_t,
                                            int64_t, int64_t, int64_t,
                                            olc_conv_deform_samples_f64 *);
typedef void (*olc_conv_deform_rows_f32_fn)(const olc_conv_deform_samples_f32 *, const float *,
                                            int64_t, int64_t, int64_t, int64_t,
                                            const int64_t *, const int64_t *, int64_t, int64_t,
                                            int64_t, float *);
typedef void (*olc_conv_deform_rows_f64_fn)(const olc_conv_deform_samples_f64 *,
                                            const double *, int64_t, int64_t, int64_t, int64_t,
                                            const int64_t *, const int64_t *, int64_t, int64_t,
                                            int64_t, double *);

typedef struct {
    olc_conv_deform_geom d;
    int level, f64;
    /* the sampling of the level, chosen once */
    olc_conv_deform_taps_f32_fn taps_f32;
    olc_conv_deform_taps_f64_fn taps_f64;
    olc_conv_deform_rows_f32_fn rows_f32;
    olc_conv_deform_rows_f64_fn rows_f64;
    const void *x, *w, *off, *mask, *bias;
    void *y;
    void *cols;
    int64_t G, Mg, Cg, Co, K, kk, P, nr, npad, pt, nch, og0, nog;
    /* the current block */
    int64_t n, gi, p0, n1;
} olc_conv_deform_job;

/* Task t of a tile: offset group og0 + t / (kk * nch), tap (t / nch) % kk,
 * chunk t % nch of the tile's columns: the taps, then the rows of the
 * group's channels in that offset group, OLC_CONV_DEFORM_ROWS at a time. */
static void olc_conv_deform_task(void *arg, ptrdiff_t t, int slot) {
    const olc_conv_deform_job *p = (const olc_conv_deform_job *)arg;
    const olc_conv_deform_geom *d = &p->d;
    int64_t og = p->og0 + (int64_t)t / (p->kk * p->nch);
    int64_t tap = ((int64_t)t / p->nch) % p->kk, ch = (int64_t)t % p->nch;
    int64_t j0 = ch * OLC_CONV_DEFORM_CHUNK;
    int64_t j1 = j0 + OLC_CONV_DEFORM_CHUNK < p->npad ? j0 + OLC_CONV_DEFORM_CHUNK : p->npad;
    int64_t c0 = p->gi * p->Cg > og * p->Co ? p->gi * p->Cg : og * p->Co;
    int64_t c1 = (p->gi + 1) * p->Cg < (og + 1) * p->Co ? (p->gi + 1) * p->Cg : (og + 1) * p->Co;
    int64_t plane = d->H * d->W, row[OLC_CONV_DEFORM_ROWS], pst[OLC_CONV_DEFORM_ROWS];
    /* offset (N, OG, kk, 2, P), mask (N, OG, kk, P) */
    int64_t ob = ((p->n * d->OG + og) * p->kk + tap) * 2 * p->P;
    int64_t mb = ((p->n * d->OG + og) * p->kk + tap) * p->P;
    union {
        olc_conv_deform_samples_f32 f32;
        olc_conv_deform_samples_f64 f64;
    } s;
    (void)slot;
    if (p->f64) {
        const double *off = (const double *)p->off + ob;
        p->taps_f64(d, off, off + p->P,
                                 p->mask != NULL ? (const double *)p->mask + mb : NULL, tap, p->p0,
                                 p->n1, j0, j1, &s.f64);
    } else {
        const float *off = (const float *)p->off + ob;
        p->taps_f32(d, off, off + p->P,
                                 p->mask != NULL ? (const float *)p->mask + mb : NULL, tap, p->p0,
                                 p->n1, j0, j1, &s.f32);
    }
    for (int64_t cb = c0; cb < c1; cb += OLC_CONV_DEFORM_ROWS) {
        int64_t ce = cb + OLC_CONV_DEFORM_ROWS < c1 ? cb + OLC_CONV_DEFORM_ROWS : c1;
        for (int64_t c = cb; c < ce; ++c) {
            int64_t k = (c - p->gi * p->Cg) * p->kk + tap;
            if (p->f64) { /* plain rows of npad */
                row[c - cb] = k * p->npad + j0;
                pst[c - cb] = 0;
                continue;
            }
            /* the packed layout: rows in blocks of OLC_GEMM_KC, a block's
             * panels of nr columns (kc rows each) one after the other */
            int64_t pc = k / OLC_GEMM_KC * OLC_GEMM_KC;
            int64_t kc = p->K - pc < OLC_GEMM_KC ? p->K - pc : OLC_GEMM_KC;
            pst[c - cb] = p->nr * kc;
            row[c - cb] = pc * p->npad + (k - pc) * p->nr + (j0 / p->nr) * p->nr * kc;
        }
        if (p->f64)
            p->rows_f64(&s.f64, (const double *)p->x + p->n * d->C * plane, plane,
                                     d->W, cb, ce, row, pst, j0, j1, OLC_CONV_DEFORM_CHUNK,
                                     (double *)p->cols);
        else
            p->rows_f32(&s.f32, (const float *)p->x + p->n * d->C * plane, plane,
                                     d->W, cb, ce, row, pst, j0, j1, p->nr, (float *)p->cols);
    }
}

/* Bias on the GEMM's output tile (rows m0..m1, columns n0..n1 of the
 * current block), on the thread that computed it. */
static void olc_conv_deform_epilogue(void *arg, int64_t q, int64_t m0, int64_t m1, int64_t n0,
                                     int64_t n1) {
    const olc_conv_deform_job *p = (const olc_conv_deform_job *)arg;
    float *yb = (float *)p->y + (p->n * p->G + p->gi) * p->Mg * p->P + p->p0;
    (void)q;
    olc_conv_epilogue(p->level, yb + m0 * p->P + n0, NULL, p->P, m1 - m0, n1 - n0,
                      (const float *)p->bias + p->gi * p->Mg + m0, OLC_CONV_NONE, 0.0f, 0.0f);
}

/* double: output rows 8t .. 8t+8 of the current block, y = bias + w x
 * columns, summed over k in order. */
static void olc_conv_deform_f64_task(void *arg, ptrdiff_t t, int slot) {
    const olc_conv_deform_job *p = (const olc_conv_deform_job *)arg;
    int64_t m0 = (int64_t)t * 8, m1 = m0 + 8 < p->Mg ? m0 + 8 : p->Mg;
    const double *cols = (const double *)p->cols;
    (void)slot;
    for (int64_t m = m0; m < m1; ++m) {
        int64_t row = p->gi * p->Mg + m;
        double *yr = (double *)p->y + (p->n * p->G * p->Mg + row) * p->P + p->p0;
        const double *wr = (const double *)p->w + row * p->K;
        double b = p->bias != NULL ? ((const double *)p->bias)[row] : 0.0;
        for (int64_t j = 0; j < p->n1; ++j) yr[j] = b;
        for (int64_t k = 0; k < p->K; ++k) {
            const double wk = wr[k], *ck = cols + k * p->npad;
            for (int64_t j = 0; j < p->n1; ++j) yr[j] += wk * ck[j];
        }
    }
}

/* Columns of a tile for K rows: a multiple of the chunk and of nr, the
 * column scratch at most OLC_CONV_TILE_FLOATS elements (at least a chunk),
 * not more than the output positions need. */
static int64_t olc_conv_deform_tile_cols(int64_t K, int64_t P) {
    int64_t pt = OLC_CONV_TILE_FLOATS / (K > 0 ? K : 1);
    pt = pt / OLC_CONV_DEFORM_CHUNK * OLC_CONV_DEFORM_CHUNK;
    if (pt < OLC_CONV_DEFORM_CHUNK) pt = OLC_CONV_DEFORM_CHUNK;
    if (pt > OLC_CONV_MAX_TILE) pt = OLC_CONV_MAX_TILE;
    int64_t ppad = (P + OLC_CONV_DEFORM_CHUNK - 1) / OLC_CONV_DEFORM_CHUNK * OLC_CONV_DEFORM_CHUNK;
    return pt < ppad ? pt : ppad;
}

/* Elements of the column scratch olc_conv_deform needs (float32: the
 * engine's packed layout; double: plain rows). */
static int64_t olc_conv_deform_scratch(int level, int64_t K, int64_t P, int f64) {
    int64_t pt = olc_conv_deform_tile_cols(K, P);
    return f64 ? K * pt : olc_sgemm_packed_size(olc_gemm_level(level), K, pt);
}

/* The level the sampling and the GEMM run at. */
static int olc_conv_deform_level(int level) { return olc_build_level(level); }

/* y (N x G*Mg x OH x OW) = deform_conv(x (N x C x H x W), w (G*Mg x Cg*kh*kw),
 * offset (N x OG*kk*2 x OH x OW), mask (N x OG*kk x OH x OW or NULL)) + bias,
 * float32 (f64 = 0) or double; H * W < 2^31.  Returns -1 without memory. */
static int olc_conv_deform(int level, const olc_conv_deform_geom *d, int f64, const void *x,
                           const void *w, const void *off, const void *mask, const void *bias,
                           void *y, int64_t N, int64_t G, int64_t Mg, int nthreads) {
    olc_conv_deform_job p;
    memset(&p, 0, sizeof p);
    p.d = *d;
    p.level = olc_gemm_level(level);
    p.f64 = f64;
    p.taps_f32 = OLC_LEVEL_FN(p.level, olc_conv_deform_taps_f32);
    p.taps_f64 = OLC_LEVEL_FN(p.level, olc_conv_deform_taps_f64);
    p.rows_f32 = OLC_LEVEL_FN(p.level, olc_conv_deform_rows_f32);
    p.rows_f64 = OLC_LEVEL_FN(p.level, olc_conv_deform_rows_f64);
    p.x = x;
    p.w = w;
    p.off = off;
    p.mask = mask;
    p.bias = bias;
    p.y = y;
    p.G = G;
    p.Mg = Mg;
    p.Cg = d->C / G;
    p.Co = d->C / d->OG;
    p.kk = d->kh * d->kw;
    p.K = p.Cg * p.kk;
    p.P = d->OH * d->OW;
    size_t es = f64 ? sizeof(double) : sizeof(float);
    if (N == 0 || G * Mg == 0 || p.P == 0) return 0;
    if (p.K == 0) { /* no input channels: the bias alone */
        for (int64_t i = 0; i < N * G * Mg; ++i) {
            int64_t m = i % (G * Mg);
            for (int64_t j = 0; j < p.P; ++j) {
                if (f64)
                    ((double *)y)[i * p.P + j] = bias != NULL ? ((const double *)bias)[m] : 0.0;
                else
                    ((float *)y)[i * p.P + j] = bias != NULL ? ((const float *)bias)[m] : 0.0f;
            }
        }
        return 0;
    }
    p.pt = olc_conv_deform_tile_cols(p.K, p.P);
    p.nr = f64 ? p.pt : olc_sgemm_nr(p.level);
    p.cols = f64 ? malloc((size_t)(p.K * p.pt) * es)
                 : (void *)olc_gemm_alloc((size_t)olc_sgemm_packed_size(p.level, p.K, p.pt));
    if (p.cols == NULL) return -1;
    olc_conv_deform_job *pp = &p;
    olc_sgemm_epilogue with_bias = {olc_conv_deform_epilogue, pp};
    int64_t ZERO = 0;
    int status = 0;
    for (int64_t n = 0; n < N && status == 0; ++n) {
        p.n = n;
        for (int64_t gi = 0; gi < G && status == 0; ++gi) {
            p.gi = gi;
            /* the offset groups this group's channels belong to */
            p.og0 = gi * p.Cg / p.Co;
            p.nog = ((gi + 1) * p.Cg - 1) / p.Co - p.og0 + 1;
            for (int64_t p0 = 0; p0 < p.P && status == 0; p0 += p.pt) {
                p.p0 = p0;
                p.n1 = p.P - p0 < p.pt ? p.P - p0 : p.pt;
                /* float32: the packed width (padding columns sampled as 0) */
                p.npad = f64 ? p.n1 : (p.n1 + p.nr - 1) / p.nr * p.nr;
                p.nch = (p.npad + OLC_CONV_DEFORM_CHUNK - 1) / OLC_CONV_DEFORM_CHUNK;
                olc_parallel_for(p.nog * p.kk * p.nch, olc_conv_deform_task, pp, nthreads);
                if (f64) {
                    olc_parallel_for((Mg + 7) / 8, olc_conv_deform_f64_task, pp, nthreads);
                    continue;
                }
                float *yb = (float *)y + (n * G + gi) * Mg * p.P + p0;
                status = olc_sgemm_then(p.level, OLC_FLOAT, 1, (const float *)w + gi * Mg * p.K,
                                        &ZERO, p.K, 1, (const float *)p.cols, &ZERO, NULL, &ZERO,
                                        0, 0, Mg, p.n1, p.K, yb, p.P, 0, 1.0f, 0,
                                        bias != NULL ? &with_bias : NULL, nthreads);
            }
        }
    }
    free(p.cols);
    return status;
}

#endif
