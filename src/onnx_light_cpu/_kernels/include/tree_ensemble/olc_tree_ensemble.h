/* ai.onnx.ml TreeEnsemble core: walk flattened trees over blocks of rows,
 * aggregate the leaf weights per target, apply the post transform.
 *
 * The adapter flattens the forest once: each tree is a run of nodes where a
 * leaf is a node whose successors are itself (threshold NaN), so a walk
 * steps every row of a group of 16 (8) together, up to the tree's depth,
 * looking every 4 steps whether all have reached a leaf (deep, lopsided
 * trees).  Independent walks hide the latency of each one's dependent
 * loads; the comparison's outcome indexes the successor instead of
 * branching (a random split mispredicts half the time).  Scalar on
 * purpose: the walk is bound by dependent loads, not by arithmetic.
 *
 * Thresholds are in the compute type (float for float and float16 inputs,
 * double for double); float16 rows are widened to float per block.  X and
 * Y have one element type, an olc_types.h code: OLC_FLOAT, OLC_DOUBLE or
 * OLC_FLOAT16.  The walks of each compute type are olc_tree_ensemble_walk.h,
 * included per type.  Leaf
 * weights are double and each aggregation step is rounded to the output
 * type, as the onnx.reference built-in does when it adds a float64 weight
 * into its float32/float16/float64 result array.
 */
#ifndef OLC_TREE_ENSEMBLE_H
#define OLC_TREE_ENSEMBLE_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

enum { OLC_TE_LEQ = 0, OLC_TE_LT, OLC_TE_GTE, OLC_TE_GT, OLC_TE_EQ, OLC_TE_NEQ, OLC_TE_MEMBER };
enum { OLC_TE_AVERAGE = 0, OLC_TE_SUM, OLC_TE_MIN, OLC_TE_MAX };
enum { OLC_TE_NONE = 0, OLC_TE_SOFTMAX, OLC_TE_LOGISTIC, OLC_TE_SOFTMAX_ZERO, OLC_TE_PROBIT };
/* uniform_mode + OLC_TE_NAN: one comparison mode, NaN tracked somewhere. */
#define OLC_TE_NAN 8
/* Rows walked together (independent load chains) by the generic walk. */
#define OLC_TE_GROUP 16

/* next_false then next_true: the comparison's 0/1 indexes them. */
typedef struct { float thr; int32_t feature, next_false, next_true; } olc_te_node_f32;
typedef struct { double thr; int32_t feature, next_false, next_true; } olc_te_node_f64;

typedef struct {
    const void *nodes;          /* olc_te_node_f32 or _f64 (compute type) */
    const uint8_t *modes;       /* OLC_TE_LEQ..MEMBER; leaves say LEQ */
    const int32_t *nan_next;    /* successor when the feature is NaN */
    const int32_t *leaf;        /* leaf index of a leaf node, -1 otherwise */
    const int32_t *set_begin;   /* MEMBER nodes: their sorted values ... */
    const int32_t *set_end;
    const void *set_values;     /* ... in the compute type */
    const int32_t *roots;       /* per tree, in aggregation order: root node ... */
    const int32_t *depths;      /* ... and steps from it to its deepest leaf */
    int64_t n_trees;
    const double *leaf_weights;
    const int32_t *leaf_targets;
    int64_t n_targets;
    int uniform_mode;           /* LEQ..GT: one comparison, NaN goes false; + OLC_TE_NAN:
                                   NaN goes true where feature < 0 (complemented);
                                   -1: any mode (generic walk) */
    int aggregate, post_transform;
} olc_te_forest;

/* ---- rounding to the output type ---- */

/* double -> float rounded to odd: a following round-to-nearest to half is
 * then correctly rounded (float keeps more than 2 extra bits). */
static inline float olc_te_d2f_odd(double v) {
    float f = (float)v;
    if ((double)f != v && v == v) {
        if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
        uint32_t b;
        memcpy(&b, &f, 4);
        b |= 1u;
        memcpy(&f, &b, 4);
    }
    return f;
}
static inline uint16_t olc_te_d2h(double v) { return olc_f2h(olc_te_d2f_odd(v)); }

