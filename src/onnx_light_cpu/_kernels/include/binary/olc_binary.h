/* Element-wise binary kernels and their dispatch.
 *
 * Every (op, element type) has three kernels (olc_bin_fn) running over one
 * row of n elements, one per variant:
 *   vv: y[i] = a[i] op b[i]     sv: y[i] = a[0] op b[i]     vs: y[i] = a[i] op b[0]
 * The kernels are plain C loops in binary/olc_binary_ops.h, a body compiled
 * once per (level, element type), so that the compiler vectorises each with
 * that level's registers.  Only the operations that vectorise (add,
 * compare, min/max, bitwise, ...) on the types the fast paths cover are
 * compiled per level (binary/olc_binary_types.h); the others (integer division,
 * modulo, float64, 16-bit integers, shifts, ...) run their portable loop at
 * every level.  float32 Pow has hand-written AVX2 and AVX-512 loops.
 * float16 and bfloat16 are widened to float32 by blocks, computed by the
 * float32 kernel and rounded back (nearest even), as NumPy does.
 *
 * olc_binary_run() walks an olc_bcast plan over a range of output
 * elements, so the caller can split the output between threads.
 */
#ifndef OLC_BINARY_H
#define OLC_BINARY_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "binary/olc_broadcast.h"
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"
#include "common/olc_math.h"

enum {
    OLC_BIN_ADD = 0, OLC_BIN_SUB, OLC_BIN_MUL, OLC_BIN_DIV, OLC_BIN_MOD, OLC_BIN_FMOD,
    OLC_BIN_POW, OLC_BIN_EQ, OLC_BIN_GT, OLC_BIN_GE, OLC_BIN_LT, OLC_BIN_LE, OLC_BIN_AND,
    OLC_BIN_OR, OLC_BIN_XOR, OLC_BIN_BAND, OLC_BIN_BOR, OLC_BIN_BXOR, OLC_BIN_SHL,
    OLC_BIN_SHR, OLC_BIN_PRELU, OLC_BIN_MIN, OLC_BIN_MAX, OLC_BIN_NOPS
};

enum { OLC_VV = 0, OLC_SV = 1, OLC_VS = 2 };

/* A kernel: one row of n elements in one variant. */
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

/* ---- the kernels ---- */

/* The element kinds and the groups of operations of the body file
 * (macros: the body tests them with #if). */
#define OLC_BIN_FLOAT 1
#define OLC_BIN_SIGNED 2
#define OLC_BIN_UNSIGNED 3
#define OLC_BIN_G_ARITH 1  /* add, sub, mul, eq; bitwise and, or, xor on integers */
#define OLC_BIN_G_ORDER 2  /* min, max, gt, ge, lt, le */
#define OLC_BIN_G_PRELU 4
#define OLC_BIN_G_DIV 8
#define OLC_BIN_G_REM 16   /* mod, fmod; shifts on integers */
#define OLC_BIN_G_POW 32
#define OLC_BIN_G_ALL 63
/* name_<type>_<level> inside the body. */
#define OLC_TFN(name) OLC_FN(OLC_CAT(name, OLC_TN))

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

/* One level's kernels, by type: the body once per type.  At the portable
 * level (OLC_BIN_PORTABLE) every group, and the types without vector code. */
#define OLC_LVL scalar
#define OLC_LVL_ATTR
#define OLC_BIN_PORTABLE 1
#include "binary/olc_binary_types.h"
#undef OLC_BIN_PORTABLE
#undef OLC_LVL
#undef OLC_LVL_ATTR
#if OLC_X86
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_BIN_PORTABLE 0
#include "binary/olc_binary_types.h"
#undef OLC_BIN_PORTABLE
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_BIN_PORTABLE 0
#include "binary/olc_binary_types.h"
#undef OLC_BIN_PORTABLE
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

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

#if OLC_X86
/* The two polynomials on doubles: q(s2) = sum s2^k / (2k + 1), k <= 9
 * (log2 x = 2/ln2 s q(s^2), s = (m - 1)/(m + 1)), and e^u's Taylor
 * polynomial of degree 11. */
static inline OLC_TARGET_AVX2 __m256d olc_pow_log_poly_avx2(__m256d s2) {
    __m256d q = _mm256_set1_pd(OLC_POW_L(9));
    for (int k = 8; k >= 1; --k) q = _mm256_fmadd_pd(q, s2, _mm256_set1_pd(OLC_POW_L(k)));
    return _mm256_fmadd_pd(q, s2, _mm256_set1_pd(1.0));
}
static inline OLC_TARGET_AVX2 __m256d olc_pow_exp_poly_avx2(__m256d u) {
    __m256d p = _mm256_set1_pd(1.0 / 39916800);
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 3628800));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 362880));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 40320));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 5040));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 720));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 120));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 24));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0 / 6));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(0.5));
    p = _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0));
    return _mm256_fmadd_pd(p, u, _mm256_set1_pd(1.0));
}

