/* Cast: element-type conversions and their dispatch.
 *
 * Every conversion has the signature
 *     void fn(const void *x, void *y, int64_t n, const void *aux)
 * where aux is unused, points at an int of flags (float 8 targets) or at a
 * lookup table (olc_lut*).
 *
 *  - olc_cast_select(src, dst, level): the function converting between two of
 *    the 13 "native" types (bool, the 8 integer widths, float16, bfloat16,
 *    float, double), or NULL.  The loops are written once and compiled per
 *    level so the compiler vectorises them with that level's registers;
 *    float <-> float16 / bfloat16 have explicit F16C / shift loops.
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
#include "common/olc_types.h"
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

/* Each source type is read as a C arithmetic value ("natural" type)... */
#define OLC_LD_bool(v) (v)
#define OLC_LD_u8(v) (v)
#define OLC_LD_i8(v) (v)
#define OLC_LD_u16(v) (v)
#define OLC_LD_i16(v) (v)
#define OLC_LD_u32(v) (v)
#define OLC_LD_i32(v) (v)
#define OLC_LD_u64(v) (v)
#define OLC_LD_i64(v) (v)
#define OLC_LD_f16(v) olc_h2f(v)
#define OLC_LD_bf16(v) olc_bf2f(v)
#define OLC_LD_f32(v) (v)
#define OLC_LD_f64(v) (v)
/* ...and each destination type is written from one.  float16 from double
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

#define OLC_CAST_LOOP(s, S, d, D, suffix, attr)                                              \
    attr static void olc_cast_##s##_##d##_##suffix(const void *px, void *py, int64_t n,     \
                                                   const void *aux) {                        \
        const S *x = (const S *)px; D *y = (D *)py; (void)aux;                               \
        for (int64_t i = 0; i < n; ++i) y[i] = OLC_ST_##d(OLC_LD_##s(x[i]));                  \
    }

#define OLC_CAST_FROM(s, S, suffix, attr)                                                    \
    OLC_CAST_LOOP(s, S, bool, uint8_t, suffix, attr) OLC_CAST_LOOP(s, S, u8, uint8_t, suffix, attr) \
    OLC_CAST_LOOP(s, S, i8, int8_t, suffix, attr) OLC_CAST_LOOP(s, S, u16, uint16_t, suffix, attr) \
    OLC_CAST_LOOP(s, S, i16, int16_t, suffix, attr) OLC_CAST_LOOP(s, S, u32, uint32_t, suffix, attr) \
    OLC_CAST_LOOP(s, S, i32, int32_t, suffix, attr) OLC_CAST_LOOP(s, S, u64, uint64_t, suffix, attr) \
    OLC_CAST_LOOP(s, S, i64, int64_t, suffix, attr) OLC_CAST_LOOP(s, S, f16, uint16_t, suffix, attr) \
    OLC_CAST_LOOP(s, S, bf16, uint16_t, suffix, attr) OLC_CAST_LOOP(s, S, f32, float, suffix, attr) \
    OLC_CAST_LOOP(s, S, f64, double, suffix, attr)

#define OLC_CAST_ALL(suffix, attr)                                                           \
    OLC_CAST_FROM(bool, uint8_t, suffix, attr) OLC_CAST_FROM(u8, uint8_t, suffix, attr)      \
    OLC_CAST_FROM(i8, int8_t, suffix, attr) OLC_CAST_FROM(u16, uint16_t, suffix, attr)       \
    OLC_CAST_FROM(i16, int16_t, suffix, attr) OLC_CAST_FROM(u32, uint32_t, suffix, attr)     \
    OLC_CAST_FROM(i32, int32_t, suffix, attr) OLC_CAST_FROM(u64, uint64_t, suffix, attr)     \
    OLC_CAST_FROM(i64, int64_t, suffix, attr) OLC_CAST_FROM(f16, uint16_t, suffix, attr)     \
    OLC_CAST_FROM(bf16, uint16_t, suffix, attr) OLC_CAST_FROM(f32, float, suffix, attr)      \
    OLC_CAST_FROM(f64, double, suffix, attr)

OLC_CAST_ALL(scalar, )
#if OLC_X86
OLC_CAST_ALL(avx2, OLC_TARGET_AVX2)
#if OLC_HAVE_AVX512
OLC_CAST_ALL(avx512, OLC_TARGET_AVX512)
#endif
#endif

/* float <-> float16 / bfloat16: the hot pairs, with explicit vector loops
 * (the scalar converters above have branches the compiler cannot
 * vectorise).  Tails go through the same vector code, so every element
 * gets the same instructions whatever its position or the thread split. */
