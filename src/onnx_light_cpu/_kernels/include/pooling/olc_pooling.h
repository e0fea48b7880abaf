/* Pooling family: MaxPool, AveragePool, LpPool (1-D, 2-D, 3-D), the global
 * pools, LRN and MaxRoiPool.
 *
 * Every spatial pool works on planes (one (n, c) pair each) of at most three
 * spatial dimensions, lower ranks padded in front with 1s: [D, H, W] in,
 * [OD, OH, OW] out, one output row (od, oh) at a time from the valid input
 * rows of its window.
 *
 * float32 (olc_pooling_rows_f32_<level>): the output columns whose taps all lie
 * inside the row (the interior, computed once per call) go a vector at a
 * time with the accumulators in registers (two vectors a step at AVX2;
 * stride 2 loaded as two vectors shuffled to the even elements; other
 * strides take the scalar loop), the border columns one at a time with
 * every tap checked.  At AVX2 and AVX-512 the sums (AveragePool, LpPool
 * with p = 2) are separable: the window's rows added column by column,
 * then each output's column taps.  AveragePool divides as it stores, by
 * the counts per output coordinate the adapter computes.  float64 and the
 * integer types run plain C loops (the row as accumulator for int8/uint8).
 *
 * The max starts from the window's first tap and a later tap replaces it
 * only when greater (ONNX Runtime's loops): a NaN first tap stays, later
 * NaN never win; GlobalMaxPool likewise from the plane's first element.
 * Indices (MaxPool's second output) take a scalar loop per output element:
 * the first maximum in the window's row-major order, flattened over the
 * whole input (the spatial part row- or column-major).
 *
 * Results are the same bits at every thread count (each output element is
 * computed by one code path whatever the split); across levels the maxima
 * agree exactly, sums within float32 rounding (other orders, and products
 * gcc fuses into adds at AVX2 and AVX-512).
 *
 * float16 and bfloat16 are widened to float32 by the adapter; the cores see
 * float32, float64, int8 and uint8 (max only).  Planes [p0, p1) per call, so
 * threads split whole planes (LRN: whole (n, c) output planes; MaxRoiPool:
 * (roi, c) pairs).
 */
#ifndef OLC_POOLING_H
#define OLC_POOLING_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_types.h"

enum { OLC_POOLING_MAX = 0, OLC_POOLING_AVG = 1, OLC_POOLING_LP = 2 };

typedef struct {
    const void *x;
    void *y;
    int64_t *idx;                 /* MaxPool's Indices, or NULL */
    int64_t in[3], out[3];        /* spatial sizes, leading 1s */
    int64_t k[3], s[3], pb[3], d[3];
    const void *cnt[3];           /* AveragePool: window positions counted per output coordinate, in the element type */
    int mode;
    int storage_order;            /* Indices: 0 row-major, 1 column-major (spatial part) */
    double p;                     /* LpPool, GlobalLpPool */
    /* LRN */
    int64_t C, HW, lo, hi;        /* channels, plane size, window c - lo .. c + hi */
    double alpha_over_size, beta, bias;
    /* MaxRoiPool */
    const void *rois;
    int64_t ph, pw;
    float spatial_scale;
} olc_pooling_args;

typedef void (*olc_pooling_fn)(const olc_pooling_args *p, int64_t p0, int64_t p1);

/* Element types by name, as the body file uses them. */
typedef float olc_pooling_t_f32;
typedef double olc_pooling_t_f64;
typedef int8_t olc_pooling_t_i8;
typedef uint8_t olc_pooling_t_u8;
#define OLC_POOLING_LOWEST_f32 (-FLT_MAX)
#define OLC_POOLING_LOWEST_f64 (-DBL_MAX)
#define OLC_POOLING_LOWEST_i8 INT8_MIN
#define OLC_POOLING_LOWEST_u8 0
#define OLC_POOLING_SQRT_f32 sqrtf
#define OLC_POOLING_SQRT_f64 sqrt
#define OLC_POOLING_POW_f32 powf
#define OLC_POOLING_POW_f64 pow
#define OLC_POOLING_ABS_f32 fabsf
#define OLC_POOLING_ABS_f64 fabs

/* float32 output rows of the spatial pools, accumulators in registers.
 *
 * One output row from the nrows valid input rows of its window (depth and
 * height taps, in window order): yr[ow] = op over the rows r and kernel
 * columns k (in that order) of r[ow * s + k * dw - pw], skipping columns
 * outside [0, W); op is max (maxps(v, acc): acc when v is NaN, as the C
 * comparison), add, or add of the square.  Output columns whose every tap
 * is inside the row (the interior) go a vector at a time (strides 1 and 2
 * as whole loads, stride 2 shuffled to the even elements), the others one
 * element at a time; both apply the same operations in the same order, so
 * every level gives the same bits (the square fused into the add aside). */
