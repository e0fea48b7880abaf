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

import numpy as np
import onnx
from onnx import TensorProto

from .. import simd
from .._kernels import gather_block_quantized as core
from ._base import KernelOp, type_string

T = TensorProto
_UINT8 = np.dtype(np.uint8)
_SCALE_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float16)))
_INDEX_DTYPES = frozenset((np.dtype(np.int32), np.dtype(np.int64)))
# ONNX Runtime also takes these data types; this kernel does not.
_UNSUPPORTED_DATA = ("int4", "uint4", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                     "float8_e5m2fnuz", "float4_e2m1fn")


class GatherBlockQuantized(KernelOp):
    """Adapter of the gather_bq core; attributes are checked at run time (a
    constructor error would break building the evaluator)."""

    op_domain = "com.microsoft"
    element_types = (type_string(T.UINT8), type_string(T.INT32), type_string(T.INT64),
                     type_string(T.FLOAT), type_string(T.FLOAT16))
    # Output elements one thread must have before a second one helps.
    # Measured on 2 cores (AVX-512, 4-bit, float32 and float16 alike): one
    # thread wins up to 16K elements (2.1 vs 1.9 µs at 32K, 3.9 vs 2.8 µs at
    # 64K), so two threads from 32K.
    min_work_per_thread = 1 << 14

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        attrs = {att.name: onnx.helper.get_attribute_value(att) for att in onnx_node.attribute}
        self.bits = attrs.get("bits", 4)
        self.block_size = attrs.get("block_size", 128)
        self.gather_axis = attrs.get("gather_axis", 0)
        self.quantize_axis = attrs.get("quantize_axis", 1)
        op = onnx_node.op_type
        self._attr_error = None
        if self.bits not in (2, 4, 8):
            self._attr_error = f"{op}: attribute bits must be 2, 4 or 8, got {self.bits!r}"
        elif not (isinstance(self.block_size, int) and self.block_size >= 16
                  and self.block_size & (self.block_size - 1) == 0):
            self._attr_error = (f"{op}: attribute block_size must be a power of two >= 16, "
                                f"got {self.block_size!r}")

    def _path(self, dtype: np.dtype, level: int) -> str:
        """Label of the code that runs, e.g. 'gather_block_quantized_int4_float32_avx512'."""
        key = (self.bits, dtype, level)
        path = self._paths.get(key)
        if path is None:
            used = core.level_used(self.bits, level)
            path = (f"gather_block_quantized_int{self.bits}_{dtype.name}_"
                    f"{simd.LEVEL_NAMES[used]}")
            self._paths[key] = path
        return path

    def _validate(self, data, indices, scales, zero_points) -> None:
        op = self.onnx_node.op_type
        if self._attr_error:
            raise ValueError(self._attr_error)
        for i, a in enumerate((data, indices, scales)):
            if not isinstance(a, np.ndarray):
                raise TypeError(self._input_error(i, f"must be a tensor, got {type(a).__name__}"))
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
        if indices.dtype not in _INDEX_DTYPES:
            raise TypeError(self._input_error(
                1, f"has element type {indices.dtype}, expected int32 or int64"))
        if scales.dtype not in _SCALE_DTYPES:
            raise TypeError(self._input_error(
                2, f"has element type {scales.dtype}, expected float32 or float16"))
        D = data.shape[-1] * (8 // self.bits)
        groups = -(-D // self.block_size)
        want = data.shape[:-1] + (groups,)
        if scales.shape != want:
            raise ValueError(self._input_error(
                2, f"must have shape {want} (data {data.shape}, {self.bits} bits, "
                f"block_size {self.block_size}), got {scales.shape}"))
        if zero_points is not None:
            if not isinstance(zero_points, np.ndarray):
                raise TypeError(self._input_error(
                    3, f"must be a tensor, got {type(zero_points).__name__}"))
            if zero_points.dtype != _UINT8:
                raise TypeError(self._input_error(
                    3, f"has element type {zero_points.dtype}, expected uint8 (packed like "
                    "the data)"))
            want = data.shape[:-1] + (core.zero_point_bytes(groups, self.bits),)
            if zero_points.shape != want:
                raise ValueError(self._input_error(
                    3, f"must have shape {want} ({groups} groups packed {8 // self.bits} "
                    f"a byte), got {zero_points.shape}"))

    def _run(self, data, indices, scales, zero_points=None):
        self._validate(data, indices, scales, zero_points)
        level = simd.state.level
        if self._usage.enabled:
            self._usage.record(self.kernel_name, self._path(scales.dtype, level))
        # (np.ascontiguousarray would turn scalar indices into rank 1)
        if not data.flags.c_contiguous:
            data = np.ascontiguousarray(data)
        if not indices.flags.c_contiguous:
            indices = np.ascontiguousarray(indices)
        if not scales.flags.c_contiguous:
            scales = np.ascontiguousarray(scales)
        if zero_points is not None and not zero_points.flags.c_contiguous:
            zero_points = np.ascontiguousarray(zero_points)
        D = data.shape[-1] * (8 // self.bits)
        inner = math.prod(data.shape[1:-1])
        y = self._new_output(indices.shape + data.shape[1:-1] + (D,), scales.dtype)
        threads = self._num_threads(y.size, self.min_work_per_thread)
        dtype = T.FLOAT16 if scales.dtype == np.float16 else T.FLOAT
        core.apply(data, indices, scales, zero_points, y, data.shape[0], inner,
                   self.block_size, self.bits, dtype, level, threads)
        return (y,)


KERNELS = {"RegisterGatherBlockQuantizedKernel": (GatherBlockQuantized,)}
