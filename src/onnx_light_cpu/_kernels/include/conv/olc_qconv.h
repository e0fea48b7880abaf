/* The 8-bit convolutions ConvInteger and QLinearConv: the parts around the
 * 8-bit GEMM engine (engines/gemm_int8), which the adapter calls itself.
 *
 * - olc_qconv_im2col: the columns of one group of one image as a K x P
 *   byte matrix (K = C * kd * kh * kw rows, P output positions), taps that
 *   fall in the padding holding the input's zero point, so that
 *   (column - zero point) is 0 there and the engine's zero-point algebra
 *   (row and column sums) stays exact.  The bytes are copied as they are
 *   (uint8 or int8 alike).
 * - olc_qconv_depthwise: group == C == M, a direct int32 loop per plane
 *   (olc_qconv_dw.h, compiled per level): sum over the taps inside the
 *   image of (x - x_zp) (w - w_zp), the weights given already minus their
 *   zero point.
 * - olc_qconv_requantize: QLinearConv's output, as ONNX Runtime's CPU
 *   kernel computes it: float32(acc + bias) times a float32 scale per
 *   output channel, clamped to [qmin - zp, qmax - zp], rounded half to even,
 *   plus zp.  An AVX-512 loop, an SSE2 loop (the x86-64 baseline) and
 *   their plain C twin give the same bits (cvtps2dq rounds half to even as
 *   rintf does).
 *
 * Tasks are planes or rows with fixed boundaries: results do not depend on
 * the thread count.  Shapes are 3-D (olc_conv_geom, C the channels of one
 * group). */
#ifndef OLC_QCONV_H
#define OLC_QCONV_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_pool.h"
#include "conv/olc_conv.h"

/* ---- im2col ---- */

typedef struct {
    const olc_conv_geom *g;
    const uint8_t *x;
    int64_t img_stride, G;
    uint8_t pad;
    uint8_t *col;
} olc_qconv_im2col_job;

/* Output positions [lo, hi) along one axis whose tap t lands inside the
 * input of size n: i = o * s - p + t * d in [0, n). */
