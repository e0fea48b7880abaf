"""Peak-memory accounting: what each kernel allocates, and a model walk.

Per node, :func:`peak_memory_bytes` returns a :class:`PeakMemory`:

- ``scratch``: the bytes the kernel allocates during one run besides its
  inputs and outputs (NumPy arrays of the adapter and of the Cython core,
  ``malloc``/``aligned_alloc`` of the C core, per-thread buffers counted
  once per thread that takes part), at their simultaneous peak.  Scratch
  the adapter keeps in the evaluator's buffer pool between runs (the
  "kept scratch slots" of Attention, QAttention, the int8 GEMMs) counts
  here too: it is memory the run needs.
- ``prepared``: the bytes prepared once per node from constant weights
  (initializers) and kept for the evaluator's life: MatMulNBits' int8
  layout or GEMM panel copy, MatMul-style packed panels (MoE, Attention,
  QAttention, the int8 GEMMs), QMoE's converted experts.  The same
  preparation made from weights that are *not* initializers is redone on
  every run and counts as scratch instead.

Every figure is computed from shapes, element types and attributes alone
(nothing is allocated or run); it follows the code of each adapter
(``ops/*.py``), its Cython core (``_kernels/*.pyx``) and its C header
(``_kernels/include``), whose constants are repeated here with the name of
the C macro they come from.  Where a kernel picks a route at run time from
values (not shapes), the figure is the largest route's: e.g. GroupQueryAttention's
total sequence length is taken as ``past + sequence`` unless the input is
an initializer.  Transient buffers a one-time preparation makes and frees
before the run computes (unpacked codes, ``isfinite`` masks) are not
counted.  A few NumPy-reference style kernels (QLinearAveragePool,
QLinearSoftmax, Unique) have per-element coefficients calibrated on
tracemalloc, said so in their functions.

Accuracy (tests/test_peak_memory.py, a sweep of shapes per operator, AVX2,
scalar and two threads): the NumPy part agrees with tracemalloc and the
total with a malloc meter to within 12 KiB + 4 %, where "agrees" means it
lies between the measured peak less the outputs and the measured peak
(outputs are often allocated after the scratch is freed, so the true
scratch is only known between those two).  The figures are upper bounds
where a run's phases do not overlap (e.g. GroupQueryAttention's rotated
copies and its attention buffers are summed).

The thread count matters for per-thread buffers: ``num_threads`` is the
evaluator's count (a kernel uses fewer when the work is small, as it
decides; that is followed where the adapter's threshold is known, else
``num_threads`` is the bound).  ``simd_level`` (default: the level in use,
``onnx_light_cpu.simd.state.level``) matters where tiles depend on the
instruction set (the GEMM panels' widths).

Model level, :func:`peak_memory`: the nodes run in graph order; the *live*
bytes before node i are every tensor produced so far (graph inputs
included, initializers excluded: they are reported separately as
``initializer_bytes``) whose last reader is node i or later, or that is a
graph output.  The node's peak is live + its outputs + its scratch; the
model's peak is the largest node peak.  ``prepared_bytes`` is the sum over
nodes (held from the first run on, in addition).  Shapes come from
``onnx.shape_inference.infer_shapes`` with the graph inputs' dimensions
bound to ``input_shapes``; a node whose input shape is still unknown
raises a ``ValueError`` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np
from onnx import TensorProto, helper

from .threads import product_threads

__all__ = [
    "ModelPeakMemory",
    "NodePeakMemory",
    "PeakMemory",
    "memory_function",
    "peak_memory",
    "peak_memory_bytes",
    "supported_memory_operators",
]

MS = "com.microsoft"


class PeakMemory(NamedTuple):
    """Bytes of one node: ``scratch`` during a run, ``prepared`` once."""

    scratch: int
    prepared: int


class NodePeakMemory(NamedTuple):
    """One node of :func:`peak_memory`'s walk."""

    index: int
    name: str
    domain: str
    op_type: str
    live_bytes: int     # tensors alive before the node runs (inputs included)
    output_bytes: int   # what it produces
    scratch: int
    prepared: int
    peak_bytes: int     # live_bytes + output_bytes + scratch


class ModelPeakMemory(NamedTuple):
    """The walk's result: the peak over nodes, the prepared total, one
    :class:`NodePeakMemory` per node, and the initializers' bytes (not in
    the peak)."""

    peak_bytes: int
    prepared_bytes: int
    per_node: tuple
    initializer_bytes: int


class _Estimate(NamedTuple):
    """A node's figures split by where they come from (tests compare
    ``numpy`` with ``tracemalloc`` and the total with a malloc meter)."""

    numpy: int = 0      # NumPy arrays of one run (tracemalloc sees them)
    native: int = 0     # C malloc of one run (tracemalloc does not)
    prepared: int = 0   # prepared once from initializers
    pooled: int = 0     # part of ``numpy`` the evaluator's pool keeps between runs
    # The NumPy bytes alive while the C scratch is (pooled part included);
    # None: all of ``numpy``.  Less where the phases do not overlap (e.g.
    # Attention's projection, then its attention): the peak is then the
    # larger phase.
    native_with: int | None = None

    def __add__(self, other):  # field-wise, not tuple concatenation
        if self.native_with is not None or other.native_with is not None:
            raise ValueError("estimates with phases are not added")
        return _Estimate(*(a + b for a, b in zip(self[:4], other[:4])))

    def scratch(self, reused_pool: bool = False) -> int:
        """Peak scratch of a run; ``reused_pool``: of a run that finds its
        kept scratch slots in the pool (any run after the first)."""
        drop = self.pooled if reused_pool else 0
        numpy = self.numpy - drop
        with_native = (self.numpy if self.native_with is None else self.native_with) - drop
        return max(numpy, with_native + self.native)


# -- the node's view -----------------------------------------------------------

_F32 = np.dtype(np.float32)


def _dtype(t) -> np.dtype | None:
    if t is None:
        return None
    if isinstance(t, (int, np.integer)):
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(t)))
    if isinstance(t, str) and t.startswith("tensor("):
        name = t[len("tensor("):-1].upper()
        return np.dtype(helper.tensor_dtype_to_np_dtype(getattr(TensorProto, name)))
    return np.dtype(t)


