/* The attention engine shared by ai.onnx Attention, com.microsoft
 * MultiHeadAttention and GroupQueryAttention.
 *
 *   score[s, t] = scale * dot(q[s], k[t])          (float32)
 *   softcap / bias in the caller's order, keys key_begin <= t < key_end only
 *   out[s] = softmax(score (+ sink logit)) @ v      (float32, rounded once)
 *
 * Work is cut into tasks of (batch, kv head, block of its query heads,
 * block of query positions): the rows of a task share one kv head, so a K/V
 * tile is loaded (and converted from float16/bfloat16) once for all of
 * them.  Each task walks its key range in tiles of OLC_ATTN_TB keys with an
 * online softmax (running max, sum and accumulator per row), so scratch is
 * bounded whatever S and T.  Decode (S == 1) also splits the keys into
 * chunks of OLC_ATTN_KC: each (task, chunk) leaves a partial (max, sum,
 * acc) and a second pass combines the chunks in order.  Tile and chunk
 * sizes are constants, so no result depends on the thread count.
 *
 * Per tile, the scores of all the task's rows come first (AVX-512: 4 rows x
 * 4 keys per register block, 16 FMA chains over the head size reduced by
 * one shuffle tree), then each row's softmax update (keys outside its
 * range weigh 0), then P.V for the rows (4 rows x 64 columns of the
 * accumulators held in registers while the tile's keys stream by).  With
 * OLC_ATTN_WIDE_MIN rows or more (prefill, MultiHeadAttention) the AVX-512
 * level takes the wide path instead: tiles of OLC_ATTN_WTB keys transposed
 * once into 64-key panels, scores as an outer-product GEMM (6 rows x 64
 * keys in registers, no horizontal sums), the rows' rescale factors with
 * one vector exp, and P.V with 6 rows x 64 columns in registers that
 * applies the rescale as it loads the accumulators.  q is
 * scaled once at load: scores are (scale q).k.  With ``pk`` set the past
 * cache is copied into k/v first (inside each decode chunk's task, so the
 * rows are read while still in cache).  Every helper has a scalar twin.
 * A row with a NaN score is NaN (its running max is set to NaN, which no
 * later tile replaces); a row with no key, or only -inf scores, is zeros.
 *
 * Layout of this file: the per-level helpers (load/store of OLC_FLOAT,
 * OLC_FLOAT16 and OLC_BFLOAT16 rows, qk, pv, max, expsum, tanh and their
 * blocks), the AVX-512 wide tile, then the task and the combine, written
 * once in olc_attention_task.h and included per level (common/olc_level.h).
 * olc_attn_append_rows fills GroupQueryAttention's present cache.
 */
#ifndef OLC_ATTENTION_H
#define OLC_ATTENTION_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

#define OLC_ATTN_TB 64      /* keys per tile */
#define OLC_ATTN_KC 256     /* keys per decode chunk */
#define OLC_ATTN_RMAX 64    /* rows (heads x positions) per task */
#define OLC_ATTN_WTB 128    /* keys per tile of the AVX-512 wide path: two panels of 64 */

typedef struct {
    const void *q, *k, *v;
    void *out;
    int64_t B, Nq, Nkv, S, T, Dk, Dv;
    int64_t qs[3], ks[3], vs[3], os[3];   /* element strides of b, head, position */
    const float *bias;
    int64_t bs[3];                         /* 0 where bias broadcasts */
    const int32_t *kbeg, *kend;            /* (B, S) or NULL */
    const float *sink;                     /* [Nq] or NULL */
    float scale, softcap;
    int softcap_first, dtype;
    /* task grid */
    int64_t hb, sb, nhb, nsb, nchunks, chunk;
    float *partial;                        /* split mode: per (task, chunk) prow x (Dv + 2) */
    int64_t prow;                          /* rows per task in partial */
    /* optional past cache copied into k/v first: rows t < plen[b] */
    const void *pk, *pv;
    int64_t pks[3], pvs[3];
    const int32_t *plen;
    int fuse_copy;                         /* each split task copies its own chunk */
    /* quantized k/v (GroupQueryAttention's KV cache): kvbits 8 (int8 codes
     * [.., Dk]) or 4 (uint8 bytes [.., Dk / 2], code + 8, low nibble the
     * even channel), 0 for q's dtype; key t channel d of kv head g is
     * code * kscale[g * Dk + d] in float32 (v alike with vscale, Dv).
     * Strides ks/vs/pks/pvs then count bytes. */
    int kvbits;
    const float *kscale, *vscale;
} olc_attn_args;

/* k/v rows [t0, min(t1, plen[b])) of (b, kv head g) from the past cache. */
static inline void olc_attn_copy_rows_(const olc_attn_args *p, int64_t b, int64_t g, int64_t t0,
                                       int64_t t1) {
    const int64_t es = p->kvbits ? 1 : p->dtype == OLC_FLOAT ? 4 : 2, n = p->plen[b];
    /* bytes of a row: codes of 8 or 4 bits, else elements */
    const int64_t kn = p->kvbits == 4 ? p->Dk / 2 : p->Dk, vn = p->kvbits == 4 ? p->Dv / 2 : p->Dv;
    if (t1 > n) t1 = n;
    char *k = (char *)p->k, *v = (char *)p->v;
    const char *pk = (const char *)p->pk, *pv = (const char *)p->pv;
    for (int64_t t = t0; t < t1; ++t) {
        memcpy(k + (b * p->ks[0] + g * p->ks[1] + t * p->ks[2]) * es,
               pk + (b * p->pks[0] + g * p->pks[1] + t * p->pks[2]) * es, (size_t)(kn * es));
        memcpy(v + (b * p->vs[0] + g * p->vs[1] + t * p->vs[2]) * es,
               pv + (b * p->pvs[0] + g * p->pvs[1] + t * p->pvs[2]) * es, (size_t)(vn * es));
    }
}
static inline void olc_attn_copy_past(const olc_attn_args *p, int64_t bg) {
    olc_attn_copy_rows_(p, bg / p->Nkv, bg % p->Nkv, 0, p->T);
}

typedef void (*olc_attn_task_fn)(const olc_attn_args *p, int64_t task, float *scratch);
typedef void (*olc_attn_combine_fn)(const olc_attn_args *p, int64_t row);

