/* ReduceSum and Softmax.
 *
 * ReduceSum sees a tensor as [A, R, B] and sums over R:
 *   - B == 1 (the reduced axes are the last ones): each row of R elements is
 *     cut into blocks of OLC_SUM_BLOCK; a block is summed into 64 (float)
 *     or 16 (double) independent lanes, element i of the block going to lane
 *     i % 64, and the lanes are folded in a fixed tree.  Block sums are then
 *     added in block order.  The order depends on neither the thread count
 *     (threads take whole blocks) nor the instruction set (each lane is its
 *     own sequence of adds; the compiler vectorises across lanes, never
 *     reassociates), so every level and thread count gives the same bits.
 *   - B > 1: out[b] = x[0, b] + x[1, b] + ... in row order, vectorised over b.
 * float16/bfloat16 accumulate in float32; integer sums wrap (computed
 * unsigned), as NumPy's sums in the input type do.  float32 block sums are
 * written per level below; the other float sums are the per-level body
 * reduce/olc_reduce_sums.h.
 *
 * Softmax of a row: max, then e = exp(x - max) with the sum of e, then
 * e * (1/sum).  float32 uses olc_math.h's exp at each level (scalar twin
 * olc_expf_; on AVX-512 the same polynomial scaled by vscalefps); double
 * uses libm's exp.  float16/bfloat16 are computed in float32 but rounded to
 * the narrow type where onnx.reference's NumPy arithmetic rounds (x - max,
 * exp, the sum, the quotient): the ONNX backend cases expect those bits to
 * within one unit.  The float16 sum runs in float32 (as NumPy's); the
 * bfloat16 sum is rounded after every addition as ml_dtypes does, which
 * loses accuracy on long rows but is what the reference computes.
 * Softmax along another axis (float32, float64) works on column blocks
 * (reduce/olc_reduce_cols.h).
 */
#ifndef OLC_REDUCE_H
#define OLC_REDUCE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"
#include "common/olc_math.h"

#define OLC_SUM_BLOCK 8192
#define OLC_SUM_LANES 64
/* Columns one column-sum task handles (its float32 accumulator is on the stack). */
#define OLC_COL_BLOCK 512

/* The end of a float32 block sum: the tail into lanes 0.., then the fold. */
static inline double olc_fold_lanes(float *acc, const float *x, int64_t i, int64_t n) {
    for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
    for (int w = OLC_SUM_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return (double)acc[0];
}
static double olc_bsum_f32_scalar(const void *px, int64_t n) {
    const float *x = (const float *)px;
    float acc[OLC_SUM_LANES] = {0};
    int64_t i = 0;
    for (; i + OLC_SUM_LANES <= n; i += OLC_SUM_LANES)
        for (int j = 0; j < OLC_SUM_LANES; ++j) acc[j] += x[i + j];
    return olc_fold_lanes(acc, x, i, n);
}
#if OLC_X86
static OLC_TARGET_AVX2 double olc_bsum_f32_avx2(const void *px, int64_t n) {
    const float *x = (const float *)px;
    __m256 a[8];
    for (int v = 0; v < 8; ++v) a[v] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int v = 0; v < 8; ++v) a[v] = _mm256_add_ps(a[v], _mm256_loadu_ps(x + i + 8 * v));
    float acc[OLC_SUM_LANES];
    for (int v = 0; v < 8; ++v) _mm256_storeu_ps(acc + 8 * v, a[v]);
    return olc_fold_lanes(acc, x, i, n);
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static OLC_TARGET_AVX512 double olc_bsum_f32_avx512(const void *px, int64_t n) {
    const float *x = (const float *)px;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(x + i));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(x + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(x + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(x + i + 48));
    }
    float acc[OLC_SUM_LANES];
    _mm512_storeu_ps(acc, a0);
    _mm512_storeu_ps(acc + 16, a1);
    _mm512_storeu_ps(acc + 32, a2);
    _mm512_storeu_ps(acc + 48, a3);
    return olc_fold_lanes(acc, x, i, n);
}
#endif

/* The other block and column sums, per level. */
#define OLC_BODY "reduce/olc_reduce_sums.h"
#include "common/olc_each_level.h"

/* Integers: wrapping sums, so any order gives the same result, and a
 * signed type sums as its unsigned twin. */
