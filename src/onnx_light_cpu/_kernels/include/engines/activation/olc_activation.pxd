# The C API of engines/activation/olc_activation.h that engines/activation.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "engines/activation/olc_activation.h" nogil:
    ctypedef struct olc_act_args:
        const void *a
        const void *b
        void *y
        int64_t n
        float alpha
    ctypedef void (*olc_act_fn)(const olc_act_args *p, int64_t r0, int64_t r1)
    olc_act_fn olc_act_select(int op, int dtype, int level)
    int olc_act_level(int dtype, int level)
    int OLC_ACT_BIAS_GELU, OLC_ACT_SWIGLU