static inline int64_t olc_attn_scratch_floats(int64_t Dk, int64_t Dv) {
    /* q, acc, max, sum, scores; k and v tiles; the wide path's rescale factors */
    return OLC_ATTN_RMAX * (Dk + Dv + 5 + OLC_ATTN_WTB) + OLC_ATTN_WTB * (Dk + Dv) + 64;
}

/* Whether a key the bias does not mask (bias -inf) has a NaN score: asked
 * only of a row whose maximum is not above -inf (max ignores NaN), so a NaN
 * score gives a NaN row as the references' softmax does, while a row the
 * bias masks whole stays zeros whatever its scores (NaN + -inf included),
 * as onnx.reference decides on the mask. */
static inline int olc_attn_has_nan_(const float *x, const float *bias, int64_t n) {
    for (int64_t j = 0; j < n; ++j)
        if (x[j] != x[j] && !(bias && bias[j] == -INFINITY)) return 1;
    return 0;
}

/* ---- per-level helpers ---- */

/* scalar; load and store: n elements of type dtype (OLC_FLOAT,
 * OLC_FLOAT16, OLC_BFLOAT16) to float32, and back */
static inline void olc_attn_load_scalar(int dtype, const void *src, float *dst, int64_t n) {
    if (dtype == OLC_FLOAT) memcpy(dst, src, (size_t)n * 4);
    else if (dtype == OLC_FLOAT16) olc_widen_f16_scalar((const uint16_t *)src, dst, n);
    else olc_widen_bf16_scalar((const uint16_t *)src, dst, n);
}
static inline void olc_attn_store_scalar(int dtype, const float *src, void *dst, int64_t n) {
    if (dtype == OLC_FLOAT) memcpy(dst, src, (size_t)n * 4);
    else if (dtype == OLC_FLOAT16) olc_narrow_f16_scalar(src, (uint16_t *)dst, n);
    else olc_narrow_bf16_scalar(src, (uint16_t *)dst, n);
}
/* dst = scale * src as float32 */
static inline void olc_attn_load_scaled_scalar(int dtype, const void *src, float *dst, int64_t n,
                                               float scale) {
    olc_attn_load_scalar(dtype, src, dst, n);
    for (int64_t i = 0; i < n; ++i) dst[i] *= scale;
}
/* sc[j] = dot(q, k + j * ks) for j < n */
static inline void olc_attn_qk_scalar(const float *q, const float *k, int64_t ks, int64_t n,
                                      int64_t D, float *sc) {
    for (int64_t j = 0; j < n; ++j) {
        const float *kr = k + j * ks;
        float s = 0.0f;
        for (int64_t d = 0; d < D; ++d) s = olc_fmaf_(q[d], kr[d], s);
        sc[j] = s;
    }
}
/* acc[d] += sum_j p[j] * v[j * vs + d], j in order */
static inline void olc_attn_pv_scalar(float *acc, const float *p, const float *v, int64_t vs,
                                      int64_t n, int64_t D) {
    for (int64_t j = 0; j < n; ++j) {
        const float *vr = v + j * vs;
        const float pj = p[j];
        for (int64_t d = 0; d < D; ++d) acc[d] = olc_fmaf_(pj, vr[d], acc[d]);
    }
}
static inline float olc_attn_max_scalar(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
    return m;
}
/* x = exp(x - m); returns the sum of the new x */
static inline float olc_attn_expsum_scalar(float *x, int64_t n, float m) {
    float l = 0.0f;
    for (int64_t j = 0; j < n; ++j) { x[j] = olc_expf_(x[j] - m); l += x[j]; }
    return l;
}
static inline void olc_attn_tanh_scalar(float *x, int64_t n) { olc_tanh_f32_scalar(x, x, n); }