enum { OLC_POOLING_OP_MAX = 0, OLC_POOLING_OP_ADD = 1, OLC_POOLING_OP_SQ = 2 };
#define OLC_POOLING_MAX_ROWS 256
#define OLC_POOLING_TROW 4096  /* the widest row the separable sums take */

typedef struct {
    int64_t OW, W, s, kw, dw, pw;
    int op;
    float init;
    /* AveragePool: each column's result divided by cdh * cw[ow] (NULL: not) */
    const float *cw;
    float cdh;
    int64_t a, b;  /* the interior, olc_pooling_interior (set once per call) */
    float *t;      /* OLC_POOLING_TROW floats of scratch for the separable sums, or NULL */
} olc_pooling_rowspec;

static inline float olc_pooling_op1(float acc, float v, int op) {
    if (op == OLC_POOLING_OP_MAX) return v > acc ? v : acc;
    if (op == OLC_POOLING_OP_ADD) return acc + v;
    float q = v * v;
    return acc + q;
}

/* The interior [*a, *b) of a row. */
static inline void olc_pooling_interior(const olc_pooling_rowspec *r, int64_t *a, int64_t *b) {
    int64_t lo = r->pw > 0 ? (r->pw + r->s - 1) / r->s : 0;
    int64_t last = (r->kw - 1) * r->dw - r->pw;
    int64_t hi = r->W - 1 - last < 0 ? 0 : (r->W - 1 - last) / r->s + 1;
    if (hi > r->OW) hi = r->OW;
    if (hi < lo) hi = lo;
    *a = lo;
    *b = hi;
}

/* Output columns [j0, j1) one at a time, every tap checked.  The max
 * starts from the window's first tap (then a NaN there stays, as in ONNX
 * Runtime's loops); a window without taps gives init. */
static inline void olc_pooling_cols_f32(float *yr, const float *const *rows, int nrows,
                                     const olc_pooling_rowspec *r, int64_t j0, int64_t j1) {
    for (int64_t ow = j0; ow < j1; ++ow) {
        float acc = r->init;
        int seeded = r->op != OLC_POOLING_OP_MAX;
        for (int q = 0; q < nrows; ++q)
            for (int64_t k = 0; k < r->kw; ++k) {
                int64_t iw = ow * r->s + k * r->dw - r->pw;
                if (iw < 0 || iw >= r->W) continue;
                if (seeded) {
                    acc = olc_pooling_op1(acc, rows[q][iw], r->op);
                } else {
                    acc = rows[q][iw];
                    seeded = 1;
                }
            }
        yr[ow] = r->cw ? acc / (r->cdh * r->cw[ow]) : acc;
    }
}

/* Interior columns [j0, j1) one at a time, no checks. */
static inline void olc_pooling_inner_f32(float *yr, const float *const *rows, int nrows,
                                      const olc_pooling_rowspec *r, int64_t j0, int64_t j1) {
    const int seed = r->op == OLC_POOLING_OP_MAX && nrows > 0;
    for (int64_t ow = j0; ow < j1; ++ow) {
        float acc = seed ? rows[0][ow * r->s - r->pw] : r->init;
        for (int q = 0; q < nrows; ++q) {
            const float *base = rows[q] + ow * r->s - r->pw;
            for (int64_t k = q == 0 && seed; k < r->kw; ++k) acc = olc_pooling_op1(acc, base[k * r->dw], r->op);
        }
        yr[ow] = r->cw ? acc / (r->cdh * r->cw[ow]) : acc;
    }
}

static void olc_pooling_rows_f32_scalar(float *yr, const float *const *rows, int nrows,
                                     const olc_pooling_rowspec *r) {
    const int64_t a = r->a, b = r->b;
    olc_pooling_cols_f32(yr, rows, nrows, r, 0, a);
    olc_pooling_inner_f32(yr, rows, nrows, r, a, b);
    olc_pooling_cols_f32(yr, rows, nrows, r, b, r->OW);
}
static void olc_pooling_rows_sep_scalar(float *yr, const float *const *rows, int nrows,
                                     const olc_pooling_rowspec *r) {
    olc_pooling_rows_f32_scalar(yr, rows, nrows, r);
}

