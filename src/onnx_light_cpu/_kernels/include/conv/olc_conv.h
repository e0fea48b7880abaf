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
 * width; at AVX-512, 3x3 depthwise at strides 1 and 2 runs on the planes
 * themselves (olc_conv_dwp) and a 3x3, 5x5 or 7x7 stride-2 Conv of 1 to 4
 * input channels (a stem) its own loop (olc_conv_fewc).  ConvTranspose in
 * float32 is W_g^T X_g by the GEMM engine into a column tile, then a
 * scatter-add (olc_conv_col2im) per output channel, in a fixed order.
 * Col2Im is that scatter-add alone.
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
    case OLC_CONV_RELU: return v < 0.0f ? 0.0f : v;  /* NaN and -0 stay, as Relu */
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
 * the activation, by the loops of `level` (conv/olc_conv_epilogue.h).
 * NaN passes through Relu and Clip as it comes. */
#define OLC_BODY "conv/olc_conv_epilogue.h"
#include "common/olc_each_level.h"

static void olc_conv_epilogue(int level, float *y, const float *z, int64_t ld, int64_t rows,
                              int64_t cols, const float *bias, int act, float a, float b) {
    level = olc_build_level(level);
    OLC_LEVEL_FN(level, olc_conv_epilogue_rows)(y, z, ld, rows, cols, bias, act, a, b);
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

/* Steps (a, b, e) to the kernel's next tap (depth, row, column; the
 * column fastest), the order of im2col's rows and col2im's; 1 when it
 * wraps back to the first.  Stepped rather than divided out per row. */
static inline int olc_conv_next_tap(const olc_conv_geom *g, int64_t *a, int64_t *b, int64_t *e) {
    if (++*e < g->kw) return 0;
    *e = 0;
    if (++*b < g->kh) return 0;
    *b = 0;
    if (++*a < g->kd) return 0;
    *a = 0;
    return 1;
}

/* ceil(n / s) for n > 0, without a division at strides 1 and 2. */
static inline int64_t olc_conv_ceil_div(int64_t n, int64_t s) {
    return s == 1 ? n : s == 2 ? (n + 1) >> 1 : (n + s - 1) / s;
}

/* out[q] = x[2 q] for q < n: a row of columns at width stride 2, reading
 * no further than x[2 (n - 1)].  At AVX-512 a pair of loads and a permute
 * take 16 at a time, the last pair masked (the compiler's loop: the 3x3/2
 * 128 -> 128 Conv at 56x56, 1 thread, 2586 -> 2535 us). */
static inline void olc_conv_even_scalar(float *out, const float *x, int64_t n) {
    for (int64_t q = 0; q < n; ++q) out[q] = x[2 * q];
}
#if OLC_X86
#define olc_conv_even_avx2 olc_conv_even_scalar
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_conv_even_avx512(float *out, const float *x, int64_t n) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                          4, 2, 0);
    int64_t q = 0;
    for (; q + 16 < n; q += 16) /* reads up to x[2 q + 31] < x[2 (n - 1)] */
        _mm512_storeu_ps(out + q, _mm512_permutex2var_ps(_mm512_loadu_ps(x + 2 * q), even,
                                                         _mm512_loadu_ps(x + 2 * q + 16)));
    int64_t m = 2 * (n - q) - 1; /* x[2 q] .. x[2 (n - 1)] */
    if (m > 0) {
        __m512 a = _mm512_maskz_loadu_ps(olc_tail_mask16(m), x + 2 * q);
        __m512 b = _mm512_maskz_loadu_ps(m > 16 ? olc_tail_mask16(m - 16) : 0, x + 2 * q + 16);
        _mm512_mask_storeu_ps(out + q, olc_tail_mask16(n - q), _mm512_permutex2var_ps(a, even, b));
    }
}
#endif

/* Rows k0..k1 (at most OLC_CONV_PACK_ROWS) of the column tile (nseg
 * segments, pt columns) of one image-group block x (C x D x H x W floats),
 * written into the GEMM engine's packed-B layout (panels of nr columns,
 * blocks of OLC_GEMM_KC rows; see olc_gemm.h): the rows are assembled in
 * lines (OLC_CONV_PACK_ROWS x npad floats of scratch), then copied panel
 * after panel, so that the writes run through memory in order. */
#define OLC_BODY "conv/olc_conv_pack.h"
#include "common/olc_each_level.h"

static void olc_conv_pack_cols(int level, const olc_conv_geom *g, const float *x,
                               const olc_conv_seg *seg, int64_t nseg, int64_t pt, int64_t k0,
                               int64_t k1, int64_t nr, float *lines, float *dst) {
    OLC_LEVEL_FN(olc_build_level(level), olc_conv_pack_cols)(g, x, seg, nseg, pt, k0, k1, nr,
                                                             lines, dst);
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
    float **slots; /* tiles as tasks: a tile's columns, lines and segments a slot */
    int64_t N, G, M, Mg, K, ldw, P, nr, pt, nseg, ntiles;
    int epi;       /* bias, Z or an activation to apply */
    /* the current block */
    const float *xb, *wb, *bb, *zb;
    float *yb;
    int64_t p0, n1;
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
    olc_conv_pack_cols(p->level, &p->g, p->xb, p->seg, p->nseg, p->n1, k0, k1, p->nr, lines,
                       p->cols);
}

/* Bias, residual and activation of the GEMM's output tile (rows m0..m1,
 * columns n0..n1 of matrix q: the current block, or with one group the
 * q-th image from it), on the thread that computed it. */
static void olc_conv_tile_epilogue(void *arg, int64_t q, int64_t m0, int64_t m1, int64_t n0,
                                   int64_t n1) {
    const olc_conv_job *p = (const olc_conv_job *)arg;
    int64_t off = q * p->Mg * p->P + m0 * p->P + p->p0 + n0;
    olc_conv_epilogue(p->level, p->yb + off, p->zb != NULL ? p->zb + off : NULL, p->P, m1 - m0,
                      n1 - n0, p->bb != NULL ? p->bb + m0 : NULL, p->act, p->a, p->b);
}

/* Whether olc_conv_f32 runs each column tile as one task, packed and
 * multiplied on one thread (one parallel loop a Conv), rather than every
 * tile as two parallel loops of all threads: each loop wakes the workers
 * (about 70 us on a 2-core VM), and ResNet-50's 7x7 stem made 16 loops.
 * Not the 1x1 GEMM (one loop already), nor an image of one tile (below). */
static int olc_conv_tasked(int64_t P, int64_t Mg, int64_t nr, int pointwise, int nthreads) {
    return !pointwise && nthreads > 1 && Mg < (P + nr - 1) / nr * nr;
}

/* Columns a tile holds for K rows at a level: a multiple of nr.  Every
 * tile reads all of W_g (Mg x K) again, so where W_g has at least as many
 * rows as the image has columns (a late layer: 512 x 4608 weights for 49
 * pixels), the image is one tile whatever the L2 budget: its columns then
 * take no more memory than the weights, and the weights (9 MB there, over
 * L2) stream once instead of once a tile (3x3/2 512 -> 512 at 14x14, 1
 * thread: 2.6 ms in two tiles, 2.4 in one).  Tiles as tasks are at most
 * a quarter of a thread's share, so that the threads balance. */
static int64_t olc_conv_tile_cols(int level, int64_t K, int64_t P, int64_t Mg, int nthreads) {
    int64_t nr = olc_sgemm_nr(level);
    int64_t pt = OLC_CONV_TILE_FLOATS / (K > 0 ? K : 1) / nr * nr;
    int64_t ppad = (P + nr - 1) / nr * nr;
    if (pt < nr) pt = nr;
    if (Mg >= ppad) pt = ppad;
    if (olc_conv_tasked(P, Mg, nr, 0, nthreads)) {
        int64_t share = (P + 4 * nthreads - 1) / (4 * (int64_t)nthreads);
        share = (share + nr - 1) / nr * nr;
        if (share < pt) pt = share;
    }
    if (pt > OLC_CONV_MAX_TILE) pt = OLC_CONV_MAX_TILE;
    return pt < ppad ? pt : ppad;
}

/* Floats of a slot's buffer when tiles are tasks: the packed columns of
 * pt, then OLC_CONV_PACK_ROWS lines, then pt + 1 segments. */
static int64_t olc_conv_task_floats(int level, int64_t K, int64_t pt) {
    int64_t nr = olc_sgemm_nr(level), npad = (pt + nr - 1) / nr * nr;
    return olc_sgemm_packed_size(level, K, pt) + OLC_CONV_PACK_ROWS * npad
           + (pt + 1) * (int64_t)(sizeof(olc_conv_seg) / sizeof(float));
}

/* Floats of the column scratch olc_conv_f32 needs (0 for the plain GEMM):
 * one tile, or a slot's buffer a thread when tiles are tasks. */
static int64_t olc_conv_scratch(int level, int64_t K, int64_t P, int64_t Mg, int pointwise,
                                int nthreads) {
    if (pointwise) return 0;
    int64_t pt = olc_conv_tile_cols(level, K, P, Mg, nthreads);
    if (olc_conv_tasked(P, Mg, olc_sgemm_nr(level), 0, nthreads))
        return nthreads * olc_conv_task_floats(level, K, pt);
    return olc_sgemm_packed_size(level, K, pt);
}

/* Makes image-group block b (= n * G + gi) the job's current block: its
 * input, weights, bias, output and Z. */
static void olc_conv_block(olc_conv_job *p, int64_t b) {
    int64_t gi = b % p->G;
    p->xb = p->x + b * p->g.C * p->g.D * p->g.H * p->g.W;
    p->wb = p->w + gi * p->Mg * p->ldw;
    p->bb = p->bias != NULL ? p->bias + gi * p->Mg : NULL;
    p->yb = p->y + b * p->Mg * p->P;
    p->zb = p->z != NULL ? p->z + b * p->Mg * p->P : NULL;
}

/* The GEMM's epilogue for the current block's columns from p0 on (C at
 * yb + p0): olc_conv_tile_epilogue, and where the activation is none, Relu
 * or Clip with a <= b, the same for the micro-kernels to apply to whole
 * panels in registers (olc_ukr_epi; this machine's MobileNet-V2 spent 4 %
 * of its time in the separate pass). */
