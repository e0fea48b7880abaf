/* The pooling body (olc_pooling_body.h) once per element type at one
 * level: float32 and float64 get every function, int8 and uint8 the max
 * pools; then the level's table of them, olc_pooling_fns_<level>.
 * Included by olc_pooling.h through common/olc_each_level.h; no include
 * guard. */

#define OLC_POOLING_TN f32
#define OLC_POOLING_FLOAT 1
#define OLC_POOLING_F32 1
#include "pooling/olc_pooling_body.h"
#undef OLC_POOLING_TN
#undef OLC_POOLING_F32
#define OLC_POOLING_F32 0
#define OLC_POOLING_TN f64
#include "pooling/olc_pooling_body.h"
#undef OLC_POOLING_TN
#undef OLC_POOLING_FLOAT
#define OLC_POOLING_FLOAT 0
#define OLC_POOLING_TN i8
#include "pooling/olc_pooling_body.h"
#undef OLC_POOLING_TN
#define OLC_POOLING_TN u8
#include "pooling/olc_pooling_body.h"
#undef OLC_POOLING_TN
#undef OLC_POOLING_FLOAT
#undef OLC_POOLING_F32

/* [what][type] as olc_pooling_select reads it: what 0 spatial max, 1 with
 * indices, 2 average/Lp, 3 global, 4 LRN, 5 MaxRoiPool; types float,
 * double, int8, uint8 (NULL: none). */
static const olc_pooling_fn OLC_FN(olc_pooling_fns)[6][4] = {
    {OLC_FN(olc_pooling_max_f32), OLC_FN(olc_pooling_max_f64), OLC_FN(olc_pooling_max_i8),
     OLC_FN(olc_pooling_max_u8)},
    {OLC_FN(olc_pooling_maxidx_f32), OLC_FN(olc_pooling_maxidx_f64), OLC_FN(olc_pooling_maxidx_i8),
     OLC_FN(olc_pooling_maxidx_u8)},
    {OLC_FN(olc_pooling_sum_f32), OLC_FN(olc_pooling_sum_f64), NULL, NULL},
    {OLC_FN(olc_pooling_global_f32), OLC_FN(olc_pooling_global_f64), NULL, NULL},
    {OLC_FN(olc_pooling_lrn_f32), OLC_FN(olc_pooling_lrn_f64), NULL, NULL},
    {OLC_FN(olc_pooling_roi_f32), OLC_FN(olc_pooling_roi_f64), NULL, NULL}};
