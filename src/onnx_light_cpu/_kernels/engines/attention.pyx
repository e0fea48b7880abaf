# cython: language_level=3
"""The attention engine (see include/olc_attention.h): the C twin of
:func:`onnx_light_cpu.reference.attention_core.attend`, same signature and
semantics.

Tasks are (batch, kv head, block of query heads, block of positions[, key
chunk]); threads take them dynamically, each with its own scratch, and a
task's result does not depend on which thread ran it.
"""

cimport numpy as cnp
import numpy as np
from ml_dtypes import bfloat16
from cython.parallel cimport prange, threadid
from libc.stdint cimport int64_t, int32_t

cnp.import_array()

cdef extern from "engines/attention/olc_attention.h" nogil:
    int OLC_ATTN_F32, OLC_ATTN_F16, OLC_ATTN_BF16
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
    ctypedef void (*olc_attn_task_fn)(const olc_attn_args *p, int64_t task, float *scratch)
    ctypedef void (*olc_attn_combine_fn)(const olc_attn_args *p, int64_t row)
    olc_attn_task_fn olc_attn_task_select(int level)
    olc_attn_combine_fn olc_attn_combine_select(int level)
    int olc_attn_level(int level)
    int64_t olc_attn_scratch_floats(int64_t Dk, int64_t Dv)
    void olc_attn_copy_past(const olc_attn_args *p, int64_t bg)

_DTYPES = {np.dtype(np.float32): OLC_ATTN_F32, np.dtype(np.float16): OLC_ATTN_F16,
           np.dtype(bfloat16): OLC_ATTN_BF16}


def level_used(int level):
    """The instruction-set level the engine runs at."""
    return olc_attn_level(level)


cdef void _strides(cnp.ndarray a, int64_t *dst, str name) except *:
    cdef int64_t item = a.itemsize
    if a.size == 0:  # never read
        dst[0] = dst[1] = dst[2] = 0
        return
    if a.shape[3] > 1 and a.strides[3] != item:
        raise ValueError(f"attend: {name} must have a contiguous last axis")
    for i in range(3):
        if a.strides[i] % item:
            raise ValueError(f"attend: {name} strides must be whole elements")
        dst[i] = a.strides[i] // item


