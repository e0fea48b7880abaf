"""com.microsoft BiasGelu (the OPTIMIZED family; the NAIVE one is in
:mod:`onnx_light_cpu.naive.bias_gelu`).

    Y = Gelu(A + bias) = x * 0.5 * (1 + erf(x / sqrt(2))),  x = A + bias

with the exact erf Gelu; bias is rank 1 with the length of A's last axis.
float16 and bfloat16 are computed in float32 and rounded once at the store;
double uses libm's erfc.  The Gelu is the unary Gelu's, the same function
(engines/activation's olc_gelu_erf_ps): BiasGelu(a, 0) has Gelu(a)'s bits,
x < 0 keeps its relative precision down to about -5.5 and gives -0 below,
and -inf gives NaN (-inf * 0), as ONNX Runtime 1.32's BiasGelu does.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels.engines import activation as core
from ._base import ELEMENT_TYPES, Input, KernelOp

T = TensorProto


class BiasGeluBase(KernelOp):
    """Input validation shared by both families; subclasses implement
    ``_compute`` (or their own ``_plan`` and ``_execute``)."""

    op_domain = "com.microsoft"
    inputs = (Input("A", types=(T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)),
              Input("bias", like=0, ranks=(1,)))

    def _plan(self, a, bias):
        """Checks what the declarations cannot: A's rank, bias's length."""
        if a.ndim < 1:
            raise ValueError(self._input_error(0, "must have rank >= 1, got a scalar"))
        if bias.shape != (a.shape[-1],):
            raise ValueError(self._input_error(
                1, f"must have shape ({a.shape[-1]},) (the last dimension of input 0 "
                   f"{a.shape}), got {bias.shape}"))
        return None

    def _execute(self, plan, a, bias):
        return self._compute(a, bias, ELEMENT_TYPES[a.dtype])


class BiasGelu(BiasGeluBase):
    # Elements a thread must have before a second one helps.  Measured
    # through the evaluator on 2 cores (AVX-512, float32, rows of 256): 8K
    # elements are a wash (6.9 vs 7.2 µs), 16K win (11.1 -> 9.1 µs; 64K:
    # 37.8 -> 22.5 µs).
    min_work_per_thread = 1 << 13

    def _plan(self, a, bias):
        super()._plan(a, bias)
        element_type, level = ELEMENT_TYPES[a.dtype], simd.state.level
        name = a.dtype.name

        def label():
            return f"bias_gelu_{name}_{simd.LEVEL_NAMES[core.level_used(element_type, level)]}"

        return (element_type, level, self._num_threads(a.size, self.min_work_per_thread),
                ((element_type, level), label))

    def _execute(self, plan, a, bias):
        element_type, level, threads, path = plan
        self._record_path(*path)
        y = self._new_output(a.shape, a.dtype)
        if y.size == 0:
            return (y,)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if not bias.flags.c_contiguous:
            bias = np.ascontiguousarray(bias)
        core.bias_gelu(a, bias, y, element_type, level, threads)
        return (y,)


KERNELS = {
    "RegisterMicrosoftKernels": (BiasGelu,),
}
