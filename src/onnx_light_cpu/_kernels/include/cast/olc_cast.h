/* Cast: element-type conversions and their dispatch.
 *
 * Every conversion has the signature
 *     void fn(const void *x, void *y, int64_t n, const void *aux)
 * where aux is unused, points at an int of flags (float 8 targets) or at a
 * lookup table (olc_lut*).
 *
 *  - olc_cast_select(src, dst, level): the function converting between two of
 *    the 13 "native" types (bool, the 8 integer widths, float16, bfloat16,
 *    float, double), or NULL.  The loops are written once
 *    (cast/olc_cast_from.h, one source type at a time) and compiled per
 *    level (cast/olc_cast_level.h) so the compiler vectorises them with that
 *    level's registers; float <-> float16 / bfloat16 have explicit vector
 *    loops (common/olc_vec.h's conversions).
 *  - olc_cast_f8_select(src, dst): float, float16, bfloat16 or double to a
 *    float 8 type (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0), the flags carry
 *    `saturate` and E8M0's rounding mode.
 *  - olc_lut_select(in_bytes, out_bytes): y[i] = table[x[i]] for 1- or
 *    2-byte inputs, the adapter fills the table with the reference results.
 *
 * Semantics are NumPy's astype (and ml_dtypes' for bfloat16): float to
 * integer truncates toward zero (out of range is undefined in C and NumPy
 * alike; it never traps), anything to bool is `x != 0`, integers to float16
 * go through float as NumPy does, double to float16 rounds once, double to
 * bfloat16 and to float 8 go through float as ml_dtypes does.
 */
#ifndef OLC_CAST_H
#define OLC_CAST_H

#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"
#include "common/olc_math.h"

typedef void (*olc_cast_fn)(const void *x, void *y, int64_t n, const void *aux);


/* Flags of the float 8 conversions. */
enum { OLC_CAST_SATURATE = 1, OLC_CAST_ROUND_DOWN = 2, OLC_CAST_ROUND_NEAREST = 4 };

/* ---- scalar element conversions ---- */

/* double -> half in one rounding (NumPy's npy_double_to_half); going
 * through float would round twice. */
static inline uint16_t olc_d2h(double d) {
    uint64_t x; memcpy(&x, &d, 8);
    uint16_t sign = (uint16_t)((x >> 48) & 0x8000); x &= 0x7fffffffffffffffull;
    if (x > 0x7ff0000000000000ull) return (uint16_t)(sign | 0x7e00 | ((x >> 42) & 0x3ff));
    if (x >= 0x40effe0000000000ull) return (uint16_t)(sign | 0x7c00);  /* >= 65520: inf */
    if (x < 0x3f10000000000000ull) {  /* below 2^-14: a multiple of 2^-24 */
        double a; memcpy(&a, &x, 8);
        double q = (a * 16777216.0 + 4503599627370496.0) - 4503599627370496.0;
        return (uint16_t)(sign | (uint16_t)q);
    }
    uint64_t r = x + 0x1ffffffffffull + ((x >> 42) & 1);
    return (uint16_t)(sign | ((r >> 42) - (1008u << 10)));
}

/* Each destination type is written from a C arithmetic value (an element
 * of the source read as its natural type, cast/olc_cast_from.h).  float16 from double
 * takes the single-rounding path, the other values go through float.  A
 * float goes to a narrow integer through int32, to uint32 through int64 and
 * to uint64 through int64 below 2^63: what NumPy's compiled casts do on
 * x86-64, so that e.g. -1.5 becomes 255 / 4294967295 as there (the direct
 * C conversion is undefined and vectorises to saturating instructions). */
static inline uint64_t olc_f2u64_(double v) {
    return v < 9223372036854775808.0 ? (uint64_t)(int64_t)v
                                     : (uint64_t)(int64_t)(v - 9223372036854775808.0) ^ (1ull << 63);
}
static inline uint64_t olc_u64_(uint64_t v) { return v; }
#define OLC_ST_bool(v) ((uint8_t)((v) != 0))
#define OLC_ST_u8(v) ((uint8_t)(int32_t)(v))
#define OLC_ST_i8(v) ((int8_t)(int32_t)(v))
#define OLC_ST_u16(v) ((uint16_t)(int32_t)(v))
#define OLC_ST_i16(v) ((int16_t)(int32_t)(v))
#define OLC_ST_u32(v) ((uint32_t)(int64_t)(v))
#define OLC_ST_i32(v) ((int32_t)(v))
#define OLC_ST_u64(v) _Generic((v), float: olc_f2u64_, double: olc_f2u64_, default: olc_u64_)(v)
#define OLC_ST_i64(v) ((int64_t)(v))
#define OLC_ST_f16(v) _Generic((v), double: olc_d2h, default: olc_f2h)(v)
#define OLC_ST_bf16(v) olc_f2bf((float)(v))
#define OLC_ST_f32(v) ((float)(v))
#define OLC_ST_f64(v) ((double)(v))

