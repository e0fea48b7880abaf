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

from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import binary as core
from ..threads import decide_num_threads
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp
from ._contract import REQUIRED

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
INTS = (T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64)
NUMERIC = INTS + FLOATS
BOOL = np.dtype(np.bool_)
# Read on every call of every node: module globals, not attribute chains.
_simd_state = simd.state
_core_apply = core.apply

# Elements one thread must have before a second one helps.  Measured on
# 2 cores (AVX-512, t1 vs t2 on the core): float32 Add 4.4 vs 2.9 µs at 64K
# elements, 1.8 vs 1.9 at 32K; int64 Less alike.  float32 Pow and int32 Div
# cost 10-20x more per element: 2.9 vs 2.2 µs at 1K, 6.2 vs 3.9 at 4K.
CHEAP_WORK_PER_THREAD = 1 << 15
COSTLY_WORK_PER_THREAD = 1 << 10


def _pair(types: tuple[int, ...], b: str = "B") -> tuple[Input, Input]:
    """Inputs A and B of one element type among ``types``."""
    return (Input("A", types=types), Input(b, like=0))


class _PowPlan(NamedTuple):
    shape: tuple[int, ...]    # of the output
    dtype: np.dtype           # the power is computed in: X's, or a wider float
    element_type: int         # the core's, of dtype


class _ElementWise(KernelOp):
    """Shared broadcasting, core calls and usage labels of the families."""

    min_work_per_thread: ClassVar[int] = CHEAP_WORK_PER_THREAD
    # Element types whose loop is scalar code (integer division): these
    # go parallel from COSTLY_WORK_PER_THREAD.
    costly_types: ClassVar[frozenset[int]] = frozenset()
    label: ClassVar[str]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.label = cls.__name__.lower()

    def _broadcast(self, arrays: tuple) -> tuple:
        shape = core.broadcast_shape(arrays)
        if type(shape) is int:
            raise ValueError(self._input_error(
                shape, f"with shape {arrays[shape].shape} does not broadcast with "
                f"{', '.join(str(a.shape) for a in arrays[:shape])}"))
        return shape

    def _label(self, op: int, et: int, level: int, pattern: str, dtype: np.dtype) -> str:
        used = simd.LEVEL_NAMES[core.level_used(op, et, level)]
        middle = f"{pattern}_" if pattern else ""
        return f"{self.label}_{middle}{dtype.name}_{used}"

    def _apply(self, op: int, et: int, a, b, y, dtype: np.dtype) -> None:
        """y = a op b through the core (``_Binary._run`` writes it out)."""
        level = _simd_state.level
        if self._usage.enabled:
            self._record_pattern(op, et, level, a, b, y, dtype)
        work = COSTLY_WORK_PER_THREAD if et in self.costly_types else self.min_work_per_thread
        _core_apply(a, b, y, op, et, level,
                    decide_num_threads(y.size, work, self._context.num_threads))

    def _record_pattern(self, op: int, et: int, level: int, a, b, y, dtype: np.dtype) -> None:
        pattern = core.pattern(a, b, y)
        self._record_path((op, et, level, pattern),
                          lambda: self._label(op, et, level, pattern, dtype))


class _Binary(_ElementWise):
    """y = a op b with both inputs of one type T.  Cheap enough that a plan
    would cost more than the shape work it saves: _run does it all."""

    core_op: ClassVar[int]
    bool_output: ClassVar[bool] = False
    # Opsets 1-6: ``broadcast=1`` lines B's shape up with A's from ``axis``
    # (by default with A's last dimensions, as numpy does).
    attributes = (Attr("broadcast", "int", 0), Attr("axis", "int", None))

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        # PRelu declares neither attribute
        self._legacy_axis = (getattr(self, "broadcast", 0) == 1
                             and getattr(self, "axis", None) is not None)

    def _run(self, a, b):
        # The commonest nodes of small graphs: _new_output's fast case and
        # _apply are written out here, two calls less (0.25 of 1.25 µs a
        # node in a chain of tiny Adds).
        if self._legacy_axis:
            b = b.reshape(self._legacy_shape(a, b))
        dtype, shape = a.dtype, a.shape
        if shape != b.shape:
            shape = self._broadcast((a, b))
        out_dtype = BOOL if self.bool_output else dtype
        y = self._context.buffers.take(shape, out_dtype)
        if y is None:
            y = self._new_output(shape, out_dtype)
        op, et, level = self.core_op, ELEMENT_TYPES[dtype], _simd_state.level
        if self._usage.enabled:
            self._record_pattern(op, et, level, a, b, y, dtype)
        work = COSTLY_WORK_PER_THREAD if et in self.costly_types else self.min_work_per_thread
        _core_apply(a, b, y, op, et, level,
                    decide_num_threads(y.size, work, self._context.num_threads))
        return (y,)

    def _legacy_shape(self, a: np.ndarray, b: np.ndarray) -> tuple[int, ...]:
        axis = self.axis + a.ndim if self.axis < 0 else self.axis
        tail = a.ndim - axis - b.ndim
        if axis < 0 or tail < 0:
            raise ValueError(self._input_error(
                1, f"with shape {b.shape} does not fit input 0's shape {a.shape} "
                f"from axis {self.axis}"))
        return (1,) * axis + b.shape + (1,) * tail