#if OLC_X86
static inline OLC_TARGET_AVX2 void olc_attn_load_avx2(int dtype, const void *src, float *dst, int64_t n) {
    if (dtype == OLC_FLOAT) memcpy(dst, src, (size_t)n * 4);
    else if (dtype == OLC_FLOAT16) olc_widen_f16_avx2((const uint16_t *)src, dst, n);
    else olc_widen_bf16_avx2((const uint16_t *)src, dst, n);
}
static inline OLC_TARGET_AVX2 void olc_attn_store_avx2(int dtype, const float *src, void *dst, int64_t n) {
    if (dtype == OLC_FLOAT) memcpy(dst, src, (size_t)n * 4);
    else if (dtype == OLC_FLOAT16) olc_narrow_f16_avx2(src, (uint16_t *)dst, n);
    else olc_narrow_bf16_avx2(src, (uint16_t *)dst, n);
}
static inline OLC_TARGET_AVX2 void olc_attn_load_scaled_avx2(int dtype, const void *src, float *dst,
                                                            int64_t n, float scale) {
    if (dtype != OLC_FLOAT) {
        olc_attn_load_avx2(dtype, src, dst, n);
        src = dst;
    }
    const float *s = (const float *)src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_loadu_ps(s + i), _mm256_set1_ps(scale)));
    for (; i < n; ++i) dst[i] = s[i] * scale;
}
/* 8 ymm accumulators -> their 8 sums, in lane order */
static inline OLC_TARGET_AVX2 __m256 olc_attn_hsum8_avx2(__m256 a0, __m256 a1, __m256 a2, __m256 a3,
                                                        __m256 a4, __m256 a5, __m256 a6, __m256 a7) {
    __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    /* h0 = [a0..a3 low halves | a0..a3 high halves] */
    __m256 lo = _mm256_permute2f128_ps(h0, h1, 0x20), hi = _mm256_permute2f128_ps(h0, h1, 0x31);
    return _mm256_add_ps(lo, hi);
}
static inline OLC_TARGET_AVX2 void olc_attn_qk_avx2(const float *q, const float *k, int64_t ks, int64_t n,
                                                   int64_t D, float *sc) {
    const int64_t D8 = D & ~(int64_t)7;
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const float *kr = k + j * ks;
        __m256 a[8];
        for (int u = 0; u < 8; ++u) a[u] = _mm256_setzero_ps();
        for (int64_t d = 0; d < D8; d += 8) {
            __m256 qv = _mm256_loadu_ps(q + d);
            for (int u = 0; u < 8; ++u) a[u] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr + u * ks + d), a[u]);
        }
        __m256 s = olc_attn_hsum8_avx2(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        _mm256_storeu_ps(sc + j, s);
        for (int64_t d = D8; d < D; ++d)
            for (int u = 0; u < 8; ++u) sc[j + u] = olc_fmaf_(q[d], kr[u * ks + d], sc[j + u]);
    }
    for (; j < n; ++j) {
        const float *kr = k + j * ks;
        __m256 a = _mm256_setzero_ps();
        for (int64_t d = 0; d < D8; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kr + d), a);
        __m128 x = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        x = _mm_hadd_ps(x, x);
        x = _mm_hadd_ps(x, x);
        float s = _mm_cvtss_f32(x);
        for (int64_t d = D8; d < D; ++d) s = olc_fmaf_(q[d], kr[d], s);
        sc[j] = s;
    }
}
static inline OLC_TARGET_AVX2 void olc_attn_pv_avx2(float *acc, const float *p, const float *v, int64_t vs,
                                                   int64_t n, int64_t D) {
    int64_t d0 = 0;
    for (; d0 + 32 <= D; d0 += 32) {
        __m256 a0 = _mm256_loadu_ps(acc + d0), a1 = _mm256_loadu_ps(acc + d0 + 8);
        __m256 a2 = _mm256_loadu_ps(acc + d0 + 16), a3 = _mm256_loadu_ps(acc + d0 + 24);
        for (int64_t j = 0; j < n; ++j) {
            const float *vr = v + j * vs + d0;
            __m256 pj = _mm256_set1_ps(p[j]);
            a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr), a0);
            a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 8), a1);
            a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 16), a2);
            a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vr + 24), a3);
        }
        _mm256_storeu_ps(acc + d0, a0); _mm256_storeu_ps(acc + d0 + 8, a1);
        _mm256_storeu_ps(acc + d0 + 16, a2); _mm256_storeu_ps(acc + d0 + 24, a3);
    }
    for (; d0 + 8 <= D; d0 += 8) {
        __m256 a0 = _mm256_loadu_ps(acc + d0);
        for (int64_t j = 0; j < n; ++j)
            a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * vs + d0), a0);
        _mm256_storeu_ps(acc + d0, a0);
    }
    if (d0 < D) olc_attn_pv_scalar(acc + d0, p, v + d0, vs, n, D - d0);
}
static inline OLC_TARGET_AVX2 float olc_attn_max_avx2(const float *x, int64_t n) {
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + j));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float m = _mm_cvtss_f32(h);
    for (; j < n; ++j) m = x[j] > m ? x[j] : m;
    return m;
}
static inline OLC_TARGET_AVX2 float olc_attn_expsum_avx2(float *x, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    __m256 sv = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = olc_exp_ps_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + j), mv));
        _mm256_storeu_ps(x + j, e);
        sv = _mm256_add_ps(sv, e);
    }
    if (j < n) {   /* the tail through the same vector code, padded with -inf */
        float buf[8];
        for (int u = 0; u < 8; ++u) buf[u] = j + u < n ? x[j + u] : -INFINITY;
        __m256 e = olc_exp_ps_avx2(_mm256_sub_ps(_mm256_loadu_ps(buf), mv));
        /* (unordered: a NaN score stays NaN, only the -inf padding is cleared) */
        e = _mm256_and_ps(e, _mm256_cmp_ps(_mm256_loadu_ps(buf), _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ));
        _mm256_storeu_ps(buf, e);
        for (int64_t u = 0; j + u < n; ++u) x[j + u] = buf[u];
        sv = _mm256_add_ps(sv, e);
    }
    return olc_hsum_ps_avx2(sv);
}
static inline OLC_TARGET_AVX2 void olc_attn_tanh_avx2(float *x, int64_t n) { olc_tanh_f32_avx2(x, x, n); }
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __mmask16 olc_attn_mask16(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
}
static inline OLC_TARGET_AVX512 void olc_attn_load_avx512(int dtype, const void *src, float *dst, int64_t n) {
    if (dtype == OLC_FLOAT) memcpy(dst, src, (size_t)n * 4);
    else if (dtype == OLC_FLOAT16) olc_widen_f16_avx512((const uint16_t *)src, dst, n);
    else olc_widen_bf16_avx512((const uint16_t *)src, dst, n);
}
static inline OLC_TARGET_AVX512 void olc_attn_load_scaled_avx512(int dtype, const void *src, float *dst,
                                                              int64_t n, float scale) {
    const __m512 f = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = olc_attn_mask16(n - i);
        const __m512 x = dtype == OLC_FLOAT ? _mm512_maskz_loadu_ps(m, (const float *)src + i)
                       : dtype == OLC_FLOAT16 ? olc_ld_f16_avx512((const uint16_t *)src + i, m)
                       : olc_ld_bf16_avx512((const uint16_t *)src + i, m);
        _mm512_mask_storeu_ps(dst + i, m, _mm512_mul_ps(x, f));
    }
}
static inline OLC_TARGET_AVX512 void olc_attn_store_avx512(int dtype, const float *src, void *dst, int64_t n) {
    if (dtype == OLC_FLOAT) memcpy(dst, src, (size_t)n * 4);
    else if (dtype == OLC_FLOAT16) olc_narrow_f16_avx512(src, (uint16_t *)dst, n);
    else olc_narrow_bf16_avx512(src, (uint16_t *)dst, n);
}
static inline OLC_TARGET_AVX512 __m256 olc_attn_half_avx512(__m512 a) {
    return _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
}
static inline OLC_TARGET_AVX512 void olc_attn_qk_avx512(const float *q, const float *k, int64_t ks, int64_t n,
                                                       int64_t D, float *sc) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const float *kr = k + j * ks;
        __m512 a[8];
        for (int u = 0; u < 8; ++u) a[u] = _mm512_setzero_ps();
        for (int64_t d = 0; d < D; d += 16) {
            __mmask16 m = olc_attn_mask16(D - d);
            __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
            for (int u = 0; u < 8; ++u)
                a[u] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kr + u * ks + d), a[u]);
        }
        __m256 s = olc_attn_hsum8_avx2(olc_attn_half_avx512(a[0]), olc_attn_half_avx512(a[1]),
                                       olc_attn_half_avx512(a[2]), olc_attn_half_avx512(a[3]),
                                       olc_attn_half_avx512(a[4]), olc_attn_half_avx512(a[5]),
                                       olc_attn_half_avx512(a[6]), olc_attn_half_avx512(a[7]));
        _mm256_storeu_ps(sc + j, s);
    }
    for (; j < n; ++j) {
        const float *kr = k + j * ks;
        __m512 a = _mm512_setzero_ps();
        for (int64_t d = 0; d < D; d += 16) {
            __mmask16 m = olc_attn_mask16(D - d);
            a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), _mm512_maskz_loadu_ps(m, kr + d), a);
        }
        sc[j] = _mm512_reduce_add_ps(a);
    }
}
static inline OLC_TARGET_AVX512 void olc_attn_pv_avx512(float *acc, const float *p, const float *v, int64_t vs,
                                                       int64_t n, int64_t D) {
    for (int64_t d0 = 0; d0 < D; d0 += 64) {
        __mmask16 m0 = olc_attn_mask16(D - d0), m1 = olc_attn_mask16(D - d0 - 16);
        __mmask16 m2 = olc_attn_mask16(D - d0 - 32), m3 = olc_attn_mask16(D - d0 - 48);
        __m512 a0 = _mm512_maskz_loadu_ps(m0, acc + d0), a1 = _mm512_maskz_loadu_ps(m1, acc + d0 + 16);
        __m512 a2 = _mm512_maskz_loadu_ps(m2, acc + d0 + 32), a3 = _mm512_maskz_loadu_ps(m3, acc + d0 + 48);
        for (int64_t j = 0; j < n; ++j) {
            const float *vr = v + j * vs + d0;
            __m512 pj = _mm512_set1_ps(p[j]);
            a0 = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m0, vr), a0);
            a1 = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m1, vr + 16), a1);
            a2 = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m2, vr + 32), a2);
            a3 = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m3, vr + 48), a3);
        }
        _mm512_mask_storeu_ps(acc + d0, m0, a0); _mm512_mask_storeu_ps(acc + d0 + 16, m1, a1);
        _mm512_mask_storeu_ps(acc + d0 + 32, m2, a2); _mm512_mask_storeu_ps(acc + d0 + 48, m3, a3);
    }
}
static inline OLC_TARGET_AVX512 float olc_attn_max_avx512(const float *x, int64_t n) {
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 16)
        mv = _mm512_mask_max_ps(mv, olc_attn_mask16(n - j), mv, _mm512_maskz_loadu_ps(olc_attn_mask16(n - j), x + j));
    return _mm512_reduce_max_ps(mv);
}
static inline OLC_TARGET_AVX512 float olc_attn_expsum_avx512(float *x, int64_t n, float m) {
    const __m512 mv = _mm512_set1_ps(m);
    __m512 sv = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = olc_attn_mask16(n - j);
        __m512 e = olc_exp_ps_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), mv));
        _mm512_mask_storeu_ps(x + j, k, e);
        sv = _mm512_mask_add_ps(sv, k, sv, e);
    }
    return _mm512_reduce_add_ps(sv);
}
static inline OLC_TARGET_AVX512 void olc_attn_tanh_avx512(float *x, int64_t n) { olc_tanh_f32_avx512(x, x, n); }

