"""NAIVE com.microsoft GroupQueryAttention: rotary embedding and attention in
readable NumPy (:func:`onnx_light_cpu.reference.attention_core.attend`).

Validation, positions, key ranges and the present cache are shared with the
optimized adapter (:class:`onnx_light_cpu.ops.group_query_attention.GroupQueryAttentionBase`),
so both families accept and reject the same inputs.
"""

from __future__ import annotations

from ..ops.group_query_attention import GroupQueryAttentionBase
from ..reference.attention_core import append_rows, attend
from ..reference.rotary_embedding import rotate


class GroupQueryAttention(GroupQueryAttentionBase):
    kernel_prefix = "Naive"

    def _rotate(self, x, cos, sin, positions):
        return rotate(x, cos, sin, positions, self.rotary_interleaved)

    def _append(self, new_k, new_v, start, count, present_k, present_v):
        append_rows(new_k, new_v, start, count, present_k, present_v)

    def _attend(self, q, k, v, out, scale, bias, key_begin, key_end, sink, past=None):
        self._record_path((out.dtype.name,),
                          lambda: f"naive_group_query_attention_{out.dtype.name}_numpy")
        attend(q, k, v, out, scale=scale, bias=bias, key_begin=key_begin, key_end=key_end,
               softcap=self.softcap, softcap_first=True, sink=sink, past=past)


KERNELS = {
    "RegisterMicrosoftKernels": (GroupQueryAttention,),
}
