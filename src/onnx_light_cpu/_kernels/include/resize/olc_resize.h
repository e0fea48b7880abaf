/* Resize, linear and cubic modes (any number of taps: antialias too): one
 * axis at a time.
 *
 * An axis pass sees the input as [outer, in_len, inner] and writes
 * [outer, out_len, inner]: output line (o, y) is the weighted sum of the
 * taps input lines (o, idx[y, t]) with weights w[y, t], summed in tap order
 * (the first product, then each next one added), or the extrapolation
 * value where extrap[y] is set (tf_crop_and_resize).  The adapter computes
 * idx (clamped into the axis) and w once per shape.  Lines are independent
 * and each sums in a fixed order, so the result never depends on the
 * thread count.  The bodies (olc_resize_body.h) are plain loops compiled
 * once per level: the target attribute lets the compiler vectorize the
 * inner loop of a pass whose lines are rows (inner > 1); the scalar level
 * is their twin.
 */
#ifndef OLC_RESIZE_H
#define OLC_RESIZE_H

#include <stdint.h>
#include "common/olc_level.h"
#include "common/olc_cpu.h"

typedef struct {
    const void *in;
    void *out;
    int64_t in_len, out_len, inner, taps;
    const int64_t *idx;     /* out_len * taps, coordinates along the axis */
    const void *w;          /* out_len * taps, float or double like the data */
    const uint8_t *extrap;  /* out_len flags, or NULL */
    double ext;             /* the extrapolation value */
} olc_resize_axis;

#define OLC_RT float
#define OLC_RN f32
#define OLC_BODY "resize/olc_resize_body.h"
#include "common/olc_each_level.h"
#undef OLC_RT
#undef OLC_RN
#define OLC_RT double
#define OLC_RN f64
#define OLC_BODY "resize/olc_resize_body.h"
#include "common/olc_each_level.h"
#undef OLC_RT
#undef OLC_RN

typedef void (*olc_resize_fn)(const olc_resize_axis *a, int64_t i0, int64_t i1);

/* The pass of element type `dbl` (0 float32, 1 float64) at `level`
 * (capped to what this build compiled). */
static olc_resize_fn olc_resize_select(int level, int dbl) {
    level = olc_build_level(level);
    return dbl ? OLC_LEVEL_FN(level, olc_resize_f64) : OLC_LEVEL_FN(level, olc_resize_f32);
}

#endif
