/* Fused residual add + last-axis normalization: the rows of
 * com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization.
 *
 * For each row r of H elements:
 *   v     = input[r] + skip[r % skip_rows] (+ bias)      (in float32)
 *   LN:   mean = sum(v) / H, var = sum((v - mean)^2) / H,
 *         y = (v - mean) * inv * gamma (+ beta),  inv = 1 / sqrt(var + eps)
 *   RMS:  inv = 1 / sqrt(sum(v * v) / H + eps), y = v * inv * gamma, mean = 0
 * with optional outputs sum (v in the input type), mean and inv (float32).
 *
 * API: olc_sn_select(dtype, level, simplified) -> olc_sn_fn, which runs the
 * rows [r0, r1) of an olc_sn_args; dtype is the ONNX element type (FLOAT,
 * FLOAT16, BFLOAT16).  Rows are independent, so any split over threads
 * gives the same bits.
 *
 * No scratch memory: float32 keeps v in an output row (the sum output when
 * requested, else y, which pass 3 overwrites in place); float16 and bfloat16
 * recompute the widened v in each pass from the inputs (which stay in L1/L2
 * for the row sizes of real models), so statistics and y come from the
 * unrounded float32 residual and y is rounded once.
 *
 * The variance is two-pass (centred, with the mean's rounding error added
 * back): ONNX Runtime's E[v^2] - mean^2 loses every digit on rows whose mean
 * is large against their spread.
 */
#ifndef OLC_SKIP_NORM_H
#define OLC_SKIP_NORM_H
#include <math.h>
#include <stdint.h>
#include "common/olc_cpu.h"
#include "common/olc_types.h"
#include "common/olc_math.h"


typedef struct {
    const void *x, *skip, *gamma, *beta, *bias; /* beta, bias: NULL when absent */
    void *y, *sum;                              /* sum: NULL when not requested */
    float *mean, *inv;                          /* NULL when not requested */
    int64_t H, skip_rows;
    float eps;
} olc_sn_args;

typedef void (*olc_sn_fn)(const olc_sn_args *a, int64_t r0, int64_t r1);

/* ---- per-element loads and stores as float32 ---- */
static inline float olc_sn_ldf_f32(const float *p) { return *p; }
static inline float olc_sn_ldf_f16(const uint16_t *p) { return olc_h2f(*p); }
static inline float olc_sn_ldf_bf16(const uint16_t *p) { return olc_bf2f(*p); }
static inline void olc_sn_stf_f32(float *p, float v) { *p = v; }
static inline void olc_sn_stf_f16(uint16_t *p, float v) { *p = olc_f2h(v); }
static inline void olc_sn_stf_bf16(uint16_t *p, float v) { *p = olc_f2bf(v); }

/* The statistics of a row from its sums: shared by every level. */
static inline float olc_sn_inv_(float sum_sq, int64_t H, float eps) {
    return 1.0f / sqrtf(sum_sq / (float)H + eps);
}

/* Scalar parts of a row from element i0 on (the whole row for the scalar
 * twin, the tail after the vectors otherwise).  F32: v is kept in `keep`
 * and read back; else recomputed. */
