"""Abs, Exp, Log, Sigmoid, Tanh, Not, Neg, Reciprocal, Gelu, Clip."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import unary as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
SIGNED = (T.INT8, T.INT16, T.INT32, T.INT64) + FLOATS
NUMERIC = (T.UINT8, T.UINT16, T.UINT32, T.UINT64) + SIGNED


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
            self._record_path((self.core_op, element_type, level),
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
        return f"{self._path_name()}_{dtype.name}_{simd.LEVEL_NAMES[used]}"

    def _path_name(self) -> str:
        return type(self).__name__.lower()


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


class Neg(_Unary):
    core_op = core.NEG
    inputs = (Input("X", types=SIGNED),)
    min_work_per_thread = 1 << 15


class Reciprocal(_Unary):
    core_op = core.RECIPROCAL
    inputs = (Input("X", types=FLOATS),)
    min_work_per_thread = 1 << 15


class Gelu(_Unary):
    """Gelu (opset 20): the exact form x Phi(x) or, with approximate="tanh",
    its tanh estimate."""

    since_version = 20
    inputs = (Input("X", types=FLOATS),)
    attributes = (Attr("approximate", "string", "none", allowed=("none", "tanh")),)
    min_work_per_thread = 1 << 14

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.core_op = core.GELU_TANH if self.approximate == "tanh" else core.GELU

    def _path_name(self) -> str:
        return "gelu_tanh" if self.core_op == core.GELU_TANH else "gelu"


# Clip's bounds before opset 11 are float attributes, defaulting to the
# float range (opset 6).
_FLOAT_MAX = float(np.finfo(np.float32).max)


class Clip(KernelOp):
    """y = min(max(x, min), max), the bounds attributes before opset 11 and
    optional one-element inputs from it; a missing bound does not clip."""

    inputs = (Input("input", types=NUMERIC), Input("min", like=0, optional=True),
              Input("max", like=0, optional=True))
    attributes = (Attr("min", "float", -_FLOAT_MAX), Attr("max", "float", _FLOAT_MAX))
    min_work_per_thread = 1 << 15

    def _run(self, x, lo=None, hi=None):
        if self.opset < 11:
            if lo is not None or hi is not None:
                raise ValueError(self._input_error(1, f"is not an input of Clip-{self.opset} "
                                                      "(min and max are attributes)"))
            with np.errstate(over="ignore"):  # float16: the float range is +-inf
                lo, hi = np.array(self.min, x.dtype), np.array(self.max, x.dtype)
        else:
            lo, hi = self._bound(1, lo, x.dtype, low=True), self._bound(2, hi, x.dtype, low=False)
        element_type = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        y = self._new_output(x.shape, x.dtype)
        if x.dtype.kind not in "iu" and (np.isnan(lo) or np.isnan(hi)):  # floats, bfloat16
            # A NaN bound makes every element NaN, as NumPy's clip does.
            self._record_path((element_type, "nan"), lambda: f"clip_{x.dtype.name}_numpy")
            np.clip(x, lo, hi, out=y)
            return (y,)
        if self._usage.enabled:
            self._record_path((element_type, level), lambda: self._label(x.dtype, element_type,
                                                                         level))
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        core.clip(x, y, lo, hi, element_type, level, threads)
        return (y,)

    def _bound(self, index: int, b, dtype: np.dtype, low: bool) -> np.ndarray:
        """Input ``index`` as a 0-d array, or the type's extreme when absent."""
        if b is None:
            if dtype.kind in "iu":
                info = np.iinfo(dtype)
                return np.array(info.min if low else info.max, dtype)
            return np.array(-np.inf if low else np.inf, dtype)
        if b.shape not in ((), (1,)):  # a scalar, or one value as ONNX Runtime takes
            raise ValueError(self._input_error(
                index, f"must hold one value (shape () or (1,)), got shape {b.shape}"))
        return b.reshape(()).copy()  # (np.ascontiguousarray makes a 0-d array 1-d)

    def _label(self, dtype: np.dtype, element_type: int, level: int) -> str:
        used = core.clip_level_used(element_type, level)
        return f"clip_{dtype.name}_{simd.LEVEL_NAMES[used]}"


KERNELS = {
    "RegisterAbsKernel": (Abs,),
    "RegisterExpKernel": (Exp,),
    "RegisterLogKernel": (Log,),
    "RegisterSigmoidKernel": (Sigmoid,),
    "RegisterTanhKernel": (Tanh,),
    "RegisterNotKernel": (Not,),
    "RegisterNegKernel": (Neg,),
    "RegisterReciprocalKernel": (Reciprocal,),
    "RegisterGeluKernel": (Gelu,),
    "RegisterClipKernel": (Clip,),
}
