/* Mixture of experts (com.microsoft MoE and QMoE) on the float32 GEMM engine
 * and the MatMulNBits engines.
 *
 * One call (olc_moe_forward) runs the whole operator on float32 tokens:
 *   1. routing: softmax over the E router logits of each token, the k most
 *      probable experts (equal probabilities: the higher expert index
 *      first, as ONNX Runtime), optionally renormalised to sum to one;
 *   2. for each expert in index order, its routed tokens in token order, in
 *      tiles of at most OLC_MOE_TILE rows: gather the rows, FC1 (+ FC3),
 *      bias and activation, FC2 and bias, then add weight * result into the
 *      token's output row.  Every output element therefore sums its experts
 *      in one fixed order, whatever the thread count.
 * A projection (olc_moe_proj) holds the E experts' matrices in one of three
 * forms, prepared once by the functions below:
 *   - OLC_MOE_PACKED: float matrices in the GEMM engine's panel layout
 *     (olc_sgemm_pack_b; MoE);
 *   - OLC_MOE_CODES: quantized codes in that same panel order, one signed
 *     byte per code (olc_moe_pack_codes), and their scales
 *     (olc_moe_pack_scales_out / _in): decoded panel by panel, a chunk of
 *     OLC_MOE_CHUNK output columns at a time, into a per-thread buffer that
 *     the engine's micro-kernels read (the matrix is never decoded whole);
 *   - OLC_MOE_NBITS: one MatMulNBits matrix per expert (olc_nb_w, and
 *     olc_q8_w where the int8 engine runs it; matmul_nbits/olc_matmul_nbits.h),
 *     which adds the projection's bias itself.
 * One token with float experts (decode) runs its k experts as one batch of
 * each projection.  The plain loops compiled per level are in
 * olc_moe_loops.h.
 */
#ifndef OLC_MOE_H
#define OLC_MOE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_types.h"
#include "common/olc_level.h"
#include "engines/gemm/olc_gemm.h"
#include "matmul_nbits/olc_matmul_nbits.h"
#include "common/olc_math.h"
#include "common/olc_pool.h"

enum { OLC_MOE_RELU = 0, OLC_MOE_GELU = 1, OLC_MOE_SILU = 2, OLC_MOE_IDENTITY = 3,
       OLC_MOE_SWIGLU = 4 };

/* Rows of a tile: bounds the scratch (a tile of FC1 outputs is at most
 * OLC_MOE_TILE x 2I floats). */
#define OLC_MOE_TILE 256
/* Output columns one thread decodes and multiplies at a time (a multiple
 * of every level's panel width): K x 64 floats stay in L2. */
#define OLC_MOE_CHUNK 64
/* sqrt(2 / pi), for the tanh form of Gelu that ONNX Runtime's MoE uses. */
#define OLC_MOE_GELU_C 0.7978845608028654f
#define OLC_MOE_GELU_A 0.044715f

/* ---- projections ---- */

enum { OLC_MOE_PACKED = 0, OLC_MOE_CODES = 1, OLC_MOE_NBITS = 2 };

/* Scales of quantized codes: output-major codes have one scale per (output
 * n, group of 2^shift inputs), stored per panel of nr outputs as
 * [group][nr]; input-major ones one per (input k, group of 2^shift
 * outputs), stored [k][ngs]. */
enum { OLC_MOE_SCALE_OUT = 0, OLC_MOE_SCALE_IN = 1 };

/* The engine path of a MatMulNBits projection, for the caller's label:
 * decoded panels, codes read in place, or the int8 engine (+ its kind,
 * olc_int8_level). */
enum { OLC_MOE_PATH_NONE = -1, OLC_MOE_PATH_PANEL = 0, OLC_MOE_PATH_DIRECT = 1,
       OLC_MOE_PATH_INT8 = 2 };

typedef struct {
    int kind;              /* OLC_MOE_PACKED, _CODES or _NBITS */
    int64_t N, K, E;       /* output and input features, experts */
    int64_t bsize;         /* floats (PACKED) or bytes (CODES) per expert */
    const float *packed;   /* PACKED: E packed matrices */
    const int8_t *codes;   /* CODES: E code matrices in panel order */
    const float *scales;   /* CODES: E scale tables, ssize floats apart */
    int64_t ssize;
    int scale_mode, shift; /* OLC_MOE_SCALE_*, log2 of the group size */
    int64_t ngs;           /* groups per panel (OUT) or per input row (IN) */
    const olc_nb_w *nb;    /* NBITS: E matrices; */
    const olc_q8_w *q8;    /* E int8 layouts, codes NULL where the float engine runs */
} olc_moe_proj;

typedef void (*olc_moe_decode_fn)(const int8_t *codes, const float *scales, int64_t pc,
                                  int64_t kc, int64_t n0, const olc_moe_proj *p, float *dst);
typedef void (*olc_moe_axpy_fn)(float *out, const float *y, const float *b, float w, int64_t n);

#define OLC_LVL scalar
#define OLC_LVL_ATTR
#define OLC_MOE_NR OLC_S_NR
#include "moe/olc_moe_loops.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_MOE_NR
#if OLC_X86
#define OLC_LVL avx2
#define OLC_LVL_ATTR OLC_TARGET_AVX2
#define OLC_MOE_NR OLC_A2_NR
#include "moe/olc_moe_loops.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_MOE_NR
#if OLC_HAVE_AVX512
#define OLC_LVL avx512
#define OLC_LVL_ATTR OLC_TARGET_AVX512
#define OLC_MOE_NR OLC_A5_NR
#include "moe/olc_moe_loops.h"
#undef OLC_LVL
#undef OLC_LVL_ATTR
#undef OLC_MOE_NR
#endif
#endif

static olc_moe_decode_fn olc_moe_decode_select(int level) {
    return OLC_LEVEL_FN(olc_gemm_level(level), olc_moe_decode);
}

static olc_moe_axpy_fn olc_moe_axpy_select(int level) {
    return OLC_LEVEL_FN(olc_gemm_level(level), olc_moe_axpy);
}

/* ---- preparing quantized codes (OLC_MOE_CODES) ---- */

