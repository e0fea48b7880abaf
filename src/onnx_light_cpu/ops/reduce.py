"""ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
ReduceL2, ReduceSumSquare, ReduceLogSumExp and Softmax."""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import numpy as np
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels import reduce as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
#: The reduced axes (an input since opset 13 for ReduceSum, 18 for the others).
AXES = Input("axes", types=(T.INT64,), optional=True)


class _Reduce(KernelOp):
    min_work_per_thread: ClassVar[int]

    @staticmethod
    def _path(kind: str, dtype: np.dtype, element_type: int, level: int) -> tuple:
        """The usage label (key, factory) of ``kind`` on ``dtype`` at ``level``,
        e.g. 'softmax_float32_avx512'."""

        def label():
            return f"{kind}_{dtype.name}_{simd.LEVEL_NAMES[core.level_used(element_type, level)]}"

        return ((kind, element_type, level), label)


class ReduceSum(_Reduce):
    """Sum over ``axes`` (attribute before opset 13, input since).  The
    passes depend on the axes' values: no plan; _run keeps them per shape
    and axes (``_layout``)."""

    inputs = (Input("data", types=(T.UINT32, T.UINT64, T.INT32, T.INT64) + FLOATS), AXES)
    attributes = (Attr("keepdims", "flag", 1), Attr("noop_with_empty_axes", "flag", 0),
                  Attr("axes", "ints", None))
    strided_inputs = frozenset({1})  # ``axes`` is counted before it is read
    #: The opset from which ``axes`` is an input (13 for ReduceSum, 18 for the others).
    axes_input_since: ClassVar[int] = 13

    # Elements per thread before a second thread is asked, measured with
    # the second core idle (float32, t1 vs t2 in µs): [64, 1024] over the
    # last axis 7.3 vs 8.7, [128, 4096] 28.9 vs 17.1 (first axis 27.4 vs
    # 19.3).  Two threads from 256K elements.
    min_work_per_thread = 1 << 17

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        # (shape, dtype, axes' bytes) -> (output shape or None, passes): the
        # axes are values, outside the plan key; a mask's sum repeats them.
        self._layouts: dict = {}

    def _run(self, x, axes=None):
        element_type = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        shape, passes = self._cached_layout(x, axes)
        if shape is None:  # no axes and noop_with_empty_axes
            if self._usage.enabled:
                self._record_path(*self._path("reducesum_noop", x.dtype, element_type, 0))
            return (np.array(x, copy=True),)
        if self._usage.enabled:
            self._record_path(*self._path("reducesum", x.dtype, element_type, level))
        out = self._new_output(shape, x.dtype)
        self._sum(x, out, passes, element_type, level)
        return (out,)

    def _cached_layout(self, x, axes) -> tuple:
        """``_layout`` of these shape, dtype and axes, kept per instance."""
        # too many axes: no key, _layout raises before reading them
        key = (x.shape, x.dtype, None if axes is None else
               axes.tobytes() if axes.size <= max(x.ndim, 1) else False)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layout(x, axes)
            if len(self._layouts) >= 64:
                self._layouts.clear()
            self._layouts[key] = layout
        return layout

    def _sum(self, x, out, passes, element_type: int, level: int) -> None:
        """out = the sum of x over the passes' axes (out has the reduced shape)."""
        if x.size == 0:
            out[...] = 0
            return
        x = np.ascontiguousarray(x)
        src = x
        for A, R, B, last in passes:
            dst = out if last else np.empty(A * B, dtype=x.dtype)
            threads = self._num_threads(A * R * B, self.min_work_per_thread)
            core.reduce_sum(src, dst, A, R, B, element_type, level, threads)
            src = dst
        if src is x:  # nothing to sum: every reduced dimension has size 1
            out.reshape(-1)[...] = x.reshape(-1)

    def _layout(self, x, axes) -> tuple:
        """(output shape, the core's passes) for these axes; (None, ()) for
        the identity."""
        reduced = self._reduced_axes(x, axes)
        if reduced is None:
            return None, ()
        shape = tuple(1 if k in reduced else d for k, d in enumerate(x.shape)) if self.keepdims \
            else tuple(d for k, d in enumerate(x.shape) if k not in reduced)
        return shape, tuple(self._passes(x.shape, reduced))

    def _reduced_axes(self, x, axes) -> set[int] | None:
        """The axes to sum over, checked and made non-negative; None for the
        identity (no axes and noop_with_empty_axes)."""
        if self.opset < self.axes_input_since:
            axes_l = self.axes
        elif axes is None:
            axes_l = None
        else:
            if axes.size > max(x.ndim, 1):  # each axis once; checked before converting
                raise ValueError(self._input_error(
                    1, f"has {axes.size} axes for an input of rank {x.ndim}"))
            axes_l = axes.reshape(-1).tolist()
        if not axes_l:
            if self.noop_with_empty_axes:
                return None
            axes_l = list(range(x.ndim))
        rank, index = x.ndim, 1 if self.opset >= self.axes_input_since else 0
        reduced = set()
        for a in axes_l:
            if not -rank <= a < max(rank, 1):
                raise ValueError(self._input_error(
                    index,
                    f"axis {a} is out of range for rank {rank} (expected [{-rank}, {rank - 1}])"))
            a = a + rank if a < 0 else a
            if a in reduced:
                raise ValueError(self._input_error(index, f"repeats axis {a}"))
            reduced.add(a)
        return reduced

    @staticmethod
    def _passes(shape: tuple[int, ...], reduced: set[int]):
        """The core's passes: (A, R, B, last) for each group of consecutive
        reduced dimensions, the last group first, the tensor seen as
        [A, R, B] (dimensions of size 1 change nothing and are dropped)."""
        groups: list[list] = []
        for k, d in enumerate(shape):
            if d == 1:
                continue
            flag = k in reduced
            if groups and groups[-1][1] == flag:
                groups[-1][0] *= d
            else:
                groups.append([d, flag])
        while any(flag for _, flag in groups):
            g = max(i for i, (_, flag) in enumerate(groups) if flag)
            A = math.prod(d for d, _ in groups[:g])
            B = math.prod(d for d, _ in groups[g + 1:])
            R = groups[g][0]
            del groups[g]
            # kept neighbours become one group
            if 0 < g < len(groups) and not groups[g - 1][1] and not groups[g][1]:
                groups[g - 1][0] *= groups.pop(g)[0]
            yield A, R, B, not any(flag for _, flag in groups)


