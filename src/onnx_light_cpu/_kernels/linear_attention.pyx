# cython: language_level=3
"""LinearAttention core (ai.onnx and com.microsoft): the recurrence per
(batch, kv head) over the tokens, state in float32.

The adapter passes C-contiguous arrays, the validated sizes and the element
types (onnx.TensorProto codes: FLOAT, FLOAT16, BFLOAT16) of the state and of
the activations; this module picks the level's block kernel once and hands the
(batch, kv head) pairs to the threads one at a time, each thread with its
own scratch, so the result does not depend on the thread count.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t, uintptr_t

from olc_linear_attention cimport (
    olc_la_args, olc_la_block_fn, olc_la_level, olc_la_prepare, olc_la_run,
    olc_la_scratch_floats, olc_la_select)
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()


def level_used(int level):
    """The instruction-set level the recurrence runs at."""
    return olc_la_level(level)


def scratch_floats(int64_t Hq, int64_t Hkv, int64_t dk, int64_t dv, int level, int threads):
    """Floats of the scratch array ``apply`` needs for these sizes and threads."""
    cdef olc_la_args p
    p.Hq, p.Hkv, p.dk, p.dv = Hq, Hkv, dk, dv
    cdef int64_t JB = 0
    olc_la_select(level, dv, &JB)
    return olc_la_scratch_floats(&p, JB) * max(threads, 1) + 16


cdef struct _RunJob:
    const olc_la_args *p
    olc_la_block_fn fn
    int64_t JB, per
    float *scratch      # per floats a slot


cdef void _run_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _RunJob *job = <_RunJob *>arg
    olc_la_run(job.p, job.fn, job.JB, job.scratch + slot * job.per, t, t + 1)


cdef const void *_data(object a):
    return NULL if a is None else cnp.PyArray_DATA(<cnp.ndarray>a)


def apply(cnp.ndarray q, cnp.ndarray k, cnp.ndarray v, object past, object decay, object beta,
          cnp.ndarray out, cnp.ndarray present, cnp.ndarray scratch_array, int64_t Hq,
          int64_t Hk, int64_t Hkv, int64_t dk, int64_t dv, int64_t W, bint gated, bint delta,
          bint decay_rows, bint beta_heads, float scale, int state_dtype, int dtype, int level,
          int threads):
    """Run the recurrence: out [B, T, max(Hq, Hkv) * dv] and present [W, B, Hkv,
    dk, dv] (W >= 1) from q [B, T, Hq * dk], k [B, T, Hk * dk], v [B, T, Hkv * dv],
    past (None or one [B, Hkv, dk, dv] slot), decay and beta (None when the
    rule has none); scratch_array is a float32 array of at least
    ``scratch_floats`` elements for this thread count.  dtype: the element
    type of q, k, v, decay, beta and out; state_dtype: that of past and
    present."""
    cdef olc_la_args p
    p.q = cnp.PyArray_DATA(q)
    p.k = cnp.PyArray_DATA(k)
    p.v = cnp.PyArray_DATA(v)
    p.past = _data(past)
    p.decay = _data(decay)
    p.beta = _data(beta)
    p.out = cnp.PyArray_DATA(out)
    p.present = cnp.PyArray_DATA(present)
    p.B = cnp.PyArray_DIM(q, 0)
    p.T = cnp.PyArray_DIM(q, 1)
    p.Hq, p.Hk, p.Hkv, p.dk, p.dv, p.W = Hq, Hk, Hkv, dk, dv, W
    p.tdt, p.sdt = dtype, state_dtype
    p.gated, p.delta, p.decay_rows, p.beta_heads = gated, delta, decay_rows, beta_heads
    p.scale = scale
    olc_la_prepare(&p, level)
    cdef int64_t items = p.B * Hkv
    if items == 0:
        return
    cdef int64_t JB = 0
    cdef olc_la_block_fn fn = olc_la_select(level, dv, &JB)
    cdef int64_t per = olc_la_scratch_floats(&p, JB)
    if threads > items:
        threads = <int>items
    if threads < 1:
        threads = 1
    if (cnp.PyArray_TYPE(scratch_array) != cnp.NPY_FLOAT32
            or cnp.PyArray_SIZE(scratch_array) < per * threads + 16
            or not cnp.PyArray_IS_C_CONTIGUOUS(scratch_array)):
        raise ValueError("linear_attention core: scratch array too small")
    cdef uintptr_t addr = <uintptr_t>cnp.PyArray_DATA(scratch_array)
    cdef float *scratch = <float *>((addr + 63) & ~(<uintptr_t>63))
    if threads == 1:
        with nogil:
            olc_la_run(&p, fn, JB, scratch, 0, items)
        return
    # One (batch, kv head) pair a task, to whichever thread is free: on a
    # shared machine a descheduled thread then holds up one pair, not half
    # the work.  A pair's result does not depend on the thread that runs it.
    cdef _RunJob job
    job.p, job.fn, job.JB, job.per, job.scratch = &p, fn, JB, per, scratch
    with nogil:
        olc_parallel_for(items, _run_task, &job, threads)
