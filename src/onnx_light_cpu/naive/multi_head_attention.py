"""NAIVE com.microsoft MultiHeadAttention: the scores materialised in
NumPy (float32), masked the way ONNX Runtime's CPU kernel masks them, a
softmax per row, then the weighted sum of the values.

Validation, projection bias, past/present and the mask semantics are
shared with the optimized adapter
(:class:`onnx_light_cpu.ops.multi_head_attention.MultiHeadAttentionBase`).
"""

from __future__ import annotations

import numpy as np

from ..ops.multi_head_attention import MultiHeadAttentionBase


class MultiHeadAttention(MultiHeadAttentionBase):
    kernel_prefix = "Naive"
    computes_in_numpy = True

    def _compute(self, q4, k4, v4, out4, scale, p, lengths, binary, attention_bias):
        self._record_path((q4.dtype.name,),
                          lambda: f"naive_multi_head_attention_{q4.dtype.name}_numpy")
        # (B, N, S, T): scale * Q K^T + attention_bias + padding, causal hidden
        scores = self.dense_scores(q4, k4, scale, p, lengths, binary, attention_bias)
        if scores.shape[-1] == 0:  # no key: nothing to attend
            out4[...] = 0
        else:
            weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
            weights /= weights.sum(axis=-1, keepdims=True)
            out4[...] = np.matmul(weights, v4.astype(np.float32))
        return self.narrow(scores, q4.dtype) if self.wants[3] else None


KERNELS = {
    "RegisterMicrosoftKernels": (MultiHeadAttention,),
}
