/* Pooling family: MaxPool, AveragePool, LpPool (1-D, 2-D, 3-D), the global
 * pools, LRN and MaxRoiPool.
 *
 * Every spatial pool works on planes (one (n, c) pair each) of at most three
 * spatial dimensions, lower ranks padded in front with 1s: [D, H, W] in,
 * [OD, OH, OW] out.  An output row (od, oh) is the output row itself used as
 * the accumulator: for each valid input row (id, ih) of its window and each
 * kernel column kw, one loop over the output columns whose input column
 * ow * sw + kw * dw - pw lies inside the row: contiguous (stride 1), every
 * second element (stride 2) or strided, which the compiler vectorises with
 * the level's registers.  The operations on one output element run in the
 * window's row-major order at every level and thread count, so the results
 * are the same bits everywhere (products fused into an add aside: LpPool's
 * squares and LRN's at AVX2 and AVX-512).
 *
 * Max skips NaN (a NaN never compares greater), as ONNX Runtime's loops and
 * the ONNX reference do; a window of NaN only gives the type's lowest value.
 * Indices (MaxPool's second output) take a scalar loop per output element:
 * the first maximum in the window's row-major order.
 *
 * float16 and bfloat16 are widened to float32 by the adapter; the cores see
 * float32, float64, int8 and uint8 (max only).  Planes [p0, p1) per call, so
 * threads split whole planes (LRN: whole (n, c) output planes).
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

enum { OLC_POOL_MAX = 0, OLC_POOL_AVG = 1, OLC_POOL_LP = 2 };

typedef struct {
    const void *x;
    void *y;
    int64_t *idx;                 /* MaxPool's Indices, or NULL */
    int64_t in[3], out[3];        /* spatial sizes, leading 1s */
    int64_t k[3], s[3], pb[3], d[3];
    const int64_t *cnt[3];        /* AveragePool: window positions counted per output coordinate */
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
} olc_pool_args;

typedef void (*olc_pool_fn)(const olc_pool_args *p, int64_t p0, int64_t p1);

/* Element types by name, as the body file uses them. */
typedef float olc_pool_t_f32;
typedef double olc_pool_t_f64;
typedef int8_t olc_pool_t_i8;
typedef uint8_t olc_pool_t_u8;
#define OLC_POOL_LOWEST_f32 (-FLT_MAX)
#define OLC_POOL_LOWEST_f64 (-DBL_MAX)
#define OLC_POOL_LOWEST_i8 INT8_MIN
#define OLC_POOL_LOWEST_u8 0
#define OLC_POOL_SQRT_f32 sqrtf
#define OLC_POOL_SQRT_f64 sqrt
#define OLC_POOL_POW_f32 powf
#define OLC_POOL_POW_f64 pow
#define OLC_POOL_ABS_f32 fabsf
#define OLC_POOL_ABS_f64 fabs

#define OLC_BODY "pooling/olc_pooling_types.h"
#include "common/olc_each_level.h"

static int olc_pool_level(int level) { return olc_build_level(level); }

/* Column of the type tables: float, double, int8, uint8; -1 for another. */
static int olc_pool_type_index(int dtype) {
    switch (dtype) {
    case OLC_FLOAT: return 0;
    case OLC_DOUBLE: return 1;
    case OLC_INT8: return 2;
    case OLC_UINT8: return 3;
    default: return -1;
    }
}

#define OLC_POOL_TABLE4(lvl, name) \
    {name##_f32_##lvl, name##_f64_##lvl, name##_i8_##lvl, name##_u8_##lvl}
#define OLC_POOL_TABLE2(lvl, name) {name##_f32_##lvl, name##_f64_##lvl, NULL, NULL}

/* what: 0 spatial max, 1 spatial max with indices, 2 spatial average/Lp,
 * 3 global pools, 4 LRN, 5 MaxRoiPool.  NULL when the type has none. */
static olc_pool_fn olc_pool_select(int what, int dtype, int level) {
    static const olc_pool_fn fns_scalar[6][4] = {
        OLC_POOL_TABLE4(scalar, olc_pool_max), OLC_POOL_TABLE4(scalar, olc_pool_maxidx),
        OLC_POOL_TABLE2(scalar, olc_pool_sum), OLC_POOL_TABLE2(scalar, olc_pool_global),
        OLC_POOL_TABLE2(scalar, olc_pool_lrn), OLC_POOL_TABLE2(scalar, olc_pool_roi)};
#if OLC_X86
    static const olc_pool_fn fns_avx2[6][4] = {
        OLC_POOL_TABLE4(avx2, olc_pool_max), OLC_POOL_TABLE4(avx2, olc_pool_maxidx),
        OLC_POOL_TABLE2(avx2, olc_pool_sum), OLC_POOL_TABLE2(avx2, olc_pool_global),
        OLC_POOL_TABLE2(avx2, olc_pool_lrn), OLC_POOL_TABLE2(avx2, olc_pool_roi)};
#endif
#if OLC_X86 && OLC_HAVE_AVX512
    static const olc_pool_fn fns_avx512[6][4] = {
        OLC_POOL_TABLE4(avx512, olc_pool_max), OLC_POOL_TABLE4(avx512, olc_pool_maxidx),
        OLC_POOL_TABLE2(avx512, olc_pool_sum), OLC_POOL_TABLE2(avx512, olc_pool_global),
        OLC_POOL_TABLE2(avx512, olc_pool_lrn), OLC_POOL_TABLE2(avx512, olc_pool_roi)};
#endif
    int t = olc_pool_type_index(dtype);
    if (t < 0 || what < 0 || what > 5) return NULL;
    level = olc_pool_level(level);
    return OLC_LEVEL_FN(level, fns)[what][t];
}

#endif /* OLC_POOLING_H */
