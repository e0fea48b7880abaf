# The C API of tensor/olc_tensor_map.h.

from libc.stdint cimport int64_t

cdef extern from "tensor/olc_tensor_map.h" nogil:
    ctypedef struct olc_map_plan:
        int nd
        const int64_t *dims
        const int64_t *const *maps
        const int64_t *runs
        int64_t nruns
        const int64_t *cols
        int64_t ncols
        int cols_fill
        int64_t repeat
        int64_t elem
        int64_t row_bytes
        const char *fill
        int64_t fill_bytes
        int fill_zero
    void olc_map_rows(char *out, const char *inp, const olc_map_plan *p, int64_t r0, int64_t r1)