/* 8 lanes: log2 of normal positive floats (as doubles, 4 + 4). */

/* x**y for 4 lanes given as doubles: m in [1, 2) and e from the float. */
static inline OLC_TARGET_AVX2 __m128 olc_pow4_avx2(__m256d m, __m256d e, __m256d y,
                                                   __m256d *t_out) {
    __m256d big = _mm256_cmp_pd(m, _mm256_set1_pd(1.4142135623730951), _CMP_GT_OQ);
    m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(0.5)), big);
    e = _mm256_add_pd(e, _mm256_and_pd(big, _mm256_set1_pd(1.0)));
    __m256d one = _mm256_set1_pd(1.0);
    __m256d s = _mm256_div_pd(_mm256_sub_pd(m, one), _mm256_add_pd(m, one));
    __m256d q = olc_pow_log_poly_avx2(_mm256_mul_pd(s, s));
    __m256d l = _mm256_fmadd_pd(_mm256_mul_pd(s, q), _mm256_set1_pd(OLC_POW_2_LN2), e);
    __m256d t = _mm256_mul_pd(y, l);
    *t_out = t;
    __m256d n = _mm256_round_pd(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d u = _mm256_mul_pd(_mm256_sub_pd(t, n), _mm256_set1_pd(OLC_POW_LN2));
    __m256d p = olc_pow_exp_poly_avx2(u);
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
/* The kernels (olc_bin_fn) of the three variants. */
static OLC_TARGET_AVX2 void olc_b_pow_vv_f32_avx2(const void *a, const void *b, void *y, int64_t n) {
    olc_pow_f32_avx2_((const float *)a, (const float *)b, (float *)y, n, 1, 1);
}
static OLC_TARGET_AVX2 void olc_b_pow_sv_f32_avx2(const void *a, const void *b, void *y, int64_t n) {
    olc_pow_f32_avx2_((const float *)a, (const float *)b, (float *)y, n, 0, 1);
}
static OLC_TARGET_AVX2 void olc_b_pow_vs_f32_avx2(const void *a, const void *b, void *y, int64_t n) {
    olc_pow_f32_avx2_((const float *)a, (const float *)b, (float *)y, n, 1, 0);
}

#if OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512d olc_pow_log_poly_avx512(__m512d s2) {
    __m512d q = _mm512_set1_pd(OLC_POW_L(9));
    for (int k = 8; k >= 1; --k) q = _mm512_fmadd_pd(q, s2, _mm512_set1_pd(OLC_POW_L(k)));
    return _mm512_fmadd_pd(q, s2, _mm512_set1_pd(1.0));
}
static inline OLC_TARGET_AVX512 __m512d olc_pow_exp_poly_avx512(__m512d u) {
    __m512d p = _mm512_set1_pd(1.0 / 39916800);
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 3628800));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 362880));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 40320));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 5040));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 720));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 120));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 24));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0 / 6));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(0.5));
    p = _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0));
    return _mm512_fmadd_pd(p, u, _mm512_set1_pd(1.0));
}

/* The same steps on 8 doubles; getexp/getmant are not used so that the
 * split of x is the AVX2 one, bit for bit. */