static inline void olc_qconv_valid(int64_t n, int64_t on, int64_t s, int64_t p, int64_t t,
                                   int64_t d, int64_t *lo, int64_t *hi) {
    const int64_t off = t * d - p; /* i = o * s + off */
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = n - off <= 0 ? 0 : (n - off + s - 1) / s;
    if (b > on) b = on;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* Task t: channel c of group g of image i (t = (i * G + g) * C + c): its
 * kd * kh * kw rows. */
static void olc_qconv_im2col_task(void *arg, ptrdiff_t t, int slot) {
    const olc_qconv_im2col_job *job = (const olc_qconv_im2col_job *)arg;
    const olc_conv_geom *g = job->g;
    (void)slot;
    const int64_t C = g->C, kk = g->kd * g->kh * g->kw;
    const int64_t P = g->OD * g->OH * g->OW, plane = g->D * g->H * g->W;
    const int64_t q = t / C, c = t % C, i = q / job->G, gi = q % job->G;
    const uint8_t *src = job->x + i * job->img_stride + (gi * C + c) * plane;
    uint8_t *dst = job->col + (q * C + c) * kk * P;
    const uint8_t pad = job->pad;
    /* Unit strides in the plane and rows as long as the input's ("same" padding):
     * a tap's valid rows are one shifted stretch of the plane, copied at
     * once, then the columns that fell into the padding set (a call a
     * row cost 215 us of a 3x3 64 -> 64 at 56x56, 40 % of its GEMM). */
    const int whole = g->sw == 1 && g->sh == 1 && g->OW == g->W;
    for (int64_t a = 0; a < g->kd; a++)
        for (int64_t b = 0; b < g->kh; b++)
            for (int64_t e = 0; e < g->kw; e++, dst += P) {
                int64_t wlo, whi;
                olc_qconv_valid(g->W, g->OW, g->sw, g->pw, e, g->dw, &wlo, &whi);
                const int64_t woff = e * g->dw - g->pw;
                uint8_t *row = dst;
                if (whole && whi > wlo) {
                    for (int64_t od = 0; od < g->OD; od++, row += g->OH * g->OW) {
                        const int64_t id = od * g->sd - g->pd + a * g->dd;
                        int64_t hlo, hhi;
                        olc_qconv_valid(g->H, g->OH, g->sh, g->ph, b, g->dh, &hlo, &hhi);
                        if (id < 0 || id >= g->D) hlo = hhi = 0;
                        if (hhi > hlo) {
                            /* rows hlo..hhi-1, from column wlo of the first to
                             * column whi of the last: inside the plane */
                            const uint8_t *in = src + (id * g->H + hlo + b * g->dh - g->ph) * g->W;
                            memcpy(row + hlo * g->OW + wlo, in + wlo + woff,
                                   (size_t)((hhi - hlo - 1) * g->OW + whi - wlo));
                            for (int64_t oh = hlo; oh < hhi; oh++) {
                                uint8_t *r = row + oh * g->OW;
                                for (int64_t ow = 0; ow < wlo; ow++) r[ow] = pad;
                                for (int64_t ow = whi; ow < g->OW; ow++) r[ow] = pad;
                            }
                        }
                        memset(row, pad, (size_t)(hlo * g->OW));
                        memset(row + hhi * g->OW, pad, (size_t)((g->OH - hhi) * g->OW));
                    }
                    continue;
                }
                for (int64_t od = 0; od < g->OD; od++) {
                    const int64_t id = od * g->sd - g->pd + a * g->dd;
                    for (int64_t oh = 0; oh < g->OH; oh++, row += g->OW) {
                        const int64_t ih = oh * g->sh - g->ph + b * g->dh;
                        if (id < 0 || id >= g->D || ih < 0 || ih >= g->H || whi <= wlo) {
                            memset(row, pad, (size_t)g->OW);
                            continue;
                        }
                        const uint8_t *in = src + (id * g->H + ih) * g->W + woff;
                        memset(row, pad, (size_t)wlo);
                        if (g->sw == 1)
                            memcpy(row + wlo, in + wlo, (size_t)(whi - wlo));
                        else
                            for (int64_t ow = wlo; ow < whi; ow++) row[ow] = in[ow * g->sw];
                        memset(row + whi, pad, (size_t)(g->OW - whi));
                    }
                }
            }
}

/* Columns of nimg images x G groups: matrix q = i * G + g at q * K * P. */
static void olc_qconv_im2col(const olc_conv_geom *g, const uint8_t *x, int64_t img_stride,
                             int64_t nimg, int64_t G, uint8_t pad, uint8_t *col, int nthreads) {
    olc_qconv_im2col_job job = {g, x, img_stride, G, pad, col};
    olc_parallel_for(nimg * G * g->C, olc_qconv_im2col_task, &job, nthreads);
}

/* ---- unit stride at VNNI: pixels by channels, no columns ----
 *
 * olc_qconv_direct: a 2-D convolution of one group, unit strides, int8
 * weights whose zero point is 0, as a product whose rows are output
 * positions and whose columns are output channels, read straight from a
 * rearranged copy of the input (no im2col, no packed B).  The copy
 * (olc_qconv_direct_pack_task) holds each image padded with its zero point, in
 * groups of 4 channels: byte (g, i, c) at (g * L + i) * 4 + c, position i
 * = row * Wp + column of the padded image (Wp = OW + (kw - 1) * dw).  Tap
 * (b, e) of output position q = oh * Wp + ow is then position q + b * dh
 * * Wp + e * dw: one offset per tap whatever the position, so 16
 * consecutive positions take 4 channels of a tap as 16 dwords, each the
 * broadcast operand of one vpdpbusd against the 16 channels' weights of
 * those 4 input channels (positions past a row's OW are computed and
 * dropped).  With x' the input as unsigned bytes (int8 shifted by 128,
 * its zero point too):
 *
 *   sum (x - x_zp) w = sum x' w - x_zp' sum w,
 *
 * the weights' sums taken when the adapter packs them (as [M / 16][kh * kw]
 * [C / 4][16][4], zeros past M and C).  Exact
 * modulo 2^32 like the GEMM path, so its int32 results are the same.  A
 * block's 16 x 16 sums go back to channel rows by a transpose in
 * registers, and for QLinearConv are requantised there (olc_qconv_direct_rq,
 * the operations of olc_qconv_rq_avx512) instead of stored as int32 for the
 * separate pass. */
#if OLC_X86 && OLC_HAVE_AVX512
/* Positions of a task: blocks of 16. */
enum { OLC_QCONV_DIRECT_BLOCKS = 8 };

/* Positions of one channel group of the padded copy (with the overrun of
 * the last block and the last taps). */
static inline int64_t olc_qconv_direct_len(const olc_conv_geom *g) {
    int64_t Hp = g->OH + (g->kh - 1) * g->dh, Wp = g->OW + (g->kw - 1) * g->dw;
    return Hp * Wp + (g->kw - 1) * g->dw + 16;
}

typedef struct {
    const olc_conv_geom *g;
    const uint8_t *x;
    int64_t img_stride;
    uint8_t flip, pad; /* flip: 0x80 for int8 input; pad: x_zp' */
    uint8_t *xp;
} olc_qconv_direct_pack_job;

/* Task t: channel group t % G4 of image t / G4, row by padded row; the
 * columns inside the image 16 at a time, four channel rows interleaved
 * by SSE2 (the x86-64 baseline) as olc_i8_pack_b interleaves B. */
static void olc_qconv_direct_pack_task(void *arg, ptrdiff_t t, int slot) {
    const olc_qconv_direct_pack_job *p = (const olc_qconv_direct_pack_job *)arg;
    const olc_conv_geom *g = p->g;
    (void)slot;
    const int64_t G4 = (g->C + 3) / 4, L = olc_qconv_direct_len(g);
    const int64_t Wp = g->OW + (g->kw - 1) * g->dw, Hp = g->OH + (g->kh - 1) * g->dh;
    const int64_t n = t / G4, g4 = t % G4, plane = g->H * g->W;
    const uint8_t *rows[4];
    uint8_t fill[4];
    for (int c4 = 0; c4 < 4; ++c4) {
        const int64_t c = g4 * 4 + c4;
        /* channels past C: zeros (their weights are zeros); rows[c4] NULL */
        rows[c4] = c < g->C ? p->x + n * p->img_stride + c * plane : NULL;
        fill[c4] = c < g->C ? p->pad : 0;
    }
    uint32_t pad4;
    memcpy(&pad4, fill, 4);
    uint8_t *dst = p->xp + (n * G4 + g4) * L * 4;
    for (int64_t rp = 0; rp < Hp; ++rp) {
        uint8_t *d = dst + rp * Wp * 4;
        const int64_t ih = rp - g->ph;
        int64_t col = 0;
        if (ih >= 0 && ih < g->H) {
            for (; col < g->pw && col < Wp; ++col) memcpy(d + col * 4, &pad4, 4);
            const int64_t end = g->pw + g->W < Wp ? g->pw + g->W : Wp;
#if OLC_X86
            if (rows[3] != NULL) /* four real channels */
                for (; col + 16 <= end; col += 16) {
                    const int64_t iw = col - g->pw;
                    const __m128i f = _mm_set1_epi8((char)p->flip);
                    __m128i r[4];
                    for (int c4 = 0; c4 < 4; ++c4)
                        r[c4] = _mm_xor_si128(
                            _mm_loadu_si128((const __m128i *)(rows[c4] + ih * g->W + iw)), f);
                    const __m128i r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
                    const __m128i l01 = _mm_unpacklo_epi8(r0, r1), h01 = _mm_unpackhi_epi8(r0, r1);
                    const __m128i l23 = _mm_unpacklo_epi8(r2, r3), h23 = _mm_unpackhi_epi8(r2, r3);
                    uint8_t *o = d + col * 4;
                    _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi16(l01, l23));
                    _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(l01, l23));
                    _mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(h01, h23));
                    _mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(h01, h23));
                }
