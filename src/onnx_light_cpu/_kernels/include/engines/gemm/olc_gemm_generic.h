/* Body (no include guard): the blocked loops of double and the integer
 * types at one level, and their pick by element type.  olc_gemm.h includes
 * it once per level (OLC_LVL, OLC_LVL_ATTR: see common/olc_level.h); it
 * includes the loop once per arithmetic type (OLC_GT, named OLC_GN). */

#define OLC_GT double
#define OLC_GN f64
#include "engines/gemm/olc_gemm_loop.h"
#undef OLC_GT
#undef OLC_GN
#define OLC_GT uint32_t
#define OLC_GN u32
#include "engines/gemm/olc_gemm_loop.h"
#undef OLC_GT
#undef OLC_GN
#define OLC_GT uint64_t
#define OLC_GN u64
#include "engines/gemm/olc_gemm_loop.h"
#undef OLC_GT
#undef OLC_GN

/* The loop of an element type, or NULL for a type it does not handle. */
static olc_gemm_generic_fn OLC_FN(olc_gemm_generic_pick)(int dtype) {
    switch (dtype) {
    case OLC_DOUBLE: return OLC_FN(olc_gemm_f64);
    case OLC_INT32: case OLC_UINT32: return OLC_FN(olc_gemm_u32);
    case OLC_INT64: case OLC_UINT64: return OLC_FN(olc_gemm_u64);
    default: return NULL;
    }
}
