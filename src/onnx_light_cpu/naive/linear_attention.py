"""NAIVE com.microsoft LinearAttention: delegates the recurrence to the
``onnx.reference`` ai.onnx LinearAttention kernel.

The com.microsoft extensions are mapped onto the ONNX contract first:
shared query heads (inverse GQA) and shared key heads are repeated so each
kv head has its own, decay and beta the rule does not use are dropped.  A
state window runs the tokens before the window in one call and the window's
tokens one by one, keeping each state (passed on in float32).  Validation is shared with the
optimized adapter (:class:`onnx_light_cpu.ops.linear_attention.LinearAttentionBase`).
"""

from __future__ import annotations

import numpy as np
from onnx import helper as oh
from onnx.reference.ops.op_linear_attention import LinearAttention as _Reference

from ..ops.linear_attention import MicrosoftLinearAttentionBase


def _repeat_heads(x: np.ndarray, heads: int, wanted: int) -> np.ndarray:
    """[B, T, heads * d] with each head repeated wanted / heads times."""
    if heads == wanted:
        return x
    B, T, hidden = x.shape
    d = hidden // heads
    return np.repeat(x.reshape(B, T, heads, d), wanted // heads, axis=2).reshape(B, T, wanted * d)


class MicrosoftLinearAttention(MicrosoftLinearAttentionBase):
    op_type = "LinearAttention"
    kernel_prefix = "Naive"
    since_version = 1

    def _reference(self, q, k, v, past, decay, beta, heads):
        """The built-in kernel of an ai.onnx LinearAttention node with these
        heads, run through its public ``OpRun.run``."""
        inputs = ["q", "k", "v", "past" if past is not None else "",
                  "decay" if decay is not None else "", "beta" if beta is not None else ""]
        node = oh.make_node("LinearAttention", inputs, ["y", "state"], q_num_heads=heads,
                           kv_num_heads=self.kv_num_heads, scale=self.scale,
                           update_rule=self.update_rule)
        params = {"opsets": {"": 24}, "new_ops": None, "log": lambda *_: None, "verbose": 0}
        return _Reference(node, params).run(q, k, v, past, decay, beta)

    def _compute(self, q, k, v, past, decay, beta, B, S, Hq, Hk, Hkv, dk, dv,
                 decay_rows, beta_heads, scale):
        self._record_path((self.update_rule, q.dtype.name),
                          lambda: f"naive_{self.update_rule}_{q.dtype.name}_reference")
        heads = max(Hq, Hkv)
        q = _repeat_heads(q, Hq, heads)
        k = _repeat_heads(k, Hk, Hkv)
        W = self.state_window
        if W == 0:
            return self._reference(q, k, v, past, decay, beta, heads)
        # The state goes from call to call in float32, as within one call.
        state_dtype = q.dtype if past is None else past.dtype
        state = (past[W - 1].astype(np.float32) if past is not None
                 else np.zeros((B, Hkv, dk, dv), dtype=np.float32))
        slots = [np.zeros((B, Hkv, dk, dv), dtype=np.float32) for _ in range(W)]
        outputs = []
        first = max(S - W, 0)  # tokens before the window run in one call

        def step(t0, t1, state):
            sl = slice(t0, t1)
            return self._reference(q[:, sl], k[:, sl], v[:, sl], state,
                                   None if decay is None else decay[:, sl],
                                   None if beta is None else beta[:, sl], heads)

        if first or S == 0:
            out, state = step(0, first, state)
            outputs.append(out)
            if S == 0:  # no token: the last slot keeps the past state
                slots[W - 1] = state
        for t in range(first, S):
            out, state = step(t, t + 1, state)
            outputs.append(out)
            slots[t - (S - W)] = state
        return np.concatenate(outputs, axis=1), np.stack(slots).astype(state_dtype)


KERNELS = {
    "RegisterMicrosoftKernels": (MicrosoftLinearAttention,),
}