#endif
            for (; col < end; ++col)
                for (int c4 = 0; c4 < 4; ++c4)
                    d[col * 4 + c4] = rows[c4] != NULL
                                          ? (uint8_t)(rows[c4][ih * g->W + col - g->pw] ^ p->flip)
                                          : 0;
        }
        for (; col < Wp; ++col) memcpy(d + col * 4, &pad4, 4);
    }
    /* the overrun past the image: read by positions that are dropped */
    memset(dst + Hp * Wp * 4, 0, (size_t)((L - Hp * Wp) * 4));
}

/* QLinearConv's requantisation in the direct loop's epilogue (as
 * olc_qconv_rq_avx512, the same bits): bias (NULL: none) and scale per
 * output channel, the output's zero point and type. */
typedef struct {
    const int32_t *bias;
    const float *scale;
    int32_t zp;
    int out_signed;
} olc_qconv_direct_rq;

typedef struct {
    const olc_conv_geom *g;
    const uint8_t *xp;
    const int8_t *w;
    const int32_t *wsum;
    int32_t xzp; /* x_zp' */
    int64_t M, nmb, nqb, chunks;
    void *y;     /* (images, M, OH * OW): int32 sums, or bytes with rq */
    const olc_qconv_direct_rq *rq;
} olc_qconv_direct_job;

/* Task t: image, 16 output channels, OLC_QCONV_DIRECT_BLOCKS blocks of 16
 * positions. */
