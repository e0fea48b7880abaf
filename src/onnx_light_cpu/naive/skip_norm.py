"""NAIVE com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization:
the formulas in NumPy, float32 arithmetic, one rounding to the input type.

Validation and outputs are shared with the optimized adapters
(:class:`onnx_light_cpu.ops.skip_norm.SkipNormBase`), so both families accept
and reject the same inputs.
"""

from __future__ import annotations

import numpy as np

from ..ops.skip_norm import SkipNormBase


class _NaiveSkipNorm(SkipNormBase):
    kernel_prefix = "Naive"

    def _compute(self, x, skip, gamma, beta, bias):
        self._record_path((x.dtype.name,), lambda: f"naive_{x.dtype.name}_numpy")
        with np.errstate(all="ignore"):  # NaN/inf rows give NaN, silently
            return self._formulas(x, skip, gamma, beta, bias)

    def _formulas(self, x, skip, gamma, beta, bias):
        f32 = np.float32
        v = x.astype(f32) + skip.astype(f32)  # skip broadcasts over the batch
        if bias is not None:
            v = v + bias.astype(f32)
        if self.simplified:
            mean = np.zeros(v.shape[:-1] + (1,), dtype=f32)
            centred = v
        else:
            mean = v.mean(axis=-1, keepdims=True, dtype=f32)
            centred = v - mean
        var = (centred * centred).mean(axis=-1, keepdims=True, dtype=f32)
        inv = (f32(1) / np.sqrt(var + f32(self.epsilon))).astype(f32)
        y = centred * inv * gamma.astype(f32)
        if beta is not None:
            y = y + beta.astype(f32)
        wanted = self._wanted
        return self._outputs(
            y.astype(x.dtype),
            mean if wanted[1] else None,
            inv if wanted[2] else None,
            v.astype(x.dtype) if wanted[3] else None,
        )


class SkipLayerNormalization(_NaiveSkipNorm):
    simplified = False


class SkipSimplifiedLayerNormalization(_NaiveSkipNorm):
    simplified = True


KERNELS = {
    "RegisterMicrosoftKernels": (SkipLayerNormalization, SkipSimplifiedLayerNormalization),
}
