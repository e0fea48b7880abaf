/* LinearAttention recurrence (ai.onnx and com.microsoft share it).
 *
 * Per (batch, kv head) the state S [dk, dv] evolves token by token:
 *   gated:  S = exp(g) * S                    (g per key row or per head)
 *   delta:  u = beta * (v - S^T k)            (else u = v)
 *   update: S = S + k u^T,   o_q = scale * S^T q   for each query head
 * Every column j of S evolves on its own (the retrieval S^T k, the update
 * and the readout all work column by column), so the state is processed
 * in column blocks of JB floats that stay in L1 for a whole chunk of
 * tokens: a [dk, dv] = [128, 128] state (64 KB) would otherwise stream from
 * L2 two or three times a token.  The blocks use GCC vector extensions,
 * stamped per level with its register width (SSE2 baseline, AVX2+FMA,
 * AVX-512), so one body serves the three levels.
 *
 * Activations and state may be float32, float16 or bfloat16 (codes
 * OLC_LA_F32/F16/BF16, each independently); the recurrence always runs in
 * float32: a chunk of narrow inputs is widened into scratch first, and
 * outputs are rounded once on the way out.
 *
 * Head mapping (the com.microsoft superset of the ai.onnx contract): kv
 * head h reads key head h / (Hkv / Hk); when Hq >= Hkv it serves query (and
 * output) heads h * Hq/Hkv + g, else (inverse GQA) query head
 * h / (Hkv / Hq) and output head h.
 *
 * State windows (com.microsoft state_window = W): present holds W slots of
 * [B, Hkv, dk, dv], slot s the state after token T - W + s, zeros for the
 * slots before the first token; W = 1 is the plain 4D state.
 */
#ifndef OLC_LINEAR_ATTENTION_H
#define OLC_LINEAR_ATTENTION_H

#include <math.h>
#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_math.h"

#define OLC_LA_F32 0
#define OLC_LA_F16 1
#define OLC_LA_BF16 2

/* Tokens staged (widened, exp of the decay taken) per chunk. */
#define OLC_LA_CHUNK 64

typedef void (*olc_la_widen_fn)(float *dst, const void *src, int dt, int64_t n);
typedef void (*olc_la_narrow_fn)(void *dst, int dt, const float *src, int64_t n);
typedef void (*olc_la_exp_fn)(float *dst, const void *src, int dt, int64_t n);

typedef struct {
    const void *q, *k, *v, *past, *decay, *beta;  /* past: NULL or the slot read */
    void *out, *present;                          /* present: W slots */
    int64_t B, T, Hq, Hk, Hkv, dk, dv, W;
    int tdt, sdt;                                 /* activations, state */
    int gated, delta, decay_rows, beta_heads;
    float scale;
    olc_la_widen_fn widen;    /* the level's conversions (olc_la_prepare) */
    olc_la_narrow_fn narrow;
    olc_la_exp_fn exp_;       /* dst = exp(widened src), the decay factors */
} olc_la_args;

/* One chunk of tokens of one (batch, kv head), as the block kernels see it:
 * float32 rows with strides (per token, per query head). */
typedef struct {
    const float *q, *k, *v, *e, *beta;
    float *out;
    int64_t qs, qg, ks, vs, es, os, og;
    int64_t n, dk, dv, nq;
    int gated, delta, decay_rows;
    float scale;
    /* the state after local token t >= store_from goes to slot0 + (t -
     * store_from) slots (slot_stride elements of type sdt apart) */
    int64_t store_from, slot_stride;
    void *slot0;
    int sdt;
    /* first chunk: the block starts from init (type sdt, [dk, dv]) or zeros */
    int load, last;  /* last: the chunk ends the item's tokens */
    const void *init;
    olc_la_widen_fn widen;
    olc_la_narrow_fn narrow;
} olc_la_chunk;

typedef void (*olc_la_block_fn)(const olc_la_chunk *c, float *blk, int64_t j0, int64_t jn);

