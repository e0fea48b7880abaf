# The C API of olc_linear_attention.h that linear_attention.pyx uses.

from libc.stdint cimport int64_t

cdef extern from "linear_attention/olc_linear_attention.h" nogil:
    ctypedef struct olc_la_args:
        const void *q
        const void *k
        const void *v
        const void *past
        const void *decay
        const void *beta
        void *out
        void *present
        int64_t B, T, Hq, Hk, Hkv, dk, dv, W
        int tdt, sdt
        int gated, delta, decay_rows, beta_heads
        float scale
    ctypedef struct olc_la_chunk:
        pass
    ctypedef void (*olc_la_block_fn)(const olc_la_chunk *c, float *blk, int64_t j0, int64_t jn)
    int olc_la_level(int level)
    olc_la_block_fn olc_la_select(int level, int64_t dv, int64_t *JB)
    void olc_la_prepare(olc_la_args *p, int level)
    int64_t olc_la_scratch_floats(const olc_la_args *p, int64_t JB)
    void olc_la_run(const olc_la_args *p, olc_la_block_fn fn, int64_t JB, float *scratch,
                    int64_t i0, int64_t i1)
