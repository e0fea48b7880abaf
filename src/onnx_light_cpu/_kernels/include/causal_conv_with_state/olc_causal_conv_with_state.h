/* Depthwise causal convolution over time with a carried state
 * (CausalConvWithState).
 *
 * Per batch b and channel c, with K taps, dilation d and SL = (K - 1) d, the
 * sequence the convolution reads is the virtual concatenation
 * v = [state (SL positions, zeros without a state), x (L positions)]:
 *   y[t] = act(bias[c] + sum_j w[c, j] v[t + SL - (K - 1 - j) d]),  j = 0..K-1
 *   present[i] = v[L + i],  i = 0..SL-1
 * v is never built: positions below SL read the state, the others x.
 * act is the identity or SiLU (y sigmoid(y)).
 *
 * Layouts: channels-first x/y [B, C, L], state [B, C, SL]; channels-last
 * x/y [B, L, C], state [B, SL, C].  Weights are float32 [K, C] (tap-major),
 * the bias float32 [C].  Arithmetic is float32 for every element type, in
 * the same order at every level (bias, then taps j = 0..K-1, no FMA
 * contraction), rounded once at the store.
 *
 * Channels-first at the vector levels: the outputs that read the state (and
 * whole short sequences, so all of a decode step) are computed 8 or 16 rows
 * at a time, one row per lane (gathers); the rest of each row is vectorised
 * over time.  Channels-last is vectorised over channels, one whole row of
 * x after another.  The scalar level is the plain loop.
 *
 * A task is one (b, c) row channels-first, one (b, OLC_CCONV_TILE time
 * steps) channels-last; olc_cconv_select(dtype, channels_last, level)
 * returns the task-range function (dtype: OLC_FLOAT, OLC_FLOAT16 or
 * OLC_BFLOAT16).
 *
 * Layout of this file: the shared helpers and each vector level's
 * primitives (written out), then two body files (common/olc_level.h):
 * olc_causal_conv_with_state_rows.h per element type (the row helpers and
 * the scalar level) and olc_causal_conv_with_state_vec.h per vector level
 * and element type.  OLC_CCONV_FN(name) is name_<type>_<level>.
 */
#ifndef OLC_CAUSAL_CONV_WITH_STATE_H
#define OLC_CAUSAL_CONV_WITH_STATE_H

#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

/* Channels-first sequences up to SL + OLC_CCONV_SHORT positions go whole
 * through the row-block path. */
#define OLC_CCONV_SHORT 16
/* The block head applies when v's head fits the stack buffers. */
#define OLC_CCONV_MAX_SL 64
#define OLC_CCONV_MAX_K 65
/* Reach (K - 1) d the body's last partial vector copies to the stack. */
#define OLC_CCONV_WIN 256
/* Channels-last tasks are (b, OLC_CCONV_TILE time steps), each step over
 * all channels: rows are read whole, in order (a task over a band of
 * channels would read every row in 256-byte pieces 8 KB apart, 3x slower).
 * The first task of a batch also writes its present state. */
#define OLC_CCONV_TILE 8

typedef struct {
    const void *x, *state;  /* state may be NULL: zeros */
    void *y, *present;
    const float *w, *bias;  /* bias may be NULL */
    int64_t B, C, L, K, SL, dil;
    int silu;
} olc_cconv_args;
typedef void (*olc_cconv_fn)(const olc_cconv_args *p, int64_t t0, int64_t t1);

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif

/* Outputs of a channels-first row computed with the rows' lanes: those that
 * read the state, or all of a short sequence. */
static inline int64_t olc_cconv_block_len(int64_t L, int64_t SL) {
    return L <= SL + OLC_CCONV_SHORT ? L : SL;
}
static inline int64_t olc_cconv_cl_tiles(int64_t L) {
    return L > 0 ? (L + OLC_CCONV_TILE - 1) / OLC_CCONV_TILE : 1;
}

static inline float olc_cconv_act_(float v, int silu) { return silu ? v * olc_sigmoidf_(v) : v; }

