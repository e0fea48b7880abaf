# The C API of olc_causal_conv_with_state.h that causal_conv_with_state.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "causal_conv_with_state/olc_causal_conv_with_state.h" nogil:
    ctypedef struct olc_cconv_args:
        const void *x
        const void *state
        void *y
        void *present
        const float *w
        const float *bias
        int64_t B, C, L, K, SL, dil
        int silu
    ctypedef void (*olc_cconv_fn)(const olc_cconv_args *p, int64_t t0, int64_t t1)
    olc_cconv_fn olc_cconv_select(int dtype, int channels_last, int level)
    int olc_cconv_level(int level)
    int64_t olc_cconv_cl_tiles(int64_t L)
