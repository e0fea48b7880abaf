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
 * returns the task-range function.
 */
#ifndef OLC_CAUSAL_CONV_WITH_STATE_H
#define OLC_CAUSAL_CONV_WITH_STATE_H

#include <stdint.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_math.h"

/* Channels-first sequences up to SL + OLC_CCONV_SHORT positions go whole
 * through the row-block path. */
#define OLC_CCONV_SHORT 16

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

static inline float olc_cconv_act_(float v, int silu) { return silu ? v * olc_sigmoidf_(v) : v; }

/* Channels-first, scalar: the first `end` outputs of one row (those that
 * read the state, or the whole of a short row). */
#define OLC_CCONV_CF_HEAD(tname, T, LD)                                               \
    static inline void olc_cconv_cf_head_##tname(const olc_cconv_args *p, const T *xr,  \
            const T *sr, T *yr, const float *wr, float b0, int64_t end) {             \
        const int64_t K = p->K, SL = p->SL, d = p->dil;                               \
        for (int64_t t = 0; t < end; ++t) {                                           \
            float acc = b0;                                                           \
            for (int64_t j = 0; j < K; ++j) {                                         \
                int64_t i = t + SL - (K - 1 - j) * d;                                 \
                float v = i >= SL ? LD(xr[i - SL]) : sr ? LD(sr[i]) : 0.0f;           \
                acc = acc + wr[j * p->C] * v;                                         \
            }                                                                         \
            yr[t] = olc_cconv_st_##tname(olc_cconv_act_(acc, p->silu));               \
        }                                                                             \
    }                                                                                 \
    /* The row's present state: a copy of v's last SL positions. */                   \
    static inline void olc_cconv_cf_present_##tname(const olc_cconv_args *p, const T *xr, \
            const T *sr, T *pr) {                                                     \
        const int64_t L = p->L, SL = p->SL;                                           \
        int64_t i = 0;                                                                \
        if (L < SL) { /* the state's tail, then all of x */                           \
            for (; i < SL - L; ++i) pr[i] = sr ? sr[L + i] : (T)0;                    \
            for (; i < SL; ++i) pr[i] = xr[i - (SL - L)];                             \
        } else {                                                                      \
            for (; i < SL; ++i) pr[i] = xr[L - SL + i];                               \
        }                                                                             \
    }                                                                                 \
    /* The present state of rows [ra, rb) at once (sequences no longer than    \
     * SL: the state rows shifted by L in one copy, then x's values). */         \
    static inline void olc_cconv_cf_present_block_##tname(const olc_cconv_args *p,    \
            int64_t ra, int64_t rb) {                                                 \
        const int64_t L = p->L, SL = p->SL, n = rb - ra;                              \
        T *pr = (T *)p->present + ra * SL;                                            \
        const T *xr = (const T *)p->x + ra * L;                                       \
        if (SL == 0) return;                                                          \
        if (L < SL) {                                                                 \
            if (p->state)                                                             \
                memcpy(pr, (const T *)p->state + ra * SL + L, (size_t)(n * SL - L) * sizeof(T)); \
            else                                                                      \
                memset(pr, 0, (size_t)(n * SL) * sizeof(T));                          \
            for (int64_t r = 0; r < n; ++r)                                           \
                for (int64_t i = 0; i < L; ++i) pr[r * SL + SL - L + i] = xr[r * L + i]; \
        } else {                                                                      \
            for (int64_t r = 0; r < n; ++r)                                           \
                for (int64_t i = 0; i < SL; ++i) pr[r * SL + i] = xr[r * L + L - SL + i]; \
        }                                                                             \
    }                                                                                 \
    /* The head of up to W rows [ra, rb), transposed into lanes: vb[pos][lane]        \
     * holds v's first SL + head positions, wb[j][lane] the taps, bb the bias. */     \
    static inline void olc_cconv_cf_gather_##tname(const olc_cconv_args *p, int64_t ra, \
            int64_t rb, int64_t c, int W, float *vb, float *wb, float *bb) {          \
        const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL;                       \
        const int64_t P = SL + olc_cconv_block_len(L, SL);                                     \
        const int64_t n = rb - ra, head = P - SL;                                     \
        memset(vb, 0, (size_t)(P * W) * sizeof(float));                               \
        memset(wb, 0, (size_t)(K * W) * sizeof(float));                               \
        memset(bb, 0, (size_t)W * sizeof(float));                                     \
        if (c + n <= C) { /* one batch: the taps and biases are contiguous */         \
            for (int64_t j = 0; j < K; ++j)                                           \
                memcpy(wb + j * W, p->w + j * C + c, (size_t)n * sizeof(float));      \
            if (p->bias) memcpy(bb, p->bias + c, (size_t)n * sizeof(float));          \
        } else {                                                                      \
            for (int64_t lane = 0, cc = c; lane < n; ++lane, cc = cc + 1 == C ? 0 : cc + 1) { \
                for (int64_t j = 0; j < K; ++j) wb[j * W + lane] = p->w[j * C + cc];  \
                if (p->bias) bb[lane] = p->bias[cc];                                  \
            }                                                                         \
        }                                                                             \
        const T *xr = (const T *)p->x + ra * L;                                       \
        const T *sr = p->state ? (const T *)p->state + ra * SL : NULL;                \
        for (int64_t lane = 0; lane < n; ++lane, xr += L) {                           \
            if (sr) {                                                                 \
                for (int64_t i = 0; i < SL; ++i) vb[i * W + lane] = LD(sr[i]);        \
                sr += SL;                                                             \
            }                                                                         \
            for (int64_t i = 0; i < head; ++i) vb[(SL + i) * W + lane] = LD(xr[i]);   \
        }                                                                             \
    }

