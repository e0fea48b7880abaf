"""NAIVE com.microsoft QAttention: the integer product in NumPy (float64,
exact for these sums of small integers), dequantized as ONNX Runtime does
(float32 of the product, times float32(weight_scale * input_scale), plus
the bias), then NAIVE Attention's scores, masks and softmax.

Validation and the quantization checks are shared with the optimized
adapter (:class:`onnx_light_cpu.ops.qattention.QAttentionBase`).
"""

from __future__ import annotations

import numpy as np

from ..ops.qattention import QAttentionBase
from .microsoft_attention import MicrosoftAttention


class QAttention(QAttentionBase, MicrosoftAttention):

    def _quantized_project(self, plan, x, weight, bias, scales, za, zb):
        self._record_path(("projection", x.dtype.name, weight.dtype.name), lambda: (
            f"naive_qattention_projection_{x.dtype.name}_{weight.dtype.name}_numpy"))
        a = x.astype(np.float64) - za
        w = weight.astype(np.float64) - zb.astype(np.float64)
        acc = np.matmul(a, w)  # exact: |acc| < 2^53
        return acc.astype(np.float32) * scales + bias


KERNELS = {
    "RegisterMicrosoftKernels": (QAttention,),
}
