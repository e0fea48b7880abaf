/* Includes olc_skip_norm_vec_rows.h once per element type (OLC_SN_TN)
 * and norm (OLC_SN_NORM ln or rms, OLC_SN_SIMPLE 0 or 1): the rows of a
 * vector level (avx2, avx512).  Included by olc_skip_norm.h; no include
 * guard. */

#define OLC_SN_TN f32
#define OLC_SN_NORM ln
#define OLC_SN_SIMPLE 0
#include "skip_norm/olc_skip_norm_vec_rows.h"
#undef OLC_SN_NORM
#undef OLC_SN_SIMPLE
#define OLC_SN_NORM rms
#define OLC_SN_SIMPLE 1
#include "skip_norm/olc_skip_norm_vec_rows.h"
#undef OLC_SN_NORM
#undef OLC_SN_SIMPLE
#undef OLC_SN_TN
#define OLC_SN_TN f16
#define OLC_SN_NORM ln
#define OLC_SN_SIMPLE 0
#include "skip_norm/olc_skip_norm_vec_rows.h"
#undef OLC_SN_NORM
#undef OLC_SN_SIMPLE
#define OLC_SN_NORM rms
#define OLC_SN_SIMPLE 1
#include "skip_norm/olc_skip_norm_vec_rows.h"
#undef OLC_SN_NORM
#undef OLC_SN_SIMPLE
#undef OLC_SN_TN
#define OLC_SN_TN bf16
#define OLC_SN_NORM ln
#define OLC_SN_SIMPLE 0
#include "skip_norm/olc_skip_norm_vec_rows.h"
#undef OLC_SN_NORM
#undef OLC_SN_SIMPLE
#define OLC_SN_NORM rms
#define OLC_SN_SIMPLE 1
#include "skip_norm/olc_skip_norm_vec_rows.h"
#undef OLC_SN_NORM
#undef OLC_SN_SIMPLE
#undef OLC_SN_TN