/* 16 accumulators -> one vector of their sums: lane 4i + j holds the sum
 * of a[4j + i] (a tree of 128-bit block and in-lane shuffles). */
static inline OLC_TARGET_AVX512 __m512 olc_attn_hsum16_avx512(const __m512 *a) {
    __m512 s[8], t[4];
    for (int i = 0; i < 8; ++i)
        s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; ++i)
        t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
    __m512 u = _mm512_add_ps(_mm512_unpacklo_ps(t[0], t[1]), _mm512_unpackhi_ps(t[0], t[1]));
    __m512 w = _mm512_add_ps(_mm512_unpacklo_ps(t[2], t[3]), _mm512_unpackhi_ps(t[2], t[3]));
    return _mm512_add_ps(_mm512_shuffle_ps(u, w, 0x44), _mm512_shuffle_ps(u, w, 0xEE));
}
/* sc[r * ld + j] = dot(q[r], k[j]) for R rows and n keys: 4 rows x 4 keys
 * per register block (16 FMA chains, one load of q and k per product of
 * four), the rest row by row. */
static inline OLC_TARGET_AVX512 void olc_attn_qk_block_avx512(const float *q, int64_t R, int64_t D,
        const float *k, int64_t ks, int64_t n, float *sc, int64_t ld) {
    int64_t r = 0;
    for (; r + 4 <= R; r += 4) {
        const float *q0 = q + r * D;
        int64_t j = 0;
        for (; j + 4 <= n; j += 4) {
            const float *k0 = k + j * ks;
            __m512 a[16];
            for (int u = 0; u < 16; ++u) a[u] = _mm512_setzero_ps();
            for (int64_t d = 0; d < D; d += 16) {
                __mmask16 m = olc_attn_mask16(D - d);
                __m512 qv[4], kv[4];
                for (int u = 0; u < 4; ++u) {
                    qv[u] = _mm512_maskz_loadu_ps(m, q0 + u * D + d);
                    kv[u] = _mm512_maskz_loadu_ps(m, k0 + u * ks + d);
                }
                /* a[4 * key + row] */
                for (int kk = 0; kk < 4; ++kk)
                    for (int rr = 0; rr < 4; ++rr)
                        a[4 * kk + rr] = _mm512_fmadd_ps(qv[rr], kv[kk], a[4 * kk + rr]);
            }
            __m512 sum = olc_attn_hsum16_avx512(a);   /* lane 4 * row + key */
            _mm_storeu_ps(sc + (r + 0) * ld + j, _mm512_extractf32x4_ps(sum, 0));
            _mm_storeu_ps(sc + (r + 1) * ld + j, _mm512_extractf32x4_ps(sum, 1));
            _mm_storeu_ps(sc + (r + 2) * ld + j, _mm512_extractf32x4_ps(sum, 2));
            _mm_storeu_ps(sc + (r + 3) * ld + j, _mm512_extractf32x4_ps(sum, 3));
        }
        if (j < n)
            for (int u = 0; u < 4; ++u)
                olc_attn_qk_avx512(q0 + u * D, k + j * ks, ks, n - j, D, sc + (r + u) * ld + j);
    }
    for (; r < R; ++r) olc_attn_qk_avx512(q + r * D, k, ks, n, D, sc + r * ld);
}
/* acc[r] += p[r] @ v for R rows: 4 rows x 64 columns in registers. */
static inline OLC_TARGET_AVX512 void olc_attn_pv_block_avx512(float *acc, int64_t R, int64_t D,
        const float *p, int64_t ld, const float *v, int64_t vs, int64_t n) {
    int64_t r = 0;
    for (; r + 4 <= R; r += 4) {
        for (int64_t d0 = 0; d0 < D; d0 += 64) {
            __mmask16 m[4];
            __m512 a[16];
            for (int c = 0; c < 4; ++c) m[c] = olc_attn_mask16(D - d0 - 16 * c);
            for (int rr = 0; rr < 4; ++rr)
                for (int c = 0; c < 4; ++c)
                    a[4 * rr + c] = _mm512_maskz_loadu_ps(m[c], acc + (r + rr) * D + d0 + 16 * c);
            for (int64_t j = 0; j < n; ++j) {
                const float *vr = v + j * vs + d0;
                __m512 vv[4];
                for (int c = 0; c < 4; ++c) vv[c] = _mm512_maskz_loadu_ps(m[c], vr + 16 * c);
                for (int rr = 0; rr < 4; ++rr) {
                    __m512 pj = _mm512_set1_ps(p[(r + rr) * ld + j]);
                    for (int c = 0; c < 4; ++c) a[4 * rr + c] = _mm512_fmadd_ps(pj, vv[c], a[4 * rr + c]);
                }
            }
            for (int rr = 0; rr < 4; ++rr)
                for (int c = 0; c < 4; ++c)
                    _mm512_mask_storeu_ps(acc + (r + rr) * D + d0 + 16 * c, m[c], a[4 * rr + c]);
        }
    }
    for (; r < R; ++r) olc_attn_pv_avx512(acc + r * D, p + r * ld, v, vs, n, D);
}
#endif


