"""com.microsoft CDist (the OPTIMIZED family; the NAIVE one is in
:mod:`onnx_light_cpu.naive.cdist`).

    Y[i, j] = sum_k (A[i, k] - B[j, k])^2        metric "sqeuclidean" (default)
    Y[i, j] = sqrt(sum_k (A[i, k] - B[j, k])^2)  metric "euclidean"

A is [M, K], B is [N, K], float or double.  The differences are summed
directly, so no squared distance is negative (ONNX Runtime's expanded
|a|^2 + |b|^2 - 2ab form clamps them to 0 instead).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import cdist as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
METRICS = ("sqeuclidean", "euclidean")


class CDistBase(KernelOp):
    """Attributes and input validation shared by both families; subclasses
    implement ``_compute`` (or their own ``_plan`` and ``_execute``)."""

    op_domain = "com.microsoft"
    inputs = (Input("A", types=(T.FLOAT, T.DOUBLE), ranks=(2,)), Input("B", like=0, ranks=(2,)))
    attributes = (Attr("metric", "string", "sqeuclidean", allowed=METRICS),)

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self.euclidean = self.metric == "euclidean"

    def _plan(self, a, b):
        """Checks what the declarations cannot: the shared second dimension."""
        if b.shape[1] != a.shape[1]:
            raise ValueError(self._input_error(
                1, f"has shape {b.shape}: its second dimension must equal input 0's "
                   f"{a.shape[1]} (A is {a.shape})"))
        return None

    def _execute(self, plan, a, b):
        return self._compute(a, b, ELEMENT_TYPES[a.dtype])


class CDist(CDistBase):
    # Work is M * N * K squared differences.  Measured through the
    # evaluator on 2 idle cores (AVX-512, float32, K = 64, N = 512): 1M is a
    # wash (29.7 vs 29.4 µs), two threads win from 2M (40.2 -> 35.0 µs;
    # 8M: 99.5 -> 63.8 µs).
    min_work_per_thread = 1 << 20

    def _plan(self, a, b):
        super()._plan(a, b)
        element_type, level = ELEMENT_TYPES[a.dtype], simd.state.level
        M, K = a.shape
        name = a.dtype.name

        def label():
            return f"cdist_{self.metric}_{name}_{simd.LEVEL_NAMES[core.level_used(level)]}"

        return (element_type, level, (M, b.shape[0]),
                self._num_threads(M * b.shape[0] * max(K, 1), self.min_work_per_thread),
                ((element_type, level, self.euclidean), label))

    def _execute(self, plan, a, b):
        element_type, level, shape, threads, path = plan
        self._record_path(*path)
        y = self._new_output(shape, a.dtype)
        if y.size == 0:
            return (y,)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        bt = np.ascontiguousarray(b.T)  # [K, N]: the inner loop runs over N
        core.apply(a, bt, y, self.euclidean, element_type, level, threads)
        return (y,)


KERNELS = {
    "RegisterMicrosoftKernels": (CDist,),
}
