# cython: language_level=3
"""Gather of block-quantized rows (the core of com.microsoft
GatherBlockQuantized).

The adapter passes validated C-contiguous arrays; this module picks the row
function for the bit width, output type and SIMD level once and splits
whole output rows into tasks for the worker pool, so the result does not
depend on the thread count.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t
from olc_block_codes cimport olc_bc_zp_bytes
from olc_gather_block_quantized cimport (OLC_GBQT_MAX_RANK, olc_build_level, olc_gbq_args,
                                         olc_gbq_fn, olc_gbq_level, olc_gbq_select,
                                         olc_gbqt_args, olc_gbqt_fn, olc_gbqt_select)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()


def zero_point_bytes(int64_t groups, int bits):
    """Bytes of one row's packed zero points for ``groups`` blocks."""
    return olc_bc_zp_bytes(groups, bits)

def level_used(int bits, int level):
    """The instruction-set level the row function for bits runs at."""
    return olc_gbq_level(bits, level)


cdef struct _GbqJob:
    olc_gbq_fn fn
    olc_gbq_args *a
    int64_t rows, nblocks


cdef void _gbq_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _GbqJob *job = <_GbqJob *>arg
    job.fn(job.a, job.rows * t // job.nblocks, job.rows * (t + 1) // job.nblocks)


def apply(cnp.ndarray data, cnp.ndarray idx, cnp.ndarray scales, zp, cnp.ndarray out,
          int64_t V, int64_t inner, int64_t block, int bits, int dtype, int level, int threads):
    """Dequantize the rows of data selected by idx into out.

    data is [V * inner, P] bytes, scales [V * inner, G] and out
    [idx.size * inner, D] of element type dtype (TensorProto FLOAT or
    FLOAT16), zp
    [V * inner, zp_bytes] bytes or None, idx int32/int64 (any shape); all
    C-contiguous.
    """
    cdef olc_gbq_fn fn = olc_gbq_select(bits, dtype, level)
    if fn == NULL:
        raise ValueError(f"gather_bq core: no function for bits={bits}, dtype={dtype}")
    cdef olc_gbq_args a
    cdef int nd = cnp.PyArray_NDIM(data)
    a.data = <const uint8_t *>cnp.PyArray_DATA(data)
    a.idx = cnp.PyArray_DATA(idx)
    a.scales = cnp.PyArray_DATA(scales)
    a.zp = NULL
    if zp is not None:
        a.zp = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>zp)
    a.out = cnp.PyArray_DATA(out)
    a.V = V
    a.inner = inner
    a.P = cnp.PyArray_DIM(data, nd - 1)
    a.D = a.P * (8 // bits)
    a.G = cnp.PyArray_DIM(scales, cnp.PyArray_NDIM(scales) - 1)
    a.zp_bytes = 0 if zp is None else cnp.PyArray_DIM(<cnp.ndarray>zp, nd - 1)
    a.block = block
    a.idx64 = cnp.PyArray_TYPE(idx) == cnp.NPY_INT64
    a.bits = bits
    a.dtype = dtype
    cdef int64_t rows = cnp.PyArray_SIZE(idx) * inner
    cdef _GbqJob job
    if rows == 0 or a.D == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            fn(&a, 0, rows)
        return
    # Contiguous blocks of rows, a few per thread so the caller can take over
    # the share of a worker that does not wake.
    job.fn, job.a, job.rows, job.nblocks = fn, &a, rows, min(rows, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _gbq_task, &job, threads)


MAX_TYPED_RANK = OLC_GBQT_MAX_RANK


def typed_level_used(int level):
    """The instruction-set level typed data runs at."""
    return olc_build_level(level)


cdef struct _GbqtJob:
    olc_gbqt_fn fn
    olc_gbqt_args *a
    int64_t rows, nblocks


cdef void _gbqt_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _GbqtJob *job = <_GbqtJob *>arg
    job.fn(job.a, job.rows * t // job.nblocks, job.rows * (t + 1) // job.nblocks)


def apply_typed(cnp.ndarray data, cnp.ndarray idx, cnp.ndarray scales, zp, cnp.ndarray lut,
                cnp.ndarray out, tuple sstrides, int g, int q, int64_t block, int dtype,
                int level, int threads):
    """Dequantize the slices of typed data (one byte an element) selected
    by idx along axis g into out (data.shape[:g] + idx.shape +
    data.shape[g+1:], element type dtype: TensorProto FLOAT, FLOAT16 or
    BFLOAT16).

    lut holds 256 float32 values (byte -> value); scales have data's rank,
    the quantize axis q in blocks of block, sstrides the scale offset step
    of each data axis (0 where the scales broadcast); zp (uint8 bytes of
    the scales' shape) or None.  All C-contiguous, rank <= MAX_TYPED_RANK.
    """
    cdef olc_gbqt_args a
    cdef int r = cnp.PyArray_NDIM(data), k
    cdef int64_t B = 1
    a.data = <const uint8_t *>cnp.PyArray_DATA(data)
    a.idx = cnp.PyArray_DATA(idx)
    a.scales = cnp.PyArray_DATA(scales)
    a.zp = NULL
    if zp is not None:
        a.zp = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>zp)
    a.lut = <const float *>cnp.PyArray_DATA(lut)
    a.out = cnp.PyArray_DATA(out)
    a.rank, a.g, a.q, a.block, a.dtype = r, g, q, block, dtype
    a.idx64 = cnp.PyArray_TYPE(idx) == cnp.NPY_INT64
    a.n_idx = cnp.PyArray_SIZE(idx)
    a.M = 1
    for k in range(r):
        a.dims[k] = cnp.PyArray_DIM(data, k)
        a.sstride[k] = sstrides[k]
        if k < g:
            a.M *= a.dims[k]
        elif k > g:
            B *= a.dims[k]
    a.A = a.dims[g]
    a.L = a.dims[r - 1] if g < r - 1 else 1
    a.J = B // a.L if a.L else 0
    cdef int64_t rows = a.M * a.n_idx
    if rows == 0 or B == 0:
        return
    cdef _GbqtJob job
    cdef olc_gbqt_fn fn = olc_gbqt_select(level)
    if threads <= 1 or rows < 2:
        with nogil:
            fn(&a, 0, rows)
        return
    job.fn, job.a, job.rows, job.nblocks = fn, &a, rows, min(rows, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _gbqt_task, &job, threads)