static inline float olc_cconv_st_f32(float v) { return v; }
static inline uint16_t olc_cconv_st_f16(float v) { return olc_f2h(v); }
static inline uint16_t olc_cconv_st_bf16(float v) { return olc_f2bf(v); }

OLC_CCONV_CF_HEAD(f32, float, OLC_IDENTITY_)
OLC_CCONV_CF_HEAD(f16, uint16_t, olc_h2f)
OLC_CCONV_CF_HEAD(bf16, uint16_t, olc_bf2f)

/* The block head applies when v's head fits the stack buffers. */
#define OLC_CCONV_MAX_SL 64
#define OLC_CCONV_MAX_K 65
/* Reach (K - 1) d the body's last partial vector copies to the stack. */
#define OLC_CCONV_WIN 256

/* Row bookkeeping shared by every level. */
#define OLC_CCONV_CF_ROW(T, r, c)                                                     \
    const T *xr = (const T *)p->x + (r) * L;                                          \
    const T *sr = p->state ? (const T *)p->state + (r) * SL : NULL;                   \
    T *yr = (T *)p->y + (r) * L, *pr = (T *)p->present + (r) * SL;                    \
    const float *wr = p->w + c; /* tap j at wr[j * C] */                              \
    float b0 = p->bias ? p->bias[c] : 0.0f;                                           \
    (void)wr; (void)b0; (void)yr;

/* Channels-last: one virtual row v[i] (all channels) of batch b. */
#define OLC_CCONV_CL_ROW(T, b, i)                                                     \
    ((i) >= SL ? (const T *)p->x + ((b) * L + (i) - SL) * C                           \
               : p->state ? (const T *)p->state + ((b) * SL + (i)) * C : NULL)

/* Channels-last tasks are (b, OLC_CCONV_TILE time steps), each step over
 * all channels: rows are read whole, in order (a task over a band of
 * channels would read every row in 256-byte pieces 8 KB apart, 3x slower).
 * The first task of a batch also writes its present state. */