/* Elements to float32 and back. */
static inline float olc_cconv_ld_f32(float v) { return v; }
static inline float olc_cconv_ld_f16(uint16_t v) { return olc_h2f(v); }
static inline float olc_cconv_ld_bf16(uint16_t v) { return olc_bf2f(v); }
static inline float olc_cconv_st_f32(float v) { return v; }
static inline uint16_t olc_cconv_st_f16(float v) { return olc_f2h(v); }
static inline uint16_t olc_cconv_st_bf16(float v) { return olc_f2bf(v); }

/* ---- the vector levels' primitives ----
 * Per level: the float vector V (olc_cconv_v_<level>, W lanes), the lane
 * mask M, the lane index vector I; set1, ldf/stf (W floats), add, mul,
 * zero, act (identity or SiLU), mask (the first n lanes), ldm (masked
 * float load), idx (lane i * stride); per element type: ldv/stv (W
 * elements as floats) and gather (lane i at base + idx[i], masked). */

#if OLC_X86
typedef __m256 olc_cconv_v_avx2;
typedef __m256i olc_cconv_m_avx2;
typedef __m256i olc_cconv_i_avx2;
static inline OLC_TARGET_AVX2 __m256 olc_cconv_set1_avx2(float v) { return _mm256_set1_ps(v); }
static inline OLC_TARGET_AVX2 __m256 olc_cconv_ldf_avx2(const float *q) { return _mm256_loadu_ps(q); }
static inline OLC_TARGET_AVX2 void olc_cconv_stf_avx2(float *q, __m256 v) { _mm256_storeu_ps(q, v); }
static inline OLC_TARGET_AVX2 __m256 olc_cconv_add_avx2(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
static inline OLC_TARGET_AVX2 __m256 olc_cconv_mul_avx2(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
static inline OLC_TARGET_AVX2 __m256 olc_cconv_zero_avx2(void) { return _mm256_setzero_ps(); }
static inline OLC_TARGET_AVX2 __m256 olc_cconv_act_avx2(__m256 acc, int silu) {
    return silu ? _mm256_mul_ps(acc, olc_sigmoid_ps_avx2(acc)) : acc;
}
static inline OLC_TARGET_AVX2 __m256i olc_cconv_mask_avx2(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline OLC_TARGET_AVX2 __m256 olc_cconv_ldm_avx2(const float *q, __m256i m) {
    return _mm256_maskload_ps(q, m);
}
static inline OLC_TARGET_AVX2 __m256i olc_cconv_idx_avx2(int stride) {
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(stride));
}
static inline OLC_TARGET_AVX2 __m256 olc_cconv_ldv_f32_avx2(const float *q) { return olc_ld_f32_avx2(q); }
static inline OLC_TARGET_AVX2 __m256 olc_cconv_ldv_f16_avx2(const uint16_t *q) { return olc_ld_f16_avx2(q); }
static inline OLC_TARGET_AVX2 __m256 olc_cconv_ldv_bf16_avx2(const uint16_t *q) { return olc_ld_bf16_avx2(q); }
static inline OLC_TARGET_AVX2 void olc_cconv_stv_f32_avx2(float *q, __m256 v) { olc_st_f32_avx2(q, v); }
static inline OLC_TARGET_AVX2 void olc_cconv_stv_f16_avx2(uint16_t *q, __m256 v) { olc_st_f16_avx2(q, v); }
static inline OLC_TARGET_AVX2 void olc_cconv_stv_bf16_avx2(uint16_t *q, __m256 v) { olc_st_bf16_avx2(q, v); }
/* 16-bit types gather 32-bit words (the low half is the element). */
static inline OLC_TARGET_AVX2 __m256i olc_cconv_gather16_avx2(const uint16_t *base, __m256i idx, __m256i m) {
    return _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)(base), idx, m, 2);
}
static inline OLC_TARGET_AVX2 __m256 olc_cconv_gather_f32_avx2(const float *base, __m256i idx, __m256i m) {
    return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, idx, _mm256_castsi256_ps(m), 4);
}
static inline OLC_TARGET_AVX2 __m256 olc_cconv_gather_f16_avx2(const uint16_t *base, __m256i idx, __m256i m) {
    __m256i lo = _mm256_and_si256(olc_cconv_gather16_avx2(base, idx, m), _mm256_set1_epi32(0xffff));
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
}
static inline OLC_TARGET_AVX2 __m256 olc_cconv_gather_bf16_avx2(const uint16_t *base, __m256i idx, __m256i m) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(olc_cconv_gather16_avx2(base, idx, m), 16));
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
typedef __m512 olc_cconv_v_avx512;
typedef __mmask16 olc_cconv_m_avx512;
typedef __m512i olc_cconv_i_avx512;
static inline OLC_TARGET_AVX512 __m512 olc_cconv_set1_avx512(float v) { return _mm512_set1_ps(v); }
static inline OLC_TARGET_AVX512 __m512 olc_cconv_ldf_avx512(const float *q) { return _mm512_loadu_ps(q); }
static inline OLC_TARGET_AVX512 void olc_cconv_stf_avx512(float *q, __m512 v) { _mm512_storeu_ps(q, v); }
static inline OLC_TARGET_AVX512 __m512 olc_cconv_add_avx512(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
static inline OLC_TARGET_AVX512 __m512 olc_cconv_mul_avx512(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
static inline OLC_TARGET_AVX512 __m512 olc_cconv_zero_avx512(void) { return _mm512_setzero_ps(); }
static inline OLC_TARGET_AVX512 __m512 olc_cconv_act_avx512(__m512 acc, int silu) {
    return silu ? _mm512_mul_ps(acc, olc_sigmoid_ps_avx512(acc)) : acc;
}
static inline OLC_TARGET_AVX512 __mmask16 olc_cconv_mask_avx512(int64_t n) { return olc_tail_mask16(n); }
static inline OLC_TARGET_AVX512 __m512 olc_cconv_ldm_avx512(const float *q, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, q);
}
static inline OLC_TARGET_AVX512 __m512i olc_cconv_idx_avx512(int stride) {
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(stride));
}
static inline OLC_TARGET_AVX512 __m512 olc_cconv_ldv_f32_avx512(const float *q) { return _mm512_loadu_ps(q); }
static inline OLC_TARGET_AVX512 __m512 olc_cconv_ldv_f16_avx512(const uint16_t *q) {
    return olc_ld_f16_avx512(q, 0xffff);
}
static inline OLC_TARGET_AVX512 __m512 olc_cconv_ldv_bf16_avx512(const uint16_t *q) {
    return olc_ld_bf16_avx512(q, 0xffff);
}
static inline OLC_TARGET_AVX512 void olc_cconv_stv_f32_avx512(float *q, __m512 v) { _mm512_storeu_ps(q, v); }
static inline OLC_TARGET_AVX512 void olc_cconv_stv_f16_avx512(uint16_t *q, __m512 v) {
    olc_st_f16_avx512(q, 0xffff, v);
}
static inline OLC_TARGET_AVX512 void olc_cconv_stv_bf16_avx512(uint16_t *q, __m512 v) {
    olc_st_bf16_avx512(q, 0xffff, v);
}
static inline OLC_TARGET_AVX512 __m512i olc_cconv_gather16_avx512(const uint16_t *base, __m512i idx, __mmask16 m) {
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, (const void *)(base), 2);
}
static inline OLC_TARGET_AVX512 __m512 olc_cconv_gather_f32_avx512(const float *base, __m512i idx, __mmask16 m) {
    return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, (const void *)(base), 4);
}
static inline OLC_TARGET_AVX512 __m512 olc_cconv_gather_f16_avx512(const uint16_t *base, __m512i idx, __mmask16 m) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(olc_cconv_gather16_avx512(base, idx, m)));
}
static inline OLC_TARGET_AVX512 __m512 olc_cconv_gather_bf16_avx512(const uint16_t *base, __m512i idx, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(olc_cconv_gather16_avx512(base, idx, m), 16));
}
#endif

