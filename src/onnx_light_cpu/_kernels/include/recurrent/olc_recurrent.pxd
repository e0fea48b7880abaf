# The C API of recurrent/olc_recurrent.h that recurrent.pyx uses.

from libc.stdint cimport int32_t, int64_t

cdef extern from "recurrent/olc_recurrent.h" nogil:
    ctypedef struct olc_rnn_act:
        int code
        float alpha, beta

    ctypedef struct olc_rnn_dir:
        int cell, level, threads, reverse, lbr, input_forget
        int proj_threads
        int64_t T, B, H, K
        const int32_t *lens
        const void *x
        int64_t xs_t, xs_b
        const void *w
        const void *bias
        void *xw
        const void *r[2]
        int r_dense
        const void *rbh
        const void *p
        void *h
        void *c
        void *y
        int64_t ys_t, ys_b
        void *scratch
        olc_rnn_act act[3]
        float clip
        int failed

    int olc_rnn_run(olc_rnn_dir *dirs, int ndir, int is_double, int parallel)