static olc_sgemm_epilogue olc_conv_gemm_epilogue(olc_conv_job *p, int64_t p0) {
    olc_sgemm_epilogue e;
    memset(&e, 0, sizeof e);
    e.fn = olc_conv_tile_epilogue;
    e.arg = p;
    int act = p->act == OLC_CONV_NONE ? OLC_UKR_EPI_NONE
              : p->act == OLC_CONV_RELU ? OLC_UKR_EPI_RELU
              : p->act == OLC_CONV_CLIP && p->a <= p->b ? OLC_UKR_EPI_CLIP : -1;
    e.fused = act >= 0;
    e.regs.bias = p->bb;
    e.regs.z = p->zb != NULL ? p->zb + p0 : NULL;
    e.regs.ldz = p->P;
    e.regs.act = act;
    e.regs.a = p->a;
    e.regs.b = p->b;
    e.zq = p->Mg * p->P;
    return e;
}

/* Task t of tiles as tasks: image-group block t / ntiles, its column tile
 * t % ntiles, packed into this slot's buffer, then multiplied on this
 * thread (with the epilogue, on a copy of the job that holds the tile). */
static void olc_conv_tile_task(void *arg, ptrdiff_t t, int slot) {
    olc_conv_job *p = (olc_conv_job *)arg;
    int64_t p0 = (int64_t)t % p->ntiles * p->pt, ZERO = 0;
    float *buf = olc_slot_buffer(p->slots, slot,
                                 (size_t)olc_conv_task_floats(p->level, p->K, p->pt));
    if (buf == NULL) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    olc_conv_job q = *p;
    q.p0 = p0;
    q.n1 = p->P - p0 < p->pt ? p->P - p0 : p->pt;
    olc_conv_block(&q, (int64_t)t / p->ntiles);
    q.cols = buf;
    float *lines = buf + olc_sgemm_packed_size(p->level, p->K, p->pt);
    q.seg = (olc_conv_seg *)(lines + OLC_CONV_PACK_ROWS * ((p->pt + p->nr - 1) / p->nr * p->nr));
    q.nseg = olc_conv_segments(&q.g, p0, q.n1, q.seg);
    for (int64_t k0 = 0; k0 < p->K; k0 += OLC_CONV_PACK_ROWS)
        olc_conv_pack_cols(q.level, &q.g, q.xb, q.seg, q.nseg, q.n1, k0,
                           k0 + OLC_CONV_PACK_ROWS < p->K ? k0 + OLC_CONV_PACK_ROWS : p->K, q.nr,
                           lines, q.cols);
    olc_sgemm_epilogue e = olc_conv_gemm_epilogue(&q, p0);
    if (olc_sgemm_then(q.level, OLC_FLOAT, 1, q.wb, &ZERO, q.ldw, 1, q.cols, &ZERO, NULL, &ZERO, 0,
                       0, q.Mg, q.n1, q.K, q.yb + p0, q.P, 0, 1.0f, 0, p->epi ? &e : NULL, 1)
        != 0)
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
}

/* y (N x G*Mg x P) = conv(x (N x G*C x D*H*W), w (G*Mg x K)) + bias (+ z),
 * activation; w's rows are ldw >= K floats apart (olc_gemm_spread_ld:
 * the micro-kernels read them in place).  pointwise: 1x1 kernel, unit
 * strides, no pads (columns are X itself).  Returns -1 without memory. */
static int olc_conv_f32(int level, const olc_conv_geom *g, const float *x, const float *w,
                        int64_t ldw, const float *bias, const float *z, float *y, int64_t N,
                        int64_t G, int64_t Mg, int pointwise, int act, float a, float b,
                        int nthreads) {
    olc_conv_job p;
    memset(&p, 0, sizeof p);
    p.g = *g;
    p.level = olc_gemm_level(level);
    p.act = act;
    p.a = a;
    p.b = b;
    p.Mg = Mg;
    p.K = g->C * g->kd * g->kh * g->kw;
    p.ldw = ldw;
    p.P = g->OD * g->OH * g->OW;
    p.nr = olc_sgemm_nr(p.level);
    int64_t ZERO = 0;
    if (p.P == 0 || Mg == 0 || N == 0) return 0;
    if (p.K == 0) { /* no input channels: the bias alone */
        for (int64_t i = 0; i < N * G * Mg; ++i) {
            int64_t m = i % (G * Mg);
            float *yr = y + i * p.P;
            for (int64_t j = 0; j < p.P; ++j) yr[j] = 0.0f;
            olc_conv_epilogue(p.level, yr, z != NULL ? z + i * p.P : NULL, p.P, 1, p.P,
                              bias != NULL ? bias + m : NULL, act, a, b);
        }
        return 0;
    }
    p.pt = pointwise ? p.P : olc_conv_tile_cols(p.level, p.K, p.P, Mg, nthreads);
    p.x = x;
    p.w = w;
    p.bias = bias;
    p.z = z;
    p.y = y;
    p.G = G;
    p.epi = bias != NULL || z != NULL || act != OLC_CONV_NONE;
    if (olc_conv_tasked(p.P, Mg, p.nr, pointwise, nthreads)) {
        p.ntiles = (p.P + p.pt - 1) / p.pt;
        if ((p.slots = olc_slot_buffers(nthreads)) == NULL) return -1;
        olc_parallel_for(N * G * p.ntiles, olc_conv_tile_task, &p, nthreads);
        olc_slot_buffers_free(p.slots, nthreads);
        return p.failed ? -1 : 0;
    }
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
    olc_sgemm_epilogue tile_epilogue;
    const olc_sgemm_epilogue *epilogue = p.epi ? &tile_epilogue : NULL;
    int status = 0;
    if (pointwise && G == 1) {
        /* every image in one GEMM, A = W for each: one parallel loop, not
         * one an image (at batch 8, MobileNet-V2's 1x1 layers made 8) */
        int64_t *offsets = (int64_t *)malloc((size_t)(2 * N) * sizeof(int64_t));
        if (offsets == NULL) return -1;
        for (int64_t n = 0; n < N; ++n) {
            offsets[n] = 0;
            offsets[N + n] = n * p.K * p.P;
        }
        olc_conv_block(&p, 0);
        tile_epilogue = olc_conv_gemm_epilogue(&p, 0);
        status = olc_sgemm_then(p.level, OLC_FLOAT, N, p.w, offsets, p.ldw, 1, NULL, &ZERO, p.x,
                                offsets + N, p.P, 1, Mg, p.P, p.K, p.y, p.P, Mg * p.P, 1.0f, 0,
                                epilogue, nthreads);
        free(offsets);
        return status;
    }
    for (int64_t n = 0; n < N && status == 0; ++n) {
        for (int64_t gi = 0; gi < G && status == 0; ++gi) {
            olc_conv_block(&p, n * G + gi);
            if (pointwise) {
                p.p0 = 0;
                p.n1 = p.P;
                tile_epilogue = olc_conv_gemm_epilogue(&p, 0);
                status = olc_sgemm_then(p.level, OLC_FLOAT, 1, p.wb, &ZERO, p.ldw, 1, NULL, &ZERO,
                                        p.xb, &ZERO, p.P, 1, Mg, p.P, p.K, p.yb, p.P, 0, 1.0f, 0,
                                        epilogue, nthreads);
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
                tile_epilogue = olc_conv_gemm_epilogue(&p, p0);
                status = olc_sgemm_then(p.level, OLC_FLOAT, 1, p.wb, &ZERO, p.ldw, 1, p.cols, &ZERO,
                                        NULL, &ZERO, 0, 0, Mg, p.n1, p.K, p.yb + p0, p.P, 0, 1.0f,
                                        0, epilogue, nthreads);
            }
        }
    }
    free(p.cols);
    free(p.seg);
    olc_slot_buffers_free(p.lines, nthreads);
    return status;
}

/* d[q * ldd + r] = s[r * lds + q] for r, q < 8: an 8 x 8 block of floats
 * transposed (olc_conv_dwc's copies into and out of its channel-innermost
 * layout, olc_conv_f32_t's columns of a 1x1 kernel; the compiler made a
 * gather of single floats of the plain loop). */