NUMERIC = (T.UINT32, T.UINT64, T.INT32, T.INT64) + FLOATS
HALVES = (np.dtype(np.float16), np.dtype(bfloat16))


class _AxesReduce(ReduceSum):
    """The other reductions over ``axes`` (an attribute before opset 18, an
    input since): ReduceSum's axes checks, layout and cache; the reduced
    axes as one [A, R, B] view (consecutive axes, or a copy with them moved
    last), so that each output element is reduced in one fixed order."""

    axes_input_since = 18

    @property
    def kind_name(self) -> str:
        """The usage path's name: the operator's in lower case, e.g. 'reducemax'."""
        return self.op_type.lower()

    def _run(self, x, axes=None):
        element_type = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        shape, passes = self._cached_layout(x, axes)
        if shape is None:  # no axes and noop_with_empty_axes: each element alone
            if self._usage.enabled:
                self._record_path(*self._path(f"{self.kind_name}_noop", x.dtype, element_type,
                                              0))
            return (self._noop(x),)
        if self._usage.enabled:
            self._record_path(*self._path(self.kind_name, x.dtype, element_type, level))
        out = self._new_output(shape, x.dtype)
        if out.size == 0:
            return (out,)
        if x.size == 0:  # an empty reduction: the identity of the operator
            out[...] = self._empty_value(x.dtype)
            return (out,)
        self._reduce(x, axes, out, shape, passes, element_type, level)
        return (out,)

    def _empty_value(self, dtype: np.dtype):
        return 0

    def _noop(self, x):
        """The output of noop_with_empty_axes without axes: the reduction of
        each element alone (ONNX Runtime's and the built-in's: x for most,
        |x| for L1 and L2, x squared for SumSquare), a new array."""
        return np.array(x, copy=True)

    def _reduce(self, x, axes, out, shape, passes, element_type: int, level: int) -> None:
        raise NotImplementedError

    def _one_pass(self, x, axes, passes) -> tuple:
        """(contiguous x, A, R, B): x seen as [A, R, B] with every reduced
        axis in R, moved last (a copy) when they are not consecutive."""
        x = np.ascontiguousarray(x)
        if not passes:  # every reduced dimension has size 1
            return x, x.size, 1, 1
        if len(passes) == 1:
            A, R, B, _ = passes[0]
            return x, A, R, B
        reduced = self._reduced_axes(x, axes)
        self._check_bytes("input 0 with the reduced axes moved last", x.nbytes)
        kept = [k for k in range(x.ndim) if k not in reduced]
        moved = np.ascontiguousarray(np.transpose(x, kept + sorted(reduced)))
        R = math.prod(x.shape[k] for k in reduced)
        return moved, x.size // max(R, 1), R, 1