static inline double olc_te_round(double v, int dtype) {
    if (dtype == OLC_FLOAT) return (double)(float)v;
    if (dtype == OLC_FLOAT16) return (double)olc_h2f(olc_te_d2h(v));
    return v;
}

/* ---- walks: final node of each row of x[rows, F] through one tree ---- */

/* The compute types by name (f32, f64), as olc_tree_ensemble_walk.h uses
 * them: OLC_TE_X the feature and threshold type, OLC_TE_NODE the node. */
typedef float olc_te_x_f32;
typedef double olc_te_x_f64;
#define OLC_TE_X OLC_CAT(olc_te_x, OLC_TE_TN)
#define OLC_TE_NODE OLC_CAT(olc_te_node, OLC_TE_TN)
#define OLC_TE_FN(name) OLC_CAT(name, OLC_TE_TN)

#define OLC_TE_TN f32
#include "tree_ensemble/olc_tree_ensemble_walk.h"
#undef OLC_TE_TN
#define OLC_TE_TN f64
#include "tree_ensemble/olc_tree_ensemble_walk.h"
#undef OLC_TE_TN

static void olc_te_walk(const olc_te_forest *f, int compute_double, int32_t root,
                        int32_t depth, const void *x, int64_t F, int64_t rows, int32_t *out) {
    if (compute_double) olc_te_walk_f64(f, root, depth, x, F, rows, out);
    else olc_te_walk_f32(f, root, depth, x, F, rows, out);
}

/* ---- aggregation ---- */

/* acc[r * T + target] op= weight of the leaf each row reached; each step is
 * rounded to the output type (the built-in's float64 weight added into its
 * result array).  dtype is a constant where it is inlined, so the rounding
 * folds away. */
static inline __attribute__((always_inline)) void olc_te_aggregate_as(
    const olc_te_forest *f, const int32_t *ends, int64_t rows, double *acc, int64_t T,
    double ntrees, const int dtype) {
    for (int64_t r = 0; r < rows; ++r) {
        int32_t l = f->leaf[ends[r]];
        double w = f->leaf_weights[l], *a = acc + r * T + f->leaf_targets[l];
        switch (f->aggregate) {
        case OLC_TE_AVERAGE: *a = olc_te_round(*a + w / ntrees, dtype); break;
        case OLC_TE_MIN: if (w < *a) *a = olc_te_round(w, dtype); break;
        case OLC_TE_MAX: if (w > *a) *a = olc_te_round(w, dtype); break;
        default: *a = olc_te_round(*a + w, dtype);
        }
    }
}

static void olc_te_aggregate(const olc_te_forest *f, int dtype, const int32_t *ends,
                             int64_t rows, double *acc) {
    const int64_t T = f->n_targets;
    const double ntrees = (double)f->n_trees;
    if (dtype == OLC_FLOAT) olc_te_aggregate_as(f, ends, rows, acc, T, ntrees, OLC_FLOAT);
    else if (dtype == OLC_FLOAT16) olc_te_aggregate_as(f, ends, rows, acc, T, ntrees, OLC_FLOAT16);
    else olc_te_aggregate_as(f, ends, rows, acc, T, ntrees, OLC_DOUBLE);
}

/* ---- post transforms, in double, as onnx.reference's helpers define them ---- */

static inline double olc_te_logistic(double v) {
    double e = 1.0 / (1.0 + exp(-fabs(v)));
    return v < 0 ? 1.0 - e : e;
}

/* The approximation of erf^-1 the ONNX-ML helpers use (Winitzki, a = 0.147). */
static inline double olc_te_probit(double v) {
    double x = v * 2.0 - 1.0;
    double sgn = x < 0 ? -1.0 : 1.0;
    x = (1.0 - x) * (1.0 + x);
    if (x == 0) return 0.0;
    double lg = log(x);
    double a = 2.0 / (3.14159265358979323846 * 0.147) + 0.5 * lg;
    double b = 1.0 / 0.147 * lg;
    return 1.41421356 * sgn * sqrt(-a + sqrt(a * a - b));
}