#if OLC_X86
#define OLC_WIDEN_AVX2(tname)                                                                \
    static OLC_TARGET_AVX2 void olc_cast_##tname##_f32_avx2v(const void *px, void *py,      \
                                                             int64_t n, const void *aux) {   \
        const uint16_t *x = (const uint16_t *)px; float *y = (float *)py; (void)aux;          \
        int64_t i = 0;                                                                        \
        for (; i + 8 <= n; i += 8) olc_st_f32_avx2(y + i, olc_ld_##tname##_avx2(x + i));      \
        if (i < n) {                                                                          \
            uint16_t in[8] = {0}; float out[8];                                               \
            memcpy(in, x + i, (size_t)(n - i) * 2);                                           \
            olc_st_f32_avx2(out, olc_ld_##tname##_avx2(in));                                  \
            memcpy(y + i, out, (size_t)(n - i) * 4);                                          \
        }                                                                                     \
    }                                                                                         \
    static OLC_TARGET_AVX2 void olc_cast_f32_##tname##_avx2v(const void *px, void *py,      \
                                                             int64_t n, const void *aux) {   \
        const float *x = (const float *)px; uint16_t *y = (uint16_t *)py; (void)aux;          \
        int64_t i = 0;                                                                        \
        for (; i + 8 <= n; i += 8) olc_st_##tname##_avx2(y + i, olc_ld_f32_avx2(x + i));      \
        if (i < n) {                                                                          \
            float in[8] = {0}; uint16_t out[8];                                               \
            memcpy(in, x + i, (size_t)(n - i) * 4);                                           \
            olc_st_##tname##_avx2(out, olc_ld_f32_avx2(in));                                  \
            memcpy(y + i, out, (size_t)(n - i) * 2);                                          \
        }                                                                                     \
    }
OLC_WIDEN_AVX2(f16)
OLC_WIDEN_AVX2(bf16)
#endif
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_WIDEN_AVX512(tname)                                                              \
    static OLC_TARGET_AVX512 void olc_cast_##tname##_f32_avx512v(const void *px, void *py,  \
                                                               int64_t n, const void *aux) { \
        const uint16_t *x = (const uint16_t *)px; float *y = (float *)py; (void)aux;          \
        int64_t i = 0;                                                                        \
        for (; i + 32 <= n; i += 32) {                                                        \
            __m512 a = olc_ld_##tname##_avx512(x + i, 0xffff);                                \
            __m512 b = olc_ld_##tname##_avx512(x + i + 16, 0xffff);                           \
            olc_st_f32_avx512(y + i, 0xffff, a);                                              \
            olc_st_f32_avx512(y + i + 16, 0xffff, b);                                         \
        }                                                                                     \
        for (; i < n; i += 16) {                                                              \
            __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);  \
            olc_st_f32_avx512(y + i, m, olc_ld_##tname##_avx512(x + i, m));                   \
        }                                                                                     \
    }                                                                                         \
    static OLC_TARGET_AVX512 void olc_cast_f32_##tname##_avx512v(const void *px, void *py,  \
                                                               int64_t n, const void *aux) { \
        const float *x = (const float *)px; uint16_t *y = (uint16_t *)py; (void)aux;          \
        int64_t i = 0;                                                                        \
        for (; i + 32 <= n; i += 32) {                                                        \
            __m512 a = olc_ld_f32_avx512(x + i, 0xffff);                                      \
            __m512 b = olc_ld_f32_avx512(x + i + 16, 0xffff);                                 \
            olc_st_##tname##_avx512(y + i, 0xffff, a);                                        \
            olc_st_##tname##_avx512(y + i + 16, 0xffff, b);                                   \
        }                                                                                     \
        for (; i < n; i += 16) {                                                              \
            __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);  \
            olc_st_##tname##_avx512(y + i, m, olc_ld_f32_avx512(x + i, m));                   \
        }                                                                                     \
    }
OLC_WIDEN_AVX512(f16)
OLC_WIDEN_AVX512(bf16)
#endif

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

