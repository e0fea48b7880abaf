"""com.microsoft GatherBlockQuantized: embedding rows gathered straight from
a block-quantized UINT8 table.

    y[n, ...] = (code(data[idx[n], ...]) - zero_point) * scale

Inputs: data (UINT8 [V, ..., P], 8/bits codes a byte, low bits first, so a
row holds D = P * 8 / bits codes), indices (INT32/INT64, any rank), scales
(FLOAT or FLOAT16 [V, ..., ceil(D / block_size)], the output type) and
optional zero_points (UINT8, packed like the codes, ceil(G / (8/bits)) bytes
a row, default 2^(bits-1)).  Attributes bits (2, 4, 8; default 4),
block_size (power of two >= 16; default 128), gather_axis (0) and
quantize_axis (the last axis; default 1).  Only the selected rows are
dequantized, with no scratch; negative indices wrap and out-of-range ones
give rows of zeros, as ONNX Runtime's CPU kernel does.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import gather_block_quantized as core
from ._base import Attr, Input, KernelOp, type_string

T = TensorProto
_UINT8 = np.dtype(np.uint8)
# ONNX Runtime also takes these data types; this kernel does not.
_UNSUPPORTED_DATA = ("int4", "uint4", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                     "float8_e5m2fnuz", "float4_e2m1fn")


class _Plan(NamedTuple):
    out_shape: tuple
    inner: int
    threads: int
    dtype: int  # the scales' and output's element type (TensorProto)


class GatherBlockQuantized(KernelOp):
    """Adapter of the gather_block_quantized core."""

    op_domain = "com.microsoft"
    element_types = (type_string(T.UINT8), type_string(T.INT32), type_string(T.INT64),
                     type_string(T.FLOAT), type_string(T.FLOAT16))
    # data: uint8, checked by _plan (other packed types are not implemented)
    inputs = (Input("data"), Input("indices", types=(T.INT32, T.INT64)),
              Input("scales", types=(T.FLOAT, T.FLOAT16)),
              Input("zero_points", types=(T.UINT8,), optional=True))
    attributes = (Attr("bits", "int", 4, allowed=(2, 4, 8)), Attr("block_size", "int", 128),
                  Attr("gather_axis", "int", 0), Attr("quantize_axis", "int", 1))
    # Output elements one thread must have before a second one helps.
    # Measured on 2 cores (AVX-512, 4-bit, float32 and float16 alike): one
    # thread wins up to 16K elements (2.1 vs 1.9 µs at 32K, 3.9 vs 2.8 µs at
    # 64K), so two threads from 32K.
    min_work_per_thread = 1 << 14

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        block = self.block_size
        if not (block >= 16 and block & (block - 1) == 0):
            self._reject_attribute(f"attribute block_size must be a power of two >= 16, "
                                   f"got {block!r}")

    def _plan(self, data, indices, scales, zero_points=None):
        op = self.onnx_node.op_type
        if data.dtype != _UINT8:
            if data.dtype.name in _UNSUPPORTED_DATA:
                raise NotImplementedError(self._input_error(
                    0, f"has element type {data.dtype.name}: {op} here takes packed uint8 "
                    "data only"))
            raise TypeError(self._input_error(0, f"has element type {data.dtype}, expected uint8"))
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

    def _execute(self, plan, data, indices, scales, zero_points=None):
        level = simd.state.level
        self._record_path((self.bits, scales.dtype, level), lambda: (
            f"gather_block_quantized_int{self.bits}_{scales.dtype.name}_"
            f"{simd.LEVEL_NAMES[core.level_used(self.bits, level)]}"))
        # (np.ascontiguousarray would turn scalar indices into rank 1)
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        if not indices.flags.c_contiguous:
            indices = np.ascontiguousarray(indices)
        if not scales.flags.c_contiguous:
            scales = np.ascontiguousarray(scales)
        if zero_points is not None and not zero_points.flags.c_contiguous:
            zero_points = np.ascontiguousarray(zero_points)
        y = self._new_output(plan.out_shape, scales.dtype)
        core.apply(data, indices, scales, zero_points, y, data.shape[0], plan.inner,
                   self.block_size, self.bits, plan.dtype, level, plan.threads)
        return (y,)


KERNELS = {"RegisterGatherBlockQuantizedKernel": (GatherBlockQuantized,)}
