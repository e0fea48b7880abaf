# The C API of tensor/olc_tensor.h.

from libc.stdint cimport int64_t

cdef extern from "tensor/olc_tensor.h" nogil:
    void olc_copy_rows_range(char *dst, int64_t dst_stride, const char *src, int64_t src_stride,
                             int64_t row_bytes, int64_t b0, int64_t b1)
    void olc_transpose_task(char *dst, const char *src, int64_t R, int64_t C, int64_t size,
                            int64_t band_cols, int64_t t)
    int OLC_TRANSPOSE_TILE
    void olc_strided_rows(char *dst, const char *src, int nd, const int64_t *dims,
                          const int64_t *strides, int64_t itemsize, int64_t r0, int64_t r1)
    int64_t olc_check_indices(const int64_t *idx, int64_t n, int64_t dim)
    void olc_gather_rows(char *dst, const char *data, const int64_t *idx, int64_t nidx,
                         int64_t dim, int64_t row_bytes, int64_t r0, int64_t r1)
    int olc_nonzero_kind(int dtype, int *complex_)
    int64_t olc_nonzero_count(const char *x, int64_t n, int64_t itemsize, int kind, int complex_)
    void olc_nonzero_fill(const char *x, int64_t n, int64_t itemsize, int kind, int complex_,
                          int nd, const int64_t *dims, int64_t count, int64_t *out)
    ctypedef void (*olc_scatter_fn)(void *y, const void *u, const int64_t *off, int64_t m,
                                    int64_t slice, int red)
    olc_scatter_fn olc_scatter_select(int dtype)
    int64_t olc_scatter_offsets(const int64_t *indices, int64_t m, int k, const int64_t *dims,
                                int64_t slice, int64_t *offsets)
