/* Include the body file OLC_BODY once per level this build compiles:
 * scalar, AVX2 and AVX-512, with OLC_LVL and OLC_LVL_ATTR set for each
 * (see common/olc_level.h); setup.py reads the OLC_BODY names as the
 * header's dependencies.  OLC_BODY_SCALAR, when defined, is the body
 * of the scalar level instead (a twin written out without vectors).
 *
 *     #define OLC_BODY "<family>/olc_<family>_vec.h"
 *     #define OLC_BODY_SCALAR "<family>/olc_<family>_scalar.h"
 *     #include "common/olc_each_level.h"
 *
 * No include guard: it is meant to be included once per body. */
#include "common/olc_level.h"

#ifndef OLC_BODY_SCALAR
#define OLC_BODY_SCALAR OLC_BODY
#endif

#define OLC_LVL scalar
#define OLC_LVL_ATTR
#include OLC_BODY_SCALAR
#undef OLC_LVL
#undef OLC_LVL_ATTR

#if OLC_X86
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#include OLC_BODY
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#include OLC_BODY
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

#undef OLC_BODY
#undef OLC_BODY_SCALAR