/* Bytes of one expert's codes in panel order at a level. */
static int64_t olc_moe_codes_size(int level, int64_t N, int64_t K) {
    return olc_sgemm_packed_size(level, K, N);
}

/* E code matrices, element (e, n, k) at q[e * se + n * sn + k * sk], in
 * the level's panel order, expert e at dst + e * olc_moe_codes_size: the
 * layout olc_sgemm_pack_b gives floats (block pc of KC inputs at pc * npad,
 * its panel j at + j * kc, kc rows of nr codes, zero past N). */
static void olc_moe_pack_codes(int level, const int8_t *q, int64_t se, int64_t sn, int64_t sk,
                               int64_t E, int64_t N, int64_t K, int8_t *dst) {
    int64_t nr = olc_sgemm_nr(level), npad = (N + nr - 1) / nr * nr;
    for (int64_t e = 0; e < E; ++e)
        for (int64_t pc = 0; pc < K; pc += OLC_GEMM_KC) {
            int64_t kc = K - pc < OLC_GEMM_KC ? K - pc : OLC_GEMM_KC;
            for (int64_t j = 0; j < npad; j += nr) {
                int8_t *d = dst + e * K * npad + pc * npad + j * kc;
                for (int64_t k = 0; k < kc; ++k)
                    for (int64_t v = 0; v < nr; ++v)
                        d[k * nr + v] = j + v < N ? q[e * se + (j + v) * sn + (pc + k) * sk] : 0;
            }
        }
}

/* Output-major scales s [E][N][G] as OLC_MOE_SCALE_OUT tables
 * [E][npad / nr][G][nr] (zero past N), npad * G floats an expert. */
static void olc_moe_pack_scales_out(int level, const float *s, int64_t E, int64_t N, int64_t G,
                                    float *dst) {
    int64_t nr = olc_sgemm_nr(level), npan = (N + nr - 1) / nr;
    for (int64_t e = 0; e < E; ++e)
        for (int64_t p = 0; p < npan; ++p)
            for (int64_t g = 0; g < G; ++g)
                for (int64_t c = 0; c < nr; ++c) {
                    int64_t n = p * nr + c;
                    dst[((e * npan + p) * G + g) * nr + c] = n < N ? s[(e * N + n) * G + g] : 0.0f;
                }
}

/* Input-major scales s [E][K][P] as OLC_MOE_SCALE_IN tables [E][K][G],
 * G >= P (zero past P). */
static void olc_moe_pack_scales_in(const float *s, int64_t E, int64_t K, int64_t P, int64_t G,
                                   float *dst) {
    for (int64_t r = 0; r < E * K; ++r)
        for (int64_t g = 0; g < G; ++g) dst[r * G + g] = g < P ? s[r * P + g] : 0.0f;
}

/* ---- running a projection ---- */

typedef struct {
    int level;
    const olc_moe_proj *p;
    const int8_t *codes;
    const float *scales, *a;
    int64_t M, N, K, nr, npad, ldc;
    olc_moe_decode_fn decode;
    float *c;
    float **buf; /* a decoded chunk, one buffer a slot */
    int failed;
} olc_moe_qgemm_job;

/* Chunk ch of OLC_MOE_CHUNK output columns: decoded panel by panel into
 * the slot's buffer (the engine's packed layout), then the engine runs on
 * it single-threaded. */
static void olc_moe_qgemm_task(void *arg, ptrdiff_t ch, int slot) {
    olc_moe_qgemm_job *q = (olc_moe_qgemm_job *)arg;
    static const int64_t zero = 0;
    const int64_t N = q->N, K = q->K, nr = q->nr;
    float *buf = olc_slot_buffer(q->buf, slot, (size_t)(K * OLC_MOE_CHUNK));
    if (buf == NULL) {
        __atomic_store_n(&q->failed, 1, __ATOMIC_RELAXED);
        return;
    }
    int64_t n0 = ch * OLC_MOE_CHUNK, n1 = n0 + OLC_MOE_CHUNK < N ? n0 + OLC_MOE_CHUNK : N;
    int64_t wpad = (n1 - n0 + nr - 1) / nr * nr;
    for (int64_t pc = 0; pc < K; pc += OLC_GEMM_KC) {
        int64_t kc = K - pc < OLC_GEMM_KC ? K - pc : OLC_GEMM_KC;
        for (int64_t j = n0; j < n0 + wpad; j += nr)
            q->decode(q->codes + pc * q->npad + j * kc, q->scales, pc, kc, j, q->p,
                      buf + pc * wpad + (j - n0) * kc);
    }
    if (olc_sgemm(q->level, OLC_FLOAT, 1, q->a, &zero, K, 1, buf, &zero, NULL, NULL, 0, 0, q->M,
                  n1 - n0, K, q->c + n0, q->ldc, 0, 1.0f, 0, 1) != 0)
        __atomic_store_n(&q->failed, 1, __ATOMIC_RELAXED);
}

/* c (M x N, rows ldc apart) = a (M x K, float32 row-major) times expert e's
 * quantized matrix: threads take chunks of OLC_MOE_CHUNK output columns
 * (olc_moe_qgemm_task).  The chunks only split columns: each element is
 * summed in the same order always. */
static int olc_moe_qgemm(int level, const olc_moe_proj *p, int64_t e, const float *a, int64_t M,
                         float *c, int64_t ldc, int nthreads) {
    olc_moe_qgemm_job job;
    int64_t nchunks = (p->N + OLC_MOE_CHUNK - 1) / OLC_MOE_CHUNK;
    job.level = level;
    job.p = p;
    job.codes = p->codes + e * p->bsize;
    job.scales = p->scales + e * p->ssize;
    job.a = a;
    job.M = M;
    job.N = p->N;
    job.K = p->K;
    job.nr = olc_sgemm_nr(level);
    job.npad = (p->N + job.nr - 1) / job.nr * job.nr;
    job.ldc = ldc;
    job.decode = olc_moe_decode_select(level);
    job.c = c;
    job.failed = 0;
    if (nthreads > nchunks) nthreads = (int)nchunks;
    if ((job.buf = olc_slot_buffers(nthreads)) == NULL) return -1;
    olc_parallel_for(nchunks, olc_moe_qgemm_task, &job, nthreads);
    olc_slot_buffers_free(job.buf, nthreads);
    return job.failed ? -1 : 0;
}

