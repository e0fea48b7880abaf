# cython: language_level=3
"""Matrix multiplication cores (see olc_gemm.h for the scheme).

The adapter passes arrays, element strides, the ONNX element type
(``dtype``, a TensorProto code), the SIMD level and a thread count; batches
come as int64 arrays of element offsets.  Every function releases the GIL
for the arithmetic.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_gemm cimport (olc_fma_peak, olc_gemm_generic, olc_gemm_level, olc_sgemm,
                       olc_sgemm_pack_b, olc_sgemm_packed_size, olc_sgemv)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()


def level_used(int level):
    """The instruction-set level the engine runs at for a requested level."""
    return olc_gemm_level(level)


def packed_size(int64_t K, int64_t N, int level):
    """float32 elements of one packed K x N matrix B at ``level``."""
    return olc_sgemm_packed_size(level, K, N)


def pack_b(cnp.ndarray b, cnp.ndarray b_offsets, cnp.ndarray dst, int64_t rsb, int64_t csb,
           int64_t K, int64_t N, int dtype, int level, int threads):
    """Packs len(b_offsets) matrices of ``b`` (float32/16/bf16) into ``dst``
    (float32, at least len(b_offsets) * packed_size(K, N, level))."""
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef const int64_t *off = <const int64_t *>cnp.PyArray_DATA(b_offsets)
    cdef int64_t nb = cnp.PyArray_SIZE(b_offsets)
    cdef float *pd = <float *>cnp.PyArray_DATA(dst)
    if cnp.PyArray_SIZE(dst) < nb * olc_sgemm_packed_size(level, K, N):
        raise ValueError("gemm core: packing buffer too small")
    with nogil:
        olc_sgemm_pack_b(level, dtype, nb, pb, off, rsb, csb, K, N, pd, threads)


def sgemm(cnp.ndarray a, cnp.ndarray a_offsets, object packed, cnp.ndarray b_index,
          cnp.ndarray b, cnp.ndarray b_offsets, cnp.ndarray c, int64_t rsa, int64_t csa,
          int64_t rsb, int64_t csb, int64_t M, int64_t N, int64_t K, float alpha,
          bint accumulate, int dtype, int level, int threads):
    """c[q] = alpha a[q] b[q] (+ c[q]) for float32/16/bf16 operands; c is a
    float32 array of len(a_offsets) row-major M x N matrices.  B comes
    pre-packed (``packed``: matrix q is number b_index[q]) or, with
    ``packed`` None, raw (matrix q at element b_offsets[q], strides rsb, csb)."""
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const int64_t *aoff = <const int64_t *>cnp.PyArray_DATA(a_offsets)
    cdef const int64_t *bidx = <const int64_t *>cnp.PyArray_DATA(b_index)
    cdef const int64_t *boff = <const int64_t *>cnp.PyArray_DATA(b_offsets)
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef const float *pp = NULL
    if packed is not None:
        pp = <const float *>cnp.PyArray_DATA(<cnp.ndarray>packed)
    cdef float *pc = <float *>cnp.PyArray_DATA(c)
    cdef int64_t batch = cnp.PyArray_SIZE(a_offsets)
    cdef int status
    with nogil:
        status = olc_sgemm(level, dtype, batch, pa, aoff, rsa, csa, pp, bidx, pb, boff, rsb, csb,
                           M, N, K, pc, N, M * N, alpha, accumulate, threads)
    if status != 0:
        raise MemoryError("gemm core: no memory for packing buffers")


def fill_scaled(cnp.ndarray c, cnp.ndarray out, float beta):
    """out (M, N, float32, C-contiguous) = beta * c, for a float32 c of up to
    two dimensions broadcast to (M, N) (Gemm's C): each element one float32
    product, as numpy.multiply rounds it."""
    if out.ndim != 2 or out.dtype.num != cnp.NPY_FLOAT32 or not cnp.PyArray_IS_C_CONTIGUOUS(out):
        raise ValueError("gemm core: out is a C-contiguous float32 matrix")
    if c.dtype.num != cnp.NPY_FLOAT32 or not cnp.PyArray_ISNOTSWAPPED(c) or c.ndim > 2:
        raise ValueError("gemm core: c is a native float32 array of up to two dimensions")
    cdef int64_t M = out.shape[0], N = out.shape[1], i, j
    cdef int64_t rows = c.shape[0] if c.ndim == 2 else 1
    cdef int64_t cols = c.shape[c.ndim - 1] if c.ndim >= 1 else 1
    if rows not in (1, M) or cols not in (1, N):
        raise ValueError("gemm core: c does not broadcast to out")
    if any(st % 4 for st in (<object>c).strides):
        raise ValueError("gemm core: c's strides are not whole floats")
    # strides in elements, 0 along a broadcast axis
    cdef int64_t rs = c.strides[0] // 4 if c.ndim == 2 and rows > 1 else 0
    cdef int64_t cs = c.strides[c.ndim - 1] // 4 if c.ndim >= 1 and cols > 1 else 0
    cdef const float *pc = <const float *>cnp.PyArray_DATA(c)
    cdef float *po = <float *>cnp.PyArray_DATA(out)
    with nogil:
        for i in range(M):
            for j in range(N):
                po[i * N + j] = beta * pc[i * rs + j * cs]


def sgemv(cnp.ndarray a, cnp.ndarray b, cnp.ndarray c, int64_t rsb, int64_t K, int64_t N,
          float alpha, bint accumulate, int level, int threads):
    """c[0:N] = alpha a[0:K] B (+ c) for float32 B with rows rsb apart."""
    cdef const float *pa = <const float *>cnp.PyArray_DATA(a)
    cdef const float *pb = <const float *>cnp.PyArray_DATA(b)
    cdef float *pc = <float *>cnp.PyArray_DATA(c)
    with nogil:
        olc_sgemv(level, K, N, pa, pb, rsb, pc, alpha, accumulate, threads)


def gemm_generic(cnp.ndarray a, cnp.ndarray a_offsets, cnp.ndarray b, cnp.ndarray b_offsets,
                 cnp.ndarray c, int64_t rsa, int64_t csa, int64_t M, int64_t N, int64_t K,
                 int dtype, int level, int threads):
    """c[q] = a[q] b[q] for double and the integer types (B row-major)."""
    cdef const void *pa = cnp.PyArray_DATA(a)
    cdef const void *pb = cnp.PyArray_DATA(b)
    cdef const int64_t *aoff = <const int64_t *>cnp.PyArray_DATA(a_offsets)
    cdef const int64_t *boff = <const int64_t *>cnp.PyArray_DATA(b_offsets)
    cdef void *pc = cnp.PyArray_DATA(c)
    cdef int64_t batch = cnp.PyArray_SIZE(a_offsets)
    cdef int status
    with nogil:
        status = olc_gemm_generic(level, dtype, batch, pa, aoff, rsa, csa, pb, boff, M, N, K,
                                  pc, threads)
    if status != 0:
        raise TypeError(f"gemm core: no function for element type {dtype}")


cdef struct _PeakJob:
    int level
    int64_t iters
    float *sinks


cdef void _peak_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _PeakJob *job = <_PeakJob *>arg
    olc_fma_peak(job.level, job.iters, job.sinks + t)


def fma_peak_gflops(int64_t iters, int level, int threads):
    """GFLOP/s of ``threads`` tasks (one a pool thread, when every thread
    wakes) each running ``iters`` iterations of a register-only loop of
    independent FMA chains at ``level`` (AVX-512: 24 chains x 16 lanes,
    AVX2: 12 x 8): the machine's float32 FMA peak, 2 flops per lane."""
    import time
    if olc_gemm_level(level) == 0:
        raise ValueError("fma_peak_gflops needs the avx2 or avx512 level")
    cdef cnp.ndarray sinks = np.zeros(threads, dtype=np.float32)  # keeps the chains live
    cdef _PeakJob job
    job.level, job.iters = level, iters
    job.sinks = <float *>cnp.PyArray_DATA(sinks)
    cdef int per_iter = olc_fma_peak(level, 0, job.sinks)  # FMAs an iteration
    start = time.perf_counter()
    with nogil:
        olc_parallel_for(threads, _peak_task, &job, threads)
    elapsed = time.perf_counter() - start
    return 2.0 * per_iter * iters * threads / elapsed / 1e9