static inline void olc_conv_tr8_f32_scalar(const float *s, int64_t lds, float *d,
                                           int64_t ldd) {
    for (int r = 0; r < 8; ++r)
        for (int q = 0; q < 8; ++q) d[q * ldd + r] = s[r * lds + q];
}
static inline void olc_conv_tr8_f64_scalar(const double *s, int64_t lds, double *d,
                                           int64_t ldd) {
    for (int r = 0; r < 8; ++r)
        for (int q = 0; q < 8; ++q) d[q * ldd + r] = s[r * lds + q];
}
#if OLC_X86
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 void
olc_conv_tr8_f32_avx2(const float *s, int64_t lds, float *d, int64_t ldd) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * lds);
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(d + i * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(d + (i + 4) * ldd, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}
#define olc_conv_tr8_f32_avx512 olc_conv_tr8_f32_avx2
#define olc_conv_tr8_f64_avx2 olc_conv_tr8_f64_scalar
#define olc_conv_tr8_f64_avx512 olc_conv_tr8_f64_scalar
#endif

/* ---- float32 Conv with the pixels as rows: Y^T = columns^T W^T ---- */

/* Where a layer has at least as many output channels as its image has
 * pixels (ResNet's last stage: 2048 channels of 7x7), W is the large
 * operand.  Read in place as olc_conv_f32's A, each row block loads 12
 * rows K floats apart; as the engine's B, packed once by the adapter (wt:
 * W^T, K x M, olc_sgemm_pack_b at this level), it streams in order with
 * the prefetch of pre-packed weights.  The pixels are then the rows: each
 * image's columns are written pixel by pixel (cols, P x K), T (P x M) =
 * cols W^T, and T is transposed into y with the epilogue.  Every output
 * is the same sum, in the same order, as olc_conv_f32's: the same bits. */

/* Pixels of one task of the row-wise im2col (olc_conv_tr8_f32's 8 for a 1x1
 * kernel), channels of one transpose. */
#define OLC_CONV_T_PIXELS 8
#define OLC_CONV_T_CHANNELS 16

typedef struct {
    olc_conv_geom g;
    int level, act;
    float a, b;
    const float *x, *bias, *z; /* x, z: the chunk's first image */
    float *cols, *t, *y;       /* y: the chunk's first image */
    const int64_t *at;         /* per pixel and kernel offset: where in a plane, -1: padding */
    int64_t M, K, P, kk;
    int64_t ldcols, ldt;       /* row strides of cols and T (olc_gemm_spread_ld) */
    int64_t xplane;            /* floats of one input image */
    int64_t ptasks, mtasks;    /* tasks of one image: pixel blocks, channel blocks */
} olc_conv_t_job;

/* at[q * kk + r]: the element of an input plane that pixel q reads at
 * kernel offset r (depth, height, width), -1 in the padding. */
static void olc_conv_t_offsets(const olc_conv_geom *g, int64_t *at) {
    for (int64_t q = 0; q < g->OD * g->OH * g->OW; ++q) {
        int64_t ow = q % g->OW, oh = q / g->OW % g->OH, od = q / (g->OW * g->OH);
        for (int64_t e = 0; e < g->kd; ++e) {
            int64_t id = od * g->sd - g->pd + e * g->dd;
            for (int64_t f = 0; f < g->kh; ++f) {
                int64_t ih = oh * g->sh - g->ph + f * g->dh;
                for (int64_t h = 0; h < g->kw; ++h) {
                    int64_t iw = ow * g->sw - g->pw + h * g->dw;
                    *at++ = id >= 0 && id < g->D && ih >= 0 && ih < g->H && iw >= 0 && iw < g->W
                                ? (id * g->H + ih) * g->W + iw : -1;
                }
            }
        }
    }
}

/* Row q of the columns from channel c0 on: row[c * kk + r] = x[c * plane +
 * at[r]] (0 where at[r] < 0), one element at a time. */
static void olc_conv_t_row_scalar(const float *x, const int64_t *at, int64_t kk, int64_t c0,
                                  int64_t C, int64_t plane, float *row) {
    for (int64_t r = 0; r < kk; ++r) {
        float *out = row + r;
        if (at[r] < 0) {
            for (int64_t c = c0; c < C; ++c) out[c * kk] = 0.0f;
        } else {
            const float *in = x + at[r];
            for (int64_t c = c0; c < C; ++c) out[c * kk] = in[c * plane];
        }
    }
}

/* Taps of a kernel whose rows olc_conv_t_rows_avx512 gathers (3x3x3). */
#define OLC_CONV_T_GATHER_TAPS 27

#if OLC_X86 && OLC_HAVE_AVX512
/* The same for rows q0..q0+nq (at most OLC_CONV_T_PIXELS; at: row q0's
 * offsets), 16 channels at a time: a row's kk * 16 floats of them are
 * consecutive, kk gathers of 16 lanes (lane l of gather j reads channel
 * (16 j + l) / kk at tap (16 j + l) % kk; the padding's lanes masked to
 * 0), each stored whole.  The rows go inner, so that the lines of the 16
 * planes they read stay in L1 from one pixel to the next.  The scalar loop
 * writes a plane apart and took 2.3 times as long (512 channels, 3x3 at
 * 7x7, 1 thread).  Returns the channels done (whole groups of 16); the
 * caller does the rest. */
static OLC_TARGET_AVX512 int64_t olc_conv_t_rows_avx512(const float *x, const int64_t *at,
                                                         int64_t nq, int64_t kk, int64_t C,
                                                         int64_t plane, float *cols,
                                                         int64_t ldcols) {
    int32_t idx[OLC_CONV_T_PIXELS][OLC_CONV_T_GATHER_TAPS * 16];
    __mmask16 in[OLC_CONV_T_PIXELS][OLC_CONV_T_GATHER_TAPS];
    for (int64_t q = 0; q < nq; ++q) {
        int64_t c = 0, r = 0; /* lane o = 16 j + l: channel o / kk, tap o % kk */
        for (int64_t j = 0; j < kk; ++j) {
            in[q][j] = 0;
            for (int l = 0; l < 16; ++l) {
                int64_t a = at[q * kk + r];
                idx[q][16 * j + l] = a < 0 ? 0 : (int32_t)(c * plane + a);
                if (a >= 0) in[q][j] |= (__mmask16)(1u << l);
                if (++r == kk) r = 0, ++c;
            }
        }
    }
    int64_t c0 = 0;
    for (; c0 + 16 <= C; c0 += 16) {
        const float *xc = x + c0 * plane;
        for (int64_t q = 0; q < nq; ++q) {
            float *out = cols + q * ldcols + c0 * kk;
            for (int64_t j = 0; j < kk; ++j) {
                __m512i iv = _mm512_loadu_si512((const void *)(idx[q] + 16 * j));
                _mm512_storeu_ps(out + 16 * j, _mm512_mask_i32gather_ps(_mm512_setzero_ps(),
                                                                        in[q][j], iv, xc, 4));
            }
        }
    }
    return c0;
}
#endif

/* Whether 8 pixels' offsets (a 1x1 kernel's) are 8 consecutive elements. */
static inline int olc_conv_t_run8(const int64_t *at) {
    for (int q = 1; q < 8; ++q)
        if (at[q] != at[0] + q) return 0;
    return at[0] >= 0;
}

#if OLC_X86
/* 8 rows of a 1x1 kernel's columns that are x^T (x: their first pixel),
 * 8 channels at a time; returns the channels done. */
static OLC_TARGET_AVX2 int64_t olc_conv_t_rows8_avx2(const float *x, int64_t C, int64_t plane,
                                                      float *cols, int64_t ldcols) {
    int64_t c0 = 0;
    for (; c0 + 8 <= C; c0 += 8) olc_conv_tr8_f32_avx2(x + c0 * plane, plane, cols + c0, ldcols);
    return c0;
}
#endif

/* cols[i * P + q][k] for image i of the chunk and pixels q of task u, k in
 * W's order (channel, then kernel offset r). */
static void olc_conv_t_cols_task(void *arg, ptrdiff_t u, int slot) {
    const olc_conv_t_job *p = (const olc_conv_t_job *)arg;
    int64_t i = (int64_t)u / p->ptasks, q0 = (int64_t)u % p->ptasks * OLC_CONV_T_PIXELS;
    int64_t q1 = q0 + OLC_CONV_T_PIXELS < p->P ? q0 + OLC_CONV_T_PIXELS : p->P;
    int64_t plane = p->g.D * p->g.H * p->g.W, kk = p->kk, C = p->g.C;
    const float *x = p->x + i * p->xplane;
    float *cols = p->cols + i * p->P * p->ldcols;
    (void)slot;
    int64_t c0 = 0;
#if OLC_X86
    /* a 1x1 kernel whose 8 pixels read 8 consecutive elements of a plane
     * (stride 1): their rows are x^T, 8 x 8 transposes, 8 channels at a
     * time (2048 -> 512 at 7x7, batch 8, 2 threads: the rows took 7 % of
     * the layer one element at a time) */
    if (p->level >= OLC_AVX2 && kk == 1 && q1 - q0 == 8 && olc_conv_t_run8(p->at + q0))
        c0 = olc_conv_t_rows8_avx2(x + p->at[q0], C, plane, cols + q0 * p->ldcols, p->ldcols);
#endif
#if OLC_X86 && OLC_HAVE_AVX512
    /* other 1x1 kernels' rows are written in order, which the gathers did
     * not beat (ResNet-50's 1x1/2 512 -> 1024 at 28x28 in the model, 2
     * threads: 0.80 -> 0.86 ms); the lanes' offsets, up to 15 planes on,
     * are int32 */
    if (p->level >= OLC_AVX512 && kk > 1 && kk <= OLC_CONV_T_GATHER_TAPS
        && plane <= INT32_MAX / 16)
        c0 = olc_conv_t_rows_avx512(x, p->at + q0 * kk, q1 - q0, kk, C, plane,
                                    cols + q0 * p->ldcols, p->ldcols);
#endif
    for (int64_t q = q0; q < q1; ++q)
        olc_conv_t_row_scalar(x, p->at + q * kk, kk, c0, C, plane, cols + q * p->ldcols);
}

/* Image i's channels m0..m1 of task u = T's columns (its rows i * P on),
 * then bias, Z and activation. */
static void olc_conv_t_out_task(void *arg, ptrdiff_t u, int slot) {
    const olc_conv_t_job *p = (const olc_conv_t_job *)arg;
    int64_t i = (int64_t)u / p->mtasks, m0 = (int64_t)u % p->mtasks * OLC_CONV_T_CHANNELS;
    int64_t m1 = m0 + OLC_CONV_T_CHANNELS < p->M ? m0 + OLC_CONV_T_CHANNELS : p->M;
    int64_t q0 = 0;
    const float *t = p->t + i * p->P * p->ldt;
    float *y = p->y + i * p->M * p->P;
    const float *z = p->z != NULL ? p->z + i * p->M * p->P : NULL;
    (void)slot;
#if OLC_X86 && OLC_HAVE_AVX512
    /* whole 16 x 16 blocks in registers: the scalar loop below reads T a
     * row apart per element (13% of a 960 -> 320 1x1 layer at 7x7) */
    if (p->level >= OLC_AVX512 && m1 - m0 == 16)
        for (; q0 + 16 <= p->P; q0 += 16)
            olc_transpose16_avx512(t + q0 * p->ldt + m0, p->ldt, y + m0 * p->P + q0, p->P);
#endif
    for (int64_t q = q0; q < p->P; ++q)
        for (int64_t m = m0; m < m1; ++m) y[m * p->P + q] = t[q * p->ldt + m];
    olc_conv_epilogue(p->level, y + m0 * p->P, z != NULL ? z + m0 * p->P : NULL, p->P, m1 - m0,
                      p->P, p->bias != NULL ? p->bias + m0 : NULL, p->act, p->a, p->b);
}

/* Images whose pixels one GEMM takes as its rows: as many as fill one row
 * tile of the engine (OLC_GEMM_MC rows), at least one.  The GEMM then reads
 * W^T once for all of them rather than once an image: at batch 8, 49-pixel
 * images and 0.6-1.6 MB of weights (MobileNet-V2's last stage) came from
 * L3 eight times, and 49 rows made four row blocks of 12 and one of 1. */
static int64_t olc_conv_t_images(const olc_conv_geom *g, int64_t N) {
    int64_t P = g->OD * g->OH * g->OW;
    int64_t n = P > 0 ? OLC_GEMM_MC / P : 1;
    if (n > N) n = N;
    return n > 1 ? n : 1;
}

/* Floats of the scratch olc_conv_f32_t takes for N images: cols (P x K),
 * then T (P x M) for each image of a chunk, each row olc_gemm_spread_ld
 * floats. */
static int64_t olc_conv_t_scratch(const olc_conv_geom *g, int64_t M, int64_t N) {
    int64_t P = g->OD * g->OH * g->OW;
    return olc_conv_t_images(g, N) * P
           * (olc_gemm_spread_ld(g->C * g->kd * g->kh * g->kw) + olc_gemm_spread_ld(M));
}

/* y (N x M x P) = act(conv(x, W) + bias + z), one group, from wt (W^T packed
 * as the engine's B at level) and scratch of olc_conv_t_scratch floats.
 * Images go in chunks of olc_conv_t_images, their pixels the rows of one
 * GEMM.  Returns -1 without memory (the offsets table, the engine's
 * scratch). */
static int olc_conv_f32_t(int level, const olc_conv_geom *g, const float *x, const float *wt,
                          const float *bias, const float *z, float *y, int64_t N, int64_t M,
                          int act, float a, float b, float *scratch, int nthreads) {
    olc_conv_t_job p;
    int64_t ZERO = 0, chunk = olc_conv_t_images(g, N);
    p.g = *g;
    p.level = olc_gemm_level(level);
    p.act = act;
    p.a = a;
    p.b = b;
    p.bias = bias;
    p.M = M;
    p.K = g->C * g->kd * g->kh * g->kw;
    p.P = g->OD * g->OH * g->OW;
    p.kk = g->kd * g->kh * g->kw;
    p.ldcols = olc_gemm_spread_ld(p.K);
    p.ldt = olc_gemm_spread_ld(M);
    p.xplane = g->C * g->D * g->H * g->W;
    p.ptasks = (p.P + OLC_CONV_T_PIXELS - 1) / OLC_CONV_T_PIXELS;
    p.mtasks = (M + OLC_CONV_T_CHANNELS - 1) / OLC_CONV_T_CHANNELS;
    p.cols = scratch;
    p.t = scratch + chunk * p.P * p.ldcols;
    if (p.P == 0 || M == 0) return 0;
    int64_t *at = (int64_t *)malloc((size_t)(p.P * p.kk) * sizeof(int64_t));
    if (at == NULL) return -1;
    olc_conv_t_offsets(g, at);
    p.at = at;
    /* one image whose pixel q reads element q of each plane (1x1, stride
     * 1, no pads): the columns are X^T, which the engine packs from X
     * itself (rows of A one float apart, columns a plane apart), the same
     * sums without a copy */
    int pointwise = chunk == 1 && p.kk == 1 && p.P == g->D * g->H * g->W;
    for (int64_t q = 0; q < p.P && pointwise; ++q) pointwise = at[q] == q;
    int status = 0;
    for (int64_t n = 0; n < N && status == 0; n += chunk) {
        int64_t images = N - n < chunk ? N - n : chunk;
        p.x = x + n * p.xplane;
        p.y = y + n * M * p.P;
        p.z = z != NULL ? z + n * M * p.P : NULL;
        if (pointwise) {
            status = olc_sgemm(p.level, OLC_FLOAT, 1, p.x, &ZERO, 1, p.P, wt, &ZERO, NULL,
                               &ZERO, 0, 0, p.P, M, p.K, p.t, p.ldt, 0, 1.0f, 0, nthreads);
        } else {
            olc_parallel_for(images * p.ptasks, olc_conv_t_cols_task, &p, nthreads);
            status = olc_sgemm(p.level, OLC_FLOAT, 1, p.cols, &ZERO, p.ldcols, 1, wt, &ZERO,
                               NULL, &ZERO, 0, 0, images * p.P, M, p.K, p.t, p.ldt, 0, 1.0f, 0,
                               nthreads);
        }
        if (status == 0)
            olc_parallel_for(images * p.mtasks, olc_conv_t_out_task, &p, nthreads);
    }
    free(at);
    return status;
}

/* ---- col2im: scatter-add of columns into an image ---- */

/* col2im, float32 and double */
#define OLC_CT float
#define OLC_CN f32
#include "conv/olc_conv_col2im.h"
#undef OLC_CT
#undef OLC_CN
#define OLC_CT double
#define OLC_CN f64
#include "conv/olc_conv_col2im.h"
#undef OLC_CT
#undef OLC_CN

/* ---- the direct loops, per level and type ---- */

/* Columns of the zero-padded rows olc_conv_dw3 reads: those one output row
 * touches. */
static int64_t olc_conv_dw3_width(const olc_conv_geom *g) {
    return (g->OW - 1) * g->sw + 2 * g->dw + 1;
}

/* olc_conv_dwc: the channels a block (a vector's lanes at every level, so
 * that the lanes and the sums are the same at every level) and the most
 * kernel rows it takes. */
enum { OLC_CONV_DWC = 8, OLC_CONV_DWC_MAX_KH = 7 };

/* Whether depthwise planes run olc_conv_dwc, a block of channels at a
 * time: those of olc_conv_dw3 that are 2-D, at most OLC_CONV_DWC_MAX_KH
 * rows high and at most max_plane output positions. */
static int olc_conv_dwc_fits(const olc_conv_geom *g, int64_t max_plane) {
    return g->C == 1 && g->D == 1 && g->kd == 1 && g->OD == 1 && g->kw == 3
        && (g->sw == 1 || g->sw == 2) && g->kh >= 1 && g->kh <= OLC_CONV_DWC_MAX_KH
        && g->OH * g->OW <= max_plane;
}

/* Floats of olc_conv_dwc's buffer for a band of rb output rows: the
 * padded channel-innermost input rows it reads, then its output
 * positions. */
static int64_t olc_conv_dwc_floats(const olc_conv_geom *g, int64_t rb) {
    int64_t Hp = (rb - 1) * g->sh + (g->kh - 1) * g->dh + 1;
    return (Hp * olc_conv_dw3_width(g) + rb * g->OW) * OLC_CONV_DWC;
}

/* Output rows a band of olc_conv_dwc: as many as keep its buffer within
 * `floats` (at least one, at most OH). */
static int64_t olc_conv_dwc_band(const olc_conv_geom *g, int64_t floats) {
    int64_t rb = g->OH;
    while (rb > 1 && olc_conv_dwc_floats(g, rb) > floats) rb = (rb + 1) / 2;
    return rb;
}

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
                                    float, float *, float *, int64_t, int64_t);

