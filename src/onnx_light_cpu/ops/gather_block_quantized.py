"""com.microsoft GatherBlockQuantized: slices gathered straight from a
block-quantized table, only the gathered ones dequantized.

Packed UINT8 data (the layout of ONNX Runtime's model builder):

    y[n, ...] = (code(data[idx[n], ...]) - zero_point) * scale

data is UINT8 [V, ..., P], 8/bits codes a byte, low bits first, so a row
holds D = P * 8 / bits codes; scales (FLOAT or FLOAT16 [V, ...,
ceil(D / block_size)], the output type); optional zero_points (UINT8,
packed like the codes, ceil(G / (8/bits)) bytes a row, default
2^(bits-1)).  bits 2, 4 or 8 (default 4), block_size a power of two >= 16
(default 128), gather_axis 0 and quantize_axis the last axis (default 1).
Output indices.shape + data.shape[1:-1] + (D,).

Typed data (ONNX Runtime 1.32's CPU kernel; the spec's "not supported"
no longer holds), one logical element per data element:

- INT4 / UINT4: value = (data - zero_point) * scale; zero_points optional,
  of data's element type and the scales' shape, default 0 (for INT4 and
  UINT4 alike); bits must be 4 (the default); block_size a power of two
  >= 16.
- FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ, FLOAT4E2M1:
  value = float(data) * scale; no zero_points; bits is ignored;
  block_size 0 means one block over the whole quantize axis; a scales
  dimension of 1 on an axis other than quantize_axis broadcasts.

For typed data any gather_axis g and quantize_axis q (even g == q) are
allowed, scales have data's rank with ceil(n / block_size) on axis q (a
short last block allowed) and data's dimensions elsewhere, and the output
is data.shape[:g] + indices.shape + data.shape[g+1:].  Scales FLOAT or
FLOAT16 as in ONNX Runtime, and BFLOAT16 beyond it (its CPU kernel has
none); data of rank 1 is accepted although ONNX Runtime's shape inference
asks for rank >= 2.

Everywhere: INT32/INT64 indices of any rank, negative ones wrap and
out-of-range ones give slices of zeros, as ONNX Runtime's CPU kernel does;
one float32 multiply per element, rounded once to the output type.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from ml_dtypes import bfloat16
from onnx import TensorProto, helper

from .. import simd
from .._kernels import gather_block_quantized as core
from ._base import Attr, Input, KernelOp, type_string

T = TensorProto
_UINT8 = np.dtype(np.uint8)
_INT_TYPED = (T.INT4, T.UINT4)
_FLOAT_TYPED = (T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ, T.FLOAT4E2M1)
_OUT_TYPES = {np.dtype(np.float32): T.FLOAT, np.dtype(np.float16): T.FLOAT16,
              np.dtype(bfloat16): T.BFLOAT16}


def _lut(element_type: int) -> np.ndarray:
    """The float32 value of each byte of a typed element (ml_dtypes keeps
    one element a byte; a 4-bit type reads the low nibble, as the packing
    of a tensor does)."""
    dtype = helper.tensor_dtype_to_np_dtype(element_type)
    codes = np.arange(256, dtype=np.uint8)
    if element_type in (T.INT4, T.UINT4, T.FLOAT4E2M1):
        codes &= 0x0F
    return codes.view(dtype).astype(np.float32)


# numpy dtype of typed data -> (byte -> value table, zero points allowed)
_TYPED = {np.dtype(helper.tensor_dtype_to_np_dtype(t)): (_lut(t), t in _INT_TYPED)
          for t in _INT_TYPED + _FLOAT_TYPED}


class _TypedPlan(NamedTuple):
    out_shape: tuple
    g: int
    q: int
    block: int      # the effective block (block_size 0: the quantize axis)
    sstrides: tuple  # scale offset step per data axis, 0 where the scales broadcast
    threads: int


class _Plan(NamedTuple):
    out_shape: tuple
    inner: int
    threads: int
    dtype: int  # the scales' and output's element type (TensorProto)


class GatherBlockQuantized(KernelOp):
    """Adapter of the gather_block_quantized core."""

    op_domain = "com.microsoft"
    element_types = tuple(type_string(t) for t in (T.UINT8,) + _INT_TYPED + _FLOAT_TYPED + (
        T.INT32, T.INT64, T.FLOAT, T.FLOAT16, T.BFLOAT16))
    # zero points: data's type (and only for uint8, int4, uint4: _plan)
    inputs = (Input("data", types=(T.UINT8,) + _INT_TYPED + _FLOAT_TYPED),
              Input("indices", types=(T.INT32, T.INT64)),
              Input("scales", types=(T.FLOAT, T.FLOAT16, T.BFLOAT16)),
              Input("zero_points", like=0, optional=True))
    # bits: 2, 4 or 8 for uint8 data, 4 for INT4/UINT4, ignored for FLOAT8/FLOAT4
    # (checked by _plan, as ONNX Runtime does)
    attributes = (Attr("bits", "int", 4), Attr("block_size", "int", 128),
                  Attr("gather_axis", "int", 0), Attr("quantize_axis", "int", 1))
    # Output elements one thread must have before a second one helps.
    # Measured on 2 cores (AVX-512, 4-bit, float32 and float16 alike): one
    # thread wins up to 16K elements (2.1 vs 1.9 µs at 32K, 3.9 vs 2.8 µs at
    # 64K), so two threads from 32K.
    min_work_per_thread = 1 << 14
    # Typed data (a table lookup per element, AVX-512, INT4 rows of a
    # 151936x896 table to float32), medians on 2 loaded cores: one thread
    # wins at 28K elements (15.7 vs 21.1 µs), two at 917K (1.83 -> 1.31 ms);
    # in between the load hides the difference.
    min_typed_work_per_thread = 1 << 15

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        block = self.block_size
        # 0 (FLOAT8/FLOAT4 data only) is checked by _typed_plan
        if not (block == 0 or (block >= 16 and block & (block - 1) == 0)):
            self._reject_attribute(f"attribute block_size must be a power of two >= 16 "
                                   f"(or 0 for FLOAT8/FLOAT4 data), got {block!r}")

    def _plan(self, data, indices, scales, zero_points=None):
        if data.dtype != _UINT8:
            return self._typed_plan(data, indices, scales, zero_points)
        op = self.onnx_node.op_type
        if self.bits not in (2, 4, 8):
            raise ValueError(f"{op}: attribute bits must be 2, 4 or 8 for uint8 data, "
                             f"got {self.bits}")
        if self.block_size == 0:
            raise ValueError(f"{op}: attribute block_size 0 is for FLOAT8/FLOAT4 data only")
        if scales.dtype == bfloat16:
            raise TypeError(self._input_error(
                2, "has element type bfloat16: with uint8 data the scales are float32 or "
                "float16"))
        rank = data.ndim
        if rank < 2:
            raise ValueError(self._input_error(0, f"must have rank >= 2, got shape {data.shape}"))
        if self.gather_axis not in (0, -rank):
            raise ValueError(f"{op}: attribute gather_axis must be 0 (or {-rank}), "
                             f"got {self.gather_axis}")
        if self.quantize_axis not in (rank - 1, -1):
            raise ValueError(f"{op}: attribute quantize_axis must be the last axis "
                             f"({rank - 1} or -1), got {self.quantize_axis}")
        D = data.shape[-1] * (8 // self.bits)
        groups = -(-D // self.block_size)
        want = data.shape[:-1] + (groups,)
        if scales.shape != want:
            raise ValueError(self._input_error(
                2, f"must have shape {want} (data {data.shape}, {self.bits} bits, "
                f"block_size {self.block_size}), got {scales.shape}"))
        if zero_points is not None:
            want = data.shape[:-1] + (core.zero_point_bytes(groups, self.bits),)
            if zero_points.shape != want:
                raise ValueError(self._input_error(
                    3, f"must have shape {want} ({groups} groups packed {8 // self.bits} "
                    f"a byte), got {zero_points.shape}"))
        out_shape = indices.shape + data.shape[1:-1] + (D,)
        return _Plan(out_shape, math.prod(data.shape[1:-1]),
                     self._num_threads(math.prod(out_shape), self.min_work_per_thread),
                     T.FLOAT16 if scales.dtype == np.float16 else T.FLOAT)

    def _typed_plan(self, data, indices, scales, zero_points):
        op = self.onnx_node.op_type
        with_zp = _TYPED[data.dtype][1]
        name = data.dtype.name
        rank = data.ndim
        if not 1 <= rank <= core.MAX_TYPED_RANK:
            raise ValueError(self._input_error(
                0, f"must have rank 1 to {core.MAX_TYPED_RANK}, got shape {data.shape}"))
        axes = {}
        for attr in ("gather_axis", "quantize_axis"):
            axis = getattr(self, attr)
            if not -rank <= axis < rank:
                raise ValueError(f"{op}: attribute {attr}={axis} is out of range for data of "
                                 f"rank {rank}")
            axes[attr] = axis % rank
        g, q = axes["gather_axis"], axes["quantize_axis"]
        if with_zp:
            if self.bits != 4:
                raise ValueError(f"{op}: attribute bits must be 4 for {name} data, "
                                 f"got {self.bits}")
            if self.block_size == 0:
                raise ValueError(f"{op}: attribute block_size 0 is for FLOAT8/FLOAT4 data "
                                 f"only, not {name}")
        elif zero_points is not None:
            raise ValueError(self._input_error(
                3, f"must be omitted for {name} data (symmetric quantization)"))
        n = data.shape[q]
        block = self.block_size or max(n, 1)
        want = tuple(-(-n // block) if k == q else d for k, d in enumerate(data.shape))
        broadcast = [not with_zp and k != q and scales.ndim == rank and scales.shape[k] == 1
                     for k in range(rank)]
        if scales.ndim != rank or any(s != w and not b for s, w, b in
                                      zip(scales.shape, want, broadcast)):
            extra = "" if with_zp else " (or 1 on an axis other than quantize_axis)"
            raise ValueError(self._input_error(
                2, f"must have shape {want}{extra} (data {data.shape}, quantize_axis {q}, "
                f"block_size {self.block_size}), got {scales.shape}"))
        if zero_points is not None and zero_points.shape != scales.shape:
            raise ValueError(self._input_error(
                3, f"must have the scales' shape {scales.shape}, got {zero_points.shape}"))
        step, sstrides = 1, [0] * rank
        for k in range(rank - 1, -1, -1):
            sstrides[k] = 0 if scales.shape[k] == 1 else step
            step *= scales.shape[k]
        out_shape = data.shape[:g] + indices.shape + data.shape[g + 1:]
        return _TypedPlan(out_shape, g, q, block, tuple(sstrides),
                          self._num_threads(math.prod(out_shape),
                                            self.min_typed_work_per_thread))

    def _execute_typed(self, plan, data, indices, scales, zero_points):
        level = simd.state.level
        self._record_path((data.dtype, scales.dtype, level), lambda: (
            f"gather_block_quantized_{data.dtype.name}_{scales.dtype.name}_"
            f"{simd.LEVEL_NAMES[core.typed_level_used(level)]}"))
        data, indices, scales = _c_contiguous(data, indices, scales)
        if zero_points is not None:
            zero_points = np.ascontiguousarray(zero_points).view(np.uint8)
        y = self._new_output(plan.out_shape, scales.dtype)
        core.apply_typed(data.view(np.uint8), indices, scales, zero_points,
                         _TYPED[data.dtype][0], y, plan.sstrides, plan.g, plan.q, plan.block,
                         _OUT_TYPES[scales.dtype], level, plan.threads)
        return (y,)

    def _execute(self, plan, data, indices, scales, zero_points=None):
        if type(plan) is _TypedPlan:
            return self._execute_typed(plan, data, indices, scales, zero_points)
        level = simd.state.level
        self._record_path((self.bits, scales.dtype, level), lambda: (
            f"gather_block_quantized_int{self.bits}_{scales.dtype.name}_"
            f"{simd.LEVEL_NAMES[core.level_used(self.bits, level)]}"))
        data, indices, scales, zero_points = _c_contiguous(data, indices, scales, zero_points)
        y = self._new_output(plan.out_shape, scales.dtype)
        core.apply(data, indices, scales, zero_points, y, data.shape[0], plan.inner,
                   self.block_size, self.bits, plan.dtype, level, plan.threads)
        return (y,)



def _c_contiguous(*arrays):
    """The arrays C-contiguous (copied only when they are not), None kept:
    np.ascontiguousarray alone would turn scalar indices into rank 1."""
    return [a if a is None or a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]

KERNELS = {"RegisterGatherBlockQuantizedKernel": (GatherBlockQuantized,)}