#define OLC_SN_V_(tname, i)                                                   \
    (bi ? olc_sn_ldf_##tname(x + (i)) + olc_sn_ldf_##tname(s + (i)) + olc_sn_ldf_##tname(bi + (i)) \
        : olc_sn_ldf_##tname(x + (i)) + olc_sn_ldf_##tname(s + (i)))
#define OLC_SN_RV_(tname, F32, i) ((F32) ? olc_sn_ldf_##tname(keep + (i)) : OLC_SN_V_(tname, i))

/* Pass 1: adds sum(v) (LN) or sum(v*v) (RMS) to acc, storing v in keep. */
#define OLC_SN_TAIL_PASS1_(tname, SIMPLE, i0, acc)                            \
    for (int64_t i = (i0); i < H; ++i) {                                      \
        float v = OLC_SN_V_(tname, i);                                        \
        if (keep) olc_sn_stf_##tname(keep + i, v);                            \
        acc += (SIMPLE) ? v * v : v;                                          \
    }
#define OLC_SN_TAIL_PASS2_(tname, F32, i0, dsum, dsq)                         \
    for (int64_t i = (i0); i < H; ++i) {                                      \
        float d = OLC_SN_RV_(tname, F32, i) - mean;                           \
        dsum += d;                                                            \
        dsq += d * d;                                                         \
    }
#define OLC_SN_TAIL_PASS3_(tname, F32, SIMPLE, i0)                            \
    for (int64_t i = (i0); i < H; ++i) {                                      \
        float v = OLC_SN_RV_(tname, F32, i);                                  \
        float t = (SIMPLE) ? v * inv : (v - mean) * inv;                      \
        float o = t * olc_sn_ldf_##tname(g + i);                              \
        if (be) o += olc_sn_ldf_##tname(be + i);                              \
        olc_sn_stf_##tname(y + i, o);                                         \
    }

/* Corrected two-pass statistics: the deviations d = v - mean from the
 * first-pass mean also sum to that mean's rounding error, which is added
 * back (the sequential float32 sum of a long row of large values is off by
 * many ulps of the spread). */
#define OLC_SN_CORRECT_(dsum, dsq)                                            \
    {                                                                         \
        float shift = (dsum) / (float)H;                                      \
        mean += shift;                                                        \
        float var = (dsq) / (float)H - shift * shift;                         \
        inv = 1.0f / sqrtf((var < 0.0f ? 0.0f : var) + a->eps); /* NaN stays */ \
    }

/* Pointers of row r, shared by every level. */
#define OLC_SN_ROW_(T, F32)                                                   \
    const T *x = (const T *)a->x + r * H;                                     \
    const T *s = (const T *)a->skip + (r % a->skip_rows) * H;                 \
    T *y = (T *)a->y + r * H;                                                 \
    T *keep = a->sum ? (T *)a->sum + r * H : ((F32) ? y : (T *)0);

#define OLC_SN_STATS_(SIMPLE)                                                 \
    if (a->mean) a->mean[r] = (SIMPLE) ? 0.0f : mean;                         \
    if (a->inv) a->inv[r] = inv;

/* ---- scalar twin ---- */
#define OLC_SN_SCALAR(tname, T, F32, SIMPLE, suffix)                          \
    static void olc_sn_##tname##_scalar##suffix(const olc_sn_args *a, int64_t r0, int64_t r1) { \
        const int64_t H = a->H;                                               \
        const T *g = (const T *)a->gamma, *be = (const T *)a->beta, *bi = (const T *)a->bias; \
        for (int64_t r = r0; r < r1; ++r) {                                   \
            OLC_SN_ROW_(T, F32)                                               \
            float acc = 0.0f, mean = 0.0f, inv;                               \
            OLC_SN_TAIL_PASS1_(tname, SIMPLE, 0, acc)                         \
            if (SIMPLE) {                                                     \
                inv = olc_sn_inv_(acc, H, a->eps);                            \
            } else {                                                          \
                mean = acc / (float)H;                                        \
                float dsum = 0.0f, dsq = 0.0f;                                \
                OLC_SN_TAIL_PASS2_(tname, F32, 0, dsum, dsq)                  \
                OLC_SN_CORRECT_(dsum, dsq)                                    \
            }                                                                 \
            OLC_SN_TAIL_PASS3_(tname, F32, SIMPLE, 0)                         \
            OLC_SN_STATS_(SIMPLE)                                             \
        }                                                                     \
    }

/* ---- vector levels: W lanes, two accumulators, scalar tail ----
 * The level supplies VT (vector type), W, and the macros
 * OLC_SN_<lvl>_LD(tname, p), _ST(tname, p, v), _ADD, _SUB, _MUL, _FMA(a, b, c),
 * _SET1(f), _ZERO, _HSUM(v). */
