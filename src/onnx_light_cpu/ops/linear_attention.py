"""LinearAttention: ai.onnx (opset 27) and com.microsoft (the OPTIMIZED
family; the NAIVE one is in :mod:`onnx_light_cpu.naive.linear_attention`).

query [B, T, Hq*dk], key [B, T, H*dk], value [B, T, Hkv*dv], optional
past_state [B, Hkv, dk, dv], decay [B, T, Hkv*dk] or [B, T, Hkv] (log-space
gate), beta [B, T, Hkv] or [B, T, 1]; outputs output [B, T, Hq*dv] and
present_state.  Per (batch, kv head) and token:

    gated:        S = exp(g) * S
    delta:        u = beta * (v - S^T k)          (u = v otherwise)
    every rule:   S = S + k u^T,   o = scale * S^T q    (scale 0 -> 1/sqrt(dk))

The recurrence runs in float32 whatever the element types (float, float16,
bfloat16); the state's type S may differ from the activations' T, and
present_state has past_state's type (T's without one).

com.microsoft extends the contract as ONNX Runtime does: fewer key heads
than kv heads (kv head h reads key head h / (Hkv / Hk)), inverse GQA (Hq <
Hkv: kv head h reads query head h / (Hkv / Hq) and the output has Hkv
heads), decay and beta ignored by the rules that do not use them, and
``state_window`` W > 0: past and present states of shape [W, B, Hkv, dk,
dv], slot s the state after token T - W + s (zeros before the first token),
past read from slot W - 1 (ONNX Runtime runs this on CUDA only).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels import linear_attention as core
from ._base import Attr, Input, KernelOp
from ._contract import REQUIRED

T = TensorProto
FLOATS = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
RULES = ("linear", "gated", "delta", "gated_delta")
INPUTS = ("query", "key", "value", "past_state", "decay", "beta")
# Element type codes of the core (onnx.TensorProto numbering).
CODES = {np.dtype(np.float32): T.FLOAT, np.dtype(np.float16): T.FLOAT16,
         np.dtype(bfloat16): T.BFLOAT16}
MAX_STATE_WINDOW = 8


class Plan(NamedTuple):
    """What a run needs that the inputs' shapes decide."""

    B: int
    S: int
    Hq: int
    Hk: int
    Hkv: int
    dk: int
    dv: int
    decay_rows: bool
    beta_heads: bool
    scale: float
    threads: int