static OLC_TARGET_AVX512_VNNI void olc_qconv_direct_task(void *arg, ptrdiff_t t, int slot) {
    const olc_qconv_direct_job *p = (const olc_qconv_direct_job *)arg;
    const olc_conv_geom *g = p->g;
    (void)slot;
    const int64_t chunk = t % p->chunks, mb = t / p->chunks % p->nmb;
    const int64_t n = t / (p->chunks * p->nmb);
    const int64_t G4 = (g->C + 3) / 4, L = olc_qconv_direct_len(g), kk = g->kh * g->kw;
    const int64_t Wp = g->OW + (g->kw - 1) * g->dw, Q = g->OH * Wp, P = g->OH * g->OW;
    const int64_t m0 = mb * 16, mc = p->M - m0 < 16 ? p->M - m0 : 16;
    const uint8_t *xp = p->xp + n * G4 * L * 4;
    const int8_t *w = p->w + mb * kk * G4 * 64;
    int32_t sums[16];
    for (int m = 0; m < 16; ++m) sums[m] = m < mc ? p->wsum[m0 + m] : 0;
    /* x_zp' * sum w, modulo 2^32 like the sums */
    const __m512i corr = _mm512_mullo_epi32(_mm512_set1_epi32(p->xzp),
                                            _mm512_loadu_si512((const void *)sums));
    int32_t *y = (int32_t *)p->y + (n * p->M + m0) * P;
    uint8_t *y8 = (uint8_t *)p->y + (n * p->M + m0) * P;
    /* the requantisation's constants per channel of the block */
    __m512 rq_scale[16];
    __m512i rq_bias[16];
    const int32_t qmin = p->rq != NULL && p->rq->out_signed ? -128 : 0, qmax = qmin + 255;
    const int32_t zp = p->rq != NULL ? p->rq->zp : 0;
    const __m512 vlo = _mm512_set1_ps((float)(qmin - zp)), vhi = _mm512_set1_ps((float)(qmax - zp));
    const __m512i vz = _mm512_set1_epi32(zp);
    if (p->rq != NULL)
        for (int64_t m = 0; m < mc; ++m) {
            rq_scale[m] = _mm512_set1_ps(p->rq->scale[m0 + m]);
            rq_bias[m] = _mm512_set1_epi32(p->rq->bias != NULL ? p->rq->bias[m0 + m] : 0);
        }
    int64_t qb1 = (chunk + 1) * OLC_QCONV_DIRECT_BLOCKS;
    if (qb1 > p->nqb) qb1 = p->nqb;
    for (int64_t qb = chunk * OLC_QCONV_DIRECT_BLOCKS; qb < qb1; ++qb) {
        const int64_t q = qb * 16;
        __m512i acc[16];
        for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
        for (int64_t b = 0; b < g->kh; ++b)
            for (int64_t e = 0; e < g->kw; ++e) {
                const int32_t *xq =
                    (const int32_t *)(xp + (q + b * g->dh * Wp + e * g->dw) * 4);
                const int8_t *wt = w + (b * g->kw + e) * G4 * 64;
                for (int64_t g4 = 0; g4 < G4; ++g4) {
                    const __m512i wv = _mm512_loadu_si512((const void *)(wt + g4 * 64));
                    const int32_t *xg = xq + g4 * L;
#pragma GCC unroll 16
                    for (int i = 0; i < 16; ++i)
                        acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_set1_epi32(xg[i]), wv);
                }
            }
        __m512 r[16];
        for (int i = 0; i < 16; ++i) r[i] = _mm512_castsi512_ps(_mm512_sub_epi32(acc[i], corr));
        olc_transpose16_regs_avx512(r); /* r[m]: channel m at positions q..q+15 */
        __m128i bytes[16];
        if (p->rq != NULL)
            for (int64_t m = 0; m < mc; ++m) {
                const __m512i a = _mm512_add_epi32(_mm512_castps_si512(r[m]), rq_bias[m]);
                __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(a), rq_scale[m]);
                f = _mm512_min_ps(_mm512_max_ps(f, vlo), vhi);
                bytes[m] = _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), vz));
            }
        /* the positions that are outputs: row segments, columns < OW */
        for (int64_t i = 0; i < 16 && q + i < Q;) {
            const int64_t oh = (q + i) / Wp, ow = (q + i) % Wp;
            int64_t len = Wp - ow < 16 - i ? Wp - ow : 16 - i;
            int64_t keep = ow < g->OW ? (g->OW - ow < len ? g->OW - ow : len) : 0;
            if (keep > 0) {
                const __mmask16 mask = (__mmask16)(((1u << keep) - 1) << i);
                const int64_t at = oh * g->OW + ow - i;
                if (p->rq != NULL)
                    for (int64_t m = 0; m < mc; ++m)
                        _mm_mask_storeu_epi8(y8 + m * P + at, mask, bytes[m]);
                else
                    for (int64_t m = 0; m < mc; ++m)
                        _mm512_mask_storeu_epi32(y + m * P + at, mask,
                                                 _mm512_castps_si512(r[m]));
            }
            i += len;
        }
    }
}
#endif

