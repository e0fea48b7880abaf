/* The pooling body (olc_pooling_body.h) once per element type at one
 * level: float32 and float64 get every function, int8 and uint8 the max
 * pools.  Included by olc_pooling.h through common/olc_each_level.h; no
 * include guard. */

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