class _CoreReduce(_AxesReduce):
    """Max, Min and Prod in the reduce core (reduce/olc_reduce_ext.h)."""

    core_kind: ClassVar[int]

    def _reduce(self, x, axes, out, shape, passes, element_type, level):
        x, A, R, B = self._one_pass(x, axes, passes)
        threads = self._num_threads(A * R * B, self.min_work_per_thread)
        core.reduce_ext(x, out, A, R, B, self.core_kind, element_type, level, threads)


class _ExtremeReduce(_CoreReduce):
    """Max or Min over ``axes``; NaN propagates (as NumPy's and the
    built-in's); an empty reduction gives the comparison's identity (-inf
    or inf, the integer type's minimum or maximum, False or True for bool),
    as ONNX and ONNX Runtime do."""

    inputs = (Input("data", types=NUMERIC + (T.INT8, T.UINT8, T.BOOL)), AXES)

    def _empty_value(self, dtype):
        low = self.core_kind == core.MAX  # the max of nothing is the lowest value
        if dtype == np.bool_:
            return not low
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return info.min if low else info.max
        return -np.inf if low else np.inf


class ReduceMax(_ExtremeReduce):
    core_kind = core.MAX


class ReduceMin(_ExtremeReduce):
    core_kind = core.MIN


class ReduceProd(_CoreReduce):
    """Product over ``axes``, one sequence of products per output element
    (16 lanes folded in a fixed tree for the last axes); float16 and
    bfloat16 in float32; integers wrap."""

    inputs = (Input("data", types=NUMERIC), AXES)
    core_kind = core.PROD

    def _empty_value(self, dtype):
        return 1


