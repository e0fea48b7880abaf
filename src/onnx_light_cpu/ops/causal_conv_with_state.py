"""CausalConvWithState: ai.onnx (opset 27) and com.microsoft (the OPTIMIZED
family; the NAIVE one is :mod:`onnx_light_cpu.naive.causal_conv_with_state`).

A depthwise causal convolution over time whose left context is a carried
state: with K taps, dilation d and SL = (K - 1) d, output t of channel c is

    act(bias[c] + sum_j weight[c, 0, j] * v[t + SL - (K - 1 - j) d])

over v = [past_state (zeros when absent), input] along time, and
present_state holds v's last SL positions.  act is none or SiLU ("silu",
"swish").  float16/bfloat16 are computed in float32, rounded once.

- ai.onnx: input (B, C, L), weight (C, 1, K), bias (C), past_state (B, C, K-1).
- com.microsoft adds ``dilation`` and ``channels_last``: input (B, L, d_1..d_n)
  with C = d_1 * ... * d_n and states (B, SL, d_1..d_n).  As in ONNX Runtime's
  CPU kernel, ``ndim`` other than 1, ``state_window`` > 0, the CUDA-only
  extended attributes (state_length, input_channels, input_channel_offset,
  state_channels_last, state_update_capacity) and the third output raise
  NotImplementedError.
"""

from __future__ import annotations

import math
import types
from typing import NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import causal_conv_with_state as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
ACTIVATIONS = ("none", "silu", "swish")
# CUDA-only attributes of the com.microsoft schema and their defaults.
_EXTENDED = {"state_length": 0, "input_channels": 0, "input_channel_offset": 0,
             "state_channels_last": -1, "state_update_capacity": 0}


class Plan(NamedTuple):
    """What a run needs that the inputs' shapes decide."""

    channels: int
    state_shape: tuple[int, ...]
    length: int
    threads: int


class CausalConvBase(KernelOp):
    """Input validation and output planning shared by both domains and both
    families; subclasses implement ``_compute``."""

    inputs = (Input("input", types=FLOATS, ranks=(3,)),
              Input("weight", like=0, ranks=(3,)),
              Input("bias", like=0, ranks=(1,), optional=True),
              Input("past_state", like=0, optional=True))
    attributes = (Attr("activation", "string", "none", allowed=ACTIVATIONS),)
    dilation = 1
    channels_last = False
    #: Work units one thread must have before a second one helps (the
    #: OPTIMIZED family sets it; the NAIVE one runs on one thread).
    min_work_per_thread = 1 << 62

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self.silu = self.activation in ("silu", "swish")

    def _plan(self, x, weight, bias=None, past_state=None):
        if self.channels_last:
            if x.ndim < 3:
                raise ValueError(self._input_error(
                    0, f"must have rank >= 3 (batch, sequence, channels...) with channels_last=1, "
                       f"got shape {x.shape}"))
            channels = math.prod(x.shape[2:])
        else:
            if x.ndim != 3:
                raise ValueError(self._input_error(
                    0, f"must have rank 3 (batch, channels, length), got shape {x.shape}"))
            channels = x.shape[1]
        if weight.shape[0] != channels or weight.shape[1] != 1 or weight.shape[2] < 1:
            raise ValueError(self._input_error(
                1, f"must have shape ({channels}, 1, k) with k >= 1, got {weight.shape}"))
        if bias is not None and bias.shape != (channels,):
            raise ValueError(self._input_error(
                2, f"must have shape ({channels},), got {bias.shape}"))
        k = weight.shape[2]
        state_len = (k - 1) * self.dilation
        batch = x.shape[0]
        if self.channels_last:
            state_shape = (batch, state_len, *x.shape[2:])
        else:
            state_shape = (batch, channels, state_len)
        if past_state is not None and past_state.shape != state_shape:
            raise ValueError(self._input_error(
                3, f"must have shape {state_shape} ((k - 1) * dilation = {state_len} positions), "
                   f"got {past_state.shape}"))
        length = x.shape[1] if self.channels_last else x.shape[2]
        # Taps and state copies: an empty-sequence state handoff is not free.
        work = batch * channels * (length * k + state_len)
        return Plan(channels, state_shape, length,
                    self._num_threads(work, self.min_work_per_thread))

    def _execute(self, plan, x, weight, bias=None, past_state=None):
        return self._compute(x, weight, bias, past_state, plan.channels, plan.state_shape)