class _Node:
    """Shapes, types, constants and attributes of one node, by input index."""

    def __init__(self, node, input_shapes, input_types, initializers, num_threads, simd_level):
        self.node = node
        self.op = node.op_type
        names = list(node.input)
        self.names = names
        self.attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        self.shapes = _aligned(names, input_shapes, "input_shapes", tuple)
        self.types = _aligned(names, input_types, "input_types", _dtype)
        constants = () if initializers is None else initializers
        self.const = [bool(name) and name in constants for name in names]
        self.values = initializers if isinstance(initializers, Mapping) else {}
        self.outputs = list(node.output)
        self.threads = max(1, int(num_threads))
        if simd_level is None:
            from . import simd
            simd_level = simd.state.level
        self.level = int(simd_level)

    def has(self, i: int) -> bool:
        return i < len(self.names) and bool(self.names[i]) and self.shapes[i] is not None

    def shape(self, i: int) -> tuple:
        if not self.has(i):
            raise ValueError(f"{self.op}: input {i} is required for the memory estimate")
        return tuple(int(d) for d in self.shapes[i])

    def size(self, i: int) -> int:
        return math.prod(self.shape(i)) if self.has(i) else 0

    def dtype(self, i: int) -> np.dtype:
        t = self.types[i] if i < len(self.types) else None
        return t if t is not None else _F32

    def nbytes(self, i: int) -> int:
        return self.size(i) * self.dtype(i).itemsize if self.has(i) else 0

    def is_const(self, i: int) -> bool:
        return i < len(self.const) and self.const[i]

    def value(self, i: int):
        """The initializer's value of input i (a NumPy array), or None."""
        if not self.is_const(i):
            return None
        v = self.values.get(self.names[i])
        if v is None:
            return None
        if isinstance(v, TensorProto):
            from onnx import numpy_helper
            return numpy_helper.to_array(v)
        return np.asarray(v)

    def attr(self, name: str, default=None):
        v = self.attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    def wants(self, j: int) -> bool:
        return j < len(self.outputs) and bool(self.outputs[j])

    def n_outputs(self) -> int:
        n = len(self.outputs)
        while n and not self.outputs[n - 1]:
            n -= 1
        return n

    def threads_for(self, work: int, min_per_thread: int) -> int:
        """The adapters' rule (threads.decide_num_threads)."""
        if work < 2 * min_per_thread:
            return 1
        return max(1, min(self.threads, work // min_per_thread))


def _aligned(names, values, what, convert):
    if isinstance(values, Mapping):
        out = [values.get(n) if n else None for n in names]
    else:
        values = list(values)
        out = values + [None] * (len(names) - len(values))
        out = out[:max(len(names), len(values))]
    return [None if v is None else convert(v) for v in out]


# -- shared formulas (each names the code it follows) --------------------------

def _build_level(level: int) -> int:
    """olc_build_level: the highest level this build compiled."""
    from ._kernels import _cpu
    cap = 2 if _cpu.BUILT_WITH_AVX512 else 1
    return min(level, cap)


def _gemm_cfg(level: int) -> tuple[int, int]:
    """(mr, nr) of olc_sgemm_config: OLC_A5_* / OLC_A2_* / OLC_S_*."""
    lvl = _build_level(level)
    return {2: (12, 32), 1: (6, 16)}.get(min(lvl, 2), (4, 16))


def _aligned_floats(n: int) -> int:
    """Bytes of olc_gemm_alloc(n floats): rounded up to 64."""
    return max(64, (n * 4 + 63) // 64 * 64)


_GEMM_KC, _GEMM_MC, _GEMM_NC = 256, 512, 512  # OLC_GEMM_KC / _MC / _NC
_GEMM_BIG_A = 1 << 20  # OLC_GEMM_BIG_A


def _sgemm_packed_floats(level: int, K: int, N: int) -> int:
    """olc_sgemm_packed_size."""
    nr = _gemm_cfg(level)[1]
    return K * (-(-N // nr)) * nr


def _sgemm_native(level, batch, M, N, K, threads, *, b_packed: bool, a_direct: bool) -> int:
    """C scratch of olc_sgemm: the packed A (when A is not read in place)
    and one B block a thread (when B is not pre-packed)."""
    if M == 0 or N == 0 or batch == 0:
        return 0
    mr, nr = _gemm_cfg(level)
    direct = a_direct and _build_level(level) >= 1
    mu, nu = -(-M // mr), -(-N // nr)
    mt = -(-mu // (-(-_GEMM_MC // mr)))
    nt = -(-nu // (_GEMM_NC // nr))
    if threads > 1:
        per = 4 if M * K * 4 > _GEMM_BIG_A else 8  # tiles a thread (olc_sgemm_tiling)
        while batch * mt * nt < per * threads and nt < nu:
            nt += 1
        if batch * mt * nt < per * threads and mt == 1 and mu > 1:
            mt = 2
    total = 0 if direct else _aligned_floats(batch * K * mu * mr)
    if not b_packed:
        ncmax = -(-nu // nt) * nr
        total += (threads if threads > 1 else 1) * 8 + min(threads, batch * mt * nt) \
            * _aligned_floats(ncmax * _GEMM_KC)
    return total


# attention engine (olc_attention.h): OLC_ATTN_RMAX, OLC_ATTN_KC, OLC_ATTN_WTB
_ATTN_RMAX, _ATTN_KC, _ATTN_WTB = 64, 256, 128


def _attention_engine(B, Nq, Nkv, S, T, Dk, Dv, threads) -> int:
    """NumPy scratch of engines/attention.pyx ``attend``: one
    olc_attn_scratch_floats buffer a thread, and the partial rows of the
    decode chunks (S == 1, T > OLC_ATTN_KC)."""
    if B * Nq * S == 0 or T == 0:
        return 0
    Nkv = max(1, Nkv)
    group = max(1, Nq // Nkv)
    hb = min(group, _ATTN_RMAX)
    sb = max(1, _ATTN_RMAX // hb)
    nhb, nsb = -(-group // hb), -(-S // sb)
    nchunks = -(-T // _ATTN_KC) if S == 1 and T > _ATTN_KC else 1
    ntasks = B * Nkv * nhb * nsb * nchunks
    nth = max(1, min(threads, ntasks))
    sfl = _ATTN_RMAX * (Dk + Dv + 5 + _ATTN_WTB) + _ATTN_WTB * (Dk + Dv) + 64
    total = sfl * nth * 4
    if nchunks > 1:
        total += ntasks * hb * min(sb, S) * (Dv + 2) * 4
    return total


def _attention_threads(c: _Node, work: int, min_work: int) -> int:
    return c.threads_for(work, min_work)


# -- MatMulNBits ---------------------------------------------------------------

_NB_NC, _NB_KC = 4, 1024          # OLC_NB_NC, OLC_NB_KC (dot-panel scratch)
_NB_GEMM_MB, _NB_GEMM_KC = 144, 128  # OLC_NB_GEMM_MB, OLC_NB_GEMM_KC
_NB_DIRECT_MAX, _NB_DIRECT_MAX_ROWS = 8, 3
_Q8_NR = 16                        # OLC_Q8_NR


def _nb_route(level, M, bits, block, panel_rows) -> str:
    """olc_nb_route (weights taken as finite)."""
    if _build_level(level) == 0:
        return "dot"
    limit = _NB_DIRECT_MAX_ROWS if panel_rows else _NB_DIRECT_MAX
    if M <= limit and ((bits == 4 and block >= 32) or bits == 8):
        return "direct"
    return "dot" if M <= 4 and not panel_rows else "gemm"


def _nb_float_native(level, M, N, K, bits, block, panel_rows, threads) -> int:
    """olc_nb_scratch: C scratch of the float engine for M rows."""
    nb = -(-K // block)
    route = _nb_route(level, M, bits, block, panel_rows)
    if route == "direct":
        return M * (nb * block + nb) * 4
    if route == "gemm":
        nr = _gemm_cfg(level)[1]
        tw = 2 * nr
        per = (2 * tw * _NB_GEMM_KC + _NB_GEMM_MB * tw) * 4
        tiles = -(-M // _NB_GEMM_MB) * -(-N // tw)
        return max(1, min(threads, tiles)) * _aligned_floats(per // 4)
    tiles = -(-M // 64) * -(-N // _NB_NC)
    return max(1, min(threads, tiles)) * _aligned_floats(_NB_NC * _NB_KC)


def _q8_native(M, nb, block) -> int:
    """olc_q8_scratch: the int8 engine's quantized activations."""
    ablock = min(block, 256)
    anb = nb * (block // ablock)
    return M * anb * ablock + M * anb * 8


def _q8_prepared(N, nb, block, bits) -> int:
    """The int8 layout of matmul_nbits.pyx ``prepare`` (codes, scales, zero points)."""
    ablock = min(block, 256)
    anb = nb * (block // ablock)
    tiles = -(-N // _Q8_NR)
    per_block = ablock * _Q8_NR // 2 if bits == 4 else ablock * _Q8_NR
    return tiles * anb * (per_block + _Q8_NR * 4 + _Q8_NR)


def _nb_rows_prepared(N, nb, block, bits) -> int:
    """olc_nb_rows_bytes + two olc_nb_rows_params float arrays."""
    groups = -(-N // 16)
    return groups * nb * block * (8 if bits == 4 else 16) + 2 * groups * nb * 16 * 4


def _int8_format(bits, block) -> bool:
    return bits != 2 or 32 <= block <= 128


def _nbits_float_threads(c: _Node, M: int, work: int) -> int:
    """MatMulNBits' float engine: its thresholds (min_work_per_thread,
    min_decode_work_per_thread up to decode_rows rows) in the adapters' rule."""
    return product_threads(work, 1 << 18, 1 << 17, M <= 4, c.threads)


def _matmul_nbits(c: _Node) -> _Estimate:
    """ops/matmul_nbits.py and _kernels/matmul_nbits.pyx: float32 copies of
    half-type A and Y, the prepared weights (float32 scales and zero points;
    int8 layout olc_q8_prepare or panel rows olc_nb_prepare_rows), kept when
    B, scales and zero points are initializers; C scratch olc_q8_scratch or
    olc_nb_scratch (route olc_nb_route).  g_idx: dense float32 weights
    (packed once when constant) and olc_sgemm."""
    a = c.shape(0)
    dt = c.dtype(0)
    K, N = int(c.attr("K")), int(c.attr("N"))
    bits, block = int(c.attr("bits", 4)), int(c.attr("block_size"))
    level4 = int(c.attr("accuracy_level", 0)) == 4
    nb = -(-K // block)
    M = math.prod(a[:-1])
    if c.size(1) == 0:
        return _Estimate()
    narrow = dt != _F32
    has_zp, has_g = c.has(3), c.has(4)
    const = c.is_const(1) and c.is_const(2) and (not has_zp or c.is_const(3))
    call = (M * K * 4 + M * N * 4) if narrow else 0  # widened A, float32 result
    if c.has(5) and c.dtype(5) != _F32:
        call += N * 4
    if has_g:
        const = const and c.is_const(4)
        dense = K * N * 4
        threads = _nbits_float_threads(c, M, M * N * K)
        native = _sgemm_native(c.level, 1, M, N, K, threads, b_packed=const, a_direct=True)
        if const:
            prepared = (_sgemm_packed_floats(c.level, K, N) + 16) * 4
            return _Estimate(numpy=call, native=native, prepared=prepared)
        # codes, gathered scales, their product and its transposed copy
        # (measured: 4 float32 [K, N] arrays at once), then the product
        return _Estimate(numpy=call + 4 * dense, native=native, native_with=call + dense)
    # what preparation keeps: float32 scales (a copy unless float32 already),
    # float32 zero points (uint8 ones are unpacked, then widened)
    kept = (N * nb * 4 if c.dtype(2) != _F32 else 0) + (N * nb * 4 if has_zp else 0)
    integer_zp = not has_zp or c.dtype(3) == np.uint8
    int8 = level4 and const and integer_zp and _int8_format(bits, block)
    work = M * N * K
    if int8:
        kept += _q8_prepared(N, nb, block, bits)
        native = _q8_native(M, nb, block)
    else:
        threads = _nbits_float_threads(c, M, work)
        panel_rows = const and bits in (4, 8)
        if panel_rows and _nb_route(c.level, M, bits, block, True) == "gemm":
            kept += _nb_rows_prepared(N, nb, block, bits)
        native = _nb_float_native(c.level, M, N, K, bits, block, panel_rows, threads)
    if const:
        return _Estimate(numpy=call, native=native, prepared=kept)
    return _Estimate(numpy=call + kept, native=native)


# -- attention family ----------------------------------------------------------

def _mask_arrays(c: _Node, mask_index: int, B: int, S: int, T: int, excluding: bool) -> int:
    """NumPy bytes of the key-padding forms: key ranges (B, S) int32 begin
    and end, or a float32 additive mask."""
    if not c.has(mask_index):
        return 0
    shape = c.shape(mask_index)
    if len(shape) == 1:   # lengths
        return 2 * B * S * 4 + B * 8 if excluding else B * T * 4 + B * T
    # a binary mask: tested for right padding (bool), else additive float32
    return c.size(mask_index) * (1 + 4) + B * 8 + (2 * B * S * 4 if excluding else 0)


_EXCLUDING_FILTER = -1e4  # ops/attention.py EXCLUDING_FILTER: filters at or below it cut keys


def _multi_head_attention(c: _Node) -> _Estimate:
    """ops/multi_head_attention.py: biased projections, key-padding and
    causal key ranges or additive masks, the engine's buffers
    (engines/attention.pyx ``attend``), or the dense scores for output qk."""
    q = c.shape(0)
    n = int(c.attr("num_heads"))
    B, S = q[0], q[1]
    if c.has(1) and len(c.shape(1)) == 4:
        _, _, L, h = c.shape(1)
        hv = c.shape(2)[3]
        rank4 = True
    elif c.has(1):
        L = c.shape(1)[1]
        h = q[2] // n
        hv = c.shape(2)[2] // n
        rank4 = False
    else:  # packed q, k, v (B, S, N, 3, H)
        L, h, hv, rank4 = S, q[-1], q[-1], False
    P = c.shape(6)[2] if c.has(6) else 0
    T = P + L
    numpy = 0
    if c.has(3):  # biased copies of the projections
        numpy += c.nbytes(0)
        if not rank4 and c.has(1):
            numpy += c.nbytes(1) + c.nbytes(2)
    excluding = float(c.attr("mask_filter_value", -10000.0)) <= _EXCLUDING_FILTER
    numpy += _mask_arrays(c, 4, B, S, T, excluding)
    if int(c.attr("unidirectional", 0)) and S > 1:
        numpy += 2 * B * S * 4 + S * 8
    if c.has(5):
        if c.dtype(5) != _F32:
            numpy += c.size(5) * 4
        if c.has(4):
            numpy += B * n * S * T * 4
    work = B * n * S * T * (h + hv)
    threads = _attention_threads(c, work, 1 << 19)
    engine = _attention_engine(B, n, n, S, T, h, hv, threads)
    if c.wants(3) and c.n_outputs() > 3:
        # after the engine: dense float32 scores from float32 copies of q and k
        engine = max(engine, B * n * S * T * 4 + B * n * S * h * 4 + B * n * T * h * 4)
    return _Estimate(numpy=numpy + engine)


def _group_query_attention(c: _Node) -> _Estimate:
    """ops/group_query_attention.py: core.gqa_rows' per-row arrays, the
    rotated query and key copies, a float32 bias or sink, the engine's
    buffers; output_qk's float32 scores after it."""
    q = c.shape(0)
    dt = c.dtype(0)
    item = dt.itemsize
    N, Nkv = int(c.attr("num_heads")), int(c.attr("kv_num_heads"))
    B, S = q[0], q[1]
    packed = not c.has(1)
    H = q[2] // (N + 2 * Nkv) if packed else q[2] // N
    P = c.shape(3)[2] if c.has(3) else 0
    total_value = c.value(6)
    total = int(np.asarray(total_value).reshape(-1)[0]) if total_value is not None else P + S
    numpy = 2 * B * 8 + B * 4 + 2 * B * S * 4  # gqa_rows: start, count, past, key ranges
    rotary = int(c.attr("do_rotary", 0))
    if rotary:
        if not c.has(9):
            numpy += B * S * 8  # own positions
        numpy += B * S * (N + Nkv) * H * item
    if c.has(10) and c.dtype(10) != _F32:
        numpy += c.size(10) * 4
    if c.has(11):
        numpy += N * 4
    work = B * N * S * max(total, 1) * H
    threads = _attention_threads(c, work, 1 << 18)
    engine = _attention_engine(B, N, Nkv, S, total, H, H, threads)
    if c.wants(3) and c.n_outputs() > 3:
        engine = max(engine, 2 * B * N * S * total * 4 + B * N * S * H * 4
                     + B * N * total * H * 4)
    return _Estimate(numpy=numpy + engine)


_FUSED_TASKS_PER_THREAD = 2  # ops/microsoft_attention.py FUSED_TASKS_PER_THREAD


def _microsoft_attention(c: _Node) -> _Estimate:
    """ops/microsoft_attention.py: fused (float32, constant weights, no
    cache): the per-head projection slot (kept), packed per-head weights
    (prepared), attend_projected's buffers and each task's olc_sgemm A
    panels.  Unfused: the float32 projection (a kept slot; a half-type copy
    too), packed weights or the GEMM's B blocks (olc_sgemm), then the
    engine's buffers."""
    from .ops import microsoft_attention as mod
    x = c.shape(0)
    B, S, hin = x
    dt = c.dtype(0)
    n = int(c.attr("num_heads"))
    total = c.shape(1)[1]
    sizes = c.attr("qkv_hidden_sizes")
    if sizes:
        dq, _, dv = (int(v) for v in sizes)
    else:
        dq = dv = total // 3
    h, hv = dq // n, dv // n
    P = c.shape(4)[3] if c.has(4) else 0
    T = P + S
    m = B * S
    proj_threads = c.threads_for(m * total * hin, 1 << 17)
    attn_threads = c.threads_for(B * n * S * T * (h + hv), 1 << 19)
    threads = max(proj_threads, attn_threads)
    excluding = float(c.attr("mask_filter_value", -10000.0)) <= _EXCLUDING_FILTER
    masks = _mask_arrays(c, 3, B, S, T, excluding)
    if int(c.attr("unidirectional", 0)) and S > 1:
        masks += 2 * B * S * 4 + S * 8
    if c.has(5) and c.dtype(5) != _F32:
        masks += c.size(5) * 4
    fused_tasks = getattr(mod, "FUSED_TASKS_PER_THREAD", _FUSED_TASKS_PER_THREAD)
    wants_present = c.wants(1)
    if (dt == _F32 and not c.has(4) and not wants_present and m * hin > 0 and h > 0 and hv > 0
            and c.is_const(1) and B * n >= fused_tasks * threads):
        width = 2 * h + hv
        slots = min(threads, B * n)
        prepared = (n * _sgemm_packed_floats(c.level, hin, width) + 16) * 4
        if c.has(2) and c.is_const(2):
            prepared += n * width * 4
        pooled = slots * S * width * 4
        nth = max(1, min(threads, B * n))
        sfl = _ATTN_RMAX * (h + hv + 5 + _ATTN_WTB) + _ATTN_WTB * (h + hv) + 64
        numpy = pooled + sfl * nth * 4 + masks
        # each task's head projection: one single-threaded olc_sgemm (A
        # packed where the level reads no A in place)
        native = nth * _sgemm_native(c.level, 1, S, width, hin, 1, b_packed=True,
                                     a_direct=True)
        return _Estimate(numpy=numpy, native=native, prepared=prepared, pooled=pooled)
    pooled = m * total * 4
    prepared = native = 0
    numpy = masks
    if c.has(2) and c.dtype(2) != _F32:
        numpy += c.size(2) * 4
    if c.is_const(1):
        prepared = (_sgemm_packed_floats(c.level, hin, total) + 16) * 4
        native = _sgemm_native(c.level, 1, m, total, hin, proj_threads, b_packed=True,
                               a_direct=dt == _F32)
    else:
        native = _sgemm_native(c.level, 1, m, total, hin, proj_threads, b_packed=False,
                               a_direct=dt == _F32)
    if dt != _F32:
        pooled += m * total * dt.itemsize
    numpy += pooled + _attention_engine(B, n, n, S, T, h, hv, attn_threads)
    return _Estimate(numpy=numpy, native=native, prepared=prepared, pooled=pooled,
                     native_with=pooled)


def _qattention(c: _Node) -> _Estimate:
    """ops/qattention.py: the float32 projection (a kept slot), the packed
    int8 weights (gemm_int8 packed_size + colsum_size), olc_i8_gemm_run's A
    panels and row sums, the engine's buffers."""
    from ._kernels.engines import gemm_int8
    x = c.shape(0)
    B, S, hin = x
    n = int(c.attr("num_heads"))
    total = c.shape(1)[1]
    h = total // 3 // n
    P = c.shape(8)[3] if c.has(8) else 0
    T = P + S
    m = B * S
    pack = gemm_int8.packed_size(hin, total) + gemm_int8.colsum_size(total) * 4
    pooled = m * total * 4
    excluding = float(c.attr("mask_filter_value", -10000.0)) <= _EXCLUDING_FILTER
    numpy = pooled + _mask_arrays(c, 5, B, S, T, excluding)
    if int(c.attr("unidirectional", 0)) and S > 1:
        numpy += 2 * B * S * 4 + S * 8
    attn_threads = c.threads_for(B * n * S * T * 2 * h, 1 << 19)
    numpy += _attention_engine(B, n, n, S, T, h, h, attn_threads)
    native = _i8_native(c.level, 1, m, hin)
    if c.is_const(1):
        return _Estimate(numpy=numpy, native=native, prepared=pack, pooled=pooled)
    return _Estimate(numpy=numpy + pack, native=native, pooled=pooled)


# -- mixture of experts --------------------------------------------------------

_MOE_TILE = 256  # OLC_MOE_TILE
_MOE_CHUNK = 64  # OLC_MOE_CHUNK


def _moe_forward_native(T, H, E, k, R1, NI, gated) -> int:
    """olc_moe_forward's buffers (routing, one tile of rows for each
    stage) and olc_moe_group's."""
    if T == 0:
        return 0
    tile = min(T * k, _MOE_TILE)
    total = (E + 1) * 8 + 2 * (T * k) * 4
    total += _aligned_floats(tile * H) * 2 + _aligned_floats(tile * R1) + _aligned_floats(
        tile * NI) + (_aligned_floats(tile * NI) if gated else 0)
    total += 2 * (T * k + 1) * 4 + E * 4 + E * 8  # olc_moe_group
    return total


def _moe_tokens(c: _Node) -> tuple[int, int]:
    x = c.shape(0)
    return math.prod(x[:-1]), x[-1]


def _moe(c: _Node) -> _Estimate:
    """ops/moe.py and olc_moe.h: experts packed for the float GEMM
    (moe.pyx pack_float, prepared when constant), float32 copies of half
    types, olc_moe_forward's row tiles and routing arrays."""
    T, H = _moe_tokens(c)
    dt = c.dtype(0)
    E, rows1, _ = c.shape(2)
    fused = c.attr("activation_type", "relu") == "swiglu" and int(c.attr("swiglu_fusion", 0)) == 1
    inter = rows1 // (2 if fused else 1)
    k = int(c.attr("k", 1))
    numpy = 0
    if dt != _F32:
        numpy += T * H * 4 * 2 + T * E * 4  # float32 tokens and result, logits
    pack1 = (E * _sgemm_packed_floats(c.level, H, rows1) + 16) * 4 + E * 8
    pack2 = (E * _sgemm_packed_floats(c.level, inter, H) + 16) * 4 + E * 8
    prepared = 0
    for index, pack in ((2, pack1), (4, pack2)):
        if c.is_const(index):
            prepared += pack
        else:
            numpy += pack
    for index in (3, 5):
        if c.has(index) and c.dtype(index) != _F32:
            if c.is_const(index):
                prepared += c.size(index) * 4
            else:
                numpy += c.size(index) * 4
    native = _moe_forward_native(T, H, E, k, rows1, inter, False)
    if _build_level(c.level) == 0:  # the scalar GEMM packs its A rows
        tile = min(T * k, _MOE_TILE)
        native += _sgemm_native(c.level, 1, tile, max(rows1, H), max(H, inter), 1,
                                b_packed=True, a_direct=False)
    return _Estimate(numpy=numpy, native=native, prepared=prepared)


_PANEL_MIN_ROWS = 24  # ops/moe.py PANEL_MIN_ROWS


def _qmoe(c: _Node) -> _Estimate:
    """ops/moe.py QMoE: experts converted once for the MatMulNBits engines
    (prepare_nbits) or the panel decoder (pack_codes), olc_moe_forward's
    tiles, and per projection the engine's C scratch (olc_nb_scratch,
    olc_q8_scratch, or a K x OLC_MOE_CHUNK decoded chunk a thread)."""
    T, H = _moe_tokens(c)
    dt = c.dtype(0)
    E = c.shape(2)[0]
    k = int(c.attr("k", 1))
    bits = int(c.attr("expert_weight_bits", 4))
    proj_bits = [bits if c.attr(f"fc{i}_expert_weight_bits") is None
                 else int(c.attr(f"fc{i}_expert_weight_bits")) for i in (1, 2, 3)]
    block_size = int(c.attr("block_size", 0))
    level4 = int(c.attr("accuracy_level", 0)) == 4
    fused = c.attr("activation_type", "relu") == "swiglu" and int(c.attr("swiglu_fusion", 0)) == 1
    f = 2 if fused else 1
    has3 = c.has(8)
    # output-major: fc2 is [E, H, packed(inter)], fc1 [E, f*inter, packed(H)]
    rows1 = c.shape(2)[1]
    input_major = False
    if block_size and not fused and not any(c.has(11 + i) for i in range(3)):
        # the input-major layout when fc1 is [E, H, packed(inter)]
        if rows1 == H and c.shape(5)[1] != H:
            input_major = True
    if input_major:
        inter = c.shape(5)[1]
    else:
        inter = rows1 // f
    specs = [(0, 2, f * inter, H), (1, 5, H, inter)]
    if has3:
        specs.append((2, 8, inter, H))
    zps = [c.has(11 + i) for i in range(3)]

    def int8_projection(which, index, K) -> bool:
        b = proj_bits[which]
        if not block_size or K % block_size:
            return False
        if not (b == 8 or (b == 4 and level4)):
            return False
        return all(not c.has(i) or c.is_const(i) for i in (index, index + 1, 11 + which))

    int8 = [int8_projection(which, index, K) for which, index, N, K in specs]
    nbits_route = not input_major and (T * k < _PANEL_MIN_ROWS * E or any(int8) or any(zps))
    numpy = native = prepared = 0
    if dt != _F32:
        numpy += T * H * 4 * 2 + T * E * 4
    for index in (4, 7, 10):
        if c.has(index) and c.dtype(index) != _F32:
            if c.is_const(index):
                prepared += c.size(index) * 4
            else:
                numpy += c.size(index) * 4
    tile = min(T * k, _MOE_TILE)
    engine = transient = 0
    for (which, index, N, K), use_int8 in zip(specs, int8):
        b = proj_bits[which]
        const = all(not c.has(i) or c.is_const(i) for i in (index, index + 1, 11 + which))
        if nbits_route:
            block = block_size or 128
            if block > K:
                block = max(16, 1 << (K - 1).bit_length())
            nb = -(-K // block)
            size = E * N * nb * (block * b // 8)
            if not (block_size and c.dtype(index + 1) == _F32):  # else the input itself
                size += E * N * nb * 4
            transient = max(transient, 2 * E * N * nb * block)  # unpacked, padded codes
            if zps[which]:
                size += E * N * nb * 4
            if use_int8:
                size += E * _q8_prepared(N, nb, block, b)
                engine = max(engine, _q8_native(tile, nb, block))
            else:
                engine = max(engine, _nb_float_native(c.level, tile, N, K, b, block, False,
                                                      c.threads))
        else:
            nr = _gemm_cfg(c.level)[1]
            npad = -(-N // nr) * nr
            size = E * _sgemm_packed_floats(c.level, K, N)
            transient = max(transient, E * N * K)  # the signed codes, unpacked
            if input_major:
                size += E * K * (-(-npad // block_size)) * 4
            else:
                groups = 1 if block_size == 0 else -(-K // block_size)
                size += E * npad * groups * 4
            threads = max(1, min(c.threads, -(-N // _MOE_CHUNK)))
            engine = max(engine, threads * (_aligned_floats(K * _MOE_CHUNK)) + threads * 8)
        if const:
            prepared += size
        else:
            numpy += size
    native = _moe_forward_native(T, H, E, k, f * inter, inter, has3) + engine
    if numpy:  # weights converted on every run: the conversion's peak too
        numpy += transient
    return _Estimate(numpy=numpy, native=native, prepared=prepared)


# -- int8 GEMMs ------------------------------------------------------------------

def _i8_native(level, batch, M, K) -> int:
    """olc_i8_gemm_run: A packed in row blocks (int16 pairs, bytes at the
    VNNI level, whose AMX tiles round K to 64 from 16 rows) and the row sums.
    An upper bound: where the engine reads a uint8 A in place it packs
    nothing (the operators' shapes do not say whether A is uint8)."""
    from ._kernels import _cpu
    lvl = level if _cpu.BUILT_WITH_AVX512 else min(level, 1)
    mr = {1: 6, 0: 4}.get(lvl, 8)
    lda = (K + 3) // 4 * 4
    if lvl == 3 and M >= 16:  # AMX where the CPU has it: the larger layout
        mr, lda = 32, -(-K // 64) * 64
    elem = 1 if lvl == 3 else 2
    a_bytes = batch * -(-M // mr) * mr * lda * elem
    return (a_bytes + 63) // 64 * 64 + (batch * M + 1) * 4


def _int8_pack(K, N, batches=1) -> int:
    from ._kernels.engines import gemm_int8
    return batches * (gemm_int8.packed_size(K, N) + gemm_int8.colsum_size(N) * 4)


def _matmul_shapes(a, b):
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    M, K = a2[-2:]
    N = b2[-1]
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    b_batches = math.prod(b2[:-2]) if len(b2) > 2 else 1
    return math.prod(batch) if batch else 1, M, K, N, b_batches


def _integer_to_float(c: _Node, a_index: int, b_index: int, out_dtype) -> _Estimate:
    """ops/quantization.py (DynamicQuantizeMatMul, MatMulIntegerToFloat): B
    packed (prepared when constant), a float32 result slot for half types,
    olc_i8_gemm_run's A panels and row sums."""
    batches, M, K, N, b_batches = _matmul_shapes(c.shape(a_index), c.shape(b_index))
    pack = _int8_pack(K, N, b_batches)
    numpy = pooled = 0
    if out_dtype != _F32:
        pooled += batches * M * N * 4
    numpy += pooled
    native = _i8_native(c.level, batches, M, K)
    if c.is_const(b_index):
        return _Estimate(numpy=numpy, native=native, prepared=pack, pooled=pooled)
    return _Estimate(numpy=numpy + pack, native=native, pooled=pooled)


def _dynamic_quantize_matmul(c: _Node) -> _Estimate:
    e = _integer_to_float(c, 0, 1, _F32)
    a_q = c.size(0)  # the quantized A, a kept scratch slot
    return e + _Estimate(numpy=a_q, pooled=a_q)


def _matmul_integer_to_float(c: _Node) -> _Estimate:
    return _integer_to_float(c, 0, 1, c.dtype(2))


def _qgemm(c: _Node) -> _Estimate:
    """ops/quantization.py QGemm: int32 accumulator and product (kept
    slots), the float32 epilogue in NumPy, B packed (prepared when
    constant), olc_i8_gemm_run's A panels."""
    a, b = c.shape(0), c.shape(3)
    transA, transB = int(c.attr("transA", 0)), int(c.attr("transB", 0))
    M, K = (a[1], a[0]) if transA else a
    N = b[0] if transB else b[1]
    pooled = 2 * M * N * 4  # int32 accumulator and product: kept scratch slots
    numpy = pooled + 2 * M * N * 4  # float32 epilogue (converted, scaled)
    if c.has(8):
        numpy += M * N * 4
    if transA:
        numpy += M * K
    pack = _int8_pack(K, N) + (K * N if transB else 0)
    native = _i8_native(c.level, 1, M, K)
    if c.is_const(3):
        return _Estimate(numpy=numpy, native=native, prepared=pack, pooled=pooled)
    return _Estimate(numpy=numpy + pack, native=native, pooled=pooled)


_NUMPY_UFUNC_BUFFER = 8192 * 8  # NumPy's NPY_BUFSIZE elements, float64

# -- float GEMMs -----------------------------------------------------------------

def _fused_matmul(c: _Node) -> _Estimate:
    """ops/fused_matmul.py on the GEMM engine: B packed once when constant
    (MatMul's _packed_b), olc_sgemm's A panels and B blocks, a float32
    product for half types."""
    a, b = c.shape(0), c.shape(1)
    if int(c.attr("transA", 0)) and len(a) >= 2:
        a = a[:-2] + (a[-1], a[-2])
    if int(c.attr("transB", 0)) and len(b) >= 2:
        b = b[:-2] + (b[-1], b[-2])
    batches, M, K, N, b_batches = _matmul_shapes(a, b)
    dt = c.dtype(0)
    threads = c.threads_for(batches * M * N * K, 1 << 17)
    direct = dt == _F32 and not int(c.attr("transA", 0))
    numpy = batches * M * N * 4 if dt != _F32 else 0  # the float32 product
    if c.is_const(1) and batches == 1:
        prepared = (b_batches * _sgemm_packed_floats(c.level, K, N) + 16) * 4
        native = _sgemm_native(c.level, batches, M, N, K, threads, b_packed=True,
                               a_direct=direct)
        return _Estimate(numpy=numpy, native=native, prepared=prepared)
    native = _sgemm_native(c.level, batches, M, N, K, threads, b_packed=False, a_direct=direct)
    return _Estimate(numpy=numpy + batches * 16, native=native)


def _fused_gemm(c: _Node) -> _Estimate:
    """ops/matmul.py Gemm with the activation epilogue: as FusedMatMul, plus
    NumPy's handling of beta * C."""
    a, b = c.shape(0), c.shape(1)
    M = a[1] if int(c.attr("transA", 0)) else a[0]
    K = a[0] if int(c.attr("transA", 0)) else a[1]
    N = b[0] if int(c.attr("transB", 0)) else b[1]
    dt = c.dtype(0)
    threads = c.threads_for(M * N * K, 1 << 17)
    direct = dt == _F32 and not int(c.attr("transA", 0))
    # beta * C into the float32 product: for float32 C a broadcast ufunc
    # through NumPy's buffer (8192 elements of float64, measured); half
    # types: C widened, and the float32 product
    if dt == _F32:
        numpy = _NUMPY_UFUNC_BUFFER if c.has(2) else 0
    else:
        numpy = M * N * 4 + c.size(2) * 4
    if c.is_const(1):
        prepared = (_sgemm_packed_floats(c.level, K, N) + 16) * 4
        native = _sgemm_native(c.level, 1, M, N, K, threads, b_packed=True, a_direct=direct)
        return _Estimate(numpy=numpy, native=native, prepared=prepared)
    return _Estimate(numpy=numpy, native=_sgemm_native(c.level, 1, M, N, K, threads,
                                                        b_packed=False, a_direct=direct))


# -- no scratch, or small and NumPy-side ----------------------------------------------

def _none(c: _Node) -> _Estimate:
    """Kernels that write their outputs from their inputs directly (the
    norms, the activations, GatherBlockQuantized, RotaryEmbedding, ...)."""
    return _Estimate()


def _embed_layer_norm(c: _Node) -> _Estimate:
    """int64 copies of the ids, positions and segment ids (zeros without
    segment ids but with a segment table)."""
    b, s = c.shape(0)
    return _Estimate(numpy=b * s * 8 * (3 if c.has(4) else 2) + b * 4)


def _qembed_layer_norm(c: _Node) -> _Estimate:
    """The word rows a run reads are dequantized on every run: the gathered
    codes, int32, then float32 (9 bytes an element at the peak, 4 kept).
    The position and segment tables, gamma and beta are dequantized whole
    and once (prepared) where they, their scales and zero points are
    initializers, else on every run the same way (of the position table
    only the first S rows).  Then the EmbedLayerNormalization core's ids:
    the int32 arange, int64 rows, positions (and segment ids)."""
    from .ops.qembed_layer_norm import QUANTIZED
    b, s = c.shape(0)
    h = c.shape(2)[1]
    peak, live, prepared = 9 * b * s * h, 4 * b * s * h, 0
    for group in QUANTIZED[1:]:  # (table, scale, zero point) but the word table's
        n = c.size(group[0])
        if all(c.is_const(i) for i in group):
            prepared += 4 * n
            continue
        if group is QUANTIZED[1]:  # the position table: its first S rows
            n = min(n, s * h)
        peak = max(peak, live + 8 * n)
        live += 4 * n
    ids = b * s * (4 + 8 + 8 + (8 if c.has(1) else 0))
    return _Estimate(numpy=max(peak, live + ids) + b * 4, prepared=prepared)


def _cdist(c: _Node) -> _Estimate:
    """B transposed to [K, N] (a contiguous copy)."""
    return _Estimate(numpy=c.nbytes(1))


def _trilu(c: _Node) -> _Estimate:
    """np.tri's boolean mask of one matrix (and its negation for lower),
    its aranges, and NumPy's ufunc buffer for the masked copy."""
    h, w = c.shape(0)[-2:]
    upper = int(c.attr("upper", 1)) != 0
    return _Estimate(numpy=h * w * (1 if upper else 2) + (h + w) * 8
                     + 8192 * c.dtype(0).itemsize)


def _unique(c: _Node) -> _Estimate:
    """np.unique's sort (values, permutation, inverse, counts) and the
    first-occurrence order: calibrated at 2 values and 26 bytes an element
    (tests/test_peak_memory.py)."""
    n = c.size(0)
    return _Estimate(numpy=n * (2 * c.dtype(0).itemsize + 26))


def _dequantize_linear(c: _Node) -> _Estimate:
    """int64 codes, the zero point subtracted (a second int64 array), then
    float32 ones."""
    n = c.size(0)
    return _Estimate(numpy=n * 16)


def _qlinear_binary(c: _Node) -> _Estimate:
    """Each operand not of the output's shape is broadcast to a copy."""
    a, b = c.shape(0), c.shape(3)
    out = np.broadcast_shapes(a, b)
    n = math.prod(out)
    return _Estimate(numpy=(n if a != out else 0) + (n if b != out else 0))


def _qlinear_lookup(c: _Node) -> _Estimate:
    """np.take through the 256-entry table: the codes as intp indices and
    a buffered result."""
    return _Estimate(numpy=c.size(0) * 9)


def _qlinear_concat(c: _Node) -> _Estimate:
    """Each input whose scale or zero point is not the output's is
    requantized through a table (np.take: intp indices, then the codes)."""
    sizes = [c.size(i) for i in range(2, len(c.names), 3) if c.has(i)]
    if not sizes:
        return _Estimate()
    return _Estimate(numpy=sum(sizes) + 8 * max(sizes))


def _qlinear_where(c: _Node) -> _Estimate:
    """X and Y requantized through tables (intp indices, codes), then np.where."""
    nx, ny = c.size(1), c.size(4)
    out = math.prod(np.broadcast_shapes(c.shape(0), c.shape(1), c.shape(4)))
    return _Estimate(numpy=max(9 * nx, nx + 9 * ny, nx + ny + out))


def _qlinear_global_average_pool(c: _Node) -> _Estimate:
    """int64 sums of the image (x.astype(int64))."""
    return _Estimate(numpy=c.size(0) * 8)


def _qlinear_average_pool(c: _Node) -> _Estimate:
    """The image dequantized to float32 (int32 codes on the way), padded,
    and the float32 window sums: calibrated at 15 bytes an input element
    (tests/test_peak_memory.py)."""
    return _Estimate(numpy=c.size(0) * 15)


def _qlinear_softmax(c: _Node) -> _Estimate:
    """int32 codes, table indices (int64) and float32 exponentials and
    quotients: calibrated at 36 bytes an element (tests/test_peak_memory.py)."""
    return _Estimate(numpy=c.size(0) * 36)


def _causal_conv(c: _Node) -> _Estimate:
    """float32 tap-major weights [K, C] (and bias) made once from
    initializers, else on every run."""
    w = c.shape(1)
    size = w[0] * w[-1] * 4
    bias = c.size(2) * 4 if c.has(2) and c.dtype(2) != _F32 else 0
    if c.is_const(1):
        return _Estimate(prepared=size + (bias if c.is_const(2) else 0),
                         numpy=0 if c.is_const(2) else bias)
    return _Estimate(numpy=size + bias)


def _fused_conv(c: _Node) -> _Estimate:
    """ops/conv.py (float32 only: inputs used as they are): the column tile
    of olc_conv_f32 (im2col into the packed-B layout), W's spread copy and
    olc_sgemm's scratch (A read in place; B packed per tile for the 1x1
    plain GEMM); depthwise convolutions a direct loop (3-wide rows: padded
    copies)."""
    from ._kernels import conv as core
    from .ops import conv as ops_conv
    x, w = c.shape(0), c.shape(1)
    n = len(x) - 2
    G = int(c.attr("group", 1))
    M, Cg, kernel = w[0], w[1], w[2:]
    if len(w) != len(x) or G < 1 or M % G or n < 1:
        return _Estimate()
    strides = list(c.attr("strides", None) or [1] * n)
    dilations = list(c.attr("dilations", None) or [1] * n)
    pads = list(c.attr("pads", None) or [0] * 2 * n)
    auto_pad = c.attr("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    out, begins = [], []
    for i in range(n):
        ek = (kernel[i] - 1) * dilations[i] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-x[2 + i] // strides[i])
            total = max(0, (o - 1) * strides[i] + ek - x[2 + i])
            begins.append(total)
        else:
            lo, hi = (0, 0) if auto_pad == "VALID" else (pads[i], pads[i + n])
            o = (x[2 + i] + lo + hi - ek) // strides[i] + 1
            begins.append(lo)
        out.append(o)
    P, kk, Mg = math.prod(out), math.prod(kernel), M // G
    if x[0] * M * P == 0:
        return _Estimate()
    if G > 1 and Cg == 1 and Mg == 1:
        # the direct loop; 3-wide rows at width stride 1 or 2 (2-D, 1-D)
        # read a zero-padded copy of their rows and write their output rows
        # at that width, one buffer a slot (conv.pyx)
        if n > 2 or kernel[-1] != 3 or strides[-1] not in (1, 2):
            return _Estimate()
        OW, R = out[-1], (out[0] if n == 2 else 1)
        kh, sh, dh = (kernel[0], strides[0], dilations[0]) if n == 2 else (1, 1, 1)
        threads = c.threads_for(x[0] * M * P * 3 * kh, ops_conv.DEPTHWISE_MIN_WORK_PER_THREAD)
        slots = threads if threads > 1 else 1
        width = (OW - 1) * strides[-1] + 2 * dilations[-1] + 1
        # a block of 8 channels at a time, a band of rows a task, a buffer
        # a slot: the core says whether the planes take that path, and its
        # buffer's size
        geom = ops_conv._geometry(1, x[2:], kernel, strides, begins, dilations, out)
        floats = core.dwc_buffer_floats(geom, ops_conv.DEPTHWISE_BLOCK_PLANE)
        if floats and floats * slots <= 1 << 22:
            return _Estimate(native=floats * slots * 4)
        rb = max(1, 32768 // (OW * 3 * kh)) if OW * 3 * kh else R
        floats = ((min(rb, R) - 1) * sh + (kh - 1) * dh + 1 + min(rb, R)) * width
        return _Estimate(native=floats * slots * 4 if floats * slots <= 1 << 22 else 0)
    K = Cg * kk
    pointwise = ops_conv._pointwise(kernel, strides, begins, x[2:], out)
    winograd = ops_conv._winograd_fits(G, kernel, strides, dilations, Cg, M)
    if c.is_const(1) and ops_conv._pixel_rows_fits(G, K, M, P, pointwise, winograd):
        geom = ops_conv._geometry(Cg, x[2:], kernel, strides, begins, dilations, out)
        return _conv_t(c, x, M, K, P, kk, geom)
    if winograd:
        return _winograd(c, x, M, Cg, out, begins)
    threads = c.threads_for(x[0] * M * P * K, 1 << 20)
    if K == 0:
        return _Estimate()
    # W with its rows spread over the cache sets (conv.weight_ld): made once
    # from an initializer, else on every run
    spread = (M * core.weight_ld(K) + 16) * 4
    weights = {"prepared": spread} if c.is_const(1) else {"numpy": spread}
    if pointwise:
        return _Estimate(native=_sgemm_native(c.level, 1, Mg, P, K, threads, b_packed=False,
                                              a_direct=True), **weights)
    pt = core.tile_cols(c.level, K, P, Mg, threads)
    if core.tiles_as_tasks(c.level, P, Mg, False, threads):
        # a buffer a slot (columns, lines, segments), made by its first
        # task, and each running task's one-thread olc_sgemm (B pre-packed)
        tasks = x[0] * G * -(-P // pt)
        return _Estimate(native=threads * 8 + min(threads, tasks) * (
            _aligned_floats(core.task_floats(c.level, K, pt))
            + _sgemm_native(c.level, 1, Mg, min(pt, P), K, 1, b_packed=True, a_direct=True)),
            **weights)
    cols = core.scratch_floats(c.level, K, P, Mg, False, threads)
    nr = _gemm_cfg(c.level)[1]
    npad = -(-pt // nr) * nr
    # the segment table (5 int64 a segment), the packing tasks' lines
    # (OLC_CONV_PACK_ROWS rows a slot, made by a slot's first task)
    tables = (pt + 1) * 40 + (threads if threads > 1 else 1) * 8 \
        + min(threads, -(-K // 16)) * _aligned_floats(16 * npad)
    return _Estimate(native=_aligned_floats(cols) + tables + _sgemm_native(
        c.level, 1, Mg, min(pt, P), K, threads, b_packed=True, a_direct=True), **weights)


def _conv_t(c: _Node, x, M, K, P, kk, geom) -> _Estimate:
    """The pixels as the GEMM's rows (olc_conv_f32_t): W^T packed once
    (prepared), the columns and the transposed output from the evaluator's
    pool, the offsets table and olc_sgemm's scratch (none: A read in place,
    B pre-packed)."""
    from ._kernels import conv as core
    threads = c.threads_for(x[0] * M * P * K, 1 << 20)
    scratch = core.t_scratch(geom, M, x[0]) * 4
    rows = core.t_images(geom, x[0]) * P  # a chunk's pixels
    native = P * kk * 8 + _sgemm_native(c.level, 1, rows, M, K, threads, b_packed=True,
                                        a_direct=True)
    prepared = (_sgemm_packed_floats(c.level, K, M) + 16) * 4
    return _Estimate(numpy=scratch, native=native, prepared=prepared, pooled=scratch)


def _winograd(c: _Node, x, M, C, out, begins) -> _Estimate:
    """Winograd F(2x2, 3x3) (olc_conv_wino_f32): the filters' 16 matrices
    packed once (prepared; their unpacked copy while preparing), the tiles'
    scratch from the evaluator's pool, and olc_sgemm's (none where it reads
    A in place)."""
    from ._kernels import conv as core
    threads = c.threads_for(x[0] * M * math.prod(out) * C * 9, 1 << 20)
    geom = np.array([C, 1, x[2], x[3], 1, 3, 3, 1, 1, 1, 0, begins[0], begins[1], 1, 1, 1, 1,
                     out[0], out[1]], dtype=np.int64)
    scratch = core.winograd_scratch(geom, M, threads) * 4
    T = -(-out[0] // 2) * -(-out[1] // 2)
    tb = max(8, (512 * 1024) // (64 * (C + M)))
    blocked = T >= 4 * tb
    rows = tb if blocked else T
    native = _sgemm_native(c.level, 16, rows, M, C, 1 if blocked else threads, b_packed=True,
                           a_direct=True) * (threads if blocked and threads > 1 else 1)
    prepared = 16 * _sgemm_packed_floats(c.level, C, M) * 4
    return _Estimate(numpy=scratch, native=native, prepared=prepared, pooled=scratch)


def _linear_attention(c: _Node) -> _Estimate:
    """The core's scratch (state blocks and staged tokens, per thread),
    kept with the node between runs."""
    from ._kernels import linear_attention as core
    q = c.shape(0)
    B, S = q[0], q[1]
    Hq, Hkv = int(c.attr("q_num_heads")), int(c.attr("kv_num_heads"))
    dk = c.shape(1)[2] // Hkv
    dv = c.shape(2)[2] // Hkv
    threads = 1
    if B * Hkv > 1:
        threads = c.threads_for(B * Hkv * max(dk * dv, 1) * (S + 2), 1 << 18)
    kept = core.scratch_floats(Hq, Hkv, dk, dv, c.level, threads) * 4
    return _Estimate(numpy=kept, pooled=kept)


_FUNCTIONS: dict[tuple[str, str], Callable[[_Node], _Estimate]] = {
    (MS, "MatMulNBits"): _matmul_nbits,
    (MS, "MultiHeadAttention"): _multi_head_attention,
    (MS, "GroupQueryAttention"): _group_query_attention,
    (MS, "Attention"): _microsoft_attention,
    (MS, "QAttention"): _qattention,
    (MS, "MoE"): _moe,
    (MS, "QMoE"): _qmoe,
    (MS, "DynamicQuantizeMatMul"): _dynamic_quantize_matmul,
    (MS, "MatMulIntegerToFloat"): _matmul_integer_to_float,
    (MS, "QGemm"): _qgemm,
    (MS, "FusedMatMul"): _fused_matmul,
    (MS, "FusedGemm"): _fused_gemm,
    (MS, "EmbedLayerNormalization"): _embed_layer_norm,
    (MS, "QEmbedLayerNormalization"): _qembed_layer_norm,
    (MS, "CDist"): _cdist,
    (MS, "Trilu"): _trilu,
    (MS, "Unique"): _unique,
    (MS, "DequantizeLinear"): _dequantize_linear,
    (MS, "QLinearAdd"): _qlinear_binary,
    (MS, "QLinearMul"): _qlinear_binary,
    (MS, "QLinearLeakyRelu"): _qlinear_lookup,
    (MS, "QLinearSigmoid"): _qlinear_lookup,
    (MS, "QLinearConcat"): _qlinear_concat,
    (MS, "QLinearWhere"): _qlinear_where,
    (MS, "QLinearGlobalAveragePool"): _qlinear_global_average_pool,
    (MS, "QLinearAveragePool"): _qlinear_average_pool,
    (MS, "QLinearSoftmax"): _qlinear_softmax,
    (MS, "CausalConvWithState"): _causal_conv,
    (MS, "LinearAttention"): _linear_attention,
    (MS, "FusedConv"): _fused_conv,
}
for _op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "GatherBlockQuantized",
            "BiasGelu", "Gelu", "FastGelu", "QuickGelu", "Range", "ExpandDims", "QuantizeLinear",
            "RotaryEmbedding"):
    _FUNCTIONS[(MS, _op)] = _none
_FUNCTIONS[("", "SimplifiedLayerNormalization")] = _none


def _key(domain: str, op_type: str) -> tuple[str, str]:
    return ("" if domain in ("", "ai.onnx") else domain, op_type)


_BOUND: dict[tuple[str, str], Callable] = {}


def memory_function(domain: str, op_type: str) -> Callable | None:
    """The estimate function of an operator (``peak_memory_bytes`` for its
    nodes; the same object on every call), or None when there is none."""
    key = _key(domain, op_type)
    if key not in _FUNCTIONS:
        return None
    if key not in _BOUND:
        _BOUND[key] = _bind(key, op_type)
    return _BOUND[key]


def _bind(key, op_type: str) -> Callable:

    def estimate(node, input_shapes, input_types, initializers=None, num_threads=1,
                 simd_level=None):
        return peak_memory_bytes(node, input_shapes, input_types, initializers,
                                 num_threads=num_threads, simd_level=simd_level)

    estimate.__name__ = f"peak_memory_{op_type}"
    estimate.__doc__ = _FUNCTIONS[key].__doc__ or f"Memory estimate of {op_type}."
    estimate.__wrapped__ = _FUNCTIONS[key]  # what the docs pages name
    return estimate


def supported_memory_operators() -> tuple:
    """(domain, op_type) of every operator with an estimate."""
    return tuple(sorted(_FUNCTIONS))


def _estimate(node, input_shapes, input_types, initializers=None, num_threads=1,
              simd_level=None) -> _Estimate:
    key = _key(node.domain, node.op_type)
    fn = _FUNCTIONS.get(key)
    if fn is None:
        raise NotImplementedError(
            f"peak_memory_bytes: no memory estimate for {node.domain or 'ai.onnx'}::"
            f"{node.op_type} (only com.microsoft operators and SimplifiedLayerNormalization "
            "have one)")
    c = _Node(node, input_shapes, input_types, initializers, num_threads, simd_level)
    return fn(c)


def peak_memory_bytes(node, input_shapes, input_types, initializers=None, num_threads=1,
                      simd_level=None) -> PeakMemory:
    """Scratch and prepared bytes of one node (see the module doc).

    ``input_shapes``: the concrete shape of each input (a sequence aligned
    with ``node.input``, None for an absent one, or a dict by name);
    ``input_types``: their element types (TensorProto codes, NumPy dtypes
    or ``"tensor(float)"`` strings), same forms; ``initializers``: the
    names of the inputs that are initializers (a dict name -> value also
    works, and lets a constant such as GroupQueryAttention's
    total_sequence_length be read).  ``NotImplementedError`` for an
    operator without an estimate."""
    e = _estimate(node, input_shapes, input_types, initializers, num_threads, simd_level)
    return PeakMemory(int(e.scratch()), int(e.prepared))


# -- the model walk ---------------------------------------------------------------

def _bind_inputs(model, input_shapes):
    """A copy of the model whose graph inputs have the given static dims."""
    import onnx

    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    initializer_names = {t.name for t in bound.graph.initializer}
    if not isinstance(input_shapes, Mapping):
        inputs = [v for v in bound.graph.input if v.name not in initializer_names]
        input_shapes = {v.name: s for v, s in zip(inputs, input_shapes)}
    for value in bound.graph.input:
        shape = input_shapes.get(value.name)
        if shape is None:
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims) and len(dims) != len(shape):
            raise ValueError(f"peak_memory: input {value.name!r} has rank {len(dims)}, "
                             f"got shape {tuple(shape)}")
        value.type.tensor_type.shape.Clear()
        for d in shape:
            value.type.tensor_type.shape.dim.add().dim_value = int(d)
    return bound


def _static_shape(value_info):
    t = value_info.type.tensor_type
    if not t.HasField("shape"):
        return None
    dims = []
    for d in t.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(d.dim_value)
    return tuple(dims)


def _tensor_bytes(shape, elem_type) -> int:
    return math.prod(shape) * np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize


def peak_memory(model, input_shapes, num_threads=1, simd_level=None) -> ModelPeakMemory:
    """Walks ``model``'s main graph (see the module doc for what counts).

    ``input_shapes``: the shape of each graph input that is not an
    initializer, a dict by name or a sequence in graph order.  Nodes of the
    default domain other than SimplifiedLayerNormalization have no scratch
    estimate: they count their outputs only (scratch 0).  Raises
    ``ValueError`` naming the first node with an input or output whose
    shape inference could not make static."""
    import onnx

    from .schemas import register_schemas

    register_schemas()
    bound = _bind_inputs(model, input_shapes)
    inferred = onnx.shape_inference.infer_shapes(bound, data_prop=True)
    graph = inferred.graph
    known = {}
    types = {}
    for v in list(graph.input) + list(graph.value_info) + list(graph.output):
        shape = _static_shape(v)
        if v.type.tensor_type.elem_type:
            types[v.name] = v.type.tensor_type.elem_type
        if shape is not None:
            known[v.name] = shape
    initializers = {t.name: t for t in graph.initializer}
    for name, t in initializers.items():
        known[name] = tuple(t.dims)
        types[name] = t.data_type
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and node.output:
                known[node.output[0]] = tuple(value.dims)
                types[node.output[0]] = value.data_type
                initializers[node.output[0]] = value
    init_bytes = sum(_tensor_bytes(tuple(t.dims), t.data_type)
                     for t in graph.initializer)
    last_use = {}
    for i, node in enumerate(graph.node):
        for name in node.input:
            if name:
                last_use[name] = i
    outputs = {v.name for v in graph.output}

    def size_of(name):
        return _tensor_bytes(known[name], types.get(name, TensorProto.FLOAT))

    live = {v.name: size_of(v.name) for v in graph.input
            if v.name not in initializers and v.name in known}
    records = []
    peak = prepared_total = 0
    for i, node in enumerate(graph.node):
        where = (f"node {i} ({node.name or node.op_type}, "
                 f"{node.domain or 'ai.onnx'}::{node.op_type})")
        for name in list(node.input) + list(node.output):
            if name and name not in known:
                raise ValueError(f"peak_memory: the shape of {name!r} at {where} is unknown "
                                 "after shape inference (a symbolic or data-dependent "
                                 "dimension, or an operator without inference)")
        live_bytes = sum(live.values())
        out_bytes = sum(size_of(n) for n in node.output if n)
        scratch = prepared = 0
        if _key(node.domain, node.op_type) in _FUNCTIONS:
            shapes = [known.get(n) if n else None for n in node.input]
            in_types = [types.get(n) if n else None for n in node.input]
            inits = {n: initializers[n] for n in node.input if n in initializers}
            scratch, prepared = peak_memory_bytes(node, shapes, in_types, inits,
                                                  num_threads=num_threads, simd_level=simd_level)
        total = live_bytes + out_bytes + scratch
        peak = max(peak, total)
        prepared_total += prepared
        records.append(NodePeakMemory(i, node.name, node.domain, node.op_type, live_bytes,
                                      out_bytes, scratch, prepared, total))
        for n in node.output:
            if n:
                live[n] = size_of(n)
        for n in set(node.input):
            if n in live and last_use.get(n) == i and n not in outputs:
                del live[n]
        for n in node.output:  # produced and never read
            if n in live and n not in last_use and n not in outputs:
                del live[n]
    return ModelPeakMemory(int(peak), int(prepared_total), tuple(records), int(init_bytes))