#define OLC_CCONV_TILE 8
static inline int64_t olc_cconv_cl_tiles(int64_t L) {
    return L > 0 ? (L + OLC_CCONV_TILE - 1) / OLC_CCONV_TILE : 1;
}
#define OLC_CCONV_CL_TASK_BEGIN(T)                                                    \
    const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL, d = p->dil;               \
    const int64_t ntile = olc_cconv_cl_tiles(L);                                      \
    const T *rows[K];                                                                 \
    for (int64_t task = r0; task < r1; ++task) {                                      \
        int64_t b = task / ntile, t0 = (task % ntile) * OLC_CCONV_TILE;               \
        int64_t t1 = t0 + OLC_CCONV_TILE < L ? t0 + OLC_CCONV_TILE : L;               \
        if (t0 == 0)                                                                  \
            for (int64_t i = 0; i < SL; ++i) { /* present state rows */              \
                const T *src = OLC_CCONV_CL_ROW(T, b, L + i);                         \
                T *dst = (T *)p->present + (b * SL + i) * C;                          \
                if (src) memcpy(dst, src, (size_t)C * sizeof(T));                     \
                else memset(dst, 0, (size_t)C * sizeof(T));                           \
            }                                                                         \
        for (int64_t t = t0; t < t1; ++t) {                                           \
            T *yr = (T *)p->y + (b * L + t) * C;                                      \
            for (int64_t j = 0; j < K; ++j) rows[j] = OLC_CCONV_CL_ROW(T, b, t + SL - (K - 1 - j) * d);
#define OLC_CCONV_CL_TASK_END }}

/* ---- scalar twins ---- */
#define OLC_CCONV_SCALAR(tname, T, LD)                                                \
    static void olc_cconv_cf_##tname##_scalar(const olc_cconv_args *p, int64_t r0, int64_t r1) { \
        const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL, d = p->dil;           \
        const int64_t head = olc_cconv_block_len(L, SL);                                         \
        for (int64_t r = r0, c = r0 % C; r < r1; ++r, c = c + 1 == C ? 0 : c + 1) {   \
            OLC_CCONV_CF_ROW(T, r, c)                                                 \
            olc_cconv_cf_head_##tname(p, xr, sr, yr, wr, b0, head);                  \
            for (int64_t t = head; t < L; ++t) {                                      \
                float acc = b0;                                                       \
                for (int64_t j = 0; j < K; ++j)                                       \
                    acc = acc + wr[j * C] * LD(xr[t - (K - 1 - j) * d]);              \
                yr[t] = olc_cconv_st_##tname(olc_cconv_act_(acc, p->silu));           \
            }                                                                         \
            olc_cconv_cf_present_##tname(p, xr, sr, pr);                              \
        }                                                                             \
    }                                                                                 \
    static void olc_cconv_cl_##tname##_scalar(const olc_cconv_args *p, int64_t r0, int64_t r1) { \
        OLC_CCONV_CL_TASK_BEGIN(T)                                                    \
            for (int64_t c = 0; c < C; ++c) {                                         \
                float acc = p->bias ? p->bias[c] : 0.0f;                              \
                for (int64_t j = 0; j < K; ++j)                                       \
                    acc = acc + p->w[j * C + c] * (rows[j] ? LD(rows[j][c]) : 0.0f);  \
                yr[c] = olc_cconv_st_##tname(olc_cconv_act_(acc, p->silu));           \
            }                                                                         \
        OLC_CCONV_CL_TASK_END                                                         \
    }

OLC_CCONV_SCALAR(f32, float, OLC_IDENTITY_)
OLC_CCONV_SCALAR(f16, uint16_t, olc_h2f)
OLC_CCONV_SCALAR(bf16, uint16_t, olc_bf2f)

/* ---- vector levels ----
 * Channels-first: the head of W rows at a time, vectorised over the rows
 * (decode is all head), then each row's remaining outputs vectorised over
 * time.  Channels-last: vectorised over channels.  Partial vectors go
 * through the same vector code (AVX2: stack buffers, AVX-512: masks). */
