"""x * Sigmoid(x) (SiLU, the SwiGLU gate of Llama/Qwen MLPs) -> com.microsoft
QuickGelu with alpha=1.

Before::

    X ──> Sigmoid ──> s ──> Mul(X, s) ──> Y

After::

    X ──> QuickGelu(alpha=1) ──> Y

QuickGelu computes x sigmoid(alpha x): with alpha 1 it is the same
function in one pass (ONNX Runtime's optimizer makes the same rewrite, so
the fused graph also rounds as ONNX Runtime does).  The Mul reads X itself
(either operand order) and ``s``, which nothing else reads and is no graph
output.  X is float, float16, double or bfloat16, the types of both ops.
The fused node takes the Mul's name.
"""

from __future__ import annotations

from onnxscript.rewriter import pattern as rewriter

from . import _facts as facts
from ._engine import MS_DOMAIN, FusionPattern

FLOATS = (facts.FLOAT, facts.FLOAT16, facts.DOUBLE, facts.BFLOAT16)


def _gate_last(op, x):
    return op.Mul(x, op.Sigmoid(x), _outputs=["y"])


def _gate_first(op, x):
    return op.Mul(op.Sigmoid(x), x, _outputs=["y"])


def _condition(context, x, y, **_):
    return facts.elem_type(x) in FLOATS and len(y.producer().outputs) == 1


def _rewrite(op, x, y, **_):
    return op.QuickGelu(x, alpha=1.0, _domain=MS_DOMAIN, _name=y.producer().name)


QUICK_GELU = FusionPattern(
    "quick_gelu", (MS_DOMAIN, "QuickGelu"),
    (rewriter.RewriteRule(_gate_last, _rewrite, _condition),
     rewriter.RewriteRule(_gate_first, _rewrite, _condition)),
    doc=__doc__)
