"""NAIVE com.microsoft BiasGelu: the formula in NumPy, float64
Phi(x) = erfc(-x / sqrt 2) / 2 (math.erfc per element), one rounding to the
input type; -inf gives NaN (-inf * 0) as in ONNX Runtime.

Validation is shared with the optimized adapter
(:class:`onnx_light_cpu.ops.bias_gelu.BiasGeluBase`).
"""

from __future__ import annotations

import math

import numpy as np

from ..ops.bias_gelu import BiasGeluBase

_ERFC = np.vectorize(math.erfc, otypes=[np.float64])


class BiasGelu(BiasGeluBase):
    kernel_prefix = "Naive"

    def _compute(self, a, bias, element_type):
        self._record_path((a.dtype.name,), lambda: f"naive_{a.dtype.name}_numpy")
        # float16/bfloat16 add in float32 as the optimized family does.
        wide = np.float64 if a.dtype == np.float64 else np.float32
        x = (a.astype(wide) + bias.astype(wide)).astype(np.float64)
        with np.errstate(all="ignore"):
            phi = 0.5 * _ERFC(-x / math.sqrt(2.0)) if x.size else x
            y = x * phi
        return (y.astype(a.dtype),)


KERNELS = {
    "RegisterMicrosoftKernels": (BiasGelu,),
}
