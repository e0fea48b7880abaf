/* Index-map copy: Pad (every mode) and Resize's nearest mode.
 *
 * The output is seen as rows: a multi-index over `nd` outer axes, then one
 * column axis of `row_bytes` bytes.  Each outer axis k has a map from its
 * output coordinate to a byte offset in the input (-1: the coordinate lies
 * in a constant pad).  A row is either
 *   - the fill pattern throughout (one of its outer coordinates is -1),
 *   - a copy of the previous output row of the same task (same source:
 *     nearest upsampling, edge padding), or
 *   - built from the column plan, one of two forms:
 *       runs  (nruns > 0): triples (dst offset, src offset or -1, bytes),
 *             a memcpy or a fill each (Pad: left pad, the middle, right pad);
 *       gather (nruns == 0): one src offset per output column, `elem`
 *             bytes each (Resize nearest: every column its own source).
 * The element type matters only through its size; the fill pattern is one
 * element of the tensor (`fill_bytes`; a column element holds a whole
 * number of them).  Rows are independent, so any split of the rows
 * between threads writes the same bytes.
 */
#ifndef OLC_TENSOR_MAP_H
#define OLC_TENSOR_MAP_H

#include <stdint.h>
#include <string.h>

typedef struct {
    int nd;                     /* outer axes */
    const int64_t *dims;        /* their output sizes */
    const int64_t *const *maps; /* per outer axis: byte offset per output coordinate, -1 fill */
    const int64_t *runs;        /* nruns triples, or NULL */
    int64_t nruns;
    const int64_t *cols;        /* gather form: ncols src byte offsets (-1 fill) */
    int64_t ncols;
    int cols_fill;              /* some column is a fill (-1) */
    int64_t repeat;             /* > 0: column j reads element j / repeat from cols[0]
                                   (an integer upsampling: cols need not be read) */
    int64_t elem;               /* bytes of one column element (and of the fill pattern) */
    int64_t row_bytes;          /* bytes of one output row */
    const char *fill;           /* one element of the tensor */
    int64_t fill_bytes;         /* its size (elem is a multiple of it) */
    int fill_zero;              /* the pattern is all zero bytes */
} olc_map_plan;

/* nbytes (a multiple of elem) of the repeated pattern at dst. */
static void olc_map_fill(char *dst, int64_t nbytes, const char *fill, int64_t elem, int zero) {
    if (nbytes <= 0) return;
    if (zero) {
        memset(dst, 0, (size_t)nbytes);
        return;
    }
    memcpy(dst, fill, (size_t)elem);
    int64_t done = elem;
    while (done < nbytes) {
        int64_t n = done < nbytes - done ? done : nbytes - done;
        memcpy(dst + done, dst, (size_t)n);
        done += n;
    }
}

#define OLC_MAP_GATHER(T)                                                              \
    {                                                                                  \
        T *restrict d = (T *)dst;                                                      \
        if (!fill_any) {                                                               \
            for (int64_t j = 0; j < n; ++j) memcpy(d + j, src + cols[j], sizeof(T));   \
            return;                                                                    \
        }                                                                              \
        for (int64_t j = 0; j < n; ++j) {                                              \
            if (cols[j] >= 0) memcpy(d + j, src + cols[j], sizeof(T));                 \
            else olc_map_fill((char *)(d + j), sizeof(T), p->fill, p->fill_bytes, p->fill_zero); \
        }                                                                              \
        return;                                                                        \
    }

/* Each of n / k 4-byte elements at src written k times in a row (nearest
 * upsampling by an integer factor); 2 is a loop of its own, which the
 * compiler turns into vector shuffles. */
static void olc_map_repeat4(uint32_t *restrict d, const char *restrict src, int64_t n, int64_t k) {
    const int64_t m = n / k;
    uint32_t s[1];
    if (k == 2) {
        for (int64_t j = 0; j < m; ++j) {
            memcpy(s, src + 4 * j, 4);
            d[2 * j] = s[0];
            d[2 * j + 1] = s[0];
        }
        return;
    }
    for (int64_t j = 0; j < m; ++j) {
        memcpy(s, src + 4 * j, 4);
        for (int64_t r = 0; r < k; ++r) d[j * k + r] = s[0];
    }
}

/* One row from the column plan (the fields read into locals first: the
 * stores to dst could alias the plan as far as the compiler knows). */
static void olc_map_row(char *restrict dst, const char *restrict src, const olc_map_plan *p) {
    if (p->nruns > 0) {
        const int64_t *r = p->runs;
        const int64_t nruns = p->nruns;
        for (int64_t k = 0; k < nruns; ++k, r += 3) {
            if (r[1] >= 0) memcpy(dst + r[0], src + r[1], (size_t)r[2]);
            else olc_map_fill(dst + r[0], r[2], p->fill, p->fill_bytes, p->fill_zero);
        }
        return;
    }
    const int64_t *restrict cols = p->cols;
    const int64_t n = p->ncols, elem = p->elem;
    const int fill_any = p->cols_fill;
    if (p->repeat > 0 && elem == 4) {
        olc_map_repeat4((uint32_t *)dst, src + cols[0], n, p->repeat);
        return;
    }
    switch (elem) {
    case 1: OLC_MAP_GATHER(uint8_t)
    case 2: OLC_MAP_GATHER(uint16_t)
    case 4: OLC_MAP_GATHER(uint32_t)
    case 8: OLC_MAP_GATHER(uint64_t)
    default:
        for (int64_t j = 0; j < n; ++j) {
            if (cols[j] >= 0) memcpy(dst + j * elem, src + cols[j], (size_t)elem);
            else olc_map_fill(dst + j * elem, elem, p->fill, p->fill_bytes, p->fill_zero);
        }
    }
}
#undef OLC_MAP_GATHER

/* Output rows [r0, r1).  The outer multi-index is found once, by
 * division, then stepped like an odometer (a division a row cost more than
 * the copy of a short row). */
enum { OLC_MAP_MAX_DIMS = 64 };

static void olc_map_rows(char *out, const char *in, const olc_map_plan *p, int64_t r0, int64_t r1) {
    int64_t pos[OLC_MAP_MAX_DIMS];
    int64_t q = r0;
    for (int k = p->nd - 1; k >= 0; --k) {
        pos[k] = q % p->dims[k];
        q /= p->dims[k];
    }
    int64_t prev = -2; /* source offset of the previous row built here; -1 filled */
    for (int64_t r = r0; r < r1; ++r) {
        int64_t off = 0;
        for (int k = 0; k < p->nd; ++k) {
            int64_t m = p->maps[k][pos[k]];
            if (m < 0) {
                off = -1;
                break;
            }
            off += m;
        }
        char *dst = out + r * p->row_bytes;
        if (off == prev && r > r0) {
            memcpy(dst, dst - p->row_bytes, (size_t)p->row_bytes);
        } else if (off < 0) {
            olc_map_fill(dst, p->row_bytes, p->fill, p->fill_bytes, p->fill_zero);
        } else {
            olc_map_row(dst, in + off, p);
        }
        prev = off;
        for (int k = p->nd - 1; k >= 0; --k) {
            if (++pos[k] < p->dims[k]) break;
            pos[k] = 0;
        }
    }
}

#endif
