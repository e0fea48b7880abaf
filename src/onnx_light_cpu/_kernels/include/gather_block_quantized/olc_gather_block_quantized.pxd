# The C API of olc_gather_block_quantized.h that the gather_block_quantized core uses.
from libc.stdint cimport int64_t, uint8_t

cdef extern from "gather_block_quantized/olc_gather_block_quantized.h" nogil:
    ctypedef struct olc_gbq_args:
        const uint8_t *data
        const void *idx
        const void *scales
        const uint8_t *zp
        void *out
        int64_t V
        int64_t inner
        int64_t P
        int64_t D
        int64_t G
        int64_t zp_bytes
        int64_t block
        int idx64
        int bits
        int dtype
    ctypedef void (*olc_gbq_fn)(const olc_gbq_args *a, int64_t r0, int64_t r1)
    olc_gbq_fn olc_gbq_select(int bits, int dtype, int level)
    int olc_gbq_level(int bits, int level)

cdef extern from "gather_block_quantized/olc_gather_block_typed.h" nogil:
    enum: OLC_GBQT_MAX_RANK
    ctypedef struct olc_gbqt_args:
        const uint8_t *data
        const void *idx
        const void *scales
        const uint8_t *zp
        const float *lut
        void *out
        int64_t dims[16]
        int64_t sstride[16]
        int64_t n_idx
        int64_t M
        int64_t A
        int64_t J
        int64_t L
        int64_t block
        int rank
        int g
        int q
        int idx64
        int dtype
    ctypedef void (*olc_gbqt_fn)(const olc_gbqt_args *a, int64_t r0, int64_t r1)
    olc_gbqt_fn olc_gbqt_select(int level)
    int olc_build_level(int level)