static uint64_t olc_isum_u32(const void *px, int64_t n) {
    const uint32_t *x = (const uint32_t *)px;
    uint32_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return (uint64_t)s;
}
static uint64_t olc_isum_u64(const void *px, int64_t n) {
    const uint64_t *x = (const uint64_t *)px;
    uint64_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
}
static void olc_csum_u32(const void *px, void *po, int64_t R, int64_t B, int64_t b0, int64_t b1) {
    const uint32_t *x = (const uint32_t *)px;
    uint32_t *out = (uint32_t *)po;
    for (int64_t b = b0; b < b1; ++b) out[b] = R > 0 ? x[b] : 0;
    for (int64_t r = 1; r < R; ++r)
        for (int64_t b = b0; b < b1; ++b) out[b] += x[r * B + b];
}
static void olc_csum_u64(const void *px, void *po, int64_t R, int64_t B, int64_t b0, int64_t b1) {
    const uint64_t *x = (const uint64_t *)px;
    uint64_t *out = (uint64_t *)po;
    for (int64_t b = b0; b < b1; ++b) out[b] = R > 0 ? x[b] : 0;
    for (int64_t r = 1; r < R; ++r)
        for (int64_t b = b0; b < b1; ++b) out[b] += x[r * B + b];
}

typedef double (*olc_bsum_fn)(const void *x, int64_t n);
typedef uint64_t (*olc_isum_fn)(const void *x, int64_t n);
typedef void (*olc_csum_fn)(const void *x, void *out, int64_t R, int64_t B, int64_t b0, int64_t b1);


static int olc_reduce_level(int level) { return olc_build_level(level); }

static olc_bsum_fn olc_bsum_select(int dtype, int level) {
    switch (dtype) {
    case OLC_FLOAT: return OLC_LEVEL_FN(level, olc_bsum_f32);
    case OLC_FLOAT16: return OLC_LEVEL_FN(level, olc_bsum_f16);
    case OLC_BFLOAT16: return OLC_LEVEL_FN(level, olc_bsum_bf16);
    case OLC_DOUBLE: return OLC_LEVEL_FN(level, olc_bsum_f64);
    default: return NULL;
    }
}
static olc_isum_fn olc_isum_select(int dtype) {
    switch (dtype) {
    case OLC_INT32: case OLC_UINT32: return olc_isum_u32;
    case OLC_INT64: case OLC_UINT64: return olc_isum_u64;
    default: return NULL;
    }
}
static olc_csum_fn olc_csum_select(int dtype, int level) {
    switch (dtype) {
    case OLC_FLOAT: return OLC_LEVEL_FN(level, olc_csum_f32);
    case OLC_FLOAT16: return OLC_LEVEL_FN(level, olc_csum_f16);
    case OLC_BFLOAT16: return OLC_LEVEL_FN(level, olc_csum_bf16);
    case OLC_DOUBLE: return OLC_LEVEL_FN(level, olc_csum_f64);
    case OLC_INT32: case OLC_UINT32: return olc_csum_u32;
    case OLC_INT64: case OLC_UINT64: return olc_csum_u64;
    default: return NULL;
    }
}

/* out[a] from the block sums of row a, in block order. */
static void olc_store_sums(int dtype, const double *partial, const uint64_t *ipartial,
                           int64_t A, int64_t nblk, void *out) {
    for (int64_t a = 0; a < A; ++a) {
        if (ipartial) {
            uint64_t s = 0;
            for (int64_t k = 0; k < nblk; ++k) s += ipartial[a * nblk + k];
            switch (dtype) {
            case OLC_INT32: case OLC_UINT32: ((uint32_t *)out)[a] = (uint32_t)s; break;
            default: ((uint64_t *)out)[a] = s;
            }
            continue;
        }
        double s = 0.0;
        if (dtype == OLC_DOUBLE) {
            for (int64_t k = 0; k < nblk; ++k) s += partial[a * nblk + k];
            ((double *)out)[a] = s;
            continue;
        }
        float f = 0.0f; /* float32 accumulation, as inside the blocks */
        for (int64_t k = 0; k < nblk; ++k) f += (float)partial[a * nblk + k];
        switch (dtype) {
        case OLC_FLOAT: ((float *)out)[a] = f; break;
        case OLC_FLOAT16: ((uint16_t *)out)[a] = olc_f2h(f); break;
        default: ((uint16_t *)out)[a] = olc_f2bf(f);
        }
    }
}

/* ---------------------------------------------------------------- Softmax */

