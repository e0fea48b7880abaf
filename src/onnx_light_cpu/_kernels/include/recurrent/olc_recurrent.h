/* The recurrent cells of ONNX RNN, GRU and LSTM, one direction at a time.
 *
 * The adapter hands one olc_rnn_dir per direction.  For each:
 *   1. xw = bias + X W^T for every time step at once: one GEMM, W^T packed
 *      once by the adapter (float: olc_sgemm_pack_b; double: W^T dense);
 *   2. per step t (forward 0..T-1, reverse T-1..0): the gate rows of step t
 *      accumulate H_{t-1} R^T (packed once; with batch 1, R^T dense and the
 *      engine's GEMV, r_dense), then the gate nonlinearities,
 *      peepholes, clip and state update run fused over each batch row.
 * Batch row b takes part in step t only while t < lens[b]: its state stays
 * as it was (initial, for a reverse direction, until its own last valid
 * step) and its Y rows are zero.
 *
 * float32 goes through the float GEMM engine (engines/gemm/olc_gemm.h,
 * whose results do not depend on the thread count) and the olc_math.h
 * array functions (the same bits at every level); double through a plain
 * loop with a fixed summation order and libm.  The two directions of a
 * bidirectional node run as two tasks of one parallel loop when there are
 * two threads or more (the GEMMs then run on one thread each: same
 * results).  The body of both types is olc_recurrent_cell.h.
 */
#ifndef OLC_RECURRENT_H
#define OLC_RECURRENT_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "common/olc_cpu.h"
#include "common/olc_level.h"
#include "common/olc_math.h"
#include "common/olc_pool.h"
#include "common/olc_types.h"
#include "engines/gemm/olc_gemm.h"

enum {
    OLC_RNN_RELU = 0, OLC_RNN_TANH = 1, OLC_RNN_SIGMOID = 2, OLC_RNN_AFFINE = 3,
    OLC_RNN_LEAKYRELU = 4, OLC_RNN_THRESHOLDEDRELU = 5, OLC_RNN_SCALEDTANH = 6,
    OLC_RNN_HARDSIGMOID = 7, OLC_RNN_ELU = 8, OLC_RNN_SOFTSIGN = 9, OLC_RNN_SOFTPLUS = 10
};
enum { OLC_CELL_RNN = 0, OLC_CELL_GRU = 1, OLC_CELL_LSTM = 2 };

typedef struct {
    int code;
    float alpha, beta;
} olc_rnn_act;

/* Floats of a dense R^T from which a step's GEMV goes in two halves
 * (olc_rnn_mm_f): 1 MB. */
#define OLC_RNN_HALVES_FLOATS (1 << 18)

/* One direction of one node.  Pointers are float or double (dtype). */
typedef struct {
    int cell, level, threads, reverse, lbr, input_forget;
    int proj_threads;        /* threads of the input projection (threads: of each step) */
    int64_t T, B, H, K;      /* steps, batch, hidden size, input size */
    const int32_t *lens;     /* [B] valid steps of each batch row, or NULL (all T) */
    const void *x;           /* [rows, I] dense: rows (t, b) at t * xs_t + b * xs_b */
    int64_t xs_t, xs_b;      /* row strides of X and xw, in rows */
    const void *w;           /* float: W^T packed (K=I, N=G H); double: W^T dense [I, G H] */
    const void *bias;        /* [G H] added to every xw row, or NULL */
    void *xw;                /* [rows, G H] scratch: the gate pre-activations */
    const void *r[2];        /* R^T of the recurrence: float packed (dense when
                              * r_dense), double dense.
                              * RNN, LSTM: [0] every gate; GRU: [0] z and r, [1] h */
    int r_dense;             /* float, batch 1: R^T dense [H, N], one GEMV a step */
    int odd_step;            /* the recurrence's step is odd (olc_rnn_mm_f) */
    const void *rbh;         /* GRU with linear_before_reset: Rbh [H], or NULL */
    const void *p;           /* LSTM peepholes [3 H] (i, o, f), or NULL */
    void *h, *c;             /* state [B, H]: the initial state in, the last state out */
    void *y;                 /* Y of this direction or NULL: row (t, b) at t ys_t + b ys_b */
    int64_t ys_t, ys_b;
    void *scratch;           /* [B, H] (GRU) */
    olc_rnn_act act[3];
    float clip;              /* <= 0: none */
    int failed;
} olc_rnn_dir;

static inline int olc_rnn_gates(int cell) {
    return cell == OLC_CELL_LSTM ? 4 : cell == OLC_CELL_GRU ? 3 : 1;
}