/* Whether olc_qconv_direct takes a convolution (one group) at this level. */
static int olc_qconv_direct_fits(const olc_conv_geom *g, int level) {
    return OLC_HAVE_AVX512 && level == OLC_AVX512_VNNI && g->D == 1 && g->kd == 1
        && g->OD == 1 && g->sh == 1 && g->sw == 1 && g->kh * g->kw > 1 && g->C >= 16
        && g->OH > 0 && g->OW > 0;
}

/* Bytes of the padded copy of nimg images. */
static int64_t olc_qconv_direct_scratch(const olc_conv_geom *g, int64_t nimg) {
    return nimg * ((g->C + 3) / 4) * olc_qconv_direct_len(g) * 4;
}

/* y (nimg, M, OH * OW) int32 = sum (x - x_zp) w for olc_qconv_direct_fits
 * geometries, or with rq those sums requantised (8-bit y); w packed by the
 * adapter (see above) with wsum its sums per output channel; xp the
 * scratch (olc_qconv_direct_scratch bytes). */
static void olc_qconv_direct(const olc_conv_geom *g, const uint8_t *x, int64_t img_stride,
                             int64_t nimg, int x_signed, int32_t xzp, const int8_t *w,
                             const int32_t *wsum, int64_t M, uint8_t *xp, void *y,
                             const olc_qconv_direct_rq *rq, int nthreads) {
#if OLC_X86 && OLC_HAVE_AVX512
    const uint8_t flip = x_signed ? 0x80 : 0;
    const int32_t xzs = x_signed ? xzp + 128 : xzp;
    olc_qconv_direct_pack_job pj = {g, x, img_stride, flip, (uint8_t)xzs, xp};
    olc_parallel_for(nimg * ((g->C + 3) / 4), olc_qconv_direct_pack_task, &pj, nthreads);
    olc_qconv_direct_job j;
    j.g = g;
    j.xp = xp;
    j.w = w;
    j.wsum = wsum;
    j.xzp = xzs;
    j.M = M;
    j.nmb = (M + 15) / 16;
    j.nqb = (g->OH * (g->OW + (g->kw - 1) * g->dw) + 15) / 16;
    j.chunks = (j.nqb + OLC_QCONV_DIRECT_BLOCKS - 1) / OLC_QCONV_DIRECT_BLOCKS;
    j.y = y;
    j.rq = rq;
    olc_parallel_for(nimg * j.nmb * j.chunks, olc_qconv_direct_task, &j, nthreads);
#else
    (void)g; (void)x; (void)img_stride; (void)nimg; (void)x_signed; (void)xzp; (void)w;
    (void)wsum; (void)M; (void)xp; (void)y; (void)rq; (void)nthreads;
#endif
}

/* ---- depthwise ---- */

/* The unit-stride depthwise loop's sums over one depth slice's taps, for
 * the first outputs of the long row in blocks of 32 (olc_qconv_dw_long):
 * acc[i] += sum over rows b and columns e of xp[b * dh * Wp + e + i] w[b][e],
 * for columns one apart (dw = 1).  Returns how many outputs it did (a
 * multiple of 32; the level's C loop does the rest, and all of them where
 * it returns 0).  At AVX-512, vpmaddwd sums the taps of columns e and e + 1
 * of an output as one pair: loaded at x + e, the pairs are those of the
 * even outputs, at x + e + 1 those of the odd ones; a last odd column
 * pairs with a zero weight.  Each pair's sum is exact in int32 ((x - zp)
 * and (w - w_zp) fit in 9 bits), so the sums are the C loop's, modulo
 * 2^32.  It reads one int16 past the slice for an odd kw (the scratch has
 * 64 bytes more).  Tap by tap over the whole row, the C loop stored and
 * reloaded every sum once a tap: 144 x 56 x 56 3x3 took 0.39 ms at one
 * thread. */