static inline OLC_TARGET_AVX512 __m256 olc_pow8_avx512(__m512d m, __m512d e, __m512d y,
                                                       __mmask8 *ok_t) {
    __mmask8 big = _mm512_cmp_pd_mask(m, _mm512_set1_pd(1.4142135623730951), _CMP_GT_OQ);
    m = _mm512_mask_mul_pd(m, big, m, _mm512_set1_pd(0.5));
    e = _mm512_mask_add_pd(e, big, e, _mm512_set1_pd(1.0));
    __m512d one = _mm512_set1_pd(1.0);
    __m512d s = _mm512_div_pd(_mm512_sub_pd(m, one), _mm512_add_pd(m, one));
    __m512d q = olc_pow_log_poly_avx512(_mm512_mul_pd(s, s));
    __m512d l = _mm512_fmadd_pd(_mm512_mul_pd(s, q), _mm512_set1_pd(OLC_POW_2_LN2), e);
    __m512d t = _mm512_mul_pd(y, l);
    *ok_t = _mm512_cmp_pd_mask(_mm512_abs_pd(t), _mm512_set1_pd(OLC_POW_LIMIT), _CMP_LE_OQ);
    __m512d n = _mm512_roundscale_pd(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d u = _mm512_mul_pd(_mm512_sub_pd(t, n), _mm512_set1_pd(OLC_POW_LN2));
    __m512d p = olc_pow_exp_poly_avx512(u);
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
static OLC_TARGET_AVX512 void olc_b_pow_vv_f32_avx512(const void *a, const void *b, void *y, int64_t n) {
    olc_pow_f32_avx512_((const float *)a, (const float *)b, (float *)y, n, 1, 1);
}
static OLC_TARGET_AVX512 void olc_b_pow_sv_f32_avx512(const void *a, const void *b, void *y, int64_t n) {
    olc_pow_f32_avx512_((const float *)a, (const float *)b, (float *)y, n, 0, 1);
}
static OLC_TARGET_AVX512 void olc_b_pow_vs_f32_avx512(const void *a, const void *b, void *y, int64_t n) {
    olc_pow_f32_avx512_((const float *)a, (const float *)b, (float *)y, n, 1, 0);
}
#endif
#endif

/* ---- dispatch ---- */

/* The kernels of type t compiled at `level` (a level this build has), by
 * operation and variant; NULL when the type has none there. */
typedef olc_bin_fn olc_bin_fns[3];
static const olc_bin_fns *olc_bin_table(int t, int level) {
    switch (t) {
    case OLC_FLOAT: return OLC_LEVEL_FN(level, olc_bin_table_f32);
    case OLC_INT8: return OLC_LEVEL_FN(level, olc_bin_table_i8);
    case OLC_UINT8: return OLC_LEVEL_FN(level, olc_bin_table_u8);
    case OLC_INT32: return OLC_LEVEL_FN(level, olc_bin_table_i32);
    case OLC_UINT32: return OLC_LEVEL_FN(level, olc_bin_table_u32);
    case OLC_INT64: return OLC_LEVEL_FN(level, olc_bin_table_i64);
    case OLC_UINT64: return OLC_LEVEL_FN(level, olc_bin_table_u64);
    case OLC_DOUBLE: return level == OLC_SCALAR ? olc_bin_table_f64_scalar : NULL;
    case OLC_INT16: return level == OLC_SCALAR ? olc_bin_table_i16_scalar : NULL;
    case OLC_UINT16: return level == OLC_SCALAR ? olc_bin_table_u16_scalar : NULL;
    default: return NULL;
    }
}

/* The kernels of (op, t) at `level` if it has some there, else its
 * portable ones.  Returns the level they run at, or -1 when there are none. */
static int olc_bin_find(int op, int t, int level, olc_bin_fn *fn) {
    if (op < 0 || op >= OLC_BIN_NOPS) return -1;
    int wraps = op == OLC_BIN_ADD || op == OLC_BIN_SUB || op == OLC_BIN_MUL || op == OLC_BIN_EQ ||
                op == OLC_BIN_BAND || op == OLC_BIN_BOR || op == OLC_BIN_BXOR;
    if (wraps) /* a signed type's are its unsigned twin's: the same bits */
        t = t == OLC_INT8 ? OLC_UINT8 : t == OLC_INT16 ? OLC_UINT16 : t == OLC_INT32 ? OLC_UINT32
          : t == OLC_INT64 ? OLC_UINT64 : t;
    const olc_bin_fns *fast = olc_bin_table(t, level), *portable = olc_bin_table(t, OLC_SCALAR);
    const olc_bin_fn *found = NULL;
    int used = -1;
    if (t == OLC_FLOAT && op == OLC_BIN_POW) {
        fn[OLC_VV] = OLC_LEVEL_FN(level, olc_b_pow_vv_f32);
        fn[OLC_SV] = OLC_LEVEL_FN(level, olc_b_pow_sv_f32);
        fn[OLC_VS] = OLC_LEVEL_FN(level, olc_b_pow_vs_f32);
        return level;
    }
    if (fast && fast[op][0]) {
        found = fast[op];
        used = level;
    } else if (portable && portable[op][0]) {
        found = portable[op];
        used = OLC_SCALAR;
    }
    if (found) memcpy(fn, found, 3 * sizeof(olc_bin_fn));
    return used;
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
    if (dtype == OLC_FLOAT16 || dtype == OLC_BFLOAT16) {
        if (olc_bin_find(op, OLC_FLOAT, level, k->fn) < 0) return -1;
        if (dtype == OLC_FLOAT16) {
            k->widen = OLC_LEVEL_FN(level, olc_widen_f16);
            k->narrow = OLC_LEVEL_FN(level, olc_narrow_f16);
        } else {
            k->widen = OLC_LEVEL_FN(level, olc_widen_bf16);
            k->narrow = OLC_LEVEL_FN(level, olc_narrow_bf16);
        }
        /* the conversions run at the level even when the op is portable */
        k->level = level;
    } else if (dtype == OLC_BOOL) {
        /* And, Or, Xor and Equal on the 0/1 bytes */
        int bop = op == OLC_BIN_AND ? OLC_BIN_BAND : op == OLC_BIN_OR ? OLC_BIN_BOR
                : op == OLC_BIN_XOR ? OLC_BIN_BXOR : op == OLC_BIN_EQ ? OLC_BIN_EQ : -1;
        if (bop < 0) return -1;
        k->level = olc_bin_find(bop, OLC_UINT8, level, k->fn);
    } else {
        k->level = olc_bin_find(op, dtype, level, k->fn);
    }
    if (k->level < 0) return -1;
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