/* The vector levels' words for their body (pooling/olc_pooling_rows.h):
 * a vector of the level's floats set to one value, the op on vectors
 * (maxps(v, acc): acc when v is NaN, as the C comparison), a part (what a
 * level needs to know to move the first n columns of a vector, from
 * part_of(n)), loads of a part at stride 1 (ld) or 2 (ld2: the even
 * elements of 2n - 1) and its store (st), and ldm, the first n columns, the
 * others 0.  AVX2 has no masks in its loops: its parts are whole vectors
 * (the body asks for whole vectors only, or stores into scratch with room
 * for one), ldm is its one masked load; AVX-512's parts are masks. */
#if OLC_X86
static inline OLC_TARGET_AVX2 __m256 olc_pooling_set_avx2(float v) { return _mm256_set1_ps(v); }
static inline OLC_TARGET_AVX2 __m256 olc_pooling_op_avx2(__m256 acc, __m256 v, int op) {
    if (op == OLC_POOLING_OP_MAX) return _mm256_max_ps(v, acc);
    if (op == OLC_POOLING_OP_ADD) return _mm256_add_ps(acc, v);
    return _mm256_add_ps(acc, _mm256_mul_ps(v, v));
}
typedef int olc_pooling_part_avx2;
static inline OLC_TARGET_AVX2 olc_pooling_part_avx2 olc_pooling_part_of_avx2(int64_t n) {
    (void)n;
    return 0;
}
static inline OLC_TARGET_AVX2 __m256 olc_pooling_ld_avx2(const float *p, olc_pooling_part_avx2 n) {
    (void)n;
    return _mm256_loadu_ps(p);
}
/* b[0], b[2], ..., b[14]: reads b[0 .. 14] only (a load at b + 7 gives
 * the odd-placed half). */
static inline OLC_TARGET_AVX2 __m256 olc_pooling_ld2_avx2(const float *b, olc_pooling_part_avx2 n) {
    (void)n;
    __m256 lo = _mm256_loadu_ps(b), hi = _mm256_loadu_ps(b + 7);
    return _mm256_castpd_ps(_mm256_permute4x64_pd(
        _mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xD8)), 0xD8));
}
static inline OLC_TARGET_AVX2 __m256 olc_pooling_ldm_avx2(const float *p, int64_t n) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_maskload_ps(p, m);
}
static inline OLC_TARGET_AVX2 void olc_pooling_st_avx2(float *p, olc_pooling_part_avx2 n, __m256 v) {
    (void)n;
    _mm256_storeu_ps(p, v);
}
/* The global pools' words: the op of olc_pooling_gplane_f32 (how 0 sum,
 * 1 sum of |x|, 2 sum of squares, 4 max), a plain load, the first n < 8
 * columns with the other lanes vi's (maskload's zeros are the sums'
 * identity), and the lanes of two accumulators folded in a fixed order. */
