"""ai.onnx Attention (opset 23/24), grouped heads -> com.microsoft GroupQueryAttention.

Before::

    Q [B, S, Hq*H], K, V [B, S, Hkv*H], attn_mask?, past_key?, past_value?
        ──> Attention(q_num_heads=Hq, kv_num_heads=Hkv, is_causal=1)
        ──> Y, present_key?, present_value?

After::

    K ──> Shape ──> Gather(1) ─┐                     (S)
    past_key ──> Shape ──> Gather(2) ─┴─> Add ──> T (P + S; S without past)
    T ──> Sub(1) ──> Expand(Shape(Q)[0:1]) ──> Cast(int32) ──> seqlens_k [B]
    T ──> Cast(int32) ──> total_sequence_length
    Q, K, V, past_key, past_value, seqlens_k, total_sequence_length,
    attn_mask (made rank 4) ──> GroupQueryAttention ──> Y, present_key?, present_value?

GroupQueryAttention attends query s of every entry to keys [0, P + s]: the
causal frontier of Attention with its bottom-right offset P (the past
length), every entry of the batch as long as the others (seqlens_k[b] =
T - 1), and present = past then the new keys, as Attention's Concat.  The
subset rewritten is the one where the two agree:

- the node runs under the Attention-23 or -24 schema; Q, K, V have rank 3
  and one element type GroupQueryAttention takes (float, float16,
  bfloat16); q_num_heads differs from kv_num_heads and is a multiple of it;
  Q, K and V have static last dimensions of Hq*H, Hkv*H, Hkv*H (one head
  size H for keys and values);
- K has as many rows as Q, provably (the same number or symbolic name):
  GroupQueryAttention takes new keys for the new queries only;
- is_causal=1, or is_causal=0 with a static single query row (a decoding
  step, where attending every key is the causal frontier);
- past_key and past_value both or neither; no nonpad_kv_seqlen;
  qk_matmul_output unused;
- scale, where set, positive (Attention's scale 0 is not
  GroupQueryAttention's "default"); softcap >= 0; softmax_precision unset
  or float (GroupQueryAttention computes in float32);
- attn_mask, where given, is an additive float mask of Q's type (a boolean
  mask is not) of rank 2 to 4 whose shape GroupQueryAttention's
  attention_bias takes once unsqueezed to rank 4: (1 or B, 1 or Hq, S,
  P + S), each dimension provably equal.  A row such a mask covers whole
  with -inf gives zeros in both (ours and ONNX Runtime 1.32).

Anything else (windows of Attention-25, 4-D inputs, cross attention,
padding masks of another length) stays an Attention.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import onnx_ir as ir
from onnxscript.rewriter import pattern as rewriter

from . import _facts as facts
from ._engine import MS_DOMAIN, FusionPattern

FLOATS = (facts.FLOAT, facts.FLOAT16, facts.BFLOAT16)
ATTRIBUTES = {"is_causal", "q_num_heads", "kv_num_heads", "qk_matmul_output_mode", "scale",
              "softcap", "softmax_precision"}
Q, K, V, MASK, PAST_KEY, PAST_VALUE, NONPAD = range(7)


class Plan(NamedTuple):
    """What the rewrite needs of a node the subset covers."""

    inputs: list  # Attention's 7 input slots (None where empty)
    heads: int
    kv_heads: int
    scale: float | None
    softcap: float
    mask_rank: int  # 0 without a mask
    append_rows: bool  # a past, and neither a single query row nor batch 1 is certain


def _plan(node: ir.Node) -> Plan | None:
    """The plan of a node in the subset (the module doc), else None."""
    inputs = list(node.inputs) + [None] * (7 - len(node.inputs))
    attrs = facts.attributes(node)
    if not set(attrs) <= ATTRIBUTES or inputs[NONPAD] is not None:
        return None
    if (inputs[PAST_KEY] is None) != (inputs[PAST_VALUE] is None):
        return None
    heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if not heads or not kv_heads or heads <= 0 or kv_heads <= 0:
        return None
    if heads == kv_heads or heads % kv_heads:
        return None
    q, k, v = (facts.dims(inputs[i]) for i in (Q, K, V))
    if q is None or k is None or v is None or not len(q) == len(k) == len(v) == 3:
        return None
    dtype = facts.elem_type(inputs[Q])
    if dtype not in FLOATS or any(facts.elem_type(inputs[i]) != dtype for i in (K, V)):
        return None
    if not all(isinstance(x[2], int) for x in (q, k, v)) or q[2] % heads:
        return None
    head_size = q[2] // heads
    if k[2] != kv_heads * head_size or v[2] != kv_heads * head_size:
        return None
    if not facts.same_dim(q[1], k[1]):
        return None
    if attrs.get("is_causal", 0) != 1 and q[1] != 1:
        return None
    scale, softcap = attrs.get("scale"), attrs.get("softcap", 0.0)
    if (scale is not None and scale <= 0) or softcap < 0:
        return None
    if attrs.get("softmax_precision", ir.DataType.FLOAT) != ir.DataType.FLOAT:
        return None
    mask_rank = 0
    if inputs[MASK] is not None:
        mask_rank = _mask_rank(inputs, dtype, heads, q, k)
        if mask_rank is None:
            return None
    append_rows = inputs[PAST_KEY] is not None and q[1] != 1 and q[0] != 1
    return Plan(inputs, heads, kv_heads, scale, softcap, mask_rank, append_rows)


def _mask_rank(inputs, dtype, heads, q, k) -> int | None:
    """The rank of an attn_mask GroupQueryAttention's attention_bias can
    take once unsqueezed to (1 or B, 1 or Hq, S, total), else None."""
    mask = facts.dims(inputs[MASK])
    if facts.elem_type(inputs[MASK]) != dtype or mask is None or not 2 <= len(mask) <= 4:
        return None
    if inputs[PAST_KEY] is None:
        total = k[1]
    else:
        past = facts.dims(inputs[PAST_KEY])
        if past is None or len(past) != 4 or not isinstance(past[2], int) \
                or not isinstance(k[1], int):
            return None
        total = past[2] + k[1]
    if not (facts.same_dim(mask[-1], total) and facts.same_dim(mask[-2], q[1])):
        return None
    leading = (None, None)[:4 - len(mask)] + mask[:-2]  # (batch, heads), unknown if absent
    batch, mask_heads = leading
    if batch is not None and batch != 1 and not facts.same_dim(batch, q[0]):
        return None
    if mask_heads is not None and mask_heads not in (1, heads):
        return None
    return len(mask)


def _attention(outputs):
    names = ["y", "present_key", "present_value"][:outputs]

    def target(op, query):
        return op.Attention(query, _allow_other_inputs=True, _outputs=names)

    return target


def _condition(context, query, y, *, outputs, **_):
    node = y.producer()
    # onnxscript 0.7.2 lets a pattern of n outputs match a node of fewer
    if len(node.outputs) < outputs:
        return False
    return facts.since_version(context, node) in (23, 24) and _plan(node) is not None


def _rewrite(op, query, y, present_key=None, present_value=None, **_):
    node = y.producer()
    plan = _plan(node)
    q, k, v, mask, past_key, past_value, _ = plan.inputs
    seqlens_k, total, query_seqlens = _sequence_lengths(op, plan)
    if plan.mask_rank in (2, 3):
        axes = [0, 1] if plan.mask_rank == 2 else [0]
        mask = op.Unsqueeze(mask, op.Constant(value_ints=axes))
    attrs = {"num_heads": plan.heads, "kv_num_heads": plan.kv_heads}
    if plan.scale is not None:
        attrs["scale"] = plan.scale
    if plan.softcap > 0:
        attrs["softcap"] = plan.softcap
    inputs = [q, k, v, past_key, past_value, seqlens_k, total, None, None, None, mask]
    if query_seqlens is not None:
        inputs += [None] * 5 + [query_seqlens]
    # ONNX Runtime wants both presents or neither, and both with query_seqlens
    wanted = 1 + (present_key is not None) + (present_value is not None)
    outputs = 1 if wanted == 1 and query_seqlens is None else 3
    fused = op.GroupQueryAttention(*inputs, _domain=MS_DOMAIN, _outputs=outputs,
                                   _name=node.name, **attrs)
    return fused if outputs == 1 else fused[:wanted]


def _sequence_lengths(op, plan: Plan):
    """seqlens_k [B] (int32, T - 1 for every entry), the scalar
    total_sequence_length T (int32: past length + new keys), and, where
    several entries append several rows to a past, query_seqlens [B]
    (int32, S for every entry; without it GroupQueryAttention requires
    batch 1 there), else None."""
    q, k, _, _, past_key, _, _ = plan.inputs
    rows = op.Gather(op.Shape(k), op.Constant(value_int=1))
    total = rows
    if past_key is not None:
        total = op.Add(op.Gather(op.Shape(past_key), op.Constant(value_int=2)), rows)
    batch = op.Gather(op.Shape(q), op.Constant(value_ints=[0]))
    last = op.Sub(total, op.Constant(value_int=1))
    seqlens_k = op.Cast(op.Expand(last, batch), to=ir.DataType.INT32)
    query_seqlens = None
    if plan.append_rows:
        query_seqlens = op.Cast(op.Expand(rows, batch), to=ir.DataType.INT32)
    return seqlens_k, op.Cast(total, to=ir.DataType.INT32), query_seqlens


GROUP_QUERY_ATTENTION = FusionPattern(
    "group_query_attention", (MS_DOMAIN, "GroupQueryAttention"),
    tuple(rewriter.RewriteRule(_attention(n), _rewrite, functools.partial(_condition, outputs=n))
          for n in (3, 2, 1)),
    doc=__doc__)