class LinearAttentionBase(KernelOp):
    """Input validation shared by every LinearAttention adapter (all of it
    on shapes: the plan); the NAIVE family implements ``_compute``, the
    OPTIMIZED one ``_execute``."""

    inputs = (Input("query", types=FLOATS, ranks=(3,)),
              Input("key", like=0, ranks=(3,)),
              Input("value", like=0, ranks=(3,)),
              Input("past_state", types=FLOATS, optional=True),
              Input("decay", like=0, ranks=(3,), optional=True),
              Input("beta", like=0, ranks=(3,), optional=True))
    attributes = (Attr("update_rule", "string", "gated_delta", allowed=RULES),
                  Attr("q_num_heads", "int", REQUIRED),
                  Attr("kv_num_heads", "int", REQUIRED),
                  Attr("scale", "float", 0.0))
    #: com.microsoft's extensions (key heads, inverse GQA, state windows,
    #: unused decay/beta ignored)
    microsoft = False
    state_window = 0
    # Work is B * Hkv * dk * dv * (T + 2): the recurrence touches each state
    # element once a token, and reading the past state and writing the
    # present one cost about two tokens more.  Threads split (batch, kv
    # head) pairs.  Measured through the evaluator (AVX-512, float32,
    # gated_delta; 2 cores shared with other jobs, minimum of 15 blocks):
    # decode H=8, d=128 (393K) 30.3 -> 28.4 µs, H=16, d=128 (786K) 58 ->
    # 38 µs; prefill T=16, H=4, d=64 (295K) 20.5 -> 20.5 µs, H=16, d=64
    # decode (196K) 14.6 -> 17.2 µs.
    min_work_per_thread = 1 << 18

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        rule = self.update_rule
        self.gated = rule in ("gated", "gated_delta")
        self.delta = rule in ("delta", "gated_delta")
        Hq, Hkv = self.q_num_heads, self.kv_num_heads
        if Hq is None or Hkv is None:
            return  # kept: the attribute is required
        if Hq <= 0 or Hkv <= 0:
            self._reject_attribute(f"q_num_heads ({Hq}) and kv_num_heads ({Hkv}) must be "
                                   "positive")
        elif self.microsoft and (Hq % Hkv and Hkv % Hq):
            self._reject_attribute(f"q_num_heads ({Hq}) and kv_num_heads ({Hkv}) must be "
                                   "multiples one of the other")
        elif not self.microsoft and Hq % Hkv:
            self._reject_attribute(f"q_num_heads ({Hq}) must be a positive multiple of "
                                   f"kv_num_heads ({Hkv})")
        elif not 0 <= self.state_window <= MAX_STATE_WINDOW:
            self._reject_attribute(f"attribute state_window must be in [0, {MAX_STATE_WINDOW}], "
                                   f"got {self.state_window}")

    def _plan(self, q, k, v, past=None, decay=None, beta=None):
        op = "LinearAttention"
        B, S, hidden = q.shape
        for i, x in ((1, k), (2, v)):
            if x.shape[:2] != (B, S):
                raise ValueError(self._input_error(
                    i, f"has shape {x.shape}: its batch and sequence sizes must equal query's "
                       f"{(B, S)}"))
        Hq, Hkv = self.q_num_heads, self.kv_num_heads
        if hidden % Hq:
            raise ValueError(self._input_error(
                0, f"last dimension {hidden} is not a multiple of q_num_heads {Hq}"))
        dk = hidden // Hq
        if self.microsoft and dk:
            # key may carry fewer heads, each shared by Hkv / Hk kv heads
            Hk = k.shape[2] // dk
            if k.shape[2] % dk or Hk == 0 or Hkv % Hk:
                raise ValueError(self._input_error(
                    1, f"last dimension {k.shape[2]} must be H * {dk} (d_k) with H dividing "
                       f"kv_num_heads {Hkv}"))
        else:
            Hk = Hkv
            if k.shape[2] != Hkv * dk:
                raise ValueError(self._input_error(
                    1, f"last dimension {k.shape[2]} must be kv_num_heads * d_k = {Hkv} * {dk}"))
        if v.shape[2] % Hkv:
            raise ValueError(self._input_error(
                2, f"last dimension {v.shape[2]} is not a multiple of kv_num_heads {Hkv}"))
        dv = v.shape[2] // Hkv

        for i, x, needed, rules in ((4, decay, self.gated, "gated and gated_delta"),
                                    (5, beta, self.delta, "delta and gated_delta")):
            if needed and x is None:
                raise ValueError(f"{op}: update_rule {self.update_rule!r} requires input {i} "
                                 f"({INPUTS[i]})")
            if not needed and x is not None and not self.microsoft:
                raise ValueError(self._input_error(
                    i, f"is only allowed with update_rule {rules}, not {self.update_rule!r}"))
        decay_rows = False
        if self.gated:
            last = decay.shape[2]
            if decay.shape[:2] != (B, S) or last not in (Hkv, Hkv * dk):
                raise ValueError(self._input_error(
                    4, f"has shape {decay.shape}, expected {(B, S, Hkv * dk)} (per key "
                       f"dimension) or {(B, S, Hkv)} (per head)"))
            decay_rows = last != Hkv
        beta_heads = False
        if self.delta:
            if beta.shape[:2] != (B, S) or beta.shape[2] not in (Hkv, 1):
                raise ValueError(self._input_error(
                    5, f"has shape {beta.shape}, expected {(B, S, Hkv)} or {(B, S, 1)}"))
            beta_heads = beta.shape[2] == Hkv and Hkv != 1

        W = self.state_window
        state_shape = (B, Hkv, dk, dv) if W == 0 else (W, B, Hkv, dk, dv)
        if past is not None:
            if past.ndim != len(state_shape):
                raise ValueError(self._input_error(
                    3, f"has rank {past.ndim} (shape {past.shape}), expected rank "
                       f"{len(state_shape)}"))
            if past.shape != state_shape:
                raise ValueError(self._input_error(
                    3, f"has shape {past.shape}, expected {state_shape} (batch, kv_num_heads, "
                       "d_k, d_v)" + (" with state_window slots first" if W else "")))
        scale = self.scale if self.scale != 0.0 else (
            1.0 / np.sqrt(dk) if dk else float("inf"))
        threads = 1
        if B * Hkv > 1:
            threads = self._num_threads(B * Hkv * max(dk * dv, 1) * (S + 2),
                                        self.min_work_per_thread)
        return Plan(B, S, Hq, Hk, Hkv, dk, dv, decay_rows, beta_heads, scale, threads)

    def _execute(self, plan, q, k, v, past=None, decay=None, beta=None):
        p = plan
        return self._compute(q, k, v, past, decay if self.gated else None,
                             beta if self.delta else None, p.B, p.S, p.Hq, p.Hk, p.Hkv, p.dk,
                             p.dv, p.decay_rows, p.beta_heads, p.scale)

    def _compute(self, q, k, v, past, decay, beta, B, S, Hq, Hk, Hkv, dk, dv,
                 decay_rows, beta_heads, scale):
        raise NotImplementedError