static inline OLC_TARGET_AVX2 __m256 olc_pooling_gop_avx2(__m256 acc, __m256 v, int how) {
    if (how == 4) return _mm256_max_ps(v, acc);
    if (how == 1) v = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
    else if (how == 2) v = _mm256_mul_ps(v, v);
    return _mm256_add_ps(acc, v);
}
static inline OLC_TARGET_AVX2 __m256 olc_pooling_ldu_avx2(const float *p) { return _mm256_loadu_ps(p); }
static inline OLC_TARGET_AVX2 __m256 olc_pooling_ldt_avx2(const float *p, int64_t n, __m256 vi, int how) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 v = _mm256_maskload_ps(p, m);
    if (how == 4) v = _mm256_blendv_ps(vi, v, _mm256_castsi256_ps(m));
    return v;
}
static inline OLC_ALWAYS_INLINE OLC_TARGET_AVX2 float olc_pooling_fold8(__m256 a, int how) {
    __m128 h = _mm256_castps256_ps128(a), l = _mm256_extractf128_ps(a, 1);
    h = how == 4 ? _mm_max_ps(l, h) : _mm_add_ps(h, l);
    __m128 q = _mm_movehl_ps(h, h);
    h = how == 4 ? _mm_max_ps(q, h) : _mm_add_ps(h, q);
    q = _mm_shuffle_ps(h, h, 1);
    h = how == 4 ? _mm_max_ss(q, h) : _mm_add_ss(h, q);
    return _mm_cvtss_f32(h);
}
static inline OLC_TARGET_AVX2 float olc_pooling_fold_avx2(__m256 a0, __m256 a1, int how) {
    return olc_pooling_fold8(how == 4 ? _mm256_max_ps(a1, a0) : _mm256_add_ps(a0, a1), how);
}
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_POOLING_VW 8
#define OLC_POOLING_MASKED 0
#include "pooling/olc_pooling_rows.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_POOLING_VW
#undef OLC_POOLING_MASKED
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __mmask16 olc_pooling_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}
static inline OLC_TARGET_AVX512 __m512 olc_pooling_set_avx512(float v) { return _mm512_set1_ps(v); }
static inline OLC_TARGET_AVX512 __m512 olc_pooling_op_avx512(__m512 acc, __m512 v, int op) {
    if (op == OLC_POOLING_OP_MAX) return _mm512_max_ps(v, acc);
    if (op == OLC_POOLING_OP_ADD) return _mm512_add_ps(acc, v);
    return _mm512_add_ps(acc, _mm512_mul_ps(v, v));
}
/* the columns of a part (m) and of its stride-2 loads (m0, m1) */
typedef struct { __mmask16 m, m0, m1; } olc_pooling_part_avx512;
static inline OLC_TARGET_AVX512 olc_pooling_part_avx512 olc_pooling_part_of_avx512(int64_t n) {
    olc_pooling_part_avx512 t = {olc_pooling_mask16(n), olc_pooling_mask16(2 * n - 1), olc_pooling_mask16(2 * n - 17)};
    return t;
}
static inline OLC_TARGET_AVX512 __m512 olc_pooling_ld_avx512(const float *p, olc_pooling_part_avx512 t) {
    return _mm512_maskz_loadu_ps(t.m, p);
}
/* b[0], b[2], ..., b[2n - 2]: reads b[0 .. 2n - 2] only. */
static inline OLC_TARGET_AVX512 __m512 olc_pooling_ld2_avx512(const float *b, olc_pooling_part_avx512 t) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512 lo = _mm512_maskz_loadu_ps(t.m0, b), hi = _mm512_maskz_loadu_ps(t.m1, b + 16);
    return _mm512_permutex2var_ps(lo, even, hi);
}
static inline OLC_TARGET_AVX512 void olc_pooling_st_avx512(float *p, olc_pooling_part_avx512 t, __m512 v) {
    _mm512_mask_storeu_ps(p, t.m, v);
}
static inline OLC_TARGET_AVX512 __m512 olc_pooling_ldm_avx512(const float *p, int64_t n) {
    return _mm512_maskz_loadu_ps(olc_pooling_mask16(n), p);
}
static inline OLC_TARGET_AVX512 __m512 olc_pooling_gop_avx512(__m512 acc, __m512 v, int how) {
    if (how == 4) return _mm512_max_ps(v, acc);
    if (how == 1) v = _mm512_abs_ps(v);
    else if (how == 2) v = _mm512_mul_ps(v, v);
    return _mm512_add_ps(acc, v);
}
static inline OLC_TARGET_AVX512 __m512 olc_pooling_ldu_avx512(const float *p) { return _mm512_loadu_ps(p); }
static inline OLC_TARGET_AVX512 __m512 olc_pooling_ldt_avx512(const float *p, int64_t n, __m512 vi, int how) {
    (void)how;
    return _mm512_mask_loadu_ps(vi, (__mmask16)((1u << n) - 1), p);
}
static inline OLC_TARGET_AVX512 float olc_pooling_fold_avx512(__m512 a0, __m512 a1, int how) {
    __m512 a = how == 4 ? _mm512_max_ps(a1, a0) : _mm512_add_ps(a0, a1);
    __m256 b = _mm512_castps512_ps256(a), c = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    return olc_pooling_fold8(how == 4 ? _mm256_max_ps(c, b) : _mm256_add_ps(b, c), how);
}
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_POOLING_VW 16
#define OLC_POOLING_MASKED 1
#include "pooling/olc_pooling_rows.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_POOLING_VW
#undef OLC_POOLING_MASKED
#endif

/* The scalar level keeps its sixteen partials (OLC_POOLING_GPLANE_<level>). */
#define OLC_POOLING_GPLANE_scalar 0
#define OLC_POOLING_GPLANE_avx2 1
#define OLC_POOLING_GPLANE_avx512 1
static inline float olc_pooling_gplane_f32_scalar(const float *x, int64_t n, int how) {
    (void)x; (void)n; (void)how;
    return 0.0f;
}

