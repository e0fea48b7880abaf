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
import onnx
from onnx import TensorProto

from .. import simd
from .._kernels import cdist as core
from ._base import KernelOp

T = TensorProto
METRICS = ("sqeuclidean", "euclidean")


class CDistBase(KernelOp):
    """Attribute and input validation shared by both families; subclasses
    implement ``_compute``."""

    op_domain = "com.microsoft"
    onnx_types = (T.FLOAT, T.DOUBLE)

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        metric = "sqeuclidean"
        for att in onnx_node.attribute:
            if att.name == "metric":
                metric = onnx.helper.get_attribute_value(att)
        if isinstance(metric, bytes):
            metric = metric.decode("utf-8", "replace")
        self.metric = metric
        # Raised at run time: a constructor error would break building the
        # evaluator or registering kernels on it.
        self._metric_error = None
        if metric not in METRICS:
            self._metric_error = (f"CDist: attribute metric must be one of "
                                  f"{', '.join(METRICS)}, got {metric!r}")
        self.euclidean = metric == "euclidean"

    def _run(self, *args):
        if self._metric_error:
            raise ValueError(self._metric_error)
        element_type = self._same_typed_inputs(args, "A and B")
        a, b = args
        for i, v in enumerate(args):
            if v.ndim != 2:
                raise ValueError(self._input_error(i, f"must have rank 2, got shape {v.shape}"))
        if b.shape[1] != a.shape[1]:
            raise ValueError(self._input_error(
                1, f"has shape {b.shape}: its second dimension must equal input 0's "
                   f"{a.shape[1]} (A is {a.shape})"))
        return self._compute(a, b, element_type)


class CDist(CDistBase):
    # Work is M * N * K squared differences.  Measured through the
    # evaluator on 2 idle cores (AVX-512, float32, K = 64, N = 512): 1M is a
    # wash (29.7 vs 29.4 µs), two threads win from 2M (40.2 -> 35.0 µs;
    # 8M: 99.5 -> 63.8 µs).
    min_work_per_thread = 1 << 20

    def _compute(self, a, b, element_type):
        level = simd.state.level
        if self._usage.enabled:
            key = (element_type, level, self.euclidean)
            path = self._paths.get(key)
            if path is None:
                used = simd.LEVEL_NAMES[core.level_used(level)]
                path = self._paths[key] = f"cdist_{self.metric}_{a.dtype.name}_{used}"
            self._usage.record(self.kernel_name, path)
        M, K = a.shape
        N = b.shape[0]
        y = self._new_output((M, N), a.dtype)
        if y.size == 0:
            return (y,)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        bt = np.ascontiguousarray(b.T)  # [K, N]: the inner loop runs over N
        threads = self._num_threads(M * N * max(K, 1), self.min_work_per_thread)
        core.apply(a, bt, y, self.euclidean, element_type, level, threads)
        return (y,)


KERNELS = {
    "RegisterMicrosoftKernels": (CDist,),
}
