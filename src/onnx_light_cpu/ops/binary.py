"""Binary element-wise operators (Add ... PRelu) and the variadic ones
(Sum, Mean, Min, Max), with multidirectional broadcasting.

Semantics follow ``onnx.reference``: integer Div truncates toward zero,
integer x / 0 and x % 0 give 0 (and MIN / -1 wraps) instead of trapping,
Mod with ``fmod=0`` is NumPy's ``mod`` (sign of the divisor, floats
included) and ``fmod=1`` C's ``fmod``, Min/Max propagate NaN, comparisons
return bool.  Integer Pow wraps; a negative integer exponent (an error in
NumPy) gives the truncated ``1 / x**-e``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import binary as core
from ._base import ELEMENT_TYPES, KernelOp, type_string

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
INTS = (T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64)
NUMERIC = INTS + FLOATS
BOOL = np.dtype(np.bool_)

# Elements one thread must have before a second one helps.  Measured on
# 2 cores (AVX-512, t1 vs t2 on the core): float32 Add 4.4 vs 2.9 µs at 64K
# elements, 1.8 vs 1.9 at 32K; int64 Less alike.  float32 Pow and int32 Div
# cost 10-20x more per element: 2.9 vs 2.2 µs at 1K, 6.2 vs 3.9 at 4K.
CHEAP_WORK_PER_THREAD = 1 << 15
COSTLY_WORK_PER_THREAD = 1 << 10


def _level_name(level: int) -> str:
    return simd.LEVEL_NAMES[level]


class _ElementWise(KernelOp):
    """Shared checks, broadcasting and usage labels of the families."""

    onnx_types: ClassVar[tuple[int, ...]] = ()
    min_work_per_thread: ClassVar[int] = CHEAP_WORK_PER_THREAD
    # Element types whose loop is scalar code (integer division): these
    # go parallel from COSTLY_WORK_PER_THREAD.
    costly_types: ClassVar[frozenset[int]] = frozenset()
    label: ClassVar[str]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._types = {dt: et for dt, et in ELEMENT_TYPES.items() if et in cls.onnx_types}
        cls.label = cls.__name__.lower()

    def _as_tensor(self, index: int, x) -> np.ndarray:
        if isinstance(x, np.ndarray):
            return x
        if isinstance(x, np.generic):
            return np.asarray(x)
        raise TypeError(self._input_error(index, f"must be a tensor, got {type(x).__name__}"))

    def _element_type(self, index: int, x: np.ndarray) -> int:
        et = self._types.get(x.dtype)
        if et is None:
            raise TypeError(self._input_error(
                index, f"has element type {x.dtype}, expected one of "
                f"{', '.join(self.element_types)}"))
        return et

    def _same_type(self, index: int, x: np.ndarray, first: np.ndarray) -> None:
        if x.dtype != first.dtype:
            raise TypeError(self._input_error(
                index, f"has element type {x.dtype}, input 0 has {first.dtype}: "
                "they must be equal"))

    def _broadcast(self, arrays: tuple) -> tuple:
        shape = core.broadcast_shape(arrays)
        if type(shape) is int:
            raise ValueError(self._input_error(
                shape, f"with shape {arrays[shape].shape} does not broadcast with "
                f"{', '.join(str(a.shape) for a in arrays[:shape])}"))
        return shape

    def _record(self, op: int, et: int, level: int, a, b, y, dtype: np.dtype) -> None:
        pattern = core.pattern(a, b, y)
        key = (op, et, level, pattern)
        path = self._paths.get(key)
        if path is None:
            used = _level_name(core.level_used(op, et, level))
            middle = f"{pattern}_" if pattern else ""
            path = f"{self.label}_{middle}{dtype.name}_{used}"
            self._paths[key] = path
        self._usage.record(self.kernel_name, path)

    def _apply(self, op: int, et: int, a, b, y, dtype: np.dtype) -> None:
        level = simd.state.level
        if self._usage.enabled:
            self._record(op, et, level, a, b, y, dtype)
        work = COSTLY_WORK_PER_THREAD if et in self.costly_types else self.min_work_per_thread
        core.apply(a, b, y, op, et, level, self._num_threads(y.size, work))


class _Binary(_ElementWise):
    """y = a op b with both inputs of one type T."""

    core_op: ClassVar[int]
    bool_output: ClassVar[bool] = False

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        # Opsets 1-6: ``broadcast=1`` lines B's shape up with A's from ``axis``
        # (by default with A's last dimensions, as numpy does).
        attrs = {a.name: a for a in onnx_node.attribute}
        self._legacy_axis = None
        if "broadcast" in attrs and attrs["broadcast"].i == 1 and "axis" in attrs:
            self._legacy_axis = attrs["axis"].i

    def _legacy_reshape(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        axis = self._legacy_axis
        if axis < 0:
            axis += a.ndim
        tail = a.ndim - axis - b.ndim
        if axis < 0 or tail < 0:
            raise ValueError(self._input_error(
                1, f"with shape {b.shape} does not fit input 0's shape {a.shape} "
                f"from axis {self._legacy_axis}"))
        return b.reshape((1,) * axis + b.shape + (1,) * tail)

    def _run(self, a, b):
        a = self._as_tensor(0, a)
        b = self._as_tensor(1, b)
        et = self._element_type(0, a)
        if b.dtype != a.dtype:
            self._same_type(1, b, a)
        if self._legacy_axis is not None:
            b = self._legacy_reshape(a, b)
        shape = a.shape if a.shape == b.shape else self._broadcast((a, b))
        dtype = BOOL if self.bool_output else a.dtype
        y = self._new_output(shape, dtype)
        self._apply(self.core_op, et, a, b, y, a.dtype)
        return (y,)


class Add(_Binary):
    core_op = core.ADD
    onnx_types = NUMERIC


class Sub(_Binary):
    core_op = core.SUB
    onnx_types = NUMERIC


class Mul(_Binary):
    core_op = core.MUL
    onnx_types = NUMERIC


class Div(_Binary):
    """Integer division truncates toward zero, as onnx.reference does."""

    core_op = core.DIV
    onnx_types = NUMERIC
    costly_types = frozenset(INTS)


class Mod(_Binary):
    since_version = 10
    core_op = core.MOD
    onnx_types = NUMERIC
    min_work_per_thread = COSTLY_WORK_PER_THREAD

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        fmod = next((a.i for a in onnx_node.attribute if a.name == "fmod"), 0)
        if fmod not in (0, 1):
            raise ValueError(f"Mod: attribute fmod must be 0 or 1, got {fmod}")
        self.core_op = core.FMOD if fmod else core.MOD
        self.label = "fmod" if fmod else "mod"


class _Compare(_Binary):
    bool_output = True
    onnx_types = NUMERIC


class Equal(_Compare):
    core_op = core.EQ
    onnx_types = NUMERIC + (T.BOOL, T.STRING)

    def _run(self, a, b):
        if isinstance(a, np.ndarray) and a.dtype.kind in "OUS":
            # Strings (opset 19) have no native kernel: NumPy compares them.
            b = self._as_tensor(1, b)
            if b.dtype.kind not in "OUS":
                self._same_type(1, b, a)
            self._broadcast((a, b))
            if self._usage.enabled:
                self._usage.record(self.kernel_name, "equal_string_builtin")
            return (np.asarray(np.equal(a, b), dtype=BOOL),)
        return _Binary._run(self, a, b)


class Greater(_Compare):
    core_op = core.GT


class GreaterOrEqual(_Compare):
    since_version = 12
    core_op = core.GE


class Less(_Compare):
    core_op = core.LT


class LessOrEqual(_Compare):
    since_version = 12
    core_op = core.LE


class And(_Binary):
    core_op = core.AND
    onnx_types = (T.BOOL,)


class Or(_Binary):
    core_op = core.OR
    onnx_types = (T.BOOL,)


class Xor(_Binary):
    core_op = core.XOR
    onnx_types = (T.BOOL,)


class BitwiseAnd(_Binary):
    since_version = 18
    core_op = core.BAND
    onnx_types = INTS


class BitwiseOr(_Binary):
    since_version = 18
    core_op = core.BOR
    onnx_types = INTS


class BitwiseXor(_Binary):
    since_version = 18
    core_op = core.BXOR
    onnx_types = INTS


class BitShift(_Binary):
    """Shifts by the count in B; a count outside [0, bits) gives 0 (or -1
    for a right shift of a negative signed value), as onnx.reference."""

    since_version = 11
    core_op = core.SHL
    onnx_types = INTS
    min_work_per_thread = COSTLY_WORK_PER_THREAD

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        direction = next((a.s.decode() for a in onnx_node.attribute if a.name == "direction"),
                         None)
        if direction not in ("LEFT", "RIGHT"):
            raise ValueError(f"BitShift: attribute direction must be 'LEFT' or 'RIGHT', "
                             f"got {direction!r}")
        self.core_op = core.SHL if direction == "LEFT" else core.SHR
        self.label = "bitshift_left" if direction == "LEFT" else "bitshift_right"


class PRelu(_Binary):
    """y = x if x > 0 else x * slope; slope broadcasts to X (one way)."""

    core_op = core.PRELU
    onnx_types = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16, T.UINT32, T.UINT64, T.INT32,
                  T.INT64)

    def _slope(self, x: np.ndarray, slope: np.ndarray) -> np.ndarray:
        shape = core.broadcast_shape((x, slope))
        if shape == x.shape:
            return slope
        # As onnx.reference: a 1-D slope whose size matches exactly one
        # dimension of X applies along that dimension.
        if slope.ndim == 1 and x.shape.count(slope.shape[0]) == 1:
            return slope.reshape(tuple(d if d == slope.shape[0] else 1 for d in x.shape))
        raise ValueError(self._input_error(
            1, f"with shape {slope.shape} does not broadcast to X's shape {x.shape}"))

    def _run(self, x, slope):
        x = self._as_tensor(0, x)
        slope = self._as_tensor(1, slope)
        et = self._element_type(0, x)
        if slope.dtype != x.dtype:
            self._same_type(1, slope, x)
        if slope.shape != x.shape:
            slope = self._slope(x, slope)
        y = self._new_output(x.shape, x.dtype)
        self._apply(self.core_op, et, x, slope, y, x.dtype)
        return (y,)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


class Pow(_ElementWise):
    """Z = X ** Y, the type of X; Y may have another numeric type (opset 12+).

    A mixed pair is computed in NumPy's promoted type when that is a float
    (float32 ** int64 in float64, int32 ** float32 in float64, as
    onnx.reference does), else with Y cast to X's integer type (wrapping).
    """

    onnx_types = (T.INT32, T.INT64, T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
    exponent_types = NUMERIC
    min_work_per_thread = COSTLY_WORK_PER_THREAD

    def _run(self, a, b):
        a = self._as_tensor(0, a)
        b = self._as_tensor(1, b)
        et = self._element_type(0, a)
        if b.dtype not in _EXPONENT_TYPES:
            raise TypeError(self._input_error(
                1, f"has element type {b.dtype}, expected one of "
                f"{', '.join(type_string(t) for t in self.exponent_types)}"))
        shape = a.shape if a.shape == b.shape else self._broadcast((a, b))
        if b.dtype != a.dtype:
            wide = _promote(a.dtype, b.dtype)
            if wide is not None and wide != a.dtype:
                # Computed in the wider float, rounded (or cast) to X's type.
                y = np.empty(shape, dtype=wide)
                self._apply(core.POW, ELEMENT_TYPES[wide], a.astype(wide), b.astype(wide),
                            y, wide)
                with np.errstate(all="ignore"):
                    return (y.astype(a.dtype),)
            with np.errstate(all="ignore"):
                b = b.astype(a.dtype)
        y = self._new_output(shape, a.dtype)
        self._apply(core.POW, et, a, b, y, a.dtype)
        return (y,)


_EXPONENT_TYPES = frozenset(dt for dt, et in ELEMENT_TYPES.items() if et in NUMERIC)


_PROMOTED: dict[tuple[np.dtype, np.dtype], np.dtype | None] = {}


def _promote(a: np.dtype, b: np.dtype) -> np.dtype | None:
    """The type NumPy computes a ** b in, when it is float32 or float64."""
    key = (a, b)
    if key not in _PROMOTED:
        # The loop np.power picks for this pair (ml_dtypes' rules included).
        with np.errstate(all="ignore"):
            wide = np.power(np.empty(0, a), np.empty(0, b)).dtype
        _PROMOTED[key] = wide if wide in (_F32, _F64) else None
    return _PROMOTED[key]


class _Variadic(_ElementWise):
    """y = x0 op x1 op ... op xn-1, every input broadcasting together."""

    core_op: ClassVar[int]

    def _run(self, *xs):
        if not xs:
            raise ValueError(f"{self.onnx_node.op_type}: needs at least one input")
        first = self._as_tensor(0, xs[0])
        et = self._element_type(0, first)
        if len(xs) == 1:
            if self._usage.enabled:
                self._usage.record(self.kernel_name, f"{self.label}_copy_{first.dtype.name}")
            return (first.copy(),)
        xs = tuple(self._as_tensor(i, x) for i, x in enumerate(xs))
        for i, x in enumerate(xs[1:], 1):
            if x.dtype != first.dtype:
                self._same_type(i, x, first)
        shape = self._broadcast(xs)
        y = self._new_output(shape, first.dtype)
        # The core writes a op b into an output of exactly their broadcast
        # shape; when a later input widens it, start from x0 spread over y.
        rest = xs[2:]
        if self._broadcast(xs[:2]) == shape:
            self._apply(self.core_op, et, xs[0], xs[1], y, first.dtype)
        else:
            np.copyto(y, xs[0])
            rest = xs[1:]
        for x in rest:
            self._apply(self.core_op, et, y, x, y, first.dtype)
        self._finish(y, et, len(xs))
        return (y,)

    def _finish(self, y, et, n) -> None:
        pass


class Sum(_Variadic):
    core_op = core.ADD
    onnx_types = FLOATS


class Mean(_Variadic):
    core_op = core.ADD
    onnx_types = FLOATS

    def _finish(self, y, et, n) -> None:
        self._apply(core.DIV, et, y, np.array(n, dtype=y.dtype), y, y.dtype)


class Min(_Variadic):
    core_op = core.MIN
    onnx_types = NUMERIC


class Max(_Variadic):
    core_op = core.MAX
    onnx_types = NUMERIC


KERNELS = {
    "RegisterBinaryKernels": (
        Add, Sub, Mul, Div, Mod, Pow, Equal, Greater, GreaterOrEqual, Less, LessOrEqual,
        And, Or, Xor, BitwiseAnd, BitwiseOr, BitwiseXor, BitShift, PRelu,
    ),
    "RegisterVariadicElementwiseKernels": (Sum, Mean, Min, Max),
}