#define OLC_CCONV_VEC(lvl, sfx, W, V, T, tname, LDV, STV, SET1, LDF, ADD, MUL, SILU)   \
    static inline OLC_TARGET_##lvl V olc_cconv_act_##tname##_##sfx(V acc, int silu) {  \
        return silu ? MUL(acc, SILU(acc)) : acc;                                       \
    }                                                                                  \
    static OLC_TARGET_##lvl void olc_cconv_cf_head_block_##tname##_##sfx(              \
            const olc_cconv_args *p, int64_t ra, int64_t rb, int64_t ca) {             \
        float vb[(2 * OLC_CCONV_MAX_SL + OLC_CCONV_SHORT) * W], wb[OLC_CCONV_MAX_K * W], bb[W];            \
        T ob[W];                                                                       \
        const int64_t L = p->L, K = p->K, SL = p->SL, d = p->dil;                      \
        const int64_t head = olc_cconv_block_len(L, SL);                                          \
        olc_cconv_cf_fill_##tname##_##sfx(p, ra, rb, ca, vb, wb, bb);                  \
        for (int64_t t = 0; t < head; ++t) {                                           \
            V acc = LDF(bb);                                                           \
            for (int64_t j = 0; j < K; ++j)                                            \
                acc = ADD(acc, MUL(LDF(wb + j * W), LDF(vb + (t + SL - (K - 1 - j) * d) * W))); \
            STV(ob, olc_cconv_act_##tname##_##sfx(acc, p->silu));                      \
            for (int64_t r = ra; r < rb; ++r) ((T *)p->y)[r * L + t] = ob[r - ra];    \
        }                                                                              \
    }                                                                                  \
    /* Outputs [t0, L) of one row (t0 >= SL): every tap reads x. */                    \
    static OLC_TARGET_##lvl void olc_cconv_cf_body_##tname##_##sfx(                    \
            const olc_cconv_args *p, const T *xr, T *yr, const float *wr, float b0, int64_t t0) { \
        const int64_t C = p->C, L = p->L, K = p->K, d = p->dil;                        \
        int64_t t = t0;                                                                \
        for (; t + W <= L; t += W) {                                                   \
            V acc = SET1(b0);                                                          \
            for (int64_t j = 0; j < K; ++j)                                            \
                acc = ADD(acc, MUL(SET1(wr[j * C]), LDV(xr + t - (K - 1 - j) * d)));   \
            STV(yr + t, olc_cconv_act_##tname##_##sfx(acc, p->silu));                  \
        }                                                                              \
        if (t < L) { /* the last partial vector, from a zero-padded window */          \
            int64_t n = L - t, span = (K - 1) * d + n;                                 \
            T win[W + OLC_CCONV_WIN], out[W];                                          \
            if ((K - 1) * d > OLC_CCONV_WIN) { /* long taps: scalar */                 \
                for (; t < L; ++t) {                                                   \
                    float acc = b0;                                                    \
                    for (int64_t j = 0; j < K; ++j)                                    \
                        acc = acc + wr[j * C] * olc_cconv_ld_##tname(xr[t - (K - 1 - j) * d]); \
                    yr[t] = olc_cconv_st_##tname(olc_cconv_act_(acc, p->silu));        \
                }                                                                      \
                return;                                                                \
            }                                                                          \
            memcpy(win, xr + t - (K - 1) * d, (size_t)span * sizeof(T));               \
            memset(win + span, 0, (size_t)(W - n) * sizeof(T));                       \
            V acc = SET1(b0);                                                          \
            for (int64_t j = 0; j < K; ++j)                                            \
                acc = ADD(acc, MUL(SET1(wr[j * C]), LDV(win + j * d)));                \
            STV(out, olc_cconv_act_##tname##_##sfx(acc, p->silu));                     \
            memcpy(yr + t, out, (size_t)n * sizeof(T));                                \
        }                                                                              \
    }                                                                                  \
    static OLC_TARGET_##lvl void olc_cconv_cf_##tname##_##sfx(const olc_cconv_args *p, int64_t r0, int64_t r1) { \
        const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL;                        \
        const int64_t head = olc_cconv_block_len(L, SL);                                          \
        const int block_head = SL <= OLC_CCONV_MAX_SL && K <= OLC_CCONV_MAX_K;         \
        int64_t c = r0 % C;                                                            \
        for (int64_t ra = r0; ra < r1; ra += W) {                                      \
            int64_t rb = ra + W < r1 ? ra + W : r1;                                    \
            if (block_head && head > 0) olc_cconv_cf_head_block_##tname##_##sfx(p, ra, rb, c); \
            if (block_head && head == L) { /* the block did the whole rows */         \
                olc_cconv_cf_present_block_##tname(p, ra, rb);                         \
                for (c += rb - ra; c >= C; c -= C) {}                                  \
                continue;                                                              \
            }                                                                          \
            for (int64_t r = ra; r < rb; ++r, c = c + 1 == C ? 0 : c + 1) {            \
                OLC_CCONV_CF_ROW(T, r, c)                                              \
                if (!block_head) olc_cconv_cf_head_##tname(p, xr, sr, yr, wr, b0, head); \
                if (head < L) olc_cconv_cf_body_##tname##_##sfx(p, xr, yr, wr, b0, head); \
                olc_cconv_cf_present_##tname(p, xr, sr, pr);                           \
            }                                                                          \
        }                                                                              \
    }

static inline float olc_cconv_ld_f32(float v) { return v; }
static inline float olc_cconv_ld_f16(uint16_t v) { return olc_h2f(v); }
static inline float olc_cconv_ld_bf16(uint16_t v) { return olc_bf2f(v); }

#if OLC_X86
/* The channels-first head block's v, taps and bias by gathers: lane i reads
 * row ra + i.  16-bit types gather 32-bit words, so the block holding the
 * array's last element, and blocks wrapping a batch, take the scalar fill. */
#define OLC_C2_GATHER_f32(base, idx, mi) \
    _mm256_mask_i32gather_ps(_mm256_setzero_ps(), (const float *)(base), idx, _mm256_castsi256_ps(mi), 4)
#define OLC_C2_GATHER16_(base, idx, mi) \
    _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)(base), idx, mi, 2)
