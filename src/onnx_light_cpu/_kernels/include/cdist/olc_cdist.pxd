# The C API of cdist/olc_cdist.h that cdist.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "cdist/olc_cdist.h" nogil:
    ctypedef struct olc_cdist_args:
        const void *a
        const void *bt
        void *y
        int64_t N, K
        int sqrt_
    ctypedef void (*olc_cdist_fn)(const olc_cdist_args *p, int64_t r0, int64_t r1)
    olc_cdist_fn olc_cdist_select(int dtype, int level)
    int olc_cdist_level(int level)