#if OLC_X86 && OLC_HAVE_AVX512
/* exp for softmax on AVX-512: olc_exp_ps_avx512's reduction and polynomial,
 * with the scaling by 2^n done by vscalefps (exact, and correctly rounded
 * into the subnormal range), which drops the high clamp and the integer
 * work.  The arguments here are x - max <= 0 (or NaN). */
static inline OLC_TARGET_AVX512 __m512 olc_exp_softmax_avx512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(OLC_EXP_LO), x);
    __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(OLC_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_HI), x);
    r = _mm512_fnmadd_ps(kf, _mm512_set1_ps(OLC_LN2_LO), r);
    return _mm512_scalef_ps(olc_exp_poly_ps_avx512(r), kf);
}
#endif

#if OLC_X86
/* exp for softmax on AVX2: olc_exp_ps_avx2 for arguments x - max <= 0 (or
 * NaN).  When every lane is >= -86 (n >= -124, so p 2^n is normal), p 2^n
 * is one exact product, the same bits as the general path's two; there is
 * no clamp to apply either.  Other vectors take the general path. */
static inline OLC_TARGET_AVX2 __m256 olc_exp_softmax_avx2(__m256 x) {
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-86.0f), _CMP_LT_OQ)))
        return olc_exp_ps_avx2(x);
    const __m256 shifter = _mm256_set1_ps(OLC_SHIFTER);
    __m256 kf = _mm256_fmadd_ps(x, _mm256_set1_ps(OLC_LOG2E), shifter);
    __m256i n = _mm256_sub_epi32(_mm256_castps_si256(kf), _mm256_set1_epi32(0x4b400000));
    kf = _mm256_sub_ps(kf, shifter);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(OLC_LN2_HI), x);
    r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(OLC_LN2_LO), r);
    __m256 p = olc_exp_poly_ps_avx2(r);
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
#endif

/* One float32 row, in place allowed (y may equal x). */
static void olc_softmax_f32_scalar(const float *x, float *y, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; ++i) m = olc_maxf_(m, x[i]);
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) { y[i + j] = olc_expf_(x[i + j] - m); acc[j] += y[i + j]; }
    for (int j = 0; i + j < n; ++j) { y[i + j] = olc_expf_(x[i + j] - m); acc[j] += y[i + j]; }
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    float inv = 1.0f / acc[0];
    for (int64_t k = 0; k < n; ++k) y[k] *= inv;
}

#if OLC_X86
static OLC_TARGET_AVX2 void olc_softmax_f32_avx2(const float *x, float *y, int64_t n) {
    __m256 vm = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    float m = -INFINITY;
    for (int j = 0; j < 8; ++j) m = olc_maxf_(m, lanes[j]);
    for (; i < n; ++i) m = olc_maxf_(m, x[i]);
    const __m256 bm = _mm256_set1_ps(m);
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    for (i = 0; i + 16 <= n; i += 16) {
        __m256 e0 = olc_exp_softmax_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), bm));
        __m256 e1 = olc_exp_softmax_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), bm));
        _mm256_storeu_ps(y + i, e0);
        _mm256_storeu_ps(y + i + 8, e1);
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 e0 = olc_exp_softmax_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), bm));
        _mm256_storeu_ps(y + i, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    if (i < n) {
        float buf[8];
        for (int j = 0; j < 8; ++j) buf[j] = i + j < n ? x[i + j] : -INFINITY; /* exp -> 0 */
        __m256 e0 = olc_exp_softmax_avx2(_mm256_sub_ps(_mm256_loadu_ps(buf), bm));
        _mm256_storeu_ps(buf, e0);
        memcpy(y + i, buf, (size_t)(n - i) * sizeof(float));
        s0 = _mm256_add_ps(s0, e0);
    }
    _mm256_storeu_ps(lanes, _mm256_add_ps(s0, s1));
    float s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    const __m256 inv = _mm256_set1_ps(1.0f / s);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
    for (; i < n; ++i) y[i] *= 1.0f / s;
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static OLC_TARGET_AVX512 void olc_softmax_f32_avx512(const float *x, float *y, int64_t n) {
    __m512 vm0 = _mm512_set1_ps(-INFINITY), vm1 = vm0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        vm0 = _mm512_max_ps(vm0, _mm512_loadu_ps(x + i));
        vm1 = _mm512_max_ps(vm1, _mm512_loadu_ps(x + i + 16));
    }
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        vm0 = _mm512_mask_max_ps(vm0, k, vm0, _mm512_maskz_loadu_ps(k, x + i));
    }
    const __m512 bm = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(vm0, vm1)));
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    for (i = 0; i + 32 <= n; i += 32) {
        __m512 e0 = olc_exp_softmax_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), bm));
        __m512 e1 = olc_exp_softmax_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), bm));
        _mm512_storeu_ps(y + i, e0);
        _mm512_storeu_ps(y + i + 16, e1);
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 e0 = _mm512_maskz_mov_ps(k, olc_exp_softmax_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), bm)));
        _mm512_mask_storeu_ps(y + i, k, e0);
        s0 = _mm512_add_ps(s0, e0);
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    for (i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), inv));
    }
}

