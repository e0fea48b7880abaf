"""com.microsoft Gelu, FastGelu and QuickGelu: the activations of ONNX
Runtime's transformers optimizer (BERT, GPT-2, CLIP), computed as ONNX
Runtime 1.32's CPU kernels define them (tests/ops/test_microsoft_activation.py).

- **Gelu** (the com.microsoft twin of ai.onnx Gelu, kernel
  ``MicrosoftGelu``): ``y = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2``, the
  unary core's erf Gelu.  Any rank, scalars included.
- **FastGelu**: the tanh form ``y = x (1 + tanh(sqrt(2/pi) (x + 0.044715
  x^3))) / 2`` of ``x = X + bias``; the optional bias is 1-D with the length
  of X's last axis and is added in float32.  X must have rank >= 1 even
  without a bias (ONNX Runtime rejects a scalar).  Without a bias the unary
  core's tanh Gelu runs, with one this family's core.
- **QuickGelu**: ``y = x sigmoid(alpha x)``, ``alpha`` default 1.702, any
  value (0 gives x / 2, a negative one mirrors the curve).

Types: float32 and float16 as ONNX Runtime's CPU runs them; double for
FastGelu and QuickGelu as ONNX Runtime has it, and for Gelu (ONNX Runtime
has no double Gelu; ours uses libm's erf); bfloat16 is this package's
extension (the schema allows it, ONNX Runtime's CPU has no kernel).  Half
types are computed in float32 and rounded once.  -inf gives NaN in all
three (-inf * 0), as in ONNX Runtime.  ONNX Runtime's double FastGelu is
within about 2e-7 of the formula (float32 precision somewhere inside); ours
follows the formula on libm's tanh, and its double QuickGelu computes the
sigmoid as e/(1 + e) below zero (ONNX Runtime's differs by ~1e-15 there).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import microsoft_activation as core
from .._kernels import unary
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
MS = "com.microsoft"
FLOATS = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)

# Elements one thread must have before a second one helps: the unary
# cores' threshold for their transcendental functions (32K elements in all).
MIN_WORK_PER_THREAD = 1 << 14


class _Activation(KernelOp):
    """Element-wise, same shape and type; subclasses set ``_compute``."""

    op_domain = MS

    def _plan(self, x, *rest):
        element_type, level = ELEMENT_TYPES[x.dtype], simd.state.level
        name, prefix = x.dtype.name, self._path_prefix(x, *rest)

        def label():
            return f"{prefix}_{name}_{simd.LEVEL_NAMES[self._level_used(element_type, level)]}"

        threads = self._num_threads(x.size, MIN_WORK_PER_THREAD)
        return element_type, level, threads, ((prefix, element_type, level), label)

    def _execute(self, plan, x, *rest):
        element_type, level, threads, path = plan
        self._record_path(*path)
        y = self._new_output(x.shape, x.dtype)
        if y.size:
            if not x.flags.c_contiguous:
                x = np.ascontiguousarray(x)
            self._compute(x, y, element_type, level, threads, *rest)
        return (y,)

    def _path_prefix(self, x, *rest) -> str:
        return type(self).op_type.lower()

    def _level_used(self, element_type: int, level: int) -> int:
        return core.level_used(element_type, level)


class MicrosoftGelu(_Activation):
    """com.microsoft Gelu: the erf form, on the unary core."""

    op_type = "Gelu"
    inputs = (Input("X", types=FLOATS),)

    def _compute(self, x, y, element_type, level, threads):
        unary.apply(x, y, unary.GELU, element_type, level, threads)

    def _level_used(self, element_type, level):
        return unary.level_used(unary.GELU, element_type, level)


class FastGelu(_Activation):
    """com.microsoft FastGelu: the tanh form of X (+ bias)."""

    inputs = (Input("X", types=FLOATS), Input("bias", like=0, ranks=(1,), optional=True))

    def _plan(self, x, bias=None):
        if x.ndim < 1:
            raise ValueError(self._input_error(0, "must have rank >= 1, got a scalar"))
        if bias is not None and bias.shape != (x.shape[-1],):
            raise ValueError(self._input_error(
                1, f"must have shape ({x.shape[-1]},) (the last dimension of input 0 "
                   f"{x.shape}), got {bias.shape}"))
        return super()._plan(x, bias)

    def _path_prefix(self, x, bias=None):
        return "fast_gelu" if bias is None else "fast_gelu_bias"

    def _compute(self, x, y, element_type, level, threads, bias=None):
        if bias is None:
            unary.apply(x, y, unary.GELU_TANH, element_type, level, threads)
            return
        if not bias.flags.c_contiguous:
            bias = np.ascontiguousarray(bias)
        core.fast_gelu(x, bias, y, element_type, level, threads)

    def _level_used(self, element_type, level):
        return unary.level_used(unary.GELU_TANH, element_type, level)


class QuickGelu(_Activation):
    """com.microsoft QuickGelu: x sigmoid(alpha x)."""

    inputs = (Input("X", types=FLOATS),)
    attributes = (Attr("alpha", "float", 1.702),)

    def _compute(self, x, y, element_type, level, threads):
        core.quick_gelu(x, y, self.alpha, element_type, level, threads)

    def _path_prefix(self, x):
        return "quick_gelu"


KERNELS = {
    "RegisterMicrosoftKernels": (MicrosoftGelu, FastGelu, QuickGelu),
}