static int olc_conv_level(int level) { return olc_build_level(level); }

typedef void (*olc_conv_dwc_f32_fn)(const olc_conv_geom *, const float *, const float *,
                                    const float *, int64_t, float *, float *, int64_t, int64_t);

static olc_conv_dwc_f32_fn olc_conv_pick_dwc_f32(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_dwc_f32);
}

static olc_conv_dw3_f32_fn olc_conv_pick_dw3_f32(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_dw3_f32);
}

/* Whether a depthwise plane runs olc_conv_dw3: 2-D or 1-D, 3 taps wide,
 * width stride 1 or 2. */
static int olc_conv_dw3_fits(const olc_conv_geom *g) {
    return g->C == 1 && g->D == 1 && g->kd == 1 && g->OD == 1 && g->kw == 3
        && (g->sw == 1 || g->sw == 2);
}

/* Rows r0..r1's padded input rows of one plane x (H x W) into xp (rows
 * olc_conv_dw3_width wide): xp row i is padded row r0 * sh + i.  At width
 * stride 2 (dilation 1) each row is stored split, its even columns then
 * its odd ones (OW + 1 and OW of them), so that the three taps read
 * consecutive floats; t holds a row (Wp floats) on the way.  Splitting
 * every input row once costs less than splitting the three rows of every
 * output row (an input row serves one or two output rows). */
static void olc_conv_pad_rows(const olc_conv_geom *g, const float *x, int64_t r0, int64_t r1,
                              float *xp, float *t) {
    int64_t Wp = olc_conv_dw3_width(g);
    int64_t rows = (r1 - 1 - r0) * g->sh + (g->kh - 1) * g->dh + 1;
    const int split = g->sw == 2 && g->dw == 1;
    for (int64_t i = 0; i < rows; ++i) {
        float *d = xp + i * Wp;
        int64_t ih = r0 * g->sh + i - g->ph;
        if (ih < 0 || ih >= g->H) {
            memset(d, 0, (size_t)Wp * sizeof(float));
            continue;
        }
        float *e = split ? t : d;
        /* columns j < pw and j >= pw + W are padding */
        int64_t lo = g->pw < Wp ? g->pw : Wp;
        int64_t hi = g->pw + g->W < Wp ? g->pw + g->W : Wp;
        if (hi < lo) hi = lo;
        memset(e, 0, (size_t)lo * sizeof(float));
        memcpy(e + lo, x + ih * g->W + (lo - g->pw), (size_t)(hi - lo) * sizeof(float));
        memset(e + hi, 0, (size_t)(Wp - hi) * sizeof(float));
        if (split) {
            const int64_t OW = g->OW;
            float *ev = d, *od = d + OW + 1;
            for (int64_t j = 0; j < OW; ++j) {
                ev[j] = e[2 * j];
                od[j] = e[2 * j + 1];
            }
            ev[OW] = e[2 * OW];
        }
    }
}

static olc_conv_direct_f32_fn olc_conv_pick_direct_f32(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_direct_f32);
}

/* ---- depthwise 3x3 on the planes themselves (AVX-512) ----
 *
 * Output rows r0..r1 of one plane y (OH x OW) from its input plane x (H x
 * W), 3 x 3 taps w, strides 1 or 2 (both axes alike), no dilation: each
 * output vector of 16 columns sums its nine taps from unaligned loads of
 * the three input rows, the lanes in the padding masked to zero, so there
 * is no copy into another layout (olc_conv_dwc transposes 8 planes in and
 * out: half its time).  At stride 2 a pair of loads (32 columns) gives the
 * taps of the even and odd columns by one permute each, a second pair two
 * columns on the third tap.  Blocks of 2 or 4 output rows by 1 to 4
 * vectors keep eight sums or more in flight, each input row loaded once
 * for the block's rows that read it.  Each output is bias, then the taps
 * row by row, each one fused multiply-add (other bits than olc_conv_dwc,
 * within rounding); a row of taps wholly in the padding is skipped.
 * Planes narrower than 14 stay with olc_conv_dwc, whose vectors run
 * across channels. */
enum { OLC_CONV_DWP_MIN_WIDTH = 14, OLC_CONV_DWP_MAX_VECTORS = 64 };

typedef void (*olc_conv_dwp_f32_fn)(const olc_conv_geom *g, const float *x, const float *w,
                                    float bias, int act, float a, float b, float *y,
                                    int64_t r0, int64_t r1);

/* Whether olc_conv_dwp takes a depthwise plane at this level. */
static int olc_conv_dwp_fits(const olc_conv_geom *g, int level) {
    return OLC_HAVE_AVX512 && olc_build_level(level) >= OLC_AVX512 && g->C == 1 && g->D == 1
        && g->kd == 1 && g->OD == 1 && g->kh == 3 && g->kw == 3
        && ((g->sh == 1 && g->sw == 1) || (g->sh == 2 && g->sw == 2)) && g->dh == 1
        && g->dw == 1 && g->OW >= OLC_CONV_DWP_MIN_WIDTH
        && g->OW <= 16 * OLC_CONV_DWP_MAX_VECTORS;
}