/* The blocks of the scalar and AVX2 levels: row after row. */
static inline void olc_attn_qk_block_scalar(const float *q, int64_t R, int64_t D,
        const float *k, int64_t ks, int64_t n, float *sc, int64_t ld) {
    for (int64_t r = 0; r < R; ++r) olc_attn_qk_scalar(q + r * D, k, ks, n, D, sc + r * ld);
}
static inline void olc_attn_pv_block_scalar(float *acc, int64_t R, int64_t D,
        const float *p, int64_t ld, const float *v, int64_t vs, int64_t n) {
    for (int64_t r = 0; r < R; ++r) olc_attn_pv_scalar(acc + r * D, p + r * ld, v, vs, n, D);
}
#if OLC_X86
static inline OLC_TARGET_AVX2 void olc_attn_qk_block_avx2(const float *q, int64_t R, int64_t D,
        const float *k, int64_t ks, int64_t n, float *sc, int64_t ld) {
    for (int64_t r = 0; r < R; ++r) olc_attn_qk_avx2(q + r * D, k, ks, n, D, sc + r * ld);
}
static inline OLC_TARGET_AVX2 void olc_attn_pv_block_avx2(float *acc, int64_t R, int64_t D,
        const float *p, int64_t ld, const float *v, int64_t vs, int64_t n) {
    for (int64_t r = 0; r < R; ++r) olc_attn_pv_avx2(acc + r * D, p + r * ld, v, vs, n, D);
}
#endif

/* ---- AVX-512 wide tiles: rows >= OLC_ATTN_WIDE_MIN ----
 * With many rows per task the key tile is worth transposing once: scores
 * are then an outer-product GEMM (6 rows x 64 keys of accumulators, one
 * broadcast of q per row and four loads of k^T per head element), without
 * the horizontal sums a dot product per score needs; P.V keeps 6 rows x 64
 * output columns in registers and applies the online-softmax rescale of
 * the accumulators as it loads them.  Few rows (decode) stay on the dot
 * product path above: there the transpose would cost more than it saves. */
#define OLC_ATTN_WIDE_MIN 8

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_ATTN_INLINE static inline __attribute__((always_inline)) OLC_TARGET_AVX512

