# The C API of unary/olc_unary.h.

from libc.stdint cimport int64_t

cdef extern from "unary/olc_unary.h" nogil:
    ctypedef void (*olc_unary_fn)(const void *x, void *y, int64_t n)
    olc_unary_fn olc_unary_select(int op, int dtype, int level)
    int olc_unary_level(int op, int dtype, int level)
    int OLC_OP_ABS, OLC_OP_EXP, OLC_OP_LOG, OLC_OP_SIGMOID, OLC_OP_TANH, OLC_OP_NOT