/* Whether olc_conv_act_avx512 applies an activation (else the loops that
 * use it leave it, and olc_conv_epilogue runs after). */
static int olc_conv_act_fusable(int act) {
    return act == OLC_CONV_NONE || act == OLC_CONV_RELU || act == OLC_CONV_CLIP
        || act == OLC_CONV_LEAKY;
}

#if OLC_X86 && OLC_HAVE_AVX512
/* Lanes l < 16 of the load at column `start` with 0 <= start + l < W. */
static inline __mmask16 olc_conv_window16(int64_t start, int64_t W) {
    int64_t lo = start < 0 ? -start : 0, hi = W - start < 16 ? W - start : 16;
    if (hi <= lo) return 0;
    uint32_t m = ((uint32_t)1 << hi) - 1;
    return (__mmask16)(m & ~(((uint32_t)1 << lo) - 1));
}

/* The masks of an output row's vectors v at width stride sw (1 or 2):
 * masks[j][v] for the loads, at stride 1 of tap column j (0 to 2), at
 * stride 2 of columns +0, +16, +2, +18 of its two pairs
 * (olc_conv_taps_s2); out[v] for the store. */
static inline void olc_conv_row_masks(const olc_conv_geom *g,
                                      __mmask16 masks[4][OLC_CONV_DWP_MAX_VECTORS],
                                      __mmask16 *out) {
    static const int pair[4] = {0, 16, 2, 18};
    for (int64_t v = 0; v < (g->OW + 15) / 16; ++v) {
        for (int j = 0; j < 4; ++j)
            masks[j][v] = g->sw == 1 ? olc_conv_window16(v * 16 - g->pw + j, g->W)
                                     : olc_conv_window16(v * 32 - g->pw + pair[j], g->W);
        out[v] = olc_tail_mask16(g->OW - v * 16);
    }
}

/* The three taps of output vector v of a row at stride 2, q its first
 * input column: a pair of loads (32 columns) split into even and odd
 * columns, and a second pair two columns on for the third tap. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_conv_taps_s2(const float *q, __mmask16 masks[4][OLC_CONV_DWP_MAX_VECTORS], int64_t v,
                 __m512 xe[3]) {
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6,
                                          4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5,
                                         3, 1);
    __m512 a0 = _mm512_maskz_loadu_ps(masks[0][v], q);
    __m512 a1 = _mm512_maskz_loadu_ps(masks[1][v], q + 16);
    __m512 b0 = _mm512_maskz_loadu_ps(masks[2][v], q + 2);
    __m512 b1 = _mm512_maskz_loadu_ps(masks[3][v], q + 18);
    xe[0] = _mm512_permutex2var_ps(a0, even, a1);
    xe[1] = _mm512_permutex2var_ps(a0, odd, a1);
    xe[2] = _mm512_permutex2var_ps(b0, even, b1);
}

/* olc_conv_epilogue's piecewise-linear activations (olc_conv_act_fusable)
 * on one vector, the same bits: max(a, v) is v < a ? a : v, NaN kept. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 __m512
olc_conv_act_avx512(__m512 v, int act, float a, float b) {
    if (act == OLC_CONV_RELU) return _mm512_max_ps(_mm512_setzero_ps(), v);
    if (act == OLC_CONV_CLIP)
        return _mm512_min_ps(_mm512_set1_ps(b), _mm512_max_ps(_mm512_set1_ps(a), v));
    if (act == OLC_CONV_LEAKY) {
        __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NGE_UQ);
        return _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(a));
    }
    return v;
}

/* Output rows oh..oh+nr, vectors v0..v0+n of one plane at stride s (nr, n
 * and s constants once inlined, nr * n <= 16 sums in registers); masks
 * from olc_conv_row_masks. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_conv_dwp_block(const int nr, const int n, const int s, const olc_conv_geom *g,
                   const float *x, const __m512 *wv, __m512 vb,
                   __mmask16 masks[4][OLC_CONV_DWP_MAX_VECTORS], const __mmask16 *out,
                   int act, float a, float b, int64_t oh, int64_t v0, float *y) {
    const int nin = (nr - 1) * s + 3;
    __m512 acc[4][4];
    const float *rows[9]; /* input rows oh * s - ph .. + nin, NULL in the padding;
                           * masked lanes are not read: the column may be -pw */
#pragma GCC unroll 9
    for (int r = 0; r < nin; ++r) {
        int64_t ih = oh * s - g->ph + r;
        rows[r] = ih >= 0 && ih < g->H ? x + ih * g->W - g->pw + v0 * 16 * s : NULL;
    }
#pragma GCC unroll 4
    for (int o = 0; o < nr; ++o)
#pragma GCC unroll 4
        for (int i = 0; i < n; ++i) acc[o][i] = vb;
#pragma GCC unroll 9
    for (int r = 0; r < nin; ++r) {
        if (rows[r] == NULL) continue;
#pragma GCC unroll 4
        for (int i = 0; i < n; ++i) {
            const int64_t v = v0 + i;
            __m512 xe[3];
            if (s == 1) {
                const float *p = rows[r] + i * 16;
#pragma GCC unroll 3
                for (int e = 0; e < 3; ++e) xe[e] = _mm512_maskz_loadu_ps(masks[e][v], p + e);
            } else {
                olc_conv_taps_s2(rows[r] + i * 32, masks, v, xe);
            }
#pragma GCC unroll 4
            for (int o = 0; o < nr; ++o) {
                const int b = r - s * o; /* the output row's tap row */
                if (b >= 0 && b < 3)
#pragma GCC unroll 3
                    for (int e = 0; e < 3; ++e)
                        acc[o][i] = _mm512_fmadd_ps(wv[3 * b + e], xe[e], acc[o][i]);
            }
        }
    }
#pragma GCC unroll 4
    for (int o = 0; o < nr; ++o)
#pragma GCC unroll 4
        for (int i = 0; i < n; ++i)
            _mm512_mask_storeu_ps(y + (oh + o) * g->OW + (v0 + i) * 16, out[v0 + i],
                                  olc_conv_act_avx512(acc[o][i], act, a, b));
}

/* Rows r0..r1 at stride s (a constant once inlined): eight chains of
 * multiply-adds or more in flight, four rows of one or two vectors, two
 * rows of three or four. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_conv_dwp_rows(const int s, const olc_conv_geom *g, const float *x, const __m512 *wv,
                  __m512 vb, __mmask16 masks[4][OLC_CONV_DWP_MAX_VECTORS],
                  const __mmask16 *out, int act, float a, float b, float *y, int64_t r0,
                  int64_t r1) {
    const int64_t nv = (g->OW + 15) / 16;
    for (int64_t v0 = 0; v0 < nv; v0 += 4) {
        const int64_t n = nv - v0 < 4 ? nv - v0 : 4;
        int64_t oh = r0;
        if (n <= 2) {
            for (; oh + 4 <= r1; oh += 4) {
                if (n == 1) olc_conv_dwp_block(4, 1, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y);
                else olc_conv_dwp_block(4, 2, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y);
            }
        } else {
            for (; oh + 2 <= r1; oh += 2) {
                if (n == 3) olc_conv_dwp_block(2, 3, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y);
                else olc_conv_dwp_block(2, 4, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y);
            }
        }
        for (; oh < r1; ++oh) {
            switch (n) {
            case 1: olc_conv_dwp_block(1, 1, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y); break;
            case 2: olc_conv_dwp_block(1, 2, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y); break;
            case 3: olc_conv_dwp_block(1, 3, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y); break;
            default: olc_conv_dwp_block(1, 4, s, g, x, wv, vb, masks, out, act, a, b, oh, v0, y); break;
            }
        }
    }
}

static OLC_TARGET_AVX512 void olc_conv_dwp_f32(const olc_conv_geom *g, const float *x,
                                               const float *w, float bias, int act, float a,
                                               float b, float *y, int64_t r0, int64_t r1) {
    __mmask16 masks[4][OLC_CONV_DWP_MAX_VECTORS], out[OLC_CONV_DWP_MAX_VECTORS];
    olc_conv_row_masks(g, masks, out);
    __m512 wv[9];
    for (int i = 0; i < 9; ++i) wv[i] = _mm512_set1_ps(w[i]);
    const __m512 vb = _mm512_set1_ps(bias);
    if (g->sw == 1)
        olc_conv_dwp_rows(1, g, x, wv, vb, masks, out, act, a, b, y, r0, r1);
    else
        olc_conv_dwp_rows(2, g, x, wv, vb, masks, out, act, a, b, y, r0, r1);
}
#endif

/* olc_conv_dwp at this level, NULL where it does not take the plane. */
static olc_conv_dwp_f32_fn olc_conv_pick_dwp_f32(int level, const olc_conv_geom *g) {
#if OLC_X86 && OLC_HAVE_AVX512
    if (olc_conv_dwp_fits(g, level)) return olc_conv_dwp_f32;
#else
    (void)level;
    (void)g;
#endif
    return NULL;
}

/* ---- depthwise 3x3 at stride 1 on narrow planes, flat (AVX-512) ----
 *
 * A plane narrower than olc_conv_dwp takes (OW < 14) whose output is as
 * wide as its input (OW == W: two pads across the width in all) is one run
 * of OH * OW floats, and so is its input: tap (r, e) of output position q
 * reads input element q + (r - ph) * W + (e - pw).  Each vector of 16
 * output positions (two or more rows) then sums its nine taps from
 * unaligned loads of the input plane, the lanes whose tap lies in the
 * padding masked to zero: bias, then the taps row by row, each one fused
 * multiply-add, a tap in the padding adding w * 0 as olc_conv_dwc's
 * zero-padded copy does (olc_conv_dwp skips a row of such taps: the two
 * differ in the sign of an all-zero sum).  The masks depend only on the
 * vector's place in the plane, so they are made once for a run of planes.
 * MobileNet-V2's 960-channel 7x7 layers went 8 channels at a time through
 * olc_conv_dwc's transposes, 2x ONNX Runtime's time at batch 8. */
enum { OLC_CONV_DWF_MAX_VECTORS = 64 };

typedef void (*olc_conv_dwf_f32_fn)(const olc_conv_geom *g, const float *x, const float *w,
                                    const float *bias, int64_t planes, int act, float a,
                                    float b, float *y);

