# The C API of resize/olc_resize.h.

from libc.stdint cimport int64_t, uint8_t

cdef extern from "resize/olc_resize.h" nogil:
    ctypedef struct olc_resize_axis:
        const void *in_ "in"
        void *out
        int64_t in_len, out_len, inner, taps
        const int64_t *idx
        const void *w
        const uint8_t *extrap
        double ext
    ctypedef void (*olc_resize_fn)(const olc_resize_axis *a, int64_t i0, int64_t i1)
    olc_resize_fn olc_resize_select(int level, int dbl)
    int olc_build_level(int level)