static inline float olc_la_get(const void *p, int dt, int64_t i) {
    if (dt == OLC_LA_F32) return ((const float *)p)[i];
    if (dt == OLC_LA_F16) return olc_h2f(((const uint16_t *)p)[i]);
    return olc_bf2f(((const uint16_t *)p)[i]);
}

/* Plain loops rather than memcpy: the rows are short (a block is 16 to 32
 * floats wide) and a library call each would cost more than the copy. */
static inline void olc_la_widen(float *dst, const void *src, int dt, int64_t n) {
    if (dt == OLC_LA_F32) {
        const float *s = (const float *)src;
        for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
        return;
    }
    const uint16_t *s = (const uint16_t *)src;
    if (dt == OLC_LA_F16) for (int64_t i = 0; i < n; ++i) dst[i] = olc_h2f(s[i]);
    else for (int64_t i = 0; i < n; ++i) dst[i] = olc_bf2f(s[i]);
}

static inline void olc_la_narrow(void *dst, int dt, const float *src, int64_t n) {
    if (dt == OLC_LA_F32) {
        float *d = (float *)dst;
        for (int64_t i = 0; i < n; ++i) d[i] = src[i];
        return;
    }
    uint16_t *d = (uint16_t *)dst;
    if (dt == OLC_LA_F16) for (int64_t i = 0; i < n; ++i) d[i] = olc_f2h(src[i]);
    else for (int64_t i = 0; i < n; ++i) d[i] = olc_f2bf(src[i]);
}

static inline int64_t olc_la_esize(int dt) { return dt == OLC_LA_F32 ? 4 : 2; }

/* The same conversions a vector at a time (F16C, and the bfloat16 helpers
 * of olc_math.h; rounding to nearest even like the scalar ones). */
static void olc_la_widen_scalar(float *dst, const void *src, int dt, int64_t n) {
    olc_la_widen(dst, src, dt, n);
}
static void olc_la_narrow_scalar(void *dst, int dt, const float *src, int64_t n) {
    olc_la_narrow(dst, dt, src, n);
}
static void olc_la_exp_scalar(float *dst, const void *src, int dt, int64_t n) {
    olc_la_widen(dst, src, dt, n);
    for (int64_t i = 0; i < n; ++i) dst[i] = olc_expf_(dst[i]);
}
#if OLC_X86
static OLC_TARGET_AVX2 void olc_la_widen_avx2(float *dst, const void *src, int dt, int64_t n) {
    const uint16_t *s = (const uint16_t *)src;
    int64_t i = 0;
    if (dt == OLC_LA_F16)
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, olc_ld_f16_avx2(s + i));
    else if (dt == OLC_LA_BF16)
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, olc_ld_bf16_avx2(s + i));
    olc_la_widen(dst + i, (const char *)src + i * olc_la_esize(dt), dt, n - i);
}
static OLC_TARGET_AVX2 void olc_la_narrow_avx2(void *dst, int dt, const float *src, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    int64_t i = 0;
    if (dt == OLC_LA_F16)
        for (; i + 8 <= n; i += 8) olc_st_f16_avx2(d + i, _mm256_loadu_ps(src + i));
    else if (dt == OLC_LA_BF16)
        for (; i + 8 <= n; i += 8) olc_st_bf16_avx2(d + i, _mm256_loadu_ps(src + i));
    olc_la_narrow((char *)dst + i * olc_la_esize(dt), dt, src + i, n - i);
}
static OLC_TARGET_AVX2 void olc_la_exp_avx2(float *dst, const void *src, int dt, int64_t n) {
    olc_la_widen_avx2(dst, src, dt, n);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, olc_exp_ps_avx2(_mm256_loadu_ps(dst + i)));
    for (; i < n; ++i) dst[i] = olc_expf_(dst[i]);
}
#if OLC_HAVE_AVX512
static OLC_TARGET_AVX512 void olc_la_widen_avx512(float *dst, const void *src, int dt, int64_t n) {
    const uint16_t *s = (const uint16_t *)src;
    if (dt == OLC_LA_F32) { olc_la_widen(dst, src, dt, n); return; }
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = dt == OLC_LA_F16 ? olc_ld_f16_avx512(s + i, m) : olc_ld_bf16_avx512(s + i, m);
        _mm512_mask_storeu_ps(dst + i, m, v);
    }
}
static OLC_TARGET_AVX512 void olc_la_narrow_avx512(void *dst, int dt, const float *src, int64_t n) {
    uint16_t *d = (uint16_t *)dst;
    if (dt == OLC_LA_F32) { olc_la_narrow(dst, dt, src, n); return; }
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, src + i);
        if (dt == OLC_LA_F16) olc_st_f16_avx512(d + i, m, v);
        else olc_st_bf16_avx512(d + i, m, v);
    }
}
static OLC_TARGET_AVX512 void olc_la_exp_avx512(float *dst, const void *src, int dt, int64_t n) {
    olc_la_widen_avx512(dst, src, dt, n);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(dst + i, m, olc_exp_ps_avx512(_mm512_maskz_loadu_ps(m, dst + i)));
    }
}
#endif
#endif

