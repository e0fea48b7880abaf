"""Graph rewrites into the com.microsoft operators the package runs.

    from onnx_light_cpu.fusion import fuse
    result = fuse(model)                 # every pattern; or fuse(model, ["bias_gelu"])
    result.model                         # a new onnx.ModelProto (model is untouched)
    result.counts                        # {"bias_gelu": 2, "cdist": 0, ...}

:func:`fuse` returns a :class:`FusionResult` ``(model, counts)``: the new
model and, for every pattern asked, the number of rewrites it made.  Each
pattern is a :class:`FusionPattern` object with a ``name`` (see
:data:`PATTERNS`); ``patterns`` takes the objects or their names.

A rewrite never changes a result or a visible name: every value a match
removes is read inside the match only (no other node, no subgraph through
the outer scope) and is no graph or function output; the fused node takes
the output names of the match.  Rewrites reach If/Loop/Scan bodies and
model-local functions.  Everything else is left as it was; a model no
pattern matched comes back as an exact copy.

The matching is the onnxscript rewriter's (``onnxscript.rewriter.pattern``)
over onnx-ir; see ``_engine.py``.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

from ._engine import FusionPattern, FusionResult, apply
from .bias_gelu import BIAS_GELU
from .cdist import CDIST
from .fused_conv import FUSED_CONV
from .group_query_attention import GROUP_QUERY_ATTENTION
from .linear_attention import LINEAR_ATTENTION
from .matmul_nbits_bias import MATMUL_NBITS_BIAS, fuse_matmul_nbits_bias
from .quick_gelu import QUICK_GELU

#: Every pattern, in the order :func:`fuse` applies them.
PATTERNS: tuple[FusionPattern, ...] = (
    BIAS_GELU, CDIST, FUSED_CONV, GROUP_QUERY_ATTENTION, LINEAR_ATTENTION, MATMUL_NBITS_BIAS,
    QUICK_GELU)


def fuse(model: onnx.ModelProto,
         patterns: Iterable[FusionPattern | str] | None = None) -> FusionResult:
    """Applies ``patterns`` (:class:`FusionPattern` objects or their names;
    None: every pattern of :data:`PATTERNS`) to a copy of ``model``.
    Returns ``FusionResult(model, counts)``; ``model`` is not modified."""
    return apply(model, _select(patterns))


def _select(patterns) -> list[FusionPattern]:
    if patterns is None:
        return list(PATTERNS)
    if isinstance(patterns, (str, FusionPattern)):
        patterns = [patterns]
    by_name = {p.name: p for p in PATTERNS}
    selected = []
    for p in patterns:
        if isinstance(p, str):
            if p not in by_name:
                raise ValueError(f"unknown fusion pattern {p!r}, expected one of {sorted(by_name)}")
            p = by_name[p]
        elif not isinstance(p, FusionPattern):
            raise TypeError(f"a fusion pattern is a FusionPattern or its name, "
                            f"got {type(p).__name__}")
        if p not in selected:
            selected.append(p)
    return selected


__all__ = [
    "BIAS_GELU",
    "CDIST",
    "FUSED_CONV",
    "GROUP_QUERY_ATTENTION",
    "LINEAR_ATTENTION",
    "MATMUL_NBITS_BIAS",
    "PATTERNS",
    "QUICK_GELU",
    "FusionPattern",
    "FusionResult",
    "fuse",
    "fuse_matmul_nbits_bias",
]
