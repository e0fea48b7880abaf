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
 * L2 two or three times a token.  The blocks use GCC vector extensions of
 * each level's register width (SSE2 baseline, AVX2+FMA, AVX-512): one
 * body, olc_linear_attention_block.h, included per level and block width.
 *
 * Activations and state may be float32, float16 or bfloat16 (OLC_FLOAT,
 * OLC_FLOAT16, OLC_BFLOAT16, each independently); the recurrence runs in
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
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_types.h"
#include "common/olc_vec.h"

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
    if (dt == OLC_FLOAT) return ((const float *)p)[i];
    if (dt == OLC_FLOAT16) return olc_h2f(((const uint16_t *)p)[i]);
    return olc_bf2f(((const uint16_t *)p)[i]);
}

/* Plain loops rather than memcpy: the rows are short (a block is 16 to 32
 * floats wide) and a library call each would cost more than the copy. */
static inline void olc_la_widen(float *dst, const void *src, int dt, int64_t n) {
    if (dt == OLC_FLOAT) {
        const float *s = (const float *)src;
        for (int64_t i = 0; i < n; ++i) dst[i] = s[i];
    } else if (dt == OLC_FLOAT16) {
        olc_widen_f16_scalar((const uint16_t *)src, dst, n);
    } else {
        olc_widen_bf16_scalar((const uint16_t *)src, dst, n);
    }
}

static inline void olc_la_narrow(void *dst, int dt, const float *src, int64_t n) {
    if (dt == OLC_FLOAT) {
        float *d = (float *)dst;
        for (int64_t i = 0; i < n; ++i) d[i] = src[i];
    } else if (dt == OLC_FLOAT16) {
        olc_narrow_f16_scalar(src, (uint16_t *)dst, n);
    } else {
        olc_narrow_bf16_scalar(src, (uint16_t *)dst, n);
    }
}

static inline int64_t olc_la_esize(int dt) { return dt == OLC_FLOAT ? 4 : 2; }

