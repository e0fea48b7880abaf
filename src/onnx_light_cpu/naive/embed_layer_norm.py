"""NAIVE com.microsoft EmbedLayerNormalization: the gathers, the sum and the
LayerNorm in NumPy (float32 arithmetic, one rounding to the input type).

Validation, index checks and the mask count are shared with the optimized
adapter (:class:`onnx_light_cpu.ops.embed_layer_norm.EmbedLayerNormalizationBase`).
"""

from __future__ import annotations

import numpy as np

from ..ops.embed_layer_norm import EmbedLayerNormalizationBase


class EmbedLayerNormalization(EmbedLayerNormalizationBase):
    kernel_prefix = "Naive"

    def _compute(self, plan, ids, sids, word, pos, seg, gamma, beta, pids):
        self._record_path((word.dtype.name,), lambda: f"naive_{word.dtype.name}_numpy")
        f32 = np.float32
        v = word[ids].astype(f32) + pos[self.positions(ids, pids)].astype(f32)
        if seg is not None:
            v = v + seg[sids if sids is not None else np.zeros_like(ids)].astype(f32)
        with np.errstate(all="ignore"):  # NaN/inf rows give NaN, silently
            mean = v.mean(axis=-1, keepdims=True, dtype=f32)
            centred = v - mean
            var = (centred * centred).mean(axis=-1, keepdims=True, dtype=f32)
            y = centred / np.sqrt(var + f32(self.epsilon)) * gamma.astype(f32) + beta.astype(f32)
        total = v.astype(word.dtype) if self.wants[2] else None
        return y.astype(word.dtype), total


KERNELS = {
    "RegisterMicrosoftKernels": (EmbedLayerNormalization,),
}
