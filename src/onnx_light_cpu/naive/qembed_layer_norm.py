"""NAIVE com.microsoft QEmbedLayerNormalization: the rows a run reads
dequantized as ONNX Runtime does (float32(q - zero_point) * scale), then
NAIVE EmbedLayerNormalization's NumPy sum and LayerNorm.

Validation, the quantization checks and the dequantization are shared with
the optimized adapter
(:class:`onnx_light_cpu.ops.qembed_layer_norm.QEmbedLayerNormalizationBase`).
"""

from __future__ import annotations

from ..ops.qembed_layer_norm import QEmbedLayerNormalizationBase
from .embed_layer_norm import EmbedLayerNormalization


class QEmbedLayerNormalization(QEmbedLayerNormalizationBase, EmbedLayerNormalization):
    pass


KERNELS = {
    "RegisterMicrosoftKernels": (QEmbedLayerNormalization,),
}
