"""Gradient of com.microsoft CDist: C[i, j] = distance(A[i], B[j]).

    g = dC / C (0 where C == 0)   metric euclidean
    g = 2 dC                      metric sqeuclidean
    D = A[:, None, :] - B[None, :, :]
    dA = sum_j g[i, j] D[i, j],   dB = -sum_i g[i, j] D[i, j]

The euclidean rule recomputes C with a CDist node (this package's kernel or
ONNX Runtime's).  Where C == 0 the distance has no derivative; 0 is the
subgradient chosen.  Computed in the inputs' type (FLOAT or DOUBLE).
"""

from __future__ import annotations

from onnx import TensorProto

from .builder import MS_DOMAIN, GradContext

DOMAIN, OP_TYPE = MS_DOMAIN, "CDist"
T = TensorProto
METRICS = ("euclidean", "sqeuclidean")


def gradient(ctx: GradContext) -> dict[int, str]:
    ctx.only_attributes(("metric",))
    metric = ctx.attr("metric", "sqeuclidean")
    if metric not in METRICS:
        ctx.unsupported(f"metric {metric!r} (supported: {', '.join(METRICS)})")
    a, b = ctx.input(0), ctx.input(1)
    dc = ctx.grad(0)
    if dc is None:
        ctx.unsupported("the model does not output C, the one output to differentiate")
    elem = ctx.elem_type(a)

    if metric == "sqeuclidean":
        pair = ctx.add("Mul", [dc, ctx.const(2.0, elem, "two")], hint="pair")
    else:
        c = ctx.add("CDist", [a, b], domain=MS_DOMAIN, metric="euclidean", hint="c")
        at_zero = ctx.add("Equal", [c, ctx.const(0.0, elem, "zero")], hint="at_zero")
        # divide by 1 where C == 0 so that no inf or NaN is ever computed
        safe_c = ctx.add("Where", [at_zero, ctx.const(1.0, elem, "one"), c])
        pair = ctx.add("Where", [at_zero, ctx.const(0.0, elem, "zero"),
                                 ctx.add("Div", [dc, safe_c])], hint="pair")

    difference = ctx.add("Sub", [ctx.add("Unsqueeze", [a, ctx.ints([1])]),
                                 ctx.add("Unsqueeze", [b, ctx.ints([0])])], hint="difference")
    weighted = ctx.add("Mul", [ctx.add("Unsqueeze", [pair, ctx.ints([2])]), difference])
    d_a = ctx.reduce_sum(weighted, [1])
    d_b = ctx.add("Neg", [ctx.reduce_sum(weighted, [0])])
    return {0: d_a, 1: d_b}