static inline int64_t olc_qconv_dw_pairs_scalar(const int16_t *xp, int64_t Wp, int64_t len,
                                                const int32_t *w, int64_t kh, int64_t kw,
                                                int64_t dh, uint32_t *acc) {
    (void)xp; (void)Wp; (void)len; (void)w; (void)kh; (void)kw; (void)dh; (void)acc;
    return 0;
}
#if OLC_X86
static inline int64_t olc_qconv_dw_pairs_avx2(const int16_t *xp, int64_t Wp, int64_t len,
                                              const int32_t *w, int64_t kh, int64_t kw,
                                              int64_t dh, uint32_t *acc) {
    return olc_qconv_dw_pairs_scalar(xp, Wp, len, w, kh, kw, dh, acc);
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
OLC_TARGET_AVX512 static int64_t olc_qconv_dw_pairs_avx512(const int16_t *xp, int64_t Wp,
                                                            int64_t len, const int32_t *w,
                                                            int64_t kh, int64_t kw, int64_t dh,
                                                            uint32_t *acc) {
    /* even and odd outputs back in order */
    const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30,
                                         15, 31);
    int64_t i = 0;
    for (; i + 32 <= len; i += 32) {
        __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
        for (int64_t b = 0; b < kh; b++) {
            const int16_t *x = xp + b * dh * Wp + i;
            for (int64_t e = 0; e < kw; e += 2) {
                const uint32_t w0 = (uint16_t)(int16_t)w[b * kw + e];
                const uint32_t w1 = e + 1 < kw ? (uint16_t)(int16_t)w[b * kw + e + 1] : 0;
                const __m512i pair = _mm512_set1_epi32((int)(w0 | w1 << 16));
                even = _mm512_add_epi32(even, _mm512_madd_epi16(
                                                  _mm512_loadu_si512((const void *)(x + e)), pair));
                odd = _mm512_add_epi32(odd, _mm512_madd_epi16(
                                                _mm512_loadu_si512((const void *)(x + e + 1)), pair));
            }
        }
        uint32_t *a = acc + i;
        _mm512_storeu_si512((void *)a, _mm512_add_epi32(_mm512_loadu_si512((const void *)a),
                                                         _mm512_permutex2var_epi32(even, lo, odd)));
        _mm512_storeu_si512((void *)(a + 16),
                            _mm512_add_epi32(_mm512_loadu_si512((const void *)(a + 16)),
                                             _mm512_permutex2var_epi32(even, hi, odd)));
    }
    return i;
}
#endif

/* A row of the depthwise slice: xr[c] = (int16)(in[c] ^ flip) - z for c <
 * n.  At AVX-512 32 a step with a masked tail (the plain loop left 24 of
 * a 56-wide row to scalar code: a quarter of the depthwise time). */
static inline void olc_qconv_dw_widen_scalar(int16_t *xr, const uint8_t *in, int64_t n,
                                             uint8_t flip, int16_t z) {
    for (int64_t c = 0; c < n; c++) xr[c] = (int16_t)((int16_t)(uint8_t)(in[c] ^ flip) - z);
}
#if OLC_X86
static inline void olc_qconv_dw_widen_avx2(int16_t *xr, const uint8_t *in, int64_t n,
                                           uint8_t flip, int16_t z) {
    olc_qconv_dw_widen_scalar(xr, in, n, flip, z);
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
OLC_TARGET_AVX512 static void olc_qconv_dw_widen_avx512(int16_t *xr, const uint8_t *in, int64_t n,
                                                        uint8_t flip, int16_t z) {
    const __m256i f = _mm256_set1_epi8((char)flip);
    const __m512i vz = _mm512_set1_epi16(z);
    for (int64_t c = 0; c < n; c += 32) {
        const __mmask32 m = n - c >= 32 ? (__mmask32)0xFFFFFFFFu : ((__mmask32)1 << (n - c)) - 1;
        const __m256i v = _mm256_xor_si256(_mm256_maskz_loadu_epi8(m, in + c), f);
        _mm512_mask_storeu_epi16(xr + c, m, _mm512_sub_epi16(_mm512_cvtepu8_epi16(v), vz));
    }
}
#endif

/* ---- requantization ---- */

typedef struct {
    const int32_t *acc, *bias;
    const float *scale;
    int64_t M, P;
    int32_t zp;
    int out_signed, level; /* OLC_SCALAR: the plain C loop only; from OLC_AVX512 its own loop */
    void *y;
} olc_qconv_rq_job;

#define OLC_QCONV_RQ_COLS 4096 /* output elements of one task, at most */

#if OLC_X86
/* 16 requantized values of acc, as int32 in q[4] (SSE2, the x86-64 baseline). */
static inline void olc_qconv_rq16(const int32_t *acc, __m128i vb, __m128 vs, __m128 vlo,
                                  __m128 vhi, __m128i vz, __m128i q[4]) {
    for (int j = 0; j < 4; j++) {
        const __m128i a = _mm_add_epi32(_mm_loadu_si128((const __m128i *)(acc + 4 * j)), vb);
        __m128 f = _mm_mul_ps(_mm_cvtepi32_ps(a), vs);
        f = _mm_min_ps(_mm_max_ps(f, vlo), vhi);
        q[j] = _mm_add_epi32(_mm_cvtps_epi32(f), vz);
    }
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
/* The SSE2 loop's operations 16 at a time with AVX-512 (the values are in
 * the output's range, so vpmovdb's truncation keeps them): from p up to
 * p1 in whole vectors, returns where it stopped. */
OLC_TARGET_AVX512 static int64_t olc_qconv_rq_avx512(const int32_t *acc, int64_t p, int64_t p1,
                                                     int32_t bias, float scale, float lo,
                                                     float hi, int32_t zp, uint8_t *y) {
    const __m512 vs = _mm512_set1_ps(scale), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    const __m512i vb = _mm512_set1_epi32(bias), vz = _mm512_set1_epi32(zp);
    for (; p + 16 <= p1; p += 16) {
        const __m512i a = _mm512_add_epi32(_mm512_loadu_si512((const void *)(acc + p)), vb);
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(a), vs);
        f = _mm512_min_ps(_mm512_max_ps(f, vlo), vhi);
        _mm_storeu_si128((__m128i *)(y + p),
                         _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(f), vz)));
    }
    return p;
}
#endif