/* Columns [j0, j0 + jn) of a [dk, dv] state into a [dk, JB] block (zero
 * padded), from src (element type dt) or zeros when src is NULL. */
static void olc_la_load_block(olc_la_widen_fn widen, float *blk, int64_t JB, const void *src,
                              int dt, int64_t dk, int64_t dv, int64_t j0, int64_t jn) {
    const int64_t es = olc_la_esize(dt);
    for (int64_t i = 0; i < dk; ++i) {
        float *row = blk + i * JB;
        if (src) widen(row, (const char *)src + (i * dv + j0) * es, dt, jn);
        else for (int64_t c = 0; c < jn; ++c) row[c] = 0.0f;
        for (int64_t c = jn; c < JB; ++c) row[c] = 0.0f;
    }
}

static void olc_la_store_block(olc_la_narrow_fn narrow, void *dst, int dt, const float *blk,
                               int64_t JB, int64_t dk, int64_t dv, int64_t j0, int64_t jn) {
    const int64_t es = olc_la_esize(dt);
    for (int64_t i = 0; i < dk; ++i)
        narrow((char *)dst + (i * dv + j0) * es, dt, blk + i * JB, jn);
}

/* Row factor of the decay: none, per key row, one per head. */
#define OLC_LA_NONE_(x, i) (x)
#define OLC_LA_ROW_(x, i) ((x) * e[i])
#define OLC_LA_HEAD_(x, i) ((x) * e0)

/* A block row is NV native vectors: row i, part x is S[i * NV + x].  The
 * loops over x have a constant trip count, so they unroll and the small
 * arrays stay in registers.  A pass reads its rows from src (row stride ss
 * floats): the block itself, or on the first token the caller's float32
 * past state, so decode reads the past once instead of copying it in
 * first; the update pass also writes the new rows to `keep` (the present
 * state, row stride dv) when the state of this token is kept. */
#define OLC_LA_LD_(p) ({ vf v_; memcpy(&v_, (p), sizeof v_); v_; })
#define OLC_LA_ST_(p, v) do { vf v_ = (v); memcpy((p), &v_, sizeof v_); } while (0)

/* S = S * factor + k u^T over the block's rows, with the readout of the
 * first query head (two accumulators so the FMA chains overlap). */
#define OLC_LA_UPDATE_(FACTOR)                                                      \
    {                                                                               \
        int64_t i = 0;                                                              \
        for (; i + 2 <= dk; i += 2) {                                               \
            const float k0 = k[i], k1 = k[i + 1], q0 = q[i], q1 = q[i + 1];         \
            for (int x = 0; x < NV; ++x) {                                          \
                vf s0 = FACTOR(OLC_LA_LD_(src + i * ss + x * VW), i) + k0 * u[x];   \
                vf s1 = FACTOR(OLC_LA_LD_(src + (i + 1) * ss + x * VW), i + 1) + k1 * u[x]; \
                if (keep_s) { S[i * NV + x] = s0; S[(i + 1) * NV + x] = s1; }       \
                if (keep) {                                                         \
                    OLC_LA_ST_(keep + i * dv + x * VW, s0);                         \
                    OLC_LA_ST_(keep + (i + 1) * dv + x * VW, s1);                   \
                }                                                                   \
                o0[x] += s0 * q0; o1[x] += s1 * q1;                                 \
            }                                                                       \
        }                                                                           \
        if (i < dk)                                                                 \
            for (int x = 0; x < NV; ++x) {                                          \
                vf s0 = FACTOR(OLC_LA_LD_(src + i * ss + x * VW), i) + k[i] * u[x]; \
                if (keep_s) S[i * NV + x] = s0;                                     \
                if (keep) OLC_LA_ST_(keep + i * dv + x * VW, s0);                   \
                o0[x] += s0 * q[i];                                                 \
            }                                                                       \
    }

