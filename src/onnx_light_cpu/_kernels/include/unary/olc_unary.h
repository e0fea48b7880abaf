/* Element-wise unary kernels and their dispatch.
 *
 * olc_unary_select(op, dtype, level) returns the function for one operator,
 * element type and instruction-set level, or NULL when the pair is not
 * supported; olc_unary_level() says which level that function really uses
 * (types without a vector path always run the portable loop).
 *
 * The functions: the bit loops (Abs of a float type, Not) of
 * unary/olc_unary_bits.h, compiled per level; exp, log, sigmoid and tanh
 * from common/olc_math.h; Abs of an integer type, portable, below.
 */
#ifndef OLC_UNARY_H
#define OLC_UNARY_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_math.h"

enum { OLC_OP_ABS = 0, OLC_OP_EXP, OLC_OP_LOG, OLC_OP_SIGMOID, OLC_OP_TANH, OLC_OP_NOT };

typedef void (*olc_unary_fn)(const void *x, void *y, int64_t n);
#define OLC_BODY "unary/olc_unary_bits.h"
#include "common/olc_each_level.h"

/* Abs of a signed integer wraps at the minimum as NumPy does. */
static void olc_abs_i8(const void *px, void *py, int64_t n) {
    const int8_t *x = (const int8_t *)px;
    int8_t *y = (int8_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int8_t)(uint8_t)(0u - (uint8_t)x[i]) : x[i];
}
static void olc_abs_i16(const void *px, void *py, int64_t n) {
    const int16_t *x = (const int16_t *)px;
    int16_t *y = (int16_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int16_t)(uint16_t)(0u - (uint16_t)x[i]) : x[i];
}
static void olc_abs_i32(const void *px, void *py, int64_t n) {
    const int32_t *x = (const int32_t *)px;
    int32_t *y = (int32_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int32_t)(uint32_t)(0u - (uint32_t)x[i]) : x[i];
}
static void olc_abs_i64(const void *px, void *py, int64_t n) {
    const int64_t *x = (const int64_t *)px;
    int64_t *y = (int64_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0 ? (int64_t)(uint64_t)(0u - (uint64_t)x[i]) : x[i];
}

/* Abs of an unsigned integer is a copy. */
static void olc_copy_u8(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n); }
static void olc_copy_u16(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 2); }
static void olc_copy_u32(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
static void olc_copy_u64(const void *x, void *y, int64_t n) { memcpy(y, x, (size_t)n * 8); }

/* The math loops take typed pointers; the dispatch returns them behind the
 * common signature. */
#define OLC_AS_UNARY(fn) ((olc_unary_fn)(void (*)(void))(fn))

/* The level a (op, dtype) pair really runs at: only the float types and
 * the bit loops have per-level code. */
static int olc_unary_level(int op, int dtype, int level) {
    int vectorised =
        (op == OLC_OP_NOT && dtype == OLC_BOOL) ||
        (dtype == OLC_FLOAT || dtype == OLC_FLOAT16 || dtype == OLC_BFLOAT16) ||
        (op == OLC_OP_ABS && dtype == OLC_DOUBLE);
    return vectorised ? olc_build_level(level) : OLC_SCALAR;
}

static olc_unary_fn olc_unary_abs(int dtype, int level) {
    switch (dtype) {
    case OLC_FLOAT: return OLC_LEVEL_FN(level, olc_abs_bits32);
    case OLC_DOUBLE: return OLC_LEVEL_FN(level, olc_abs_bits64);
    case OLC_FLOAT16:
    case OLC_BFLOAT16: return OLC_LEVEL_FN(level, olc_abs_bits16);
    case OLC_INT8: return olc_abs_i8;
    case OLC_INT16: return olc_abs_i16;
    case OLC_INT32: return olc_abs_i32;
    case OLC_INT64: return olc_abs_i64;
    case OLC_UINT8: return olc_copy_u8;
    case OLC_UINT16: return olc_copy_u16;
    case OLC_UINT32: return olc_copy_u32;
    case OLC_UINT64: return olc_copy_u64;
    default: return NULL;
    }
}

static olc_unary_fn olc_unary_select(int op, int dtype, int level) {
    level = olc_unary_level(op, dtype, level);
    int t = dtype == OLC_FLOAT ? 0 : dtype == OLC_FLOAT16 ? 1 : dtype == OLC_BFLOAT16 ? 2
          : dtype == OLC_DOUBLE ? 3 : -1;
    switch (op) {
    case OLC_OP_ABS:
        return olc_unary_abs(dtype, level);
    case OLC_OP_NOT:
        return dtype == OLC_BOOL ? OLC_LEVEL_FN(level, olc_not_bool) : NULL;
    case OLC_OP_EXP:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_exp_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_exp_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_exp_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_exp_f64_scalar) : NULL;
    case OLC_OP_LOG:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_log_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_log_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_log_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_log_f64_scalar) : NULL;
    case OLC_OP_SIGMOID:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_sigmoid_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_sigmoid_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_sigmoid_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_sigmoid_f64_scalar) : NULL;
    case OLC_OP_TANH:
        return t == 0 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_tanh_f32))
             : t == 1 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_tanh_f16))
             : t == 2 ? OLC_AS_UNARY(OLC_LEVEL_FN(level, olc_tanh_bf16))
             : t == 3 ? OLC_AS_UNARY(olc_tanh_f64_scalar) : NULL;
    default:
        return NULL;
    }
}

#endif