/* ---- native conversion loops, one per (source, destination, level) ---- */

#define OLC_CASTFN(dst) OLC_FN(OLC_CAT(OLC_CAT(olc_cast, OLC_SN), dst))
#define OLC_BODY "cast/olc_cast_level.h"
#include "common/olc_each_level.h"

/* int64 -> float / double at AVX2, which has no 64-bit integer conversion
 * (AVX-512DQ has, and the compiler uses it in the loops above).  Integers
 * within +-2^51 become doubles exactly by the 1.5 * 2^52 trick, then
 * float rounds once: the scalar (float)x result.  A group of 4 holding a
 * larger magnitude takes the scalar conversion. */
#if OLC_X86
static inline OLC_TARGET_AVX2 int olc_i64_exact4_avx2(const int64_t *x, __m256d *d) {
    __m256i v = _mm256_loadu_si256((const __m256i *)x);
    __m256i in = _mm256_and_si256(_mm256_cmpgt_epi64(_mm256_set1_epi64x(1ll << 51), v),
                                  _mm256_cmpgt_epi64(v, _mm256_set1_epi64x(-(1ll << 51) - 1)));
    if (_mm256_movemask_pd(_mm256_castsi256_pd(in)) != 0xf) return 0;
    __m256i magic = _mm256_set1_epi64x(0x4338000000000000ll);
    *d = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_add_epi64(v, magic)), _mm256_castsi256_pd(magic));
    return 1;
}
static OLC_TARGET_AVX2 void olc_cast_i64_f32_avx2v(const void *px, void *py, int64_t n,
                                                   const void *aux) {
    const int64_t *x = (const int64_t *)px; float *y = (float *)py; (void)aux;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d d;
        if (olc_i64_exact4_avx2(x + i, &d)) _mm_storeu_ps(y + i, _mm256_cvtpd_ps(d));
        else for (int k = 0; k < 4; ++k) y[i + k] = (float)x[i + k];
    }
    for (; i < n; ++i) y[i] = (float)x[i];
}
static OLC_TARGET_AVX2 void olc_cast_i64_f64_avx2v(const void *px, void *py, int64_t n,
                                                   const void *aux) {
    const int64_t *x = (const int64_t *)px; double *y = (double *)py; (void)aux;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m256d d;
        if (olc_i64_exact4_avx2(x + i, &d)) _mm256_storeu_pd(y + i, d);
        else for (int k = 0; k < 4; ++k) y[i + k] = (double)x[i + k];
    }
    for (; i < n; ++i) y[i] = (double)x[i];
}
#endif

/* ---- dispatch of the native pairs ---- */

/* Index of a native element type in the tables, -1 for the others. */
static int olc_cast_index(int t) {
    switch (t) {
    case OLC_BOOL: return 0;
    case OLC_UINT8: return 1;
    case OLC_INT8: return 2;
    case OLC_UINT16: return 3;
    case OLC_INT16: return 4;
    case OLC_UINT32: return 5;
    case OLC_INT32: return 6;
    case OLC_UINT64: return 7;
    case OLC_INT64: return 8;
    case OLC_FLOAT16: return 9;
    case OLC_BFLOAT16: return 10;
    case OLC_FLOAT: return 11;
    case OLC_DOUBLE: return 12;
    default: return -1;
    }
}

/* The level the build and CPU really provide, at most `level`. */
static int olc_cast_level(int level) {
    return level < OLC_SCALAR ? OLC_SCALAR : olc_build_level(level);
}