/* r = (S * factor)^T k, storing the decayed state when there is a factor. */
#define OLC_LA_RETRIEVE_(FACTOR, STORE)                                             \
    {                                                                               \
        int64_t i = 0;                                                              \
        for (; i + 2 <= dk; i += 2) {                                               \
            const float k0 = k[i], k1 = k[i + 1];                                   \
            for (int x = 0; x < NV; ++x) {                                          \
                vf s0 = FACTOR(OLC_LA_LD_(src + i * ss + x * VW), i);               \
                vf s1 = FACTOR(OLC_LA_LD_(src + (i + 1) * ss + x * VW), i + 1);     \
                if (STORE) { S[i * NV + x] = s0; S[(i + 1) * NV + x] = s1; }        \
                r0[x] += s0 * k0; r1[x] += s1 * k1;                                 \
            }                                                                       \
        }                                                                           \
        if (i < dk)                                                                 \
            for (int x = 0; x < NV; ++x) {                                          \
                vf s0 = FACTOR(OLC_LA_LD_(src + i * ss + x * VW), i);               \
                if (STORE) S[i * NV + x] = s0;                                      \
                r0[x] += s0 * k[i];                                                 \
            }                                                                       \
        if (STORE) { src = blk; ss = JB; }                                          \
    }

#define OLC_LA_BLOCK(VWIDTH, NVEC, suffix, attr)                                              \
attr static void olc_la_block_##suffix(const olc_la_chunk *c, float *blk, int64_t j0, int64_t jn) { \
    typedef float vf __attribute__((vector_size(4 * VWIDTH), aligned(16)));             \
    enum { VW = VWIDTH, NV = NVEC, JB = VWIDTH * NVEC };                                \
    vf *S = (vf *)blk;                                                                  \
    const int64_t dk = c->dk, dv = c->dv, nq = c->nq;                                   \
    const vf zero = {0};                                                                \
    /* float32 state, whole block: rows move as vectors, in the passes */               \
    const int fast = c->sdt == OLC_LA_F32 && jn == JB;                                  \
    const float *src = blk;                                                             \
    int64_t ss = JB;                                                                    \
    if (c->load) {                                                                      \
        if (!c->init)                                                                   \
            for (int64_t i = 0; i < dk * NV; ++i) S[i] = zero;                          \
        else if (fast) { src = (const float *)c->init + j0; ss = dv; }                  \
        else olc_la_load_block(c->widen, blk, JB, c->init, c->sdt, dk, dv, j0, jn);     \
    }                                                                                   \
    for (int64_t t = 0; t < c->n; ++t) {                                                \
        const float *k = c->k + t * c->ks, *vv = c->v + t * c->vs + j0;                 \
        const float *q = c->q + t * c->qs;                                              \
        const float *e = c->gated ? c->e + t * c->es : NULL;                            \
        const float e0 = e ? e[0] : 1.0f;                                               \
        char *slot = NULL;                                                              \
        float *keep = NULL;                                                             \
        if (t >= c->store_from) {                                                       \
            slot = (char *)c->slot0                                                     \
                 + (t - c->store_from) * c->slot_stride * olc_la_esize(c->sdt);         \
            if (fast) keep = (float *)slot + j0;                                        \
        }                                                                               \
        /* the item's last token, written to present, read by one head: the            \
         * block itself needs no update (decode writes the state once) */               \
        const int keep_s = !(keep && nq == 1 && c->last && t == c->n - 1);              \
        vf u[NV], o0[NV], o1[NV];                                                       \
        if (jn == JB) memcpy(u, vv, sizeof u);                                          \
        else {                                                                          \
            float tmp[VWIDTH * NVEC] = {0};                                                 \
            for (int64_t cc = 0; cc < jn; ++cc) tmp[cc] = vv[cc];                       \
            memcpy(u, tmp, sizeof u);                                                   \
        }                                                                               \
        for (int x = 0; x < NV; ++x) o0[x] = o1[x] = zero;                              \
        if (c->delta) {                                                                 \
            vf r0[NV], r1[NV];                                                          \
            for (int x = 0; x < NV; ++x) r0[x] = r1[x] = zero;                          \
            /* the first pass stores the (decayed) state in the block, which the        \
             * update then reads from L1 */                                             \
            if (!e) OLC_LA_RETRIEVE_(OLC_LA_NONE_, src != blk)                          \
            else if (c->decay_rows) OLC_LA_RETRIEVE_(OLC_LA_ROW_, 1)                    \
            else OLC_LA_RETRIEVE_(OLC_LA_HEAD_, 1)                                      \
            const float bt = c->beta[t];                                                \
            for (int x = 0; x < NV; ++x) u[x] = (u[x] - (r0[x] + r1[x])) * bt;          \
            OLC_LA_UPDATE_(OLC_LA_NONE_)                                                \
        } else if (!e) OLC_LA_UPDATE_(OLC_LA_NONE_)                                     \
        else if (c->decay_rows) OLC_LA_UPDATE_(OLC_LA_ROW_)                             \
        else OLC_LA_UPDATE_(OLC_LA_HEAD_)                                               \
        src = blk;                                                                      \
        ss = JB;                                                                        \
        for (int64_t g = 0; g < nq; ++g) {                                              \
            if (g > 0) {  /* the other query heads of the group read S again */         \
                const float *qg = q + g * c->qg;                                        \
                for (int x = 0; x < NV; ++x) o0[x] = o1[x] = zero;                      \
                int64_t i = 0;                                                          \
                for (; i + 2 <= dk; i += 2)                                             \
                    for (int x = 0; x < NV; ++x) {                                      \
                        o0[x] += S[i * NV + x] * qg[i];                                 \
                        o1[x] += S[(i + 1) * NV + x] * qg[i + 1];                       \
                    }                                                                   \
                if (i < dk)                                                             \
                    for (int x = 0; x < NV; ++x) o0[x] += S[i * NV + x] * qg[i];        \
            }                                                                           \
            vf o[NV];                                                                   \
            for (int x = 0; x < NV; ++x) o[x] = (o0[x] + o1[x]) * c->scale;             \
            float *out = c->out + t * c->os + g * c->og + j0;                           \
            if (jn == JB) memcpy(out, o, sizeof o);                                     \
            else {                                                                      \
                float tmp[VWIDTH * NVEC];                                                 \
                memcpy(tmp, o, sizeof o);                                               \
                for (int64_t cc = 0; cc < jn; ++cc) out[cc] = tmp[cc];                  \
            }                                                                           \
        }                                                                               \
        if (slot && !fast)                                                              \
            olc_la_store_block(c->narrow, slot, c->sdt, blk, JB, dk, dv, j0, jn);       \
    }                                                                                   \
}

