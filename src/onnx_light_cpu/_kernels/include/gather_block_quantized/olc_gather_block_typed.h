/* Gather of block-quantized elements whose data has a typed element type
 * (com.microsoft GatherBlockQuantized with INT4, UINT4, FLOAT8* or
 * FLOAT4E2M1 data).
 *
 * Data arrives one element a byte (as ml_dtypes holds them); `lut` maps each
 * byte to its float value, so one loop serves every type.  Data has any rank
 * r <= OLC_GBQT_MAX_RANK; the output is data.shape[:g] + indices.shape +
 * data.shape[g+1:].  Element (a_0, ..., a_{r-1}) takes the scale at
 *     sum_k contrib_k(a_k),  contrib_k(a) = (k == q ? a / block : a) * sstride[k]
 * (sstride 0 on an axis the scales broadcast) and is dequantized as
 *     y = (lut[data] - lut[zero_point]) * scale      (zero point 0 when absent)
 * in float32, then stored as float32, float16 or bfloat16 (rounded once).
 * The subtraction is exact (small integers), so this is one multiply per
 * element, as ONNX Runtime computes it.  Indices below -A or at least A give
 * a slice of zeros; negative ones wrap.
 *
 * Output row r (of M * n_idx) is the slice data[m, idx[n], ...] of
 * B = J * L elements: J runs of L elements along the last axis (L = 1 and
 * J = 1 when the gather axis is the last one).  Rows are independent, so any
 * split over threads gives the same bits.  Scalar code, no scratch.
 */
#ifndef OLC_GATHER_BLOCK_TYPED_H
#define OLC_GATHER_BLOCK_TYPED_H
#include <stdint.h>
#include <string.h>
#include "common/olc_types.h"
#include "common/olc_vec.h"

#define OLC_GBQT_MAX_RANK 16

typedef struct {
    const uint8_t *data;   /* one byte an element, data's shape */
    const void *idx;       /* int32 or int64, n_idx of them */
    const void *scales;    /* dtype */
    const uint8_t *zp;     /* one byte an element, the scales' shape, or NULL */
    const float *lut;      /* 256 entries: byte -> value */
    void *out;             /* dtype */
    int64_t dims[OLC_GBQT_MAX_RANK];
    int64_t sstride[OLC_GBQT_MAX_RANK];  /* scale stride per data axis; 0: broadcast */
    int64_t n_idx, M, A, J, L, block;
    int rank, g, q, idx64, dtype;      /* dtype: OLC_FLOAT, OLC_FLOAT16 or OLC_BFLOAT16 */
} olc_gbqt_args;

static inline int64_t olc_gbqt_contrib(const olc_gbqt_args *a, int k, int64_t i) {
    return (k == a->q ? i / a->block : i) * a->sstride[k];
}

static inline float olc_gbqt_scale(const olc_gbqt_args *a, int64_t s) {
    if (a->dtype == OLC_FLOAT) return ((const float *)a->scales)[s];
    if (a->dtype == OLC_FLOAT16) return olc_h2f(((const uint16_t *)a->scales)[s]);
    return olc_bf2f(((const uint16_t *)a->scales)[s]);
}

/* One run of L elements: data from src, output from o, scale offset s0 of
 * its first element; the run is along the last axis, k_last (or -1). */
static inline void olc_gbqt_run(const olc_gbqt_args *a, const uint8_t *src, int64_t o,
                                int64_t s0, int k_last) {
    const float *lut = a->lut;
    const int64_t L = a->L;
    /* span: elements sharing one scale (and zero point) */
    int64_t span = L;
    if (k_last >= 0 && k_last == a->q) span = a->block;
    else if (k_last >= 0 && a->sstride[k_last] != 0) span = 1;
    for (int64_t e0 = 0; e0 < L; e0 += span) {
        int64_t s = s0 + (k_last < 0 ? 0 : olc_gbqt_contrib(a, k_last, e0));
        float scale = olc_gbqt_scale(a, s), zp = a->zp ? lut[a->zp[s]] : 0.0f;
        int64_t e1 = e0 + span < L ? e0 + span : L;
        /* one loop per output type, so the compiler keeps the store simple */
        if (a->dtype == OLC_FLOAT) {
            float *y = (float *)a->out + o;
            for (int64_t e = e0; e < e1; ++e) y[e] = (lut[src[e]] - zp) * scale;
        } else if (a->dtype == OLC_FLOAT16) {
            uint16_t *y = (uint16_t *)a->out + o;
            for (int64_t e = e0; e < e1; ++e) y[e] = olc_f2h((lut[src[e]] - zp) * scale);
        } else {
            uint16_t *y = (uint16_t *)a->out + o;
            for (int64_t e = e0; e < e1; ++e) y[e] = olc_f2bf((lut[src[e]] - zp) * scale);
        }
    }
}

/* Output rows [r0, r1). */
static void olc_gbqt_rows(const olc_gbqt_args *a, int64_t r0, int64_t r1) {
    const int64_t B = a->J * a->L;
    const int k_last = a->g < a->rank - 1 ? a->rank - 1 : -1;
    const int size = a->dtype == OLC_FLOAT ? 4 : 2;
    for (int64_t r = r0; r < r1; ++r) {
        int64_t m = r / a->n_idx, n = r - m * a->n_idx;
        int64_t i = a->idx64 ? ((const int64_t *)a->idx)[n] : (int64_t)((const int32_t *)a->idx)[n];
        if (i < -a->A || i >= a->A) {
            memset((char *)a->out + (size_t)(r * B) * (size_t)size, 0, (size_t)B * (size_t)size);
            continue;
        }
        if (i < 0) i += a->A;
        /* the scale offset of the row's first element: axes before g, then g */
        int64_t s_row = olc_gbqt_contrib(a, a->g, i);
        for (int k = a->g - 1; k >= 0; --k) {
            s_row += olc_gbqt_contrib(a, k, m % a->dims[k]);
            m /= a->dims[k];
        }
        const uint8_t *src = a->data + (((r / a->n_idx) * a->A + i) * B);
        for (int64_t j = 0; j < a->J; ++j) {
            /* axes g+1 .. r-2 of run j */
            int64_t s = s_row, rem = j;
            for (int k = a->rank - 2; k > a->g; --k) {
                s += olc_gbqt_contrib(a, k, rem % a->dims[k]);
                rem /= a->dims[k];
            }
            olc_gbqt_run(a, src + j * a->L, r * B + j * a->L, s, k_last);
        }
    }
}

#endif