/* y (M x N) = bias + a (M x K) times expert e's MatMulNBits matrix, at the
 * raw SIMD level (the int8 engine has a VNNI kind).  Where the int8 engine
 * meets a row that is not finite, the finite rows keep its result and the
 * others take the float engine (no row depends on the rows batched with
 * it).  *path tells the engine that ran.  Returns 0, or -1 without memory. */
static int olc_moe_nbits(int level, const olc_moe_proj *p, int64_t e, const float *a, int64_t M,
                         const float *bias, float *y, int nthreads, int *path) {
    const olc_nb_w *w = p->nb + e;
    const olc_q8_w *q8 = p->q8 + e;
    int64_t N = w->N, K = w->K;
    if (M == 0 || N == 0) {
        *path = OLC_MOE_PATH_PANEL;
        return 0;
    }
    if (q8->codes != NULL) {
        int kind = olc_int8_level(level);
        int status = olc_q8_run(q8, a, M, bias, y, kind, nthreads);
        if (status < 0) return -1;
        if (status == 0) {
            *path = OLC_MOE_PATH_INT8 + kind;
            return 0;
        }
        int64_t nf = 0;
        char *finite = (char *)malloc((size_t)M);
        if (finite == NULL) return -1;
        for (int64_t m = 0; m < M; ++m) {
            int ok = 1;
            for (int64_t i = 0; i < K && ok; ++i) ok = isfinite(a[m * K + i]) != 0;
            finite[m] = (char)ok;
            nf += ok;
        }
        if (nf > 0) {
            /* the finite rows, then the others, each batch gathered */
            float *ab = (float *)malloc((size_t)(M * K + 1) * sizeof(float));
            float *yb = (float *)malloc((size_t)(M * N + 1) * sizeof(float));
            int sub = 0;
            status = ab == NULL || yb == NULL ? -1 : 0;
            for (int part = 1; part >= 0 && status == 0; --part) {
                int64_t r = 0;
                for (int64_t m = 0; m < M; ++m)
                    if (finite[m] == part) memcpy(ab + r++ * K, a + m * K, (size_t)K * sizeof(float));
                status = olc_moe_nbits(level, p, e, ab, r, bias, yb, nthreads, &sub);
                for (int64_t m = 0, i = 0; m < M && status == 0; ++m)
                    if (finite[m] == part) memcpy(y + m * N, yb + i++ * N, (size_t)N * sizeof(float));
            }
            free(ab); free(yb); free(finite);
            *path = OLC_MOE_PATH_INT8 + kind;
            return status;
        }
        free(finite);
    }
    int route = 0;
    if (olc_nb_float(w, a, M, bias, y, level, nthreads, &route) != 0) return -1;
    *path = route == OLC_NB_ROUTE_DIRECT ? OLC_MOE_PATH_DIRECT : OLC_MOE_PATH_PANEL;
    return 0;
}

/* c (M x N) = a (M x K) times expert e's matrix of projection p (+ bias,
 * which only the MatMulNBits form takes; the others get NULL). */
static int olc_moe_project(int level, const olc_moe_proj *p, int64_t e, const float *a,
                           int64_t M, const float *bias, float *c, int nthreads, int *path) {
    static const int64_t zero = 0;
    if (p->kind == OLC_MOE_NBITS) return olc_moe_nbits(level, p, e, a, M, bias, c, nthreads, path);
    if (p->kind == OLC_MOE_CODES) return olc_moe_qgemm(level, p, e, a, M, c, p->N, nthreads);
    return olc_sgemm(level, OLC_FLOAT, 1, a, &zero, p->K, 1, p->packed + e * p->bsize,
                     &zero, NULL, NULL, 0, 0, M, p->N, p->K, c, p->N, 0, 1.0f, 0, nthreads);
}

/* ---- activations ---- */

/* Arguments of one activation pass over rows r0..r1 of a tile: FC1 rows
 * h (ldh floats apart; interleaved gate/linear pairs for fused SwiGLU),
 * optional FC1 bias b1, optional FC3 rows u (NI = inter_size floats
 * each) and bias b3; the result g is rows of NI floats. */
typedef struct {
    int op, fused, gated;
    int64_t NI, ldh;
    const float *h, *b1, *u, *b3;
    float *g;
    float alpha, beta, limit;
} olc_moe_act_args;

static inline float olc_moe_act1(int op, float v) {
    switch (op) {
    case OLC_MOE_RELU: return v > 0.0f ? v : 0.0f;
    case OLC_MOE_GELU: {
        float t = olc_tanhf_(OLC_MOE_GELU_C * (v + OLC_MOE_GELU_A * v * v * v));
        return 0.5f * v * (1.0f + t);
    }
    case OLC_MOE_SILU: return v * olc_sigmoidf_(v);
    default: return v;
    }
}

/* SwiGLU of a gate and linear value: the gate clamped from above, the
 * linear value on both sides, by the limit (infinite when not given).  A
 * NaN passes the clamps, as through ONNX Runtime's std::min / std::clamp;
 * the vector twins put the limit first in min/max, which then return the
 * NaN operand. */
static inline float olc_moe_swiglu1(float gv, float lv, float alpha, float beta, float limit) {
    gv = limit < gv ? limit : gv;
    lv = lv < -limit ? -limit : (limit < lv ? limit : lv);
    return gv * olc_sigmoidf_(alpha * gv) * (lv + beta);
}

