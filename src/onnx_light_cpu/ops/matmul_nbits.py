"""com.microsoft MatMulNBits: activations times a block-quantized matrix.

    Y = A @ ((q - zero_point) * scale) + bias,   q: [K, N] integer codes

Inputs: A (FLOAT, FLOAT16 or BFLOAT16, any rank >= 1, last dimension K),
B (UINT8 [N, ceil(K / block_size), block_size * bits / 8]: each column's
codes along K, block after block, packed low bits first, the last block
padded), scales ([N, ceil(K / block_size)] or flat, A's type), optional
zero_points (packed UINT8 [N, ceil(ceil(K / block_size) * bits / 8)], each
column starting a byte; or A's float type with the scales' shape; flat
shapes accepted; default 2^(bits-1)), optional g_idx (below) and bias
([N], A's type).  Attributes K, N, bits (2, 4, 8; default 4), block_size (a
power of two >= 16), accuracy_level (4 selects the int8 engine, any other
value the float one, as ONNX Runtime does) and weight_prepacked (0 only).
A B with a zero dimension (and its other dimensions as above) is an omitted
projection: Y is the bias, or zeros.

g_idx (input 4, INT32 [K], or [ceil(K / block_size) * block_size] whose
entries past K are ignored, as ONNX Runtime takes it; values in
[0, ceil(K / block_size))): reduction index k takes the scale
scales[n, g_idx[k]]; UINT8 zero points are then ignored and the implicit
2^(bits-1) used, floating ones read as zero_points[n, g_idx[k]] (ONNX
Runtime 1.32's behaviour, measured for 4 bits).  Such weights are
dequantized whole to float32 [K, N] and multiplied in float32 by the GEMM
engine of MatMul (``_kernels/engines/gemm.pyx``: the same bits at any
thread count, scratch the memory estimate can state); when B, scales, zero
points and g_idx are initializers that happens once, the weights kept packed
for the engine (about K * N * 4 bytes, reported in ``prepared_bytes``).
Beyond ONNX Runtime: 2, 3 and 8 bits
with g_idx (its CPU kernel rejects 8 bits and reads 2-bit codes as 4-bit
nibbles, past the column's bytes; this kernel dequantizes them as
documented).

Three-bit weights, this package's extension (ONNX Runtime rejects bits=3):
B is UINT8 [N, ceil(K / 32), 12], block_size must be 32, and code p of a
block occupies bits [3p, 3p+3) of its 12 bytes read as one little-endian
integer (codes [1, 2, 5] begin with bytes 0x51 0x01); zero_points, when
given, are UINT8 [N, ceil(K / 32)] (one byte a block) with values 0-7,
default 4.  The bits after the last K element of each column (the padding
of its last block) must be zero.

Engines (``_kernels/matmul_nbits.pyx``): accuracy_level 4 with integer zero
points (implicit or UINT8; for 2 bits only blocks of 32 to 128) quantizes
each activation block (of min(block_size, 256) elements) to int8 and
multiplies with int32 accumulation on weights re-laid out once, when B,
scales and zero points are initializers; as in ONNX Runtime, whose int8
path needs prepacked weights, everything else takes the float engine
(dequantize in registers or in bounded panels, accumulate in float32; its
panels for M > 3 read a column-interleaved copy of constant 4/8-bit codes,
made on the first such call).  FLOAT16 and BFLOAT16 activations are widened to float32 and
the result narrowed once.  ``prepared_bytes`` and ``scratch_bytes`` on the
adapter instance report the memory the last call used besides inputs and
outputs.

Beyond ONNX Runtime 1.32's CPU kernel (which rejects them): 8-bit weights
with floating zero points, 2-bit blocks larger than 256, and bits=3.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels import cast as cast_core
from .._kernels import matmul_nbits as core
from .._kernels.engines import gemm as gemm_core
from ..memory import prepared_empty
from ..reference.matmul_nbits import codes_matrix
from ..threads import product_threads
from ._base import Attr, Input, KernelOp, type_string

T = TensorProto
_UINT8 = np.dtype(np.uint8)
_FLOAT_TYPES = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
_F32 = np.dtype(np.float32)
# FLOAT16 and BFLOAT16 are widened and narrowed by the cast core (F16C and
# AVX-512 loops; NumPy's float16 conversion is ~60x slower).
_NARROW = {np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(bfloat16): TensorProto.BFLOAT16}
# Sizes past this are rejected before anything is allocated.
_SIZE_LIMIT = 1 << 62
_EMPTY_LABEL = "matmul_nbits_omitted_weights"
_G_IDX_LABEL = "matmul_nbits_g_idx_dense_float32"
_ZERO = np.zeros(1, dtype=np.int64)  # the GEMM engine's one matrix offset


class _Plan(NamedTuple):
    omitted: bool  # B has a zero dimension: Y is the bias, or zeros
    M: int
    out_shape: tuple
    threads: int       # on the float engine
    int8_threads: int  # on the int8 engine


class MatMulNBits(KernelOp):
    """Adapter of the matmul_nbits core."""

    op_domain = "com.microsoft"
    element_types = tuple(type_string(t) for t in (T.FLOAT, T.FLOAT16, T.BFLOAT16, T.UINT8))
    # scales may be left out with an omitted B; zero points are uint8 or A's
    # type (checked by _plan).
    inputs = (Input("A", types=_FLOAT_TYPES), Input("B", types=(T.UINT8,)),
              Input("scales", like=0, optional=True),
              Input("zero_points", types=(T.UINT8,) + _FLOAT_TYPES, optional=True),
              Input("g_idx", types=(T.INT32,), optional=True),
              Input("bias", like=0, optional=True))
    attributes = (Attr("K", "int"), Attr("N", "int"), Attr("bits", "int", 4, allowed=(2, 3, 4, 8)),
                  Attr("block_size", "int"), Attr("accuracy_level", "int", 0),
                  Attr("weight_prepacked", "int", 0))
    # Multiply-adds one thread must have before a second one helps.
    # Measured on 2 cores (AVX-512, 4-bit, block 32), t2 / t1: on a Zen 5
    # the float engine broke even at 64K and two threads won from 128K, the
    # int8 engine (a fifth of the cost) from 512K; on an Intel Xeon, whose
    # second thread joins later, the float engine at 1x256x768 (196K) ran
    # 1.08 and the int8 engine at 128x64x256 (2M) 1.08, 128x256x512 (16M)
    # 0.64.  Two threads from 512K (float) and 4M (int8).
    min_work_per_thread = 1 << 18
    min_int8_work_per_thread = 1 << 21
    # Up to 4 rows (a decode step) both engines stream the weights once and
    # wait on memory: a thread per 2^17 on either
    # (threads.product_threads).  On 16 cores (an Intel Xeon, idle) an
    # 8-layer Qwen2-0.5B-shaped int4 decode step took 6.2-7.7 ms at 16
    # threads with the thresholds above (its 896 x 896 projections on one
    # thread) and 4.5 ms with this one.
    min_decode_work_per_thread = 1 << 17
    decode_rows = 4

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self.prepared_bytes = 0
        self.scratch_bytes = 0
        self._prepared = None
        self._prepared_key = None
        self._g_idx_packed = None  # constant g_idx weights packed for the GEMM engine
        self._g_idx_key = None     # (b, scales, zero points, g_idx, level) they came from
        K, N, bits, block = self.K, self.N, self.bits, self.block_size
        if self._attribute_error is not None:
            return
        if K < 1 or N < 1:
            self._reject_attribute(f"attributes K and N must be positive integers, "
                                   f"got K={K!r}, N={N!r}")
        elif not (block >= 16 and block & (block - 1) == 0):
            self._reject_attribute(f"attribute block_size must be a power of two >= 16, "
                                   f"got {block!r}")
        elif bits == 3 and block != 32:
            self._reject_attribute(f"bits=3 takes block_size 32, got {block}")
        elif self.weight_prepacked != 0:
            self._reject_attribute(f"weight_prepacked={self.weight_prepacked} (a provider's "
                                   "prepacked layout) is not supported; pass weight_prepacked=0")
        else:
            self.nb = -(-K // block)
            self.blob = 12 if bits == 3 else block * bits // 8
            self.zp_bytes = core.zero_point_bytes(self.nb, bits)
            sizes = (N * self.nb * self.blob, K * N, N * self.nb * block * 2)
            if max(sizes) >= _SIZE_LIMIT:
                self._reject_attribute(f"K={K}, N={N} make sizes that overflow 64-bit indexing")

    # ---- plan: shapes and types ----

    def _check_flat(self, index: int, value: np.ndarray, rows: int, cols: int, what: str) -> None:
        if value.shape not in ((rows, cols), (rows * cols,)):
            raise ValueError(self._input_error(
                index, f"must have shape ({rows}, {cols}) or ({rows * cols},) {what}, "
                f"got {value.shape}"))

    def _plan(self, a, b, scales=None, zero_points=None, g_idx=None, bias=None):
        dtype = a.dtype
        if g_idx is not None and g_idx.shape not in ((self.K,), (self.nb * self.block_size,)):
            raise ValueError(self._input_error(
                4, f"(g_idx) must have shape ({self.K},) or ({self.nb * self.block_size},), "
                f"got {g_idx.shape}"))
        if a.ndim < 1 or a.shape[-1] != self.K:
            raise ValueError(self._input_error(
                0, f"must have rank >= 1 and last dimension K={self.K}, got shape {a.shape}"))
        want = (self.N, self.nb, self.blob)
        omitted = False
        if b.shape != want:
            if b.ndim == 3 and b.size == 0 and all(d in (0, w) for d, w in zip(b.shape, want)):
                omitted = True
            else:
                raise ValueError(self._input_error(
                    1, f"must have shape {want} (K={self.K}, N={self.N}, bits={self.bits}, "
                    f"block_size={self.block_size}), got {b.shape}"))
        if bias is not None and bias.shape != (self.N,):
            raise ValueError(self._input_error(5, f"must have shape ({self.N},), "
                                                  f"got {bias.shape}"))
        if not omitted:
            if scales is None:
                raise ValueError(self._input_error(2, "is required but missing"))
            self._check_flat(2, scales, self.N, self.nb, "(N, ceil(K / block_size))")
            if zero_points is not None:
                if zero_points.dtype == _UINT8:
                    how = ("(one byte a block)" if self.bits in (3, 8)
                           else f"({self.nb} blocks packed {8 // self.bits} a byte)")
                    self._check_flat(3, zero_points, self.N, self.zp_bytes, how)
                elif zero_points.dtype != dtype:
                    raise TypeError(self._input_error(
                        3, f"has element type {zero_points.dtype}, expected uint8 or {dtype}"))
                elif self.bits == 3:
                    raise TypeError(self._input_error(3, "must be uint8 for bits=3"))
                else:
                    self._check_flat(3, zero_points, self.N, self.nb,
                                     "(N, ceil(K / block_size))")
        M = math.prod(a.shape[:-1])
        if M * self.K >= _SIZE_LIMIT or M * self.N >= _SIZE_LIMIT:
            raise ValueError(f"{self.onnx_node.op_type}: input 0 of shape {a.shape} makes "
                             "sizes that overflow")
        work = M * self.N * self.K
        few_rows, requested = M <= self.decode_rows, self._context.num_threads
        return _Plan(omitted, M, a.shape[:-1] + (self.N,),
                     product_threads(work, self.min_work_per_thread,
                                     self.min_decode_work_per_thread, few_rows, requested),
                     product_threads(work, self.min_int8_work_per_thread,
                                     self.min_decode_work_per_thread, few_rows, requested))

    # ---- preparation ----

    def _zero_points(self, zero_points):
        """Zero points as the core takes them: None, uint8 [N, nb] or float32."""
        if zero_points is None:
            return None
        if zero_points.dtype != _UINT8:
            return zero_points.reshape(self.N, self.nb).astype(np.float32)
        codes = np.empty((self.N, self.nb), dtype=np.uint8)
        core.unpack_zero_points(np.ascontiguousarray(zero_points), codes, self.bits)
        return codes

    def _prepare(self, b, scales, zero_points, constant: bool):
        level = self.accuracy_level if constant else 0
        scales32 = scales.reshape(self.N, self.nb)
        if scales32.dtype != _F32:
            scales32 = scales32.astype(np.float32)
        return core.prepare(b, scales32, self._zero_points(zero_points), self.bits,
                            self.block_size, self.K, self.N, level, constant)

    def _weights(self, dtype, b, scales, zero_points):
        """Prepared weights: made once when B, scales and zero points are
        initializers (the same arrays every run), else for this call."""
        key = self._prepared_key
        if (key is not None and key[0] is b and key[1] is scales and key[2] is zero_points
                and key[3] == dtype):
            return self._prepared
        if (self.bits == 3 and zero_points is not None and zero_points.dtype == _UINT8
                and zero_points.size and int(zero_points.max()) > 7):
            raise ValueError(self._input_error(
                3, f"holds {int(zero_points.max())}: 3-bit zero points are in [0, 7]"))
        self._check_padding(b)
        constant = self._constants(b, scales, zero_points)
        prepared = self._prepare(b, scales, zero_points, constant)
        if constant:
            self._prepared, self._prepared_key = prepared, (b, scales, zero_points, dtype)
        return prepared

    def _constants(self, b, scales, zero_points, g_idx=None) -> bool:
        """Whether the weight inputs given are all initializers."""
        return (self._constant_input(1) is b and self._constant_input(2) is scales
                and (zero_points is None or self._constant_input(3) is zero_points)
                and (g_idx is None or self._constant_input(4) is g_idx))

    def _check_padding(self, b) -> None:
        """bits=3: the bits after the last K element of each column are zero."""
        valid = self.K - (self.nb - 1) * 32  # codes of the last block
        if self.bits != 3 or valid == 32:
            return
        first = 3 * valid  # the first padding bit of the last block
        mask = np.zeros(12, np.uint8)
        mask[first // 8] = (0xFF << (first % 8)) & 0xFF
        mask[first // 8 + 1:] = 0xFF
        bad = np.flatnonzero((b[:, -1, :] & mask).any(axis=1))
        if bad.size:
            raise ValueError(self._input_error(
                1, f"has nonzero padding bits after the last K element (K={self.K}) in "
                f"column {int(bad[0])}: bits [{first}, 96) of a column's last 3-bit block "
                "must be zero"))

    def _dense(self, b, scales, zero_points, g_idx):
        """float32 [K, N] weights of a node with g_idx."""
        N, nb, K = self.N, self.nb, self.K
        groups = g_idx[:K]
        if groups.size and (int(groups.min()) < 0 or int(groups.max()) >= nb):
            raise ValueError(self._input_error(
                4, f"(g_idx) holds values in [{int(groups.min())}, {int(groups.max())}]: "
                f"group indices are in [0, {nb})"))
        self._check_padding(b)
        # codes, scales and product: three float32 [N, K] arrays at once
        self._check_bytes(f"the weights dequantized for g_idx ({K}x{N} float32)", 12 * K * N)
        q = codes_matrix(b, K, N, self.bits, self.block_size).astype(np.float32)
        s = scales.reshape(N, nb).astype(np.float32)[:, groups]
        if zero_points is None or zero_points.dtype == _UINT8:  # packed ones are ignored
            z = np.float32(1 << (self.bits - 1))
        else:
            z = zero_points.reshape(N, nb).astype(np.float32)[:, groups]
        return np.ascontiguousarray(((q - z) * s).T)

    def _g_idx_weights(self, b, scales, zero_points, g_idx, level, threads):
        """(packed, dense): the g_idx weights packed once for the GEMM engine
        when B, scales, zero points and g_idx are initializers (dense None),
        else dense float32 [K, N] for this call (packed None)."""
        held = self._g_idx_key
        if held is not None and held[4] == level and all(
                x is y for x, y in zip(held, (b, scales, zero_points, g_idx))):
            return self._g_idx_packed, None
        w = self._dense(b, scales, zero_points, g_idx)
        if not self._constants(b, scales, zero_points, g_idx):
            return None, w
        K, N = self.K, self.N
        packed = prepared_empty(gemm_core.packed_size(K, N, level), np.float32)
        gemm_core.pack_b(w, _ZERO, packed, N, 1, K, N, TensorProto.FLOAT, level, threads)
        self._g_idx_packed, self._g_idx_key = packed, (b, scales, zero_points, g_idx, level)
        return packed, None

    # ---- execute ----

    def _execute(self, plan, a, b, scales=None, zero_points=None, g_idx=None, bias=None):
        if plan.omitted:
            return self._omitted(plan, a, bias)
        if g_idx is not None:
            return self._execute_g_idx(plan, a, b, scales, zero_points, g_idx, bias)
        dtype = a.dtype
        prepared = self._weights(dtype, b, scales, zero_points)
        M, level = plan.M, simd.state.level
        threads = plan.int8_threads if prepared.int8 else plan.threads
        a2 = a.reshape(M, self.K)
        if not a2.flags.c_contiguous:
            a2 = np.ascontiguousarray(a2)
        if dtype != _F32:
            wide = np.empty((M, self.K), dtype=np.float32)
            cast_core.convert(a2, wide, TensorProto.FLOAT, _NARROW[dtype], level, threads)
            a2 = wide
        if bias is not None and (bias.dtype != _F32 or not bias.flags.c_contiguous):
            bias = np.ascontiguousarray(bias, dtype=np.float32)
        if dtype == _F32:
            y = self._new_output(plan.out_shape, dtype)
            y2 = y.reshape(M, self.N)
        else:
            y2 = np.empty((M, self.N), dtype=np.float32)
        label = core.matmul(prepared, a2, bias, y2, level, threads)
        self.prepared_bytes = prepared.prepared_bytes
        self.scratch_bytes = prepared.scratch_bytes(M, threads)
        if dtype != _F32:
            y = self._new_output(plan.out_shape, dtype)
            cast_core.convert(y2, y, _NARROW[dtype], TensorProto.FLOAT, level, threads)
        self._record_path(label, lambda: label)
        return (y,)

    def _execute_g_idx(self, plan, a, b, scales, zero_points, g_idx, bias):
        """Y with g_idx: float32 A times the dense weights, plus the bias,
        rounded once to A's type."""
        M, K, N, threads = plan.M, self.K, self.N, plan.threads
        level = gemm_core.level_used(simd.state.level)
        packed, w = self._g_idx_weights(b, scales, zero_points, g_idx, level, threads)
        a2 = np.ascontiguousarray(a.reshape(M, K), dtype=np.float32)
        narrow = a.dtype != _F32
        y = self._new_output(plan.out_shape, a.dtype)
        y2 = np.empty((M, N), dtype=np.float32) if narrow else y.reshape(M, N)
        if bias is not None:
            y2[...] = bias  # the engine adds the product to it
        gemm_core.sgemm(a2, _ZERO, packed, _ZERO, w if w is not None else a2, _ZERO, y2,
                        K, 1, N, 1, M, N, K, 1.0, bias is not None, TensorProto.FLOAT, level,
                        threads)
        if narrow:
            y[...] = y2.reshape(y.shape)
        self.prepared_bytes = 0 if packed is None else packed.nbytes
        self.scratch_bytes = ((0 if np.may_share_memory(a2, a) else a2.nbytes)
                              + (y2.nbytes if narrow else 0) + (0 if w is None else w.nbytes))
        self._record_path(_G_IDX_LABEL, lambda: _G_IDX_LABEL)
        return (y,)

    def _omitted(self, plan, a, bias):
        """Y of an omitted projection: the bias, or zeros."""
        y = self._new_output(plan.out_shape, a.dtype)
        y[...] = 0 if bias is None else bias
        self.prepared_bytes = self.scratch_bytes = 0
        self._record_path(_EMPTY_LABEL, lambda: _EMPTY_LABEL)
        return (y,)


KERNELS = {"RegisterMatMulNBitsKernel": (MatMulNBits,)}
