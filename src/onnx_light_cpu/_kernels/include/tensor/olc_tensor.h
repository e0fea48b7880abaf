/* Data movement: block copies for Concat, Split, Slice and Gather, the
 * update loop of ScatterND and the two passes of NonZero.
 *
 * Every kernel here moves bytes: the element type only matters through its
 * size (and, for NonZero and the ScatterND reductions, its kind).  Copies of
 * whole contiguous runs are memcpy calls; runs of one element use a typed
 * load/store of the element's width, which the compiler inlines.
 */
#ifndef OLC_TENSOR_H
#define OLC_TENSOR_H

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include "common/olc_math.h"

/* One element of 1, 2, 4, 8 or 16 bytes, or a run of any length. */
static inline void olc_copy_n(char *dst, const char *src, int64_t nbytes) {
    switch (nbytes) {
    case 1: *dst = *src; return;
    case 2: memcpy(dst, src, 2); return;
    case 4: memcpy(dst, src, 4); return;
    case 8: memcpy(dst, src, 8); return;
    case 16: memcpy(dst, src, 16); return;
    default: memcpy(dst, src, (size_t)nbytes);
    }
}

/* Bytes [b0, b1) of the stream formed by rows of row_bytes bytes, the rows
 * lying src_stride bytes apart in src and dst_stride bytes apart in dst.
 * Concat (dst strided) and Split (src strided) are both this copy; a task
 * covers any byte range, so one long row can be split between threads. */
static void olc_copy_rows_range(char *dst, int64_t dst_stride, const char *src,
                                int64_t src_stride, int64_t row_bytes, int64_t b0, int64_t b1) {
    if (row_bytes <= 0) return;
    int64_t row = b0 / row_bytes, off = b0 % row_bytes;
    while (b0 < b1) {
        int64_t n = row_bytes - off;
        if (n > b1 - b0) n = b1 - b0;
        olc_copy_n(dst + row * dst_stride + off, src + row * src_stride + off, n);
        b0 += n;
        ++row;
        off = 0;
    }
}

/* Rows [r0, r1) of a strided view: row r (a multi-index over dims[0..nd-2])
 * starts at src + sum(idx_k strides[k]); its last dimension has dims[nd-1]
 * elements strides[nd-1] bytes apart and is written contiguously. */
static void olc_strided_rows(char *dst, const char *src, int nd, const int64_t *dims,
                             const int64_t *strides, int64_t itemsize, int64_t r0, int64_t r1) {
    int64_t last = dims[nd - 1], step = strides[nd - 1];
    int64_t run = last * itemsize;
    int contiguous = step == itemsize;
    for (int64_t r = r0; r < r1; ++r) {
        const char *p = src;
        int64_t q = r;
        for (int k = nd - 2; k >= 0; --k) {
            p += (q % dims[k]) * strides[k];
            q /= dims[k];
        }
        char *d = dst + r * run;
        if (contiguous) {
            memcpy(d, p, (size_t)run);
        } else {
            switch (itemsize) {
#define OLC_STRIDED_CASE(n, T)                                                       \
            case n:                                                                   \
                for (int64_t j = 0; j < last; ++j) ((T *)d)[j] = *(const T *)(p + j * step); \
                break;
            OLC_STRIDED_CASE(1, uint8_t)
            OLC_STRIDED_CASE(2, uint16_t)
            OLC_STRIDED_CASE(4, uint32_t)
            OLC_STRIDED_CASE(8, uint64_t)
#undef OLC_STRIDED_CASE
            default:
                for (int64_t j = 0; j < last; ++j) memcpy(d + j * itemsize, p + j * step, (size_t)itemsize);
            }
        }
    }
}

/* First position of an index outside [-dim, dim), or -1. */
static int64_t olc_check_indices(const int64_t *idx, int64_t n, int64_t dim) {
    for (int64_t j = 0; j < n; ++j)
        if (idx[j] < -dim || idx[j] >= dim) return j;
    return -1;
}

/* Gather: output rows [r0, r1) of the [outer, nidx] row grid; row (o, j)
 * is data row o * dim + idx[j] (negative indices count from the end). */
static void olc_gather_rows(char *dst, const char *data, const int64_t *idx, int64_t nidx,
                            int64_t dim, int64_t row_bytes, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
        int64_t o = r / nidx, i = idx[r % nidx];
        if (i < 0) i += dim;
        olc_copy_n(dst + r * row_bytes, data + (o * dim + i) * row_bytes, row_bytes);
    }
}

