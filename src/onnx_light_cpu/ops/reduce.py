"""ReduceSum and Softmax."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import reduce as core
from ._base import ELEMENT_TYPES, KernelOp

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)


def _attribute_names(node) -> set[str]:
    return {a.name for a in node.attribute}


class _Reduce(KernelOp):
    onnx_types: ClassVar[tuple[int, ...]]
    min_work_per_thread: ClassVar[int]

    def _element_type(self, x) -> int:
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(0, f"must be a tensor, got {type(x).__name__}"))
        element_type = ELEMENT_TYPES.get(x.dtype)
        if element_type not in self._allowed:
            raise TypeError(self._input_error(
                0, f"has element type {x.dtype}, expected one of {', '.join(self.element_types)}"))
        return element_type

    def _record(self, kind: str, dtype: np.dtype, element_type: int, level: int) -> None:
        if self._usage.enabled:
            key = (kind, element_type, level)
            path = self._paths.get(key)
            if path is None:
                used = simd.LEVEL_NAMES[core.level_used(element_type, level)]
                path = self._paths[key] = f"{kind}_{dtype.name}_{used}"
            self._usage.record(self.kernel_name, path)


class ReduceSum(_Reduce):
    """Sum over ``axes`` (attribute before opset 13, input since)."""

    strided_inputs = frozenset({1})  # ``axes`` is counted before it is read

    onnx_types = (T.UINT32, T.UINT64, T.INT32, T.INT64) + FLOATS
    # Elements per thread before a second thread is asked, measured with
    # the second core idle (float32, t1 vs t2 in µs): [64, 1024] over the
    # last axis 7.3 vs 8.7, [128, 4096] 28.9 vs 17.1 (first axis 27.4 vs
    # 19.3).  Two threads from 256K elements.
    min_work_per_thread = 1 << 17

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        names = _attribute_names(onnx_node)
        self.keep = self._flag("keepdims", 1)
        self.noop = self._flag("noop_with_empty_axes", 0)
        self.attr_axes = [int(a) for a in self.axes] \
            if self.opset < 13 and "axes" in names else None

    def _run(self, x, axes=None):
        element_type = self._element_type(x)
        if self.opset < 13:
            axes_l = self.attr_axes
        elif axes is None:
            axes_l = None
        else:
            if not isinstance(axes, np.ndarray) or axes.dtype != np.int64:
                got = axes.dtype if isinstance(axes, np.ndarray) else type(axes).__name__
                raise TypeError(self._input_error(1, f"must be tensor(int64), got {got}"))
            if axes.size > max(x.ndim, 1):  # each axis once; checked before converting
                raise ValueError(self._input_error(
                    1, f"has {axes.size} axes for an input of rank {x.ndim}"))
            axes_l = axes.reshape(-1).tolist()
        if not axes_l:
            if self.noop:
                self._record("reducesum_noop", x.dtype, element_type, 0)
                return (np.array(x, copy=True),)
            axes_l = list(range(x.ndim))
        rank = x.ndim
        reduced = set()
        for a in axes_l:
            if not -rank <= a < max(rank, 1):
                raise ValueError(self._input_error(
                    1 if self.opset >= 13 else 0,
                    f"axis {a} is out of range for rank {rank} (expected [{-rank}, {rank - 1}])"))
            a = a + rank if a < 0 else a
            if a in reduced:
                raise ValueError(self._input_error(1 if self.opset >= 13 else 0,
                                                   f"repeats axis {a}"))
            reduced.add(a)
        shape = tuple(1 if k in reduced else d for k, d in enumerate(x.shape)) if self.keep \
            else tuple(d for k, d in enumerate(x.shape) if k not in reduced)
        level = simd.state.level
        self._record("reducesum", x.dtype, element_type, level)
        out = self._new_output(shape, x.dtype)
        if x.size == 0:
            out[...] = 0
            return (out,)
        x = np.ascontiguousarray(x)
        # Groups of consecutive dims reduced together or kept together
        # (dims of size 1 change nothing and are dropped).
        groups: list[list] = []
        for k, d in enumerate(x.shape):
            if d == 1:
                continue
            flag = k in reduced
            if groups and groups[-1][1] == flag:
                groups[-1][0] *= d
            else:
                groups.append([d, flag])
        if not any(flag for _, flag in groups):
            out.reshape(-1)[...] = x.reshape(-1)
            return (out,)
        src = x
        while True:
            g = max(i for i, (_, flag) in enumerate(groups) if flag)
            A = math.prod(d for d, _ in groups[:g])
            B = math.prod(d for d, _ in groups[g + 1:])
            R = groups[g][0]
            del groups[g]
            # kept neighbours become one group
            if 0 < g < len(groups) and not groups[g - 1][1] and not groups[g][1]:
                groups[g - 1][0] *= groups.pop(g)[0]
            last = not any(flag for _, flag in groups)
            dst = out if last else np.empty(A * B, dtype=x.dtype)
            threads = self._num_threads(A * R * B, self.min_work_per_thread)
            core.reduce_sum(src, dst, A, R, B, element_type, level, threads)
            if last:
                return (out,)
            src = dst


class Softmax(_Reduce):
    """exp(x - max) / sum along ``axis`` (opset 13+), or over the flattened
    trailing dimensions [prod(dims[:axis]), prod(dims[axis:])] (opsets 1, 11)."""

    onnx_types = FLOATS
    # Elements per thread before a second thread pays (exp-bound): two
    # threads win from 32K float32 elements (measured, 2-core Zen 5).
    min_work_per_thread = 1 << 14

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        default = -1 if self.opset >= 13 else 1
        self.softmax_axis = int(self.axis) if "axis" in _attribute_names(onnx_node) else default

    def _run(self, x):
        element_type = self._element_type(x)
        rank = x.ndim
        axis = self.softmax_axis
        if not -rank <= axis < max(rank, 1):
            raise ValueError(self._input_error(
                0, f"of rank {rank} has no axis {axis} (expected [{-rank}, {rank - 1}])"))
        axis = axis + rank if axis < 0 else axis
        if not x.flags.c_contiguous:  # (np.ascontiguousarray makes a scalar rank 1)
            x = np.ascontiguousarray(x)
        level = simd.state.level
        y = self._new_output(x.shape, x.dtype)
        if self.opset < 13:
            rows, n, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis:]), 1
        else:
            rows, n = math.prod(x.shape[:axis]), (x.shape[axis] if rank else 1)
            inner = math.prod(x.shape[axis + 1:])
        threads = self._num_threads(x.size, self.min_work_per_thread)
        if inner == 1:
            self._record("softmax", x.dtype, element_type, level)
            core.softmax_rows(x, y, rows, n, element_type, level, threads)
            return (y,)
        if element_type in (T.FLOAT, T.DOUBLE):  # another axis: column-wise in C
            self._record("softmax_axis", x.dtype, element_type, 0)
            core.softmax_axis(x, y, rows, n, inner, threads)
            return (y,)
        # float16/bfloat16 on another axis: that axis moved last, so that the
        # rows keep the narrow types' rounding points.
        self._record("softmax_axis", x.dtype, element_type, level)
        moved = np.ascontiguousarray(np.moveaxis(x, axis, -1))
        out = np.empty_like(moved)
        core.softmax_rows(moved, out, rows * inner, n, element_type, level, threads)
        y[...] = np.moveaxis(out, -1, axis)
        return (y,)


KERNELS = {
    "RegisterReduceSumKernel": (ReduceSum,),
    "RegisterSoftmaxKernel": (Softmax,),
}
