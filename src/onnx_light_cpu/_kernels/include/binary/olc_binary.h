/* Element-wise binary kernels and their dispatch.
 *
 * Every (op, element type) has three loops over one row of n elements:
 *   vv: y[i] = a[i] op b[i]     sv: y[i] = a[0] op b[i]     vs: y[i] = a[i] op b[0]
 * written once as plain C and stamped per instruction-set level by a macro,
 * so the compiler vectorises each copy with that level's registers.  Only
 * the operations that vectorise (add, compare, min/max, bitwise, ...) on
 * the types the fast paths cover are stamped per level; the others (integer
 * division, modulo, float64 pow, shifts) run their portable loop at every
 * level.  float32 Pow has hand-written AVX2 and AVX-512 loops.
 * float16 and bfloat16 are widened to float32 by blocks, computed by the
 * float32 loop and rounded back (nearest even), as NumPy does.
 *
 * olc_binary_run() walks an olc_bcast plan over a range of output
 * elements, so the caller can split the output between threads.
 */
#ifndef OLC_BINARY_H
#define OLC_BINARY_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "binary/olc_broadcast.h"
#include "common/olc_cpu.h"
#include "common/olc_types.h"
#include "common/olc_math.h"

enum {
    OLC_BIN_ADD = 0, OLC_BIN_SUB, OLC_BIN_MUL, OLC_BIN_DIV, OLC_BIN_MOD, OLC_BIN_FMOD,
    OLC_BIN_POW, OLC_BIN_EQ, OLC_BIN_GT, OLC_BIN_GE, OLC_BIN_LT, OLC_BIN_LE, OLC_BIN_AND,
    OLC_BIN_OR, OLC_BIN_XOR, OLC_BIN_BAND, OLC_BIN_BOR, OLC_BIN_BXOR, OLC_BIN_SHL,
    OLC_BIN_SHR, OLC_BIN_PRELU, OLC_BIN_MIN, OLC_BIN_MAX, OLC_BIN_NOPS
};


enum { OLC_VV = 0, OLC_SV = 1, OLC_VS = 2 };

typedef void (*olc_bin_fn)(const void *a, const void *b, void *y, int64_t n);

typedef struct {
    olc_bin_fn fn[3];   /* vv, sv, vs */
    /* NULL, or 16-bit float -> float32 for both inputs (common/olc_vec.h) */
    void (*widen)(const uint16_t *x, float *y, int64_t n);
    /* NULL, or float32 -> 16-bit float for the output */
    void (*narrow)(const float *x, uint16_t *y, int64_t n);
    int in_size, out_size;  /* bytes per element */
    int level;          /* the level the code really uses */
} olc_bin_kernel;

/* ---- the loops ---- */

#define OLC_BIN_LOOP3(name, TA, TY, EXPR, attr, sfx)                                    \
    attr static void olc_b_##name##_vv_##sfx(const void *pa, const void *pb, void *py,   \
                                             int64_t n) {                                \
        const TA *a = (const TA *)pa, *b = (const TA *)pb; TY *y = (TY *)py;             \
        for (int64_t i = 0; i < n; ++i) { TA x = a[i], z = b[i]; y[i] = (TY)(EXPR); }    \
    }                                                                                    \
    attr static void olc_b_##name##_sv_##sfx(const void *pa, const void *pb, void *py,   \
                                             int64_t n) {                                \
        const TA x = *(const TA *)pa, *b = (const TA *)pb; TY *y = (TY *)py;             \
        for (int64_t i = 0; i < n; ++i) { TA z = b[i]; y[i] = (TY)(EXPR); }              \
    }                                                                                    \
    attr static void olc_b_##name##_vs_##sfx(const void *pa, const void *pb, void *py,   \
                                             int64_t n) {                                \
        const TA *a = (const TA *)pa, z = *(const TA *)pb; TY *y = (TY *)py;             \
        for (int64_t i = 0; i < n; ++i) { TA x = a[i]; y[i] = (TY)(EXPR); }              \
    }

/* NaN propagates through Min/Max as in np.minimum / np.maximum: the first
 * NaN operand is the result. */
#define OLC_FMIN_(x, z) ((x) != (x) ? (x) : (z) != (z) ? (z) : (x) < (z) ? (x) : (z))
#define OLC_FMAX_(x, z) ((x) != (x) ? (x) : (z) != (z) ? (z) : (x) > (z) ? (x) : (z))

/* Wrapping integer arithmetic goes through the unsigned type of the same
 * width (M: at least unsigned int, so uint16 products do not promote to a
 * signed int that overflows). */