static void olc_moe_act_scalar(const olc_moe_act_args *p, int64_t r0, int64_t r1) {
    int64_t NI = p->NI;
    for (int64_t r = r0; r < r1; ++r) {
        const float *h = p->h + r * p->ldh;
        float *g = p->g + r * NI;
        for (int64_t j = 0; j < NI; ++j) {
            float gv, lv = 0.0f;
            if (p->fused) {
                gv = h[2 * j] + (p->b1 ? p->b1[2 * j] : 0.0f);
                lv = h[2 * j + 1] + (p->b1 ? p->b1[2 * j + 1] : 0.0f);
            } else {
                gv = h[j] + (p->b1 ? p->b1[j] : 0.0f);
                if (p->gated) lv = p->u[r * NI + j] + (p->b3 ? p->b3[j] : 0.0f);
            }
            if (p->op == OLC_MOE_SWIGLU)
                g[j] = olc_moe_swiglu1(gv, lv, p->alpha, p->beta, p->limit);
            else
                g[j] = p->gated ? olc_moe_act1(p->op, gv) * lv : olc_moe_act1(p->op, gv);
        }
    }
}

#if OLC_X86
/* The same with 8 lanes: gate and linear vectors are loaded (and for
 * fused SwiGLU de-interleaved), then one vector formula per activation. */
static inline OLC_TARGET_AVX2 __m256 olc_moe_act_v2(int op, __m256 v) {
    switch (op) {
    case OLC_MOE_RELU: return _mm256_max_ps(v, _mm256_setzero_ps());
    case OLC_MOE_GELU: {
        __m256 v3 = _mm256_mul_ps(_mm256_mul_ps(v, v), v);
        __m256 t = olc_tanh_ps_avx2(_mm256_mul_ps(_mm256_set1_ps(OLC_MOE_GELU_C),
                                                  _mm256_fmadd_ps(_mm256_set1_ps(OLC_MOE_GELU_A), v3, v)));
        return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.0f), t));
    }
    case OLC_MOE_SILU: return _mm256_mul_ps(v, olc_sigmoid_ps_avx2(v));
    default: return v;
    }
}

static OLC_TARGET_AVX2 void olc_moe_act_avx2(const olc_moe_act_args *p, int64_t r0, int64_t r1) {
    int64_t NI = p->NI, NI8 = NI & ~(int64_t)7;
    const __m256 alpha = _mm256_set1_ps(p->alpha), beta = _mm256_set1_ps(p->beta);
    const __m256 hi = _mm256_set1_ps(p->limit), lo = _mm256_set1_ps(-p->limit);
    const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (int64_t r = r0; r < r1; ++r) {
        const float *h = p->h + r * p->ldh;
        float *g = p->g + r * NI;
        for (int64_t j = 0; j < NI8; j += 8) {
            __m256 gv, lv = _mm256_setzero_ps();
            if (p->fused) {
                /* pairs (g, l): permute each half to [g g g g l l l l] */
                __m256 x0 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(h + 2 * j), even);
                __m256 x1 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(h + 2 * j + 8), even);
                gv = _mm256_permute2f128_ps(x0, x1, 0x20);
                lv = _mm256_permute2f128_ps(x0, x1, 0x31);
                if (p->b1) {
                    __m256 b0 = _mm256_permutevar8x32_ps(_mm256_loadu_ps(p->b1 + 2 * j), even);
                    __m256 bb = _mm256_permutevar8x32_ps(_mm256_loadu_ps(p->b1 + 2 * j + 8), even);
                    gv = _mm256_add_ps(gv, _mm256_permute2f128_ps(b0, bb, 0x20));
                    lv = _mm256_add_ps(lv, _mm256_permute2f128_ps(b0, bb, 0x31));
                }
            } else {
                gv = _mm256_loadu_ps(h + j);
                if (p->b1) gv = _mm256_add_ps(gv, _mm256_loadu_ps(p->b1 + j));
                if (p->gated) {
                    lv = _mm256_loadu_ps(p->u + r * NI + j);
                    if (p->b3) lv = _mm256_add_ps(lv, _mm256_loadu_ps(p->b3 + j));
                }
            }
            __m256 y;
            if (p->op == OLC_MOE_SWIGLU) {
                gv = _mm256_min_ps(hi, gv);
                lv = _mm256_max_ps(lo, _mm256_min_ps(hi, lv));
                y = _mm256_mul_ps(_mm256_mul_ps(gv, olc_sigmoid_ps_avx2(_mm256_mul_ps(alpha, gv))),
                                  _mm256_add_ps(lv, beta));
            } else {
                y = olc_moe_act_v2(p->op, gv);
                if (p->gated) y = _mm256_mul_ps(y, lv);
            }
            _mm256_storeu_ps(g + j, y);
        }
        if (NI8 < NI) {
            olc_moe_act_args tail = *p;
            /* the last columns, one row, through the scalar twin */
            tail.NI = NI - NI8;
            tail.ldh = 0;
            tail.h = h + (p->fused ? 2 * NI8 : NI8);
            tail.b1 = p->b1 ? p->b1 + (p->fused ? 2 * NI8 : NI8) : NULL;
            tail.u = p->gated ? p->u + r * NI + NI8 : NULL;
            tail.b3 = p->b3 ? p->b3 + NI8 : NULL;
            tail.g = g + NI8;
            olc_moe_act_scalar(&tail, 0, 1);
        }
    }
}
#endif

#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512 olc_moe_act_v5(int op, __m512 v) {
    switch (op) {
    case OLC_MOE_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    case OLC_MOE_GELU: {
        __m512 v3 = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
        __m512 t = olc_tanh_ps_avx512(_mm512_mul_ps(_mm512_set1_ps(OLC_MOE_GELU_C),
                                                    _mm512_fmadd_ps(_mm512_set1_ps(OLC_MOE_GELU_A), v3, v)));
        return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(_mm512_set1_ps(1.0f), t));
    }
    case OLC_MOE_SILU: return _mm512_mul_ps(v, olc_sigmoid_ps_avx512(v));
    default: return v;
    }
}

