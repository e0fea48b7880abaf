"""NAIVE com.microsoft CausalConvWithState: the definition in NumPy.

Each output position reads the virtual concatenation v = [past_state,
input] along time through ``_virtual``; v is never built.  float32
arithmetic (bias first, then the taps in order), one rounding to the input
type.  Validation, attributes and output shapes are shared with the
optimized adapter (:class:`onnx_light_cpu.ops.causal_conv_with_state.MicrosoftCausalConvBase`).
"""

from __future__ import annotations

import numpy as np

from ..ops.causal_conv_with_state import MicrosoftCausalConvBase


class MicrosoftCausalConvWithState(MicrosoftCausalConvBase):
    op_type = "CausalConvWithState"
    kernel_prefix = "Naive"

    def _compute(self, x, weight, bias, past_state, channels, state_shape):
        self._record_path((x.dtype.name,), lambda: f"naive_{x.dtype.name}_numpy")
        batch, k = x.shape[0], weight.shape[2]
        state_len = (k - 1) * self.dilation
        # Work channels-first, (B, C, time), in float32.
        if self.channels_last:
            length = x.shape[1]
            xs = x.reshape(batch, length, channels).transpose(0, 2, 1)
            state = (None if past_state is None
                     else past_state.reshape(batch, state_len, channels).transpose(0, 2, 1))
        else:
            length = x.shape[2]
            xs, state = x, past_state
        xs = xs.astype(np.float32)
        state = None if state is None else state.astype(np.float32)
        w = weight.reshape(channels, k).astype(np.float32)

        def _virtual(i: int) -> np.ndarray:
            """Position i of [state, x] for every (batch, channel)."""
            if i >= state_len:
                return xs[:, :, i - state_len]
            if state is None:
                return np.zeros((batch, channels), np.float32)
            return state[:, :, i]

        y = np.empty((batch, channels, length), np.float32)
        for t in range(length):
            acc = (np.zeros((batch, channels), np.float32) if bias is None
                   else np.broadcast_to(bias.astype(np.float32), (batch, channels)).copy())
            for j in range(k):
                acc = acc + w[:, j] * _virtual(t + state_len - (k - 1 - j) * self.dilation)
            if self.silu:
                with np.errstate(over="ignore"):
                    acc = acc * (1.0 / (1.0 + np.exp(-acc.astype(np.float64)))).astype(np.float32)
            y[:, :, t] = acc
        present = np.empty((batch, channels, state_len), x.dtype)
        for i in range(state_len):
            present[:, :, i] = _virtual(length + i).astype(x.dtype)

        if self.channels_last:
            y = y.transpose(0, 2, 1)
            present = present.transpose(0, 2, 1)
        return (np.ascontiguousarray(y.astype(x.dtype)).reshape(x.shape),
                np.ascontiguousarray(present).reshape(state_shape))


KERNELS = {
    "RegisterMicrosoftKernels": (MicrosoftCausalConvWithState,),
}
