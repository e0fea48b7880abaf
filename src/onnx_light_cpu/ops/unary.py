"""Abs, Exp, Log, Sigmoid, Tanh, Not."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import unary as core
from ._base import ELEMENT_TYPES, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
NUMERIC = (T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64) + FLOATS


class _Unary(KernelOp):
    """y = f(x), element-wise, same shape and type."""

    core_op: ClassVar[int]
    onnx_types: ClassVar[tuple[int, ...]]
    # Elements one thread must have before a second one helps.  Measured
    # on 2 cores (AVX-512): two threads win from 32K elements for the
    # transcendental ones, 64K for Abs and 256K for Not (memory-bound).
    min_work_per_thread: ClassVar[int]

    def _path(self, dtype: np.dtype, element_type: int, level: int) -> str:
        """Label of the code that runs, e.g. 'exp_float32_avx512'."""
        key = (element_type, level)
        path = self._paths.get(key)
        if path is None:
            used = core.level_used(self.core_op, element_type, level)
            path = f"{type(self).__name__.lower()}_{dtype.name}_{simd.LEVEL_NAMES[used]}"
            self._paths[key] = path
        return path

    def _run(self, x):
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(0, f"must be a tensor, got {type(x).__name__}"))
        element_type = ELEMENT_TYPES.get(x.dtype)
        if element_type not in self._allowed:
            raise TypeError(
                self._input_error(0, f"has element type {x.dtype}, expected one of "
                                  f"{', '.join(self.element_types)}")
            )
        level = simd.state.level
        if self._usage.enabled:
            self._usage.record(self.kernel_name, self._path(x.dtype, element_type, level))
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = self._new_output(x.shape, x.dtype)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        core.apply(x, y, self.core_op, element_type, level, threads)
        return (y,)


class Abs(_Unary):
    core_op = core.ABS
    onnx_types = NUMERIC
    min_work_per_thread = 1 << 15


class Exp(_Unary):
    core_op = core.EXP
    onnx_types = FLOATS
    min_work_per_thread = 1 << 14


class Log(_Unary):
    core_op = core.LOG
    onnx_types = FLOATS
    min_work_per_thread = 1 << 14


class Sigmoid(_Unary):
    core_op = core.SIGMOID
    onnx_types = FLOATS
    min_work_per_thread = 1 << 14


class Tanh(_Unary):
    core_op = core.TANH
    onnx_types = FLOATS
    min_work_per_thread = 1 << 14


class Not(_Unary):
    core_op = core.NOT
    onnx_types = (T.BOOL,)
    min_work_per_thread = 1 << 17


KERNELS = {
    "RegisterAbsKernel": (Abs,),
    "RegisterExpKernel": (Exp,),
    "RegisterLogKernel": (Log,),
    "RegisterSigmoidKernel": (Sigmoid,),
    "RegisterTanhKernel": (Tanh,),
    "RegisterNotKernel": (Not,),
}