def attend(q, k, v, out, *, scale, bias=None,
           key_begin=None, key_end=None, softcap=0.0, softcap_first=False, sink=None,
           int threads=1, level=None, past=None):
    """out[B, Nq, S, Dv] = attention of q [B, Nq, S, Dk] over k [B, Nkv, T, Dk]
    and v [B, Nkv, T, Dv] (see the module docstring of the NumPy twin).

    ``past``: None or (past_k [B, Nkv, P, Dk], past_v [B, Nkv, P, Dv], lens
    int32 [B]): rows t < lens[b] of k and v are first copied from the past
    cache (a KV cache's present buffers filled while they are read: each
    decode chunk copies its own rows, hot for its task)."""
    cdef olc_attn_args p
    if not all(isinstance(a, np.ndarray) for a in (q, k, v, out)):
        raise TypeError("attend: q, k, v and out must be numpy arrays")
    dt = q.dtype
    if dt not in _DTYPES or k.dtype != dt or v.dtype != dt or out.dtype != dt:
        raise TypeError(f"attend: q, k, v and out must share one of float32, float16, "
                        f"bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}, {out.dtype}")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or out.ndim != 4:
        raise ValueError("attend: q, k, v and out must have rank 4")
    p.B, p.Nq, p.S, p.Dk = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    p.Nkv, p.T, p.Dv = k.shape[1], k.shape[2], v.shape[3]
    if (k.shape[0] != p.B or k.shape[3] != p.Dk or v.shape[0] != p.B or v.shape[1] != p.Nkv
            or v.shape[2] != p.T or tuple(out.shape) != (p.B, p.Nq, p.S, p.Dv)
            or p.Nkv == 0 or p.Nq % p.Nkv):
        raise ValueError(f"attend: inconsistent shapes q {q.shape}, k {k.shape}, "
                         f"v {v.shape}, out {out.shape}")
    if out.size == 0:
        if past is not None:  # nothing to attend, the cache still fills
            for b in range(p.B):
                n = int(past[2][b])
                k[b, :, :n] = past[0][b, :, :n]
                v[b, :, :n] = past[1][b, :, :n]
        return
    _strides(q, p.qs, "q")
    _strides(k, p.ks, "k")
    _strides(v, p.vs, "v")
    _strides(out, p.os, "out")
    p.q = cnp.PyArray_DATA(<cnp.ndarray> q)
    p.k = cnp.PyArray_DATA(<cnp.ndarray> k)
    p.v = cnp.PyArray_DATA(<cnp.ndarray> v)
    p.out = cnp.PyArray_DATA(<cnp.ndarray> out)
    p.dtype = _DTYPES[dt]
    p.scale = scale
    p.softcap = softcap
    p.softcap_first = 1 if softcap_first else 0
    cdef cnp.ndarray ba, kb, ke, sk
    p.bias = NULL
    p.bs[0] = p.bs[1] = p.bs[2] = 0
    if bias is not None:
        ba = bias
        if (ba.dtype != np.float32 or ba.ndim != 4 or ba.shape[0] not in (1, p.B)
                or ba.shape[1] not in (1, p.Nq) or ba.shape[2] != p.S or ba.shape[3] != p.T):
            raise ValueError(f"attend: bias must be float32 (B|1, Nq|1, S, T), got {bias.dtype} "
                             f"{bias.shape}")
        if p.T > 1 and ba.strides[3] != 4:
            raise ValueError("attend: bias must have a contiguous last axis")
        for i in range(3):
            p.bs[i] = ba.strides[i] // 4 if ba.shape[i] > 1 else 0
        p.bias = <const float *> cnp.PyArray_DATA(ba)
    p.kbeg = p.kend = NULL
    if key_begin is not None:
        kb = key_begin
        if kb.dtype != np.int32 or not kb.flags.c_contiguous or kb.size != p.B * p.S:
            raise ValueError("attend: key_begin must be C-contiguous int32 (B, S)")
        p.kbeg = <const int32_t *> cnp.PyArray_DATA(kb)
    if key_end is not None:
        ke = key_end
        if ke.dtype != np.int32 or not ke.flags.c_contiguous or ke.size != p.B * p.S:
            raise ValueError("attend: key_end must be C-contiguous int32 (B, S)")
        p.kend = <const int32_t *> cnp.PyArray_DATA(ke)
    p.sink = NULL
    if sink is not None:
        sk = np.ascontiguousarray(sink, dtype=np.float32)
        if sk.size != p.Nq:
            raise ValueError(f"attend: sink must have Nq = {p.Nq} values")
        p.sink = <const float *> cnp.PyArray_DATA(sk)
    if level is None:
        from .. import simd
        level = simd.state.level
    cdef int lvl = level
    cdef olc_attn_task_fn fn = olc_attn_task_select(lvl)
    cdef olc_attn_combine_fn comb = olc_attn_combine_select(lvl)
    # Task grid: the query heads of one kv head, then positions, up to RMAX rows.
    cdef int64_t group = p.Nq // p.Nkv
    p.hb = group if group < OLC_ATTN_RMAX else OLC_ATTN_RMAX
    p.sb = max(1, OLC_ATTN_RMAX // p.hb)
    p.nhb = (group + p.hb - 1) // p.hb
    p.nsb = (p.S + p.sb - 1) // p.sb
    p.chunk = p.T if p.T > 0 else 1
    p.nchunks = 1
    if p.S == 1 and p.T > OLC_ATTN_KC:
        p.chunk = OLC_ATTN_KC
        p.nchunks = (p.T + OLC_ATTN_KC - 1) // OLC_ATTN_KC
    cdef int64_t ntasks = p.B * p.Nkv * p.nhb * p.nsb * p.nchunks
    cdef cnp.ndarray pka, pva, pl
    p.pk = p.pv = NULL
    p.plen = NULL
    p.fuse_copy = 0
    if past is not None:
        pka, pva, pl = past
        if (pka.dtype != dt or pva.dtype != dt or pka.ndim != 4 or pva.ndim != 4
                or pka.shape[0] != p.B or pka.shape[1] != p.Nkv or pka.shape[3] != p.Dk
                or pva.shape[0] != p.B or pva.shape[1] != p.Nkv or pva.shape[3] != p.Dv
                or pva.shape[2] != pka.shape[2]):
            raise ValueError("attend: past caches must be (B, Nkv, P, Dk) and (B, Nkv, P, Dv) "
                             "of q's dtype")
        if pl.dtype != np.int32 or not pl.flags.c_contiguous or pl.size != p.B:
            raise ValueError("attend: past lengths must be C-contiguous int32 (B,)")
        if p.B and (pl.min() < 0 or pl.max() > min(pka.shape[2], p.T)):
            raise ValueError("attend: past lengths must lie in [0, min(P, T)]")
        _strides(pka, p.pks, "past_k")
        _strides(pva, p.pvs, "past_v")
        p.pk = cnp.PyArray_DATA(pka)
        p.pv = cnp.PyArray_DATA(pva)
        p.plen = <const int32_t *> cnp.PyArray_DATA(pl)
        p.fuse_copy = 1 if (p.nchunks > 1 and p.nhb == 1) else 0
    cdef int nth = threads if threads > 1 else 1
    if nth > ntasks:
        nth = <int> ntasks
    cdef int64_t sfl = olc_attn_scratch_floats(p.Dk, p.Dv)
    cdef cnp.ndarray scratch = np.empty(sfl * nth, dtype=np.float32)
    cdef float *sp = <float *> cnp.PyArray_DATA(scratch)
    cdef cnp.ndarray part
    p.partial = NULL
    p.prow = 0
    if p.nchunks > 1:
        p.prow = p.hb * min(p.sb, p.S)   # the most rows a task has
        part = np.empty(ntasks * p.prow * (p.Dv + 2), dtype=np.float32)
        p.partial = <float *> cnp.PyArray_DATA(part)
    cdef int64_t t, rows = p.B * p.Nq * p.S
    if p.pk != NULL and not p.fuse_copy:
        with nogil:
            if nth <= 1:
                for t in range(p.B * p.Nkv):
                    olc_attn_copy_past(&p, t)
            else:
                for t in prange(p.B * p.Nkv, num_threads=nth, schedule="static"):
                    olc_attn_copy_past(&p, t)
    if nth <= 1:
        with nogil:
            for t in range(ntasks):
                fn(&p, t, sp)
            if p.nchunks > 1:
                for t in range(rows):
                    comb(&p, t)
        return
    for t in prange(ntasks, nogil=True, num_threads=nth, schedule="dynamic"):
        fn(&p, t, sp + threadid() * sfl)
    if p.nchunks > 1:
        # Combining the decode chunks is a few microseconds: serially, to
        # spare a second parallel region (and its barrier).
        with nogil:
            for t in range(rows):
                comb(&p, t)