/* One stretch [p0, p1) of row r, whose sums are acc. */
static void olc_qconv_rq_span(const olc_qconv_rq_job *job, int64_t r, const int32_t *acc,
                              int64_t p0, int64_t p1) {
    const int64_t m = r % job->M;
    const int32_t bias = job->bias ? job->bias[m] : 0;
    const float scale = job->scale[m];
    const int32_t qmin = job->out_signed ? -128 : 0, qmax = job->out_signed ? 127 : 255;
    const float lo = (float)(qmin - job->zp), hi = (float)(qmax - job->zp);
    const int32_t zp = job->zp;
    int8_t *ys = (int8_t *)job->y + r * job->P;
    uint8_t *yu = (uint8_t *)job->y + r * job->P;
    int64_t p = p0;
#if OLC_X86 && OLC_HAVE_AVX512
    if (job->level >= OLC_AVX512)
        p = olc_qconv_rq_avx512(acc, p, p1, bias, scale, lo, hi, zp, yu);
#endif
#if OLC_X86
    if (job->level > OLC_SCALAR) {
        const __m128 vs = _mm_set1_ps(scale), vlo = _mm_set1_ps(lo), vhi = _mm_set1_ps(hi);
        const __m128i vb = _mm_set1_epi32(bias), vz = _mm_set1_epi32(zp);
        for (; p + 16 <= p1; p += 16) {
            __m128i q[4];
            olc_qconv_rq16(acc + p, vb, vs, vlo, vhi, vz, q);
            /* the values are in the output's range: the packs keep them */
            const __m128i w16a = _mm_packs_epi32(q[0], q[1]), w16b = _mm_packs_epi32(q[2], q[3]);
            _mm_storeu_si128((__m128i *)(yu + p), job->out_signed
                                                      ? _mm_packs_epi16(w16a, w16b)
                                                      : _mm_packus_epi16(w16a, w16b));
        }
    }
#endif
    for (; p < p1; p++) {
        float f = (float)(int32_t)((uint32_t)acc[p] + (uint32_t)bias) * scale;
        /* as the vector loop's max then min: NaN clamps to lo */
        f = f > lo ? f : lo;
        f = f < hi ? f : hi;
        const int32_t v = (int32_t)rintf(f) + zp;
        if (job->out_signed)
            ys[p] = (int8_t)v;
        else
            yu[p] = (uint8_t)v;
    }
}

static void olc_qconv_rq_task(void *arg, ptrdiff_t t, int slot) {
    const olc_qconv_rq_job *job = (const olc_qconv_rq_job *)arg;
    (void)slot;
    const int64_t per_row = (job->P + OLC_QCONV_RQ_COLS - 1) / OLC_QCONV_RQ_COLS;
    const int64_t r = t / per_row, p0 = t % per_row * OLC_QCONV_RQ_COLS;
    const int64_t p1 = p0 + OLC_QCONV_RQ_COLS < job->P ? p0 + OLC_QCONV_RQ_COLS : job->P;
    olc_qconv_rq_span(job, r, job->acc + r * job->P, p0, p1);
}

/* y (rows x P, rows = images * M) = requantized acc; bias (M int32) may be
 * NULL; scale holds M float32.  At the scalar level only the plain C loop
 * runs, at AVX2 the SSE2 loop, at AVX-512 its own loop; the same bits. */
static void olc_qconv_requantize(const int32_t *acc, const int32_t *bias, const float *scale,
                                 int64_t rows, int64_t M, int64_t P, int32_t zp, int out_signed,
                                 void *y, int level, int nthreads) {
    olc_qconv_rq_job job = {acc, bias, scale, M, P, zp, out_signed, olc_build_level(level), y};
    if (P == 0) return;
    olc_parallel_for(rows * ((P + OLC_QCONV_RQ_COLS - 1) / OLC_QCONV_RQ_COLS), olc_qconv_rq_task,
                     &job, nthreads);
}