static OLC_TARGET_AVX512 void olc_moe_act_avx512(const olc_moe_act_args *p, int64_t r0, int64_t r1) {
    int64_t NI = p->NI;
    const __m512 alpha = _mm512_set1_ps(p->alpha), beta = _mm512_set1_ps(p->beta);
    const __m512 hi = _mm512_set1_ps(p->limit), lo = _mm512_set1_ps(-p->limit);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (int64_t r = r0; r < r1; ++r) {
        const float *h = p->h + r * p->ldh;
        float *g = p->g + r * NI;
        for (int64_t j = 0; j < NI; j += 16) {
            int64_t n = NI - j < 16 ? NI - j : 16;
            __mmask16 m = (__mmask16)((1u << n) - 1u);
            __m512 gv, lv = _mm512_setzero_ps();
            if (p->fused) {
                /* 2n interleaved values: two masked loads, then even/odd lanes */
                __mmask16 m0 = n >= 8 ? (__mmask16)0xffff : (__mmask16)((1u << (2 * n)) - 1u);
                __mmask16 m1 = n > 8 ? (__mmask16)((1u << (2 * (n - 8))) - 1u) : 0;
                __m512 x0 = _mm512_maskz_loadu_ps(m0, h + 2 * j);
                __m512 x1 = _mm512_maskz_loadu_ps(m1, h + 2 * j + 16);
                gv = _mm512_permutex2var_ps(x0, even, x1);
                lv = _mm512_permutex2var_ps(x0, odd, x1);
                if (p->b1) {
                    __m512 b0 = _mm512_maskz_loadu_ps(m0, p->b1 + 2 * j);
                    __m512 bb = _mm512_maskz_loadu_ps(m1, p->b1 + 2 * j + 16);
                    gv = _mm512_add_ps(gv, _mm512_permutex2var_ps(b0, even, bb));
                    lv = _mm512_add_ps(lv, _mm512_permutex2var_ps(b0, odd, bb));
                }
            } else {
                gv = _mm512_maskz_loadu_ps(m, h + j);
                if (p->b1) gv = _mm512_add_ps(gv, _mm512_maskz_loadu_ps(m, p->b1 + j));
                if (p->gated) {
                    lv = _mm512_maskz_loadu_ps(m, p->u + r * NI + j);
                    if (p->b3) lv = _mm512_add_ps(lv, _mm512_maskz_loadu_ps(m, p->b3 + j));
                }
            }
            __m512 y;
            if (p->op == OLC_MOE_SWIGLU) {
                gv = _mm512_min_ps(hi, gv);
                lv = _mm512_max_ps(lo, _mm512_min_ps(hi, lv));
                y = _mm512_mul_ps(_mm512_mul_ps(gv, olc_sigmoid_ps_avx512(_mm512_mul_ps(alpha, gv))),
                                  _mm512_add_ps(lv, beta));
            } else {
                y = olc_moe_act_v5(p->op, gv);
                if (p->gated) y = _mm512_mul_ps(y, lv);
            }
            _mm512_mask_storeu_ps(g + j, m, y);
        }
    }
}
#endif

typedef void (*olc_moe_act_fn)(const olc_moe_act_args *p, int64_t r0, int64_t r1);

static olc_moe_act_fn olc_moe_act_select(int level) {
    return OLC_LEVEL_FN(olc_gemm_level(level), olc_moe_act);
}

/* ---- routing ---- */

/* Routing of MoE (OLC_MOE_ROUTE_SOFTMAX) and of QMoE (the other two, as
 * ONNX Runtime's QMoE CPU kernel computes it). */
enum { OLC_MOE_ROUTE_SOFTMAX = 0, OLC_MOE_ROUTE_TOPK = 1, OLC_MOE_ROUTE_WEIGHTS = 2 };
/* QMoE skips routes of weight <= this (and NaN weights), as ONNX Runtime. */
#define OLC_MOE_MIN_WEIGHT 1e-8f

/* For each of the T tokens its k experts (sel) and weights (wsel):
 * - OLC_MOE_ROUTE_SOFTMAX (MoE): softmax over the E logits, the k most
 *   probable experts (ties: the higher expert index first), renormalised
 *   to sum to one when asked; a token with a NaN logit gets weights 0;
 * - OLC_MOE_ROUTE_TOPK (QMoE): the k largest raw logits (same ties), and
 *   the softmax over those k logits only (multiplied by the reciprocal of
 *   its sum, as ONNX Runtime);
 * - OLC_MOE_ROUTE_WEIGHTS (QMoE with router weights rweights, T x E): the
 *   experts of the k largest logits, weighted by their router weights,
 *   divided by their sum when asked (a sum of 0 gives weights 0).
 * prob: E floats of scratch. */
static void olc_moe_route(int64_t T, int64_t E, int64_t k, int mode, int normalize,
                          const float *logits, const float *rweights, int32_t *sel, float *wsel,
                          float *prob) {
    for (int64_t t = 0; t < T; ++t) {
        const float *l = logits + t * E;
        int32_t *s = sel + t * k;
        float *w = wsel + t * k;
        if (mode != OLC_MOE_ROUTE_SOFTMAX) {
            /* the k largest logits: a NaN never beats a number */
            for (int64_t j = 0; j < k; ++j) {
                int64_t best = -1;
                for (int64_t e = 0; e < E; ++e) {
                    int taken = 0;
                    for (int64_t i = 0; i < j; ++i) taken |= s[i] == e;
                    if (taken) continue;
                    if (best < 0 || l[e] >= l[best] || (l[best] != l[best] && l[e] == l[e]))
                        best = e;
                }
                s[j] = (int32_t)best;
            }
            if (mode == OLC_MOE_ROUTE_TOPK) {
                float mx = l[s[0]], sum = 0.0f;
                for (int64_t j = 0; j < k; ++j) sum += w[j] = olc_expf_(l[s[j]] - mx);
                float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
                for (int64_t j = 0; j < k; ++j) w[j] *= inv;
            } else {
                const float *rw = rweights + t * E;
                float sum = 0.0f;
                for (int64_t j = 0; j < k; ++j) sum += w[j] = rw[s[j]];
                if (normalize) {
                    float inv = sum == 0.0f ? 0.0f : 1.0f / sum;
                    for (int64_t j = 0; j < k; ++j) w[j] *= inv;
                }
            }
            continue;
        }
        float mx = l[0], sum = 0.0f;
        for (int64_t e = 1; e < E; ++e) mx = l[e] > mx ? l[e] : mx;
        for (int64_t e = 0; e < E; ++e) sum += prob[e] = olc_expf_(l[e] - mx);
        for (int64_t e = 0; e < E; ++e) prob[e] /= sum;
        float total = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
            /* -1 marks a taken expert (probabilities are >= 0 or NaN); a
             * number beats NaN, so NaN logits still give k distinct experts */
            int64_t best = -1;
            for (int64_t e = 0; e < E; ++e) {
                if (prob[e] == -1.0f) continue;
                if (best < 0 || prob[e] >= prob[best] || (prob[best] != prob[best] && prob[e] == prob[e]))
                    best = e;
            }
            s[j] = (int32_t)best;
            w[j] = prob[best];
            total += prob[best];
            prob[best] = -1.0f;
        }
        if (normalize)
            for (int64_t j = 0; j < k; ++j) w[j] /= total;
        if (sum != sum) /* NaN among the logits: no contribution (as ONNX Runtime) */
            for (int64_t j = 0; j < k; ++j) w[j] = 0.0f;
    }
}