static olc_cast_fn olc_cast_select(int src, int dst, int level) {
    int i = olc_cast_index(src), j = olc_cast_index(dst);
    if (i < 0 || j < 0) return NULL;
    level = olc_cast_level(level);
    if (src == OLC_FLOAT16 && dst == OLC_FLOAT) return OLC_LEVEL_FN(level, olc_cast_f16_f32v);
    if (src == OLC_FLOAT && dst == OLC_FLOAT16) return OLC_LEVEL_FN(level, olc_cast_f32_f16v);
    if (src == OLC_BFLOAT16 && dst == OLC_FLOAT) return OLC_LEVEL_FN(level, olc_cast_bf16_f32v);
    if (src == OLC_FLOAT && dst == OLC_BFLOAT16) return OLC_LEVEL_FN(level, olc_cast_f32_bf16v);
#if OLC_X86
    if (level == OLC_AVX2 && src == OLC_INT64 && dst == OLC_FLOAT) return olc_cast_i64_f32_avx2v;
    if (level == OLC_AVX2 && src == OLC_INT64 && dst == OLC_DOUBLE) return olc_cast_i64_f64_avx2v;
#endif
    return OLC_LEVEL_FN(level, olc_cast_table)[i][j];
}

/* ---- float 8 targets ---- */

enum { OLC_F8_FN = 0, OLC_F8_IEEE = 1, OLC_F8_FNUZ = 2 };

/* A real value -> a float 8 format with M mantissa bits and exponent bias
 * B, round to nearest even.  The value comes as a double, so a double input
 * is rounded once (through float it would round twice: 464*(1+2^-35) gives
 * 0x7e instead of 0x7f in E4M3FN); float, float16 and bfloat16 widen to
 * double exactly.  `maxcode` is the largest finite magnitude code; kind FN
 * has no infinity (0x7f is NaN), IEEE has them (E5M2), FNUZ has a single
 * NaN 0x80 and no negative zero.  Saturation clamps overflow (infinities
 * included) to the largest finite value. */
static inline uint8_t olc_f2f8(double f, const int M, const int B, const uint32_t maxcode,
                               const int kind, const int saturate) {
    uint64_t u, a;
    memcpy(&u, &f, 8);
    a = u & 0x7fffffffffffffffull;
    uint32_t sign = (uint32_t)(u >> 56) & 0x80u, code;
    if (a > 0x7ff0000000000000ull)
        return (uint8_t)(kind == OLC_F8_FNUZ ? 0x80u : sign | (kind == OLC_F8_FN ? 0x7fu : 0x7eu));
    if (a == 0x7ff0000000000000ull) {
        code = 0xffffu;
    } else if ((int)(a >> 52) - 1023 < 1 - B) {
        /* Below the smallest normal: a multiple of 2^(1-B-M); the scaling
         * is exact and adding 2^52 rounds the integer to nearest even. */
        double q = fabs(f) * (double)(1u << (M + B - 1));
        code = (uint32_t)((q + 4503599627370496.0) - 4503599627370496.0);
    } else {
        const uint64_t shift = 52 - M;
        uint64_t r = a + ((1ull << (shift - 1)) - 1) + ((a >> shift) & 1);
        /* at most 2^(11+M): fits */
        code = (uint32_t)((r >> shift) - ((uint64_t)(1023 - B) << M));
    }
    if (code > maxcode) {
        if (saturate) code = maxcode;
        else if (kind == OLC_F8_FNUZ) return 0x80u;
        else return (uint8_t)(sign | (kind == OLC_F8_FN ? 0x7fu : 0x7cu));
    }
    if (kind == OLC_F8_FNUZ && code == 0) return 0;
    return (uint8_t)(sign | code);
}

/* float -> E8M0 (a power of two, no sign), as onnx.numpy_helper.to_float8e8m0:
 * "up" rounds any fraction up, "down" truncates, "nearest" rounds up from
 * half (ties up, except below 2^-126 where an exact half rounds down). */
static inline uint8_t olc_f2e8m0(float f, int flags) {
    uint32_t u = olc_fbits_(f), e = (u >> 23) & 0xffu, up;
    if (e == 0xffu) return 0xff;
    if (flags & OLC_CAST_ROUND_DOWN) up = 0;
    else if (flags & OLC_CAST_ROUND_NEAREST)
        up = (u & 0x400000u) && ((u & 0x3fffffu) || e > 0);
    else up = (u & 0x7fffffu) != 0;
    if ((flags & OLC_CAST_SATURATE) && e == 0xfeu) up = 0;
    return (uint8_t)(e + up);
}

#define OLC_CASTFN8(dst) OLC_CAT(OLC_CAT(olc_cast, OLC_SN), dst)

#define OLC_S float
#define OLC_SN f32
#define OLC_LD(v) (v)
#include "cast/olc_cast_float8.h"
#define OLC_S uint16_t
#define OLC_SN f16
#define OLC_LD(v) olc_h2f(v)
#include "cast/olc_cast_float8.h"
#define OLC_S uint16_t
#define OLC_SN bf16
#define OLC_LD(v) olc_bf2f(v)
#include "cast/olc_cast_float8.h"
#define OLC_S double
#define OLC_SN f64
#define OLC_LD(v) (v)
#include "cast/olc_cast_float8.h"