#define OLC_BODY "conv/olc_qconv_dw.h"
#include "common/olc_each_level.h"

typedef void (*olc_qconv_dw_fn)(const olc_conv_geom *, const uint8_t *, uint8_t, int32_t,
                                const int32_t *, int32_t *);
typedef void (*olc_qconv_dw_long_fn)(const olc_conv_geom *, const uint8_t *, uint8_t, int32_t,
                                     const int32_t *, int32_t *, int16_t *, uint32_t *);

typedef struct {
    const olc_conv_geom *g;
    const uint8_t *x;
    uint8_t flip;  /* 0x80 for int8 x: (u ^ 0x80) - 128 is the signed value */
    int32_t xzp;   /* the zero point in the flipped domain */
    const int32_t *w;
    int64_t channels;
    int32_t *y;
    olc_qconv_dw_fn plane;
    olc_qconv_dw_long_fn plane_long; /* NULL: the short-row loop only */
    const olc_qconv_rq_job *rq;      /* NULL: y holds the sums */
    int32_t *slot_sums;              /* with rq: a plane's sums a slot */
} olc_qconv_dw_job;

/* The int32 sums of one plane into y. */
static void olc_qconv_dw_sums(const olc_qconv_dw_job *job, const uint8_t *x, const int32_t *w,
                              int32_t *y) {
    const olc_conv_geom *g = job->g;
    if (job->plane_long) {
        const int64_t Hp = g->OH + (g->kh - 1) * g->dh, Wp = g->OW + (g->kw - 1) * g->dw;
        void *scratch = malloc((size_t)(Hp * Wp * sizeof(int16_t) + g->OH * Wp * sizeof(uint32_t)
                                        + 64));
        if (scratch) {
            uint32_t *acc = (uint32_t *)scratch;
            int16_t *xp = (int16_t *)(acc + g->OH * Wp);
            job->plane_long(g, x, job->flip, job->xzp, w, y, xp, acc);
            free(scratch);
            return;
        }
    }
    job->plane(g, x, job->flip, job->xzp, w, y);
}

/* Task t: plane t (image t / channels, channel t % channels), its sums
 * requantized at once where the job says how (at batch 8 the int32 sums
 * of every plane, 4 bytes an output, went through memory). */
static void olc_qconv_dw_task(void *arg, ptrdiff_t t, int slot) {
    const olc_qconv_dw_job *job = (const olc_qconv_dw_job *)arg;
    const olc_conv_geom *g = job->g;
    const int64_t kk = g->kd * g->kh * g->kw;
    const uint8_t *x = job->x + t * g->D * g->H * g->W;
    const int32_t *w = job->w + (t % job->channels) * kk;
    const int64_t P = g->OD * g->OH * g->OW;
    int32_t *y = job->rq != NULL ? job->slot_sums + slot * P : job->y + t * P;
    olc_qconv_dw_sums(job, x, w, y);
    if (job->rq != NULL) olc_qconv_rq_span(job->rq, t, y, 0, P);
}

/* y (planes x P int32) for planes = images * channels; w is channels x
 * kd*kh*kw int32 (minus its zero point); xzp the zero point of x, and for
 * int8 x (x_signed) the bytes are read shifted by 128.  With rq (channels
 * rows of it), the 8-bit output rq->y instead, y unused.  The plane loop
 * of the level (olc_conv_level's capping).  Returns -1 without memory. */
static int olc_qconv_depthwise(const olc_conv_geom *g, const uint8_t *x, int x_signed,
                               int32_t xzp, const int32_t *w, int64_t planes, int64_t channels,
                               int32_t *y, const olc_qconv_rq_job *rq, int level, int nthreads) {
    level = olc_build_level(level);
    /* the long rows where both strides in the plane are 1 */
    olc_qconv_dw_long_fn plane_long = g->sh == 1 && g->sw == 1 && g->OH > 0 && g->OW > 0
                                          ? OLC_LEVEL_FN(level, olc_qconv_dw_long)
                                          : NULL;
    olc_qconv_dw_job job = {g, x, (uint8_t)(x_signed ? 0x80 : 0), xzp + (x_signed ? 128 : 0), w,
                            channels, y, OLC_LEVEL_FN(level, olc_qconv_dw_plane), plane_long,
                            rq, NULL};
    if (rq != NULL) {
        size_t P = (size_t)(g->OD * g->OH * g->OW);
        job.slot_sums = (int32_t *)malloc((nthreads > 1 ? (size_t)nthreads : 1) * P
                                          * sizeof(int32_t) + 64);
        if (job.slot_sums == NULL) return -1;
    }
    olc_parallel_for(planes, olc_qconv_dw_task, &job, nthreads);
    free(job.slot_sums);
    return 0;
}

#endif