/* The 2 x 2 pools at stride 2 of the levels without their own loop. */
static int olc_pooling_pairs_scalar(const olc_pooling_args *p, int64_t p0, int64_t p1, int op,
                                    int divide) {
    (void)p; (void)p0; (void)p1; (void)op; (void)divide;
    return 0;
}
#if OLC_X86
static int olc_pooling_pairs_avx2(const olc_pooling_args *p, int64_t p0, int64_t p1, int op,
                                  int divide) {
    return olc_pooling_pairs_scalar(p, p0, p1, op, divide);
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
/* 2-D windows of 2 x 2 at stride 2 with every tap inside the plane (no
 * padding, no dilation, two rows and all columns whole), the common
 * AveragePool and MaxPool of CNN downsampling: the two input rows of an
 * output row loaded once, the columns' pairs taken apart by permutes, no
 * call or scratch a row.  The same operations in the same order as
 * olc_pooling_rows_sep (vertical sums, then 0 + even + odd, divided by the
 * counts; the max seeded by the first tap): the same bits.  Through
 * olc_pooling_rows_sep a 512 x 14 x 14 AveragePool cost about 30 ns an
 * output row, its calls and masks, not its adds.  AVX-512 only (masked
 * tails): the other levels' olc_pooling_pairs_<level> return 0 and the
 * row path runs. */
OLC_TARGET_AVX512 static int olc_pooling_pairs_avx512(const olc_pooling_args *p, int64_t p0,
                                                      int64_t p1, int op, int divide) {
    const int64_t H = p->in[1], W = p->in[2], OH = p->out[1], OW = p->out[2];
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const float *cd = divide ? (const float *)p->cnt[0] : NULL, *ch = divide ? (const float *)p->cnt[1] : NULL;
    const float *cw = divide ? (const float *)p->cnt[2] : NULL;
    for (int64_t pl = p0; pl < p1; ++pl)
        for (int64_t oh = 0; oh < OH; ++oh) {
            const float *top = (const float *)p->x + (pl * H + 2 * oh) * W, *bot = top + W;
            float *yr = (float *)p->y + (pl * OH + oh) * OW;
            const __m512 cdh = _mm512_set1_ps(divide ? cd[0] * ch[oh] : 1.0f);
            for (int64_t j = 0; j < OW; j += 16) {
                const int64_t n = OW - j < 16 ? OW - j : 16;
                const __mmask16 m = olc_pooling_mask16(n), m0 = olc_pooling_mask16(2 * n),
                                m1 = olc_pooling_mask16(2 * n - 16);
                const __m512 t0 = _mm512_maskz_loadu_ps(m0, top + 2 * j);
                const __m512 t1 = _mm512_maskz_loadu_ps(m1, top + 2 * j + 16);
                const __m512 b0 = _mm512_maskz_loadu_ps(m0, bot + 2 * j);
                const __m512 b1 = _mm512_maskz_loadu_ps(m1, bot + 2 * j + 16);
                __m512 acc;
                if (op == OLC_POOLING_OP_MAX) {
                    acc = _mm512_permutex2var_ps(t0, even, t1);
                    acc = _mm512_max_ps(_mm512_permutex2var_ps(t0, odd, t1), acc);
                    acc = _mm512_max_ps(_mm512_permutex2var_ps(b0, even, b1), acc);
                    acc = _mm512_max_ps(_mm512_permutex2var_ps(b0, odd, b1), acc);
                } else {
                    const __m512 v0 = _mm512_add_ps(t0, b0), v1 = _mm512_add_ps(t1, b1);
                    acc = _mm512_add_ps(_mm512_setzero_ps(), _mm512_permutex2var_ps(v0, even, v1));
                    acc = _mm512_add_ps(acc, _mm512_permutex2var_ps(v0, odd, v1));
                    if (cw) acc = _mm512_div_ps(acc, _mm512_mul_ps(cdh, _mm512_maskz_loadu_ps(m, cw + j)));
                }
                _mm512_mask_storeu_ps(yr + j, m, acc);
            }
        }
    return 1;
}
#endif

#define OLC_BODY "pooling/olc_pooling_types.h"
#include "common/olc_each_level.h"

static int olc_pooling_level(int level) { return olc_build_level(level); }

/* Column of the type tables: float, double, int8, uint8; -1 for another. */
static int olc_pooling_type_index(int dtype) {
    switch (dtype) {
    case OLC_FLOAT: return 0;
    case OLC_DOUBLE: return 1;
    case OLC_INT8: return 2;
    case OLC_UINT8: return 3;
    default: return -1;
    }
}

/* what: 0 spatial max, 1 spatial max with indices, 2 spatial average/Lp,
 * 3 global pools, 4 LRN, 5 MaxRoiPool.  NULL when the type has none.  The
 * tables olc_pooling_fns_<level> close olc_pooling_types.h. */
static olc_pooling_fn olc_pooling_select(int what, int dtype, int level) {
    int t = olc_pooling_type_index(dtype);
    if (t < 0 || what < 0 || what > 5) return NULL;
    level = olc_pooling_level(level);
    return OLC_LEVEL_FN(level, olc_pooling_fns)[what][t];
}

#endif /* OLC_POOLING_H */
