# cython: language_level=3
"""The attention engine (see include/engines/attention/olc_attention.h): the C twin of
:func:`onnx_light_cpu.reference.attention_core.attend`, same signature and
semantics.

Tasks are (batch, kv head, block of query heads, block of positions[, key
chunk]); threads take them as they come (olc_parallel_for), each with its
own scratch, and a task's result does not depend on which thread ran it.
``attend_projected`` fuses com.microsoft Attention's projection in: one
task a (batch, head) runs the GEMM engine on that head's packed weights,
then the head's attention tasks.
"""

cimport numpy as cnp
import numpy as np
from ml_dtypes import bfloat16
from libc.stdint cimport int64_t, int32_t, int8_t, uint8_t
from libc.string cimport memcpy, memset

cdef extern from "<math.h>" nogil:
    float rintf(float x)   # round half to even in the default rounding mode

from olc_attention cimport (
    OLC_ATTN_KC, OLC_ATTN_RMAX, OLC_BFLOAT16, OLC_FLOAT, OLC_FLOAT16, olc_attn_append_args,
    olc_attn_append_rows, olc_attn_args, olc_attn_combine_fn, olc_attn_combine_select,
    olc_attn_copy_past, olc_attn_level, olc_attn_scratch_floats, olc_attn_task_fn,
    olc_attn_task_select)
from olc_gemm cimport olc_sgemm, olc_sgemm_packed_size
from olc_rotary cimport olc_rope_args, olc_rope_fn, olc_rope_select
from olc_pool cimport olc_parallel_for, olc_pool_import

cnp.import_array()
olc_pool_import()

# NumPy dtype -> the element type code (onnx.TensorProto numbering).
_DTYPES = {np.dtype(np.float32): OLC_FLOAT, np.dtype(np.float16): OLC_FLOAT16,
           np.dtype(bfloat16): OLC_BFLOAT16}


cdef struct _AttendJob:
    const olc_attn_args *p
    olc_attn_task_fn fn
    float *scratch      # one block of sfl floats a slot
    int64_t sfl


cdef void _copy_past_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    olc_attn_copy_past((<_AttendJob *>arg).p, t)


cdef void _attend_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _AttendJob *job = <_AttendJob *>arg
    job.fn(job.p, t, job.scratch + slot * job.sfl)


cdef struct _FusedJob:
    const olc_attn_args *p   # the whole problem; q, k and v come from proj
    olc_attn_task_fn fn
    float *scratch           # attention scratch, sfl floats a slot
    int64_t sfl
    float *proj              # projected rows of one (batch, head), pfl floats a slot
    int64_t pfl
    const float *x           # (B, S, Hin)
    const float *wp          # Nq packed (Hin, W) weights, one a head
    const float *wbias       # (Nq, W) or NULL
    int64_t Hin, W
    int glevel
    int failed


cdef void _fused_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    """(batch b, head h): its q, k, v columns (one small GEMM on the head's
    packed weights, over its bias) into the slot's buffer, then the head's
    attention tasks, all while the rows are hot."""
    cdef _FusedJob *j = <_FusedJob *>arg
    cdef const olc_attn_args *p = j.p
    cdef int64_t b = t // p.Nq, h = t % p.Nq, S = p.S, W = j.W, r, i
    cdef float *c = j.proj + slot * j.pfl
    cdef int64_t aoff = b * S * j.Hin, bidx = h, zero = 0
    if j.wbias != NULL:
        for r in range(S):
            memcpy(c + r * W, j.wbias + h * W, <size_t> W * 4)
    else:
        memset(c, 0, <size_t> (S * W) * 4)
    # accumulated onto the bias block by block of K, as the whole projection
    # (the GEMM never splits K): the same q, k, v bits
    if olc_sgemm(j.glevel, OLC_FLOAT, 1, j.x, &aoff, j.Hin, 1, j.wp, &bidx, NULL, &zero, 0, 0,
                 S, W, j.Hin, c, W, S * W, 1.0, 1, 1) != 0:
        j.failed = 1
        return
    cdef olc_attn_args sub = p[0]
    sub.B = 1
    sub.Nq = sub.Nkv = 1
    sub.q = c
    sub.k = c + p.Dk
    sub.v = c + 2 * p.Dk
    for i in range(2):
        sub.qs[i] = sub.ks[i] = sub.vs[i] = sub.os[i] = sub.bs[i] = 0
    sub.qs[2] = sub.ks[2] = sub.vs[2] = W
    sub.out = <char *> p.out + (b * p.os[0] + h * p.os[1]) * 4
    if p.bias != NULL:
        sub.bias = p.bias + b * p.bs[0] + h * p.bs[1]
    if p.kbeg != NULL:
        sub.kbeg = p.kbeg + b * S
    if p.kend != NULL:
        sub.kend = p.kend + b * S
    for i in range(p.nsb):
        j.fn(&sub, i, j.scratch + slot * j.sfl)