static olc_cast_fn olc_cast_f8_select(int src, int dst) {
    static const olc_cast_fn table[4][5] = {
        {olc_cast_f32_e4m3fn, olc_cast_f32_e4m3fnuz, olc_cast_f32_e5m2, olc_cast_f32_e5m2fnuz,
         olc_cast_f32_e8m0},
        {olc_cast_f16_e4m3fn, olc_cast_f16_e4m3fnuz, olc_cast_f16_e5m2, olc_cast_f16_e5m2fnuz,
         olc_cast_f16_e8m0},
        {olc_cast_bf16_e4m3fn, olc_cast_bf16_e4m3fnuz, olc_cast_bf16_e5m2, olc_cast_bf16_e5m2fnuz,
         olc_cast_bf16_e8m0},
        {olc_cast_f64_e4m3fn, olc_cast_f64_e4m3fnuz, olc_cast_f64_e5m2, olc_cast_f64_e5m2fnuz,
         olc_cast_f64_e8m0},
    };
    int i = src == OLC_FLOAT ? 0 : src == OLC_FLOAT16 ? 1 : src == OLC_BFLOAT16 ? 2
          : src == OLC_DOUBLE ? 3 : -1;
    int j = dst == OLC_FLOAT8E4M3FN ? 0 : dst == OLC_FLOAT8E4M3FNUZ ? 1 : dst == OLC_FLOAT8E5M2 ? 2
          : dst == OLC_FLOAT8E5M2FNUZ ? 3 : dst == OLC_FLOAT8E8M0 ? 4 : -1;
    return i < 0 || j < 0 ? NULL : table[i][j];
}

/* ---- table lookups: 1- or 2-byte inputs, 1 to 8-byte outputs ---- */

static void olc_lut_1_1(const void *px, void *py, int64_t n, const void *table) {
    const uint8_t *x = (const uint8_t *)px, *t = (const uint8_t *)table;
    uint8_t *y = (uint8_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
static void olc_lut_1_2(const void *px, void *py, int64_t n, const void *table) {
    const uint8_t *x = (const uint8_t *)px;
    const uint16_t *t = (const uint16_t *)table;
    uint16_t *y = (uint16_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
static void olc_lut_1_4(const void *px, void *py, int64_t n, const void *table) {
    const uint8_t *x = (const uint8_t *)px;
    const uint32_t *t = (const uint32_t *)table;
    uint32_t *y = (uint32_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
static void olc_lut_1_8(const void *px, void *py, int64_t n, const void *table) {
    const uint8_t *x = (const uint8_t *)px;
    const uint64_t *t = (const uint64_t *)table;
    uint64_t *y = (uint64_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
static void olc_lut_2_1(const void *px, void *py, int64_t n, const void *table) {
    const uint16_t *x = (const uint16_t *)px;
    const uint8_t *t = (const uint8_t *)table;
    uint8_t *y = (uint8_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
static void olc_lut_2_2(const void *px, void *py, int64_t n, const void *table) {
    const uint16_t *x = (const uint16_t *)px, *t = (const uint16_t *)table;
    uint16_t *y = (uint16_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
static void olc_lut_2_4(const void *px, void *py, int64_t n, const void *table) {
    const uint16_t *x = (const uint16_t *)px;
    const uint32_t *t = (const uint32_t *)table;
    uint32_t *y = (uint32_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}
static void olc_lut_2_8(const void *px, void *py, int64_t n, const void *table) {
    const uint16_t *x = (const uint16_t *)px;
    const uint64_t *t = (const uint64_t *)table;
    uint64_t *y = (uint64_t *)py;
    for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];
}

static olc_cast_fn olc_lut_select(int in_bytes, int out_bytes) {
    static const olc_cast_fn table[2][4] = {
        {olc_lut_1_1, olc_lut_1_2, olc_lut_1_4, olc_lut_1_8},
        {olc_lut_2_1, olc_lut_2_2, olc_lut_2_4, olc_lut_2_8},
    };
    int j = out_bytes == 1 ? 0 : out_bytes == 2 ? 1 : out_bytes == 4 ? 2 : out_bytes == 8 ? 3 : -1;
    return (in_bytes == 1 || in_bytes == 2) && j >= 0 ? table[in_bytes - 1][j] : NULL;
}

#endif
