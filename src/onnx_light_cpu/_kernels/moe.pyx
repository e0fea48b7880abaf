# cython: language_level=3
"""Mixture-of-experts core (see olc_moe.h for the scheme).

The adapter prepares each projection's E expert matrices once as a
:class:`Projection`:
- :func:`pack_float`: float matrices in the GEMM engine's panels (MoE);
- :func:`pack_codes`: signed int8 codes and their scales, for the core's
  own panel decoder (QMoE);
- :func:`prepare_nbits`: MatMulNBits matrices, for its float or int8
  engine (QMoE);
then runs the whole operator with :func:`forward` on float32 tokens,
router logits and float32 biases.
"""

import numpy as np

cimport numpy as cnp
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.stdint cimport int8_t, int64_t, uint8_t
from libc.string cimport memset

from olc_gemm cimport olc_gemm_level, olc_sgemm_nr, olc_sgemm_pack_b, olc_sgemm_packed_size
from olc_moe cimport (OLC_MOE_CODES, OLC_MOE_GELU, OLC_MOE_IDENTITY, OLC_MOE_NBITS,
                      OLC_MOE_PACKED, OLC_MOE_PATH_DIRECT, OLC_MOE_PATH_INT8,
                      OLC_MOE_PATH_NONE, OLC_MOE_RELU, OLC_MOE_ROUTE_SOFTMAX,
                      OLC_MOE_ROUTE_TOPK, OLC_MOE_ROUTE_WEIGHTS, OLC_MOE_SCALE_IN, OLC_MOE_SCALE_OUT,
                      OLC_MOE_SILU, OLC_MOE_SWIGLU, olc_moe_args, olc_moe_codes_size,
                      olc_moe_forward, olc_moe_pack_codes, olc_moe_pack_scales_in,
                      olc_moe_pack_scales_out, olc_moe_proj)
from olc_matmul_nbits cimport (olc_nb_w, olc_q8_block_bytes, olc_q8_prepare, olc_q8_tiles,
                               olc_q8_w)
from olc_pool cimport olc_pool_import

# Path labels of the MatMulNBits engines, as the matmul_nbits core names them.
from onnx_light_cpu._kernels.matmul_nbits import INT8_LABELS, LEVEL_NAMES

cnp.import_array()
olc_pool_import()

RELU = OLC_MOE_RELU
GELU = OLC_MOE_GELU
SILU = OLC_MOE_SILU
IDENTITY = OLC_MOE_IDENTITY
SWIGLU = OLC_MOE_SWIGLU
# routing (see olc_moe_route): MoE's; QMoE's from the logits; with router weights
ROUTE_SOFTMAX = OLC_MOE_ROUTE_SOFTMAX
ROUTE_TOPK = OLC_MOE_ROUTE_TOPK
ROUTE_WEIGHTS = OLC_MOE_ROUTE_WEIGHTS



def level_used(int level):
    """The instruction-set level the float engine runs at for a requested level."""
    return olc_gemm_level(level)


cdef class Projection:
    """The E experts' matrices of one projection, ready for :func:`forward`;
    ``nbytes`` counts the arrays it holds."""

    cdef olc_moe_proj p
    cdef olc_nb_w *nbw
    cdef olc_q8_w *q8w
    cdef object keep
    cdef readonly int64_t nbytes
    cdef readonly int bits

    def __cinit__(self):
        memset(&self.p, 0, sizeof(self.p))
        self.nbw = NULL
        self.q8w = NULL

    def __dealloc__(self):
        PyMem_Free(self.nbw)
        PyMem_Free(self.q8w)


cdef cnp.ndarray _aligned_floats(int64_t n):
    """n float32 on a 64-byte boundary, as the engine's own scratch."""
    raw = np.empty(n + 16, dtype=np.float32)
    start = (-raw.ctypes.data % 64) // 4
    return raw[start:start + n]


def pack_float(cnp.ndarray w, int dtype, int level, int threads):
    """E output-major matrices ``w`` (E x N x K, float32/16/bf16,
    contiguous; dtype its TensorProto code) packed as the engine's B = W^T
    (K x N), one after the other."""
    cdef int64_t E = w.shape[0], N = w.shape[1], K = w.shape[2]
    cdef int64_t size = olc_sgemm_packed_size(level, K, N)
    cdef cnp.ndarray dst = _aligned_floats(E * size)
    cdef cnp.ndarray offsets = np.arange(E, dtype=np.int64) * (N * K)
    cdef const void *pw = cnp.PyArray_DATA(w)
    cdef const int64_t *po = <const int64_t *>cnp.PyArray_DATA(offsets)
    cdef float *pd = <float *>cnp.PyArray_DATA(dst)
    with nogil:
        olc_sgemm_pack_b(level, dtype, E, pw, po, 1, K, K, N, pd, threads)
    cdef Projection proj = Projection()
    proj.p.kind = OLC_MOE_PACKED
    proj.p.N, proj.p.K, proj.p.E = N, K, E
    proj.p.packed = pd
    proj.p.bsize = size
    proj.keep = dst
    proj.nbytes = dst.nbytes
    return proj


