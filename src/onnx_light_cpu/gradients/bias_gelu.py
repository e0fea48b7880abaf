"""Gradient of com.microsoft BiasGelu: C = Gelu(A + bias), the exact erf Gelu.

    z = A + bias
    dz = dC * (Phi(z) + z * phi(z)),  Phi(z) = 0.5 (1 + erf(z / sqrt(2))),
                                      phi(z) = exp(-z^2 / 2) / sqrt(2 pi)
    dA = dz,  dbias = dz summed over every axis but the last

FLOAT16 and BFLOAT16 are computed in FLOAT and cast back (ONNX Runtime has
no half-type Erf/Exp kernels on CPU); DOUBLE in DOUBLE except Erf, which
runs in FLOAT because ONNX Runtime has no DOUBLE Erf (Phi then carries
float32's relative error, about 1e-7).
"""

from __future__ import annotations

import math

from onnx import TensorProto

from .builder import MS_DOMAIN, GradContext

DOMAIN, OP_TYPE = MS_DOMAIN, "BiasGelu"
T = TensorProto


def gradient(ctx: GradContext) -> dict[int, str]:
    ctx.only_attributes(())
    a, bias = ctx.input(0), ctx.input(1)
    dc = ctx.grad(0)
    if dc is None:
        ctx.unsupported("the model does not output C, the one output to differentiate")
    elem = ctx.elem_type(a)
    work = T.DOUBLE if elem == T.DOUBLE else T.FLOAT

    def widen(name):
        return name if elem == work else ctx.cast(name, work)

    z = ctx.add("Add", [widen(a), widen(bias)], hint="z")
    zf = z if work == T.FLOAT else ctx.cast(z, T.FLOAT)
    erf = ctx.add("Erf", [ctx.add("Mul", [zf, ctx.const(1 / math.sqrt(2), "float32")])])
    if work != T.FLOAT:
        erf = ctx.cast(erf, work)
    half = ctx.const(0.5, work, "half")
    cdf = ctx.add("Mul", [half, ctx.add("Add", [erf, ctx.const(1.0, work, "one")])], hint="cdf")
    square = ctx.add("Mul", [z, z])
    density = ctx.add("Mul", [
        ctx.add("Exp", [ctx.add("Mul", [square, ctx.const(-0.5, work)])]),
        ctx.const(1 / math.sqrt(2 * math.pi), work)], hint="density")
    derivative = ctx.add("Add", [cdf, ctx.add("Mul", [z, density])], hint="derivative")
    dz = ctx.add("Mul", [widen(dc), derivative], hint="dz")
    d_bias = ctx.sum_rows(dz, ctx.add("Shape", [bias]))
    if elem != work:
        dz, d_bias = ctx.cast(dz, elem), ctx.cast(d_bias, elem)
    return {0: dz, 1: d_bias}
