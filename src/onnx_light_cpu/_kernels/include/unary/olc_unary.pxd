# The C API of unary/olc_unary.h.

from libc.stdint cimport int64_t

cdef extern from "unary/olc_unary.h" nogil:
    ctypedef void (*olc_unary_fn)(const void *x, void *y, int64_t n)
    ctypedef void (*olc_uact_fn)(const void *x, void *y, int64_t n, const double *p)
    ctypedef void (*olc_clip_fn)(const void *x, void *y, int64_t n, const void *lo, const void *hi)
    olc_unary_fn olc_unary_select(int op, int dtype, int level)
    int olc_unary_level(int op, int dtype, int level)
    olc_clip_fn olc_clip_select(int dtype, int level)
    int olc_clip_level(int dtype, int level)
    ctypedef void (*olc_silu_gate_fn)(const float *x, const float *u, float *y, int64_t n)
    olc_silu_gate_fn olc_silu_gate_select(int level)
    int OLC_OP_ABS, OLC_OP_EXP, OLC_OP_LOG, OLC_OP_SIGMOID, OLC_OP_TANH, OLC_OP_NOT
    int OLC_OP_NEG, OLC_OP_RECIPROCAL, OLC_OP_GELU, OLC_OP_GELU_TANH
    olc_uact_fn olc_uact_select(int op, int dtype, int level)
    int olc_uact_level(int op, int dtype, int level)
    int OLC_OP_RELU, OLC_OP_LEAKY_RELU, OLC_OP_HARD_SIGMOID, OLC_OP_HARD_SWISH, OLC_OP_ELU
    int OLC_OP_SELU, OLC_OP_CELU, OLC_OP_SOFTPLUS, OLC_OP_MISH, OLC_OP_SIGN, OLC_OP_ERF
    int OLC_OP_SOFTSIGN, OLC_OP_THRESHOLDED_RELU, OLC_OP_SQRT