/* ---- the bodies ---- */

#define OLC_CCONV_TFN(name) OLC_CAT(name, OLC_CCONV_TN)
#define OLC_CCONV_FN(name) OLC_FN(OLC_CAT(name, OLC_CCONV_TN))

/* Per element type: the row helpers and the scalar level. */
#define OLC_LVL scalar
#define OLC_LVL_ATTR
#define OLC_CCONV_T float
#define OLC_CCONV_TN f32
#include "causal_conv_with_state/olc_causal_conv_with_state_rows.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#define OLC_CCONV_T uint16_t
#define OLC_CCONV_TN f16
#include "causal_conv_with_state/olc_causal_conv_with_state_rows.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#define OLC_CCONV_T uint16_t
#define OLC_CCONV_TN bf16
#include "causal_conv_with_state/olc_causal_conv_with_state_rows.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#undef OLC_LVL
#undef OLC_LVL_ATTR

/* Per vector level and element type.  OLC_CCONV_W: lanes;
 * OLC_CCONV_MASKED: 1 where partial vectors are masked (AVX-512), 0 where
 * they go through stack buffers (AVX2). */
#if OLC_X86
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_CCONV_W 8
#define OLC_CCONV_MASKED 0
#define OLC_CCONV_T float
#define OLC_CCONV_TN f32
#include "causal_conv_with_state/olc_causal_conv_with_state_vec.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#define OLC_CCONV_T uint16_t
#define OLC_CCONV_TN f16
#include "causal_conv_with_state/olc_causal_conv_with_state_vec.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#define OLC_CCONV_T uint16_t
#define OLC_CCONV_TN bf16
#include "causal_conv_with_state/olc_causal_conv_with_state_vec.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#undef OLC_CCONV_W
#undef OLC_CCONV_MASKED
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_CCONV_W 16
#define OLC_CCONV_MASKED 1
#define OLC_CCONV_T float
#define OLC_CCONV_TN f32
#include "causal_conv_with_state/olc_causal_conv_with_state_vec.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#define OLC_CCONV_T uint16_t
#define OLC_CCONV_TN f16
#include "causal_conv_with_state/olc_causal_conv_with_state_vec.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#define OLC_CCONV_T uint16_t
#define OLC_CCONV_TN bf16
#include "causal_conv_with_state/olc_causal_conv_with_state_vec.h"
#undef OLC_CCONV_T
#undef OLC_CCONV_TN
#undef OLC_CCONV_W
#undef OLC_CCONV_MASKED
#undef OLC_LVL
#undef OLC_LVL_ATTR
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static int olc_cconv_level(int level) { return olc_build_level(level); }