/* Whether olc_conv_dwf takes a depthwise plane at this level. */
static int olc_conv_dwf_fits(const olc_conv_geom *g, int level) {
    return OLC_HAVE_AVX512 && olc_build_level(level) >= OLC_AVX512 && g->C == 1 && g->D == 1
        && g->kd == 1 && g->OD == 1 && g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1
        && g->dh == 1 && g->dw == 1 && g->OW < OLC_CONV_DWP_MIN_WIDTH && g->OW == g->W
        && g->OH * g->OW <= 16 * OLC_CONV_DWF_MAX_VECTORS;
}

#if OLC_X86 && OLC_HAVE_AVX512
/* Vectors v0..v0+n of one plane (n a constant once inlined, n <= 4 sums
 * in flight): mask[t][v] the lanes of vector v whose tap t is in the
 * input, at[t] tap t's offset. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_conv_dwf_block(const int n, const float *x, const int64_t *at, const __m512 *wv, __m512 vb,
                   __mmask16 mask[9][OLC_CONV_DWF_MAX_VECTORS], int64_t v0, int64_t P, int act,
                   float a, float b, float *y) {
    __m512 acc[4];
#pragma GCC unroll 4
    for (int i = 0; i < n; ++i) acc[i] = vb;
#pragma GCC unroll 9
    for (int t = 0; t < 9; ++t)
#pragma GCC unroll 4
        for (int i = 0; i < n; ++i) {
            const int64_t v = v0 + i;
            __m512 xe = _mm512_maskz_loadu_ps(mask[t][v], x + v * 16 + at[t]);
            acc[i] = _mm512_fmadd_ps(wv[t], xe, acc[i]);
        }
#pragma GCC unroll 4
    for (int i = 0; i < n; ++i)
        _mm512_mask_storeu_ps(y + (v0 + i) * 16, olc_tail_mask16(P - (v0 + i) * 16),
                              olc_conv_act_avx512(acc[i], act, a, b));
}

/* planes consecutive planes: input i at x + i * H * W, its taps w + 9 * i,
 * its bias bias[i] (NULL: 0), output i at y + i * OH * OW; act as
 * olc_conv_act_avx512 (0 where the caller applies it after). */
static OLC_TARGET_AVX512 void olc_conv_dwf_f32(const olc_conv_geom *g, const float *x,
                                               const float *w, const float *bias,
                                               int64_t planes, int act, float a, float b,
                                               float *y) {
    const int64_t P = g->OH * g->OW, nv = (P + 15) / 16;
    __mmask16 mask[9][OLC_CONV_DWF_MAX_VECTORS];
    int64_t at[9];
    for (int64_t v = 0; v < nv; ++v) {
        uint32_t m[9] = {0};
        for (int64_t l = 0; l < 16 && v * 16 + l < P; ++l) {
            int64_t oh = (v * 16 + l) / g->OW, ow = (v * 16 + l) % g->OW;
            for (int t = 0; t < 9; ++t) {
                int64_t ih = oh + t / 3 - g->ph, iw = ow + t % 3 - g->pw;
                if (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W) m[t] |= (uint32_t)1 << l;
            }
        }
        for (int t = 0; t < 9; ++t) mask[t][v] = (__mmask16)m[t];
    }
    for (int t = 0; t < 9; ++t) at[t] = (t / 3 - g->ph) * g->W + (t % 3 - g->pw);
    for (int64_t i = 0; i < planes; ++i) {
        __m512 wv[9];
        for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[9 * i + t]);
        const __m512 vb = _mm512_set1_ps(bias != NULL ? bias[i] : 0.0f);
        const float *xp = x + i * g->H * g->W;
        float *yp = y + i * P;
        int64_t v0 = 0;
        for (; v0 + 4 <= nv; v0 += 4)
            olc_conv_dwf_block(4, xp, at, wv, vb, mask, v0, P, act, a, b, yp);
        switch (nv - v0) {
        case 1: olc_conv_dwf_block(1, xp, at, wv, vb, mask, v0, P, act, a, b, yp); break;
        case 2: olc_conv_dwf_block(2, xp, at, wv, vb, mask, v0, P, act, a, b, yp); break;
        case 3: olc_conv_dwf_block(3, xp, at, wv, vb, mask, v0, P, act, a, b, yp); break;
        default: break;
        }
    }
}
#endif

/* olc_conv_dwf at this level, NULL where it does not take the plane. */
static olc_conv_dwf_f32_fn olc_conv_pick_dwf_f32(int level, const olc_conv_geom *g) {
#if OLC_X86 && OLC_HAVE_AVX512
    if (olc_conv_dwf_fits(g, level)) return olc_conv_dwf_f32;
#else
    (void)level;
    (void)g;
#endif
    return NULL;
}

/* ---- stride-2 Conv of few input channels (the stems) ----
 *
 * The first layer of most CNNs reads 1 to 4 channels at stride 2 with a
 * 3x3 kernel (MobileNet, EfficientNet: 3 -> 16 or 32 channels, K = 27) or
 * a 7x7 one (ResNet, DenseNet: 3 -> 64, K = 147): through im2col its
 * columns cost as much as the product (the stride-2 gathers of K rows,
 * written and read again; a micro-kernel call of K steps a tile).  Here a
 * block is 16 output pixels of a row by 16 output channels, one vector a
 * pixel with the channels in its lanes: each tap is one load of its 16
 * channels' weights and 16 multiply-adds, each taking its pixel's input
 * value as a broadcast operand (the stride is only in those addresses),
 * then the block goes back to channel planes by a 16 x 16 transpose in
 * registers.  A block whose taps reach past the row reads a zero-padded
 * copy of its stretch.  Each output is summed as the GEMM sums it (from
 * zero, the taps in W's order, each one fused multiply-add, then bias,
 * then the activation): the bits of the im2col path. */
enum {
    OLC_CONV_FEWC_MAX_C = 4,
    OLC_CONV_FEWC_MAX_K = 7,
    OLC_CONV_FEWC_ROWS = 8
};

/* Whether olc_conv_fewc takes a Conv (one group) at this level: square
 * kernels of 3, 5 or 7 taps. */
static int olc_conv_fewc_fits(const olc_conv_geom *g, int level) {
    return OLC_HAVE_AVX512 && olc_build_level(level) >= OLC_AVX512 && g->C >= 1
        && g->C <= OLC_CONV_FEWC_MAX_C && g->D == 1 && g->kd == 1 && g->OD == 1
        && g->kh == g->kw && (g->kw == 3 || g->kw == 5 || g->kw == 7) && g->sh == 2
        && g->sw == 2 && g->dh == 1 && g->dw == 1 && g->OW >= 16;
}

typedef struct {
    olc_conv_geom g;
    const float *x, *w, *bias, *z;
    float *y;
    int64_t M, nrb, nmb;
    int act, fused; /* fused: the activation in registers (no Z) */
    float a, b;
} olc_conv_fewc_job;

#if OLC_X86 && OLC_HAVE_AVX512
/* Output pixels ow0..ow0+16 of row oh (nw of them stored) of the 16
 * channels whose weights are wp (tap k's 16 at wp + 16 k, zeros past the
 * last channel; mc stored); ks a constant once inlined. */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_conv_fewc_block(const int ks, const olc_conv_fewc_job *p, const float *x, const float *wp,
                    __m512 vb, int64_t mc, int64_t oh, int64_t ow0, int64_t nw, float *y) {
    const olc_conv_geom *g = &p->g;
    const int64_t plane = g->H * g->W, iw0 = ow0 * 2 - g->pw;
    /* the 2 * 15 + ks input columns the block reads, inside the row? */
    const int inside = iw0 >= 0 && iw0 + 30 + ks <= g->W;
    float edge[30 + OLC_CONV_FEWC_MAX_K];
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    for (int64_t c = 0; c < g->C; ++c)
        for (int r = 0; r < ks; ++r) {
            int64_t ih = oh * 2 - g->ph + r;
            if (ih < 0 || ih >= g->H) continue; /* zeros: the sums do not change */
            const float *row = x + c * plane + ih * g->W, *q = row + iw0;
            if (!inside) {
                for (int j = 0; j < 30 + ks; ++j)
                    edge[j] = iw0 + j >= 0 && iw0 + j < g->W ? row[iw0 + j] : 0.0f;
                q = edge;
            }
            const float *wk = wp + (c * ks + r) * ks * 16;
            __m512 wv[OLC_CONV_FEWC_MAX_K];
#pragma GCC unroll 7
            for (int e = 0; e < ks; ++e) wv[e] = _mm512_loadu_ps(wk + e * 16);
            /* input column j is tap j - 2i of pixel i: each broadcast once,
             * and each pixel still takes its taps in order */
#pragma GCC unroll 37
            for (int j = 0; j < 30 + ks; ++j) {
                const __m512 xb = _mm512_set1_ps(q[j]);
#pragma GCC unroll 7
                for (int e = 0; e < ks; ++e)
                    if (j - e >= 0 && (j - e) % 2 == 0 && (j - e) / 2 < 16)
                        acc[(j - e) / 2] = _mm512_fmadd_ps(xb, wv[e], acc[(j - e) / 2]);
            }
        }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
        acc[i] = _mm512_add_ps(acc[i], vb);
        if (p->fused) acc[i] = olc_conv_act_avx512(acc[i], p->act, p->a, p->b);
    }
    olc_transpose16_regs_avx512(acc); /* acc[m]: channel m's 16 pixels */
    const __mmask16 out = olc_tail_mask16(nw);
    float *ym = y + oh * g->OW + ow0;
    const int64_t P = g->OH * g->OW;
#pragma GCC unroll 16
    for (int m = 0; m < 16; ++m)
        if (m < mc) _mm512_mask_storeu_ps(ym + m * P, out, acc[m]);
}

/* Output rows r0..r1 of a task, 16 pixels at a time (ks a constant once
 * inlined). */
static inline __attribute__((always_inline)) OLC_TARGET_AVX512 void
olc_conv_fewc_rows(const int ks, const olc_conv_fewc_job *p, const float *x, const float *wp,
                   __m512 vb, int64_t mc, int64_t r0, int64_t r1, float *y) {
    const int64_t OW = p->g.OW;
    for (int64_t oh = r0; oh < r1; ++oh)
        for (int64_t ow0 = 0; ow0 < OW; ow0 += 16)
            olc_conv_fewc_block(ks, p, x, wp, vb, mc, oh, ow0, OW - ow0 < 16 ? OW - ow0 : 16,
                                y);
}

