# cython: language_level=3
"""Rotary position embedding (RoPE) core, shared by RotaryEmbedding (ai.onnx
and com.microsoft) and GroupQueryAttention's ``do_rotary``.

    rotate(x, cos_cache, sin_cache, positions, out, interleaved, rotary_dim,
           level, threads)

- ``x``, ``out``: 4-D [B, S, N, H] arrays of one dtype (float32, float16 or
  ml_dtypes.bfloat16), any strides that are whole elements, the last axis
  contiguous; a (B, N, S, H) buffer is passed as its transposed view.
  ``out`` may be ``x`` itself (in place).
- ``cos_cache``, ``sin_cache``: 2-D C-contiguous [P, rotary_dim / 2], of x's
  dtype or float32.
- ``positions``: C-contiguous int64 [B, S]; every value must lie in
  [0, P): the caller validates them, the core trusts them.
- ``rotary_dim``: even, 2 <= rotary_dim <= H.  Non-interleaved pairs are
  (i, i + rotary_dim/2), interleaved ones (2i, 2i+1); elements h >=
  rotary_dim are copied unchanged.
- float32 arithmetic (no FMA contraction), one rounding at the store, so
  every SIMD level gives the same bits.  A few contiguous blocks of
  (b, s, n) rows per thread go to the worker pool; results do not depend on
  the count.

The function picks the level's row function once, outside the parallel
loop.  ``level_used(level)`` is the level that runs.
"""

import numpy as np
from ml_dtypes import bfloat16

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_rotary cimport (
    OLC_BFLOAT16, OLC_FLOAT, OLC_FLOAT16, olc_rope_args, olc_rope_fn, olc_rope_level,
    olc_rope_select)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

# NumPy dtype -> element type code (onnx.TensorProto numbering).
_CODES = {np.dtype(np.float32): OLC_FLOAT, np.dtype(np.float16): OLC_FLOAT16,
          np.dtype(bfloat16): OLC_BFLOAT16}


def level_used(int level):
    """The instruction-set level the rotation runs at."""
    return olc_rope_level(level)


cdef struct _RopeJob:
    olc_rope_fn fn
    olc_rope_args *p
    int64_t rows, nblocks


cdef void _rope_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _RopeJob *job = <_RopeJob *>arg
    job.fn(job.p, job.rows * t // job.nblocks, job.rows * (t + 1) // job.nblocks)


def rotate(cnp.ndarray x, cnp.ndarray cos_cache, cnp.ndarray sin_cache, cnp.ndarray positions,
           cnp.ndarray out, bint interleaved, int rotary_dim, int level, int threads):
    """Rotate x into out (see the module docstring for the contract)."""
    xtype = _CODES.get(x.dtype)
    ctype = _CODES.get(cos_cache.dtype)
    if xtype is None or out.dtype != x.dtype:
        raise TypeError(f"rotary core: x and out must share a float dtype, got {x.dtype}, {out.dtype}")
    if cos_cache.dtype != sin_cache.dtype or (ctype != xtype and ctype != OLC_FLOAT):
        raise TypeError(f"rotary core: caches must be {x.dtype} or float32, "
                        f"got {cos_cache.dtype}, {sin_cache.dtype}")
    if x.ndim != 4 or out.ndim != 4 or (<object>x).shape != (<object>out).shape:
        raise ValueError("rotary core: x and out must be 4-D arrays of one shape")
    cdef Py_ssize_t isz = x.itemsize
    cdef int64_t B = x.shape[0], S = x.shape[1], N = x.shape[2], H = x.shape[3]
    cdef int64_t half = rotary_dim // 2
    if rotary_dim < 2 or rotary_dim % 2 or rotary_dim > H:
        raise ValueError(f"rotary core: rotary_dim {rotary_dim} must be even, in [2, {H}]")
    for a in (x, out):
        for d in range(4):
            if (<object>a).strides[d] % isz:
                raise ValueError("rotary core: strides must be whole elements")
        if H > 1 and (<object>a).strides[3] != isz:
            raise ValueError("rotary core: the last axis must be contiguous")
    for c in (cos_cache, sin_cache):
        if c.ndim != 2 or c.shape[1] != half or not c.flags.c_contiguous:
            raise ValueError(f"rotary core: caches must be C-contiguous [P, {half}]")
    if cos_cache.shape[0] != sin_cache.shape[0]:
        raise ValueError("rotary core: cos and sin caches differ in length")
    if (positions.dtype != np.int64 or positions.ndim != 2 or positions.shape[0] != B
            or positions.shape[1] != S or not positions.flags.c_contiguous):
        raise ValueError(f"rotary core: positions must be C-contiguous int64 [{B}, {S}]")
    cdef olc_rope_fn fn = olc_rope_select(xtype, ctype, interleaved, level)
    cdef olc_rope_args p
    p.x = cnp.PyArray_DATA(x)
    p.y = cnp.PyArray_DATA(out)
    p.cos = cnp.PyArray_DATA(cos_cache)
    p.sin = cnp.PyArray_DATA(sin_cache)
    p.pos = <const int64_t *>cnp.PyArray_DATA(positions)
    p.S, p.N, p.H, p.half = S, N, H, half
    p.xs_b, p.xs_s, p.xs_n = x.strides[0] // isz, x.strides[1] // isz, x.strides[2] // isz
    p.ys_b, p.ys_s, p.ys_n = out.strides[0] // isz, out.strides[1] // isz, out.strides[2] // isz
    cdef int64_t rows = B * S * N
    cdef _RopeJob job
    if rows == 0:
        return
    if threads <= 1 or rows < 2:
        with nogil:
            fn(&p, 0, rows)
        return
    job.fn, job.p, job.rows, job.nblocks = fn, &p, rows, min(rows, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _rope_task, &job, threads)