def _contiguous(x):
    return x if x is None or x.flags.c_contiguous else np.ascontiguousarray(x)


class LinearAttentionKernel(LinearAttentionBase):
    """The optimized adapter, shared by both domains."""

    _scratch = None

    def _execute(self, plan, q, k, v, past=None, decay=None, beta=None):
        level = simd.state.level
        self._record_path((self.update_rule, q.dtype, level), lambda: (
            f"linear_attention_{self.update_rule}_{q.dtype.name}_"
            f"{simd.LEVEL_NAMES[core.level_used(level)]}"))
        B, S, Hq, Hkv, dk, dv = plan.B, plan.S, plan.Hq, plan.Hkv, plan.dk, plan.dv
        W = self.state_window
        state_dtype = q.dtype if past is None else past.dtype
        out = self._new_output((B, S, max(Hq, Hkv) * dv), q.dtype, 0)
        present = self._new_output((max(W, 1), B, Hkv, dk, dv), state_dtype, 1)
        if past is not None:
            past = np.ascontiguousarray(past[W - 1] if W else past)
        # The scratch (state blocks, staged tokens) stays with the node:
        # a fresh one would be mapped and faulted in again on every call.
        need = core.scratch_floats(Hq, Hkv, dk, dv, level, plan.threads)
        scratch = self._scratch
        if scratch is None or scratch.size < need:
            scratch = self._scratch = np.empty(need, dtype=np.float32)
        core.apply(_contiguous(q), _contiguous(k), _contiguous(v), past,
                   _contiguous(decay) if self.gated else None,
                   _contiguous(beta) if self.delta else None, out, present, scratch, Hq,
                   plan.Hk, Hkv, dk, dv, max(W, 1), self.gated, self.delta, plan.decay_rows,
                   plan.beta_heads, plan.scale, CODES[state_dtype], CODES[q.dtype], level,
                   plan.threads)
        return out, (present if W else present.reshape(B, Hkv, dk, dv))


class LinearAttention(LinearAttentionKernel):
    """ai.onnx LinearAttention (opset 27)."""

    since_version = 27


#: com.microsoft's attributes: ai.onnx's and the state window.
MICROSOFT_ATTRIBUTES = LinearAttentionBase.attributes + (Attr("state_window", "int", 0),)


class MicrosoftLinearAttentionBase(LinearAttentionBase):
    """Validation of the com.microsoft contract, for the NAIVE family."""

    op_type = "LinearAttention"
    op_domain = "com.microsoft"
    microsoft = True
    attributes = MICROSOFT_ATTRIBUTES


class MicrosoftLinearAttention(LinearAttentionKernel):
    """com.microsoft LinearAttention, the OPTIMIZED family."""

    op_type = "LinearAttention"
    op_domain = "com.microsoft"
    microsoft = True
    attributes = MICROSOFT_ATTRIBUTES
    since_version = 1


KERNELS = {
    "RegisterLinearAttentionKernel": (LinearAttention,),
}

#: The com.microsoft kernel as a family of its own (MICROSOFT_FAMILIES pairs
#: it with the NAIVE module): this module's KERNELS hold the ai.onnx one.
microsoft_family = SimpleNamespace(KERNELS={
    "RegisterMicrosoftKernels": (MicrosoftLinearAttention,),
})
