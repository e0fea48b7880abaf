"""ai.onnx LinearAttention-27 -> com.microsoft LinearAttention-1 (float).

Before::

    query, key, value, past_state?, decay?, beta? ──> LinearAttention (ai.onnx)
        ──> output, present_state?

After: the same node in com.microsoft (every input slot, empty ones
included, every output, the attributes update_rule, q_num_heads,
kv_num_heads, scale, chunk_size) and the com.microsoft opset imported.

com.microsoft's contract extends ai.onnx's (fewer key heads, inverse
grouping, decay/beta ignored by rules without them, state windows), so a
valid ai.onnx node computes the same there.  The subset kept is the one
where both agree and ai.onnx would not raise: query, key, value (and
past_state, decay, beta where present) are float32; the attributes are
the ai.onnx ones with q_num_heads a positive multiple of kv_num_heads;
decay is given exactly for the gated rules and beta exactly for the delta
rules.  The node runs under the LinearAttention-27 schema.
"""

from __future__ import annotations

import functools

from onnxscript.rewriter import pattern as rewriter

from . import _facts as facts
from ._engine import MS_DOMAIN, FusionPattern

ATTRIBUTES = {"update_rule", "q_num_heads", "kv_num_heads", "scale", "chunk_size"}
RULES = ("linear", "gated", "delta", "gated_delta")
DECAY, BETA = 4, 5


def _one_output(op, query):
    return op.LinearAttention(query, _allow_other_inputs=True, _outputs=["output"])


def _two_outputs(op, query):
    return op.LinearAttention(query, _allow_other_inputs=True,
                              _outputs=["output", "present_state"])


def _condition(context, query, output, present_state=None, *, outputs, **_):
    node = output.producer()
    # onnxscript 0.7.2 lets a pattern of n outputs match a node of fewer
    if len(node.outputs) < outputs:
        return False
    if present_state is not None and not present_state.name:
        return False  # an omitted output: the one-output rule names it
    if facts.since_version(context, node) != 27:
        return False
    attrs = facts.attributes(node)
    if not set(attrs) <= ATTRIBUTES:
        return False
    rule = attrs.get("update_rule", "gated_delta")
    heads, kv_heads = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
    if rule not in RULES or not heads or not kv_heads or heads <= 0 or kv_heads <= 0:
        return False
    if heads % kv_heads:
        return False
    inputs = list(node.inputs) + [None] * (6 - len(node.inputs))
    if (inputs[DECAY] is not None) != rule.startswith("gated"):
        return False
    if (inputs[BETA] is not None) != rule.endswith("delta"):
        return False
    return all(facts.elem_type(v) == facts.FLOAT for v in inputs if v is not None)


def _rewrite(op, query, output, present_state=None, **_):
    node = output.producer()
    # both outputs are required by the schema, present_state unread or not
    fused = op.LinearAttention(*node.inputs, _domain=MS_DOMAIN, _outputs=2, _name=node.name,
                               **node.attributes)
    return fused if present_state is not None else fused[0]


LINEAR_ATTENTION = FusionPattern(
    "linear_attention", (MS_DOMAIN, "LinearAttention"),
    (rewriter.RewriteRule(_two_outputs, _rewrite, functools.partial(_condition, outputs=2)),
     rewriter.RewriteRule(_one_output, _rewrite, functools.partial(_condition, outputs=1))),
    doc=__doc__)
