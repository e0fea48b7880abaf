# The C API of microsoft_activation/olc_microsoft_activation.h.

from libc.stdint cimport int64_t

cdef extern from "microsoft_activation/olc_microsoft_activation.h" nogil:
    ctypedef struct olc_msact_args:
        const void *x
        const void *bias
        void *y
        int64_t n
        float alpha, beta, gamma
        int act
    ctypedef void (*olc_msact_fn)(const olc_msact_args *p, int64_t i0, int64_t i1)
    olc_msact_fn olc_msact_select(int op, int dtype, int level)
    int olc_msact_level(int dtype, int level)
    int OLC_MSACT_FAST_GELU, OLC_MSACT_QUICK_GELU, OLC_MSACT_FUSED
    int OLC_MSACT_RELU, OLC_MSACT_TANH, OLC_MSACT_SIGMOID, OLC_MSACT_LEAKY_RELU
    int OLC_MSACT_HARD_SIGMOID, OLC_MSACT_ELU, OLC_MSACT_SELU, OLC_MSACT_THRESHOLDED_RELU
    int OLC_MSACT_SOFTPLUS, OLC_MSACT_SOFTSIGN, OLC_MSACT_SCALED_TANH
    int OLC_MSACT_PARAMETRIC_SOFTPLUS, OLC_MSACT_CELU
