/* The normalization row engine.
 *
 * Every normalization is a row problem: a row of n contiguous elements, its
 * statistics (one reduction), then an apply pass that writes the output.
 *
 *   LayerNormalization, RMSNormalization, SimplifiedLayerNormalization
 *     -> olc_norm_rows(): a scale (and bias) vector of length n per row.
 *   BatchNormalization, InstanceNormalization, GroupNormalization,
 *   LpNormalization, MeanVarianceNormalization
 *     -> olc_norm_affine_rows(): one multiplier and offset per segment of a
 *        row (a channel), y = (x - mean) * mul + add.
 *
 * Reusable building blocks, each chosen once per call with
 * olc_norm_select_*(acc_double, types..., level):
 *
 *   olc_norm_stats_fn(x, n, mode, &mean, &var)
 *       mode OLC_NORM_CENTERED: mean and mean squared deviation (two passes
 *       over the row, which is in cache), OLC_NORM_SQUARES: 0 and mean of
 *       squares, OLC_NORM_L1: 0 and sum |x|, OLC_NORM_L2: 0 and sum x^2.
 *   olc_norm_apply_fn(x, n, mean, inv, scale, bias|NULL, y)
 *       y = (x - mean) * inv * scale (+ bias); x of one type, scale, bias
 *       and y of another.
 *   olc_norm_affine_fn(x, n, mean, mul, add, relu, y)
 *       y = (x - mean) * mul + add, x and y of one type; with relu, then
 *       y = max(0, y) as the Relu kernel computes it (float32 y only).
 *
 * Element types are olc_types.h's (TensorProto numbers): OLC_FLOAT,
 * OLC_FLOAT16, OLC_DOUBLE, OLC_BFLOAT16.  acc_double=0 computes in float32
 * (float16 and bfloat16 are widened on load and rounded once on store),
 * acc_double=1 in float64.  The functions, per level, in three sets
 * (olc_norm_fns tables):
 *   a32  plain float loops, every pair of types (olc_normalization_plain*.h);
 *        at level 0 the scalar twins of v32, at the vector levels used where
 *        a double tensor is involved (vectorised by the compiler);
 *   a64  plain double loops, every pair of types, every level;
 *   v32  float32 intrinsics for float, float16 and bfloat16 (AVX2+FMA/F16C
 *        in olc_normalization_avx2*.h, AVX-512 in olc_normalization_avx512*.h).
 * The bodies are included per level, x type (OLC_NORM_TX) and scale type
 * (OLC_NORM_TS); their function names end in _<an>_<tx>[_<ts>]_<level>.
 * A row is always reduced by one thread in one fixed order: results never
 * depend on the thread count.  No function allocates memory.
 */
#ifndef OLC_NORMALIZATION_H
#define OLC_NORMALIZATION_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

enum { OLC_NORM_CENTERED = 0, OLC_NORM_SQUARES = 1, OLC_NORM_L1 = 2, OLC_NORM_L2 = 3 };

typedef void (*olc_norm_stats_fn)(const void *x, int64_t n, int mode, double *mean, double *var);
typedef void (*olc_norm_apply_fn)(const void *x, int64_t n, double mean, double inv,
                                  const void *scale, const void *bias, void *y);
typedef void (*olc_norm_affine_fn)(const void *x, int64_t n, double mean, double mul, double add,
                                   int relu, void *y);

/* One set of functions of one level, indexed by olc_norm_index(type):
 * apply[x type][scale type].  NULL where the set has no such function. */
typedef struct {
    olc_norm_stats_fn stats[4];
    olc_norm_affine_fn affine[4];
    olc_norm_apply_fn apply[4][4];
} olc_norm_fns;

/* ---- element types by name (f32, f16, f64, bf16): storage, scalar load
 * (float, double for f64), scalar store (nearest even) ----
 * A float16/bfloat16 value converted to double goes through float first
 * (exact), so `(A)load` is exact for every type but double -> float. */