def attend_projected(x, packed, wbias, out, proj, *, int64_t heads, int64_t head_size,
                     int64_t v_head_size, scale, bias=None, key_begin=None, key_end=None,
                     int threads=1, level=None):
    """com.microsoft Attention's self-attention with the projection fused
    in: float32 out (B, S, heads * Dv) of x (B, S, Hin), where head h's
    q, k, v are x @ W_h + wbias_h, W_h the (Hin, W = 2 Dk + Dv) columns
    [q of h, k of h, v of h], packed by the GEMM engine at ``level`` into
    ``packed`` (heads matrices, one after the other); wbias (heads, W) or
    None.  One task a (batch, head) projects its head into its slot's rows
    of ``proj`` (float32, at least min(threads, B * heads) * S * W) and
    attends them as :func:`attend` would (same tiles, so the same bits as
    projecting everything first); ``bias``, ``key_begin``, ``key_end`` as
    there (T = S)."""
    cdef cnp.ndarray xa = x, pa = packed, oa = out, pr = proj, wb, ba, kb, ke
    if (xa.dtype != np.float32 or pa.dtype != np.float32 or oa.dtype != np.float32
            or pr.dtype != np.float32 or xa.ndim != 3 or oa.ndim != 3
            or not (xa.flags.c_contiguous and pa.flags.c_contiguous and oa.flags.c_contiguous
                    and pr.flags.c_contiguous)):
        raise TypeError("attend_projected: x, packed, out and proj must be C-contiguous float32, "
                        "x and out of rank 3")
    cdef olc_attn_args p
    cdef int64_t B = xa.shape[0], S = xa.shape[1], Hin = xa.shape[2]
    cdef int64_t W = 2 * head_size + v_head_size
    if heads <= 0 or head_size <= 0 or v_head_size <= 0 or tuple(out.shape) != (
            B, S, heads * v_head_size):
        raise ValueError(f"attend_projected: inconsistent shapes x {x.shape}, out {out.shape}")
    if level is None:
        from .. import simd
        level = simd.state.level
    cdef int lvl = level
    cdef int64_t wsize = olc_sgemm_packed_size(lvl, Hin, W)
    if pa.size < heads * wsize:
        raise ValueError("attend_projected: packed holds fewer than heads packed weights")
    if out.size == 0:
        return
    p.B, p.Nq, p.Nkv, p.S, p.T, p.Dk, p.Dv = B, heads, heads, S, S, head_size, v_head_size
    p.q = p.k = p.v = NULL
    p.out = cnp.PyArray_DATA(oa)
    p.os[0], p.os[1], p.os[2] = S * heads * v_head_size, v_head_size, heads * v_head_size
    p.dtype = OLC_FLOAT
    p.scale = scale
    p.softcap = 0.0
    p.softcap_first = 0
    p.sink = NULL
    p.kvbits = 0
    p.kscale = p.vscale = NULL
    p.pk = p.pv = NULL
    p.plen = NULL
    p.fuse_copy = 0
    p.partial = NULL
    p.prow = 0
    p.bias = NULL
    p.bs[0] = p.bs[1] = p.bs[2] = 0
    if bias is not None:
        ba = bias
        if (ba.dtype != np.float32 or ba.ndim != 4 or ba.shape[0] not in (1, B)
                or ba.shape[1] not in (1, heads) or ba.shape[2] != S or ba.shape[3] != S
                or (S > 1 and ba.strides[3] != 4)):
            raise ValueError(f"attend_projected: bias must be float32 (B|1, heads|1, S, S) with "
                             f"a contiguous last axis, got {bias.dtype} {bias.shape}")
        for i in range(3):
            p.bs[i] = ba.strides[i] // 4 if ba.shape[i] > 1 else 0
        p.bias = <const float *> cnp.PyArray_DATA(ba)
    p.kbeg = p.kend = NULL
    for name, arr in (("key_begin", key_begin), ("key_end", key_end)):
        if arr is not None and (arr.dtype != np.int32 or not arr.flags.c_contiguous
                                or arr.size != B * S):
            raise ValueError(f"attend_projected: {name} must be C-contiguous int32 (B, S)")
    if key_begin is not None:
        kb = key_begin
        p.kbeg = <const int32_t *> cnp.PyArray_DATA(kb)
    if key_end is not None:
        ke = key_end
        p.kend = <const int32_t *> cnp.PyArray_DATA(ke)
    # one head's grid: the task grid of attend with a group of one head
    p.hb = 1
    p.sb = OLC_ATTN_RMAX
    p.nhb = 1
    p.nsb = (S + p.sb - 1) // p.sb
    p.chunk = S
    p.nchunks = 1
    cdef int64_t ntasks = B * heads
    cdef int nth = threads if threads > 1 else 1
    if nth > ntasks:
        nth = <int> ntasks
    if pr.size < nth * S * W:
        raise ValueError("attend_projected: proj holds fewer than threads * S * W floats")
    cdef const float *wbp = NULL
    if wbias is not None:
        wb = wbias
        if wb.dtype != np.float32 or not wb.flags.c_contiguous or wb.size != heads * W:
            raise ValueError("attend_projected: wbias must be C-contiguous float32 (heads, W)")
        wbp = <const float *> cnp.PyArray_DATA(wb)
    cdef int64_t sfl = olc_attn_scratch_floats(p.Dk, p.Dv)
    cdef cnp.ndarray scratch = np.empty(sfl * nth, dtype=np.float32)
    cdef _FusedJob job
    job.p = &p
    job.fn = olc_attn_task_select(lvl)
    job.scratch = <float *> cnp.PyArray_DATA(scratch)
    job.sfl = sfl
    job.proj = <float *> cnp.PyArray_DATA(pr)
    job.pfl = S * W
    job.x = <const float *> cnp.PyArray_DATA(xa)
    job.wp = <const float *> cnp.PyArray_DATA(pa)
    job.wbias = wbp
    job.Hin = Hin
    job.W = W
    job.glevel = lvl
    job.failed = 0
    with nogil:
        olc_parallel_for(ntasks, _fused_task, &job, nth)
    if job.failed:
        raise MemoryError("attend_projected: no memory for the GEMM's packing buffers")


