# The C API of olc_rotary.h that engines/rotary.pyx uses.

from libc.stdint cimport int64_t

from olc_types cimport OLC_BFLOAT16, OLC_FLOAT, OLC_FLOAT16

cdef extern from "engines/rotary/olc_rotary.h" nogil:
    ctypedef struct olc_rope_args:
        const void *x
        void *y
        const void *cos
        const void *sin
        const int64_t *pos
        int64_t S, N, H, half
        int64_t xs_b, xs_s, xs_n
        int64_t ys_b, ys_s, ys_n
    ctypedef void (*olc_rope_fn)(const olc_rope_args *p, int64_t r0, int64_t r1)
    olc_rope_fn olc_rope_select(int xtype, int ctype, int interleaved, int level)
    int olc_rope_level(int level)