typedef float olc_norm_t_f32;
typedef uint16_t olc_norm_t_f16;
typedef double olc_norm_t_f64;
typedef uint16_t olc_norm_t_bf16;
#define OLC_NORM_LD_f32(p, i) ((p)[i])
#define OLC_NORM_LD_f64(p, i) ((p)[i])
#define OLC_NORM_LD_f16(p, i) olc_h2f((p)[i])
#define OLC_NORM_LD_bf16(p, i) olc_bf2f((p)[i])
#define OLC_NORM_ST_f32(v) ((float)(v))
#define OLC_NORM_ST_f64(v) ((double)(v))
#define OLC_NORM_ST_f16(v) olc_f2h((float)(v))
#define OLC_NORM_ST_bf16(v) olc_f2bf((float)(v))

/* What the bodies use: OLC_NORM_A the arithmetic type (float, double),
 * OLC_NORM_AN its name (a32, a64, v32), OLC_NORM_TX the x type's name,
 * OLC_NORM_TS the scale type's name. */
#define OLC_NORM_FN_X(name) OLC_FN(OLC_CAT(OLC_CAT(name, OLC_NORM_AN), OLC_NORM_TX))
#define OLC_NORM_FN_XS(name) OLC_FN(OLC_CAT(OLC_CAT(OLC_CAT(name, OLC_NORM_AN), OLC_NORM_TX), OLC_NORM_TS))
#define OLC_NORM_X OLC_CAT(olc_norm_t, OLC_NORM_TX)
#define OLC_NORM_S OLC_CAT(olc_norm_t, OLC_NORM_TS)
#define OLC_NORM_LD_X OLC_CAT(OLC_NORM_LD, OLC_NORM_TX)
#define OLC_NORM_LD_S OLC_CAT(OLC_NORM_LD, OLC_NORM_TS)
#define OLC_NORM_ST_X OLC_CAT(OLC_NORM_ST, OLC_NORM_TX)
#define OLC_NORM_ST_S OLC_CAT(OLC_NORM_ST, OLC_NORM_TS)
#define OLC_NORM_VLD_X OLC_FN(OLC_CAT(olc_ld, OLC_NORM_TX))
#define OLC_NORM_VLD_S OLC_FN(OLC_CAT(olc_ld, OLC_NORM_TS))
#define OLC_NORM_VST_X OLC_FN(OLC_CAT(olc_st, OLC_NORM_TX))
#define OLC_NORM_VST_S OLC_FN(OLC_CAT(olc_st, OLC_NORM_TS))

/* ---- the functions, per level ---- */

#define OLC_LVL scalar
#define OLC_LVL_ATTR
#include "normalization/olc_normalization_plain.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR

#if OLC_X86
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#include "normalization/olc_normalization_plain.h"
#define OLC_NORM_TX f32
#include "normalization/olc_normalization_avx2.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX f16
#include "normalization/olc_normalization_avx2.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX bf16
#include "normalization/olc_normalization_avx2.h"
#undef OLC_NORM_TX
#include "normalization/olc_normalization_v32.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#include "normalization/olc_normalization_plain.h"
#define OLC_NORM_TX f32
#include "normalization/olc_normalization_avx512.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX f16
#include "normalization/olc_normalization_avx512.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX bf16
#include "normalization/olc_normalization_avx512.h"
#undef OLC_NORM_TX
#include "normalization/olc_normalization_v32.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

/* ---- selection ---- */

/* The row of a type in olc_norm_fns, -1 for a type without functions. */
static inline int olc_norm_index(int t) {
    switch (t) {
    case OLC_FLOAT: return 0;
    case OLC_FLOAT16: return 1;
    case OLC_DOUBLE: return 2;
    case OLC_BFLOAT16: return 3;
    default: return -1;
    }
}

static inline int olc_norm_narrow(int t) {
    return t == OLC_FLOAT || t == OLC_FLOAT16 || t == OLC_BFLOAT16;
}

/* The level the functions run at. */
static int olc_norm_level(int level) { return olc_build_level(level); }

/* The set for the arithmetic, whether every type is float32 or narrower
 * (v32 at the vector levels, the a32 twins at level 0) and the level. */
