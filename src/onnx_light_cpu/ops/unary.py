"""Abs, Exp, Log, Sigmoid, Tanh, Not."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import unary as core
from ._base import ELEMENT_TYPES, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
NUMERIC = (T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64) + FLOATS


class _Unary(KernelOp):
    """y = f(x), element-wise, same shape and type."""

    core_op: ClassVar[int]
    # Elements one thread must have before a second one helps.  Measured
    # on 2 cores (AVX-512): two threads win from 32K elements for the
    # transcendental ones, 64K for Abs and 256K for Not (memory-bound).
    min_work_per_thread: ClassVar[int]

    def _run(self, x):
        element_type = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        if self._usage.enabled:
            self._record_path((element_type, level),
                              lambda: self._label(x.dtype, element_type, level))
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = self._new_output(x.shape, x.dtype)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        core.apply(x, y, self.core_op, element_type, level, threads)
        return (y,)

    def _label(self, dtype: np.dtype, element_type: int, level: int) -> str:
        """Label of the code that runs, e.g. 'exp_float32_avx512'."""
        used = core.level_used(self.core_op, element_type, level)
        return f"{type(self).__name__.lower()}_{dtype.name}_{simd.LEVEL_NAMES[used]}"


class Abs(_Unary):
    core_op = core.ABS
    inputs = (Input("X", types=NUMERIC),)
    min_work_per_thread = 1 << 15


class Exp(_Unary):
    core_op = core.EXP
    inputs = (Input("X", types=FLOATS),)
    min_work_per_thread = 1 << 14


class Log(_Unary):
    core_op = core.LOG
    inputs = (Input("X", types=FLOATS),)
    min_work_per_thread = 1 << 14


class Sigmoid(_Unary):
    core_op = core.SIGMOID
    inputs = (Input("X", types=FLOATS),)
    min_work_per_thread = 1 << 14


class Tanh(_Unary):
    core_op = core.TANH
    inputs = (Input("X", types=FLOATS),)
    min_work_per_thread = 1 << 14


class Not(_Unary):
    core_op = core.NOT
    inputs = (Input("X", types=(T.BOOL,)),)
    min_work_per_thread = 1 << 17


KERNELS = {
    "RegisterAbsKernel": (Abs,),
    "RegisterExpKernel": (Exp,),
    "RegisterLogKernel": (Log,),
    "RegisterSigmoidKernel": (Sigmoid,),
    "RegisterTanhKernel": (Tanh,),
    "RegisterNotKernel": (Not,),
}
