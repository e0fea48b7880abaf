/* The plain loops of one level (OLC_LVL, OLC_LVL_ATTR): float (a32) and
 * double (a64) arithmetic for every x type, and their olc_norm_fns tables
 * olc_norm_a32_<level> and olc_norm_a64_<level>.  Included once per level
 * by olc_normalization.h; no include guard. */

#define OLC_NORM_A float
#define OLC_NORM_AN a32
#define OLC_NORM_TX f32
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX f16
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX f64
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX bf16
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#undef OLC_NORM_A
#undef OLC_NORM_AN

#define OLC_NORM_A double
#define OLC_NORM_AN a64
#define OLC_NORM_TX f32
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX f16
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX f64
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#define OLC_NORM_TX bf16
#include "normalization/olc_normalization_plain_x.h"
#undef OLC_NORM_TX
#undef OLC_NORM_A
#undef OLC_NORM_AN

static const olc_norm_fns OLC_FN(olc_norm_a32) = {
    {OLC_FN(olc_norm_stats_a32_f32), OLC_FN(olc_norm_stats_a32_f16),
     OLC_FN(olc_norm_stats_a32_f64), OLC_FN(olc_norm_stats_a32_bf16)},
    {OLC_FN(olc_norm_affine_a32_f32), OLC_FN(olc_norm_affine_a32_f16),
     OLC_FN(olc_norm_affine_a32_f64), OLC_FN(olc_norm_affine_a32_bf16)},
    {{OLC_FN(olc_norm_apply_a32_f32_f32), OLC_FN(olc_norm_apply_a32_f32_f16),
      OLC_FN(olc_norm_apply_a32_f32_f64), OLC_FN(olc_norm_apply_a32_f32_bf16)},
     {OLC_FN(olc_norm_apply_a32_f16_f32), OLC_FN(olc_norm_apply_a32_f16_f16),
      OLC_FN(olc_norm_apply_a32_f16_f64), OLC_FN(olc_norm_apply_a32_f16_bf16)},
     {OLC_FN(olc_norm_apply_a32_f64_f32), OLC_FN(olc_norm_apply_a32_f64_f16),
      OLC_FN(olc_norm_apply_a32_f64_f64), OLC_FN(olc_norm_apply_a32_f64_bf16)},
     {OLC_FN(olc_norm_apply_a32_bf16_f32), OLC_FN(olc_norm_apply_a32_bf16_f16),
      OLC_FN(olc_norm_apply_a32_bf16_f64), OLC_FN(olc_norm_apply_a32_bf16_bf16)}},
};

static const olc_norm_fns OLC_FN(olc_norm_a64) = {
    {OLC_FN(olc_norm_stats_a64_f32), OLC_FN(olc_norm_stats_a64_f16),
     OLC_FN(olc_norm_stats_a64_f64), OLC_FN(olc_norm_stats_a64_bf16)},
    {OLC_FN(olc_norm_affine_a64_f32), OLC_FN(olc_norm_affine_a64_f16),
     OLC_FN(olc_norm_affine_a64_f64), OLC_FN(olc_norm_affine_a64_bf16)},
    {{OLC_FN(olc_norm_apply_a64_f32_f32), OLC_FN(olc_norm_apply_a64_f32_f16),
      OLC_FN(olc_norm_apply_a64_f32_f64), OLC_FN(olc_norm_apply_a64_f32_bf16)},
     {OLC_FN(olc_norm_apply_a64_f16_f32), OLC_FN(olc_norm_apply_a64_f16_f16),
      OLC_FN(olc_norm_apply_a64_f16_f64), OLC_FN(olc_norm_apply_a64_f16_bf16)},
     {OLC_FN(olc_norm_apply_a64_f64_f32), OLC_FN(olc_norm_apply_a64_f64_f16),
      OLC_FN(olc_norm_apply_a64_f64_f64), OLC_FN(olc_norm_apply_a64_f64_bf16)},
     {OLC_FN(olc_norm_apply_a64_bf16_f32), OLC_FN(olc_norm_apply_a64_bf16_f16),
      OLC_FN(olc_norm_apply_a64_bf16_f64), OLC_FN(olc_norm_apply_a64_bf16_bf16)}},
};
