/* Cores of the quantization family (DynamicQuantizeMatMul and
 * MatMulIntegerToFloat; the integer product itself is the gemm_int8
 * engine's).
 *
 * - olc_q_dynamic_u8: ONNX Runtime's dynamic quantization of a float
 *   tensor to uint8 (GetQuantizationParameter + MlasQuantizeLinear):
 *   min and max of x widened to include 0, scale = (max - min) / 255 (1
 *   when max == min), zero point = round_half_even(clamp(-min / scale, 0,
 *   255)), then q = saturate(round_half_even(x / scale) + zp).
 * - olc_q_quantize_linear_8: the same quantization with a given scale and
 *   zero point, to uint8 or int8 (QuantizeLinear per tensor).
 * - olc_q_binary_8: QLinearAdd and QLinearMul on 8-bit elements, with
 *   MLAS' roundings (fused multiply-adds for Add).
 * - olc_q_scale_rows: float y = (float)c * multiplier + bias over rows of an
 *   int32 product (the output processor of MLAS' quantized GEMM);
 *   olc_q_gemm_float: the same fused into the int8 engine, tile by tile.
 *
 * Both are plain C loops compiled per level (olc_quantization_rows.h),
 * chosen once per call; the row loop runs in tasks of fixed rows, so the
 * result does not depend on the thread count.
 */
#ifndef OLC_QUANTIZATION_H
#define OLC_QUANTIZATION_H

#include <math.h>
#include <stdint.h>
#include <stddef.h>

#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_pool.h"
#include "engines/gemm_int8/olc_gemm_int8.h"

/* The level's vector min and max for olc_q_minmax: minps and maxps keep
 * their second operand (the running value) when the first (x) is NaN, as
 * the scalar comparisons do. */
