# The C API of skip_norm/olc_skip_norm.h that skip_norm.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "skip_norm/olc_skip_norm.h" nogil:
    ctypedef struct olc_sn_args:
        const void *x
        const void *skip
        const void *gamma
        const void *beta
        const void *bias
        void *y
        void *sum
        float *mean
        float *inv
        int64_t H
        int64_t skip_rows
        float eps
    ctypedef void (*olc_sn_fn)(const olc_sn_args *a, int64_t r0, int64_t r1)
    olc_sn_fn olc_sn_select(int dtype, int level, int simplified)
    int olc_sn_level(int dtype, int level)