static inline OLC_TARGET_AVX2 __m256 olc_c2_h16_to_ps(__m256i g) {
    __m256i lo = _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
    return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
}
#define OLC_C2_GATHER_f16(base, idx, mi) olc_c2_h16_to_ps(OLC_C2_GATHER16_(base, idx, mi))
#define OLC_C2_GATHER_bf16(base, idx, mi) \
    _mm256_castsi256_ps(_mm256_slli_epi32(OLC_C2_GATHER16_(base, idx, mi), 16))
#define OLC_CCONV_FILL(lvl, sfx, W, V, MASKT, MASKN, LANES, MULLO, SET1I, GATHER, ZERO, STF, LDM, tname, T) \
    static OLC_TARGET_##lvl void olc_cconv_cf_fill_##tname##_##sfx(const olc_cconv_args *p, int64_t ra, \
            int64_t rb, int64_t c, float *vb, float *wb, float *bb) {                \
        const int64_t C = p->C, L = p->L, K = p->K, SL = p->SL, n = rb - ra;          \
        const int64_t head = olc_cconv_block_len(L, SL);                                         \
        if ((sizeof(T) == 2 && rb == p->B * C) || c + n > C || L > (1 << 24)) {       \
            olc_cconv_cf_gather_##tname(p, ra, rb, c, W, vb, wb, bb);                 \
            return;                                                                   \
        }                                                                             \
        MASKT m = MASKN(n);                                                           \
        V zero = ZERO;                                                                \
        __typeof__(LANES) is = MULLO(LANES, SET1I((int)SL)), ix = MULLO(LANES, SET1I((int)L)); \
        const T *sr = p->state ? (const T *)p->state + ra * SL : NULL;                \
        const T *xr = (const T *)p->x + ra * L;                                       \
        for (int64_t i = 0; i < SL; ++i) STF(vb + i * W, sr ? GATHER(sr + i, is, m) : zero); \
        for (int64_t i = 0; i < head; ++i) STF(vb + (SL + i) * W, GATHER(xr + i, ix, m)); \
        for (int64_t j = 0; j < K; ++j) STF(wb + j * W, LDM(p->w + j * C + c, m));   \
        STF(bb, p->bias ? LDM(p->bias + c, m) : zero);                                \
    }
static inline OLC_TARGET_AVX2 __m256i olc_c2_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define OLC_C2_LDM(q, mi) _mm256_maskload_ps(q, mi)
#define OLC_C2_LANES _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
OLC_CCONV_FILL(AVX2, avx2, 8, __m256, __m256i, olc_c2_mask, OLC_C2_LANES, _mm256_mullo_epi32,
               _mm256_set1_epi32, OLC_C2_GATHER_f32, _mm256_setzero_ps(), _mm256_storeu_ps, OLC_C2_LDM, f32, float)
OLC_CCONV_FILL(AVX2, avx2, 8, __m256, __m256i, olc_c2_mask, OLC_C2_LANES, _mm256_mullo_epi32,
               _mm256_set1_epi32, OLC_C2_GATHER_f16, _mm256_setzero_ps(), _mm256_storeu_ps, OLC_C2_LDM, f16, uint16_t)
OLC_CCONV_FILL(AVX2, avx2, 8, __m256, __m256i, olc_c2_mask, OLC_C2_LANES, _mm256_mullo_epi32,
               _mm256_set1_epi32, OLC_C2_GATHER_bf16, _mm256_setzero_ps(), _mm256_storeu_ps, OLC_C2_LDM, bf16, uint16_t)