class Add(_Binary):
    core_op = core.ADD
    inputs = _pair(NUMERIC)


class Sub(_Binary):
    core_op = core.SUB
    inputs = _pair(NUMERIC)


class Mul(_Binary):
    core_op = core.MUL
    inputs = _pair(NUMERIC)


class Div(_Binary):
    """Integer division truncates toward zero, as onnx.reference does."""

    core_op = core.DIV
    inputs = _pair(NUMERIC)
    costly_types = frozenset(INTS)


class Mod(_Binary):
    since_version = 10
    inputs = _pair(NUMERIC)
    attributes = _Binary.attributes + (Attr("fmod", "flag", 0),)
    min_work_per_thread = COSTLY_WORK_PER_THREAD

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self.core_op = core.FMOD if self.fmod else core.MOD
        self.label = "fmod" if self.fmod else "mod"


class _Compare(_Binary):
    bool_output = True


class Equal(_Compare):
    core_op = core.EQ
    # Strings (opset 19) have no native kernel: NumPy compares them.  A
    # string input may be any NumPy string dtype, which the declaration
    # cannot say: the types are checked here.
    onnx_types = NUMERIC + (T.BOOL, T.STRING)
    inputs = (Input("A"), Input("B"))

    def _run(self, a, b):
        if a.dtype.kind in "OUS":
            if b.dtype.kind not in "OUS":
                raise TypeError(self._input_error(
                    1, f"has element type {b.dtype}, expected a string type like input 0"))
            self._broadcast((a, b))
            self._record_path("string", lambda: "equal_string_builtin")
            return (np.asarray(np.equal(a, b), dtype=BOOL),)
        if a.dtype not in _EQUAL_TYPES:
            raise TypeError(self._input_error(
                0, f"has element type {a.dtype}, expected one of "
                f"{', '.join(dt.name for dt in _EQUAL_TYPES)}, or a string type"))
        if b.dtype != a.dtype:
            raise TypeError(self._input_error(
                1, f"has element type {b.dtype}, expected {a.dtype} like input 0"))
        return super()._run(a, b)


class Greater(_Compare):
    core_op = core.GT
    inputs = _pair(NUMERIC)


class GreaterOrEqual(_Compare):
    since_version = 12
    core_op = core.GE
    inputs = _pair(NUMERIC)


class Less(_Compare):
    core_op = core.LT
    inputs = _pair(NUMERIC)


class LessOrEqual(_Compare):
    since_version = 12
    core_op = core.LE
    inputs = _pair(NUMERIC)


class And(_Binary):
    core_op = core.AND
    inputs = _pair((T.BOOL,))


class Or(_Binary):
    core_op = core.OR
    inputs = _pair((T.BOOL,))


class Xor(_Binary):
    core_op = core.XOR
    inputs = _pair((T.BOOL,))


class BitwiseAnd(_Binary):
    since_version = 18
    core_op = core.BAND
    inputs = _pair(INTS)


class BitwiseOr(_Binary):
    since_version = 18
    core_op = core.BOR
    inputs = _pair(INTS)


class BitwiseXor(_Binary):
    since_version = 18
    core_op = core.BXOR
    inputs = _pair(INTS)


class BitShift(_Binary):
    """Shifts by the count in B; a count outside [0, bits) gives 0 (or -1
    for a right shift of a negative signed value), as onnx.reference."""

    since_version = 11
    inputs = _pair(INTS)
    attributes = _Binary.attributes + (
        Attr("direction", "string", REQUIRED, allowed=("LEFT", "RIGHT")),)
    min_work_per_thread = COSTLY_WORK_PER_THREAD

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        left = self.direction == "LEFT"
        self.core_op = core.SHL if left else core.SHR
        self.label = "bitshift_left" if left else "bitshift_right"


