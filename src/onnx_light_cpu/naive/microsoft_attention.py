"""NAIVE com.microsoft Attention: the projection and the scores
materialised in NumPy (float32), masked the way ONNX Runtime's CPU kernel
masks them (padding adds ``mask_filter_value``, unidirectional writes the
lowest float), a softmax per row, then the weighted sum of the values.

Validation, past/present and the mask decoding are shared with the
optimized adapter
(:class:`onnx_light_cpu.ops.microsoft_attention.MicrosoftAttentionBase`).
"""

from __future__ import annotations

import numpy as np

from ..ops.microsoft_attention import MicrosoftAttentionBase


class MicrosoftAttention(MicrosoftAttentionBase):
    op_type = "Attention"
    kernel_prefix = "Naive"
    computes_in_numpy = True

    def _project(self, plan, x, weights, bias):
        qkv = np.matmul(x.astype(np.float32), weights.astype(np.float32))
        if bias is not None:
            qkv += bias.astype(np.float32)
        return qkv.astype(x.dtype, copy=False)

    def _attend(self, plan, q4, k4, v4, out4, ranges, mask, attention_bias):
        self._record_path((q4.dtype.name,),
                          lambda: f"naive_microsoft_attention_{q4.dtype.name}_numpy")
        f32 = np.float32
        scores = np.matmul(q4.astype(f32), np.swapaxes(k4.astype(f32), -1, -2))
        scores *= f32(plan.scale)
        pad = self.padding_bias(plan, ranges, mask)
        if pad is not None:
            scores += pad
        if attention_bias is not None:
            scores += attention_bias.astype(f32)
        ends = self.causal_ends(plan)
        if ends is not None:
            hidden = np.arange(plan.t)[None, :] >= ends[:, None]  # (S, T)
            scores[:, :, hidden] = np.finfo(f32).min
        if scores.shape[-1] == 0 or scores.size == 0:
            out4[...] = 0
            return
        top = scores.max(axis=-1, keepdims=True)
        dead = np.isneginf(top)  # every key -inf (mask_filter_value -inf): zeros
        weights = np.exp(scores - np.where(dead, f32(0), top))
        total = weights.sum(axis=-1, keepdims=True)
        weights /= np.where(total == 0, f32(1), total)
        out4[...] = np.matmul(weights, v4.astype(f32))


KERNELS = {
    "RegisterMicrosoftKernels": (MicrosoftAttention,),
}
