# The C API of olc_attention.h that engines/attention.pyx uses.

from libc.stdint cimport int32_t, int64_t

from olc_types cimport OLC_BFLOAT16, OLC_FLOAT, OLC_FLOAT16

cdef extern from "engines/attention/olc_attention.h" nogil:
    int OLC_ATTN_TB, OLC_ATTN_KC, OLC_ATTN_RMAX
    ctypedef struct olc_attn_args:
        const void *q
        const void *k
        const void *v
        void *out
        int64_t B, Nq, Nkv, S, T, Dk, Dv
        int64_t qs[3]
        int64_t ks[3]
        int64_t vs[3]
        int64_t os[3]
        const float *bias
        int64_t bs[3]
        const int32_t *kbeg
        const int32_t *kend
        const float *sink
        float scale, softcap
        int softcap_first, dtype
        int64_t hb, sb, nhb, nsb, nchunks, chunk
        float *partial
        int64_t prow
        const void *pk
        const void *pv
        int64_t pks[3]
        int64_t pvs[3]
        const int32_t *plen
        int fuse_copy
        int kvbits
        const float *kscale
        const float *vscale
    ctypedef void (*olc_attn_task_fn)(const olc_attn_args *p, int64_t task, float *scratch)
    ctypedef void (*olc_attn_combine_fn)(const olc_attn_args *p, int64_t row)
    olc_attn_task_fn olc_attn_task_select(int level)
    olc_attn_combine_fn olc_attn_combine_select(int level)
    int olc_attn_level(int level)
    int64_t olc_attn_scratch_floats(int64_t Dk, int64_t Dv)
    void olc_attn_copy_past(const olc_attn_args *p, int64_t bg)

    ctypedef struct olc_attn_append_args:
        const void *src
        void *dst
        int64_t N, L, D, esize
        int64_t ss[3]
        int64_t ds[3]
        const int64_t *start
        const int64_t *count
    void olc_attn_append_rows(const olc_attn_append_args *a, int64_t bn)