#define OLC_CAST_ROW(s, lvl)                                                                 \
    { olc_cast_##s##_bool_##lvl, olc_cast_##s##_u8_##lvl, olc_cast_##s##_i8_##lvl,           \
      olc_cast_##s##_u16_##lvl, olc_cast_##s##_i16_##lvl, olc_cast_##s##_u32_##lvl,          \
      olc_cast_##s##_i32_##lvl, olc_cast_##s##_u64_##lvl, olc_cast_##s##_i64_##lvl,          \
      olc_cast_##s##_f16_##lvl, olc_cast_##s##_bf16_##lvl, olc_cast_##s##_f32_##lvl,         \
      olc_cast_##s##_f64_##lvl }
#define OLC_CAST_TABLE(lvl)                                                                  \
    { OLC_CAST_ROW(bool, lvl), OLC_CAST_ROW(u8, lvl), OLC_CAST_ROW(i8, lvl),                 \
      OLC_CAST_ROW(u16, lvl), OLC_CAST_ROW(i16, lvl), OLC_CAST_ROW(u32, lvl),                \
      OLC_CAST_ROW(i32, lvl), OLC_CAST_ROW(u64, lvl), OLC_CAST_ROW(i64, lvl),                \
      OLC_CAST_ROW(f16, lvl), OLC_CAST_ROW(bf16, lvl), OLC_CAST_ROW(f32, lvl),               \
      OLC_CAST_ROW(f64, lvl) }

static const olc_cast_fn olc_cast_scalar_table[13][13] = OLC_CAST_TABLE(scalar);
#if OLC_X86
static const olc_cast_fn olc_cast_avx2_table[13][13] = OLC_CAST_TABLE(avx2);
#if OLC_HAVE_AVX512
static const olc_cast_fn olc_cast_avx512_table[13][13] = OLC_CAST_TABLE(avx512);
#endif
#endif

/* The level the build and CPU really provide, at most `level`. */
static int olc_cast_level(int level) {
    return level < OLC_SCALAR ? OLC_SCALAR : olc_build_level(level);
}

static olc_cast_fn olc_cast_select(int src, int dst, int level) {
    int i = olc_cast_index(src), j = olc_cast_index(dst);
    if (i < 0 || j < 0) return NULL;
    level = olc_cast_level(level);
#if OLC_X86
#if OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        if (src == OLC_FLOAT16 && dst == OLC_FLOAT) return olc_cast_f16_f32_avx512v;
        if (src == OLC_FLOAT && dst == OLC_FLOAT16) return olc_cast_f32_f16_avx512v;
        if (src == OLC_BFLOAT16 && dst == OLC_FLOAT) return olc_cast_bf16_f32_avx512v;
        if (src == OLC_FLOAT && dst == OLC_BFLOAT16) return olc_cast_f32_bf16_avx512v;
        return olc_cast_avx512_table[i][j];
    }
#endif
    if (level == OLC_AVX2) {
        if (src == OLC_FLOAT16 && dst == OLC_FLOAT) return olc_cast_f16_f32_avx2v;
        if (src == OLC_FLOAT && dst == OLC_FLOAT16) return olc_cast_f32_f16_avx2v;
        if (src == OLC_BFLOAT16 && dst == OLC_FLOAT) return olc_cast_bf16_f32_avx2v;
        if (src == OLC_FLOAT && dst == OLC_BFLOAT16) return olc_cast_f32_bf16_avx2v;
        if (src == OLC_INT64 && dst == OLC_FLOAT) return olc_cast_i64_f32_avx2v;
        if (src == OLC_INT64 && dst == OLC_DOUBLE) return olc_cast_i64_f64_avx2v;
        return olc_cast_avx2_table[i][j];
    }
#endif
    return olc_cast_scalar_table[i][j];
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

#define OLC_F8_LOOP(s, S, name, M, B, maxcode, kind)                                          \
    static void olc_cast_##s##_##name(const void *px, void *py, int64_t n, const void *aux) { \
        const S *x = (const S *)px; uint8_t *y = (uint8_t *)py;                               \
        if (*(const int *)aux & OLC_CAST_SATURATE)                                            \
            for (int64_t i = 0; i < n; ++i)                                                   \
                y[i] = olc_f2f8((double)OLC_LD_##s(x[i]), M, B, maxcode, kind, 1);             \
        else                                                                                  \
            for (int64_t i = 0; i < n; ++i)                                                   \
                y[i] = olc_f2f8((double)OLC_LD_##s(x[i]), M, B, maxcode, kind, 0);             \
    }
#define OLC_F8_FROM(s, S)                                                                     \
    OLC_F8_LOOP(s, S, e4m3fn, 3, 7, 0x7eu, OLC_F8_FN)                                         \
    OLC_F8_LOOP(s, S, e4m3fnuz, 3, 8, 0x7fu, OLC_F8_FNUZ)                                     \
    OLC_F8_LOOP(s, S, e5m2, 2, 15, 0x7bu, OLC_F8_IEEE)                                        \
    OLC_F8_LOOP(s, S, e5m2fnuz, 2, 16, 0x7fu, OLC_F8_FNUZ)                                    \
    static void olc_cast_##s##_e8m0(const void *px, void *py, int64_t n, const void *aux) {   \
        const S *x = (const S *)px; uint8_t *y = (uint8_t *)py;                               \
        const int flags = *(const int *)aux;                                                  \
        for (int64_t i = 0; i < n; ++i) y[i] = olc_f2e8m0((float)OLC_LD_##s(x[i]), flags);     \
    }
OLC_F8_FROM(f32, float)
OLC_F8_FROM(f16, uint16_t)
OLC_F8_FROM(bf16, uint16_t)
OLC_F8_FROM(f64, double)

#define OLC_F8_CASES(s)                                                                       \
    switch (dst) {                                                                            \
    case OLC_FLOAT8E4M3FN: return olc_cast_##s##_e4m3fn;                                        \
    case OLC_FLOAT8E4M3FNUZ: return olc_cast_##s##_e4m3fnuz;                                    \
    case OLC_FLOAT8E5M2: return olc_cast_##s##_e5m2;                                            \
    case OLC_FLOAT8E5M2FNUZ: return olc_cast_##s##_e5m2fnuz;                                    \
    case OLC_FLOAT8E8M0: return olc_cast_##s##_e8m0;                                            \
    default: return NULL;                                                                     \
    }

static olc_cast_fn olc_cast_f8_select(int src, int dst) {
    switch (src) {
    case OLC_FLOAT: OLC_F8_CASES(f32)
    case OLC_FLOAT16: OLC_F8_CASES(f16)
    case OLC_BFLOAT16: OLC_F8_CASES(bf16)
    case OLC_DOUBLE: OLC_F8_CASES(f64)
    default: return NULL;
    }
}

/* ---- table lookups: 1- or 2-byte inputs, 1 to 8-byte outputs ---- */

#define OLC_LUT_LOOP(IT, ib, OT, ob)                                                          \
    static void olc_lut_##ib##_##ob(const void *px, void *py, int64_t n, const void *table) { \
        const IT *x = (const IT *)px; OT *y = (OT *)py; const OT *t = (const OT *)table;      \
        for (int64_t i = 0; i < n; ++i) y[i] = t[x[i]];                                       \
    }
OLC_LUT_LOOP(uint8_t, 1, uint8_t, 1)
OLC_LUT_LOOP(uint8_t, 1, uint16_t, 2)
OLC_LUT_LOOP(uint8_t, 1, uint32_t, 4)
OLC_LUT_LOOP(uint8_t, 1, uint64_t, 8)
OLC_LUT_LOOP(uint16_t, 2, uint8_t, 1)
OLC_LUT_LOOP(uint16_t, 2, uint16_t, 2)
OLC_LUT_LOOP(uint16_t, 2, uint32_t, 4)
OLC_LUT_LOOP(uint16_t, 2, uint64_t, 8)

static olc_cast_fn olc_lut_select(int in_bytes, int out_bytes) {
#define OLC_LUT_OUT(ib)                                                                       \
    switch (out_bytes) {                                                                      \
    case 1: return olc_lut_##ib##_1;                                                          \
    case 2: return olc_lut_##ib##_2;                                                          \
    case 4: return olc_lut_##ib##_4;                                                          \
    case 8: return olc_lut_##ib##_8;                                                          \
    default: return NULL;                                                                     \
    }
    if (in_bytes == 1) OLC_LUT_OUT(1)
    if (in_bytes == 2) OLC_LUT_OUT(2)
#undef OLC_LUT_OUT
    return NULL;
}

#endif
