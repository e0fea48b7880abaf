/* Element-wise unary kernels and their dispatch.
 *
 * olc_unary_select(op, dtype, level) returns the function for one operator,
 * element type and instruction-set level, or NULL when the pair is not
 * supported; olc_unary_level() says which level that function really uses
 * (types without a vector path always run the portable loop).
 */
#ifndef OLC_UNARY_H
#define OLC_UNARY_H

#include <stdint.h>
#include <stddef.h>
#include "common/olc_cpu.h"
#include "common/olc_types.h"
#include "common/olc_math.h"

enum { OLC_OP_ABS = 0, OLC_OP_EXP, OLC_OP_LOG, OLC_OP_SIGMOID, OLC_OP_TANH, OLC_OP_NOT };


typedef void (*olc_unary_fn)(const void *x, void *y, int64_t n);

/* Abs of a float type clears the sign bit (NaN payloads survive);
 * Abs of a signed integer wraps at the minimum as NumPy does; Not flips
 * the 0/1 byte of a bool.  These loops are written once and compiled per
 * level so the compiler vectorises each with that level's registers. */
#define OLC_BIT_LOOPS(suffix, attr)                                                   \
    attr static void olc_abs_bits16_##suffix(const void *px, void *py, int64_t n) {   \
        const uint16_t *x = (const uint16_t *)px; uint16_t *y = (uint16_t *)py;      \
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] & 0x7fffu;                       \
    }                                                                                 \
    attr static void olc_abs_bits32_##suffix(const void *px, void *py, int64_t n) {   \
        const uint32_t *x = (const uint32_t *)px; uint32_t *y = (uint32_t *)py;      \
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] & 0x7fffffffu;                   \
    }                                                                                 \
    attr static void olc_abs_bits64_##suffix(const void *px, void *py, int64_t n) {   \
        const uint64_t *x = (const uint64_t *)px; uint64_t *y = (uint64_t *)py;      \
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] & 0x7fffffffffffffffull;         \
    }                                                                                 \
    attr static void olc_not_bool_##suffix(const void *px, void *py, int64_t n) {     \
        const uint8_t *x = (const uint8_t *)px; uint8_t *y = (uint8_t *)py;          \
        for (int64_t i = 0; i < n; ++i) y[i] = (uint8_t)(x[i] == 0);                 \
    }

OLC_BIT_LOOPS(scalar, )
#if OLC_X86
OLC_BIT_LOOPS(avx2, OLC_TARGET_AVX2)
#if OLC_HAVE_AVX512
OLC_BIT_LOOPS(avx512, OLC_TARGET_AVX512)
#endif
#endif

#define OLC_ABS_SIGNED(T, U, name)                                          \
    static void olc_abs_##name(const void *px, void *py, int64_t n) {      \
        const T *x = (const T *)px; T *y = (T *)py;                         \
        for (int64_t i = 0; i < n; ++i)                                     \
            y[i] = x[i] < 0 ? (T)(U)(0u - (U)x[i]) : x[i];                  \
    }
OLC_ABS_SIGNED(int8_t, uint8_t, i8)
OLC_ABS_SIGNED(int16_t, uint16_t, i16)
OLC_ABS_SIGNED(int32_t, uint32_t, i32)
OLC_ABS_SIGNED(int64_t, uint64_t, i64)

/* Abs of an unsigned integer is a copy. */
static void olc_copy_bytes(const void *x, void *y, int64_t nbytes) {
    memcpy(y, x, (size_t)nbytes);
}
#define OLC_COPY(T, name)                                                    \
    static void olc_copy_##name(const void *x, void *y, int64_t n) {       \
        olc_copy_bytes(x, y, n * (int64_t)sizeof(T));                        \
    }
OLC_COPY(uint8_t, u8)
OLC_COPY(uint16_t, u16)
OLC_COPY(uint32_t, u32)
OLC_COPY(uint64_t, u64)

/* The transcendental kernels take typed pointers; the table stores them
 * behind the common signature. */
#define OLC_AS_UNARY(fn) ((olc_unary_fn)(void (*)(void))(fn))

#define OLC_PICK_LEVEL(level, prefix)                                                   \
    ((level) >= OLC_AVX512 ? OLC_AS_UNARY(prefix##avx512)                              \
     : (level) == OLC_AVX2 ? OLC_AS_UNARY(prefix##avx2) : OLC_AS_UNARY(prefix##scalar))

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_PICK(level, prefix) OLC_PICK_LEVEL(level, prefix)
#elif OLC_X86
#define OLC_PICK(level, prefix) \
    ((level) >= OLC_AVX2 ? OLC_AS_UNARY(prefix##avx2) : OLC_AS_UNARY(prefix##scalar))
#else
#define OLC_PICK(level, prefix) OLC_AS_UNARY(prefix##scalar)
#endif

/* The level a (op, dtype) pair really runs at: only the float types and
 * the bit loops have per-level code. */
static int olc_unary_level(int op, int dtype, int level) {
    int vectorised =
        (op == OLC_OP_NOT && dtype == OLC_BOOL) ||
        (dtype == OLC_FLOAT || dtype == OLC_FLOAT16 || dtype == OLC_BFLOAT16) ||
        (op == OLC_OP_ABS && dtype == OLC_DOUBLE);
    return vectorised ? olc_build_level(level) : OLC_SCALAR;
}

#define OLC_MATH_CASES(opcode, name)                                        \
    case opcode:                                                             \
        switch (dtype) {                                                     \
        case OLC_FLOAT: return OLC_PICK(level, olc_##name##_f32_);           \
        case OLC_FLOAT16: return OLC_PICK(level, olc_##name##_f16_);         \
        case OLC_BFLOAT16: return OLC_PICK(level, olc_##name##_bf16_);       \
        case OLC_DOUBLE: return OLC_AS_UNARY(olc_##name##_f64_scalar);       \
        default: return NULL;                                                \
        }

static olc_unary_fn olc_unary_select(int op, int dtype, int level) {
    level = olc_unary_level(op, dtype, level);
    switch (op) {
    case OLC_OP_ABS:
        switch (dtype) {
        case OLC_FLOAT: return OLC_PICK(level, olc_abs_bits32_);
        case OLC_DOUBLE: return OLC_PICK(level, olc_abs_bits64_);
        case OLC_FLOAT16:
        case OLC_BFLOAT16: return OLC_PICK(level, olc_abs_bits16_);
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
    OLC_MATH_CASES(OLC_OP_EXP, exp)
    OLC_MATH_CASES(OLC_OP_LOG, log)
    OLC_MATH_CASES(OLC_OP_SIGMOID, sigmoid)
    OLC_MATH_CASES(OLC_OP_TANH, tanh)
    case OLC_OP_NOT:
        return dtype == OLC_BOOL ? OLC_PICK(level, olc_not_bool_) : NULL;
    default:
        return NULL;
    }
}

#endif