/* ---- float32 pieces ---- */

static void olc_rnn_act_f(int level, olc_rnn_act a, float clip, float *x, int64_t n) {
    /* clip as ONNX Runtime's std::min(clip, x) then std::max(-clip, x): NaN
     * becomes +clip */
    if (clip > 0.0f)
        for (int64_t i = 0; i < n; ++i) {
            float v = x[i] < clip ? x[i] : clip;
            x[i] = -clip < v ? v : -clip;
        }
    float al = a.alpha, be = a.beta;
    switch (a.code) {
    case OLC_RNN_TANH: OLC_LEVEL_FN(level, olc_tanh_f32)(x, x, n); break;
    case OLC_RNN_SIGMOID: OLC_LEVEL_FN(level, olc_sigmoid_f32)(x, x, n); break;
    case OLC_RNN_RELU: for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f; break;
    case OLC_RNN_AFFINE: for (int64_t i = 0; i < n; ++i) x[i] = al * x[i] + be; break;
    case OLC_RNN_LEAKYRELU:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.0f ? x[i] : al * x[i];
        break;
    case OLC_RNN_THRESHOLDEDRELU:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] > al ? x[i] : 0.0f;
        break;
    case OLC_RNN_SCALEDTANH:
        for (int64_t i = 0; i < n; ++i) x[i] *= be;
        OLC_LEVEL_FN(level, olc_tanh_f32)(x, x, n);
        for (int64_t i = 0; i < n; ++i) x[i] *= al;
        break;
    case OLC_RNN_HARDSIGMOID:
        for (int64_t i = 0; i < n; ++i) x[i] = fmaxf(0.0f, fminf(1.0f, al * x[i] + be));
        break;
    case OLC_RNN_ELU:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.0f ? x[i] : al * (expf(x[i]) - 1.0f);
        break;
    case OLC_RNN_SOFTSIGN:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0f + fabsf(x[i]));
        break;
    default: /* OLC_RNN_SOFTPLUS */
        for (int64_t i = 0; i < n; ++i)
            x[i] = x[i] > 0.0f ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
        break;
    }
}

/* c[M, N] (rows ldc apart) (+)= a[M, K] (rows lda apart) B, B packed, or
 * dense [K, N] when `dense` (M = 1: the engine's GEMV streams B once,
 * about a quarter faster than the packed path there; each column is summed
 * in k order whatever the threads). */
static int olc_rnn_mm_f(const olc_rnn_dir *d, const float *bp, int dense, const float *a,
                        int64_t lda, float *c, int64_t ldc, int64_t M, int64_t N, int64_t K,
                        int acc, int threads) {
    static const int64_t zero = 0;
    if (K == 0) {
        if (!acc)
            for (int64_t m = 0; m < M; ++m) memset(c + m * ldc, 0, (size_t)N * sizeof(float));
        return 0;
    }
    if (dense) {
        if (M != 1 || N == 0) return 0;
        /* One thread (each direction on its own) and an R^T past the L2:
         * the columns in two halves, on odd steps the second first.  A step
         * then starts on the half the last one read last, largely still in
         * L2.  2-layer BiLSTM, 2 threads (a direction each), Intel Xeon with
         * a 2 MB L2, alternating processes, ours / ONNX Runtime: hidden 512
         * (R^T 4 MB) 1.03-1.08 -> 0.90-1.00 at 256 steps, 1.16 -> 0.96 at
         * 32; hidden 128 (256 KB) took 5-13 % longer split, so it is not.
         * Each column is the same sum in the same order. */
        const int64_t half = (N / 2 + 15) / 16 * 16;
        if (threads > 1 || half == 0 || half >= N || K * N < OLC_RNN_HALVES_FLOATS) {
            olc_sgemv(d->level, K, N, a, bp, N, c, 1.0f, acc, threads);
            return 0;
        }
        for (int i = 0; i < 2; ++i) {
            const int second = i ^ d->odd_step;
            const int64_t n0 = second ? half : 0, n1 = second ? N : half;
            olc_sgemv(d->level, K, n1 - n0, a, bp + n0, N, c + n0, 1.0f, acc, 1);
        }
        return 0;
    }
    return olc_sgemm(d->level, OLC_FLOAT, 1, a, &zero, lda, 1, bp, &zero, NULL, &zero, 0, 0, M,
                     N, K, c, ldc, 0, 1.0f, acc, threads);
}

/* ---- float64 pieces ---- */