class _Optimized:
    """The core call (mixed into the adapters of the OPTIMIZED family)."""

    # Work units (taps plus state copies, per channel and batch) one thread
    # must have before a second one helps.  Measured on the core on 2 cores
    # (AVX-512, float32, C=2048, K=4, SiLU): channels-first, a one-token
    # decode (14K units) gains little (7.9 -> 6.8 µs) and stays on one
    # thread, L=2 (22K) gains (9.5 -> 7.5 µs).  Channels-last splits time
    # into 8-step tasks, so it needs two of them: L=16 (137K) gains (14.9 ->
    # 9.0 µs); below, one task runs whatever the count.
    min_work_channels_first = 1 << 13
    min_work_channels_last = 1 << 14

    @property
    def min_work_per_thread(self) -> int:
        return self.min_work_channels_last if self.channels_last else self.min_work_channels_first

    @staticmethod
    def _tap_major(weight: np.ndarray) -> np.ndarray:
        """float32 weights [K, C] (tap-major) for the core."""
        return np.ascontiguousarray(weight.reshape(weight.shape[0], weight.shape[2]).T,
                                    dtype=np.float32)

    @staticmethod
    def _float32(bias: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(bias, dtype=np.float32)

    def _execute(self, plan, x, weight, bias=None, past_state=None):
        level = simd.state.level
        self._record_path((self.channels_last, x.dtype, level), lambda: (
            f"causal_conv_{'cl' if self.channels_last else 'cf'}_{x.dtype.name}_"
            f"{simd.LEVEL_NAMES[core.level_used(level)]}"))
        y = self._new_output(x.shape, x.dtype, 0)
        present = self._new_output(plan.state_shape, x.dtype, 1)
        if y.size == 0 and present.size == 0:
            return y, present
        x = np.ascontiguousarray(x)
        if past_state is not None:
            past_state = np.ascontiguousarray(past_state)
        if bias is not None:
            bias = self._prepared_input(2, 2, bias, lambda: self._float32(bias))
        w = self._prepared_input(1, 1, weight, lambda: self._tap_major(weight))
        if self.channels_last:  # (B, L, d...) as (B, L, C)
            x = x.reshape(x.shape[0], plan.length, plan.channels)
        core.causal_conv(x, past_state, w, bias, y, present, self.dilation, self.silu,
                         self.channels_last, ELEMENT_TYPES[x.dtype], level, plan.threads)
        return y, present


class CausalConvWithState(_Optimized, CausalConvBase):
    """ai.onnx CausalConvWithState (27): channels-first, no dilation."""

    since_version = 27


class MicrosoftCausalConvBase(CausalConvBase):
    """com.microsoft CausalConvWithState: adds dilation and channels_last
    (the input's rank is checked by the plan: 3 channels-first, 3 or more
    channels-last)."""

    op_domain = "com.microsoft"
    inputs = (Input("input", types=FLOATS),) + CausalConvBase.inputs[1:]
    attributes = CausalConvBase.attributes + (
        Attr("dilation", "int", 1), Attr("channels_last", "flag", 0), Attr("ndim", "int", 1),
        Attr("state_window", "int", 0),
        *(Attr(name, "int", default) for name, default in _EXTENDED.items()))

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._unsupported: str | None = None
        extended = [name for name, default in _EXTENDED.items()
                    if getattr(self, name) != default]
        if self.dilation < 1:
            self._reject_attribute(f"attribute dilation must be >= 1, got {self.dilation}")
        elif self.ndim != 1:
            self._unsupported = (f"ndim={self.ndim} is not supported "
                                 "(ONNX Runtime's CPU kernel runs ndim=1)")
        elif self.state_window != 0:
            self._unsupported = (f"state_window={self.state_window} is not supported "
                                 "(CUDA only in ONNX Runtime)")
        elif extended:
            self._unsupported = (f"{', '.join(extended)} not supported (CUDA-only extended "
                                 "channel/state options)")
        elif len(onnx_node.output) > 2 and onnx_node.output[2]:
            self._unsupported = "the state_update output is not supported (CUDA only)"

    def _plan(self, *args):
        if self._unsupported is not None:
            raise NotImplementedError(f"{self.onnx_node.op_type}: {self._unsupported}")
        return super()._plan(*args)


class MicrosoftCausalConvWithState(_Optimized, MicrosoftCausalConvBase):
    """com.microsoft CausalConvWithState, the OPTIMIZED family."""

    op_type = "CausalConvWithState"


KERNELS = {
    "RegisterCausalConvWithStateKernel": (CausalConvWithState,),
}

#: The com.microsoft kernel, the OPTIMIZED half of its policy pair.
microsoft_family = types.SimpleNamespace(KERNELS={
    "RegisterMicrosoftKernels": (MicrosoftCausalConvWithState,),
})