/* Routes the T tokens and groups them by expert: expert e's rows are
 * rows[count[e]..count[e+1]) (token numbers, increasing) with their
 * weights rw; count has E + 1 entries.  QMoE's routing leaves out the
 * routes of weight <= OLC_MOE_MIN_WEIGHT.  Returns -1 without memory. */
static int olc_moe_group(int64_t T, int64_t E, int64_t k, int mode, int normalize,
                         const float *logits, const float *rweights, int64_t *count,
                         int32_t *rows, float *rw) {
    int32_t *sel = (int32_t *)malloc((size_t)(T * k + 1) * sizeof(int32_t));
    float *wsel = (float *)malloc((size_t)(T * k + 1) * sizeof(float));
    float *prob = (float *)malloc((size_t)E * sizeof(float));
    int64_t *fill = (int64_t *)malloc((size_t)E * sizeof(int64_t));
    int status = 0;
    if (!sel || !wsel || !prob || !fill) {
        status = -1;
        goto done;
    }
    olc_moe_route(T, E, k, mode, normalize, logits, rweights, sel, wsel, prob);
    if (mode != OLC_MOE_ROUTE_SOFTMAX)
        for (int64_t i = 0; i < T * k; ++i)
            if (!(wsel[i] > OLC_MOE_MIN_WEIGHT)) sel[i] = -1;
    memset(count, 0, (size_t)(E + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < T * k; ++i)
        if (sel[i] >= 0) ++count[sel[i] + 1];
    for (int64_t e = 0; e < E; ++e) count[e + 1] += count[e];
    memcpy(fill, count, (size_t)E * sizeof(int64_t));
    for (int64_t i = 0; i < T * k; ++i) {
        if (sel[i] < 0) continue;
        int64_t slot = fill[sel[i]]++;
        rows[slot] = (int32_t)(i / k);
        rw[slot] = wsel[i];
    }
done:
    free(sel); free(wsel); free(prob); free(fill);
    return status;
}

/* Row loops split into runs of rows, OLC_MOE_RUNS a thread: a thread the
 * OS runs late holds up a quarter of its share. */
#define OLC_MOE_RUNS 4

static int64_t olc_moe_runs(int64_t m, int threads) {
    return threads > 1 && m > OLC_MOE_RUNS * threads ? OLC_MOE_RUNS * threads : m;
}

typedef struct {
    olc_moe_act_fn act;
    const olc_moe_act_args *aa;
    int64_t m, parts;
} olc_moe_act_job;

static void olc_moe_act_task(void *arg, ptrdiff_t t, int slot) {
    const olc_moe_act_job *p = (const olc_moe_act_job *)arg;
    int64_t r0, r1;
    (void)slot;
    olc_split(p->m, 1, p->parts, t, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) p->act(p->aa, r, r + 1);
}

/* The activation of a tile of m rows (rows split over threads above a
 * size where that pays). */
static void olc_moe_activate(int level, const olc_moe_act_args *aa, int64_t m, int nthreads) {
    int at = m > 1 && m * aa->NI >= 16384 ? nthreads : 1;
    olc_moe_act_job job = {olc_moe_act_select(level), aa, m, olc_moe_runs(m, at)};
    olc_parallel_for(job.parts, olc_moe_act_task, &job, at);
}

typedef struct {
    olc_moe_axpy_fn axpy;
    float *out;
    const int32_t *rows;
    const float *rw, *y, *b2;
    int64_t H, m, parts;
} olc_moe_scatter_job;

static void olc_moe_scatter_task(void *arg, ptrdiff_t t, int slot) {
    const olc_moe_scatter_job *p = (const olc_moe_scatter_job *)arg;
    int64_t r0, r1;
    (void)slot;
    olc_split(p->m, 1, p->parts, t, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r)
        p->axpy(p->out + (int64_t)p->rows[r] * p->H, p->y + r * p->H, p->b2, p->rw[r], p->H);
}

/* out[rows[r]] += rw[r] * (y[r] + b2) for the m rows of a tile.  The rows
 * of one expert go to distinct tokens (an expert is picked once per token):
 * no two threads write one output row. */
static void olc_moe_scatter(int level, float *out, int64_t H, const int32_t *rows,
                            const float *rw, const float *y, const float *b2, int64_t m,
                            int nthreads) {
    int st = m > 1 && m * H >= 65536 ? nthreads : 1;
    olc_moe_scatter_job job = {olc_moe_axpy_select(level), out, rows, rw, y, b2, H, m,
                               olc_moe_runs(m, st)};
    olc_parallel_for(job.parts, olc_moe_scatter_task, &job, st);
}

/* ---- the operator ---- */

typedef struct {
    int64_t T, H, NI, E, k;
    int routing, normalize, op, fused; /* routing: OLC_MOE_ROUTE_* */
    float alpha, beta, limit;
    const float *x, *logits;          /* T x H, T x E (float32) */
    const float *rweights;            /* OLC_MOE_ROUTE_WEIGHTS: T x E (float32) */
    const float *b1, *b2, *b3;        /* expert-major biases (float32) or NULL */
    olc_moe_proj fc1, fc2, fc3;       /* fc3.N == 0: none */
    float *out;                       /* T x H, float32 */
} olc_moe_args;

/* One token through float experts (decode): its k experts run as one
 * batch of each projection, two parallel regions instead of 2k.  Each
 * output element is summed as by the per-expert calls (the engine never
 * splits K), so the result is the same. */
static int olc_moe_decode_token(int level, const olc_moe_args *p, const int64_t *count,
                                const float *rw, float *a, float *h, float *g, float *y,
                                int nthreads) {
    int64_t H = p->H, NI = p->NI, E = p->E, R1 = p->fc1.N;
    int64_t experts[64] = {0}, a_off[64] = {0}, g_off[64] = {0}, m = 0; /* k <= 64 */
    for (int64_t e = 0; e < E; ++e)
        if (count[e + 1] > count[e]) {
            experts[m] = e;
            a_off[m] = 0;
            g_off[m] = m * NI;
            ++m;
        }
    memcpy(a, p->x, (size_t)H * sizeof(float));
    if (olc_sgemm(level, OLC_FLOAT, m, a, a_off, H, 1, p->fc1.packed, experts, NULL, NULL,
                  0, 0, 1, R1, H, h, R1, R1, 1.0f, 0, nthreads) != 0)
        return -1;
    for (int64_t r = 0; r < m; ++r) {
        olc_moe_act_args aa = {p->op, p->fused, 0, NI, R1, h + r * R1,
                               p->b1 ? p->b1 + experts[r] * R1 : NULL, NULL, NULL, g + r * NI,
                               p->alpha, p->beta, p->limit};
        olc_moe_activate(level, &aa, 1, 1);
    }
    if (olc_sgemm(level, OLC_FLOAT, m, g, g_off, NI, 1, p->fc2.packed, experts, NULL, NULL,
                  0, 0, 1, H, NI, y, H, H, 1.0f, 0, nthreads) != 0)
        return -1;
    olc_moe_axpy_fn axpy = olc_moe_axpy_select(level);
    for (int64_t r = 0; r < m; ++r)
        axpy(p->out, y + r * H, p->b2 ? p->b2 + experts[r] * H : NULL, rw[count[experts[r]]], H);
    return 0;
}

/* Several int8 products (olc_q8_gemm_job) in one parallel region: their
 * tiles, one after the other, split into runs. */
typedef struct {
    const olc_q8_gemm_job *jobs;
    int njobs;
    int64_t tiles, parts;
} olc_moe_q8_batch;

static void olc_moe_q8_batch_task(void *arg, ptrdiff_t task, int slot) {
    const olc_moe_q8_batch *b = (const olc_moe_q8_batch *)arg;
    int64_t i0, i1, off = 0;
    (void)slot;
    olc_split(b->tiles, 1, b->parts, task, &i0, &i1);
    for (int j = 0; j < b->njobs && off < i1; off += b->jobs[j++].tiles) {
        int64_t lo = i0 > off ? i0 - off : 0, hi = i1 - off;
        if (hi > b->jobs[j].tiles) hi = b->jobs[j].tiles;
        if (lo < hi) olc_q8_gemm_tiles(&b->jobs[j], lo, hi);
    }
}

static void olc_moe_q8_batch_run(const olc_q8_gemm_job *jobs, int njobs, int nthreads) {
    olc_moe_q8_batch b = {jobs, njobs, 0, 1};
    for (int j = 0; j < njobs; ++j) b.tiles += jobs[j].tiles;
    if (b.tiles < nthreads) nthreads = (int)(b.tiles > 0 ? b.tiles : 1);
    b.parts = olc_q8_parts(b.tiles, nthreads);
    olc_parallel_for(b.parts, olc_moe_q8_batch_task, &b, nthreads);
}

/* One token through MatMulNBits experts on the int8 engine (decode): the
 * token is quantized once, FC1 (and FC3) of its experts run in one
 * parallel region and FC2 in another, instead of one region per product.
 * Every tile, activation and sum is computed as by the per-expert path,
 * so the result is the same.  Returns 0 when done, 1 when this path does
 * not apply (an expert without int8 weights, a block that is not finite:
 * nothing written), -1 without memory. */
static int olc_moe_token_q8(int level, const olc_moe_args *p, const int64_t *count,
                            const float *rw, float *h, float *u, float *g, float *y,
                            int nthreads, int *path) {
    const int64_t H = p->H, NI = p->NI, E = p->E, R1 = p->fc1.N;
    const int gated = p->fc3.N > 0;
    const int kind = olc_int8_level(level);
    int64_t experts[64], m = 0; /* k <= 64 */
    olc_q8_gemm_job jobs[128];
    for (int64_t e = 0; e < E; ++e)
        if (count[e + 1] > count[e]) {
            if (p->fc1.q8[e].codes == NULL || p->fc2.q8[e].codes == NULL ||
                (gated && p->fc3.q8[e].codes == NULL))
                return 1;
            experts[m++] = e;
        }
    if (m == 0) return 1;
    /* the experts of one projection share K and blocks: one layout of the
     * quantized rows serves them all */
    const olc_q8_w *w1 = &p->fc1.q8[experts[0]], *w2 = &p->fc2.q8[experts[0]];
    const int64_t kp1 = w1->nb * w1->block, kp2 = w2->nb * w2->block;
    int8_t *qa1 = (int8_t *)malloc((size_t)olc_q8_scratch(1, w1->nb, w1->block));
    int8_t *qa2 = (int8_t *)malloc((size_t)olc_q8_scratch(m, w2->nb, w2->block));
    int status = qa1 == NULL || qa2 == NULL ? -1 : 0;
    if (status == 0) {
        float *sa1 = (float *)(qa1 + kp1);
        int32_t *sums1 = (int32_t *)(sa1 + w1->nb);
        float *sa2 = (float *)(qa2 + m * kp2);
        int32_t *sums2 = (int32_t *)(sa2 + m * w2->nb);
        status = olc_q8_quantize_row(w1, p->x, 0, kind, qa1, sa1, sums1);
        int n = 0;
        for (int64_t r = 0; r < m && status == 0; ++r) {
            int64_t e = experts[r];
            jobs[n++] = olc_q8_gemm_setup(&p->fc1.q8[e], qa1, sa1, sums1, 1,
                                          p->b1 ? p->b1 + e * R1 : NULL, h + r * R1, kind);
            if (gated)
                jobs[n++] = olc_q8_gemm_setup(&p->fc3.q8[e], qa1, sa1, sums1, 1,
                                              p->b3 ? p->b3 + e * NI : NULL, u + r * NI, kind);
        }
        if (status == 0) olc_moe_q8_batch_run(jobs, n, nthreads);
        for (int64_t r = 0; r < m && status == 0; ++r) {
            olc_moe_act_args aa = {p->op, p->fused, gated, NI, R1, h + r * R1, NULL,
                                   gated ? u + r * NI : NULL, NULL, g + r * NI,
                                   p->alpha, p->beta, p->limit};
            olc_moe_activate(level, &aa, 1, 1);
            status = olc_q8_quantize_row(w2, g, r, kind, qa2, sa2, sums2);
        }
        for (int64_t r = 0; r < m && status == 0; ++r) {
            int64_t e = experts[r];
            jobs[r] = olc_q8_gemm_setup(&p->fc2.q8[e], qa2 + r * kp2, sa2 + r * w2->nb,
                                        sums2 + r * w2->nb, 1, p->b2 ? p->b2 + e * H : NULL,
                                        y + r * H, kind);
        }
        if (status == 0) {
            olc_moe_q8_batch_run(jobs, (int)m, nthreads);
            olc_moe_axpy_fn axpy = olc_moe_axpy_select(level);
            for (int64_t r = 0; r < m; ++r)
                axpy(p->out, y + r * H, NULL, rw[count[experts[r]]], H);
            *path = OLC_MOE_PATH_INT8 + kind;
        }
    }
    free(qa1); free(qa2);
    return status;
}

/* Runs the operator; returns 0, or -1 when scratch memory is missing.
 * *path: the engine path of the last FC1 product of MatMulNBits experts,
 * else OLC_MOE_PATH_NONE. */
static int olc_moe_forward(int level, const olc_moe_args *p, int nthreads, int *path) {
    int64_t T = p->T, H = p->H, NI = p->NI, E = p->E, k = p->k, R1 = p->fc1.N;
    int gated = p->fc3.N > 0;
    /* a MatMulNBits projection adds its bias itself */
    int nb1 = p->fc1.kind == OLC_MOE_NBITS, nb2 = p->fc2.kind == OLC_MOE_NBITS;
    int nb3 = p->fc3.kind == OLC_MOE_NBITS;
    int status = 0;
    *path = OLC_MOE_PATH_NONE;
    memset(p->out, 0, (size_t)(T * H) * sizeof(float));
    /* (the MatMulNBits engines still run empty products, whose path counts) */
    if (T == 0 || (H == 0 && !nb1)) return 0;
    int64_t *count = (int64_t *)malloc((size_t)(E + 1) * sizeof(int64_t));
    int32_t *rows = (int32_t *)malloc((size_t)(T * k) * sizeof(int32_t));
    float *rw = (float *)malloc((size_t)(T * k) * sizeof(float));
    int64_t tile = T * k < OLC_MOE_TILE ? T * k : OLC_MOE_TILE;
    float *a = olc_gemm_alloc((size_t)(tile * H));
    float *h = olc_gemm_alloc((size_t)(tile * R1));
    float *u = gated ? olc_gemm_alloc((size_t)(tile * NI)) : NULL;
    float *g = olc_gemm_alloc((size_t)(tile * NI));
    float *y = olc_gemm_alloc((size_t)(tile * H));
    if (!count || !rows || !rw || !a || !h || (gated && !u) || !g || !y ||
        olc_moe_group(T, E, k, p->routing, p->normalize, p->logits, p->rweights, count, rows,
                      rw) != 0) {
        status = -1;
        goto done;
    }
    if (T == 1 && k <= 64 && !gated && p->fc1.kind == OLC_MOE_PACKED &&
        p->fc2.kind == OLC_MOE_PACKED) {
        status = olc_moe_decode_token(level, p, count, rw, a, h, g, y, nthreads);
        goto done;
    }
    if (T == 1 && k <= 64 && nb1 && nb2 && (!gated || nb3)) {
        status = olc_moe_token_q8(level, p, count, rw, h, u, g, y, nthreads, path);
        if (status != 1) goto done;
        status = 0;
    }
    for (int64_t e = 0; e < E && status == 0; ++e) {
        const float *b1 = p->b1 ? p->b1 + e * R1 : NULL, *b2 = p->b2 ? p->b2 + e * H : NULL;
        const float *b3 = gated && p->b3 ? p->b3 + e * NI : NULL;
        for (int64_t s0 = count[e]; s0 < count[e + 1] && status == 0; s0 += tile) {
            int64_t m = count[e + 1] - s0 < tile ? count[e + 1] - s0 : tile, r;
            int unused;
            for (r = 0; r < m; ++r)
                memcpy(a + r * H, p->x + (int64_t)rows[s0 + r] * H, (size_t)H * sizeof(float));
            if (olc_moe_project(level, &p->fc1, e, a, m, nb1 ? b1 : NULL, h, nthreads, path) != 0 ||
                (gated && olc_moe_project(level, &p->fc3, e, a, m, nb3 ? b3 : NULL, u, nthreads,
                                          &unused) != 0)) {
                status = -1;
                break;
            }
            olc_moe_act_args aa = {p->op, p->fused, gated, NI, R1, h, nb1 ? NULL : b1, u,
                                   nb3 ? NULL : b3, g, p->alpha, p->beta, p->limit};
            olc_moe_activate(level, &aa, m, nthreads);
            if (olc_moe_project(level, &p->fc2, e, g, m, nb2 ? b2 : NULL, y, nthreads,
                                &unused) != 0) {
                status = -1;
                break;
            }
            olc_moe_scatter(level, p->out, H, rows + s0, rw + s0, y, nb2 ? NULL : b2, m,
                            nthreads);
        }
    }
done:
    free(count); free(rows); free(rw);
    free(a); free(h); free(u); free(g); free(y);
    return status;
}

#endif
