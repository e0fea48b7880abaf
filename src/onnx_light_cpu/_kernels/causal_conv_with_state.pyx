# cython: language_level=3
"""Depthwise causal convolution with a carried state (CausalConvWithState).

    causal_conv(x, state, w, bias, y, present, dilation, silu, channels_last,
                dtype, level, threads)

- channels-first: x, y [B, C, L]; state, present [B, C, SL];
  channels-last: x, y [B, L, C]; state, present [B, SL, C];
  SL = (K - 1) * dilation; all C-contiguous, of one element type
  (``dtype``: ONNX FLOAT, FLOAT16 or BFLOAT16).  ``state`` may be None
  (zeros).
- w: float32 [K, C] (tap-major, so a vector of channels reads one row);
  bias: float32 [C] or None.
- y = act(bias + sum_j w_j v[t + SL - (K-1-j) dilation]) over the virtual
  concatenation v = [state, x], present = the last SL positions of v; act is
  SiLU when ``silu``.

Tasks are (b, c) rows channels-first and (b, 8 time steps)
channels-last; the worker pool gets a few contiguous ranges of tasks per
thread, so results do not depend on the count.  The level's function is
picked once, outside the parallel loop.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t

from olc_causal_conv_with_state cimport (
    olc_cconv_args, olc_cconv_cl_tiles, olc_cconv_fn, olc_cconv_level, olc_cconv_select)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()


def level_used(int level):
    """The instruction-set level the convolution runs at."""
    return olc_cconv_level(level)


def tasks(int64_t batch, int64_t channels, int64_t length, bint channels_last):
    """Number of independent tasks the call splits into."""
    if channels_last:
        return batch * olc_cconv_cl_tiles(length)
    return batch * channels


cdef struct _CconvJob:
    olc_cconv_fn fn
    olc_cconv_args *p
    int64_t n, nblocks


cdef void _cconv_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _CconvJob *job = <_CconvJob *>arg
    job.fn(job.p, job.n * t // job.nblocks, job.n * (t + 1) // job.nblocks)


def causal_conv(cnp.ndarray x, object state, cnp.ndarray w, object bias, cnp.ndarray y,
                cnp.ndarray present, int64_t dilation, bint silu, bint channels_last, int dtype,
                int level, int threads):
    """See the module docstring; the adapter has checked every shape."""
    cdef olc_cconv_fn fn = olc_cconv_select(dtype, channels_last, level)
    if fn == NULL:
        raise TypeError(f"causal_conv core: no function for element type {dtype}")
    cdef olc_cconv_args p
    cdef int64_t B = x.shape[0]
    p.x = cnp.PyArray_DATA(x)
    p.state = NULL
    if state is not None:
        p.state = cnp.PyArray_DATA(<cnp.ndarray>state)
    p.y = cnp.PyArray_DATA(y)
    p.present = cnp.PyArray_DATA(present)
    p.w = <const float *>cnp.PyArray_DATA(w)
    p.bias = NULL
    if bias is not None:
        p.bias = <const float *>cnp.PyArray_DATA(<cnp.ndarray>bias)
    p.B, p.K = B, w.shape[0]
    if channels_last:
        p.C, p.L = x.shape[2], x.shape[1]
    else:
        p.C, p.L = x.shape[1], x.shape[2]
    p.dil = dilation
    p.SL = (p.K - 1) * dilation
    p.silu = silu
    cdef int64_t n = tasks(B, p.C, p.L, channels_last)
    cdef _CconvJob job
    if n == 0:
        return
    if threads <= 1 or n < 2:
        with nogil:
            fn(&p, 0, n)
        return
    job.fn, job.p, job.n, job.nblocks = fn, &p, n, min(n, 4 * threads)
    with nogil:
        olc_parallel_for(job.nblocks, _cconv_task, &job, threads)
