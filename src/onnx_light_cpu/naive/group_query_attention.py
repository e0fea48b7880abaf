"""NAIVE com.microsoft GroupQueryAttention: rotary embedding and attention in
readable NumPy (:func:`onnx_light_cpu.reference.attention_core.attend`).

Validation, positions, key ranges and the present cache are shared with the
optimized adapter (:class:`onnx_light_cpu.ops.group_query_attention.GroupQueryAttentionBase`),
so both families accept and reject the same inputs.
"""

from __future__ import annotations

from ..ops.group_query_attention import GroupQueryAttentionBase
from ..reference.attention_core import append_rows, attend, dequantize, quantize_rows
from ..reference.rotary_embedding import rotate


class GroupQueryAttention(GroupQueryAttentionBase):
    kernel_prefix = "Naive"

    def _rotate(self, x, cos, sin, positions):
        return rotate(x, cos, sin, positions, self.rotary_interleaved)

    def _append(self, new_k, new_v, start, count, present_k, present_v):
        append_rows(new_k, new_v, start, count, present_k, present_v)

    def _quantize(self, new, start, count, present, inv, bits):
        quantize_rows(new, start, count, present, inv, bits)

    def _attend(self, q, k, v, out, scale, bias, key_begin, key_end, sink, past=None,
                kv_quant=None):
        bits = kv_quant[0] if kv_quant else 0
        self._record_path((out.dtype.name, bits), lambda: (
            f"naive_group_query_attention_{out.dtype.name}{f'_int{bits}kv' if bits else ''}"
            "_numpy"))
        if kv_quant:
            # the past codes into present, then attention over the float32
            # values of every key
            if past is not None:
                for b, n in enumerate(past[2]):
                    k[b, :, :n] = past[0][b, :, :n]
                    v[b, :, :n] = past[1][b, :, :n]
                past = None
            k, v = dequantize(k, kv_quant[1], bits), dequantize(v, kv_quant[2], bits)
        attend(q, k, v, out, scale=scale, bias=bias, key_begin=key_begin, key_end=key_end,
               softcap=self.softcap, softcap_first=True, sink=sink, past=past)


KERNELS = {
    "RegisterMicrosoftKernels": (GroupQueryAttention,),
}