/* Task u: image, block of 16 output channels, block of output rows. */
static OLC_TARGET_AVX512 void olc_conv_fewc_task(void *arg, ptrdiff_t u, int slot) {
    const olc_conv_fewc_job *p = (const olc_conv_fewc_job *)arg;
    const olc_conv_geom *g = &p->g;
    (void)slot;
    int64_t rb = (int64_t)u % p->nrb, mb = (int64_t)u / p->nrb % p->nmb;
    int64_t n = (int64_t)u / (p->nrb * p->nmb);
    int64_t m0 = mb * 16, mc = p->M - m0 < 16 ? p->M - m0 : 16;
    int64_t r0 = rb * OLC_CONV_FEWC_ROWS;
    int64_t r1 = r0 + OLC_CONV_FEWC_ROWS < g->OH ? r0 + OLC_CONV_FEWC_ROWS : g->OH;
    const int64_t K = g->C * g->kh * g->kw, OW = g->OW, P = g->OH * OW;
    /* the block's weights tap by tap, 16 channels each */
    float wp[OLC_CONV_FEWC_MAX_C * OLC_CONV_FEWC_MAX_K * OLC_CONV_FEWC_MAX_K * 16];
    for (int64_t k = 0; k < K; ++k)
        for (int64_t m = 0; m < 16; ++m) wp[k * 16 + m] = m < mc ? p->w[(m0 + m) * K + k] : 0.0f;
    float bias[16];
    for (int64_t m = 0; m < 16; ++m) bias[m] = p->bias != NULL && m < mc ? p->bias[m0 + m] : 0.0f;
    const __m512 vb = _mm512_loadu_ps(bias);
    const float *x = p->x + n * g->C * g->H * g->W;
    float *y = p->y + (n * p->M + m0) * P;
    if (g->kw == 3) olc_conv_fewc_rows(3, p, x, wp, vb, mc, r0, r1, y);
    else if (g->kw == 5) olc_conv_fewc_rows(5, p, x, wp, vb, mc, r0, r1, y);
    else olc_conv_fewc_rows(7, p, x, wp, vb, mc, r0, r1, y);
    if (!p->fused && (p->z != NULL || p->act != OLC_CONV_NONE)) /* the band of each channel */
        olc_conv_epilogue(OLC_AVX512, y + r0 * OW,
                          p->z != NULL ? p->z + (n * p->M + m0) * P + r0 * OW : NULL, P, mc,
                          (r1 - r0) * OW, NULL, p->act, p->a, p->b);
}
#endif

/* y (N x M x OH x OW) = act(conv(x, w) + bias + z) for olc_conv_fewc_fits
 * geometries; w is M x C*kh*kw (W's own layout). */
static void olc_conv_fewc_f32(const olc_conv_geom *g, const float *x, const float *w,
                              const float *bias, const float *z, float *y, int64_t N, int64_t M,
                              int act, float a, float b, int nthreads) {
#if OLC_X86 && OLC_HAVE_AVX512
    olc_conv_fewc_job p;
    p.g = *g;
    p.x = x;
    p.w = w;
    p.bias = bias;
    p.z = z;
    p.y = y;
    p.M = M;
    p.nrb = (g->OH + OLC_CONV_FEWC_ROWS - 1) / OLC_CONV_FEWC_ROWS;
    p.nmb = (M + 15) / 16;
    p.fused = z == NULL && olc_conv_act_fusable(act);
    p.act = act;
    p.a = a;
    p.b = b;
    olc_parallel_for(N * p.nmb * p.nrb, olc_conv_fewc_task, &p, nthreads);
#else
    (void)g; (void)x; (void)w; (void)bias; (void)z; (void)y; (void)N; (void)M; (void)act;
    (void)a; (void)b; (void)nthreads;
#endif
}

static olc_conv_direct_f64_fn olc_conv_pick_direct_f64(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_direct_f64);
}

static olc_conv_tdirect_f64_fn olc_conv_pick_tdirect_f64(int level) {
    level = olc_build_level(level);
    return OLC_LEVEL_FN(level, olc_conv_tdirect_f64);
}

/* ---- Winograd F(2x2, 3x3): 2-D 3x3 kernels at unit strides and dilations ----
 *
 * Each 2x2 output tile comes from a 4x4 input tile d: Y = A^T [(G g G^T) .
 * (B^T d B)] A, so the 9 multiply-adds an output takes per channel pair
 * become 4: the 16 elementwise products of all tiles and channels are 16
 * GEMMs, V[xi] (tiles x C) times U[xi] (C x M), by the GEMM engine with
 * U packed once per node.  The transforms' coefficients are 0, +-1 and
 * 1/2, so they add a few roundings, no more, to a sum over C * 9 terms.
 * Tasks have fixed boundaries: results do not depend on the thread count. */

/* U[xi] (C x M, row-major, xi = 4 i + j) = (G g G^T)[i][j] of each 3x3
 * filter g = w[m][c], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]. */
static void olc_conv_wino_filter(const float *w, int64_t M, int64_t C, float *u) {
    for (int64_t m = 0; m < M; ++m) {
        for (int64_t c = 0; c < C; ++c) {
            const float *g = w + (m * C + c) * 9;
            float t[4][3];
            for (int j = 0; j < 3; ++j) {
                t[0][j] = g[j];
                t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
                t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
                t[3][j] = g[6 + j];
            }
            for (int i = 0; i < 4; ++i) {
                float r[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]),
                              0.5f * (t[i][0] - t[i][1] + t[i][2]), t[i][2]};
                for (int j = 0; j < 4; ++j) u[((int64_t)(4 * i + j) * C + c) * M + m] = r[j];
            }
        }
    }
}

typedef struct {
    const float *x, *up, *bias, *z;
    float *y, *scratch;
    int64_t C, H, W, ph, pw, M, OH, OW, tw, T, tb, slot_floats, rows_floats;
    int level, act, failed;
    float a, b;
} olc_conv_wino_job;

/* Tiles a block holds: V and the products of a block in about 512 KB, so
 * that they stay in the core's cache from one step to the next (whole
 * images at 56x56 went to memory and ran slower than im2col). */
static int64_t olc_conv_wino_block_tiles(const olc_conv_geom *g, int64_t M) {
    int64_t tb = (512 * 1024) / (16 * (int64_t)sizeof(float) * (g->C + M));
    return tb < 8 ? 8 : tb;
}

/* Floats from one of the 16 matrices of V (or of the products) to the
 * next, for n tiles of width values: a cache line more than they hold, so
 * that the 16 streams a transform reads or writes do not fall into the
 * same cache sets (n * width is often a multiple of 4 KB). */
static int64_t olc_conv_wino_stride(int64_t n, int64_t width) { return n * width + 16; }

/* Floats of the input rows a tile row's transform reads, channel
 * innermost (4 rows of up to 2 tw + 2 columns of C channels), and of a
 * tile's intermediate (16 C). */
static int64_t olc_conv_wino_rows_floats(const olc_conv_geom *g) {
    return (4 * (2 * ((g->OW + 1) / 2) + 2) + 16) * g->C;
}

/* Channels of a tile the output transform takes at a time. */
#define OLC_CONV_WINO_MB 64

/* The transforms of one tile, per level (conv/olc_conv_wino.h). */
#define OLC_BODY "conv/olc_conv_wino.h"
#include "common/olc_each_level.h"

/* The tiles of tile row ty among tiles t0 .. t1: columns *x0 .. *x1. */
static void olc_conv_wino_row_span(const olc_conv_wino_job *p, int64_t t0, int64_t t1,
                                   int64_t ty, int64_t *x0, int64_t *x1) {
    *x0 = ty == t0 / p->tw ? t0 % p->tw : 0;
    *x1 = ty == (t1 - 1) / p->tw ? (t1 - 1) % p->tw + 1 : p->tw;
}

#if OLC_X86
/* 8 channels (x: the first one's first column, planes HW apart) of n
 * columns, n a multiple of 8, into dst[col * C + c] by 8 x 8 transposes. */
static OLC_TARGET_AVX2 void olc_conv_wino_cols8_avx2(const float *x, int64_t HW, int64_t n,
                                                      float *dst, int64_t C) {
    for (int64_t col = 0; col < n; col += 8)
        olc_conv_tr8_f32_avx2(x + col, HW, dst + col * C, C);
}
#endif

/* xi[col * C + c] = element w0 + col of row xh of channel c (planes HW
 * apart), 0 outside the row's W columns, for col < ncols: channel
 * innermost.  From AVX2 the whole 8 x 8 blocks of channels and columns by
 * transposes, the rest one element at a time: all of it that way, a plane
 * apart, the copy took 16 % of the 3x3 128 -> 32 at 56x56 (2 threads,
 * perf). */
static void olc_conv_wino_row(int level, const float *xh, int64_t HW, int64_t W, int64_t w0,
                              int64_t ncols, int64_t C, float *xi) {
    int64_t lo = w0 < 0 ? -w0 : 0, hi = W - w0 < ncols ? W - w0 : ncols;
    if (hi < lo) hi = lo;
    memset(xi, 0, (size_t)(lo * C) * sizeof(float));
    memset(xi + hi * C, 0, (size_t)((ncols - hi) * C) * sizeof(float));
    /* channels below c8 have their columns below lo + n8 done */
    int64_t c8 = 0, n8 = 0;
#if OLC_X86
    if (olc_build_level(level) >= OLC_AVX2) {
        c8 = C / 8 * 8;
        n8 = (hi - lo) / 8 * 8;
        for (int64_t c = 0; c < c8; c += 8)
            olc_conv_wino_cols8_avx2(xh + c * HW + w0 + lo, HW, n8, xi + lo * C + c, C);
    }
#endif
    for (int64_t c = 0; c < C; ++c)
        for (int64_t col = c < c8 ? lo + n8 : lo; col < hi; ++col)
            xi[col * C + c] = xh[c * HW + w0 + col];
}

/* V[xi][t - t0][c] of the input tiles t0 .. t1, V's matrices nt tiles
 * (rows) each: a tile row at a time, its 4 input rows first copied into
 * xr (olc_conv_wino_rows_floats) channel innermost, zero outside x. */