static const olc_norm_fns *olc_norm_set(int acc_double, int narrow, int level) {
    /* per level: a32, a64, v32 */
    static const olc_norm_fns *const sets_scalar[3] = {
        &olc_norm_a32_scalar, &olc_norm_a64_scalar, &olc_norm_a32_scalar};
#if OLC_X86
    static const olc_norm_fns *const sets_avx2[3] = {
        &olc_norm_a32_avx2, &olc_norm_a64_avx2, &olc_norm_v32_avx2};
#endif
#if OLC_X86 && OLC_HAVE_AVX512
    static const olc_norm_fns *const sets_avx512[3] = {
        &olc_norm_a32_avx512, &olc_norm_a64_avx512, &olc_norm_v32_avx512};
#endif
    level = olc_norm_level(level);
    return OLC_LEVEL_FN(level, sets)[acc_double ? 1 : narrow ? 2 : 0];
}

static olc_norm_stats_fn olc_norm_select_stats(int acc_double, int tx, int level) {
    int i = olc_norm_index(tx);
    return i < 0 ? NULL : olc_norm_set(acc_double, olc_norm_narrow(tx), level)->stats[i];
}
static olc_norm_affine_fn olc_norm_select_affine(int acc_double, int tx, int level) {
    int i = olc_norm_index(tx);
    return i < 0 ? NULL : olc_norm_set(acc_double, olc_norm_narrow(tx), level)->affine[i];
}
static olc_norm_apply_fn olc_norm_select_apply(int acc_double, int tx, int ts, int level) {
    int i = olc_norm_index(tx), j = olc_norm_index(ts);
    if (i < 0 || j < 0) return NULL;
    return olc_norm_set(acc_double, olc_norm_narrow(tx) && olc_norm_narrow(ts), level)->apply[i][j];
}

/* 1 / sqrt(var + eps) in the arithmetic's precision. */
static inline double olc_norm_inv_std(int acc_double, double var, double eps) {
    if (acc_double) return 1.0 / sqrt(var + eps);
    return (double)(1.0f / sqrtf((float)var + (float)eps));
}

/* Stores a statistic as float, double, float16 or bfloat16. */
static inline void olc_norm_store_stat(void *out, int type, int64_t i, double v) {
    switch (type) {
    case OLC_FLOAT: ((float *)out)[i] = (float)v; break;
    case OLC_DOUBLE: ((double *)out)[i] = v; break;
    case OLC_FLOAT16: ((uint16_t *)out)[i] = olc_f2h((float)v); break;
    case OLC_BFLOAT16: ((uint16_t *)out)[i] = olc_f2bf((float)v); break;
    default: break;
    }
}

/* ---- drivers: a range of rows [r0, r1) ---- */

/* LayerNormalization, RMSNormalization, SimplifiedLayerNormalization. */
typedef struct {
    olc_norm_stats_fn stats;
    olc_norm_apply_fn apply;
    const char *x;
    char *y;
    const char *scale, *bias;           /* bias may be NULL */
    int64_t n, x_item, y_item;          /* row length, element sizes */
    int64_t scale_stride;               /* bytes between the scale rows of consecutive rows */
    const int64_t *scale_row;           /* or, when not NULL, the scale row index of each row */
    int64_t bias_stride;
    int mode, acc_double;               /* OLC_NORM_CENTERED or OLC_NORM_SQUARES */
    double eps;
    void *mean_out, *inv_out;           /* optional statistics, one per row */
    int stat_type;
} olc_norm_rows_plan;

static void olc_norm_rows(const olc_norm_rows_plan *p, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        double mean, var;
        const char *x = p->x + r * p->n * p->x_item;
        p->stats(x, p->n, p->mode, &mean, &var);
        double inv = olc_norm_inv_std(p->acc_double, var, p->eps);
        int64_t srow = p->scale_row ? p->scale_row[r] : r;
        const char *b = p->bias ? p->bias + srow * p->bias_stride : NULL;
        p->apply(x, p->n, mean, inv, p->scale + srow * p->scale_stride, b,
                 p->y + r * p->n * p->y_item);
        if (p->mean_out) olc_norm_store_stat(p->mean_out, p->stat_type, r, mean);
        if (p->inv_out) olc_norm_store_stat(p->inv_out, p->stat_type, r, inv);
    }
}

