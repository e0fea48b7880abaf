/* Code written once and compiled once per instruction-set level.
 *
 * A body file holds ordinary C functions (no line continuations) whose
 * names go through OLC_FN; the family header includes it once per level:
 *
 *     #define OLC_LVL avx2                  scalar, avx2, avx512 or avx512vnni
 *     #define OLC_LVL_ATTR OLC_TARGET_AVX2  the target attribute (empty for scalar)
 *     #include "<family>/olc_<family>_<part>.h"
 *     #undef OLC_LVL
 *     #undef OLC_LVL_ATTR
 *
 * and the body's `OLC_LVL_ATTR static void OLC_FN(olc_attn_task)(...)`
 * becomes olc_attn_task_avx2.  A body calls the helpers of its level the
 * same way: OLC_FN(olc_attn_dot)(...).  Body files have no include guard
 * (they are meant to be included several times) and are named
 * olc_<family>_<part>.h beside the family's header.
 */
#ifndef OLC_LEVEL_H
#define OLC_LEVEL_H
#include "common/olc_cpu.h"

#define OLC_CAT_(a, b) a##_##b
#define OLC_CAT(a, b) OLC_CAT_(a, b)
#define OLC_FN(name) OLC_CAT(name, OLC_LVL)

/* The function name_scalar, name_avx2 or name_avx512 for a level already
 * capped with olc_build_level (only the levels this build compiled). */
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LEVEL_FN(level, name) \
    ((level) >= OLC_AVX512 ? name##_avx512 : (level) >= OLC_AVX2 ? name##_avx2 : name##_scalar)
#elif OLC_X86
#define OLC_LEVEL_FN(level, name) ((level) >= OLC_AVX2 ? name##_avx2 : name##_scalar)
#else
#define OLC_LEVEL_FN(level, name) ((void)(level), name##_scalar)
#endif

#endif