#endif

typedef void (*olc_softmax_fn)(const float *x, float *y, int64_t n);

static olc_softmax_fn olc_softmax_select(int level) {
    return OLC_LEVEL_FN(level, olc_softmax_f32);
}

/* Row helpers of the float16/bfloat16 softmax. */
static float olc_max_lanes(const float *x, int64_t n) {
    float acc[16];
    for (int j = 0; j < 16; ++j) acc[j] = -INFINITY;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] = olc_maxf_(acc[j], x[i + j]);
    for (int j = 0; i + j < n; ++j) acc[j] = olc_maxf_(acc[j], x[i + j]);
    float m = acc[0];
    for (int j = 1; j < 16; ++j) m = olc_maxf_(m, acc[j]);
    return m;
}
static float olc_sum_lanes(const float *x, int64_t n) {
    float acc[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += x[i + j];
    for (int j = 0; i + j < n; ++j) acc[j] += x[i + j];
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    return acc[0];
}

/* A float32 rounded to float16 or bfloat16 and back. */
static float olc_round_f16(float v) { return olc_h2f(olc_f2h(v)); }
static float olc_round_bf16(float v) { return olc_bf2f(olc_f2bf(v)); }

typedef struct {
    void (*widen)(const uint16_t *x, float *y, int64_t n);
    void (*narrow)(const float *x, uint16_t *y, int64_t n);
    void (*exp)(const float *x, float *y, int64_t n);
    float (*round)(float v);
} olc_narrow_fns;

static olc_narrow_fns olc_narrow_select(int half, int level) {
    olc_narrow_fns f;
    f.exp = OLC_LEVEL_FN(level, olc_exp_f32);
    if (half) {
        f.widen = OLC_LEVEL_FN(level, olc_widen_f16);
        f.narrow = OLC_LEVEL_FN(level, olc_narrow_f16);
        f.round = olc_round_f16;
    } else {
        f.widen = OLC_LEVEL_FN(level, olc_widen_bf16);
        f.narrow = OLC_LEVEL_FN(level, olc_narrow_bf16);
        f.round = olc_round_bf16;
    }
    return f;
}

/* float16 rows in one function per level: the same rounding points as the
 * generic path (x - max, exp and the quotient rounded to half), in three
 * passes over the row instead of ten. */
#if OLC_X86
/* float32 lanes rounded to float16 and back. */
static inline OLC_TARGET_AVX2 __m256 olc_round_f16_avx2(__m256 v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static OLC_TARGET_AVX2 void olc_softmax_f16_avx2(const uint16_t *x, uint16_t *y, int64_t n) {
    const uint16_t NEG_INF = 0xfc00;
    uint16_t tail[8];
    int64_t i, full = n & ~(int64_t)7;
    __m256 vm = _mm256_set1_ps(-INFINITY);
    for (i = 0; i < full; i += 8) vm = _mm256_max_ps(vm, olc_ld_f16_avx2(x + i));
    if (i < n) {
        for (int j = 0; j < 8; ++j) tail[j] = i + j < n ? x[i + j] : NEG_INF;
        vm = _mm256_max_ps(vm, olc_ld_f16_avx2(tail));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    float m = -INFINITY;
    for (int j = 0; j < 8; ++j) m = olc_maxf_(m, lanes[j]);
    const __m256 bm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    for (i = 0; i < full; i += 8) {
        __m256 e = olc_round_f16_avx2(olc_exp_ps_avx2(olc_round_f16_avx2(_mm256_sub_ps(olc_ld_f16_avx2(x + i), bm))));
        olc_st_f16_avx2(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) {
        for (int j = 0; j < 8; ++j) tail[j] = i + j < n ? x[i + j] : NEG_INF; /* exp -> 0 */
        __m256 e = olc_round_f16_avx2(olc_exp_ps_avx2(olc_round_f16_avx2(_mm256_sub_ps(olc_ld_f16_avx2(tail), bm))));
        olc_st_f16_avx2(tail, e);
        memcpy(y + i, tail, (size_t)(n - i) * 2);
        acc = _mm256_add_ps(acc, e);
    }
    _mm256_storeu_ps(lanes, acc);
    float sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
    const __m256 vs = _mm256_set1_ps(olc_round_f16(sum));
    for (i = 0; i < full; i += 8) olc_st_f16_avx2(y + i, _mm256_div_ps(olc_ld_f16_avx2(y + i), vs));
    for (; i < n; ++i) y[i] = olc_f2h(olc_h2f(y[i]) / olc_round_f16(sum));
}
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512 olc_round_f16_avx512(__m512 v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
static OLC_TARGET_AVX512 void olc_softmax_f16_avx512(const uint16_t *x, uint16_t *y, int64_t n) {
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        vm = _mm512_mask_max_ps(vm, k, vm, olc_ld_f16_avx512(x + i, k));
    }
    const __m512 bm = _mm512_set1_ps(_mm512_reduce_max_ps(vm));
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 d = olc_round_f16_avx512(_mm512_sub_ps(olc_ld_f16_avx512(x + i, k), bm));
        __m512 e = _mm512_maskz_mov_ps(k, olc_round_f16_avx512(olc_exp_softmax_avx512(d)));
        olc_st_f16_avx512(y + i, k, e);
        acc = _mm512_add_ps(acc, e);
    }
    const __m512 vs = _mm512_set1_ps(olc_round_f16(_mm512_reduce_add_ps(acc)));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        olc_st_f16_avx512(y + i, k, _mm512_div_ps(olc_ld_f16_avx512(y + i, k), vs));
    }
}
#endif

/* Rows [r0, r1) of an [rows, n] array of element type dtype. */
static int olc_softmax_rows(int dtype, int level, const void *px, void *py, int64_t n,
                            int64_t r0, int64_t r1) {
    olc_softmax_fn fn = olc_softmax_select(level);
    if (dtype == OLC_FLOAT) {
        for (int64_t r = r0; r < r1; ++r) fn((const float *)px + r * n, (float *)py + r * n, n);
        return 0;
    }
    if (dtype == OLC_DOUBLE) {
        for (int64_t r = r0; r < r1; ++r) {
            const double *x = (const double *)px + r * n;
            double *y = (double *)py + r * n, m = -INFINITY, s = 0.0;
            for (int64_t i = 0; i < n; ++i) m = x[i] > m || x[i] != x[i] ? x[i] : m;
            for (int64_t i = 0; i < n; ++i) { y[i] = exp(x[i] - m); s += y[i]; }
            for (int64_t i = 0; i < n; ++i) y[i] /= s;
        }
        return 0;
    }
#if OLC_X86
    if (dtype == OLC_FLOAT16 && level >= OLC_AVX2) {
        void (*f16)(const uint16_t *, uint16_t *, int64_t) = olc_softmax_f16_avx2;
#if OLC_HAVE_AVX512
        if (level >= OLC_AVX512) f16 = olc_softmax_f16_avx512;
#endif
        for (int64_t r = r0; r < r1; ++r) f16((const uint16_t *)px + r * n, (uint16_t *)py + r * n, n);
        return 0;
    }
#endif
    /* float16 / bfloat16: computed in float32 in a row buffer, rounded to
     * the narrow type where the reference rounds (x - max, exp, the sum,
     * the quotient), so that both agree to the last bit but for exp's ulp. */
    int half = dtype == OLC_FLOAT16;
    olc_narrow_fns nf = olc_narrow_select(half, level);
    float *buf = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!buf) return -1;
    for (int64_t r = r0; r < r1; ++r) {
        const uint16_t *x = (const uint16_t *)px + r * n;
        uint16_t *y = (uint16_t *)py + r * n;
        nf.widen(x, buf, n);
        float m = olc_max_lanes(buf, n);
        for (int64_t i = 0; i < n; ++i) buf[i] -= m;
        nf.narrow(buf, y, n);
        nf.widen(y, buf, n);
        nf.exp(buf, buf, n);
        nf.narrow(buf, y, n);
        nf.widen(y, buf, n);
        float s;
        if (half) {
            s = nf.round(olc_sum_lanes(buf, n));
        } else { /* ml_dtypes sums bfloat16 one element at a time, rounding each step */
            s = 0.0f;
            for (int64_t i = 0; i < n; ++i) s = olc_round_bf16(s + buf[i]);
        }
        for (int64_t i = 0; i < n; ++i) buf[i] /= s;
        nf.narrow(buf, y, n);
    }
    free(buf);
    return 0;
}

/* Softmax along the middle axis of an [N, inner] float32 / double block:
 * olc_softmax_cols_f32, olc_softmax_cols_f64. */
#define OLC_T float
#define OLC_TN f32
#define OLC_EXP olc_expf_
#include "reduce/olc_reduce_cols.h"
#define OLC_T double
#define OLC_TN f64
#define OLC_EXP exp
#include "reduce/olc_reduce_cols.h"

/* ------------------------------------------- ReduceMax, ReduceMin, ReduceProd
 * olc_redx_select(kind, dtype, level, cols) returns the rows (B == 1) or
 * the cols (B > 1) function of reduce/olc_reduce_ext.h.  Max and Min
 * propagate NaN (as np.maximum.reduce): the comparison skips a NaN (x86's
 * max/min rule, so it vectorises without branches) and a flag per lane or
 * column makes the result NaN.  A bool is a uint8.  Kind SUM serves
 * ReduceSum's short rows (R < OLC_SUM_LANES), where the block sums'
 * 64-lane fold would cost more than the row. */
enum { OLC_REDX_KIND_MAX = 0, OLC_REDX_KIND_MIN, OLC_REDX_KIND_PROD, OLC_REDX_KIND_SUM };
#define OLC_REDX_LANES 16
typedef void (*olc_redx_rows_fn)(const void *x, void *out, int64_t R, int64_t a0, int64_t a1);
typedef void (*olc_redx_cols_fn)(const void *x, void *out, int64_t R, int64_t B, int64_t b0, int64_t b1);
typedef struct {
    olc_redx_rows_fn rows[4];  /* by kind */
    olc_redx_cols_fn cols[4];
} olc_redx_fns;

#define OLC_REDX_LOAD_SAME(v) (v)
#define OLC_REDX_STORE_SAME(v) (v)
#define OLC_REDX_MAX(a, v) ((v) > (a) ? (v) : (a))
#define OLC_REDX_MIN(a, v) ((v) < (a) ? (v) : (a))
#define OLC_REDX_MUL(a, v) ((a) * (v))
#define OLC_REDX_ADD(a, v) ((a) + (v))
#define OLC_REDX_ISNAN(v) ((v) != (v))
#define OLC_REDX_NONAN(v) 0
#define OLC_BODY "reduce/olc_reduce_ext.h"
#include "common/olc_each_level.h"

/* Column of the level tables olc_redx_fns_<level> (reduce/olc_reduce_ext.h);
 * -1 for a type without reductions here.  A bool is a uint8. */
static int olc_redx_type_index(int dtype) {
    switch (dtype) {
    case OLC_FLOAT: return 0;
    case OLC_DOUBLE: return 1;
    case OLC_FLOAT16: return 2;
    case OLC_BFLOAT16: return 3;
    case OLC_INT8: return 4;
    case OLC_UINT8: case OLC_BOOL: return 5;
    case OLC_INT32: return 6;
    case OLC_UINT32: return 7;
    case OLC_INT64: return 8;
    case OLC_UINT64: return 9;
    default: return -1;
    }
}
/* The functions of a type at a level (NULL: none). */
static const olc_redx_fns *olc_redx_table(int kind, int dtype, int level) {
    int t = olc_redx_type_index(dtype);
    if (t < 0 || kind < OLC_REDX_KIND_MAX || kind > OLC_REDX_KIND_SUM) return NULL;
    level = olc_build_level(level);
    return &OLC_LEVEL_FN(level, olc_redx_fns)[t];
}
static olc_redx_rows_fn olc_redx_rows_select(int kind, int dtype, int level) {
    const olc_redx_fns *f = olc_redx_table(kind, dtype, level);
    return f ? f->rows[kind] : NULL;
}
static olc_redx_cols_fn olc_redx_cols_select(int kind, int dtype, int level) {
    const olc_redx_fns *f = olc_redx_table(kind, dtype, level);
    return f ? f->cols[kind] : NULL;
}

#endif
