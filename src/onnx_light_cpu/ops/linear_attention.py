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

import numpy as np
import onnx
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels import linear_attention as core
from ._base import KernelOp

T = TensorProto
RULES = ("linear", "gated", "delta", "gated_delta")
INPUTS = ("query", "key", "value", "past_state", "decay", "beta")
# Element type codes of the core (onnx.TensorProto numbering).
CODES = {np.dtype(np.float32): T.FLOAT, np.dtype(np.float16): T.FLOAT16,
         np.dtype(bfloat16): T.BFLOAT16}
MAX_STATE_WINDOW = 8


class LinearAttentionBase(KernelOp):
    """Attribute parsing and input validation shared by every LinearAttention
    adapter; subclasses implement ``_compute``."""

    onnx_types = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
    #: com.microsoft's extensions (key heads, inverse GQA, state windows,
    #: unused decay/beta ignored)
    microsoft = False

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        values = {att.name: onnx.helper.get_attribute_value(att) for att in onnx_node.attribute}
        rule = values.get("update_rule", "gated_delta")
        if isinstance(rule, bytes):
            rule = rule.decode("utf-8", "replace")
        self.update_rule = rule
        self.q_num_heads = values.get("q_num_heads")
        self.kv_num_heads = values.get("kv_num_heads")
        self.scale = float(values.get("scale", 0.0))
        self.state_window = int(values.get("state_window", 0)) if self.microsoft else 0
        self.gated = rule in ("gated", "gated_delta")
        self.delta = rule in ("delta", "gated_delta")
        # Raised at run time: a constructor error would break building the
        # evaluator or registering kernels on it.
        op = "LinearAttention"
        error = None
        if rule not in RULES:
            error = f"{op}: attribute update_rule must be one of {', '.join(RULES)}, got {rule!r}"
        elif self.q_num_heads is None or self.kv_num_heads is None:
            error = f"{op}: attributes q_num_heads and kv_num_heads are required"
        elif self.q_num_heads <= 0 or self.kv_num_heads <= 0:
            error = (f"{op}: q_num_heads ({self.q_num_heads}) and kv_num_heads "
                     f"({self.kv_num_heads}) must be positive")
        elif self.microsoft and (self.q_num_heads % self.kv_num_heads
                                 and self.kv_num_heads % self.q_num_heads):
            error = (f"{op}: q_num_heads ({self.q_num_heads}) and kv_num_heads "
                     f"({self.kv_num_heads}) must be multiples one of the other")
        elif not self.microsoft and self.q_num_heads % self.kv_num_heads:
            error = (f"{op}: q_num_heads ({self.q_num_heads}) must be a positive multiple "
                     f"of kv_num_heads ({self.kv_num_heads})")
        elif not 0 <= self.state_window <= MAX_STATE_WINDOW:
            error = (f"{op}: attribute state_window must be in [0, {MAX_STATE_WINDOW}], "
                     f"got {self.state_window}")
        self._attribute_error = error

    def _tensor(self, args, i: int, dtype=None, ndim: int = 3) -> np.ndarray | None:
        """Input ``i`` (None when absent), checked: a tensor of rank ``ndim``
        and element type ``dtype`` (any accepted type when None)."""
        x = args[i] if i < len(args) else None
        if x is None:
            return None
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(i, f"({INPUTS[i]}) must be a tensor, got "
                                                 f"{type(x).__name__}"))
        if dtype is None:
            if x.dtype not in CODES:
                raise TypeError(self._input_error(
                    i, f"({INPUTS[i]}) has element type {x.dtype}, expected one of "
                       f"{', '.join(self.element_types)}"))
        elif x.dtype != dtype:
            raise TypeError(self._input_error(
                i, f"({INPUTS[i]}) has element type {x.dtype}, expected {dtype} like query"))
        if x.ndim != ndim:
            raise ValueError(self._input_error(
                i, f"({INPUTS[i]}) must have rank {ndim}, got shape {x.shape}"))
        return x

    def _run(self, *args):
        op = "LinearAttention"
        if not 3 <= len(args) <= 6 or any(a is None for a in args[:3]):
            raise ValueError(f"{op}: expects query, key, value and optional past_state, decay, "
                             f"beta, got {len(args)} inputs")
        q = self._tensor(args, 0)
        k = self._tensor(args, 1, q.dtype)
        v = self._tensor(args, 2, q.dtype)
        B, S, hidden = q.shape
        for i, x in ((1, k), (2, v)):
            if x.shape[:2] != (B, S):
                raise ValueError(self._input_error(
                    i, f"({INPUTS[i]}) has shape {x.shape}: its batch and sequence sizes must "
                       f"equal query's {(B, S)}"))
        Hq, Hkv = self.q_num_heads, self.kv_num_heads
        if hidden % Hq:
            raise ValueError(self._input_error(
                0, f"(query) last dimension {hidden} is not a multiple of q_num_heads {Hq}"))
        dk = hidden // Hq
        if self.microsoft and dk:
            # key may carry fewer heads, each shared by Hkv / Hk kv heads
            Hk = k.shape[2] // dk
            if k.shape[2] % dk or Hk == 0 or Hkv % Hk:
                raise ValueError(self._input_error(
                    1, f"(key) last dimension {k.shape[2]} must be H * {dk} (d_k) with H "
                       f"dividing kv_num_heads {Hkv}"))
        else:
            Hk = Hkv
            if k.shape[2] != Hkv * dk:
                raise ValueError(self._input_error(
                    1, f"(key) last dimension {k.shape[2]} must be kv_num_heads * d_k = "
                       f"{Hkv} * {dk}"))
        if v.shape[2] % Hkv:
            raise ValueError(self._input_error(
                2, f"(value) last dimension {v.shape[2]} is not a multiple of kv_num_heads {Hkv}"))
        dv = v.shape[2] // Hkv

        decay = self._tensor(args, 4, q.dtype)
        beta = self._tensor(args, 5, q.dtype)
        for i, x, needed, rules in ((4, decay, self.gated, "gated and gated_delta"),
                                    (5, beta, self.delta, "delta and gated_delta")):
            if needed and x is None:
                raise ValueError(f"{op}: update_rule {self.update_rule!r} requires input {i} "
                                 f"({INPUTS[i]})")
            if not needed and x is not None and not self.microsoft:
                raise ValueError(self._input_error(
                    i, f"({INPUTS[i]}) is only allowed with update_rule {rules}, "
                       f"not {self.update_rule!r}"))
        decay = decay if self.gated else None
        beta = beta if self.delta else None
        decay_rows = False
        if decay is not None:
            last = decay.shape[2]
            if decay.shape[:2] != (B, S) or last not in (Hkv, Hkv * dk):
                raise ValueError(self._input_error(
                    4, f"(decay) has shape {decay.shape}, expected {(B, S, Hkv * dk)} (per key "
                       f"dimension) or {(B, S, Hkv)} (per head)"))
            decay_rows = last != Hkv
        beta_heads = False
        if beta is not None:
            if beta.shape[:2] != (B, S) or beta.shape[2] not in (Hkv, 1):
                raise ValueError(self._input_error(
                    5, f"(beta) has shape {beta.shape}, expected {(B, S, Hkv)} or {(B, S, 1)}"))
            beta_heads = beta.shape[2] == Hkv and Hkv != 1

        W = self.state_window
        state_shape = (B, Hkv, dk, dv) if W == 0 else (W, B, Hkv, dk, dv)
        past = self._tensor(args, 3, None, len(state_shape))
        if past is not None and past.shape != state_shape:
            raise ValueError(self._input_error(
                3, f"(past_state) has shape {past.shape}, expected {state_shape} "
                   f"(batch, kv_num_heads, d_k, d_v)" + (" with state_window slots first"
                                                         if W else "")))
        scale = self.scale if self.scale != 0.0 else (
            1.0 / np.sqrt(dk) if dk else float("inf"))
        return self._compute(q, k, v, past, decay, beta, B, S, Hq, Hk, Hkv, dk, dv,
                             decay_rows, beta_heads, scale)


