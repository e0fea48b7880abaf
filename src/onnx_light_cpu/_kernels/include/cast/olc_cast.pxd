# The C API of cast/olc_cast.h.

from libc.stdint cimport int64_t

cdef extern from "cast/olc_cast.h" nogil:
    ctypedef void (*olc_cast_fn)(const void *x, void *y, int64_t n, const void *aux)
    olc_cast_fn olc_cast_select(int src, int dst, int level)
    olc_cast_fn olc_cast_f8_select(int src, int dst)
    olc_cast_fn olc_lut_select(int in_bytes, int out_bytes)
    int olc_cast_level(int level)
    int OLC_CAST_SATURATE, OLC_CAST_ROUND_DOWN, OLC_CAST_ROUND_NEAREST