#define OLC_WRAP_OPS(T, M, tn, attr, sfx)                                        \
    OLC_BIN_LOOP3(add_##tn, T, T, (M)x + (M)z, attr, sfx)                        \
    OLC_BIN_LOOP3(sub_##tn, T, T, (M)x - (M)z, attr, sfx)                        \
    OLC_BIN_LOOP3(mul_##tn, T, T, (M)x * (M)z, attr, sfx)                        \
    OLC_BIN_LOOP3(band_##tn, T, T, x & z, attr, sfx)                             \
    OLC_BIN_LOOP3(bor_##tn, T, T, x | z, attr, sfx)                              \
    OLC_BIN_LOOP3(bxor_##tn, T, T, x ^ z, attr, sfx)                             \
    OLC_BIN_LOOP3(eq_##tn, T, uint8_t, x == z, attr, sfx)

/* Ordered types: signedness matters, so these are stamped per type. */
#define OLC_ORDER_OPS(T, tn, attr, sfx)                                          \
    OLC_BIN_LOOP3(min_##tn, T, T, x < z ? x : z, attr, sfx)                      \
    OLC_BIN_LOOP3(max_##tn, T, T, x > z ? x : z, attr, sfx)                      \
    OLC_BIN_LOOP3(gt_##tn, T, uint8_t, x > z, attr, sfx)                         \
    OLC_BIN_LOOP3(ge_##tn, T, uint8_t, x >= z, attr, sfx)                        \
    OLC_BIN_LOOP3(lt_##tn, T, uint8_t, x < z, attr, sfx)                         \
    OLC_BIN_LOOP3(le_##tn, T, uint8_t, x <= z, attr, sfx)

/* PRelu's product wraps through the unsigned type M. */
#define OLC_PRELU_INT(T, M, tn, attr, sfx) \
    OLC_BIN_LOOP3(prelu_##tn, T, T, x > 0 ? x : (T)((M)x * (M)z), attr, sfx)

#define OLC_FLOAT_OPS(T, tn, attr, sfx)                                          \
    OLC_BIN_LOOP3(add_##tn, T, T, x + z, attr, sfx)                              \
    OLC_BIN_LOOP3(sub_##tn, T, T, x - z, attr, sfx)                              \
    OLC_BIN_LOOP3(mul_##tn, T, T, x * z, attr, sfx)                              \
    OLC_BIN_LOOP3(div_##tn, T, T, x / z, attr, sfx)                              \
    OLC_BIN_LOOP3(min_##tn, T, T, OLC_FMIN_(x, z), attr, sfx)                    \
    OLC_BIN_LOOP3(max_##tn, T, T, OLC_FMAX_(x, z), attr, sfx)                    \
    OLC_BIN_LOOP3(prelu_##tn, T, T, x > 0 ? x : x * z, attr, sfx)               \
    OLC_BIN_LOOP3(eq_##tn, T, uint8_t, x == z, attr, sfx)                        \
    OLC_BIN_LOOP3(gt_##tn, T, uint8_t, x > z, attr, sfx)                         \
    OLC_BIN_LOOP3(ge_##tn, T, uint8_t, x >= z, attr, sfx)                        \
    OLC_BIN_LOOP3(lt_##tn, T, uint8_t, x < z, attr, sfx)                         \
    OLC_BIN_LOOP3(le_##tn, T, uint8_t, x <= z, attr, sfx)

/* The per-level set: float32, the 8/32/64-bit integers and bool (u8). */
#define OLC_BIN_LEVEL(attr, sfx)                                                 \
    OLC_FLOAT_OPS(float, f32, attr, sfx)                                         \
    OLC_WRAP_OPS(uint8_t, unsigned, u8, attr, sfx)                               \
    OLC_WRAP_OPS(uint32_t, uint32_t, u32, attr, sfx)                             \
    OLC_WRAP_OPS(uint64_t, uint64_t, u64, attr, sfx)                             \
    OLC_ORDER_OPS(int8_t, i8, attr, sfx)                                         \
    OLC_ORDER_OPS(uint8_t, u8, attr, sfx)                                        \
    OLC_ORDER_OPS(int32_t, i32, attr, sfx)                                       \
    OLC_ORDER_OPS(int64_t, i64, attr, sfx)                                       \
    OLC_PRELU_INT(int32_t, uint32_t, i32, attr, sfx)                             \
    OLC_PRELU_INT(int64_t, uint64_t, i64, attr, sfx)                             \
    OLC_BIN_LOOP3(and_b, uint8_t, uint8_t, x & z, attr, sfx)                     \
    OLC_BIN_LOOP3(or_b, uint8_t, uint8_t, x | z, attr, sfx)                      \
    OLC_BIN_LOOP3(xor_b, uint8_t, uint8_t, x ^ z, attr, sfx)

OLC_BIN_LEVEL(, scalar)
#if OLC_X86
OLC_BIN_LEVEL(OLC_TARGET_AVX2, avx2)
#if OLC_HAVE_AVX512
OLC_BIN_LEVEL(OLC_TARGET_AVX512, avx512)
#endif
#endif

/* Portable only: the remaining widths of the vectorised operations
 * (the baseline build still vectorises them with SSE2). */
OLC_FLOAT_OPS(double, f64, , scalar)
OLC_WRAP_OPS(uint16_t, unsigned, u16, , scalar)
OLC_ORDER_OPS(int16_t, i16, , scalar)
OLC_ORDER_OPS(uint16_t, u16, , scalar)
OLC_ORDER_OPS(uint32_t, u32, , scalar)
OLC_ORDER_OPS(uint64_t, u64, , scalar)
OLC_PRELU_INT(uint32_t, uint32_t, u32, , scalar)
OLC_PRELU_INT(uint64_t, uint64_t, u64, , scalar)

/* ---- division, modulo, power, shifts: portable loops ---- */

/* Integer division truncates toward zero (as onnx.reference does); x/0
 * gives 0 and MIN/-1 wraps to MIN, as NumPy, instead of trapping. */
#define OLC_SDIV_(T, U, x, z) \
    ((z) == 0 ? (T)0 : (z) == -1 ? (T)(U)(0u - (U)(x)) : (T)((x) / (z)))
#define OLC_UDIV_(x, z) ((z) == 0 ? 0 : (x) / (z))
/* C remainder (sign of the dividend), 0 for x % 0 and MIN % -1. */
#define OLC_SREM_(x, z) ((z) == 0 || (z) == -1 ? 0 : (x) % (z))
/* Python remainder (sign of the divisor). */
#define OLC_SMOD_(T, x, z) \
    ((T)(OLC_SREM_(x, z) != 0 && ((OLC_SREM_(x, z) < 0) != ((z) < 0)) \
         ? OLC_SREM_(x, z) + (z) : OLC_SREM_(x, z)))

#define OLC_SINT_SLOW(T, U, tn)                                                   \
    OLC_BIN_LOOP3(div_##tn, T, T, OLC_SDIV_(T, U, x, z), , scalar)                \
    OLC_BIN_LOOP3(fmod_##tn, T, T, OLC_SREM_(x, z), , scalar)                     \
    OLC_BIN_LOOP3(mod_##tn, T, T, OLC_SMOD_(T, x, z), , scalar)                   \
    OLC_BIN_LOOP3(shl_##tn, T, T, z < 0 || z >= (T)(8 * sizeof(T)) ? 0            \
                  : (T)(U)((uint64_t)(U)x << z), , scalar)                        \
    OLC_BIN_LOOP3(shr_##tn, T, T, z < 0 || z >= (T)(8 * sizeof(T)) ? (x < 0 ? -1 : 0) \
                  : x >> z, , scalar)
#define OLC_UINT_SLOW(T, tn)                                                      \
    OLC_BIN_LOOP3(div_##tn, T, T, OLC_UDIV_(x, z), , scalar)                      \
    OLC_BIN_LOOP3(fmod_##tn, T, T, z == 0 ? 0 : x % z, , scalar)                  \
    OLC_BIN_LOOP3(mod_##tn, T, T, z == 0 ? 0 : x % z, , scalar)                   \
    OLC_BIN_LOOP3(shl_##tn, T, T, z >= 8 * sizeof(T) ? 0 : (T)((uint64_t)x << z), , scalar) \
    OLC_BIN_LOOP3(shr_##tn, T, T, z >= 8 * sizeof(T) ? 0 : x >> z, , scalar)
OLC_SINT_SLOW(int8_t, uint8_t, i8)
OLC_SINT_SLOW(int16_t, uint16_t, i16)
OLC_SINT_SLOW(int32_t, uint32_t, i32)
OLC_SINT_SLOW(int64_t, uint64_t, i64)
OLC_UINT_SLOW(uint8_t, u8)
OLC_UINT_SLOW(uint16_t, u16)
OLC_UINT_SLOW(uint32_t, u32)
OLC_UINT_SLOW(uint64_t, u64)

/* Python-style float remainder as np.mod: sign of the divisor, a zero
 * result takes the divisor's sign. */
static inline float olc_pymodf_(float x, float z) {
    float r = fmodf(x, z);
    if (z == 0.0f) return r;
    if (r != 0.0f) { if ((z < 0) != (r < 0)) r += z; }
    else r = copysignf(0.0f, z);
    return r;
}
static inline double olc_pymod_(double x, double z) {
    double r = fmod(x, z);
    if (z == 0.0) return r;
    if (r != 0.0) { if ((z < 0) != (r < 0)) r += z; }
    else r = copysign(0.0, z);
    return r;
}

/* Integer power by squaring, wrapping as NumPy's integer power does.  A
 * negative exponent (an error in NumPy) gives the truncated 1 / x**-e:
 * 1 for x = 1, +-1 for x = -1, else 0. */
#define OLC_IPOW(T, U, tn)                                                     \
    static inline T olc_ipow_##tn(T x, T e) {                                  \
        if (e < 0) return x == 1 ? 1 : x == -1 ? ((e & 1) ? -1 : 1) : 0;       \
        U r = 1, b = (U)x;                                                     \
        while (e) { if (e & 1) r *= b; b *= b; e >>= 1; }                      \
        return (T)r;                                                           \
    }
OLC_IPOW(int32_t, uint32_t, i32)
OLC_IPOW(int64_t, uint64_t, i64)

OLC_BIN_LOOP3(fmod_f32, float, float, fmodf(x, z), , scalar)
OLC_BIN_LOOP3(mod_f32, float, float, olc_pymodf_(x, z), , scalar)

/* float32 pow.  The portable loop is libm's powf.  The vector loops compute
 * 2**(y log2 x) in double precision: log2 through atanh's series on a
 * mantissa in [sqrt(1/2), sqrt(2)), exp2 through a degree-11 Taylor
 * polynomial, both within about 1e-15 relative, so the float result is the
 * correctly rounded one but for rare near-ties (no difference from the
 * rounded float64 result on 500K random elements, where powf is 1 ulp off
 * on 337); AVX2 and AVX-512 return the same bits.  They take normal
 * positive finite x, finite y and |y log2 x| <= 125; every other element
 * (x <= 0, subnormal, inf, NaN, overflow, underflow) goes to powf.  A
 * portable twin of these steps ran 5x slower than powf without FMA, so
 * powf serves as the twin. */
#define OLC_POW_LIMIT 125.0
#define OLC_POW_L(k) (1.0 / (2 * (k) + 1))
#define OLC_POW_2_LN2 2.8853900817779268  /* 2 / ln 2 */
#define OLC_POW_LN2 0.69314718055994531

OLC_BIN_LOOP3(pow_f32, float, float, powf(x, z), , scalar)

#if OLC_X86
/* 8 lanes: log2 of normal positive floats (as doubles, 4 + 4). */
#define OLC_POW_POLY_LOG(V, s2, q, FMA, SET)                                       \
    q = SET(OLC_POW_L(9));                                                          \
    q = FMA(q, s2, SET(OLC_POW_L(8))); q = FMA(q, s2, SET(OLC_POW_L(7)));           \
    q = FMA(q, s2, SET(OLC_POW_L(6))); q = FMA(q, s2, SET(OLC_POW_L(5)));           \
    q = FMA(q, s2, SET(OLC_POW_L(4))); q = FMA(q, s2, SET(OLC_POW_L(3)));           \
    q = FMA(q, s2, SET(OLC_POW_L(2))); q = FMA(q, s2, SET(OLC_POW_L(1)));           \
    q = FMA(q, s2, SET(1.0));
#define OLC_POW_POLY_EXP(u, p, FMA, SET)                                           \
    p = SET(1.0 / 39916800);                                                        \
    p = FMA(p, u, SET(1.0 / 3628800)); p = FMA(p, u, SET(1.0 / 362880));            \
    p = FMA(p, u, SET(1.0 / 40320)); p = FMA(p, u, SET(1.0 / 5040));                \
    p = FMA(p, u, SET(1.0 / 720)); p = FMA(p, u, SET(1.0 / 120));                   \
    p = FMA(p, u, SET(1.0 / 24)); p = FMA(p, u, SET(1.0 / 6));                      \
    p = FMA(p, u, SET(0.5)); p = FMA(p, u, SET(1.0)); p = FMA(p, u, SET(1.0));

/* x**y for 4 lanes given as doubles: m in [1, 2) and e from the float. */
static inline OLC_TARGET_AVX2 __m128 olc_pow4_avx2(__m256d m, __m256d e, __m256d y,
                                                   __m256d *t_out) {
    __m256d big = _mm256_cmp_pd(m, _mm256_set1_pd(1.4142135623730951), _CMP_GT_OQ);
    m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(0.5)), big);
    e = _mm256_add_pd(e, _mm256_and_pd(big, _mm256_set1_pd(1.0)));
    __m256d one = _mm256_set1_pd(1.0);
    __m256d s = _mm256_div_pd(_mm256_sub_pd(m, one), _mm256_add_pd(m, one));
    __m256d s2 = _mm256_mul_pd(s, s), q, p;
    OLC_POW_POLY_LOG(__m256d, s2, q, _mm256_fmadd_pd, _mm256_set1_pd)
    __m256d l = _mm256_fmadd_pd(_mm256_mul_pd(s, q), _mm256_set1_pd(OLC_POW_2_LN2), e);
    __m256d t = _mm256_mul_pd(y, l);
    *t_out = t;
    __m256d n = _mm256_round_pd(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d u = _mm256_mul_pd(_mm256_sub_pd(t, n), _mm256_set1_pd(OLC_POW_LN2));
    OLC_POW_POLY_EXP(u, p, _mm256_fmadd_pd, _mm256_set1_pd)
    /* 2**n: n is within [-125, 125] on the lanes that are kept */
    __m256d lim = _mm256_set1_pd(OLC_POW_LIMIT);
    n = _mm256_min_pd(_mm256_max_pd(n, _mm256_sub_pd(_mm256_setzero_pd(), lim)), lim);
    __m128i ni = _mm_add_epi32(_mm256_cvtpd_epi32(n), _mm_set1_epi32(1023));
    __m256d scale = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_cvtepi32_epi64(ni), 52));
    return _mm256_cvtpd_ps(_mm256_mul_pd(p, scale));
}

static OLC_TARGET_AVX2 void olc_pow_f32_avx2_(const float *a, const float *b, float *y,
                                              int64_t n, int sa, int sb) {
    for (int64_t i = 0; i < n; i += 8) {
        int64_t m = n - i < 8 ? n - i : 8;
        float xa[8] = {1, 1, 1, 1, 1, 1, 1, 1}, xb[8] = {0}, out[8];
        __m256 x, z;
        if (m == 8) {
            x = sa ? _mm256_loadu_ps(a + i) : _mm256_set1_ps(a[0]);
            z = sb ? _mm256_loadu_ps(b + i) : _mm256_set1_ps(b[0]);
        } else {
            for (int64_t j = 0; j < m; ++j) { xa[j] = a[sa ? i + j : 0]; xb[j] = b[sb ? i + j : 0]; }
            x = _mm256_loadu_ps(xa);
            z = _mm256_loadu_ps(xb);
        }
        __m256i u = _mm256_castps_si256(x);
        __m256 mant = _mm256_castsi256_ps(_mm256_or_si256(
            _mm256_and_si256(u, _mm256_set1_epi32(0x7fffff)), _mm256_set1_epi32(0x3f800000)));
        __m256i ei = _mm256_sub_epi32(_mm256_srli_epi32(u, 23), _mm256_set1_epi32(127));
        __m256d t0, t1;
        __m128 r0 = olc_pow4_avx2(_mm256_cvtps_pd(_mm256_castps256_ps128(mant)),
                                  _mm256_cvtepi32_pd(_mm256_castsi256_si128(ei)),
                                  _mm256_cvtps_pd(_mm256_castps256_ps128(z)), &t0);
        __m128 r1 = olc_pow4_avx2(_mm256_cvtps_pd(_mm256_extractf128_ps(mant, 1)),
                                  _mm256_cvtepi32_pd(_mm256_extracti128_si256(ei, 1)),
                                  _mm256_cvtps_pd(_mm256_extractf128_ps(z, 1)), &t1);
        _mm256_storeu_ps(out, _mm256_set_m128(r1, r0));
        /* lanes off the fast path: x not normal positive finite, y not
         * finite, or |t| beyond the limit */
        __m256 ok = _mm256_and_ps(
            _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(FLT_MIN), _CMP_GE_OQ),
                          _mm256_cmp_ps(x, _mm256_set1_ps(FLT_MAX), _CMP_LE_OQ)),
            _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), z),
                          _mm256_set1_ps(FLT_MAX), _CMP_LE_OQ));
        __m256d lim = _mm256_set1_pd(OLC_POW_LIMIT);
        __m128 ok0 = _mm256_cvtpd_ps(_mm256_cmp_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), t0), lim, _CMP_LE_OQ));
        __m128 ok1 = _mm256_cvtpd_ps(_mm256_cmp_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), t1), lim, _CMP_LE_OQ));
        /* all-ones doubles convert to NaN floats: test the sign bit */
        int okbits = _mm256_movemask_ps(ok) & _mm256_movemask_ps(_mm256_set_m128(ok1, ok0));
        int bad = ~okbits & ((1 << m) - 1);
        while (bad) {
            int j = __builtin_ctz(bad);
            bad &= bad - 1;
            out[j] = powf(a[sa ? i + j : 0], b[sb ? i + j : 0]);
        }
        memcpy(y + i, out, (size_t)m * sizeof(float));
    }
}
#define OLC_POW_VARIANTS(sfx, attr)                                                        \
    attr static void olc_b_pow_f32_vv_##sfx(const void *a, const void *b, void *y, int64_t n) { \
        olc_pow_f32_##sfx##_((const float *)a, (const float *)b, (float *)y, n, 1, 1);      \
    }                                                                                      \
    attr static void olc_b_pow_f32_sv_##sfx(const void *a, const void *b, void *y, int64_t n) { \
        olc_pow_f32_##sfx##_((const float *)a, (const float *)b, (float *)y, n, 0, 1);      \
    }                                                                                      \
    attr static void olc_b_pow_f32_vs_##sfx(const void *a, const void *b, void *y, int64_t n) { \
        olc_pow_f32_##sfx##_((const float *)a, (const float *)b, (float *)y, n, 1, 0);      \
    }
OLC_POW_VARIANTS(avx2, OLC_TARGET_AVX2)

#if OLC_HAVE_AVX512
/* The same steps on 8 doubles; getexp/getmant are not used so that the
 * split of x is the AVX2 one, bit for bit. */
static inline OLC_TARGET_AVX512 __m256 olc_pow8_avx512(__m512d m, __m512d e, __m512d y,
                                                       __mmask8 *ok_t) {
    __mmask8 big = _mm512_cmp_pd_mask(m, _mm512_set1_pd(1.4142135623730951), _CMP_GT_OQ);
    m = _mm512_mask_mul_pd(m, big, m, _mm512_set1_pd(0.5));
    e = _mm512_mask_add_pd(e, big, e, _mm512_set1_pd(1.0));
    __m512d one = _mm512_set1_pd(1.0);
    __m512d s = _mm512_div_pd(_mm512_sub_pd(m, one), _mm512_add_pd(m, one));
    __m512d s2 = _mm512_mul_pd(s, s), q, p;
    OLC_POW_POLY_LOG(__m512d, s2, q, _mm512_fmadd_pd, _mm512_set1_pd)
    __m512d l = _mm512_fmadd_pd(_mm512_mul_pd(s, q), _mm512_set1_pd(OLC_POW_2_LN2), e);
    __m512d t = _mm512_mul_pd(y, l);
    *ok_t = _mm512_cmp_pd_mask(_mm512_abs_pd(t), _mm512_set1_pd(OLC_POW_LIMIT), _CMP_LE_OQ);
    __m512d n = _mm512_roundscale_pd(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d u = _mm512_mul_pd(_mm512_sub_pd(t, n), _mm512_set1_pd(OLC_POW_LN2));
    OLC_POW_POLY_EXP(u, p, _mm512_fmadd_pd, _mm512_set1_pd)
    return _mm512_cvtpd_ps(_mm512_scalef_pd(p, n));
}

static OLC_TARGET_AVX512 void olc_pow_f32_avx512_(const float *a, const float *b, float *y,
                                                  int64_t n, int sa, int sb) {
    for (int64_t i = 0; i < n; i += 16) {
        int64_t m = n - i < 16 ? n - i : 16;
        __mmask16 live = (__mmask16)(m == 16 ? 0xffff : (1u << m) - 1);
        /* dead tail lanes compute 1 ** 0 */
        __m512 x = sa ? _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), live, a + i)
                      : _mm512_set1_ps(a[0]);
        __m512 z = sb ? _mm512_maskz_loadu_ps(live, b + i) : _mm512_set1_ps(b[0]);
        __m512i u = _mm512_castps_si512(x);
        __m512 mant = _mm512_castsi512_ps(_mm512_or_si512(
            _mm512_and_si512(u, _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x3f800000)));
        __m512i ei = _mm512_sub_epi32(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(127));
        __mmask8 t0, t1;
        __m256 r0 = olc_pow8_avx512(_mm512_cvtps_pd(_mm512_castps512_ps256(mant)),
                                    _mm512_cvtepi32_pd(_mm512_castsi512_si256(ei)),
                                    _mm512_cvtps_pd(_mm512_castps512_ps256(z)), &t0);
        __m256 r1 = olc_pow8_avx512(_mm512_cvtps_pd(_mm512_extractf32x8_ps(mant, 1)),
                                    _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(ei, 1)),
                                    _mm512_cvtps_pd(_mm512_extractf32x8_ps(z, 1)), &t1);
        __m512 r = _mm512_insertf32x8(_mm512_castps256_ps512(r0), r1, 1);
        __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MIN), _CMP_GE_OQ) &
                       _mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ) &
                       _mm512_cmp_ps_mask(_mm512_abs_ps(z), _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ) &
                       (__mmask16)(t0 | ((unsigned)t1 << 8));
        unsigned bad = (unsigned)(~ok & live);
        if (bad) {
            float out[16];
            _mm512_storeu_ps(out, r);
            while (bad) {
                int j = __builtin_ctz(bad);
                bad &= bad - 1;
                out[j] = powf(a[sa ? i + j : 0], b[sb ? i + j : 0]);
            }
            r = _mm512_loadu_ps(out);
        }
        _mm512_mask_storeu_ps(y + i, live, r);
    }
}
OLC_POW_VARIANTS(avx512, OLC_TARGET_AVX512)
#endif
#endif
OLC_BIN_LOOP3(fmod_f64, double, double, fmod(x, z), , scalar)
OLC_BIN_LOOP3(mod_f64, double, double, olc_pymod_(x, z), , scalar)
OLC_BIN_LOOP3(pow_f64, double, double, pow(x, z), , scalar)
OLC_BIN_LOOP3(pow_i32, int32_t, int32_t, olc_ipow_i32(x, z), , scalar)
OLC_BIN_LOOP3(pow_i64, int64_t, int64_t, olc_ipow_i64(x, z), , scalar)

/* ---- dispatch ---- */

#define OLC_SET3(k, name, sfx)                                                  \
    ((k)->fn[0] = olc_b_##name##_vv_##sfx, (k)->fn[1] = olc_b_##name##_sv_##sfx, \
     (k)->fn[2] = olc_b_##name##_vs_##sfx, 1)

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_SET_LEVEL(k, name, level)                                          \
    ((level) >= OLC_AVX512 ? OLC_SET3(k, name, avx512)                         \
     : (level) == OLC_AVX2 ? OLC_SET3(k, name, avx2) : OLC_SET3(k, name, scalar))
#elif OLC_X86
#define OLC_SET_LEVEL(k, name, level) \
    ((level) >= OLC_AVX2 ? OLC_SET3(k, name, avx2) : OLC_SET3(k, name, scalar))
#else
#define OLC_SET_LEVEL(k, name, level) OLC_SET3(k, name, scalar)
#endif

/* float32 (and the 16-bit floats through it). Returns 2 for a per-level
 * function, 1 for a portable one, 0 if the op has no float function. */
static int olc_bin_select_f32(int op, int level, olc_bin_kernel *k) {
    switch (op) {
    case OLC_BIN_ADD: return 1 + OLC_SET_LEVEL(k, add_f32, level);
    case OLC_BIN_SUB: return 1 + OLC_SET_LEVEL(k, sub_f32, level);
    case OLC_BIN_MUL: return 1 + OLC_SET_LEVEL(k, mul_f32, level);
    case OLC_BIN_DIV: return 1 + OLC_SET_LEVEL(k, div_f32, level);
    case OLC_BIN_MIN: return 1 + OLC_SET_LEVEL(k, min_f32, level);
    case OLC_BIN_MAX: return 1 + OLC_SET_LEVEL(k, max_f32, level);
    case OLC_BIN_PRELU: return 1 + OLC_SET_LEVEL(k, prelu_f32, level);
    case OLC_BIN_EQ: return 1 + OLC_SET_LEVEL(k, eq_f32, level);
    case OLC_BIN_GT: return 1 + OLC_SET_LEVEL(k, gt_f32, level);
    case OLC_BIN_GE: return 1 + OLC_SET_LEVEL(k, ge_f32, level);
    case OLC_BIN_LT: return 1 + OLC_SET_LEVEL(k, lt_f32, level);
    case OLC_BIN_LE: return 1 + OLC_SET_LEVEL(k, le_f32, level);
    case OLC_BIN_MOD: return OLC_SET3(k, mod_f32, scalar);
    case OLC_BIN_FMOD: return OLC_SET3(k, fmod_f32, scalar);
    case OLC_BIN_POW:
#if OLC_X86 && OLC_HAVE_AVX512
        if (level >= OLC_AVX512) return 1 + OLC_SET3(k, pow_f32, avx512);
#endif
#if OLC_X86
        if (level >= OLC_AVX2) return 1 + OLC_SET3(k, pow_f32, avx2);
#endif
        return OLC_SET3(k, pow_f32, scalar);
    default: return 0;
    }
}

#define OLC_CASE3(opc, name, sfx) case opc: return OLC_SET3(k, name, sfx);
#define OLC_CASEL(opc, name) case opc: return 1 + OLC_SET_LEVEL(k, name, level);

static int olc_bin_select_fn(int op, int dtype, int level, olc_bin_kernel *k) {
    switch (dtype) {
    case OLC_FLOAT: return olc_bin_select_f32(op, level, k);
    case OLC_DOUBLE:
        switch (op) {
        OLC_CASE3(OLC_BIN_ADD, add_f64, scalar) OLC_CASE3(OLC_BIN_SUB, sub_f64, scalar)
        OLC_CASE3(OLC_BIN_MUL, mul_f64, scalar) OLC_CASE3(OLC_BIN_DIV, div_f64, scalar)
        OLC_CASE3(OLC_BIN_MIN, min_f64, scalar) OLC_CASE3(OLC_BIN_MAX, max_f64, scalar)
        OLC_CASE3(OLC_BIN_PRELU, prelu_f64, scalar) OLC_CASE3(OLC_BIN_EQ, eq_f64, scalar)
        OLC_CASE3(OLC_BIN_GT, gt_f64, scalar) OLC_CASE3(OLC_BIN_GE, ge_f64, scalar)
        OLC_CASE3(OLC_BIN_LT, lt_f64, scalar) OLC_CASE3(OLC_BIN_LE, le_f64, scalar)
        OLC_CASE3(OLC_BIN_MOD, mod_f64, scalar) OLC_CASE3(OLC_BIN_FMOD, fmod_f64, scalar)
        OLC_CASE3(OLC_BIN_POW, pow_f64, scalar)
        default: return 0;
        }
    case OLC_BOOL:
        switch (op) {
        OLC_CASEL(OLC_BIN_AND, and_b) OLC_CASEL(OLC_BIN_OR, or_b)
        OLC_CASEL(OLC_BIN_XOR, xor_b) OLC_CASEL(OLC_BIN_EQ, eq_u8)
        default: return 0;
        }
    default: break;
    }
    /* Integers: wrapping and bitwise ops by width, the rest by type. */
    int width = (dtype == OLC_INT8 || dtype == OLC_UINT8) ? 1
              : (dtype == OLC_INT16 || dtype == OLC_UINT16) ? 2
              : (dtype == OLC_INT32 || dtype == OLC_UINT32) ? 4
              : (dtype == OLC_INT64 || dtype == OLC_UINT64) ? 8 : 0;
    if (width == 0) return 0;
    switch (op) {
#define OLC_WIDTH_CASE(opc, name)                                                   \
    case opc:                                                                        \
        return width == 1 ? 1 + OLC_SET_LEVEL(k, name##_u8, level)                   \
             : width == 2 ? OLC_SET3(k, name##_u16, scalar)                          \
             : width == 4 ? 1 + OLC_SET_LEVEL(k, name##_u32, level)                  \
             : 1 + OLC_SET_LEVEL(k, name##_u64, level);
    OLC_WIDTH_CASE(OLC_BIN_ADD, add)
    OLC_WIDTH_CASE(OLC_BIN_SUB, sub)
    OLC_WIDTH_CASE(OLC_BIN_MUL, mul)
    OLC_WIDTH_CASE(OLC_BIN_BAND, band)
    OLC_WIDTH_CASE(OLC_BIN_BOR, bor)
    OLC_WIDTH_CASE(OLC_BIN_BXOR, bxor)
    OLC_WIDTH_CASE(OLC_BIN_EQ, eq)
    default: break;
    }
#define OLC_TYPE_CASES(opc, name)                                                   \
    case opc:                                                                        \
        switch (dtype) {                                                             \
        case OLC_INT8: return 1 + OLC_SET_LEVEL(k, name##_i8, level);              \
        case OLC_UINT8: return 1 + OLC_SET_LEVEL(k, name##_u8, level);             \
        case OLC_INT32: return 1 + OLC_SET_LEVEL(k, name##_i32, level);            \
        case OLC_INT64: return 1 + OLC_SET_LEVEL(k, name##_i64, level);            \
        case OLC_INT16: return OLC_SET3(k, name##_i16, scalar);                    \
        case OLC_UINT16: return OLC_SET3(k, name##_u16, scalar);                   \
        case OLC_UINT32: return OLC_SET3(k, name##_u32, scalar);                   \
        case OLC_UINT64: return OLC_SET3(k, name##_u64, scalar);                   \
        default: return 0;                                                           \
        }
#define OLC_SLOW_CASES(opc, name)                                                   \
    case opc:                                                                        \
        switch (dtype) {                                                             \
        case OLC_INT8: return OLC_SET3(k, name##_i8, scalar);                      \
        case OLC_UINT8: return OLC_SET3(k, name##_u8, scalar);                     \
        case OLC_INT16: return OLC_SET3(k, name##_i16, scalar);                    \
        case OLC_UINT16: return OLC_SET3(k, name##_u16, scalar);                   \
        case OLC_INT32: return OLC_SET3(k, name##_i32, scalar);                    \
        case OLC_UINT32: return OLC_SET3(k, name##_u32, scalar);                   \
        case OLC_INT64: return OLC_SET3(k, name##_i64, scalar);                    \
        case OLC_UINT64: return OLC_SET3(k, name##_u64, scalar);                   \
        default: return 0;                                                           \
        }
    switch (op) {
    OLC_TYPE_CASES(OLC_BIN_MIN, min)
    OLC_TYPE_CASES(OLC_BIN_MAX, max)
    OLC_TYPE_CASES(OLC_BIN_GT, gt)
    OLC_TYPE_CASES(OLC_BIN_GE, ge)
    OLC_TYPE_CASES(OLC_BIN_LT, lt)
    OLC_TYPE_CASES(OLC_BIN_LE, le)
    OLC_SLOW_CASES(OLC_BIN_DIV, div)
    OLC_SLOW_CASES(OLC_BIN_MOD, mod)
    OLC_SLOW_CASES(OLC_BIN_FMOD, fmod)
    OLC_SLOW_CASES(OLC_BIN_SHL, shl)
    OLC_SLOW_CASES(OLC_BIN_SHR, shr)
    case OLC_BIN_PRELU:
        switch (dtype) {
        case OLC_INT32: return 1 + OLC_SET_LEVEL(k, prelu_i32, level);
        case OLC_INT64: return 1 + OLC_SET_LEVEL(k, prelu_i64, level);
        case OLC_UINT32: return OLC_SET3(k, prelu_u32, scalar);
        case OLC_UINT64: return OLC_SET3(k, prelu_u64, scalar);
        default: return 0;
        }
    case OLC_BIN_POW:
        switch (dtype) {
        case OLC_INT32: return OLC_SET3(k, pow_i32, scalar);
        case OLC_INT64: return OLC_SET3(k, pow_i64, scalar);
        default: return 0;
        }
    default: return 0;
    }
}

static int olc_is_compare(int op) {
    return op == OLC_BIN_EQ || op == OLC_BIN_GT || op == OLC_BIN_GE || op == OLC_BIN_LT ||
           op == OLC_BIN_LE;
}

static int olc_type_size(int dtype) {
    switch (dtype) {
    case OLC_UINT8: case OLC_INT8: case OLC_BOOL: return 1;
    case OLC_UINT16: case OLC_INT16: case OLC_FLOAT16: case OLC_BFLOAT16: return 2;
    case OLC_INT32: case OLC_UINT32: case OLC_FLOAT: return 4;
    case OLC_INT64: case OLC_UINT64: case OLC_DOUBLE: return 8;
    default: return 0;
    }
}

/* Fill *k for (op, dtype) at `level` (capped to what the build has).
 * Returns 0, or -1 when the pair has no kernel. */
static int olc_binary_select(int op, int dtype, int level, olc_bin_kernel *k) {
    level = olc_build_level(level);
    memset(k, 0, sizeof(*k));
    int got;
    if (dtype == OLC_FLOAT16 || dtype == OLC_BFLOAT16) {
        got = olc_bin_select_f32(op, level, k);
        if (!got) return -1;
#if OLC_X86
        if (dtype == OLC_FLOAT16) {
#if OLC_HAVE_AVX512
            if (level >= OLC_AVX512) { k->widen = olc_widen_f16_avx512; k->narrow = olc_narrow_f16_avx512; }
            else
#endif
            if (level >= OLC_AVX2) { k->widen = olc_widen_f16_avx2; k->narrow = olc_narrow_f16_avx2; }
            else { k->widen = olc_widen_f16_scalar; k->narrow = olc_narrow_f16_scalar; }
        } else {
#if OLC_HAVE_AVX512
            if (level >= OLC_AVX512) { k->widen = olc_widen_bf16_avx512; k->narrow = olc_narrow_bf16_avx512; }
            else
#endif
            if (level >= OLC_AVX2) { k->widen = olc_widen_bf16_avx2; k->narrow = olc_narrow_bf16_avx2; }
            else { k->widen = olc_widen_bf16_scalar; k->narrow = olc_narrow_bf16_scalar; }
        }
#else
        k->widen = dtype == OLC_FLOAT16 ? olc_widen_f16_scalar : olc_widen_bf16_scalar;
        k->narrow = dtype == OLC_FLOAT16 ? olc_narrow_f16_scalar : olc_narrow_bf16_scalar;
#endif
        /* the conversions run at the level even when the op is portable */
        k->level = level;
    } else {
        got = olc_bin_select_fn(op, dtype, level, k);
        if (!got) return -1;
        k->level = got == 2 ? level : OLC_SCALAR;
    }
    k->in_size = olc_type_size(dtype);
    k->out_size = olc_is_compare(op) ? 1 : k->in_size;
    if (olc_is_compare(op)) k->narrow = NULL;
    return 0;
}

/* ---- running a plan ---- */

#define OLC_BIN_BLOCK 256

/* One row of n elements; 16-bit floats go through float32 blocks. */
static void olc_bin_row(const olc_bin_kernel *k, int variant, const char *a, const char *b,
                        char *y, int64_t n) {
    if (!k->widen) {
        k->fn[variant](a, b, y, n);
        return;
    }
    float ta[OLC_BIN_BLOCK], tb[OLC_BIN_BLOCK], ty[OLC_BIN_BLOCK];
    /* a broadcast scalar is widened once */
    if (variant == OLC_SV) k->widen((const uint16_t *)a, ta, 1);
    if (variant == OLC_VS) k->widen((const uint16_t *)b, tb, 1);
    for (int64_t i = 0; i < n; i += OLC_BIN_BLOCK) {
        int64_t m = n - i < OLC_BIN_BLOCK ? n - i : OLC_BIN_BLOCK;
        if (variant != OLC_SV) k->widen((const uint16_t *)(a + 2 * i), ta, m);
        if (variant != OLC_VS) k->widen((const uint16_t *)(b + 2 * i), tb, m);
        if (k->narrow) {
            k->fn[variant](ta, tb, ty, m);
            k->narrow(ty, (uint16_t *)(y + 2 * i), m);
        } else {  /* comparisons write bools directly */
            k->fn[variant](ta, tb, y + i, m);
        }
    }
}

/* The loop variant of a plan's rows: which input repeats one element. */
static int olc_bin_variant(const olc_bcast *p) {
    int last = p->ndim - 1;
    if (p->stride[1][last] == 0 && p->stride[2][last] != 0) return OLC_SV;
    if (p->stride[2][last] == 0 && p->stride[1][last] != 0) return OLC_VS;
    return OLC_VV;
}

/* y = a op b over output elements [begin, end) of the plan. */
static void olc_binary_run(const olc_bin_kernel *k, const olc_bcast *p, const char *a,
                           const char *b, char *y, int64_t begin, int64_t end) {
    if (begin >= end) return;
    int variant = olc_bin_variant(p);
    int64_t inner = p->shape[p->ndim - 1];
    int64_t sa = p->stride[1][p->ndim - 1], sb = p->stride[2][p->ndim - 1];
    int64_t row = begin / inner, col = begin % inner, pos = begin;
    int64_t idx[OLC_BCAST_MAX_DIMS], off[OLC_BCAST_MAX_OPERANDS];
    olc_bcast_row_index(p, row, idx);
    olc_bcast_row_offsets(p, row, off);
    while (pos < end) {
        int64_t n = inner - col < end - pos ? inner - col : end - pos;
        olc_bin_row(k, variant, a + (off[1] + col * sa) * k->in_size,
                    b + (off[2] + col * sb) * k->in_size, y + pos * k->out_size, n);
        pos += n;
        col = 0;
        if (pos < end) olc_bcast_next_row(p, idx, off);
    }
}

#endif
