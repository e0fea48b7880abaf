"""Add of a bias + exact Gelu -> com.microsoft BiasGelu.

Before::

    X [..., N], bias [N] ──> Add ──> s ──> Gelu ──> Y

After::

    X, bias ──> BiasGelu ──> Y

Gelu is the ai.onnx Gelu-20 with approximate="none" (or unset) or the
com.microsoft Gelu, both the erf form BiasGelu computes.  The bias has
rank 1 and X's last dimension: both are known and provably equal (the same
number or the same symbolic name), so the Add broadcasts it over the last
axis exactly as BiasGelu does (a bias of length 1 against a longer axis,
or an X whose last axis is 1, would not be BiasGelu).  X and the bias are
floating (float, float16, double, bfloat16).  ``s`` is read by the Gelu
only and is no graph output.  The fused node takes the Gelu's name.
"""

from __future__ import annotations

from onnxscript.rewriter import pattern as rewriter

from . import _facts as facts
from ._engine import MS_DOMAIN, FusionPattern

FLOATS = (facts.FLOAT, facts.FLOAT16, facts.DOUBLE, facts.BFLOAT16)


def _onnx_gelu(op, a, b):
    return op.Gelu(op.Add(a, b, _allow_other_attributes=False), _outputs=["y"])


def _microsoft_gelu(op, a, b):
    return op.Gelu(op.Add(a, b, _allow_other_attributes=False), _domain=MS_DOMAIN,
                   _outputs=["y"])


def _operands(a, b):
    """(X, bias) among the Add's operands, or None."""
    for x, bias in ((a, b), (b, a)):
        x_dims, bias_dims = facts.dims(x), facts.dims(bias)
        if (x_dims and bias_dims is not None and len(bias_dims) == 1
                and facts.same_dim(x_dims[-1], bias_dims[0])):
            return x, bias
    return None


def _condition(context, a, b, y, **_):
    gelu = y.producer()
    if gelu.domain == "":
        if facts.since_version(context, gelu) != 20:
            return False
        if facts.attributes(gelu).get("approximate", "none") != "none":
            return False
    elif gelu.attributes:
        return False
    if facts.elem_type(a) not in FLOATS and facts.elem_type(b) not in FLOATS:
        return False
    return _operands(a, b) is not None


def _rewrite(op, a, b, y, **_):
    x, bias = _operands(a, b)
    return op.BiasGelu(x, bias, _domain=MS_DOMAIN, _name=y.producer().name)


BIAS_GELU = FusionPattern(
    "bias_gelu", (MS_DOMAIN, "BiasGelu"),
    (rewriter.RewriteRule(_onnx_gelu, _rewrite, _condition),
     rewriter.RewriteRule(_microsoft_gelu, _rewrite, _condition)),
    doc=__doc__)
