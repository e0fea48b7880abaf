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
 * rows [r0, r1) of an olc_sn_args; dtype is an olc_types.h element type
 * (OLC_FLOAT, OLC_FLOAT16, OLC_BFLOAT16).  Rows are independent, so any
 * split over threads gives the same bits.
 *
 * The row functions olc_sn_{ln,rms}_<type>_<level> come from two bodies
 * included per element type and norm: olc_skip_norm_scalar_rows.h (the
 * scalar twins) and olc_skip_norm_vec_rows.h (AVX2 and AVX-512, through the
 * level's vector vocabulary OLC_SN_<level>_<op> below).
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
#include "common/olc_level.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

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

/* Element type by name (f32, f16, bf16), as the bodies use it. */
typedef float olc_sn_t_f32;
typedef uint16_t olc_sn_t_f16;
typedef uint16_t olc_sn_t_bf16;

/* The statistics of a row from its sums: shared by every level. */
static inline float olc_sn_inv_(float sum_sq, int64_t H, float eps) {
    return 1.0f / sqrtf(sum_sq / (float)H + eps);
}


/* ---- the vector vocabulary of a level (OLC_SN_<level>_<op>), which the
 * vector body reaches as OLC_SN_VT, OLC_SN_W, OLC_SN_VLD, OLC_SN_VADD, ... ---- */
#if OLC_X86
#define OLC_SN_avx2_VT __m256
#define OLC_SN_avx2_W 8
#define OLC_SN_avx2_LD(p) OLC_CAT(OLC_CAT(olc_ld, OLC_SN_TN), avx2)(p)
#define OLC_SN_avx2_ST(p, v) OLC_CAT(OLC_CAT(olc_st, OLC_SN_TN), avx2)(p, v)
#define OLC_SN_avx2_ADD _mm256_add_ps
#define OLC_SN_avx2_SUB _mm256_sub_ps
#define OLC_SN_avx2_MUL _mm256_mul_ps
#define OLC_SN_avx2_FMA _mm256_fmadd_ps
#define OLC_SN_avx2_SET1 _mm256_set1_ps
#define OLC_SN_avx2_ZERO _mm256_setzero_ps
#define OLC_SN_avx2_HSUM olc_hsum_ps_avx2
#endif
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_SN_avx512_VT __m512
#define OLC_SN_avx512_W 16
#define OLC_SN_avx512_LD(p) OLC_CAT(OLC_CAT(olc_ld, OLC_SN_TN), avx512)(p, 0xffff)
#define OLC_SN_avx512_ST(p, v) OLC_CAT(OLC_CAT(olc_st, OLC_SN_TN), avx512)(p, 0xffff, v)
#define OLC_SN_avx512_ADD _mm512_add_ps
#define OLC_SN_avx512_SUB _mm512_sub_ps
#define OLC_SN_avx512_MUL _mm512_mul_ps
#define OLC_SN_avx512_FMA _mm512_fmadd_ps
#define OLC_SN_avx512_SET1 _mm512_set1_ps
#define OLC_SN_avx512_ZERO _mm512_setzero_ps
#define OLC_SN_avx512_HSUM _mm512_reduce_add_ps
#endif

/* What the bodies use: OLC_SN_TN the element type's name, OLC_SN_T its C
 * type; float32 (the only 4-byte type) keeps v in an output row. */
#define OLC_SN_T OLC_CAT(olc_sn_t, OLC_SN_TN)
#define OLC_SN_F32 (sizeof(OLC_SN_T) == sizeof(float))
#define OLC_SN_FN(name) OLC_FN(OLC_CAT(OLC_CAT(name, OLC_SN_NORM), OLC_SN_TN))
#define OLC_SN_LDF OLC_CAT(olc_sn_ldf, OLC_SN_TN)
#define OLC_SN_STF OLC_CAT(olc_sn_stf, OLC_SN_TN)
#define OLC_SN_VOP(op) OLC_CAT(OLC_CAT(OLC_SN, OLC_LVL), op)
#define OLC_SN_VT OLC_SN_VOP(VT)
#define OLC_SN_W OLC_SN_VOP(W)
#define OLC_SN_VLD OLC_SN_VOP(LD)
#define OLC_SN_VST OLC_SN_VOP(ST)
#define OLC_SN_VADD OLC_SN_VOP(ADD)
#define OLC_SN_VSUB OLC_SN_VOP(SUB)
#define OLC_SN_VMUL OLC_SN_VOP(MUL)
#define OLC_SN_VFMA OLC_SN_VOP(FMA)
#define OLC_SN_VSET1 OLC_SN_VOP(SET1)
#define OLC_SN_VZERO OLC_SN_VOP(ZERO)
#define OLC_SN_VHSUM OLC_SN_VOP(HSUM)
/* The residual v of the W elements from i, in a row function's scope. */
#define OLC_SN_VSUM(i) ({ OLC_SN_VT v_ = OLC_SN_VADD(OLC_SN_VLD(x + (i)), OLC_SN_VLD(s + (i))); if (bi) v_ = OLC_SN_VADD(v_, OLC_SN_VLD(bi + (i))); v_; })

/* ---- the row functions, per level and type ---- */
#define OLC_BODY "skip_norm/olc_skip_norm_vec.h"
#define OLC_BODY_SCALAR "skip_norm/olc_skip_norm_scalar.h"
#include "common/olc_each_level.h"

/* ---- selection ---- */

/* The level the function for dtype runs at: every type has every level. */
static inline int olc_sn_level(int dtype, int level) {
    (void)dtype;
    return olc_build_level(level);
}

/* The row function for dtype at the highest level <= level; NULL for an
 * unsupported dtype. */
static olc_sn_fn olc_sn_select(int dtype, int level, int simplified) {
    /* [type: float, float16, bfloat16][simplified] */
    static const olc_sn_fn fns_scalar[3][2] = {
        {olc_sn_ln_f32_scalar, olc_sn_rms_f32_scalar},
        {olc_sn_ln_f16_scalar, olc_sn_rms_f16_scalar},
        {olc_sn_ln_bf16_scalar, olc_sn_rms_bf16_scalar},
    };
#if OLC_X86
    static const olc_sn_fn fns_avx2[3][2] = {
        {olc_sn_ln_f32_avx2, olc_sn_rms_f32_avx2},
        {olc_sn_ln_f16_avx2, olc_sn_rms_f16_avx2},
        {olc_sn_ln_bf16_avx2, olc_sn_rms_bf16_avx2},
    };
#endif
#if OLC_X86 && OLC_HAVE_AVX512
    static const olc_sn_fn fns_avx512[3][2] = {
        {olc_sn_ln_f32_avx512, olc_sn_rms_f32_avx512},
        {olc_sn_ln_f16_avx512, olc_sn_rms_f16_avx512},
        {olc_sn_ln_bf16_avx512, olc_sn_rms_bf16_avx512},
    };
#endif
    int t = dtype == OLC_FLOAT ? 0 : dtype == OLC_FLOAT16 ? 1 : dtype == OLC_BFLOAT16 ? 2 : -1;
    if (t < 0) return (olc_sn_fn)0;
    level = olc_sn_level(dtype, level);
    return OLC_LEVEL_FN(level, fns)[t][simplified != 0];
}

#endif