def level_used(int level):
    """The instruction-set level the engine runs at."""
    return olc_attn_level(level)


cdef bint _within(const int32_t *x, int64_t n, int64_t hi) noexcept:
    """Whether every x[i] lies in [0, hi] (a C loop: a NumPy reduction costs
    about a microsecond a call)."""
    cdef int64_t i
    for i in range(n):
        if x[i] < 0 or x[i] > hi:
            return False
    return True


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


def attend(q, k, v, out, *, scale, bias=None, key_begin=None, key_end=None, softcap=0.0,
           softcap_first=False, sink=None, past=None, level=None, int threads=1,
           kv_quant=None):
    """out[B, Nq, S, Dv] = attention of q [B, Nq, S, Dk] over k [B, Nkv, T, Dk]
    and v [B, Nkv, T, Dv] (see the module docstring of the NumPy twin).

    ``past``: None or (past_k [B, Nkv, P, Dk], past_v [B, Nkv, P, Dv], lens
    int32 [B]): rows t < lens[b] of k and v are first copied from the past
    cache (a KV cache's present buffers filled while they are read: each
    decode chunk copies its own rows, hot for its task).

    ``kv_quant``: None or (bits, kscale, vscale): k and v (and the past
    caches) hold codes, int8 [.., Dk] (bits 8) or uint8 [.., Dk / 2] (bits
    4: code + 8, low nibble the even channel); key t channel d of kv head
    g is code * kscale[g * Dk + d] (float32 C-contiguous [Nkv * Dk]; v
    alike), attended in float32 whatever q's dtype."""
    cdef olc_attn_args p
    cdef int bits = 0
    cdef cnp.ndarray ksc, vsc
    cdef int64_t kdiv = 1
    cdt = q.dtype
    if kv_quant is not None:
        bits, ksc, vsc = kv_quant
        if bits not in (4, 8):
            raise ValueError(f"attend: kv_quant bits must be 4 or 8, got {bits}")
        cdt = np.dtype(np.int8 if bits == 8 else np.uint8)
        kdiv = 2 if bits == 4 else 1
    if not (isinstance(q, np.ndarray) and isinstance(k, np.ndarray)
            and isinstance(v, np.ndarray) and isinstance(out, np.ndarray)):
        raise TypeError("attend: q, k, v and out must be numpy arrays")
    dt = q.dtype
    if dt not in _DTYPES or k.dtype != cdt or v.dtype != cdt or out.dtype != dt:
        raise TypeError(f"attend: q, k, v and out must share one of float32, float16, "
                        f"bfloat16 (k and v: {cdt} codes with kv_quant), got {q.dtype}, "
                        f"{k.dtype}, {v.dtype}, {out.dtype}")
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4 or out.ndim != 4:
        raise ValueError("attend: q, k, v and out must have rank 4")
    p.B, p.Nq, p.S, p.Dk = q.shape[0], q.shape[1], q.shape[2], q.shape[3]
    p.Nkv, p.T, p.Dv = k.shape[1], k.shape[2], v.shape[3] * kdiv
    if (k.shape[0] != p.B or k.shape[3] * kdiv != p.Dk or v.shape[0] != p.B
            or v.shape[1] != p.Nkv
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
    p.kvbits = bits
    p.kscale = p.vscale = NULL
    if bits:
        if (ksc.dtype != np.float32 or vsc.dtype != np.float32 or not ksc.flags.c_contiguous
                or not vsc.flags.c_contiguous or ksc.size != p.Nkv * p.Dk
                or vsc.size != p.Nkv * p.Dv or p.Dk % kdiv or p.Dv % kdiv):
            raise ValueError("attend: kv_quant scales must be C-contiguous float32 [Nkv * D]")
        p.kscale = <const float *> cnp.PyArray_DATA(ksc)
        p.vscale = <const float *> cnp.PyArray_DATA(vsc)
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
    cdef cnp.ndarray pka, pva, pl
    p.pk = p.pv = NULL
    p.plen = NULL
    if past is not None:
        pka, pva, pl = past
        if (pka.dtype != cdt or pva.dtype != cdt or pka.ndim != 4 or pva.ndim != 4
                or pka.shape[0] != p.B or pka.shape[1] != p.Nkv or pka.shape[3] != k.shape[3]
                or pva.shape[0] != p.B or pva.shape[1] != p.Nkv or pva.shape[3] != v.shape[3]
                or pva.shape[2] != pka.shape[2]):
            raise ValueError("attend: past caches must be (B, Nkv, P, Dk) and (B, Nkv, P, Dv) "
                             "like k and v")
        if pl.dtype != np.int32 or not pl.flags.c_contiguous or pl.size != p.B:
            raise ValueError("attend: past lengths must be C-contiguous int32 (B,)")
        if not _within(<const int32_t *> cnp.PyArray_DATA(pl), p.B, min(pka.shape[2], p.T)):
            raise ValueError("attend: past lengths must lie in [0, min(P, T)]")
        _strides(pka, p.pks, "past_k")
        _strides(pva, p.pvs, "past_v")
        p.pk = cnp.PyArray_DATA(pka)
        p.pv = cnp.PyArray_DATA(pva)
        p.plen = <const int32_t *> cnp.PyArray_DATA(pl)
    _run(&p, level, threads)


cdef void _run(olc_attn_args *p, int level, int threads) except *:
    """The task grid of the checked problem ``p`` (its past copy, when
    p.pk is set, fused into the tasks where it can be), the tasks on up to
    ``threads`` threads, then the decode chunks combined."""
    cdef olc_attn_task_fn fn = olc_attn_task_select(level)
    cdef olc_attn_combine_fn comb = olc_attn_combine_select(level)
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
    p.fuse_copy = 1 if (p.pk != NULL and p.nchunks > 1 and p.nhb == 1) else 0
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
    cdef _AttendJob job
    job.p, job.fn, job.scratch, job.sfl = p, fn, sp, sfl
    with nogil:
        if p.pk != NULL and not p.fuse_copy:
            olc_parallel_for(p.B * p.Nkv, _copy_past_task, &job, nth)
        olc_parallel_for(ntasks, _attend_task, &job, nth)
        if p.nchunks > 1:
            # Combining the decode chunks is a few microseconds: serially, to
            # spare a second parallel loop.
            for t in range(rows):
                comb(p, t)


def decode_row(q, present_k, present_v, out, past, cos, sin, int64_t row, int64_t total,
               int64_t clear_to, int64_t key_begin, scale, softcap, bint interleaved,
               int level, int threads):
    """GroupQueryAttention's decode step for one entry and one new token in
    one call: the few Python and NumPy calls of the general route (rows,
    rotation, append, attend) cost more than its attention once a decode
    step's weight streams have evicted them from the caches.  Same
    arithmetic as that route, so the same bits.

    q: C-contiguous [1, 1, N + 2 Nkv, H] (query, key and value heads packed);
    cos, sin: None, or the rotary caches (C-contiguous [P, half], q's dtype
    or float32, P > row): the query and key heads rotated at position row.
    present_k, present_v: C-contiguous [1, Nkv, L, H]; row ``row`` takes the
    new key and value, rows [row + 1, clear_to) become zeros, rows before row
    come from ``past`` (past_k, past_v: C-contiguous [1, Nkv, P, H]) or
    are there (a shared buffer, past None).  out: C-contiguous [1, 1, N,
    H], the query attending keys [key_begin, row + 1) of the first
    ``total`` rows (softcap before the mask, as ``attend``)."""
    cdef cnp.ndarray qa = q, pk = present_k, pv = present_v, oa = out, pka, pva, ca, sa
    dt = qa.dtype
    if dt not in _DTYPES or pk.dtype != dt or pv.dtype != dt or oa.dtype != dt:
        raise TypeError(f"decode_row: q, present_k, present_v and out must share one of "
                        f"float32, float16, bfloat16, got {q.dtype}, {present_k.dtype}, "
                        f"{present_v.dtype}, {out.dtype}")
    for a in (qa, pk, pv, oa):
        if a.ndim != 4 or not a.flags.c_contiguous:
            raise ValueError("decode_row: q, present_k, present_v and out must be C-contiguous "
                             "4-D arrays")
    cdef int64_t Nkv = pk.shape[1], L = pk.shape[2], H = pk.shape[3]
    cdef int64_t W = qa.shape[2], N = W - 2 * Nkv, es = qa.itemsize
    if (qa.shape[0] != 1 or qa.shape[1] != 1 or qa.shape[3] != H or N <= 0 or Nkv <= 0
            or N % Nkv or pk.shape[0] != 1 or (<object>pv).shape != (<object>pk).shape
            or (<object>oa).shape != (1, 1, N, H)):
        raise ValueError(f"decode_row: inconsistent shapes q {q.shape}, present "
                         f"{present_k.shape}, out {out.shape}")
    if not (0 <= row < total <= L and row < clear_to <= L and 0 <= key_begin <= row):
        raise ValueError(f"decode_row: row {row}, total {total}, clear_to {clear_to} and "
                         f"key_begin {key_begin} do not fit {L} rows")
    cdef olc_attn_args p
    p.pk = p.pv = NULL
    p.plen = NULL
    cdef int32_t plen = <int32_t> row
    if past is not None:
        pka, pva = past
        if (pka.dtype != dt or pva.dtype != dt or pka.ndim != 4 or pva.ndim != 4
                or not pka.flags.c_contiguous or not pva.flags.c_contiguous
                or pka.shape[0] != 1 or pka.shape[1] != Nkv or pka.shape[3] != H
                or (<object>pva).shape != (<object>pka).shape or pka.shape[2] < row):
            raise ValueError("decode_row: the past caches must be C-contiguous [1, Nkv, P, H] "
                             "of q's dtype with at least row rows")
        _strides(pka, p.pks, "past_k")
        _strides(pva, p.pvs, "past_v")
        p.pk = cnp.PyArray_DATA(pka)
        p.pv = cnp.PyArray_DATA(pva)
        p.plen = &plen
    cdef int64_t pos = row, g
    cdef olc_rope_args r
    cdef olc_rope_fn rope = NULL
    cdef cnp.ndarray rotated = None
    cdef char *qk = <char *> cnp.PyArray_DATA(qa)     # the query and key heads
    cdef int64_t qk_b = W * H                         # their batch stride
    if cos is not None:
        ca, sa = cos, sin
        if (ca.ndim != 2 or (<object>sa).shape != (<object>ca).shape or ca.dtype != sa.dtype
                or (ca.dtype != dt and ca.dtype != np.float32) or not ca.flags.c_contiguous
                or not sa.flags.c_contiguous or ca.shape[0] <= row or ca.shape[1] < 1
                or 2 * ca.shape[1] > H):
            raise ValueError(f"decode_row: cos and sin must be C-contiguous [P > {row}, "
                             f"half <= {H // 2}] of q's dtype or float32")
        rotated = np.empty((N + Nkv) * H, dtype=dt)
        rope = olc_rope_select(_DTYPES[dt], _DTYPES[ca.dtype], interleaved, level)
        r.x, r.y = cnp.PyArray_DATA(qa), cnp.PyArray_DATA(rotated)
        r.cos, r.sin = cnp.PyArray_DATA(ca), cnp.PyArray_DATA(sa)
        r.pos = &pos
        r.S, r.N, r.H, r.half = 1, N + Nkv, H, ca.shape[1]
        r.xs_b, r.xs_s, r.xs_n = W * H, W * H, H
        r.ys_b, r.ys_s, r.ys_n = (N + Nkv) * H, (N + Nkv) * H, H
        qk, qk_b = <char *> cnp.PyArray_DATA(rotated), (N + Nkv) * H
    cdef const char *vnew = <const char *> cnp.PyArray_DATA(qa) + (N + Nkv) * H * es
    cdef char *kd = <char *> cnp.PyArray_DATA(pk)
    cdef char *vd = <char *> cnp.PyArray_DATA(pv)
    cdef size_t row_bytes = H * es
    cdef int64_t end = row + 1
    cdef int32_t kb = <int32_t> key_begin, ke = <int32_t> end
    p.q, p.k, p.v, p.out = qk, kd, vd, cnp.PyArray_DATA(oa)
    p.B, p.Nq, p.Nkv, p.S, p.T, p.Dk, p.Dv = 1, N, Nkv, 1, total, H, H
    p.qs[0], p.qs[1], p.qs[2] = qk_b, H, qk_b
    p.ks[0], p.ks[1], p.ks[2] = Nkv * L * H, L * H, H
    p.vs[0], p.vs[1], p.vs[2] = Nkv * L * H, L * H, H
    p.os[0], p.os[1], p.os[2] = N * H, H, N * H
    p.bias = NULL
    p.bs[0] = p.bs[1] = p.bs[2] = 0
    p.kbeg, p.kend = &kb, &ke
    p.sink = NULL
    p.scale, p.softcap, p.softcap_first = scale, softcap, 1
    p.dtype = _DTYPES[dt]
    p.kvbits = 0
    p.kscale = p.vscale = NULL
    with nogil:
        if rope != NULL:
            rope(&r, 0, N + Nkv)
        for g in range(Nkv):
            memcpy(kd + (g * L + row) * row_bytes, qk + (N + g) * row_bytes, row_bytes)
            memcpy(vd + (g * L + row) * row_bytes, vnew + g * row_bytes, row_bytes)
            if clear_to > end:
                memset(kd + (g * L + end) * row_bytes, 0, (clear_to - end) * row_bytes)
                memset(vd + (g * L + end) * row_bytes, 0, (clear_to - end) * row_bytes)
    _run(&p, level, threads)


cdef void _row_strides(cnp.ndarray x, int64_t *dst, int64_t D) except *:
    cdef int64_t item = x.itemsize
    if x.size == 0:  # never read
        dst[0] = dst[1] = dst[2] = 0
        return
    if D > 1 and x.strides[3] != item:
        raise ValueError("append_rows: the last axis must be contiguous")
    for j in range(3):
        if x.strides[j] % item:
            raise ValueError("append_rows: strides must be whole elements")
        dst[j] = x.strides[j] // item


def append_rows(new_k, new_v, start, count, present_k, present_v):
    """GroupQueryAttention's present cache: for each batch b and kv head,
    rows [start[b], start[b] + count[b]) of present_k/present_v [B, Nkv, L, H]
    take rows [0, count[b]) of new_k/new_v [B, S, Nkv, H] (any strides, the
    last axis contiguous), and the rows after them become zeros; the rows
    before start[b] are left to ``attend``'s ``past``.  start and count:
    C-contiguous int64 [B], 0 <= count[b] <= S."""
    cdef olc_attn_append_args a[2]
    cdef cnp.ndarray src, dst, st, ct
    for x in (new_k, new_v, start, count, present_k, present_v):
        if not isinstance(x, np.ndarray):
            raise TypeError("append_rows: every argument must be a numpy array")
    st, ct = start, count
    for x in (st, ct):
        if x.dtype != np.int64 or x.ndim != 1 or not x.flags.c_contiguous:
            raise ValueError("append_rows: start and count must be C-contiguous int64 [B]")
    cdef const int64_t *sp = <const int64_t *> cnp.PyArray_DATA(st)
    cdef const int64_t *cp = <const int64_t *> cnp.PyArray_DATA(ct)
    cdef int64_t b
    for i, (src, dst) in enumerate(((new_k, present_k), (new_v, present_v))):
        if src.ndim != 4 or dst.ndim != 4 or src.dtype != dst.dtype:
            raise ValueError("append_rows: new and present rows must be 4-D of one dtype")
        B, S, N, D = src.shape[0], src.shape[1], src.shape[2], src.shape[3]
        if (dst.shape[0] != B or dst.shape[1] != N or dst.shape[3] != D
                or st.shape[0] != B or ct.shape[0] != B):
            raise ValueError(f"append_rows: inconsistent shapes {(<object>src).shape} -> "
                             f"{(<object>dst).shape}")
        for b in range(B):
            if sp[b] < 0 or cp[b] < 0 or cp[b] > S:
                raise ValueError("append_rows: start >= 0 and 0 <= count <= S per batch")
        a[i].src = cnp.PyArray_DATA(src)
        a[i].dst = cnp.PyArray_DATA(dst)
        a[i].N, a[i].L, a[i].D, a[i].esize = N, dst.shape[2], D, src.itemsize
        _row_strides(src, a[i].ss, D)
        _row_strides(dst, a[i].ds, D)
        a[i].start = <const int64_t *> cnp.PyArray_DATA(st)
        a[i].count = <const int64_t *> cnp.PyArray_DATA(ct)
    cdef int64_t bn, rows0 = a[0].N * st.shape[0], rows1 = a[1].N * st.shape[0]
    with nogil:
        for bn in range(rows0):
            olc_attn_append_rows(&a[0], bn)
        for bn in range(rows1):
            olc_attn_append_rows(&a[1], bn)


def gqa_rows(list past_len, list append, list lens, Py_ssize_t S, bint causal, int64_t window,
             bint positions):
    """GroupQueryAttention's per-entry arrays from its (checked) Python lists
    past_len, append and lens (total length) of B entries, in one pass: a
    handful of NumPy operations on tiny arrays would cost more than a
    decode step's attention.  Returns (start int64 [B] = past_len, count
    int64 [B] = append, past int32 [B] = past_len, key_begin int32 [B, S],
    key_end int32 [B, S], rotary positions int64 [B, S] or None): query s of
    entry b sits at past_len[b] + s and attends keys [key_begin, key_end):
    causal, up to min(past_len + s + 1, lens) and at most ``window`` of them
    (window > 0), else every key of the entry."""
    cdef Py_ssize_t B = len(past_len), b, s
    if len(append) != B or len(lens) != B:
        raise ValueError("gqa_rows: past_len, append and lens must have one length")
    cdef cnp.ndarray start = np.empty(B, np.int64), count = np.empty(B, np.int64)
    cdef cnp.ndarray past = np.empty(B, np.int32)
    cdef cnp.ndarray kb = np.empty((B, S), np.int32), ke = np.empty((B, S), np.int32)
    cdef cnp.ndarray pos = np.empty((B, S), np.int64) if positions else None
    cdef int64_t *st = <int64_t *> cnp.PyArray_DATA(start)
    cdef int64_t *ct = <int64_t *> cnp.PyArray_DATA(count)
    cdef int32_t *pl = <int32_t *> cnp.PyArray_DATA(past)
    cdef int32_t *kbp = <int32_t *> cnp.PyArray_DATA(kb)
    cdef int32_t *kep = <int32_t *> cnp.PyArray_DATA(ke)
    cdef int64_t *pp = <int64_t *> cnp.PyArray_DATA(pos) if positions else NULL
    cdef int64_t p0, n, end, begin
    for b in range(B):
        p0, n = past_len[b], lens[b]
        st[b], ct[b], pl[b] = p0, append[b], <int32_t> p0
        for s in range(S):
            if causal:
                end = min(p0 + s + 1, n)
                begin = max(end - window, 0) if window > 0 else 0
            else:
                end, begin = n, 0
            kbp[b * S + s] = <int32_t> min(begin, end)
            kep[b * S + s] = <int32_t> end
            if positions:
                pp[b * S + s] = p0 + s
    return start, count, past, kb, ke, pos


cdef inline int _code(float x, float inv, int lo, int hi) noexcept nogil:
    """clamp(round-half-even(x * inv)), NaN to hi (ONNX Runtime's)."""
    cdef float r = rintf(x * inv)
    if r != r:
        return hi
    return lo if r < lo else (hi if r > hi else <int> r)


def quantize_rows(new, start, count, present, inv, int bits):
    """A quantized KV cache's present rows: for each entry b and kv head n,
    rows [start[b], start[b] + count[b]) of present (int8 [B, N, L, H] for
    bits 8, uint8 [B, N, L, H / 2] for bits 4: code + 8, low nibble the even
    channel) take the codes clamp(round-half-even(x * inv[n * H + d])) of
    rows [0, count[b]) of new (float32 [B, S, N, H]), and the rows after
    them become zero bytes; the rows before start[b] are left (the engine
    copies the past ones).  new and present: any strides, the last axis
    contiguous.  inv: float32 C-contiguous [N * H], the reciprocals of the
    dequantization scales."""
    cdef cnp.ndarray src = new, dst = present, st = start, ct = count, iv = inv
    if src.dtype != np.float32 or src.ndim != 4 or dst.ndim != 4:
        raise ValueError("quantize_rows: new must be float32 [B, S, N, H], present 4-D")
    if dst.dtype != (np.int8 if bits == 8 else np.uint8) or bits not in (4, 8):
        raise ValueError("quantize_rows: present must be int8 (bits 8) or uint8 (bits 4)")
    cdef int64_t B = src.shape[0], S = src.shape[1], N = src.shape[2], H = src.shape[3]
    cdef int64_t L = dst.shape[2], Hc = H if bits == 8 else H // 2
    if (dst.shape[0] != B or dst.shape[1] != N or dst.shape[3] != Hc or (bits == 4 and H % 2)
            or (Hc > 1 and dst.size and dst.strides[3] != 1)
            or (H > 1 and src.size and src.strides[3] != 4)):
        raise ValueError(f"quantize_rows: inconsistent shapes {new.shape} -> {present.shape}")
    for x in (st, ct):
        if x.dtype != np.int64 or x.ndim != 1 or not x.flags.c_contiguous or x.shape[0] != B:
            raise ValueError("quantize_rows: start and count must be C-contiguous int64 [B]")
    if iv.dtype != np.float32 or not iv.flags.c_contiguous or iv.size != N * H:
        raise ValueError("quantize_rows: inv must be C-contiguous float32 [N * H]")
    cdef const int64_t *sp = <const int64_t *> cnp.PyArray_DATA(st)
    cdef const int64_t *cp = <const int64_t *> cnp.PyArray_DATA(ct)
    cdef int64_t b, n, r, d, r0, r1
    for b in range(B):
        if sp[b] < 0 or cp[b] < 0 or cp[b] > S:
            raise ValueError("quantize_rows: start >= 0 and 0 <= count <= S per batch")
    cdef const char *sbase = <const char *> cnp.PyArray_DATA(src)
    cdef uint8_t *dbase = <uint8_t *> cnp.PyArray_DATA(dst)
    cdef const float *ivp = <const float *> cnp.PyArray_DATA(iv)
    cdef int64_t s0 = src.strides[0], s1 = src.strides[1], s2 = src.strides[2]
    cdef int64_t d0 = dst.strides[0], d1 = dst.strides[1], d2 = dst.strides[2]
    cdef const float *xr
    cdef const float *w
    cdef uint8_t *row
    with nogil:
        for b in range(B):
            r0 = min(sp[b], L)
            r1 = min(sp[b] + cp[b], L)
            for n in range(N):
                w = ivp + n * H
                for r in range(r0, r1):
                    xr = <const float *> (sbase + b * s0 + (r - r0) * s1 + n * s2)
                    row = dbase + b * d0 + n * d1 + r * d2
                    if bits == 8:
                        for d in range(H):
                            (<int8_t *> row)[d] = <int8_t> _code(xr[d], w[d], -128, 127)
                    else:
                        for d in range(Hc):
                            row[d] = <uint8_t> ((_code(xr[2 * d], w[2 * d], -8, 7) + 8)
                                                | ((_code(xr[2 * d + 1], w[2 * d + 1], -8, 7) + 8) << 4))
                for r in range(r1, L):
                    memset(dbase + b * d0 + n * d1 + r * d2, 0, <size_t> Hc)


def right_padded_key_ends(cnp.ndarray mask, Py_ssize_t s, Py_ssize_t first_end):
    """Key ranges of a raw (B, T) int32 mask whose every row keeps a run of
    keys from the first (values > 0, then none): (begin, end) int32 (B, s),
    begin 0 and end the row's count, capped at first_end + i for query i
    when first_end >= 0 (causal).  None when the mask is not C-contiguous
    int32, a row is not such a run, or a query would keep no key (the
    caller's general path handles those)."""
    if (cnp.PyArray_TYPE(mask) != cnp.NPY_INT32 or cnp.PyArray_NDIM(mask) != 2
            or not cnp.PyArray_IS_C_CONTIGUOUS(mask)):
        return None
    cdef Py_ssize_t B = mask.shape[0], T = mask.shape[1], b, j, i, count, e
    cdef const int32_t *m = <const int32_t *>cnp.PyArray_DATA(mask)
    cdef cnp.ndarray begin = np.zeros((B, s), np.int32), end = np.empty((B, s), np.int32)
    cdef int32_t *pe = <int32_t *>cnp.PyArray_DATA(end)
    for b in range(B):
        count = 0
        while count < T and m[b * T + count] > 0:
            count += 1
        for j in range(count, T):
            if m[b * T + j] > 0:
                return None
        for i in range(s):
            e = count if first_end < 0 or first_end + i > count else first_end + i
            if e <= 0:
                return None
            pe[b * s + i] = <int32_t>e
    return begin, end


def fill_present(past, cnp.ndarray k4, cnp.ndarray v4, cnp.ndarray present):
    """com.microsoft Attention's present (2, B, N, P + S, H), C-contiguous:
    each (batch, head) takes its P past rows from ``past`` (2, B, N, P, H),
    C-contiguous of present's dtype, or None when P is 0, then the S new
    rows of k4 and v4 (B, N, S, H), any strides whole elements apart, the
    last axis contiguous.  One block copy per (batch, head) instead of
    NumPy's row by row."""
    cdef Py_ssize_t B = present.shape[1], N = present.shape[2], T = present.shape[3]
    cdef Py_ssize_t H = present.shape[4], S = k4.shape[2], P = T - S, c, b, n, i
    cdef Py_ssize_t item = present.itemsize, row = H * item
    cdef object expected = (B, N, S, H), new_rows
    cdef bint ok = cnp.PyArray_IS_C_CONTIGUOUS(present) and P >= 0
    if ok and P:
        ok = (isinstance(past, np.ndarray) and past.flags.c_contiguous
              and past.dtype == present.dtype and past.shape == (2, B, N, P, H))
    for new_rows in (k4, v4):
        ok = ok and (new_rows.dtype == present.dtype and new_rows.shape == expected
                     and (H <= 1 or new_rows.strides[3] == item))
    if not ok:
        raise ValueError("fill_present: inconsistent arrays")
    cdef char *dst = <char *>cnp.PyArray_DATA(present)
    cdef const char *src = NULL if not P else <const char *>cnp.PyArray_DATA(<cnp.ndarray>past)
    cdef const char *new[2]
    cdef Py_ssize_t sb[2]
    cdef Py_ssize_t sn[2]
    cdef Py_ssize_t ss[2]
    for c in range(2):
        new_rows = k4 if c == 0 else v4
        new[c] = <const char *>cnp.PyArray_DATA(<cnp.ndarray>new_rows)
        sb[c], sn[c], ss[c] = new_rows.strides[0], new_rows.strides[1], new_rows.strides[2]
    with nogil:
        for c in range(2):
            for b in range(B):
                for n in range(N):
                    if P:
                        memcpy(dst, src, P * row)
                        src += P * row
                    dst += P * row
                    for i in range(S):
                        memcpy(dst, new[c] + b * sb[c] + n * sn[c] + i * ss[c], row)
                        dst += row
