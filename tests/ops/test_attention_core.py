"""The attention engine (``_kernels.engines.attention.attend``) against its NumPy twin
(``reference.attention_core.attend``): random shapes and grouped heads, strided
(transposed) views, float32/float16/bfloat16, bias broadcasting, key ranges
(empty ones included), sinks, softcap in both orders, the decode split, at
every SIMD level; 1 and 2 threads give the same bits."""

from __future__ import annotations

import numpy as np
import pytest
from ml_dtypes import bfloat16

from onnx_light_cpu._kernels.engines import attention as core
from onnx_light_cpu.reference import attention_core as twin
from onnx_light_cpu.simd import LEVEL_NAMES, available_simd_levels

from differential import THREAD_COUNTS, assert_close, same_bits, same_bits_all

TOL = {np.dtype(np.float32): (2e-5, 2e-6), np.dtype(np.float16): (2e-3, 2e-3),
       np.dtype(bfloat16): (1.6e-2, 1e-2)}
LEVELS = [LEVEL_NAMES.index(name) if isinstance(name, str) else name
          for name in available_simd_levels()]


def _bshd(rng, B, S, N, D, dtype, scale=1.0):
    """A [B, N, S, D] view of a [B, S, N, D] buffer (the callers' layout)."""
    return (rng.standard_normal((B, S, N, D)) * scale).astype(dtype).transpose(0, 2, 1, 3)


