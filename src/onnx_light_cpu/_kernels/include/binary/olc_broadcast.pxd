# The C API of binary/olc_broadcast.h.

from libc.stdint cimport int64_t

cdef extern from "binary/olc_broadcast.h" nogil:
    int OLC_BCAST_MAX_DIMS
    ctypedef struct olc_bcast:
        int ndim
        int64_t size
        int64_t shape[64]
        int64_t stride[4][64]
    int olc_bcast_shape(int nin, const int *ndims, const int64_t *const *shapes, int64_t *out)
    int olc_bcast_plan(olc_bcast *p, int out_ndim, const int64_t *out_shape, int nin,
                       const int *ndims, const int64_t *const *shapes)