def pack_codes(cnp.ndarray q, cnp.ndarray scales, int64_t block, bint input_major, int level):
    """Quantized experts for the core's panel decoder: ``q`` int8 codes
    [E, N, K] (any strides; N outputs, K inputs) with their scales, float32:
    output-major [E, N] (block 0: one scale a row) or [E, N, ceil(K /
    block)]; input-major (``input_major``: scales along the outputs)
    [E, K, ceil(N / block)].  The codes go into the panel order of the
    engine at ``level``."""
    cdef int64_t E = q.shape[0], N = q.shape[1], K = q.shape[2]
    cdef int64_t nr = olc_sgemm_nr(level), npad = (N + nr - 1) // nr * nr
    cdef int64_t size = olc_moe_codes_size(level, N, K), groups, shift
    cdef cnp.ndarray codes = np.empty(E * size, dtype=np.int8)
    cdef const int8_t *pq = <const int8_t *>cnp.PyArray_DATA(q)
    cdef int64_t se = q.strides[0], sn = q.strides[1], sk = q.strides[2]
    with nogil:
        olc_moe_pack_codes(level, pq, se, sn, sk, E, N, K, <int8_t *>cnp.PyArray_DATA(codes))
    cdef cnp.ndarray s32 = np.ascontiguousarray(scales, dtype=np.float32)
    cdef cnp.ndarray table
    cdef Projection proj = Projection()
    if input_major:
        shift = int(block).bit_length() - 1
        groups = (npad + block - 1) // block
        table = np.empty(E * K * groups, dtype=np.float32)
        olc_moe_pack_scales_in(<const float *>cnp.PyArray_DATA(s32), E, K, s32.shape[2], groups,
                               <float *>cnp.PyArray_DATA(table))
        proj.p.scale_mode = OLC_MOE_SCALE_IN
    else:
        shift = 62 if block == 0 else int(block).bit_length() - 1  # 62: one group, all of K
        groups = 1 if block == 0 else s32.shape[2]
        table = np.empty(E * npad * groups, dtype=np.float32)
        olc_moe_pack_scales_out(level, <const float *>cnp.PyArray_DATA(s32), E, N, groups,
                                <float *>cnp.PyArray_DATA(table))
        proj.p.scale_mode = OLC_MOE_SCALE_OUT
    proj.p.kind = OLC_MOE_CODES
    proj.p.N, proj.p.K, proj.p.E = N, K, E
    proj.p.codes = <const int8_t *>cnp.PyArray_DATA(codes)
    proj.p.bsize = size
    proj.p.scales = <const float *>cnp.PyArray_DATA(table)
    proj.p.ssize = table.size // E if E else 0
    proj.p.shift = shift
    proj.p.ngs = groups
    proj.keep = (codes, table)
    proj.nbytes = codes.nbytes + table.nbytes
    return proj