/* Per-segment affine: a row of `segs` segments of `seg_len` elements; the
 * segment's channel is (row % groups) * segs + seg.
 *   how OLC_NORM_HOW_GIVEN: the channel's mean/var are given (BatchNorm)
 *   how OLC_NORM_HOW_STD: row statistics, mul = ch_mul / sqrt(var + eps)
 *   how OLC_NORM_HOW_MVN: row statistics, mul = 1 / (sqrt(var) + eps)
 *   how OLC_NORM_HOW_LP: row L1 or L2 norm, mul = 1 / norm (0 for norm 0)
 *   how OLC_NORM_HOW_STATS: only the row statistics, into row_mean/row_var. */
enum { OLC_NORM_HOW_GIVEN = 0, OLC_NORM_HOW_STD, OLC_NORM_HOW_MVN, OLC_NORM_HOW_LP,
       OLC_NORM_HOW_STATS };

typedef struct {
    olc_norm_stats_fn stats;
    olc_norm_affine_fn affine;
    const char *x;
    char *y;
    int64_t item, segs, seg_len, groups;
    const double *ch_mul, *ch_add, *ch_mean, *ch_var;   /* per channel, NULL = 1 / 0 */
    double eps;
    int how, mode, acc_double;
    int relu;          /* then y = max(0, y) (float32 y only): a Relu after it, fused
                        * into the affine's vectors.  As a call of the level's Relu
                        * kernel a segment, after it, the Relu took longer than the
                        * normalization on 49-element segments (DenseNet-121's 7x7,
                        * 1024 channels: 24 % of the pair against 18 %, perf) */
    double *row_mean, *row_var;
    const char *const *row_x; /* row r at row_x[r] (a Concat's inputs); NULL: x + r * row */
} olc_norm_affine_plan;

static void olc_norm_affine_rows(const olc_norm_affine_plan *p, int64_t r0, int64_t r1) {
    const int64_t n = p->segs * p->seg_len;
    for (int64_t r = r0; r < r1; ++r) {
        const char *x = p->row_x != NULL ? p->row_x[r] : p->x + r * n * p->item;
        double mean = 0.0, var = 0.0, inv = 1.0;
        if (p->how != OLC_NORM_HOW_GIVEN) {
            p->stats(x, n, p->mode, &mean, &var);
            if (p->how == OLC_NORM_HOW_STATS) {
                p->row_mean[r] = mean;
                p->row_var[r] = var;
                continue;
            }
            if (p->how == OLC_NORM_HOW_STD) inv = olc_norm_inv_std(p->acc_double, var, p->eps);
            else if (p->how == OLC_NORM_HOW_MVN)
                inv = p->acc_double ? 1.0 / (sqrt(var) + p->eps)
                                    : (double)(1.0f / (sqrtf((float)var) + (float)p->eps));
            else {
                double norm = p->mode == OLC_NORM_L2 ? (p->acc_double ? sqrt(var) : (double)sqrtf((float)var))
                                                     : var;
                inv = norm == 0.0 ? 0.0 : (p->acc_double ? 1.0 / norm : (double)(1.0f / (float)norm));
            }
        }
        for (int64_t s = 0; s < p->segs; ++s) {
            int64_t c = (r % p->groups) * p->segs + s;
            double m = mean, k = inv, a = p->ch_add ? p->ch_add[c] : 0.0;
            if (p->how == OLC_NORM_HOW_GIVEN) {
                m = p->ch_mean[c];
                k = olc_norm_inv_std(p->acc_double, p->ch_var[c], p->eps);
            }
            if (p->ch_mul) k = p->acc_double ? k * p->ch_mul[c] : (double)((float)k * (float)p->ch_mul[c]);
            int64_t off = s * p->seg_len * p->item;
            p->affine(x + off, p->seg_len, m, k, a, p->relu, p->y + r * n * p->item + off);
        }
    }
}

#endif