/* Task-range functions per level: [type][channels_last], types in the
 * order of olc_cconv_type_. */
static const olc_cconv_fn olc_cconv_fns_scalar[3][2] = {
    {olc_cconv_cf_f32_scalar, olc_cconv_cl_f32_scalar},
    {olc_cconv_cf_f16_scalar, olc_cconv_cl_f16_scalar},
    {olc_cconv_cf_bf16_scalar, olc_cconv_cl_bf16_scalar},
};
#if OLC_X86
static const olc_cconv_fn olc_cconv_fns_avx2[3][2] = {
    {olc_cconv_cf_f32_avx2, olc_cconv_cl_f32_avx2},
    {olc_cconv_cf_f16_avx2, olc_cconv_cl_f16_avx2},
    {olc_cconv_cf_bf16_avx2, olc_cconv_cl_bf16_avx2},
};
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static const olc_cconv_fn olc_cconv_fns_avx512[3][2] = {
    {olc_cconv_cf_f32_avx512, olc_cconv_cl_f32_avx512},
    {olc_cconv_cf_f16_avx512, olc_cconv_cl_f16_avx512},
    {olc_cconv_cf_bf16_avx512, olc_cconv_cl_bf16_avx512},
};
#endif

/* The type's row in the tables, or -1. */
static int olc_cconv_type_(int dtype) {
    switch (dtype) {
    case OLC_FLOAT: return 0;
    case OLC_FLOAT16: return 1;
    case OLC_BFLOAT16: return 2;
    default: return -1;
    }
}

static olc_cconv_fn olc_cconv_select(int dtype, int channels_last, int level) {
    const int t = olc_cconv_type_(dtype), cl = channels_last ? 1 : 0;
    if (t < 0) return NULL;
    return OLC_LEVEL_FN(olc_cconv_level(level), olc_cconv_fns)[t][cl];
}

#endif /* OLC_CAUSAL_CONV_WITH_STATE_H */