def run_case(rng, B, Nq, Nkv, S, T, Dk, Dv, dtype, *, bias=None, ranges=False, sink=False,
             softcap=0.0, softcap_first=False, scale=None):
    q = _bshd(rng, B, S, Nq, Dk, dtype)
    k = _bshd(rng, B, T, Nkv, Dk, dtype)
    v = (rng.standard_normal((B, Nkv, T, Dv))).astype(dtype)   # BNSH, contiguous
    kw = dict(scale=scale if scale is not None else 1 / np.sqrt(max(Dk, 1)),
              softcap=softcap, softcap_first=softcap_first)
    if bias is not None:
        full = (rng.standard_normal(bias + (S, T)) * 2).astype(np.float32)
        if full.size:
            full.flat[rng.integers(0, full.size, max(1, full.size // 7))] = -np.inf
        kw["bias"] = np.broadcast_to(full, (B, Nq, S, T)) if rng.random() < 0.5 else full
    if ranges:
        b = rng.integers(0, T + 1, (B, S))
        e = b + rng.integers(0, T + 1, (B, S))
        kw["key_begin"] = np.ascontiguousarray(np.minimum(b, T), dtype=np.int32)
        kw["key_end"] = np.ascontiguousarray(np.minimum(e, T), dtype=np.int32)
    if sink:
        kw["sink"] = rng.standard_normal(Nq).astype(np.float32)
    originals = [a.copy() for a in (q, k, v)]
    want = np.empty((B, Nq, S, Dv), dtype)
    twin.attend(q, k, v, want, **kw)
    for level in LEVELS:
        got = {}
        for threads in THREAD_COUNTS:
            out = np.full((B, S, Nq, Dv), np.nan, dtype).transpose(0, 2, 1, 3)
            core.attend(q, k, v, out, threads=threads, level=level, **kw)
            got[threads] = np.ascontiguousarray(out)
            assert_close(got[threads], want, f"level {level}, {threads} threads",
                         TOL[np.dtype(dtype)])
        assert same_bits_all(list(got.values())), f"level {level}: thread count changed the result"
    for a, o in zip((q, k, v), originals):
        assert same_bits(a, o)


SHAPES = [  # B, Nq, Nkv, S, T, Dk, Dv
    (1, 1, 1, 1, 1, 1, 1), (2, 4, 2, 3, 5, 8, 6), (1, 8, 2, 17, 70, 13, 19),
    (1, 4, 4, 1, 700, 64, 64), (2, 6, 3, 5, 33, 16, 17), (1, 32, 8, 1, 300, 128, 128),
    (1, 20, 1, 9, 40, 80, 80), (1, 4, 2, 70, 70, 96, 96), (2, 2, 1, 0, 5, 8, 8),
    (2, 2, 1, 3, 0, 8, 8), (1, 3, 3, 2, 65, 33, 1), (1, 2, 1, 1, 600, 300, 300),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_engine_shapes(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    run_case(rng, *shape, dtype)


@pytest.mark.parametrize("seed", range(12))
def test_engine_options(seed):
    """Bias broadcasting, key ranges, sinks and softcap in both orders."""
    rng = np.random.default_rng(100 + seed)
    B, Nkv = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    Nq = Nkv * int(rng.integers(1, 5))
    S = int(rng.choice([1, 2, 7, 20]))
    T = int(rng.choice([1, 5, 64, 65, 300]))
    D = int(rng.choice([8, 16, 24, 64]))
    dtype = [np.float32, np.float16, bfloat16][seed % 3]
    bias = [None, (B, Nq), (1, Nq), (B, 1), (1, 1)][seed % 5]
    run_case(rng, B, Nq, Nkv, S, T, D, D, dtype, bias=bias, ranges=seed % 2 == 0,
             sink=seed % 3 != 1, softcap=[0.0, 1.5, 30.0][seed % 3],
             softcap_first=seed % 4 < 2, scale=float(rng.uniform(0.05, 0.5)))


def test_engine_decode_split_and_empty_rows():
    """S == 1 over many keys goes through the chunked path; empty ranges and
    all -inf rows give zeros, a sink alone gives zeros too."""
    rng = np.random.default_rng(7)
    B, Nq, Nkv, T, D = 3, 4, 2, 1000, 32
    q = _bshd(rng, B, 1, Nq, D, np.float32)
    k = rng.standard_normal((B, Nkv, T, D)).astype(np.float32)
    v = rng.standard_normal((B, Nkv, T, D)).astype(np.float32)
    begin = np.array([[0], [10], [500]], np.int32)
    end = np.array([[1000], [10], [900]], np.int32)          # entry 1: no key
    bias = np.zeros((B, 1, 1, T), np.float32)
    bias[2] = -np.inf                                      # entry 2: every score -inf
    for sink in (None, np.full(Nq, 3.0, np.float32)):
        want = np.empty((B, Nq, 1, D), np.float32)
        twin.attend(q, k, v, want, scale=0.2, key_begin=begin, key_end=end, bias=bias, sink=sink)
        assert not want[1:].any()
        for level in LEVELS:
            outs = []
            for threads in THREAD_COUNTS:
                out = np.full((B, Nq, 1, D), np.nan, np.float32)
                core.attend(q, k, v, out, scale=0.2, key_begin=begin, key_end=end, bias=bias,
                            sink=sink, threads=threads, level=level)
                assert_close(out, want, f"decode split level {level}", TOL[np.dtype(np.float32)])
                outs.append(out)
            assert same_bits_all(outs)


def test_engine_rejects_bad_arguments():
    q = np.zeros((1, 2, 3, 4), np.float32)
    k = np.zeros((1, 1, 5, 4), np.float32)
    out = np.zeros((1, 2, 3, 4), np.float32)
    with pytest.raises(TypeError):
        core.attend(q, k.astype(np.float16), k, out, scale=1.0)
    with pytest.raises(ValueError):
        core.attend(q, np.zeros((1, 3, 5, 4), np.float32), np.zeros((1, 3, 5, 4), np.float32),
                    out, scale=1.0)
    with pytest.raises(ValueError):
        core.attend(q, k, k, out, scale=1.0, bias=np.zeros((1, 2, 3, 4), np.float32))
    with pytest.raises(ValueError):
        core.attend(q, k, k, out, scale=1.0, key_end=np.zeros((1, 2), np.int32))
    with pytest.raises(ValueError):  # last axis not contiguous
        core.attend(np.zeros((1, 2, 4, 3), np.float32).transpose(0, 1, 3, 2), k, k, out,
                    scale=1.0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(60))
def test_engine_sweep(seed):
    rng = np.random.default_rng(1000 + seed)
    Nkv = int(rng.integers(1, 4))
    run_case(rng, int(rng.integers(1, 3)), Nkv * int(rng.integers(1, 6)), Nkv,
             int(rng.integers(0, 40)), int(rng.integers(0, 600)), int(rng.integers(1, 140)),
             int(rng.integers(1, 140)), [np.float32, np.float16, bfloat16][seed % 3],
             bias=[None, (1, 1)][seed % 2], ranges=bool(seed % 3), sink=bool(seed % 2),
             softcap=[0.0, 2.0][seed % 2], softcap_first=bool(seed % 4 < 2))


@pytest.mark.parametrize("S,T,Nq", [(1, 700, 4), (1, 700, 40), (3, 50, 4), (0, 9, 4)])
def test_engine_fills_from_past(S, T, Nq):
    """``past``: the copy fused into the decode chunks (S == 1), or done
    before (other shapes); rows from lens[b] on keep what k/v held."""
    rng = np.random.default_rng(S + T)
    B, Nkv, D, P = 2, 2, 16, T + 3
    lens = np.array([T - 1, T // 2], np.int32)
    pk = rng.standard_normal((B, Nkv, P, D)).astype(np.float32)
    pv = rng.standard_normal((B, Nkv, P, D)).astype(np.float32)
    q = _bshd(rng, B, S, Nq, D, np.float32)
    k0 = rng.standard_normal((B, Nkv, T, D)).astype(np.float32)
    v0 = rng.standard_normal((B, Nkv, T, D)).astype(np.float32)
    want_k, want_v = k0.copy(), v0.copy()
    want = np.empty((B, Nq, S, D), np.float32)
    twin.attend(q, want_k, want_v, want, scale=0.3, past=(pk, pv, lens))
    for b in range(B):
        assert same_bits(want_k[b, :, :lens[b]], pk[b, :, :lens[b]])
        assert same_bits(want_k[b, :, lens[b]:], k0[b, :, lens[b]:])
    for level in LEVELS:
        for threads in THREAD_COUNTS:
            k, v = k0.copy(), v0.copy()
            out = np.empty((B, Nq, S, D), np.float32)
            core.attend(q, k, v, out, scale=0.3, past=(pk, pv, lens), threads=threads, level=level)
            assert same_bits(k, want_k) and same_bits(v, want_v)
            assert_close(out, want, f"past level {level}", TOL[np.dtype(np.float32)])


@pytest.mark.parametrize("B,Nq,Nkv,S,T,D", [
    (1, 2, 1, 3, 5, 8),        # one tile
    (1, 4, 2, 1, 700, 16),     # decode split: chunks combined
    (1, 8, 1, 20, 200, 16),    # many rows per task (the AVX-512 wide path), two tiles
    (2, 2, 2, 2, 130, 24),     # several tiles on the dot product path
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16],
                         ids=lambda d: np.dtype(d).name)
def test_engine_nan_scores_give_nan_rows(B, Nq, Nkv, S, T, D, dtype):
    """Issue 12: a NaN in a query row made every score of the row NaN, which
    the running max skipped, so the row came out as zeros (a fully masked
    row's result); a softmax with a NaN score is NaN (the twin, the
    references).  Also a NaN key met in one tile or chunk only, a row whose
    bias is all NaN; a fully masked row stays zeros.  The other rows keep
    their bits, every level and thread count agree."""
    rng = np.random.default_rng(B * 1000 + T)
    q = rng.standard_normal((B, Nq, S, D)).astype(dtype)
    k = rng.standard_normal((B, Nkv, T, D)).astype(dtype)
    v = rng.standard_normal((B, Nkv, T, D)).astype(dtype)
    bias = np.zeros((B, Nq, S, T), np.float32)
    begin = np.zeros((B, S), np.int32)
    end = np.full((B, S), T, np.int32)
    if S > 1:
        end[B - 1, S - 1] = 0                   # a fully masked position: zeros
    clean = [a.copy() for a in (q, k, v, bias)]
    q[0, 0, 0, D // 2] = np.nan                 # row (0, 0, 0): every score NaN
    k[B - 1, Nkv - 1, T - 1, 0] = np.nan        # one key of the last kv head, last tile
    bias[0, Nq - 1, 0] = np.nan                 # a row of NaN bias
    kw = dict(scale=0.3, bias=bias, key_begin=begin, key_end=end)
    want = np.empty((B, Nq, S, D), dtype)
    twin.attend(q, k, v, want, **kw)
    nan_rows = np.isnan(want.astype(np.float32)).all(axis=-1)
    assert nan_rows[0, 0, 0] and nan_rows[0, Nq - 1, 0]
    group = Nq // Nkv
    assert nan_rows[B - 1, Nq - group:, :S - 1 if S > 1 else S].all()   # the NaN key
    if S > 1:
        assert not want[B - 1, :, S - 1].astype(np.float32).any()
    base = np.empty((B, Nq, S, D), dtype)
    for level in LEVELS:
        outs = []
        for threads in THREAD_COUNTS:
            out = np.full((B, Nq, S, D), 7, dtype)
            core.attend(q, k, v, out, threads=threads, level=level, **kw)
            assert_close(out, want, f"level {level}, {threads} threads", TOL[np.dtype(dtype)])
            outs.append(out)
        assert same_bits_all(outs), f"level {level}: thread count changed the result"
        core.attend(*clean[:3], base, scale=0.3, bias=clean[3], key_begin=begin, key_end=end,
                    level=level)
        keep = ~np.isnan(want.astype(np.float32)).any(axis=-1)
        assert same_bits(outs[0][keep], base[keep]), f"level {level}: other rows changed"


@pytest.mark.parametrize("T", [5, 700])
def test_engine_row_masked_whole_by_the_bias_is_zeros_even_with_nan(T):
    """A row whose bias masks every key (-inf) is zeros whatever its scores,
    a NaN query included (NaN + -inf is NaN): onnx.reference decides on the
    mask.  A NaN query row with one key left unmasked stays NaN."""
    rng = np.random.default_rng(T)
    q = rng.standard_normal((1, 2, 2, 8)).astype(np.float32)
    k = rng.standard_normal((1, 1, T, 8)).astype(np.float32)
    v = rng.standard_normal((1, 1, T, 8)).astype(np.float32)
    q[0, :, :, 3] = np.nan
    bias = np.full((1, 2, 2, T), -np.inf, np.float32)
    bias[0, 1, :, T - 1] = 0.0                  # head 1 attends its last key
    want = np.empty(q.shape, np.float32)
    twin.attend(q, k, v, want, scale=0.5, bias=bias)
    assert not want[0, 0].any() and np.isnan(want[0, 1]).all()
    for level in LEVELS:
        for threads in THREAD_COUNTS:
            out = np.full(q.shape, 7, np.float32)
            core.attend(q, k, v, out, scale=0.5, bias=bias, threads=threads, level=level)
            assert same_bits(out, want), (level, threads)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, bfloat16])
@pytest.mark.parametrize("packed", [False, True])
def test_append_rows_matches_twin(dtype, packed):
    """GroupQueryAttention's present cache: the core fills rows [start,
    start + count) from strided new rows and zeros the rest, as the twin;
    rows before start keep what they held."""
    rng = np.random.default_rng(7)
    B, S, Nkv, H, L = 3, 5, 2, 12, 16
    if packed:   # key/value as slices of a packed QKV buffer
        qkv = rng.standard_normal((B, S, 4 + 2 * Nkv, H)).astype(dtype)
        new_k, new_v = qkv[:, :, 4:4 + Nkv], qkv[:, :, 4 + Nkv:]
    else:
        new_k = rng.standard_normal((B, S, Nkv, H)).astype(dtype)
        new_v = rng.standard_normal((B, S, Nkv, H)).astype(dtype)
    start = np.array([0, 7, 11], np.int64)
    count = np.array([5, 0, 5], np.int64)
    base = rng.standard_normal((B, Nkv, L, H)).astype(dtype)
    want_k, want_v = base.copy(), base.copy()
    twin.append_rows(new_k, new_v, start, count, want_k, want_v)
    got_k, got_v = base.copy(), base.copy()
    core.append_rows(new_k, new_v, start, count, got_k, got_v)
    assert same_bits(got_k, want_k) and same_bits(got_v, want_v)
    assert same_bits(got_k[1, :, :7], base[1, :, :7])
    with pytest.raises(ValueError, match="count"):
        core.append_rows(new_k, new_v, start, count + S, got_k, got_v)