#define OLC_SN_VEC(tname, T, F32, SIMPLE, suffix, lvl, VT, W, TARGET)        \
    static TARGET void olc_sn_##tname##_##lvl##suffix(const olc_sn_args *a, int64_t r0, int64_t r1) { \
        const int64_t H = a->H, hv = H - H % (W);                             \
        const T *g = (const T *)a->gamma, *be = (const T *)a->beta, *bi = (const T *)a->bias; \
        for (int64_t r = r0; r < r1; ++r) {                                   \
            OLC_SN_ROW_(T, F32)                                               \
            VT acc0 = OLC_SN_##lvl##_ZERO, acc1 = OLC_SN_##lvl##_ZERO;        \
            int64_t i = 0;                                                    \
            for (; i + 2 * (W) <= hv; i += 2 * (W)) {                         \
                VT v0 = OLC_SN_##lvl##_VSUM(tname, i);                        \
                VT v1 = OLC_SN_##lvl##_VSUM(tname, i + (W));                  \
                if (keep) {                                                   \
                    OLC_SN_##lvl##_ST(tname, keep + i, v0);                   \
                    OLC_SN_##lvl##_ST(tname, keep + i + (W), v1);             \
                }                                                             \
                if (SIMPLE) {                                                 \
                    acc0 = OLC_SN_##lvl##_FMA(v0, v0, acc0);                  \
                    acc1 = OLC_SN_##lvl##_FMA(v1, v1, acc1);                  \
                } else {                                                      \
                    acc0 = OLC_SN_##lvl##_ADD(acc0, v0);                      \
                    acc1 = OLC_SN_##lvl##_ADD(acc1, v1);                      \
                }                                                             \
            }                                                                 \
            for (; i < hv; i += (W)) {                                        \
                VT v0 = OLC_SN_##lvl##_VSUM(tname, i);                        \
                if (keep) OLC_SN_##lvl##_ST(tname, keep + i, v0);             \
                acc0 = (SIMPLE) ? OLC_SN_##lvl##_FMA(v0, v0, acc0) : OLC_SN_##lvl##_ADD(acc0, v0); \
            }                                                                 \
            float tail = 0.0f, mean = 0.0f, inv;                              \
            OLC_SN_TAIL_PASS1_(tname, SIMPLE, hv, tail)                       \
            float total = OLC_SN_##lvl##_HSUM(OLC_SN_##lvl##_ADD(acc0, acc1)) + tail; \
            if (SIMPLE) {                                                     \
                inv = olc_sn_inv_(total, H, a->eps);                          \
            } else {                                                          \
                mean = total / (float)H;                                      \
                VT vm = OLC_SN_##lvl##_SET1(mean);                            \
                VT q0 = OLC_SN_##lvl##_ZERO, q1 = OLC_SN_##lvl##_ZERO;        \
                acc0 = acc1 = OLC_SN_##lvl##_ZERO;                            \
                for (i = 0; i + 2 * (W) <= hv; i += 2 * (W)) {                \
                    VT d0 = OLC_SN_##lvl##_SUB(OLC_SN_##lvl##_RV(tname, F32, i), vm); \
                    VT d1 = OLC_SN_##lvl##_SUB(OLC_SN_##lvl##_RV(tname, F32, i + (W)), vm); \
                    acc0 = OLC_SN_##lvl##_ADD(acc0, d0);                      \
                    acc1 = OLC_SN_##lvl##_ADD(acc1, d1);                      \
                    q0 = OLC_SN_##lvl##_FMA(d0, d0, q0);                      \
                    q1 = OLC_SN_##lvl##_FMA(d1, d1, q1);                      \
                }                                                             \
                for (; i < hv; i += (W)) {                                    \
                    VT d0 = OLC_SN_##lvl##_SUB(OLC_SN_##lvl##_RV(tname, F32, i), vm); \
                    acc0 = OLC_SN_##lvl##_ADD(acc0, d0);                      \
                    q0 = OLC_SN_##lvl##_FMA(d0, d0, q0);                      \
                }                                                             \
                float dsum = 0.0f, dsq = 0.0f;                                \
                OLC_SN_TAIL_PASS2_(tname, F32, hv, dsum, dsq)                 \
                dsum += OLC_SN_##lvl##_HSUM(OLC_SN_##lvl##_ADD(acc0, acc1));  \
                dsq += OLC_SN_##lvl##_HSUM(OLC_SN_##lvl##_ADD(q0, q1));       \
                OLC_SN_CORRECT_(dsum, dsq)                                    \
            }                                                                 \
            {                                                                 \
                VT vi = OLC_SN_##lvl##_SET1(inv), vm = OLC_SN_##lvl##_SET1(mean); \
                for (i = 0; i < hv; i += (W)) {                               \
                    VT v = OLC_SN_##lvl##_RV(tname, F32, i);                  \
                    VT t = (SIMPLE) ? OLC_SN_##lvl##_MUL(v, vi)               \
                                    : OLC_SN_##lvl##_MUL(OLC_SN_##lvl##_SUB(v, vm), vi); \
                    VT gv = OLC_SN_##lvl##_LD(tname, g + i);                  \
                    VT o = be ? OLC_SN_##lvl##_FMA(t, gv, OLC_SN_##lvl##_LD(tname, be + i)) \
                              : OLC_SN_##lvl##_MUL(t, gv);                    \
                    OLC_SN_##lvl##_ST(tname, y + i, o);                       \
                }                                                             \
            }                                                                 \
            OLC_SN_TAIL_PASS3_(tname, F32, SIMPLE, hv)                        \
            OLC_SN_STATS_(SIMPLE)                                             \
        }                                                                     \
    }