class _SumReduce(_AxesReduce):
    """A reduction built on ReduceSum's core: the sum of ``_terms(x)`` (in
    float32 for float16/bfloat16, rounded once at the end), then ``_finish``."""

    def _reduce(self, x, axes, out, shape, passes, element_type, level):
        wide = x.dtype in HALVES
        # the terms (|x|, x squared, or float32 x for the 16-bit types)
        self._check_bytes("the terms of input 0", x.size * (4 if wide else x.dtype.itemsize) * 2)
        terms = self._terms(x.astype(np.float32) if wide else x)
        if wide:
            acc = np.empty(shape, np.float32)
            self._sum(terms, acc, passes, ELEMENT_TYPES[acc.dtype], level)
            out[...] = self._finish(acc, x.size // max(acc.size, 1)).astype(x.dtype)
        else:
            self._sum(terms, out, passes, element_type, level)
            out[...] = self._finish(out, x.size // max(out.size, 1))

    def _terms(self, x):
        return x

    def _finish(self, s, count: int):
        return s


class ReduceMean(_SumReduce):
    """The sum divided by the count (NumPy's mean: float16 and bfloat16 sum
    in float32; integers divide truncating toward zero, as ONNX Runtime)."""

    inputs = (Input("data", types=NUMERIC), AXES)

    def _empty_value(self, dtype):
        return np.nan if dtype.kind == "f" or dtype in HALVES else 0

    def _finish(self, s, count):
        if s.dtype.kind in "iu":
            q = np.abs(s) // count
            return np.where(s < 0, -q, q) if s.dtype.kind == "i" else q
        return s / s.dtype.type(count)


class ReduceL1(_SumReduce):
    inputs = (Input("data", types=NUMERIC), AXES)

    def _noop(self, x):
        return np.abs(x)

    def _terms(self, x):
        return np.abs(x)


class ReduceSumSquare(_SumReduce):
    inputs = (Input("data", types=NUMERIC), AXES)

    def _noop(self, x):
        return x * x

    def _terms(self, x):
        return x * x


class ReduceL2(_SumReduce):
    inputs = (Input("data", types=NUMERIC), AXES)

    def _noop(self, x):
        return np.abs(x)

    def _terms(self, x):
        return x * x

    def _finish(self, s, count):
        if s.dtype.kind in "iu":  # as the built-in: the root in float64, truncated
            return np.sqrt(s.astype(np.float64)).astype(s.dtype)
        return np.sqrt(s)


class ReduceLogSumExp(_CoreReduce):
    """log(sum(exp(x - m))) + m, m the maximum (ReduceMax's core; exp and
    log in NumPy, float32 for float16/bfloat16): no overflow for large x."""

    inputs = (Input("data", types=FLOATS), AXES)
    core_kind = core.MAX

    def _empty_value(self, dtype):
        return -np.inf

    def _reduce(self, x, axes, out, shape, passes, element_type, level):
        xw, A, R, B = self._one_pass(x, axes, passes)
        self._check_bytes("exp(x - max) of input 0", x.size * max(x.dtype.itemsize, 4) * 2)
        if xw.dtype in HALVES:
            xw = xw.astype(np.float32)
        et = ELEMENT_TYPES[xw.dtype]
        m = np.empty((A, 1, B), xw.dtype)
        threads = self._num_threads(A * R * B, self.min_work_per_thread)
        core.reduce_ext(xw, m, A, R, B, core.MAX, et, level, threads)
        # the maximum of a row of infinities or NaN: subtract nothing
        shift = np.where(np.isfinite(m), m, 0).astype(xw.dtype)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            e = np.exp(xw.reshape(A, R, B) - shift)
        s = np.empty((A, 1, B), xw.dtype)
        core.reduce_sum(e, s, A, R, B, et, level, threads)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(s) + shift
        out.reshape(-1)[...] = r.reshape(-1).astype(out.dtype)


class _SoftmaxPlan(NamedTuple):
    axis: int
    rows: int
    n: int
    inner: int       # 1: the rows are contiguous
    element_type: int
    level: int
    path: tuple


class Softmax(_Reduce):
    """exp(x - max) / sum along ``axis`` (opset 13+), or over the flattened
    trailing dimensions [prod(dims[:axis]), prod(dims[axis:])] (opsets 1, 11)."""

    inputs = (Input("input", types=FLOATS),)
    attributes = (Attr("axis", "int", None),)
    # Elements per thread before a second thread pays (exp-bound): two
    # threads win from 32K float32 elements (measured, 2-core Zen 5).
    min_work_per_thread = 1 << 14

    def _plan(self, x):
        element_type = ELEMENT_TYPES[x.dtype]
        rank = x.ndim
        axis = self.axis if self.axis is not None else -1 if self.opset >= 13 else 1
        if not -rank <= axis < max(rank, 1):
            raise ValueError(self._input_error(
                0, f"of rank {rank} has no axis {axis} (expected [{-rank}, {rank - 1}])"))
        axis = axis + rank if axis < 0 else axis
        level = simd.state.level
        if self.opset < 13:
            rows, n, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis:]), 1
        else:
            rows, n = math.prod(x.shape[:axis]), (x.shape[axis] if rank else 1)
            inner = math.prod(x.shape[axis + 1:])
        if inner == 1:
            path = self._path("softmax", x.dtype, element_type, level)
        elif element_type in (T.FLOAT, T.DOUBLE):  # another axis: column-wise in C
            path = self._path("softmax_axis", x.dtype, element_type, 0)
        else:
            path = self._path("softmax_axis", x.dtype, element_type, level)
        return _SoftmaxPlan(axis, rows, n, inner, element_type, level, path)

    def _execute(self, plan: _SoftmaxPlan, x):
        axis, rows, n, inner, element_type, level = plan[:6]
        if not x.flags.c_contiguous:  # (np.ascontiguousarray makes a scalar rank 1)
            x = np.ascontiguousarray(x)
        y = self._new_output(x.shape, x.dtype)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        self._record_path(*plan.path)
        if inner == 1:
            core.softmax_rows(x, y, rows, n, element_type, level, threads)
            return (y,)
        if element_type in (T.FLOAT, T.DOUBLE):  # another axis: column-wise in C
            core.softmax_axis(x, y, rows, n, inner, threads)
            return (y,)
        # float16/bfloat16 on another axis: that axis moved last, so that the
        # rows keep the narrow types' rounding points.
        moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
        out = np.empty_like(moved)
        core.softmax_rows(moved, out, rows * inner, n, element_type, level, threads)
        y[...] = np.moveaxis(out, -1, axis)
        return (y,)


KERNELS = {
    "RegisterReduceSumKernel": (ReduceSum,),
    "RegisterReduceMeanKernel": (ReduceMean,),
    "RegisterReduceMaxKernel": (ReduceMax,),
    "RegisterReduceMinKernel": (ReduceMin,),
    "RegisterReduceProdKernel": (ReduceProd,),
    "RegisterReduceL1Kernel": (ReduceL1,),
    "RegisterReduceL2Kernel": (ReduceL2,),
    "RegisterReduceSumSquareKernel": (ReduceSumSquare,),
    "RegisterReduceLogSumExpKernel": (ReduceLogSumExp,),
    "RegisterSoftmaxKernel": (Softmax,),
}