/* Two widths per level (two native vectors a row, one when dv is small). */
OLC_LA_BLOCK(4, 2, scalar_w, )
OLC_LA_BLOCK(4, 1, scalar_n, )
#if OLC_X86
OLC_LA_BLOCK(8, 2, avx2_w, OLC_TARGET_AVX2)
OLC_LA_BLOCK(8, 1, avx2_n, OLC_TARGET_AVX2)
#if OLC_HAVE_AVX512
OLC_LA_BLOCK(16, 2, avx512_w, OLC_TARGET_AVX512)
OLC_LA_BLOCK(16, 1, avx512_n, OLC_TARGET_AVX512)
#endif
#endif

static inline int olc_la_level(int level) { return olc_build_level(level); }

/* The block kernel for this level and dv, and its width. */
static olc_la_block_fn olc_la_select(int level, int64_t dv, int64_t *JB) {
    level = olc_la_level(level);
#if OLC_X86 && OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        if (dv <= 16) { *JB = 16; return olc_la_block_avx512_n; }
        *JB = 32; return olc_la_block_avx512_w;
    }
#endif
#if OLC_X86
    if (level >= OLC_AVX2) {
        if (dv <= 8) { *JB = 8; return olc_la_block_avx2_n; }
        *JB = 16; return olc_la_block_avx2_w;
    }
