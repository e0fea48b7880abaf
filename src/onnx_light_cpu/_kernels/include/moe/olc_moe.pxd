# The C API of the mixture-of-experts core (olc_moe.h).

from libc.stdint cimport int8_t, int64_t, uint8_t

# The MatMulNBits weights the MoE core fills (olc_nb_w, olc_q8_w).
from olc_matmul_nbits cimport olc_nb_w, olc_q8_w

cdef extern from "moe/olc_moe.h" nogil:
    int OLC_MOE_RELU, OLC_MOE_GELU, OLC_MOE_SILU, OLC_MOE_IDENTITY, OLC_MOE_SWIGLU
    int OLC_MOE_PACKED, OLC_MOE_CODES, OLC_MOE_NBITS
    int OLC_MOE_SCALE_OUT, OLC_MOE_SCALE_IN
    int OLC_MOE_PATH_NONE, OLC_MOE_PATH_PANEL, OLC_MOE_PATH_DIRECT, OLC_MOE_PATH_INT8
    int OLC_MOE_ROUTE_SOFTMAX, OLC_MOE_ROUTE_TOPK, OLC_MOE_ROUTE_WEIGHTS

    ctypedef struct olc_moe_proj:
        int kind
        int64_t N, K, E
        int64_t bsize
        const float *packed
        const int8_t *codes
        const float *scales
        int64_t ssize
        int scale_mode, shift
        int64_t ngs
        const olc_nb_w *nb
        const olc_q8_w *q8
    ctypedef struct olc_moe_args:
        int64_t T, H, NI, E, k
        int routing, normalize, op, fused
        float alpha, beta, limit
        const float *x
        const float *logits
        const float *rweights
        const float *b1
        const float *b2
        const float *b3
        olc_moe_proj fc1, fc2, fc3
        float *out

    int64_t olc_moe_codes_size(int level, int64_t N, int64_t K)
    void olc_moe_pack_codes(int level, const int8_t *q, int64_t se, int64_t sn, int64_t sk,
                            int64_t E, int64_t N, int64_t K, int8_t *dst)
    void olc_moe_pack_scales_out(int level, const float *s, int64_t E, int64_t N, int64_t G,
                                 float *dst)
    void olc_moe_pack_scales_in(const float *s, int64_t E, int64_t K, int64_t P, int64_t G,
                                float *dst)
    int olc_moe_forward(int level, const olc_moe_args *p, int nthreads, int *path)