/* Residual v at element i, as a vector: from the kept row or recomputed. */
#define OLC_SN_VSUM_GEN_(lvl, tname, i)                                      \
    ({ __typeof__(OLC_SN_##lvl##_LD(tname, x + (i))) v_ =                     \
           OLC_SN_##lvl##_ADD(OLC_SN_##lvl##_LD(tname, x + (i)), OLC_SN_##lvl##_LD(tname, s + (i))); \
       if (bi) v_ = OLC_SN_##lvl##_ADD(v_, OLC_SN_##lvl##_LD(tname, bi + (i))); \
       v_; })

#if OLC_X86
#define OLC_SN_avx2_LD(tname, p) olc_ld_##tname##_avx2(p)
#define OLC_SN_avx2_ST(tname, p, v) olc_st_##tname##_avx2(p, v)
#define OLC_SN_avx2_ADD _mm256_add_ps
#define OLC_SN_avx2_SUB _mm256_sub_ps
#define OLC_SN_avx2_MUL _mm256_mul_ps
#define OLC_SN_avx2_FMA _mm256_fmadd_ps
#define OLC_SN_avx2_SET1 _mm256_set1_ps
#define OLC_SN_avx2_ZERO _mm256_setzero_ps()
#define OLC_SN_avx2_HSUM olc_hsum_ps_avx2
#define OLC_SN_avx2_VSUM(tname, i) OLC_SN_VSUM_GEN_(avx2, tname, i)
#define OLC_SN_avx2_RV(tname, F32, i) \
    ((F32) ? OLC_SN_avx2_LD(tname, keep + (i)) : OLC_SN_avx2_VSUM(tname, i))
#endif

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_SN_avx512_LD(tname, p) olc_ld_##tname##_avx512(p, 0xffff)
#define OLC_SN_avx512_ST(tname, p, v) olc_st_##tname##_avx512(p, 0xffff, v)
#define OLC_SN_avx512_ADD _mm512_add_ps
#define OLC_SN_avx512_SUB _mm512_sub_ps
#define OLC_SN_avx512_MUL _mm512_mul_ps
#define OLC_SN_avx512_FMA _mm512_fmadd_ps
#define OLC_SN_avx512_SET1 _mm512_set1_ps
#define OLC_SN_avx512_ZERO _mm512_setzero_ps()
#define OLC_SN_avx512_HSUM _mm512_reduce_add_ps
#define OLC_SN_avx512_VSUM(tname, i) OLC_SN_VSUM_GEN_(avx512, tname, i)
#define OLC_SN_avx512_RV(tname, F32, i) \
    ((F32) ? OLC_SN_avx512_LD(tname, keep + (i)) : OLC_SN_avx512_VSUM(tname, i))
#endif

/* Stamp every (type, norm) for one level. */
OLC_SN_SCALAR(f32, float, 1, 0, _ln)
OLC_SN_SCALAR(f32, float, 1, 1, _rms)
OLC_SN_SCALAR(f16, uint16_t, 0, 0, _ln)
OLC_SN_SCALAR(f16, uint16_t, 0, 1, _rms)
OLC_SN_SCALAR(bf16, uint16_t, 0, 0, _ln)
OLC_SN_SCALAR(bf16, uint16_t, 0, 1, _rms)
#define OLC_SN_VEC_ALL_(lvl, VT, W, TARGET)                                   \
    OLC_SN_VEC(f32, float, 1, 0, _ln, lvl, VT, W, TARGET)                     \
    OLC_SN_VEC(f32, float, 1, 1, _rms, lvl, VT, W, TARGET)                    \
    OLC_SN_VEC(f16, uint16_t, 0, 0, _ln, lvl, VT, W, TARGET)                  \
    OLC_SN_VEC(f16, uint16_t, 0, 1, _rms, lvl, VT, W, TARGET)                 \
    OLC_SN_VEC(bf16, uint16_t, 0, 0, _ln, lvl, VT, W, TARGET)                 \
    OLC_SN_VEC(bf16, uint16_t, 0, 1, _rms, lvl, VT, W, TARGET)
#if OLC_X86
OLC_SN_VEC_ALL_(avx2, __m256, 8, OLC_TARGET_AVX2)
#endif
#if OLC_X86 && OLC_HAVE_AVX512
OLC_SN_VEC_ALL_(avx512, __m512, 16, OLC_TARGET_AVX512)
#endif

/* The level the function for dtype runs at: every type has every level. */
static inline int olc_sn_level(int dtype, int level) {
    (void)dtype;
#if OLC_X86 && OLC_HAVE_AVX512
    return level >= OLC_AVX512 ? OLC_AVX512 : level >= OLC_AVX2 ? OLC_AVX2 : OLC_SCALAR;
#elif OLC_X86
    return level >= OLC_AVX2 ? OLC_AVX2 : OLC_SCALAR;
#else
    (void)level;
    return OLC_SCALAR;
#endif
}

#define OLC_SN_PICK_(tname, lvl, simplified) \
    ((simplified) ? olc_sn_##tname##_##lvl##_rms : olc_sn_##tname##_##lvl##_ln)

#define OLC_SN_PICK_TYPE_(lvl, dtype, simplified)                             \
    switch (dtype) {                                                          \
    case OLC_FLOAT: return OLC_SN_PICK_(f32, lvl, simplified);             \
    case OLC_FLOAT16: return OLC_SN_PICK_(f16, lvl, simplified);           \
    case OLC_BFLOAT16: return OLC_SN_PICK_(bf16, lvl, simplified);         \
    default: return (olc_sn_fn)0;                                             \
    }

/* The row function for dtype at the highest level <= level; NULL for an
 * unsupported dtype. */
static olc_sn_fn olc_sn_select(int dtype, int level, int simplified) {
    switch (olc_sn_level(dtype, level)) {
#if OLC_X86 && OLC_HAVE_AVX512
    case OLC_AVX512: OLC_SN_PICK_TYPE_(avx512, dtype, simplified)
#endif
#if OLC_X86
    case OLC_AVX2: OLC_SN_PICK_TYPE_(avx2, dtype, simplified)
#endif
    default: OLC_SN_PICK_TYPE_(scalar, dtype, simplified)
    }
}

#endif