static void olc_rnn_act_d(int level, olc_rnn_act a, float clip, double *x, int64_t n) {
    (void)level;
    double al = a.alpha, be = a.beta, cl = clip;
    if (clip > 0.0f)
        for (int64_t i = 0; i < n; ++i) {
            double v = x[i] < cl ? x[i] : cl;
            x[i] = -cl < v ? v : -cl;
        }
    switch (a.code) {
    case OLC_RNN_TANH: for (int64_t i = 0; i < n; ++i) x[i] = tanh(x[i]); break;
    case OLC_RNN_SIGMOID: for (int64_t i = 0; i < n; ++i) x[i] = olc_sigmoid_d_(x[i]); break;
    case OLC_RNN_RELU: for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0 ? x[i] : 0.0; break;
    case OLC_RNN_AFFINE: for (int64_t i = 0; i < n; ++i) x[i] = al * x[i] + be; break;
    case OLC_RNN_LEAKYRELU:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.0 ? x[i] : al * x[i];
        break;
    case OLC_RNN_THRESHOLDEDRELU:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] > al ? x[i] : 0.0;
        break;
    case OLC_RNN_SCALEDTANH: for (int64_t i = 0; i < n; ++i) x[i] = al * tanh(be * x[i]); break;
    case OLC_RNN_HARDSIGMOID:
        for (int64_t i = 0; i < n; ++i) x[i] = fmax(0.0, fmin(1.0, al * x[i] + be));
        break;
    case OLC_RNN_ELU:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] >= 0.0 ? x[i] : al * (exp(x[i]) - 1.0);
        break;
    case OLC_RNN_SOFTSIGN:
        for (int64_t i = 0; i < n; ++i) x[i] = x[i] / (1.0 + fabs(x[i]));
        break;
    default:
        for (int64_t i = 0; i < n; ++i)
            x[i] = x[i] > 0.0 ? x[i] + log1p(exp(-x[i])) : log1p(exp(x[i]));
        break;
    }
}

/* c[M, N] (+)= a[M, K] bt, bt dense [K, N]: k outer, so every element is
 * summed in the order k = 0, 1, ... whatever the caller. */
static int olc_rnn_mm_d(const olc_rnn_dir *d, const double *bt, int dense, const double *a,
                        int64_t lda, double *c, int64_t ldc, int64_t M, int64_t N, int64_t K,
                        int acc, int threads) {
    (void)d;
    (void)dense;
    (void)threads;
    for (int64_t m = 0; m < M; ++m) {
        double *cm = c + m * ldc;
        const double *am = a + m * lda;
        if (!acc) memset(cm, 0, (size_t)N * sizeof(double));
        for (int64_t k = 0; k < K; ++k) {
            double s = am[k];
            const double *bk = bt + k * N;
            for (int64_t n = 0; n < N; ++n) cm[n] += s * bk[n];
        }
    }
    return 0;
}

#define OLC_RREAL float
#define OLC_RSFX f
#include "recurrent/olc_recurrent_cell.h"
#undef OLC_RREAL
#undef OLC_RSFX

#define OLC_RREAL double
#define OLC_RSFX d
#include "recurrent/olc_recurrent_cell.h"
#undef OLC_RREAL
#undef OLC_RSFX

/* Task t: direction t of `dirs` (the dtype's function). */
typedef struct {
    olc_rnn_dir *dirs;
    int is_double;
} olc_rnn_job;

static void olc_rnn_dir_task(void *arg, ptrdiff_t t, int slot) {
    olc_rnn_job *job = (olc_rnn_job *)arg;
    (void)slot;
    if (job->is_double)
        olc_rnn_run_d(&job->dirs[t]);
    else
        olc_rnn_run_f(&job->dirs[t]);
}

/* Runs every direction; two directions run in parallel when `parallel`
 * (each direction's own GEMMs then on one thread).  Returns -1 when a
 * GEMM found no memory for its scratch. */
static int olc_rnn_run(olc_rnn_dir *dirs, int ndir, int is_double, int parallel) {
    olc_rnn_job job;
    job.dirs = dirs;
    job.is_double = is_double;
    for (int k = 0; k < ndir; ++k) {
        dirs[k].failed = 0;
        dirs[k].level = olc_build_level(dirs[k].level);
        if (parallel) dirs[k].threads = dirs[k].proj_threads = 1;
    }
    olc_parallel_for(ndir, olc_rnn_dir_task, &job, parallel ? ndir : 1);
    for (int k = 0; k < ndir; ++k)
        if (dirs[k].failed) return -1;
    return 0;
}

#endif