static void olc_conv_wino_in(const olc_conv_wino_job *p, int64_t t0, int64_t t1, float *v,
                             int64_t nt, float *xr) {
    const int64_t H = p->H, W = p->W, C = p->C, HW = H * W, nC = olc_conv_wino_stride(nt, C);
    void (*const in_tile)(const float *, int64_t, int64_t, float *, int64_t, float *) =
        OLC_LEVEL_FN(olc_build_level(p->level), olc_conv_wino_in_tile);
    for (int64_t ty = t0 / p->tw; ty <= (t1 - 1) / p->tw; ++ty) {
        int64_t x0, x1;
        olc_conv_wino_row_span(p, t0, t1, ty, &x0, &x1);
        const int64_t h0 = 2 * ty - p->ph, w0 = 2 * x0 - p->pw, ncols = 2 * (x1 - x0) + 2;
        for (int i = 0; i < 4; ++i) {
            const int64_t h = h0 + i;
            float *xi = xr + i * ncols * C;
            if (h < 0 || h >= H)
                memset(xi, 0, (size_t)(ncols * C) * sizeof(float));
            else
                olc_conv_wino_row(p->level, p->x + h * W, HW, W, w0, ncols, C, xi);
        }
        for (int64_t tx = x0; tx < x1; ++tx)
            in_tile(xr + 2 * (tx - x0) * C, ncols * C, C, v + (ty * p->tw + tx - t0) * C, nC,
                    xr + 4 * ncols * C);
    }
}

/* The 16 products of tiles t0 .. t1: mb[xi] (n x M) = V[xi] (n x C) U[xi]. */
static int olc_conv_wino_gemm(const olc_conv_wino_job *p, int64_t n, const float *v, float *mb,
                              int nthreads) {
    int64_t a_offsets[16], b_index[16];
    for (int xi = 0; xi < 16; ++xi) {
        a_offsets[xi] = xi * olc_conv_wino_stride(n, p->C);
        b_index[xi] = xi;
    }
    return olc_sgemm(p->level, OLC_FLOAT, 16, v, a_offsets, p->C, 1, p->up, b_index, NULL,
                     b_index, 0, 0, n, p->M, p->C, mb, p->M, olc_conv_wino_stride(n, p->M), 1.0f,
                     0, nthreads);
}

/* Output tiles t0 .. t1 from their products mb[xi][t - t0][m] (matrices
 * of nt rows): y = A^T m A, A^T = [1 1 1 0; 0 1 -1 -1]; then bias, z and
 * the activation by the epilogue, an output row segment at a time.  The
 * transform runs over a block of channels into o, and o is then stored to
 * the channels' planes. */
static void olc_conv_wino_out(const olc_conv_wino_job *p, int64_t t0, int64_t t1,
                              const float *mb, int64_t nt) {
    const int64_t M = p->M, nM = olc_conv_wino_stride(nt, M), OW = p->OW, plane = p->OH * OW;
    void (*const out_tile)(const float *, int64_t, int64_t, float[2][4][OLC_CONV_WINO_MB],
                           float[4][OLC_CONV_WINO_MB]) =
        OLC_LEVEL_FN(olc_build_level(p->level), olc_conv_wino_out_tile);
    float a[2][4][OLC_CONV_WINO_MB], o[4][OLC_CONV_WINO_MB];
    for (int64_t t = t0; t < t1; ++t) {
        const int64_t oh = 2 * (t / p->tw), ow = 2 * (t % p->tw);
        const int right = ow + 1 < OW, below = oh + 1 < p->OH;
        const float *mt = mb + (t - t0) * M;
        for (int64_t m0 = 0; m0 < M; m0 += OLC_CONV_WINO_MB) {
            const int64_t mn = M - m0 < OLC_CONV_WINO_MB ? M - m0 : OLC_CONV_WINO_MB;
            out_tile(mt + m0, nM, mn, a, o);
            float *yt = p->y + m0 * plane + oh * OW + ow;
            for (int64_t j = 0; j < mn; ++j) {
                float *yj = yt + j * plane;
                yj[0] = o[0][j];
                if (right) yj[1] = o[1][j];
                if (below) {
                    yj[OW] = o[2][j];
                    if (right) yj[OW + 1] = o[3][j];
                }
            }
        }
    }
    if (p->bias == NULL && p->z == NULL && p->act == OLC_CONV_NONE) return;
    /* the tiles' output rows: a tile row gives two, its columns t0 .. t1 */
    for (int64_t ty = t0 / p->tw; ty <= (t1 - 1) / p->tw; ++ty) {
        int64_t x0, x1;
        olc_conv_wino_row_span(p, t0, t1, ty, &x0, &x1);
        const int64_t c0 = 2 * x0, c1 = 2 * x1 < OW ? 2 * x1 : OW;
        for (int64_t r = 2 * ty; r < 2 * ty + 2 && r < p->OH; ++r) {
            const int64_t at = r * OW + c0;
            olc_conv_epilogue(p->level, p->y + at, p->z != NULL ? p->z + at : NULL, plane, M,
                              c1 - c0, p->bias, p->act, p->a, p->b);
        }
    }
}

/* Block b of an image on one thread: its tiles' transforms, products and
 * outputs in the slot's scratch. */
static void olc_conv_wino_block_task(void *arg, ptrdiff_t b, int slot) {
    olc_conv_wino_job *p = (olc_conv_wino_job *)arg;
    int64_t t0 = (int64_t)b * p->tb, t1 = t0 + p->tb < p->T ? t0 + p->tb : p->T;
    float *v = p->scratch + slot * p->slot_floats;
    float *mb = v + 16 * olc_conv_wino_stride(p->tb, p->C);
    olc_conv_wino_in(p, t0, t1, v, t1 - t0, mb + 16 * olc_conv_wino_stride(p->tb, p->M));
    if (olc_conv_wino_gemm(p, t1 - t0, v, mb, 1) != 0) {
        __atomic_store_n(&p->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    olc_conv_wino_out(p, t0, t1, mb, t1 - t0);
}

/* The one-block image: transforms of 8 tiles a task, into / out of the
 * image's V and products (scratch). */
static void olc_conv_wino_in_task(void *arg, ptrdiff_t task, int slot) {
    const olc_conv_wino_job *p = (const olc_conv_wino_job *)arg;
    int64_t t0 = (int64_t)task * 8, t1 = t0 + 8 < p->T ? t0 + 8 : p->T;
    float *rows = p->scratch + 16 * (olc_conv_wino_stride(p->T, p->C)
                                     + olc_conv_wino_stride(p->T, p->M));
    olc_conv_wino_in(p, t0, t1, p->scratch + t0 * p->C, p->T, rows + slot * p->rows_floats);
}

static void olc_conv_wino_out_task(void *arg, ptrdiff_t task, int slot) {
    const olc_conv_wino_job *p = (const olc_conv_wino_job *)arg;
    int64_t t0 = (int64_t)task * 8, t1 = t0 + 8 < p->T ? t0 + 8 : p->T;
    (void)slot;
    olc_conv_wino_out(p, t0, t1, p->scratch + 16 * olc_conv_wino_stride(p->T, p->C) + t0 * p->M,
                      p->T);
}

/* Whether an image runs block by block (each block on one thread), else
 * as one block whose steps all threads share (too few blocks to share:
 * the small late layers).  The same choice at every thread count. */
static int olc_conv_wino_blocked(const olc_conv_geom *g, int64_t M) {
    int64_t T = ((g->OH + 1) / 2) * ((g->OW + 1) / 2);
    return T >= 4 * olc_conv_wino_block_tiles(g, M);
}

/* Floats of the scratch olc_conv_wino_f32 needs at nthreads. */
static int64_t olc_conv_wino_scratch(const olc_conv_geom *g, int64_t M, int nthreads) {
    const int64_t slots = nthreads > 1 ? nthreads : 1, rows = olc_conv_wino_rows_floats(g);
    if (olc_conv_wino_blocked(g, M)) { /* a block a slot */
        int64_t tb = olc_conv_wino_block_tiles(g, M);
        return slots * (16 * (olc_conv_wino_stride(tb, g->C) + olc_conv_wino_stride(tb, M))
                        + rows);
    }
    int64_t T = ((g->OH + 1) / 2) * ((g->OW + 1) / 2);
    return 16 * (olc_conv_wino_stride(T, g->C) + olc_conv_wino_stride(T, M)) + slots * rows;
}
/* y (N x M x OH x OW) = act(conv(x, w) + bias + z) for 3x3 kernels at unit
 * strides and dilations; up: U packed by olc_sgemm_pack_b (16 matrices C x
 * M at this level); scratch: olc_conv_wino_scratch(g, M, nthreads) floats
 * (the caller's, kept between calls: fresh pages of megabytes cost more
 * than the transforms).  Returns -1 without memory. */
static int olc_conv_wino_f32(int level, const olc_conv_geom *g, const float *x, const float *up,
                             const float *bias, const float *z, float *y, float *scratch,
                             int64_t N, int64_t M, int act, float a, float b, int nthreads) {
    olc_conv_wino_job p;
    memset(&p, 0, sizeof p);
    p.level = olc_gemm_level(level);
    p.C = g->C;
    p.H = g->H;
    p.W = g->W;
    p.ph = g->ph;
    p.pw = g->pw;
    p.M = M;
    p.OH = g->OH;
    p.OW = g->OW;
    p.tw = (g->OW + 1) / 2;
    p.T = ((g->OH + 1) / 2) * p.tw;
    p.tb = olc_conv_wino_block_tiles(g, M);
    p.rows_floats = olc_conv_wino_rows_floats(g);
    p.slot_floats = 16 * (olc_conv_wino_stride(p.tb, p.C) + olc_conv_wino_stride(p.tb, M))
                    + p.rows_floats;
    p.up = up;
    p.bias = bias;
    p.scratch = scratch;
    p.act = act;
    p.a = a;
    p.b = b;
    if (N == 0 || M == 0 || p.T == 0) return 0;
    const int blocked = olc_conv_wino_blocked(g, M);
    const int64_t plane_in = p.C * p.H * p.W, plane_out = M * p.OH * p.OW;
    int status = 0;
    for (int64_t n = 0; n < N && status == 0; ++n) {
        p.x = x + n * plane_in;
        p.y = y + n * plane_out;
        p.z = z != NULL ? z + n * plane_out : NULL;
        if (blocked) {
            olc_parallel_for((p.T + p.tb - 1) / p.tb, olc_conv_wino_block_task, &p, nthreads);
            status = p.failed ? -1 : 0;
            continue;
        }
        olc_parallel_for((p.T + 7) / 8, olc_conv_wino_in_task, &p, nthreads);
        status = olc_conv_wino_gemm(&p, p.T, scratch,
                                    scratch + 16 * olc_conv_wino_stride(p.T, p.C), nthreads);
        if (status == 0) olc_parallel_for((p.T + 7) / 8, olc_conv_wino_out_task, &p, nthreads);
    }
    return status;
}

#endif
