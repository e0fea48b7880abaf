/* Multidirectional (numpy) broadcasting without broadcast copies.
 *
 * olc_bcast_shape() computes the broadcast shape of C-contiguous inputs;
 * olc_bcast_plan() describes how each operand walks that shape: element
 * strides with 0 on broadcast dimensions, size-1 dimensions dropped and
 * neighbouring dimensions merged where every operand steps through them
 * as through one.  A kernel then runs over "rows" of the last dimension
 * (the inner one), where each input is either contiguous (stride 1) or a
 * repeated scalar (stride 0):
 *   same shape        -> 1 row, both inputs stride 1
 *   (M,N) + scalar    -> 1 row, one input stride 0
 *   (M,N) + (N,)      -> M rows of N, both stride 1, b restarts each row
 *   (M,N) + (M,1)     -> M rows of N, b stride 0 within the row
 * Operand 0 is the output (C-contiguous, the broadcast shape).
 */
#ifndef OLC_BROADCAST_H
#define OLC_BROADCAST_H

#include <stdint.h>

#define OLC_BCAST_MAX_DIMS 64
#define OLC_BCAST_MAX_OPERANDS 4

typedef struct {
    int ndim;       /* >= 1 after planning */
    int noperands;  /* output + inputs */
    int64_t size;   /* elements of the output */
    int64_t shape[OLC_BCAST_MAX_DIMS];
    int64_t stride[OLC_BCAST_MAX_OPERANDS][OLC_BCAST_MAX_DIMS];
} olc_bcast;

/* Broadcast shape of nin shapes (right-aligned).  Returns the output rank,
 * or -1 - k when input k does not broadcast with the inputs before it. */
static int olc_bcast_shape(int nin, const int *ndims, const int64_t *const *shapes,
                           int64_t *out) {
    int rank = 0;
    for (int k = 0; k < nin; ++k)
        if (ndims[k] > rank) rank = ndims[k];
    if (rank > OLC_BCAST_MAX_DIMS) return -1;
    for (int d = 0; d < rank; ++d) out[d] = 1;
    for (int k = 0; k < nin; ++k) {
        int shift = rank - ndims[k];
        for (int d = 0; d < ndims[k]; ++d) {
            int64_t s = shapes[k][d], *o = &out[shift + d];
            if (s == *o || s == 1) continue;
            if (*o != 1) return -1 - k;
            *o = s;
        }
    }
    return rank;
}

/* Plan the walk of every input over the output shape.  Returns 0, or
 * -1 - k when input k cannot be broadcast to the output shape. */
static int olc_bcast_plan(olc_bcast *p, int out_ndim, const int64_t *out_shape, int nin,
                          const int *ndims, const int64_t *const *shapes) {
    int64_t st[OLC_BCAST_MAX_OPERANDS];
    int nd = 0;
    if (out_ndim > OLC_BCAST_MAX_DIMS || nin + 1 > OLC_BCAST_MAX_OPERANDS) return -1;
    p->noperands = nin + 1;
    p->size = 1;
    for (int d = 0; d < out_ndim; ++d) p->size *= out_shape[d];
    for (int k = 0; k < nin; ++k) {
        if (ndims[k] > out_ndim) return -1 - k;
        st[k + 1] = 1;
    }
    st[0] = 1;
    /* From the last dimension to the first, keeping dims of size > 1. */
    int64_t shape_r[OLC_BCAST_MAX_DIMS], stride_r[OLC_BCAST_MAX_OPERANDS][OLC_BCAST_MAX_DIMS];
    for (int d = out_ndim - 1; d >= 0; --d) {
        int64_t n = out_shape[d];
        int64_t s_in[OLC_BCAST_MAX_OPERANDS];
        s_in[0] = st[0];
        st[0] *= n;
        for (int k = 0; k < nin; ++k) {
            int dk = ndims[k] - (out_ndim - d);
            int64_t m = dk >= 0 ? shapes[k][dk] : 1;
            if (m != n && m != 1) return -1 - k;
            s_in[k + 1] = (m == 1) ? 0 : st[k + 1];
            st[k + 1] *= m;
        }
        if (n == 1) continue;
        /* Merge with the dimension kept just before (the inner one) when
         * every operand steps through both as through one. */
        int merge = nd > 0;
        for (int k = 0; merge && k <= nin; ++k)
            if (s_in[k] != stride_r[k][nd - 1] * shape_r[nd - 1]) merge = 0;
        if (merge) {
            shape_r[nd - 1] *= n;
            continue;
        }
        shape_r[nd] = n;
        for (int k = 0; k <= nin; ++k) stride_r[k][nd] = s_in[k];
        ++nd;
    }
    if (nd == 0) { /* one element */
        shape_r[0] = 1;
        for (int k = 0; k <= nin; ++k) stride_r[k][0] = 1;
        nd = 1;
    }
    p->ndim = nd;
    for (int d = 0; d < nd; ++d) {
        p->shape[d] = shape_r[nd - 1 - d];
        for (int k = 0; k <= nin; ++k) p->stride[k][d] = stride_r[k][nd - 1 - d];
    }
    return 0;
}

/* Element offset of every operand at the start of row `row` (rows are the
 * flattened outer dimensions, the last dimension is the row itself). */
static inline void olc_bcast_row_offsets(const olc_bcast *p, int64_t row, int64_t *off) {
    for (int k = 0; k < p->noperands; ++k) off[k] = 0;
    for (int d = p->ndim - 2; d >= 0 && row > 0; --d) {
        int64_t i = row % p->shape[d];
        row /= p->shape[d];
        for (int k = 0; k < p->noperands; ++k) off[k] += i * p->stride[k][d];
    }
}

/* Advance the row index vector `idx` (outer dims) by one row, updating the
 * operand offsets incrementally (an odometer). */
static inline void olc_bcast_next_row(const olc_bcast *p, int64_t *idx, int64_t *off) {
    for (int d = p->ndim - 2; d >= 0; --d) {
        for (int k = 0; k < p->noperands; ++k) off[k] += p->stride[k][d];
        if (++idx[d] < p->shape[d]) return;
        for (int k = 0; k < p->noperands; ++k) off[k] -= idx[d] * p->stride[k][d];
        idx[d] = 0;
    }
}

static inline void olc_bcast_row_index(const olc_bcast *p, int64_t row, int64_t *idx) {
    for (int d = p->ndim - 2; d >= 0; --d) {
        idx[d] = row % p->shape[d];
        row /= p->shape[d];
    }
}

#endif