def prepare_nbits(cnp.ndarray b, cnp.ndarray scales, object zp, int bits, int64_t block,
                  int64_t K, bint int8):
    """E MatMulNBits matrices: ``b`` uint8 codes [E, N, ceil(K / block),
    block * bits / 8] (unsigned codes), ``scales`` float32 [E, N, ceil(K /
    block)] and ``zp`` None (implicit zero point 2^(bits - 1)) or float32
    integers in [0, 2^bits) of the scales' shape, all C-contiguous and kept
    unchanged while the result lives.  ``int8``: the int8 engine (the
    activations quantized, as ONNX Runtime's accuracy level 4) for every
    expert whose scales are finite; else the float engine."""
    cdef int64_t E = b.shape[0], N = b.shape[1]
    cdef int64_t nb = (K + block - 1) // block, blob = block * bits // 8
    if (not b.flags.c_contiguous or b.dtype != np.uint8 or b.size != E * N * nb * blob
            or not scales.flags.c_contiguous or scales.dtype != np.float32
            or scales.size != E * N * nb
            or (zp is not None and (not zp.flags.c_contiguous or zp.dtype != np.float32
                                    or zp.size != E * N * nb))):
        raise ValueError(f"moe core: b must be uint8 [E, N, {nb}, {blob}], scales and zero "
                         f"points float32 [E, N, {nb}], C-contiguous")
    cdef Projection proj = Projection()
    proj.nbw = <olc_nb_w *>PyMem_Malloc(max(E, 1) * sizeof(olc_nb_w))
    proj.q8w = <olc_q8_w *>PyMem_Malloc(max(E, 1) * sizeof(olc_q8_w))
    if proj.nbw == NULL or proj.q8w == NULL:
        raise MemoryError("moe core: no memory for the expert descriptors")
    memset(proj.nbw, 0, max(E, 1) * sizeof(olc_nb_w))
    memset(proj.q8w, 0, max(E, 1) * sizeof(olc_q8_w))
    keep = [b, scales, zp]
    proj.nbytes = b.nbytes + scales.nbytes + (0 if zp is None else zp.nbytes)
    # the int8 engine's blocks: the weight block, at most 256 elements
    cdef int64_t ablock = min(block, 256), anblocks = nb * (block // ablock), tiles = 0
    cdef const uint8_t *pb = <const uint8_t *>cnp.PyArray_DATA(b)
    cdef const float *ps = <const float *>cnp.PyArray_DATA(scales)
    cdef const float *pz = NULL if zp is None else <const float *>cnp.PyArray_DATA(<cnp.ndarray>zp)
    cdef olc_nb_w *w
    cdef olc_q8_w *q
    cdef cnp.ndarray codes, qs, qz
    cdef int64_t e
    for e in range(E):
        w = proj.nbw + e
        w.b = pb + e * N * nb * blob
        w.scales = ps + e * N * nb
        w.zp = NULL if pz == NULL else pz + e * N * nb
        w.zp_default = float(1 << (bits - 1))
        w.K, w.N, w.nb, w.blob, w.block, w.bits = K, N, nb, blob, block, bits
        # weights that are not finite keep per-element float semantics
        w.finite = bool(np.isfinite(scales[e]).all())
        if not (int8 and w.finite):
            continue
        tiles = olc_q8_tiles(N)
        codes = np.empty(tiles * anblocks * olc_q8_block_bytes(ablock, bits == 4),
                         dtype=np.uint8)
        qs = np.empty(tiles * anblocks * 16, dtype=np.float32)
        qz = np.empty(tiles * anblocks * 16, dtype=np.uint8)
        with nogil:
            olc_q8_prepare(w, ablock, <uint8_t *>cnp.PyArray_DATA(codes),
                           <float *>cnp.PyArray_DATA(qs), <uint8_t *>cnp.PyArray_DATA(qz))
        q = proj.q8w + e
        q.codes = <const uint8_t *>cnp.PyArray_DATA(codes)
        q.scales = <const float *>cnp.PyArray_DATA(qs)
        q.zp = <const uint8_t *>cnp.PyArray_DATA(qz)
        q.K, q.N, q.nb, q.block, q.tiles = K, N, anblocks, ablock, tiles
        q.split = bits == 8
        q.packed4 = bits == 4
        keep += [codes, qs, qz]
        proj.nbytes += codes.nbytes + qs.nbytes + qz.nbytes
    proj.p.kind = OLC_MOE_NBITS
    proj.p.N, proj.p.K, proj.p.E = N, K, E
    proj.p.nb = proj.nbw
    proj.p.q8 = proj.q8w
    proj.bits = bits
    proj.keep = keep
    return proj


cdef const float *data_or_null(object a):
    if a is None:
        return NULL
    return <const float *>cnp.PyArray_DATA(<cnp.ndarray>a)


def forward(cnp.ndarray x, cnp.ndarray logits, object rweights, Projection fc1, object b1,
            Projection fc2, object b2, Projection fc3, object b3, cnp.ndarray out, int64_t k,
            int routing, bint normalize, int op, bint fused, float alpha, float beta,
            float limit, int level, int threads):
    """out (T x H float32) = the mixture of the k routed experts of each
    token of x (T x H float32); logits T x E float32; rweights T x E
    float32 for ROUTE_WEIGHTS, else None; routing one of ROUTE_*; biases
    expert-major float32 or None; fc3 None when there is no FC3.  Returns the path label
    of the MatMulNBits engine of the last FC1 product (None for the other
    projections or when no token ran)."""
    cdef olc_moe_args args
    memset(&args, 0, sizeof(args))
    args.T = cnp.PyArray_DIM(x, 0)
    args.H = cnp.PyArray_DIM(x, 1)
    args.E = cnp.PyArray_DIM(logits, 1)
    args.NI = fc2.p.K
    args.k = k
    args.routing = routing
    args.normalize = normalize
    args.op = op
    args.fused = fused
    args.alpha, args.beta, args.limit = alpha, beta, limit
    args.x = <const float *>cnp.PyArray_DATA(x)
    args.logits = <const float *>cnp.PyArray_DATA(logits)
    args.rweights = data_or_null(rweights)
    args.b1 = data_or_null(b1)
    args.b2 = data_or_null(b2)
    args.b3 = data_or_null(b3)
    args.out = <float *>cnp.PyArray_DATA(out)
    args.fc1 = fc1.p
    args.fc2 = fc2.p
    if fc3 is not None:
        args.fc3 = fc3.p
    cdef int status, path = OLC_MOE_PATH_NONE
    with nogil:
        status = olc_moe_forward(level, &args, threads, &path)
    if status != 0:
        raise MemoryError("moe core: no memory for scratch buffers")
    if path == OLC_MOE_PATH_NONE:
        return None
    if path >= OLC_MOE_PATH_INT8:
        return INT8_LABELS[path - OLC_MOE_PATH_INT8]
    route = "direct" if path == OLC_MOE_PATH_DIRECT else "panel"
    return f"int{fc1.bits}_{route}_{LEVEL_NAMES[olc_gemm_level(level)]}"