static inline float olc_q_vmin_scalar(float a, float b) { return a < b ? a : b; }
static inline float olc_q_vmax_scalar(float a, float b) { return a > b ? a : b; }
#if OLC_X86
static inline OLC_TARGET_AVX2 __m256 olc_q_vmin_avx2(__m256 a, __m256 b) { return _mm256_min_ps(a, b); }
static inline OLC_TARGET_AVX2 __m256 olc_q_vmax_avx2(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }
#endif
#if OLC_X86 && OLC_HAVE_AVX512
static inline OLC_TARGET_AVX512 __m512 olc_q_vmin_avx512(__m512 a, __m512 b) { return _mm512_min_ps(a, b); }
static inline OLC_TARGET_AVX512 __m512 olc_q_vmax_avx512(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
#endif

#define OLC_BODY "quantization/olc_quantization_rows.h"
#include "common/olc_each_level.h"

/* Elements a task of the dynamic quantization reads. */
#define OLC_Q_CHUNK 16384

typedef void (*olc_q_minmax_fn)(const float *, int64_t, float *, float *);
typedef void (*olc_q_quantize_fn)(const float *, int64_t, float, int32_t, int32_t, int32_t,
                                  uint8_t *);

typedef struct {
    const float *x;
    int64_t n;
    float *lo, *hi; /* one pair per task */
    float scale;
    int32_t zp, qmin, qmax;
    uint8_t *q;
    olc_q_minmax_fn minmax;
    olc_q_quantize_fn quantize;
} olc_q_dynamic_job;

static void olc_q_minmax_task(void *arg, ptrdiff_t t, int slot) {
    const olc_q_dynamic_job *p = (const olc_q_dynamic_job *)arg;
    const int64_t i0 = t * OLC_Q_CHUNK, len = p->n - i0 < OLC_Q_CHUNK ? p->n - i0 : OLC_Q_CHUNK;
    (void)slot;
    p->minmax(p->x + i0, len, p->lo + t, p->hi + t);
}

static void olc_q_quantize_task(void *arg, ptrdiff_t t, int slot) {
    const olc_q_dynamic_job *p = (const olc_q_dynamic_job *)arg;
    const int64_t i0 = t * OLC_Q_CHUNK, len = p->n - i0 < OLC_Q_CHUNK ? p->n - i0 : OLC_Q_CHUNK;
    (void)slot;
    p->quantize(p->x + i0, len, p->scale, p->zp, p->qmin, p->qmax, p->q + i0);
}

/* Scale and zero point of x[0..n) (NaN ignored), and q = x quantized, in
 * tasks of OLC_Q_CHUNK elements (min and max are exact: the result does
 * not depend on the thread count).  lo and hi hold one float per task. */
static void olc_q_dynamic_u8(const float *x, int64_t n, uint8_t *q, float *lo, float *hi,
                             float *scale_out, int32_t *zp_out, int level, int nthreads) {
    level = olc_build_level(level);
    olc_q_dynamic_job job;
    const int64_t tasks = (n + OLC_Q_CHUNK - 1) / OLC_Q_CHUNK;
    job.x = x;
    job.n = n;
    job.lo = lo;
    job.hi = hi;
    job.q = q;
    job.minmax = OLC_LEVEL_FN(level, olc_q_minmax);
    job.quantize = OLC_LEVEL_FN(level, olc_q_quantize_8);
    float mn = 0.0f, mx = 0.0f;
    olc_parallel_for(tasks, olc_q_minmax_task, &job, nthreads);
    for (int64_t t = 0; t < tasks; t++) {
        mn = lo[t] < mn ? lo[t] : mn;
        mx = hi[t] > mx ? hi[t] : mx;
    }
    const float scale = mx == mn ? 1.0f : (mx - mn) / 255.0f;
    float zp = 0.0f - mn / scale;
    zp = zp > 0.0f ? zp : 0.0f;
    zp = zp < 255.0f ? zp : 255.0f;
    zp = nearbyintf(zp); /* the default rounding: half to even */
    job.scale = scale;
    job.zp = zp == zp ? (int32_t)zp : 0;
    job.qmin = 0;
    job.qmax = 255;
    olc_parallel_for(tasks, olc_q_quantize_task, &job, nthreads);
    *scale_out = scale;
    *zp_out = job.zp;
}

/* q = saturate(round_half_even(x / scale) + zp) into [qmin, qmax] bytes
 * (QuantizeLinear per tensor to uint8 or int8), in tasks of OLC_Q_CHUNK. */
static void olc_q_quantize_linear_8(const float *x, int64_t n, float scale, int32_t zp,
                                    int32_t qmin, int32_t qmax, uint8_t *q, int level,
                                    int nthreads) {
    olc_q_dynamic_job job;
    job.x = x;
    job.n = n;
    job.scale = scale;
    job.zp = zp;
    job.qmin = qmin;
    job.qmax = qmax;
    job.q = q;
    job.quantize = OLC_LEVEL_FN(olc_build_level(level), olc_q_quantize_8);
    olc_parallel_for((n + OLC_Q_CHUNK - 1) / OLC_Q_CHUNK, olc_q_quantize_task, &job, nthreads);
}

typedef void (*olc_q_add_fn)(const uint8_t *, const uint8_t *, int64_t, int, int, float, float,
                             float, uint8_t *);
typedef void (*olc_q_mul_fn)(const uint8_t *, const uint8_t *, int64_t, int, int32_t, int32_t,
                             float, float, uint8_t *);

typedef struct {
    const uint8_t *a, *b;
    int64_t n;
    int mode, is_signed, mul;
    int32_t za, zb;
    float rac, rbc, fixed, zc, ratio;
    olc_q_add_fn add;
    olc_q_mul_fn mulf;
    uint8_t *y;
} olc_q_binary_job;

static void olc_q_binary_task(void *arg, ptrdiff_t t, int slot) {
    const olc_q_binary_job *p = (const olc_q_binary_job *)arg;
    const int64_t i0 = t * OLC_Q_CHUNK, len = p->n - i0 < OLC_Q_CHUNK ? p->n - i0 : OLC_Q_CHUNK;
    (void)slot;
    if (p->mul)
        p->mulf(p->a + i0, p->b + i0, len, p->is_signed, p->za, p->zb, p->zc, p->ratio, p->y + i0);
    else
        p->add(p->a + i0, p->b + i0, len, p->mode, p->is_signed, p->rac, p->rbc, p->fixed,
               p->y + i0);
}

/* QLinearAdd (mul 0) or QLinearMul (mul 1) over n elements of x and y
 * (int8 or uint8 bytes, broadcast already; x is the operand MLAS reads as
 * its A), in tasks of OLC_Q_CHUNK.  The ratios, MLAS' fixed part of Add
 * (zc - fma(rxc, zx, ryc zy)) and Mul's ratio sx sy / sc are formed here,
 * in float32, as MLAS forms them. */
static void olc_q_binary_8(const uint8_t *x, const uint8_t *y, int64_t n, int mul, int mode,
                           int is_signed, float sx, float sy, float sc, int32_t zx, int32_t zy,
                           int32_t zc, uint8_t *out, int level, int nthreads) {
    olc_q_binary_job job;
    level = olc_build_level(level);
    job.a = x;
    job.b = y;
    job.n = n;
    job.mul = mul;
    job.mode = mode;
    job.is_signed = is_signed;
    job.rac = sx / sc;
    job.rbc = sy / sc;
    job.fixed = (float)zc - fmaf(job.rac, (float)zx, job.rbc * (float)zy);
    job.za = zx;
    job.zb = zy;
    job.zc = (float)zc;
    job.ratio = sx * sy / sc;
    job.add = OLC_LEVEL_FN(level, olc_q_add_8);
    job.mulf = OLC_LEVEL_FN(level, olc_q_mul_8);
    job.y = out;
    olc_parallel_for((n + OLC_Q_CHUNK - 1) / OLC_Q_CHUNK, olc_q_binary_task, &job, nthreads);
}

typedef void (*olc_q_scale_row_fn)(const int32_t *, int64_t, const float *, int64_t,
                                   const float *, float *);

typedef struct {
    const int32_t *c;
    const float *m, *bias;
    int64_t rows, N, m_bs, m_cs, rows_per_batch, chunk;
    olc_q_scale_row_fn row;
    float *y;
} olc_q_scale_job;

static void olc_q_scale_task(void *arg, ptrdiff_t t, int slot) {
    const olc_q_scale_job *p = (const olc_q_scale_job *)arg;
    const int64_t r0 = t * p->chunk;
    const int64_t r1 = r0 + p->chunk < p->rows ? r0 + p->chunk : p->rows;
    (void)slot;
    for (int64_t r = r0; r < r1; r++)
        p->row(p->c + r * p->N, p->N, p->m + (r / p->rows_per_batch) * p->m_bs, p->m_cs,
               p->bias, p->y + r * p->N);
}

/* y[r, n] = (float)c[r, n] * m[(r / rows_per_batch) * m_bs + n * m_cs] +
 * bias[n] for rows x N row-major int32 c (bias may be NULL). */
static void olc_q_scale_rows(const int32_t *c, int64_t rows, int64_t N, int64_t rows_per_batch,
                             const float *m, int64_t m_bs, int64_t m_cs, const float *bias,
                             float *y, int level, int nthreads) {
    olc_q_scale_job job;
    job.c = c;
    job.m = m;
    job.bias = bias;
    job.rows = rows;
    job.N = N;
    job.m_bs = m_bs;
    job.m_cs = m_cs;
    job.rows_per_batch = rows_per_batch > 0 ? rows_per_batch : 1;
    /* about 16K elements a task */
    job.chunk = N > 0 ? (16384 + N - 1) / N : rows;
    job.chunk = job.chunk > 0 ? job.chunk : 1;
    job.row = OLC_LEVEL_FN(olc_build_level(level), olc_q_scale_row);
    job.y = y;
    if (rows > 0) olc_parallel_for((rows + job.chunk - 1) / job.chunk, olc_q_scale_task, &job, nthreads);
}

/* y (float32, batch x M x N) = float(acc) * m + bias with acc the int32
 * products of olc_i8_gemm (same arguments), converted in the engine's
 * epilogue (olc_i8_gemm_float).  Returns -1 when out of memory. */
static int olc_q_gemm_float(const uint8_t *a, const int64_t *a_offsets, int64_t batch,
                            const int8_t *bp, const int32_t *colsum, const int64_t *b_index,
                            const int32_t *za, int64_t za_bs, int64_t za_rs, const int32_t *zb,
                            int64_t zb_bs, int64_t zb_cs, float *y, int64_t M, int64_t N,
                            int64_t K, int a_signed, const float *m, int64_t m_bs,
                            int64_t m_cs, const float *bias, int level, int nthreads) {
    return olc_i8_gemm_float(a, a_offsets, batch, bp, colsum, b_index, za, za_bs, za_rs, zb,
                             zb_bs, zb_cs, y, M, N, K, a_signed, m, m_bs, m_cs, bias, level,
                             nthreads);
}

#endif