def _contiguous(x):
    return x if x is None or x.flags.c_contiguous else np.ascontiguousarray(x)


class LinearAttentionKernel(LinearAttentionBase):
    """The optimized adapter, shared by both domains."""

    # Work is B * Hkv * dk * dv * (T + 2): the recurrence touches each state
    # element once a token, and reading the past state and writing the
    # present one cost about two tokens more.  Threads split (batch, kv
    # head) pairs.  Measured through the evaluator (AVX-512, float32,
    # gated_delta; 2 cores shared with other jobs, minimum of 15 blocks):
    # decode H=8, d=128 (393K) 30.3 -> 28.4 µs, H=16, d=128 (786K) 58 ->
    # 38 µs; prefill T=16, H=4, d=64 (295K) 20.5 -> 20.5 µs, H=16, d=64
    # decode (196K) 14.6 -> 17.2 µs.
    min_work_per_thread = 1 << 18
    _scratch = None

    def _compute(self, q, k, v, past, decay, beta, B, S, Hq, Hk, Hkv, dk, dv,
                 decay_rows, beta_heads, scale):
        level = simd.state.level
        if self._usage.enabled:
            key = (self.update_rule, q.dtype, level)
            path = self._paths.get(key)
            if path is None:
                used = simd.LEVEL_NAMES[core.level_used(level)]
                path = self._paths[key] = (f"linear_attention_{self.update_rule}_"
                                           f"{q.dtype.name}_{used}")
            self._usage.record(self.kernel_name, path)
        W = self.state_window
        state_dtype = q.dtype if past is None else past.dtype
        Ho = max(Hq, Hkv)
        out = self._new_output((B, S, Ho * dv), q.dtype, 0)
        present = self._new_output((max(W, 1), B, Hkv, dk, dv), state_dtype, 1)
        if past is not None:
            past = np.ascontiguousarray(past[W - 1] if W else past)
        threads = 1
        if B * Hkv > 1:
            threads = self._num_threads(B * Hkv * max(dk * dv, 1) * (S + 2),
                                        self.min_work_per_thread)
        # The scratch (state blocks, staged tokens) stays with the node:
        # a fresh one would be mapped and faulted in again on every call.
        need = core.scratch_floats(Hq, Hkv, dk, dv, level, threads)
        scratch = self._scratch
        if scratch is None or scratch.size < need:
            scratch = self._scratch = np.empty(need, dtype=np.float32)
        core.apply(_contiguous(q), _contiguous(k), _contiguous(v), past, _contiguous(decay),
                   _contiguous(beta), out, present, scratch, Hq, Hk, Hkv, dk, dv, max(W, 1),
                   self.gated, self.delta, decay_rows, beta_heads, scale, CODES[state_dtype],
                   CODES[q.dtype], level, threads)
        return out, (present if W else present.reshape(B, Hkv, dk, dv))


class LinearAttention(LinearAttentionKernel):
    """ai.onnx LinearAttention (opset 27)."""

    since_version = 27


class MicrosoftLinearAttentionBase(LinearAttentionBase):
    """Validation of the com.microsoft contract, for the NAIVE family."""

    op_type = "LinearAttention"
    op_domain = "com.microsoft"
    microsoft = True


class MicrosoftLinearAttention(LinearAttentionKernel):
    """com.microsoft LinearAttention, the OPTIMIZED family."""

    op_type = "LinearAttention"
    op_domain = "com.microsoft"
    microsoft = True
    since_version = 1


KERNELS = {
    "RegisterLinearAttentionKernel": (LinearAttention,),
}

#: The com.microsoft kernel as a family of its own (MICROSOFT_FAMILIES pairs
#: it with the NAIVE module): this module's KERNELS hold the ai.onnx one.
microsoft_family = SimpleNamespace(KERNELS={
    "RegisterMicrosoftKernels": (MicrosoftLinearAttention,),
})