#endif
    (void)level;
    if (dv <= 4) { *JB = 4; return olc_la_block_scalar_n; }
    *JB = 8; return olc_la_block_scalar_w;
}

/* Fills in the conversions of this level. */
static void olc_la_prepare(olc_la_args *p, int level) {
    level = olc_la_level(level);
    p->widen = olc_la_widen_scalar;
    p->narrow = olc_la_narrow_scalar;
    p->exp_ = olc_la_exp_scalar;
#if OLC_X86
    if (level >= OLC_AVX2) {
        p->widen = olc_la_widen_avx2; p->narrow = olc_la_narrow_avx2; p->exp_ = olc_la_exp_avx2;
    }
#if OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        p->widen = olc_la_widen_avx512; p->narrow = olc_la_narrow_avx512;
        p->exp_ = olc_la_exp_avx512;
    }
#endif
#endif
}

/* Floats of scratch one thread needs (rounded to 64-byte multiples). */
static int64_t olc_la_scratch_floats(const olc_la_args *p, int64_t JB) {
    const int64_t nq = p->Hq >= p->Hkv ? p->Hq / p->Hkv : 1;
    const int64_t nblk = (p->dv + JB - 1) / JB;
    int64_t n = nblk * JB * p->dk                     /* state blocks */
              + OLC_LA_CHUNK * (nq * p->dk + p->dk + p->dv + p->dk + 1 + nq * p->dv);
    return (n + 15) / 16 * 16;
}

/* Items [i0, i1) of the B * Hkv (batch, kv head) pairs; scratch holds
 * olc_la_scratch_floats floats, 64-byte aligned. */