/* ---- NonZero ---- */

/* Element kinds for the zero test: a float is zero when its bits other than
 * the sign are (so -0.0 is zero and NaN is not); complex when both parts are. */
enum { OLC_NZ_INT = 0, OLC_NZ_FLOAT = 1 };

static inline int olc_is_nonzero(const char *p, int64_t itemsize, int kind) {
    if (kind == OLC_NZ_INT) {
        switch (itemsize) {
        case 1: return *(const uint8_t *)p != 0;
        case 2: { uint16_t v; memcpy(&v, p, 2); return v != 0; }
        case 4: { uint32_t v; memcpy(&v, p, 4); return v != 0; }
        default: { uint64_t v; memcpy(&v, p, 8); return v != 0; }
        }
    }
    switch (itemsize) {
    case 2: { uint16_t v; memcpy(&v, p, 2); return (v & 0x7fffu) != 0; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return (v & 0x7fffffffu) != 0; }
    case 8: { uint64_t v; memcpy(&v, p, 8); return (v & 0x7fffffffffffffffull) != 0; }
    default: /* complex128 as two doubles */
        return olc_is_nonzero(p, 8, kind) || olc_is_nonzero(p + 8, 8, kind);
    }
}

/* Non-zero elements of x[n]; complex64 passes itemsize 8 with parts of 4. */
static int64_t olc_nonzero_count(const char *x, int64_t n, int64_t itemsize, int kind, int complex_) {
    int64_t count = 0;
    if (complex_) {
        int64_t half = itemsize / 2;
        for (int64_t i = 0; i < n; ++i)
            count += olc_is_nonzero(x + i * itemsize, half, kind) ||
                     olc_is_nonzero(x + i * itemsize + half, half, kind);
        return count;
    }
    if (kind == OLC_NZ_INT && itemsize == 1) { /* bool and bytes: the common mask case */
        for (int64_t i = 0; i < n; ++i) count += x[i] != 0;
        return count;
    }
    for (int64_t i = 0; i < n; ++i) count += olc_is_nonzero(x + i * itemsize, itemsize, kind);
    return count;
}

/* Coordinates of the non-zero elements, row-major order: out[k * count + m]
 * is the k-th coordinate of the m-th non-zero element. */
static void olc_nonzero_fill(const char *x, int64_t n, int64_t itemsize, int kind, int complex_,
                             int nd, const int64_t *dims, int64_t count, int64_t *out) {
    int64_t idx[64] = {0};
    int64_t m = 0, half = itemsize / 2;
    for (int64_t i = 0; i < n; ++i) {
        const char *p = x + i * itemsize;
        int nz = complex_ ? (olc_is_nonzero(p, half, kind) || olc_is_nonzero(p + half, half, kind))
                          : olc_is_nonzero(p, itemsize, kind);
        if (nz) {
            for (int k = 0; k < nd; ++k) out[k * count + m] = idx[k];
            ++m;
        }
        for (int k = nd - 1; k >= 0; --k) { /* odometer */
            if (++idx[k] < dims[k]) break;
            idx[k] = 0;
        }
    }
}

/* ---- ScatterND ---- */

enum { OLC_RED_NONE = 0, OLC_RED_ADD, OLC_RED_MUL, OLC_RED_MAX, OLC_RED_MIN };

/* Offsets (in elements) of the slices indices[m, :k] address in data, or
 * the first bad m (-1 - m) when an index is outside [-dim, dim). */
static int64_t olc_scatter_offsets(const int64_t *indices, int64_t m, int k, const int64_t *dims,
                                   int64_t slice, int64_t *offsets) {
    for (int64_t i = 0; i < m; ++i) {
        int64_t off = 0;
        for (int j = 0; j < k; ++j) {
            int64_t v = indices[i * k + j];
            if (v < -dims[j] || v >= dims[j]) return -1 - i;
            if (v < 0) v += dims[j];
            off = off * dims[j] + v;
        }
        offsets[i] = off * slice;
    }
    return 0;
}

/* y[off[i] + t] op= u[i * slice + t] in update order (duplicates follow
 * each other as in the sequential definition).  max/min follow
 * numpy.maximum/minimum: a NaN on either side wins. */