/* The conversions of each level (common/olc_vec.h; rounding to nearest
 * even at every level), and dst = exp(widened src). */
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
    if (dt == OLC_FLOAT16) olc_widen_f16_avx2((const uint16_t *)src, dst, n);
    else if (dt == OLC_BFLOAT16) olc_widen_bf16_avx2((const uint16_t *)src, dst, n);
    else olc_la_widen(dst, src, dt, n);
}
static OLC_TARGET_AVX2 void olc_la_narrow_avx2(void *dst, int dt, const float *src, int64_t n) {
    if (dt == OLC_FLOAT16) olc_narrow_f16_avx2(src, (uint16_t *)dst, n);
    else if (dt == OLC_BFLOAT16) olc_narrow_bf16_avx2(src, (uint16_t *)dst, n);
    else olc_la_narrow(dst, dt, src, n);
}
static OLC_TARGET_AVX2 void olc_la_exp_avx2(float *dst, const void *src, int dt, int64_t n) {
    olc_la_widen_avx2(dst, src, dt, n);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, olc_exp_ps_avx2(_mm256_loadu_ps(dst + i)));
    for (; i < n; ++i) dst[i] = olc_expf_(dst[i]);
}
#if OLC_HAVE_AVX512
static OLC_TARGET_AVX512 void olc_la_widen_avx512(float *dst, const void *src, int dt, int64_t n) {
    if (dt == OLC_FLOAT16) olc_widen_f16_avx512((const uint16_t *)src, dst, n);
    else if (dt == OLC_BFLOAT16) olc_widen_bf16_avx512((const uint16_t *)src, dst, n);
    else olc_la_widen(dst, src, dt, n);
}
static OLC_TARGET_AVX512 void olc_la_narrow_avx512(void *dst, int dt, const float *src, int64_t n) {
    if (dt == OLC_FLOAT16) olc_narrow_f16_avx512(src, (uint16_t *)dst, n);
    else if (dt == OLC_BFLOAT16) olc_narrow_bf16_avx512(src, (uint16_t *)dst, n);
    else olc_la_narrow(dst, dt, src, n);
}
static OLC_TARGET_AVX512 void olc_la_exp_avx512(float *dst, const void *src, int dt, int64_t n) {
    olc_la_widen_avx512(dst, src, dt, n);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = olc_tail_mask16(n - i);
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

/* The decay rule of a block pass: none, per key row, one per head. */
enum { OLC_LA_NONE = 0, OLC_LA_ROW = 1, OLC_LA_HEAD = 2 };

/* Each level's native float vector (unaligned rows: aligned(16)). */
typedef float olc_la_vf_scalar __attribute__((vector_size(16), aligned(16)));
#if OLC_X86
typedef float olc_la_vf_avx2 __attribute__((vector_size(32), aligned(16)));
#if OLC_HAVE_AVX512
typedef float olc_la_vf_avx512 __attribute__((vector_size(64), aligned(16)));
#endif
#endif

/* The block kernels: two widths per level (two native vectors a row, one
 * when dv is small), olc_la_block_w_<level> and olc_la_block_n_<level>. */
#define OLC_LA_FN(name) OLC_FN(OLC_CAT(name, OLC_LA_WIDTH))

#define OLC_LVL scalar
#define OLC_LVL_ATTR
#define OLC_LA_VW 4
#define OLC_LA_NV 2
#define OLC_LA_WIDTH w
#include "linear_attention/olc_linear_attention_block.h"
#undef OLC_LA_NV
#undef OLC_LA_WIDTH
#define OLC_LA_NV 1
#define OLC_LA_WIDTH n
#include "linear_attention/olc_linear_attention_block.h"
#undef OLC_LA_NV
#undef OLC_LA_WIDTH
#undef OLC_LA_VW
#undef OLC_LVL_ATTR
#undef OLC_LVL
#if OLC_X86
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_LA_VW 8
#define OLC_LA_NV 2
#define OLC_LA_WIDTH w
#include "linear_attention/olc_linear_attention_block.h"
#undef OLC_LA_NV
#undef OLC_LA_WIDTH
#define OLC_LA_NV 1
#define OLC_LA_WIDTH n
#include "linear_attention/olc_linear_attention_block.h"
#undef OLC_LA_NV
#undef OLC_LA_WIDTH
#undef OLC_LA_VW
#undef OLC_LVL_ATTR
#undef OLC_LVL
#endif
#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_LA_VW 16
#define OLC_LA_NV 2
#define OLC_LA_WIDTH w
#include "linear_attention/olc_linear_attention_block.h"
#undef OLC_LA_NV
#undef OLC_LA_WIDTH
#define OLC_LA_NV 1
#define OLC_LA_WIDTH n
#include "linear_attention/olc_linear_attention_block.h"
#undef OLC_LA_NV
#undef OLC_LA_WIDTH
#undef OLC_LA_VW
#undef OLC_LVL_ATTR
#undef OLC_LVL
#endif

static inline int olc_la_level(int level) { return olc_build_level(level); }

/* The block kernel for this level and dv, and its width. */
static olc_la_block_fn olc_la_select(int level, int64_t dv, int64_t *JB) {
    level = olc_la_level(level);
#if OLC_X86 && OLC_HAVE_AVX512
    if (level >= OLC_AVX512) {
        if (dv <= 16) { *JB = 16; return olc_la_block_n_avx512; }
        *JB = 32; return olc_la_block_w_avx512;
    }
#endif
#if OLC_X86
    if (level >= OLC_AVX2) {
        if (dv <= 8) { *JB = 8; return olc_la_block_n_avx2; }
        *JB = 16; return olc_la_block_w_avx2;
    }
#endif
    (void)level;
    if (dv <= 4) { *JB = 4; return olc_la_block_n_scalar; }
    *JB = 8; return olc_la_block_w_scalar;
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
    const int narrow = p->tdt != OLC_FLOAT;
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