/* 16 rows in, 16 columns out (r[i] lane j <- r[j] lane i). */
OLC_ATTN_INLINE void olc_attn_transpose16_avx512(__m512 *r) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g + c]: rows 4g..4g+3 of column 4 * lane + c in each 128-bit lane */
    for (int g = 0; g < 4; ++g) {
        const __m512 lo0 = t[4 * g], hi0 = t[4 * g + 1], lo1 = t[4 * g + 2], hi1 = t[4 * g + 3];
        u[4 * g + 0] = _mm512_shuffle_ps(lo0, lo1, 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(lo0, lo1, 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(hi0, hi1, 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(hi0, hi1, 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
        const __m512 v01 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
        const __m512 v01h = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        const __m512 v23 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
        const __m512 v23h = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        r[c] = _mm512_shuffle_f32x4(v01, v23, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(v01, v23, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(v01h, v23h, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(v01h, v23h, 0xDD);
    }
}
OLC_ATTN_INLINE __m512 olc_attn_ld16_avx512(int dtype, const char *src, __mmask16 m) {
    if (dtype == OLC_FLOAT) return _mm512_maskz_loadu_ps(m, src);
    if (dtype == OLC_FLOAT16) return olc_ld_f16_avx512((const uint16_t *)src, m);
    return olc_ld_bf16_avx512((const uint16_t *)src, m);
}
/* kt[d * TB + j] = k[j][d] (as float32) for d < D, j < n; columns up to the
 * next multiple of 16 are zeros.  ks: k's row stride in elements.  Stamped
 * per dtype (a constant here) so that the 16 rows stay in registers. */
OLC_ATTN_INLINE void olc_attn_pack_kt_dt_avx512(const int dtype, const char *k, int64_t ks,
                                               int64_t n, int64_t D, float *kt) {
    const int64_t es = dtype == OLC_FLOAT ? 4 : 2;
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        const int64_t nj = n - j0 < 16 ? n - j0 : 16;
        for (int64_t d0 = 0; d0 < D; d0 += 16) {
            const __mmask16 m = olc_attn_mask16(D - d0);
            const char *src = k + (j0 * ks + d0) * es;
            __m512 r[16];
            if (nj == 16) {
                for (int u = 0; u < 16; ++u) r[u] = olc_attn_ld16_avx512(dtype, src + u * ks * es, m);
            } else {
                for (int u = 0; u < 16; ++u)
                    r[u] = u < nj ? olc_attn_ld16_avx512(dtype, src + u * ks * es, m) : _mm512_setzero_ps();
            }
            olc_attn_transpose16_avx512(r);
            if (D - d0 >= 16) {
                for (int u = 0; u < 16; ++u) _mm512_storeu_ps(kt + (d0 + u) * OLC_ATTN_TB + j0, r[u]);
            } else {
                for (int64_t u = 0; u < D - d0; ++u) _mm512_storeu_ps(kt + (d0 + u) * OLC_ATTN_TB + j0, r[u]);
            }
        }
    }
}
static inline OLC_TARGET_AVX512 void olc_attn_pack_kt_avx512(int dtype, const char *k, int64_t ks,
                                                            int64_t n, int64_t D, float *kt) {
    if (dtype == OLC_FLOAT) olc_attn_pack_kt_dt_avx512(OLC_FLOAT, k, ks, n, D, kt);
    else if (dtype == OLC_FLOAT16) olc_attn_pack_kt_dt_avx512(OLC_FLOAT16, k, ks, n, D, kt);
    else olc_attn_pack_kt_dt_avx512(OLC_BFLOAT16, k, ks, n, D, kt);
}
/* sc[r * ld + j] = dot(q[r], k[j]) for NR rows and the panel's first 16 NC
 * keys (NR, NC: constants). */
OLC_ATTN_INLINE void olc_attn_qk_rows_avx512(const float *q, int64_t D, const float *kt, float *sc,
                                            int64_t ld, const int NR, const int NC) {
    __m512 a[6][4];
    for (int r = 0; r < NR; ++r)
        for (int c = 0; c < NC; ++c) a[r][c] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; ++d) {
        const float *kd = kt + d * OLC_ATTN_TB;
        __m512 kv[4];
        for (int c = 0; c < NC; ++c) kv[c] = _mm512_loadu_ps(kd + 16 * c);
        for (int r = 0; r < NR; ++r) {
            const __m512 qb = _mm512_set1_ps(q[r * D + d]);
            for (int c = 0; c < NC; ++c) a[r][c] = _mm512_fmadd_ps(qb, kv[c], a[r][c]);
        }
    }
    for (int r = 0; r < NR; ++r)
        for (int c = 0; c < NC; ++c) _mm512_storeu_ps(sc + r * ld + 16 * c, a[r][c]);
}
/* NR (a constant) rows x nc (1..4) vectors of 16 keys. */
OLC_ATTN_INLINE void olc_attn_qk_nc_avx512(const float *q, int64_t D, const float *kt, float *sc,
                                          int64_t ld, const int NR, int64_t nc) {
    switch (nc) {
    case 4: olc_attn_qk_rows_avx512(q, D, kt, sc, ld, NR, 4); break;
    case 3: olc_attn_qk_rows_avx512(q, D, kt, sc, ld, NR, 3); break;
    case 2: olc_attn_qk_rows_avx512(q, D, kt, sc, ld, NR, 2); break;
    default: olc_attn_qk_rows_avx512(q, D, kt, sc, ld, NR, 1); break;
    }
}
/* nr (1..6) rows x nc (1..4) vectors of 16 keys. */
static inline OLC_TARGET_AVX512 void olc_attn_qk_block_wide_avx512(const float *q, int64_t D,
        const float *kt, float *sc, int64_t ld, int64_t nr, int64_t nc) {
    switch (nr) {
    case 6: olc_attn_qk_nc_avx512(q, D, kt, sc, ld, 6, nc); break;
    case 5: olc_attn_qk_nc_avx512(q, D, kt, sc, ld, 5, nc); break;
    case 4: olc_attn_qk_nc_avx512(q, D, kt, sc, ld, 4, nc); break;
    case 3: olc_attn_qk_nc_avx512(q, D, kt, sc, ld, 3, nc); break;
    case 2: olc_attn_qk_nc_avx512(q, D, kt, sc, ld, 2, nc); break;
    default: olc_attn_qk_nc_avx512(q, D, kt, sc, ld, 1, nc); break;
    }
}
/* acc[r] = acc[r] * corr[r] + p[r] @ v for NR rows (keys j < n). */
OLC_ATTN_INLINE void olc_attn_pv_rows_avx512(float *acc, int64_t D, const float *corr, const float *p,
                                            int64_t ld, const float *v, int64_t vs, int64_t n,
                                            const int NR) {
    for (int64_t d0 = 0; d0 < D; d0 += 64) {
        __mmask16 m[4];
        __m512 a[6][4];
        for (int c = 0; c < 4; ++c) m[c] = olc_attn_mask16(D - d0 - 16 * c);
        for (int r = 0; r < NR; ++r) {
            const __m512 cr = _mm512_set1_ps(corr[r]);
            for (int c = 0; c < 4; ++c)
                a[r][c] = _mm512_mul_ps(cr, _mm512_maskz_loadu_ps(m[c], acc + r * D + d0 + 16 * c));
        }
        for (int64_t j = 0; j < n; ++j) {
            const float *vr = v + j * vs + d0;
            const __m512 v0 = _mm512_maskz_loadu_ps(m[0], vr), v1 = _mm512_maskz_loadu_ps(m[1], vr + 16);
            const __m512 v2 = _mm512_maskz_loadu_ps(m[2], vr + 32), v3 = _mm512_maskz_loadu_ps(m[3], vr + 48);
            for (int r = 0; r < NR; ++r) {
                const __m512 pb = _mm512_set1_ps(p[r * ld + j]);
                a[r][0] = _mm512_fmadd_ps(pb, v0, a[r][0]);
                a[r][1] = _mm512_fmadd_ps(pb, v1, a[r][1]);
                a[r][2] = _mm512_fmadd_ps(pb, v2, a[r][2]);
                a[r][3] = _mm512_fmadd_ps(pb, v3, a[r][3]);
            }
        }
        for (int r = 0; r < NR; ++r)
            for (int c = 0; c < 4; ++c) _mm512_mask_storeu_ps(acc + r * D + d0 + 16 * c, m[c], a[r][c]);
    }
}
/* Lanes [a, e) of the 16 starting at key c0 of the tile. */
static inline OLC_TARGET_AVX512 __mmask16 olc_attn_range16(int64_t a, int64_t e, int64_t c0) {
    return (__mmask16)(olc_attn_mask16(e - c0) & ~olc_attn_mask16(a - c0));
}

static inline OLC_TARGET_AVX512 void olc_attn_wide_tile_avx512(const olc_attn_args *p, int64_t b,
        int64_t h0, int64_t s0, int64_t ns, int64_t R, int64_t ta, int64_t te, const char *kb,
        const char *vb, const float *qf, float *acc, float *mrow, float *lrow, const int64_t *lo,
        const int64_t *hi, float *sc, float *kt, float *vbuf, float *corr) {
    const int64_t Dk = p->Dk, Dv = p->Dv, nu = te - ta, nv = (nu + 15) / 16;
    const int64_t es = p->dtype == OLC_FLOAT ? 4 : 2;
    const int64_t npan = (nu + OLC_ATTN_TB - 1) / OLC_ATTN_TB;   /* panels of 64 keys */
    for (int64_t q0 = 0; q0 < npan; ++q0)
        olc_attn_pack_kt_avx512(p->dtype, kb + (ta + q0 * OLC_ATTN_TB) * p->ks[2] * es, p->ks[2],
                                nu - q0 * OLC_ATTN_TB < OLC_ATTN_TB ? nu - q0 * OLC_ATTN_TB : OLC_ATTN_TB,
                                Dk, kt + q0 * OLC_ATTN_TB * Dk);
    const float *vt;
    int64_t vst;
    if (p->dtype == OLC_FLOAT) {
        vt = (const float *)vb + ta * p->vs[2]; vst = p->vs[2];
    } else {
        if (p->vs[2] == Dv)
            olc_attn_load_avx512(p->dtype, vb + ta * Dv * es, vbuf, nu * Dv);
        else
            for (int64_t j = 0; j < nu; ++j)
                olc_attn_load_avx512(p->dtype, vb + (ta + j) * p->vs[2] * es, vbuf + j * Dv, Dv);
        vt = vbuf; vst = Dv;
    }
    /* Per block of 6 rows, keys [jlo, jhi) of the tile cover every row's
     * range: causal diagonals skip the key vectors (scores) and the keys
     * (P.V) no row of the block attends. */
    int64_t r, jlo[OLC_ATTN_RMAX / 6 + 1], jhi[OLC_ATTN_RMAX / 6 + 1];
    for (r = 0; r < R; r += 6) {
        int64_t x = nu, y = 0;
        for (int64_t u = r; u < R && u < r + 6; ++u) {
            const int64_t a = (lo[u] > ta ? lo[u] : ta) - ta, e = (hi[u] < te ? hi[u] : te) - ta;
            if (a < e) { if (a < x) x = a; if (e > y) y = e; }
        }
        jlo[r / 6] = x < y ? x : 0;
        jhi[r / 6] = x < y ? y : 0;
    }
    for (int64_t q0 = 0; q0 < npan; ++q0) {
        const float *ktp = kt + q0 * OLC_ATTN_TB * Dk;
        for (r = 0; r < R; r += 6) {
            const int64_t nc = (jhi[r / 6] - q0 * OLC_ATTN_TB + 15) / 16;
            if (nc <= 0) continue;
            olc_attn_qk_block_wide_avx512(qf + r * Dk, Dk, ktp, sc + r * OLC_ATTN_WTB + q0 * OLC_ATTN_TB,
                                          OLC_ATTN_WTB, R - r < 6 ? R - r : 6, nc < 4 ? nc : 4);
        }
    }
    /* Softmax update: each row's new running max first, then the rescale
     * factors of 16 rows at once (exp(old max - new max), 1 for a row that
     * had no key yet), then the probabilities (zeros outside the row's keys). */
    const float cap = p->softcap;
    int8_t live[OLC_ATTN_RMAX];
    for (r = 0; r < R; ++r) {
        float *row = sc + r * OLC_ATTN_WTB;
        const int64_t a = (lo[r] > ta ? lo[r] : ta) - ta, e = (hi[r] < te ? hi[r] : te) - ta;
        corr[r] = mrow[r];
        live[r] = 0;
        if (a < e) {
            float *x = row + a;
            const int64_t n = e - a;
            const float *bias = NULL;
            if (p->bias) {
                const int64_t h = h0 + r / ns, s = s0 + r % ns;
                bias = p->bias + b * p->bs[0] + h * p->bs[1] + s * p->bs[2] + ta + a;
            }
            if (cap > 0.0f) {
                const float inv = 1.0f / cap;
                if (bias && !p->softcap_first) {
                    for (int64_t j = 0; j < n; ++j) x[j] = (x[j] + bias[j]) * inv;
                    olc_attn_tanh_avx512(x, n);
                    for (int64_t j = 0; j < n; ++j) x[j] *= cap;
                } else {
                    for (int64_t j = 0; j < n; ++j) x[j] *= inv;
                    olc_attn_tanh_avx512(x, n);
                    for (int64_t j = 0; j < n; ++j) x[j] *= cap;
                    if (bias) for (int64_t j = 0; j < n; ++j) x[j] += bias[j];
                }
            } else if (bias) {
                for (int64_t j = 0; j < n; j += 16) {
                    const __mmask16 k = olc_attn_mask16(n - j);
                    _mm512_mask_storeu_ps(x + j, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, x + j),
                                                                  _mm512_maskz_loadu_ps(k, bias + j)));
                }
            }
            __m512 mv = _mm512_set1_ps(-INFINITY);
            if (a == 0 && e == 16 * nv) {   /* every key of the tile: no masks */
                for (int64_t c = 0; c < nv; ++c) mv = _mm512_max_ps(mv, _mm512_loadu_ps(row + 16 * c));
            } else {
                for (int64_t c = a / 16; c * 16 < e; ++c) {
                    const __mmask16 k = olc_attn_range16(a, e, 16 * c);
                    mv = _mm512_mask_max_ps(mv, k, mv, _mm512_maskz_loadu_ps(k, row + 16 * c));
                }
            }
            const float mt = _mm512_reduce_max_ps(mv);
            if (mt > -INFINITY) {
                live[r] = 1;
                if (mt > mrow[r]) mrow[r] = mt;
            } else if (olc_attn_has_nan_(x, bias, n)) {
                live[r] = 1;
                mrow[r] = NAN;                /* a NaN score: the row is NaN, as softmax's */
            }
        }
        if (!live[r])
            for (int64_t c = 0; c < nv; ++c) _mm512_storeu_ps(row + 16 * c, _mm512_setzero_ps());
    }
    for (r = 0; r < R; r += 16) {
        const __mmask16 k = olc_attn_mask16(R - r);
        const __m512 mo = _mm512_maskz_loadu_ps(k, corr + r), mn = _mm512_maskz_loadu_ps(k, mrow + r);
        const __mmask16 had = _mm512_cmp_ps_mask(mo, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        const __m512 f = _mm512_mask_blend_ps(had, _mm512_set1_ps(1.0f),
                                              olc_exp_ps_avx512(_mm512_sub_ps(mo, mn)));
        _mm512_mask_storeu_ps(corr + r, k, f);
    }
    for (r = 0; r < R; ++r) {
        if (!live[r]) continue;
        float *row = sc + r * OLC_ATTN_WTB;
        const int64_t a = (lo[r] > ta ? lo[r] : ta) - ta, e = (hi[r] < te ? hi[r] : te) - ta;
        const __m512 m = _mm512_set1_ps(mrow[r]);
        __m512 sv = _mm512_setzero_ps();
        if (a == 0 && e == 16 * nv) {
            for (int64_t c = 0; c < nv; ++c) {
                const __m512 pe = olc_exp_ps_avx512(_mm512_sub_ps(_mm512_loadu_ps(row + 16 * c), m));
                _mm512_storeu_ps(row + 16 * c, pe);
                sv = _mm512_add_ps(sv, pe);
            }
            lrow[r] = lrow[r] * corr[r] + _mm512_reduce_add_ps(sv);
            continue;
        }
        for (int64_t c = 0; c < nv; ++c) {
            const __mmask16 k = olc_attn_range16(a, e, 16 * c);
            if (!k) { _mm512_storeu_ps(row + 16 * c, _mm512_setzero_ps()); continue; }
            const __m512 pe = _mm512_maskz_mov_ps(k, olc_exp_ps_avx512(
                _mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + 16 * c), m)));
            _mm512_storeu_ps(row + 16 * c, pe);
            sv = _mm512_add_ps(sv, pe);
        }
        lrow[r] = lrow[r] * corr[r] + _mm512_reduce_add_ps(sv);
    }
    for (r = 0; r < R; r += 6) {
        const int64_t j0 = jlo[r / 6], n = jhi[r / 6] - j0;
        float *ar = acc + r * Dv;
        const float *pr = sc + r * OLC_ATTN_WTB + j0, *vr = vt + j0 * vst;
        switch (R - r < 6 ? R - r : 6) {
        case 6: olc_attn_pv_rows_avx512(ar, Dv, corr + r, pr, OLC_ATTN_WTB, vr, vst, n, 6); break;
        case 5: olc_attn_pv_rows_avx512(ar, Dv, corr + r, pr, OLC_ATTN_WTB, vr, vst, n, 5); break;
        case 4: olc_attn_pv_rows_avx512(ar, Dv, corr + r, pr, OLC_ATTN_WTB, vr, vst, n, 4); break;
        case 3: olc_attn_pv_rows_avx512(ar, Dv, corr + r, pr, OLC_ATTN_WTB, vr, vst, n, 3); break;
        case 2: olc_attn_pv_rows_avx512(ar, Dv, corr + r, pr, OLC_ATTN_WTB, vr, vst, n, 2); break;
        default: olc_attn_pv_rows_avx512(ar, Dv, corr + r, pr, OLC_ATTN_WTB, vr, vst, n, 1); break;
        }
    }
}
#endif


/* acc /= the row's denominator (with the head's sink logit); zeros when
 * no key took part. */
static inline void olc_attn_finish_(const olc_attn_args *p, int64_t h, float m, float l, float *acc) {
    const int64_t Dv = p->Dv;
    if (m != m) {                      /* a NaN score: every probability is NaN */
        for (int64_t d = 0; d < Dv; ++d) acc[d] = NAN;
        return;
    }
    if (!(m > -INFINITY)) { memset(acc, 0, (size_t)Dv * 4); return; }
    if (p->sink) {
        const float sk = p->sink[h];
        if (sk > m) {
            const float corr = olc_expf_(m - sk);
            l = l * corr + 1.0f;
            for (int64_t d = 0; d < Dv; ++d) acc[d] *= corr;
        } else {
            l += olc_expf_(sk - m);
        }
    }
    const float inv = 1.0f / l;
    for (int64_t d = 0; d < Dv; ++d) acc[d] *= inv;
}

/* ---- the task and the combine, one body per level ---- */

#define OLC_LVL scalar
#define OLC_LVL_ATTR
#define OLC_ATTN_WIDE 0
#include "engines/attention/olc_attention_task.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_ATTN_WIDE
#if OLC_X86
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_ATTN_WIDE 0
#include "engines/attention/olc_attention_task.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_ATTN_WIDE
#endif
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_ATTN_WIDE 1
#include "engines/attention/olc_attention_task.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_ATTN_WIDE
#endif

static inline int olc_attn_level(int level) { return olc_build_level(level); }

static inline olc_attn_task_fn olc_attn_task_select(int level) {
    return OLC_LEVEL_FN(olc_build_level(level), olc_attn_task);
}
static inline olc_attn_combine_fn olc_attn_combine_select(int level) {
    return OLC_LEVEL_FN(olc_build_level(level), olc_attn_combine);
}

/* ---- GroupQueryAttention's present cache ---- */

/* New rows appended to a [B, N, L, D] cache: for batch b, rows [start[b],
 * start[b] + count[b]) of every head get the new rows [0, count[b]) of
 * src [B, S, N, D] (any strides, the last axis contiguous), and the rows
 * after them are zeros.  Rows before start[b] are left as they are (the
 * engine fills them from the past cache while it reads them). */
typedef struct {
    const void *src;
    void *dst;
    int64_t N, L, D, esize;                /* heads, cache rows, head size, bytes per element */
    int64_t ss[3], ds[3];                  /* element strides: src (b, s, head), dst (b, head, row) */
    const int64_t *start, *count;          /* [B] */
} olc_attn_append_args;

/* The rows of (b, head n) for bn = b * N + n. */
static inline void olc_attn_append_rows(const olc_attn_append_args *a, int64_t bn) {
    const int64_t b = bn / a->N, n = bn % a->N, es = a->esize, L = a->L;
    int64_t r0 = a->start[b], r1 = r0 + a->count[b];
    if (r0 > L) r0 = L;
    if (r1 > L) r1 = L;
    const char *src = (const char *)a->src + (b * a->ss[0] + n * a->ss[2]) * es;
    char *dst = (char *)a->dst + (b * a->ds[0] + n * a->ds[1]) * es;
    for (int64_t r = r0; r < r1; ++r)
        memcpy(dst + r * a->ds[2] * es, src + (r - r0) * a->ss[1] * es, (size_t)(a->D * es));
    if (a->ds[2] == a->D)
        memset(dst + r1 * a->D * es, 0, (size_t)((L - r1) * a->D * es));
    else
        for (int64_t r = r1; r < L; ++r) memset(dst + r * a->ds[2] * es, 0, (size_t)(a->D * es));
}

#endif
