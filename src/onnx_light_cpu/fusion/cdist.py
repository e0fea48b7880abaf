"""Pairwise squared differences summed -> com.microsoft CDist.

Before::

    A [M, K] ──> Unsqueeze(axes=[1]) ──> [M, 1, K] ─┐
    B [N, K] ──> Unsqueeze(axes=[0]) ──> [1, N, K] ─┴─> Sub ──> d ──> Mul(d, d)
        ──> ReduceSum(axes=[-1], keepdims=0) ──> Y [M, N]   (──> Sqrt ──> Y)

After::

    A, B ──> CDist(metric="sqeuclidean") ──> Y   (metric="euclidean" with the Sqrt)

Either operand order of the Sub (the square hides the sign); the row
operand is the one unsqueezed at axis 1 (or -2), the column one at 0 (or
-3).  Axes come from constant inputs (opset 13 on) or attributes (before).
A and B have rank 2, a floating type CDist takes (float, double), and the
same last dimension, provably (a K of 1 would broadcast in the Sub, not in
CDist).  ReduceSum reduces the last axis only, keepdims=0.  Every
intermediate is read inside the pattern only; the sqeuclidean rule leaves
a ReduceSum whose only reader is a Sqrt to the euclidean rule.  The fused
node takes the name of the ReduceSum (or the Sqrt).
"""

from __future__ import annotations

from onnxscript.rewriter import pattern as rewriter

from . import _facts as facts
from ._engine import MS_DOMAIN, FusionPattern

FLOATS = (facts.FLOAT, facts.DOUBLE)


def _distances(op, p, q):
    d = op.Sub(op.Unsqueeze(p, _allow_other_inputs=True, _outputs=["up"]),
               op.Unsqueeze(q, _allow_other_inputs=True, _outputs=["uq"]),
               _allow_other_attributes=False)
    return op.ReduceSum(op.Mul(d, d, _allow_other_attributes=False), _allow_other_inputs=True,
                        _outputs=["total"])


def _squared(op, p, q):
    return _distances(op, p, q)


def _euclidean(op, p, q):
    return op.Sqrt(_distances(op, p, q), _outputs=["y"])


def _axes(node) -> list[int] | None:
    """The constant axes of an Unsqueeze or ReduceSum: input 1 (opset 13
    on) or the attribute (before); None if unknown or absent."""
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return facts.constant_ints(node.inputs[1])
    axes = facts.attributes(node).get("axes")
    return None if axes is None else [int(a) for a in axes]


def _operands(p, q, up, uq):
    """(A, B): the operand unsqueezed at 1 gives the rows; None if the
    Unsqueezes are not one at 1 and one at 0 of a rank-3 result."""
    axes = (_axes(up.producer()), _axes(uq.producer()))
    if axes in (([1], [0]), ([-2], [0]), ([1], [-3]), ([-2], [-3])):
        return p, q
    if axes in (([0], [1]), ([0], [-2]), ([-3], [1]), ([-3], [-2])):
        return q, p
    return None


def _read_by_sqrt_only(total) -> bool:
    uses = total.uses()
    return (not total.is_graph_output() and len(uses) == 1
            and uses[0].node.op_type == "Sqrt" and uses[0].node.domain == "")


def _condition(context, p, q, up, uq, total, y=None, **_):
    operands = _operands(p, q, up, uq)
    if operands is None:
        return False
    reduce = total.producer()
    if _axes(reduce) not in ([2], [-1]) or facts.attributes(reduce).get("keepdims", 1) != 0:
        return False
    if y is None and _read_by_sqrt_only(total):
        return False  # the euclidean rule takes it at the Sqrt
    a, b = operands
    a_dims, b_dims = facts.dims(a), facts.dims(b)
    if a_dims is None or b_dims is None or len(a_dims) != 2 or len(b_dims) != 2:
        return False
    if facts.elem_type(a) not in FLOATS and facts.elem_type(b) not in FLOATS:
        return False
    return facts.same_dim(a_dims[1], b_dims[1])


def _rewrite_squared(op, p, q, up, uq, total, **_):
    a, b = _operands(p, q, up, uq)
    return op.CDist(a, b, metric="sqeuclidean", _domain=MS_DOMAIN,
                    _name=total.producer().name)


def _rewrite_euclidean(op, p, q, up, uq, total, y, **_):
    a, b = _operands(p, q, up, uq)
    return op.CDist(a, b, metric="euclidean", _domain=MS_DOMAIN, _name=y.producer().name)


CDIST = FusionPattern(
    "cdist", (MS_DOMAIN, "CDist"),
    (rewriter.RewriteRule(_euclidean, _rewrite_euclidean, _condition),
     rewriter.RewriteRule(_squared, _rewrite_squared, _condition)),
    doc=__doc__)
