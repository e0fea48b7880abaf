"""Fold a constant rank-one bias Add into the MatMulNBits that feeds it.

Before::

    A, B, scales, ... ──> MatMulNBits ──> y ──> Add(y, bias[N]) ──> Y

After::

    A, B, scales, ..., bias ──> MatMulNBits(bias = input 5) ──> Y

The rewrite applies only where it cannot change a result or a visible name:
``y`` is not a graph output and nothing else reads it (neither another node
nor a subgraph through the outer scope); the Add is a plain ai.onnx Add (no
attributes: the opset < 7 ``broadcast``/``axis`` forms are left alone) whose
other operand is a constant (an initializer that no graph input overrides,
or a Constant node) of shape [N] and of the MatMulNBits' element type
(checked where the graph states or inference finds the type of A or
scales); the MatMulNBits has no bias yet.  The fused node takes the Add's
place in the node list (the bias and every MatMulNBits input exist by
then), the Add's output name and the MatMulNBits' name and attributes.
"""

from __future__ import annotations

import onnx
from onnxscript.rewriter import pattern as rewriter

from . import _facts as facts
from ._engine import MS_DOMAIN, FusionPattern, apply

BIAS_INPUT = 5


def _bias_second(op, a, bias):
    y = op.MatMulNBits(a, _domain=MS_DOMAIN, _allow_other_inputs=True, _outputs=["y"])
    return op.Add(y, bias, _allow_other_attributes=False)


def _bias_first(op, a, bias):
    y = op.MatMulNBits(a, _domain=MS_DOMAIN, _allow_other_inputs=True, _outputs=["y"])
    return op.Add(bias, y, _allow_other_attributes=False)


def _condition(context, a, bias, y, **_):
    matmul = y.producer()
    inputs = matmul.inputs
    if len(inputs) > BIAS_INPUT and inputs[BIAS_INPUT] is not None:
        return False  # already has a bias
    if bias is y:
        return False
    value = facts.constant(bias)
    n = facts.attributes(matmul).get("N")
    if value is None or n is None or value.shape != (n,):
        return False
    # The bias must have the operator's element type (that of A and scales);
    # a valid Add already implies it: where the types are known, check.
    known = {facts.elem_type(v) for v in inputs[:3:2] if v is not None} - {None}
    return not known or known == {facts.elem_type(bias)}


def _rewrite(op, a, bias, y, **_):
    matmul = y.producer()
    inputs = list(matmul.inputs[:BIAS_INPUT])
    inputs += [None] * (BIAS_INPUT - len(inputs))  # empty optional slots
    fused = op.MatMulNBits(*inputs, bias, _domain=MS_DOMAIN, _name=matmul.name,
                           **matmul.attributes)
    if matmul.doc_string:
        fused.producer().doc_string = matmul.doc_string
    return fused


MATMUL_NBITS_BIAS = FusionPattern(
    "matmul_nbits_bias", (MS_DOMAIN, "MatMulNBits"),
    (rewriter.RewriteRule(_bias_second, _rewrite, _condition),
     rewriter.RewriteRule(_bias_first, _rewrite, _condition)),
    doc=__doc__)


def fuse_matmul_nbits_bias(model: onnx.ModelProto) -> onnx.ModelProto:
    """A new model where each MatMulNBits + rank-one constant bias Add is one
    MatMulNBits with the bias as input 5; ``model`` is not modified.  The
    same as ``fuse(model, ["matmul_nbits_bias"]).model``."""
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"fuse_matmul_nbits_bias expects an onnx.ModelProto, "
                        f"got {type(model).__name__}")
    return apply(model, [MATMUL_NBITS_BIAS]).model