#define OLC_CCONV_AVX2(tname, T)                                                      \
    OLC_CCONV_VEC(AVX2, avx2, 8, __m256, T, tname, olc_ld_##tname##_avx2, olc_st_##tname##_avx2, \
                  _mm256_set1_ps, _mm256_loadu_ps, _mm256_add_ps, _mm256_mul_ps, olc_sigmoid_ps_avx2) \
    static OLC_TARGET_AVX2 void olc_cconv_cl_##tname##_avx2(const olc_cconv_args *p, int64_t r0, int64_t r1) { \
        const float *wts = p->w, *bias = p->bias;                                     \
        const int silu = p->silu;                                                     \
        OLC_CCONV_CL_TASK_BEGIN(T)                                                    \
            int64_t c = 0;                                                            \
            for (; c + 8 <= C; c += 8) {                                              \
                __m256 acc = bias ? _mm256_loadu_ps(bias + c) : _mm256_setzero_ps();  \
                for (int64_t j = 0; j < K; ++j) {                                     \
                    __m256 v = rows[j] ? olc_ld_##tname##_avx2(rows[j] + c) : _mm256_setzero_ps(); \
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(wts + j * C + c), v)); \
                }                                                                     \
                olc_st_##tname##_avx2(yr + c, olc_cconv_act_##tname##_avx2(acc, silu)); \
            }                                                                         \
            if (c < C) { /* the partial vector, through stack buffers */              \
                int64_t n = C - c;                                                    \
                float bw[8] = {0};                                                    \
                T bx[8] = {0};                                                        \
                if (bias) memcpy(bw, bias + c, (size_t)n * sizeof(float));            \
                __m256 acc = _mm256_loadu_ps(bw);                                     \
                for (int64_t j = 0; j < K; ++j) {                                     \
                    __m256 v = _mm256_setzero_ps();                                   \
                    if (rows[j]) { memcpy(bx, rows[j] + c, (size_t)n * sizeof(T)); v = olc_ld_##tname##_avx2(bx); } \
                    memcpy(bw, wts + j * C + c, (size_t)n * sizeof(float));           \
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(bw), v));  \
                }                                                                     \
                olc_st_##tname##_avx2(bx, olc_cconv_act_##tname##_avx2(acc, silu));   \
                memcpy(yr + c, bx, (size_t)n * sizeof(T));                            \
            }                                                                         \
        OLC_CCONV_CL_TASK_END                                                         \
    }

OLC_CCONV_AVX2(f32, float)
OLC_CCONV_AVX2(f16, uint16_t)
OLC_CCONV_AVX2(bf16, uint16_t)
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __mmask16 olc_cconv_mask16(int64_t k) {
    return k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << k) - 1);
}
static inline OLC_TARGET_AVX512 __m512 olc_c5_ld_f32(const float *q) { return _mm512_loadu_ps(q); }
static inline OLC_TARGET_AVX512 __m512 olc_c5_ld_f16(const uint16_t *q) { return olc_ld_f16_avx512(q, 0xffff); }
static inline OLC_TARGET_AVX512 __m512 olc_c5_ld_bf16(const uint16_t *q) { return olc_ld_bf16_avx512(q, 0xffff); }
static inline OLC_TARGET_AVX512 void olc_c5_st_f32(float *q, __m512 v) { _mm512_storeu_ps(q, v); }
static inline OLC_TARGET_AVX512 void olc_c5_st_f16(uint16_t *q, __m512 v) { olc_st_f16_avx512(q, 0xffff, v); }
static inline OLC_TARGET_AVX512 void olc_c5_st_bf16(uint16_t *q, __m512 v) { olc_st_bf16_avx512(q, 0xffff, v); }

#define OLC_C5_GATHER_f32(base, idx, m) \
    _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, (const void *)(base), 4)
#define OLC_C5_GATHER16_(base, idx, m) \
    _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, (const void *)(base), 2)
#define OLC_C5_GATHER_f16(base, idx, m) _mm512_cvtph_ps(_mm512_cvtepi32_epi16(OLC_C5_GATHER16_(base, idx, m)))
#define OLC_C5_GATHER_bf16(base, idx, m) \
    _mm512_castsi512_ps(_mm512_slli_epi32(OLC_C5_GATHER16_(base, idx, m), 16))
#define OLC_C5_LDM(q, m) _mm512_maskz_loadu_ps(m, q)
#define OLC_C5_LANES _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
OLC_CCONV_FILL(AVX512, avx512, 16, __m512, __mmask16, olc_cconv_mask16, OLC_C5_LANES, _mm512_mullo_epi32,
               _mm512_set1_epi32, OLC_C5_GATHER_f32, _mm512_setzero_ps(), _mm512_storeu_ps, OLC_C5_LDM, f32, float)