static void olc_te_post(int post, double *a, int64_t T) {
    switch (post) {
    case OLC_TE_LOGISTIC:
        for (int64_t t = 0; t < T; ++t) a[t] = olc_te_logistic(a[t]);
        break;
    case OLC_TE_PROBIT:
        for (int64_t t = 0; t < T; ++t) a[t] = olc_te_probit(a[t]);
        break;
    case OLC_TE_SOFTMAX:
    case OLC_TE_SOFTMAX_ZERO: {
        /* numpy's max: NaN wins. */
        double mx = a[0];
        int any_nan = 0;
        for (int64_t t = 0; t < T; ++t) {
            if (a[t] != a[t]) any_nan = 1;
            else if (a[t] > mx) mx = a[t];
        }
        if (any_nan) mx = NAN;
        double s = 0;
        if (post == OLC_TE_SOFTMAX) {
            for (int64_t t = 0; t < T; ++t) s += (a[t] = exp(a[t] - mx));
            for (int64_t t = 0; t < T; ++t) a[t] /= s;
        } else {
            /* Scores near zero stay near zero; all zero gives 0.5. */
            double scale = exp(-mx);
            for (int64_t t = 0; t < T; ++t) {
                a[t] = (a[t] > 1e-7 || a[t] < -1e-7) ? exp(a[t] - mx) : a[t] * scale;
                s += a[t];
            }
            for (int64_t t = 0; t < T; ++t) a[t] = s == 0 ? 0.5 : a[t] / s;
        }
        break;
    }
    default:
        break;
    }
}

/* ---- one block of rows ---- */

/* Rows [row0, row0 + rows) of x [N, F] into y [N, T].  Returns 0, or -1
 * when scratch memory could not be allocated. */
static int olc_te_block(const olc_te_forest *f, int dtype, const void *x, int64_t row0,
                        int64_t rows, int64_t F, void *y) {
    const int64_t T = f->n_targets;
    double *acc = (double *)malloc(sizeof(double) * (size_t)(rows * T));
    int32_t *ends = (int32_t *)malloc(sizeof(int32_t) * (size_t)rows);
    float *xf = NULL;
    const void *xb;
    if (!acc || !ends) goto fail;
    if (dtype == OLC_FLOAT16) {
        xf = (float *)malloc(sizeof(float) * (size_t)(rows * F + 1));
        if (!xf) goto fail;
        const uint16_t *xh = (const uint16_t *)x + row0 * F;
        for (int64_t i = 0; i < rows * F; ++i) xf[i] = olc_h2f(xh[i]);
        xb = xf;
    } else if (dtype == OLC_FLOAT) {
        xb = (const float *)x + row0 * F;
    } else {
        xb = (const double *)x + row0 * F;
    }

    double init = 0.0;
    double big = dtype == OLC_FLOAT ? (double)FLT_MAX : dtype == OLC_FLOAT16 ? 65504.0 : DBL_MAX;
    if (f->aggregate == OLC_TE_MIN) init = big;
    else if (f->aggregate == OLC_TE_MAX) init = -big;
    for (int64_t i = 0; i < rows * T; ++i) acc[i] = init;

    for (int64_t t = 0; t < f->n_trees; ++t) {
        int32_t root = f->roots[t];
        if (f->leaf[root] >= 0) {  /* a one-leaf tree reads no feature */
            for (int64_t r = 0; r < rows; ++r) ends[r] = root;
        } else {
            olc_te_walk(f, dtype == OLC_DOUBLE, root, f->depths[t], xb, F, rows, ends);
        }
        olc_te_aggregate(f, dtype, ends, rows, acc);
    }

    for (int64_t r = 0; r < rows; ++r) {
        double *a = acc + r * T;
        olc_te_post(f->post_transform, a, T);
        int64_t o = (row0 + r) * T;
        if (dtype == OLC_FLOAT) {
            for (int64_t t = 0; t < T; ++t) ((float *)y)[o + t] = (float)a[t];
        } else if (dtype == OLC_FLOAT16) {
            for (int64_t t = 0; t < T; ++t) ((uint16_t *)y)[o + t] = olc_te_d2h(a[t]);
        } else {
            for (int64_t t = 0; t < T; ++t) ((double *)y)[o + t] = a[t];
        }
    }
    free(acc);
    free(ends);
    free(xf);
    return 0;
fail:
    free(acc);
    free(ends);
    free(xf);
    return -1;
}

#endif /* OLC_TREE_ENSEMBLE_H */