class PRelu(_Binary):
    """y = x if x > 0 else x * slope; slope broadcasts to X (one way)."""

    core_op = core.PRELU
    inputs = _pair((T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16, T.UINT32, T.UINT64, T.INT32,
                    T.INT64), b="slope")
    attributes = ()

    def _run(self, x, slope):
        if slope.shape != x.shape and core.broadcast_shape((x, slope)) != x.shape:
            # As onnx.reference: a 1-D slope whose size matches exactly one
            # dimension of X applies along that dimension.
            if slope.ndim != 1 or x.shape.count(slope.shape[0]) != 1:
                raise ValueError(self._input_error(
                    1, f"with shape {slope.shape} does not broadcast to X's shape {x.shape}"))
            slope = slope.reshape(tuple(d if d == slope.shape[0] else 1 for d in x.shape))
        y = self._new_output(x.shape, x.dtype)
        self._apply(self.core_op, ELEMENT_TYPES[x.dtype], x, slope, y, x.dtype)
        return (y,)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


class Pow(_ElementWise):
    """Z = X ** Y, the type of X; Y may have another numeric type (opset 12+).

    A mixed pair is computed in NumPy's promoted type when that is a float
    (float32 ** int64 in float64, int32 ** float32 in float64, as
    onnx.reference does), else with Y cast to X's integer type (wrapping).
    """

    inputs = (Input("X", types=(T.INT32, T.INT64, T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)),
              Input("Y", types=NUMERIC))
    min_work_per_thread = COSTLY_WORK_PER_THREAD

    def _plan(self, a, b):
        shape = a.shape if a.shape == b.shape else self._broadcast((a, b))
        # the type the power is computed in: X's, or a wider float
        wide = a.dtype
        if b.dtype != a.dtype:
            promoted = _promote(a.dtype, b.dtype)
            if promoted is not None:
                wide = promoted
        return _PowPlan(shape, wide, ELEMENT_TYPES[wide])

    def _execute(self, plan: _PowPlan, a, b):
        if plan.dtype != a.dtype:
            # Computed in the wider float, rounded (or cast) to X's type.
            y = np.empty(plan.shape, dtype=plan.dtype)
            self._apply(core.POW, plan.element_type, a.astype(plan.dtype), b.astype(plan.dtype),
                        y, plan.dtype)
            with np.errstate(all="ignore"):
                return (y.astype(a.dtype),)
        if b.dtype != a.dtype:
            with np.errstate(all="ignore"):
                b = b.astype(a.dtype)
        y = self._new_output(plan.shape, a.dtype)
        self._apply(core.POW, plan.element_type, a, b, y, a.dtype)
        return (y,)


_EQUAL_TYPES = tuple(dt for dt, et in ELEMENT_TYPES.items() if et in Equal.onnx_types)

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


class _VariadicPlan(NamedTuple):
    shape: tuple[int, ...]
    element_type: int
    first_pair_fills: bool    # x0 op x1 already has the output's shape


class _Variadic(_ElementWise):
    """y = x0 op x1 op ... op xn-1, every input broadcasting together."""

    core_op: ClassVar[int]

    def _plan(self, first, *rest):
        for i, x in enumerate(rest, 1):
            if x is None:  # only the first input is declared required
                raise ValueError(self._input_error(i, "is required but missing"))
            if x.dtype != first.dtype:
                raise TypeError(self._input_error(
                    i, f"has element type {x.dtype}, expected {first.dtype} like input 0"))
        xs = (first, *rest)
        shape = self._broadcast(xs) if rest else first.shape
        # The core writes a op b into an output of exactly their broadcast
        # shape; when a later input widens it, start from x0 spread over y.
        fills = bool(rest) and self._broadcast(xs[:2]) == shape
        return _VariadicPlan(shape, ELEMENT_TYPES[first.dtype], fills)

    def _execute(self, plan: _VariadicPlan, *xs):
        first, et = xs[0], plan.element_type
        if len(xs) == 1:
            self._record_path(("copy", first.dtype),
                              lambda: f"{self.label}_copy_{first.dtype.name}")
            return (first.copy(),)
        y = self._new_output(plan.shape, first.dtype)
        rest = xs[2:]
        if plan.first_pair_fills:
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
    inputs = (Input("data_0", types=FLOATS, variadic=True),)


class Mean(_Variadic):
    core_op = core.ADD
    inputs = (Input("data_0", types=FLOATS, variadic=True),)

    def _finish(self, y, et, n) -> None:
        self._apply(core.DIV, et, y, np.array(n, dtype=y.dtype), y, y.dtype)


class Min(_Variadic):
    core_op = core.MIN
    inputs = (Input("data_0", types=NUMERIC, variadic=True),)


class Max(_Variadic):
    core_op = core.MAX
    inputs = (Input("data_0", types=NUMERIC, variadic=True),)


KERNELS = {
    "RegisterBinaryKernels": (
        Add, Sub, Mul, Div, Mod, Pow, Equal, Greater, GreaterOrEqual, Less, LessOrEqual,
        And, Or, Xor, BitwiseAnd, BitwiseOr, BitwiseXor, BitShift, PRelu,
    ),
    "RegisterVariadicElementwiseKernels": (Sum, Mean, Min, Max),
}