#define OLC_SCATTER_LOOP(name, T, LOAD, STORE)                                              \
    static void olc_scatter_##name(T *y, const T *u, const int64_t *off, int64_t m,          \
                                   int64_t slice, int red) {                                 \
        for (int64_t i = 0; i < m; ++i) {                                                    \
            T *d = y + off[i];                                                               \
            const T *s = u + i * slice;                                                      \
            switch (red) {                                                                   \
            case OLC_RED_ADD: for (int64_t t = 0; t < slice; ++t) d[t] = STORE(LOAD(d[t]) + LOAD(s[t])); break; \
            case OLC_RED_MUL: for (int64_t t = 0; t < slice; ++t) d[t] = STORE(LOAD(d[t]) * LOAD(s[t])); break; \
            case OLC_RED_MAX: for (int64_t t = 0; t < slice; ++t) { __typeof__(LOAD(d[t])) a = LOAD(d[t]), b = LOAD(s[t]); \
                d[t] = (a != a) ? d[t] : (b != b || b > a) ? s[t] : d[t]; } break;            \
            case OLC_RED_MIN: for (int64_t t = 0; t < slice; ++t) { __typeof__(LOAD(d[t])) a = LOAD(d[t]), b = LOAD(s[t]); \
                d[t] = (a != a) ? d[t] : (b != b || b < a) ? s[t] : d[t]; } break;            \
            default: memcpy(d, s, (size_t)slice * sizeof(T));                                 \
            }                                                                                \
        }                                                                                    \
    }
#define OLC_ID_(v) (v)
/* Integer sums and products wrap, as NumPy's do: computed unsigned. */
#define OLC_SCATTER_INT(name, T, U)                                                           \
    static void olc_scatter_##name(T *y, const T *u, const int64_t *off, int64_t m,          \
                                   int64_t slice, int red) {                                 \
        for (int64_t i = 0; i < m; ++i) {                                                    \
            T *d = y + off[i];                                                               \
            const T *s = u + i * slice;                                                      \
            switch (red) {                                                                   \
            case OLC_RED_ADD: for (int64_t t = 0; t < slice; ++t) d[t] = (T)(U)((U)d[t] + (U)s[t]); break; \
            case OLC_RED_MUL: for (int64_t t = 0; t < slice; ++t) d[t] = (T)(U)((U)d[t] * (U)s[t]); break; \
            case OLC_RED_MAX: for (int64_t t = 0; t < slice; ++t) d[t] = s[t] > d[t] ? s[t] : d[t]; break; \
            case OLC_RED_MIN: for (int64_t t = 0; t < slice; ++t) d[t] = s[t] < d[t] ? s[t] : d[t]; break; \
            default: memcpy(d, s, (size_t)slice * sizeof(T));                                 \
            }                                                                                \
        }                                                                                    \
    }
OLC_SCATTER_INT(i8, int8_t, uint8_t)
OLC_SCATTER_INT(i16, int16_t, uint16_t)
OLC_SCATTER_INT(i32, int32_t, uint32_t)
OLC_SCATTER_INT(i64, int64_t, uint64_t)
OLC_SCATTER_INT(u8, uint8_t, uint8_t)
OLC_SCATTER_INT(u16, uint16_t, uint16_t)
OLC_SCATTER_INT(u32, uint32_t, uint32_t)
OLC_SCATTER_INT(u64, uint64_t, uint64_t)
OLC_SCATTER_LOOP(f32, float, OLC_ID_, OLC_ID_)
OLC_SCATTER_LOOP(f64, double, OLC_ID_, OLC_ID_)
/* float16/bfloat16: one operation in float32 rounded back equals the
 * operation rounded directly (float32 has more than 2p+2 bits). */
OLC_SCATTER_LOOP(f16, uint16_t, olc_h2f, olc_f2h)
OLC_SCATTER_LOOP(bf16, uint16_t, olc_bf2f, olc_f2bf)

/* bool: add is or, mul is and, max is or, min is and (NumPy's bool ufuncs). */
static void olc_scatter_bool(uint8_t *y, const uint8_t *u, const int64_t *off, int64_t m,
                             int64_t slice, int red) {
    for (int64_t i = 0; i < m; ++i) {
        uint8_t *d = y + off[i];
        const uint8_t *s = u + i * slice;
        switch (red) {
        case OLC_RED_ADD: case OLC_RED_MAX:
            for (int64_t t = 0; t < slice; ++t) { d[t] = (uint8_t)(d[t] || s[t]); } break;
        case OLC_RED_MUL: case OLC_RED_MIN:
            for (int64_t t = 0; t < slice; ++t) { d[t] = (uint8_t)(d[t] && s[t]); } break;
        default: memcpy(d, s, (size_t)slice);
        }
    }
}

#endif