OLC_CCONV_FILL(AVX512, avx512, 16, __m512, __mmask16, olc_cconv_mask16, OLC_C5_LANES, _mm512_mullo_epi32,
               _mm512_set1_epi32, OLC_C5_GATHER_f16, _mm512_setzero_ps(), _mm512_storeu_ps, OLC_C5_LDM, f16, uint16_t)
OLC_CCONV_FILL(AVX512, avx512, 16, __m512, __mmask16, olc_cconv_mask16, OLC_C5_LANES, _mm512_mullo_epi32,
               _mm512_set1_epi32, OLC_C5_GATHER_bf16, _mm512_setzero_ps(), _mm512_storeu_ps, OLC_C5_LDM, bf16, uint16_t)

#define OLC_CCONV_AVX512(tname, T)                                                    \
    OLC_CCONV_VEC(AVX512, avx512, 16, __m512, T, tname, olc_c5_ld_##tname, olc_c5_st_##tname, \
                  _mm512_set1_ps, _mm512_loadu_ps, _mm512_add_ps, _mm512_mul_ps, olc_sigmoid_ps_avx512) \
    static OLC_TARGET_AVX512 void olc_cconv_cl_##tname##_avx512(const olc_cconv_args *p, int64_t r0, int64_t r1) { \
        const float *wts = p->w, *bias = p->bias;                                     \
        const int silu = p->silu;                                                     \
        OLC_CCONV_CL_TASK_BEGIN(T)                                                    \
            for (int64_t c = 0; c < C; c += 16) {                                     \
                __mmask16 m = olc_cconv_mask16(C - c);                                \
                __m512 acc = bias ? _mm512_maskz_loadu_ps(m, bias + c) : _mm512_setzero_ps(); \
                for (int64_t j = 0; j < K; ++j) {                                     \
                    __m512 v = rows[j] ? olc_ld_##tname##_avx512(rows[j] + c, m) : _mm512_setzero_ps(); \
                    acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, wts + j * C + c), v)); \
                }                                                                     \
                olc_st_##tname##_avx512(yr + c, m, olc_cconv_act_##tname##_avx512(acc, silu)); \
            }                                                                         \
        OLC_CCONV_CL_TASK_END                                                         \
    }

OLC_CCONV_AVX512(f32, float)
OLC_CCONV_AVX512(f16, uint16_t)
OLC_CCONV_AVX512(bf16, uint16_t)
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

static int olc_cconv_level(int level) { return olc_build_level(level); }

#if OLC_X86 && OLC_HAVE_AVX512
#define OLC_CCONV_PICK_512_(f, level) if (level >= OLC_AVX512) return f##_avx512;
#else
#define OLC_CCONV_PICK_512_(f, level)
#endif
#if OLC_X86
#define OLC_CCONV_PICK_2_(f, level) if (level >= OLC_AVX2) return f##_avx2;
#else
#define OLC_CCONV_PICK_2_(f, level)
#endif
#define OLC_CCONV_PICK_(f, level)                                                     \
    do {                                                                              \
        OLC_CCONV_PICK_512_(f, level)                                                 \
        OLC_CCONV_PICK_2_(f, level)                                                   \
        return f##_scalar;                                                            \
    } while (0)
#define OLC_CCONV_PICK_LAYOUT_(t, cl, level)                                          \
    do {                                                                              \
        if (cl) OLC_CCONV_PICK_(olc_cconv_cl_##t, level);                             \
        OLC_CCONV_PICK_(olc_cconv_cf_##t, level);                                     \
    } while (0)

/* ONNX element types: 1 FLOAT, 10 FLOAT16, 16 BFLOAT16. */
static olc_cconv_fn olc_cconv_select(int dtype, int channels_last, int level) {
    level = olc_cconv_level(level);
    switch (dtype) {
    case 1: OLC_CCONV_PICK_LAYOUT_(f32, channels_last, level);
    case 10: OLC_CCONV_PICK_LAYOUT_(f16, channels_last, level);
    case 16: OLC_CCONV_PICK_LAYOUT_(bf16, channels_last, level);
    }
    return NULL;
}

#endif /* OLC_CAUSAL_CONV_WITH_STATE_H */
