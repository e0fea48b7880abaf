# cython: language_level=3
"""Mixture-of-experts core (see olc_moe.h for the scheme).

The adapter passes float32 tokens and router logits, float32 biases, and
each projection as a tuple:
- ``("float", packed, N, K, E)``: E float matrices packed by :func:`pack_float`;
- ``("quant", codes, scales, N, K, scale_mode, shift, ngs, E)``: E code
  matrices in the engine's panel order (one signed byte per code) and their
  float32 scale tables, E of each, back to back (olc_moe.h, olc_moe_proj).
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int8_t, int32_t, int64_t

cnp.import_array()

cdef extern from "moe/olc_moe.h" nogil:
    int olc_gemm_level(int level)
    int olc_sgemm_nr(int level)
    int64_t olc_sgemm_packed_size(int level, int64_t K, int64_t N)
    void olc_sgemm_pack_b(int level, int dtype, int64_t nb, const void *b,
                          const int64_t *b_offsets, int64_t rsb, int64_t csb, int64_t K,
                          int64_t N, float *dst, int nthreads)
    ctypedef struct olc_moe_proj:
        int64_t N, K
        const float *packed
        int64_t bsize
        const int8_t *codes
        const float *scales
        int64_t ssize
        int scale_mode, shift
        int64_t ngs
    ctypedef struct olc_moe_args:
        int64_t T, H, NI, E, k
        int normalize, op, fused
        float alpha, beta, limit
        const float *x
        const float *logits
        const float *b1
        const float *b2
        const float *b3
        olc_moe_proj fc1, fc2, fc3
        float *out
    ctypedef struct olc_moe_act_args:
        int op, fused, gated
        int64_t NI, ldh
        const float *h
        const float *b1
        const float *u
        const float *b3
        float *g
        float alpha, beta, limit
    int olc_moe_forward(int level, const olc_moe_args *p, int nthreads)
    int olc_moe_group(int64_t T, int64_t E, int64_t k, int normalize, const float *logits,
                      int64_t *count, int32_t *rows, float *rw)
    void olc_moe_activate(int level, const olc_moe_act_args *aa, int64_t m, int nthreads)
    void olc_moe_scatter(int level, float *out, int64_t H, const int32_t *rows,
                         const float *rw, const float *y, const float *b2, int64_t m,
                         int nthreads)
    int OLC_MOE_RELU, OLC_MOE_GELU, OLC_MOE_SILU, OLC_MOE_IDENTITY, OLC_MOE_SWIGLU
    int OLC_MOE_SCALE_OUT, OLC_MOE_SCALE_IN
    int OLC_GEMM_KC

RELU = OLC_MOE_RELU
GELU = OLC_MOE_GELU
SILU = OLC_MOE_SILU
IDENTITY = OLC_MOE_IDENTITY
SWIGLU = OLC_MOE_SWIGLU
SCALE_OUT = OLC_MOE_SCALE_OUT
SCALE_IN = OLC_MOE_SCALE_IN
KC = OLC_GEMM_KC


def level_used(int level):
    """The instruction-set level the engine runs at for a requested level."""
    return olc_gemm_level(level)


def panel_width(int level):
    """Columns of one packed panel (NR) at ``level``."""
    return olc_sgemm_nr(level)


def pack_float(int level, int dtype, cnp.ndarray w, int64_t E, int64_t N, int64_t K,
               int nthreads):
    """E output-major matrices ``w`` (E x N x K, float32/16/bf16, contiguous)
    packed as the engine's B = W^T (K x N), one after the other; returns the
    float32 buffer (64-byte aligned) and the floats per matrix."""
    cdef int64_t size = olc_sgemm_packed_size(level, K, N)
    raw = np.empty(E * size + 16, dtype=np.float32)
    start = (-raw.ctypes.data % 64) // 4
    cdef cnp.ndarray dst = raw[start:start + E * size]
    cdef cnp.ndarray offsets = np.arange(E, dtype=np.int64) * (N * K)
    cdef const void *pw = cnp.PyArray_DATA(w)
    cdef const int64_t *po = <const int64_t *>cnp.PyArray_DATA(offsets)
    cdef float *pd = <float *>cnp.PyArray_DATA(dst)
    with nogil:
        olc_sgemm_pack_b(level, dtype, E, pw, po, 1, K, K, N, pd, nthreads)
    return dst


cdef int fill_proj(olc_moe_proj *p, object spec) except -1:
    cdef cnp.ndarray packed, codes, scales
    p.packed = NULL
    p.codes = NULL
    p.scales = NULL
    p.bsize = p.ssize = p.ngs = 0
    p.scale_mode = p.shift = 0
    if spec is None:
        p.N = p.K = 0
        return 0
    kind = spec[0]
    if kind == "float":
        packed = spec[1]
        p.N, p.K = spec[2], spec[3]
        p.packed = <const float *>cnp.PyArray_DATA(packed)
        p.bsize = cnp.PyArray_SIZE(packed) // spec[4]
        return 0
    codes, scales = spec[1], spec[2]
    p.N, p.K = spec[3], spec[4]
    p.scale_mode, p.shift, p.ngs = spec[5], spec[6], spec[7]
    p.codes = <const int8_t *>cnp.PyArray_DATA(codes)
    p.scales = <const float *>cnp.PyArray_DATA(scales)
    p.bsize = cnp.PyArray_SIZE(codes) // spec[8]
    p.ssize = cnp.PyArray_SIZE(scales) // spec[8]
    return 0


cdef const float *data_or_null(object a):
    if a is None:
        return NULL
    return <const float *>cnp.PyArray_DATA(<cnp.ndarray>a)


def forward(int level, cnp.ndarray x, cnp.ndarray logits, int64_t k, bint normalize, int op,
            bint fused, float alpha, float beta, float limit, object fc1, object b1,
            object fc2, object b2, object fc3, object b3, int64_t I, cnp.ndarray out,
            int nthreads):
    """out (T x H float32) = the mixture of the k routed experts of each
    token of x (T x H float32); logits T x E float32."""
    cdef olc_moe_args args
    args.T = cnp.PyArray_DIM(x, 0)
    args.H = cnp.PyArray_DIM(x, 1)
    args.E = cnp.PyArray_DIM(logits, 1)
    args.NI = I
    args.k = k
    args.normalize = normalize
    args.op = op
    args.fused = fused
    args.alpha, args.beta, args.limit = alpha, beta, limit
    args.x = <const float *>cnp.PyArray_DATA(x)
    args.logits = <const float *>cnp.PyArray_DATA(logits)
    args.b1 = data_or_null(b1)
    args.b2 = data_or_null(b2)
    args.b3 = data_or_null(b3)
    args.out = <float *>cnp.PyArray_DATA(out)
    fill_proj(&args.fc1, fc1)
    fill_proj(&args.fc2, fc2)
    fill_proj(&args.fc3, fc3)
    cdef int status
    with nogil:
        status = olc_moe_forward(level, &args, nthreads)
    if status != 0:
        raise MemoryError("moe core: no memory for scratch buffers")


# -- steps, for an adapter that runs the projections itself ------------------


def group(cnp.ndarray logits, int64_t k, bint normalize):
    """Routing of T x E float32 logits: (count int64 [E + 1], rows int32
    [T k], weights float32 [T k]); expert e's tokens (increasing) and
    weights are rows[count[e]:count[e + 1]], weights[...]."""
    cdef int64_t T = cnp.PyArray_DIM(logits, 0), E = cnp.PyArray_DIM(logits, 1)
    cdef cnp.ndarray count = np.empty(E + 1, dtype=np.int64)
    cdef cnp.ndarray rows = np.empty(T * k, dtype=np.int32)
    cdef cnp.ndarray rw = np.empty(T * k, dtype=np.float32)
    cdef int status
    with nogil:
        status = olc_moe_group(T, E, k, normalize, <const float *>cnp.PyArray_DATA(logits),
                               <int64_t *>cnp.PyArray_DATA(count),
                               <int32_t *>cnp.PyArray_DATA(rows),
                               <float *>cnp.PyArray_DATA(rw))
    if status != 0:
        raise MemoryError("moe core: no memory for routing")
    return count, rows, rw


def activate(int level, int op, bint fused, cnp.ndarray h, object b1, object u, object b3,
             cnp.ndarray g, float alpha, float beta, float limit, int nthreads):
    """g (m x I) = activation of the FC1 rows h (m x R1, + b1 [R1]),
    gated by the FC3 rows u (m x I, + b3 [I]) when u is given."""
    cdef olc_moe_act_args aa
    aa.op = op
    aa.fused = fused
    aa.gated = u is not None
    aa.NI = cnp.PyArray_DIM(g, 1)
    aa.ldh = cnp.PyArray_DIM(h, 1)
    aa.h = <const float *>cnp.PyArray_DATA(h)
    aa.b1 = data_or_null(b1)
    aa.u = data_or_null(u)
    aa.b3 = data_or_null(b3)
    aa.g = <float *>cnp.PyArray_DATA(g)
    aa.alpha, aa.beta, aa.limit = alpha, beta, limit
    cdef int64_t m = cnp.PyArray_DIM(g, 0)
    with nogil:
        olc_moe_activate(level, &aa, m, nthreads)


def scatter(int level, cnp.ndarray out, cnp.ndarray rows, cnp.ndarray rw, cnp.ndarray y,
            object b2, int nthreads):
    """out[rows[r]] += rw[r] * (y[r] + b2) (out T x H, y m x H float32)."""
    cdef int64_t m = cnp.PyArray_DIM(y, 0), H = cnp.PyArray_DIM(y, 1)
    cdef float *po = <float *>cnp.PyArray_DATA(out)
    cdef const int32_t *pr = <const int32_t *>cnp.PyArray_DATA(rows)
    cdef const float *pw = <const float *>cnp.PyArray_DATA(rw)
    cdef const float *py = <const float *>cnp.PyArray_DATA(y)
    cdef const float *pb = data_or_null(b2)
    with nogil:
        olc_moe_scatter(level, po, H, pr, pw, py, pb, m, nthreads)