static void olc_la_run(const olc_la_args *p, olc_la_block_fn fn, int64_t JB, float *scratch,
                       int64_t i0, int64_t i1) {
    const int64_t B = p->B, T = p->T, Hq = p->Hq, Hk = p->Hk, Hkv = p->Hkv;
    const int64_t dk = p->dk, dv = p->dv, W = p->W;
    const int64_t nq = Hq >= Hkv ? Hq / Hkv : 1, Ho = Hq >= Hkv ? Hq : Hkv;
    const int64_t nblk = (dv + JB - 1) / JB;
    const int64_t tes = olc_la_esize(p->tdt), ses = olc_la_esize(p->sdt);
    const int64_t slot = B * Hkv * dk * dv;
    const int narrow = p->tdt != OLC_LA_F32;
    float *st = scratch;
    float *qs = st + nblk * JB * dk, *ks = qs + OLC_LA_CHUNK * nq * dk;
    float *vs = ks + OLC_LA_CHUNK * dk, *es = vs + OLC_LA_CHUNK * dv;
    float *bs = es + OLC_LA_CHUNK * dk, *os = bs + OLC_LA_CHUNK;
    (void)B;
    for (int64_t item = i0; item < i1; ++item) {
        const int64_t b = item / Hkv, h = item % Hkv, hk = h / (Hkv / Hk);
        const int64_t hq0 = Hq >= Hkv ? h * nq : h / (Hkv / Hq), ho0 = Hq >= Hkv ? hq0 : h;
        const int64_t off = item * dk * dv;
        char *present = (char *)p->present;
        const void *past = p->past ? (const char *)p->past + off * ses : NULL;
        /* Slots before the first token hold zeros; with no token the last
         * slot is the past state. */
        for (int64_t s = 0; s < W - 1 && s < W - T; ++s)
            memset(present + (s * slot + off) * ses, 0, (size_t)(dk * dv * ses));
        if (T == 0) {
            char *last = present + ((W - 1) * slot + off) * ses;
            if (past) memcpy(last, past, (size_t)(dk * dv * ses));  /* same type S */
            else memset(last, 0, (size_t)(dk * dv * ses));
            continue;
        }
        olc_la_chunk c;
        c.dk = dk; c.dv = dv; c.nq = nq;
        c.gated = p->gated; c.delta = p->delta; c.decay_rows = p->decay_rows;
        c.scale = p->scale; c.sdt = p->sdt; c.slot_stride = slot;
        for (int64_t t0 = 0; t0 < T; t0 += OLC_LA_CHUNK) {
            const int64_t n = T - t0 < OLC_LA_CHUNK ? T - t0 : OLC_LA_CHUNK;
            const int64_t row = b * T + t0;  /* first token's row in [B*T, ...] */
            c.n = n;
            if (!narrow) {
                c.q = (const float *)p->q + (row * Hq + hq0) * dk; c.qs = Hq * dk;
                c.k = (const float *)p->k + (row * Hk + hk) * dk; c.ks = Hk * dk;
                c.v = (const float *)p->v + (row * Hkv + h) * dv; c.vs = Hkv * dv;
                c.out = (float *)p->out + (row * Ho + ho0) * dv; c.os = Ho * dv;
            } else {
                for (int64_t t = 0; t < n; ++t) {
                    p->widen(qs + t * nq * dk,
                             (const char *)p->q + ((row + t) * Hq + hq0) * dk * tes, p->tdt, nq * dk);
                    p->widen(ks + t * dk, (const char *)p->k + ((row + t) * Hk + hk) * dk * tes,
                                 p->tdt, dk);
                    p->widen(vs + t * dv, (const char *)p->v + ((row + t) * Hkv + h) * dv * tes,
                                 p->tdt, dv);
                }
                c.q = qs; c.qs = nq * dk; c.k = ks; c.ks = dk; c.v = vs; c.vs = dv;
                c.out = os; c.os = nq * dv;
            }
            c.qg = dk; c.og = dv;
            if (p->gated) {
                if (p->decay_rows)
                    for (int64_t t = 0; t < n; ++t)
                        p->exp_(es + t * dk,
                                (const char *)p->decay + ((row + t) * Hkv + h) * dk * tes, p->tdt, dk);
                else
                    for (int64_t t = 0; t < n; ++t)
                        es[t] = olc_expf_(olc_la_get(p->decay, p->tdt, (row + t) * Hkv + h));
                c.e = es; c.es = p->decay_rows ? dk : 1;
            }
            if (p->delta) {
                for (int64_t t = 0; t < n; ++t)
                    bs[t] = p->beta_heads ? olc_la_get(p->beta, p->tdt, (row + t) * Hkv + h)
                                          : olc_la_get(p->beta, p->tdt, row + t);
                c.beta = bs;
            }
            /* global token t0 + t is stored when it is among the last W */
            c.store_from = T - W - t0 > 0 ? T - W - t0 : 0;
            c.load = t0 == 0;
            c.last = t0 + n == T;
            c.init = past;
            c.widen = p->widen;
            c.narrow = p->narrow;
            c.slot0 = c.store_from < n
                ? present + ((t0 + c.store_from - (T - W)) * slot + off) * ses : NULL;
            for (int64_t j = 0; j < nblk; ++j) {
                float *blk = st + j * JB * dk;
                const int64_t j0 = j * JB, jn = dv - j0 < JB ? dv - j0 : JB;
                fn(&c, blk, j0, jn);
            }
            if (narrow)
                for (int64_t t = 0; t < n; ++t)
                    p->narrow((char *)p->out + ((row + t) * Ho + ho0) * dv * tes, p->tdt,
                                  os + t * nq * dv, nq * dv);
        }
    }
}

#endif
