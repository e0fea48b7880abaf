"""NAIVE com.microsoft CDist: the differences of every pair in NumPy,
squared and summed (one row of A at a time to bound memory).

Validation is shared with the optimized adapter
(:class:`onnx_light_cpu.ops.cdist.CDistBase`).
"""

from __future__ import annotations

import numpy as np

from ..ops.cdist import CDistBase


class CDist(CDistBase):
    kernel_prefix = "Naive"

    def _compute(self, a, b, element_type):
        self._record_path((self.metric, a.dtype.name),
                          lambda: f"naive_{self.metric}_{a.dtype.name}_numpy")
        y = np.empty((a.shape[0], b.shape[0]), dtype=a.dtype)
        for i in range(a.shape[0]):
            d = b - a[i]
            y[i] = (d * d).sum(axis=1)
        if self.euclidean:
            y = np.sqrt(y)
        return (y,)


KERNELS = {
    "RegisterMicrosoftKernels": (CDist,),
}
