"""com.microsoft BiasGelu (the OPTIMIZED family; the NAIVE one is in
:mod:`onnx_light_cpu.naive.bias_gelu`).

    Y = Gelu(A + bias) = x * 0.5 * (1 + erf(x / sqrt(2))),  x = A + bias

with the exact erf Gelu; bias is rank 1 with the length of A's last axis.
float16 and bfloat16 are computed in float32 and rounded once at the store;
double uses libm's erfc.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels.engines import activation as core
from ._base import KernelOp

T = TensorProto


class BiasGeluBase(KernelOp):
    """Input validation shared by both families; subclasses implement ``_compute``."""

    op_domain = "com.microsoft"
    onnx_types = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)

    def _run(self, *args):
        element_type = self._same_typed_inputs(args, "A and bias")
        a, bias = args
        if a.ndim < 1:
            raise ValueError(self._input_error(0, "must have rank >= 1, got a scalar"))
        if bias.shape != (a.shape[-1],):
            raise ValueError(self._input_error(
                1, f"must have shape ({a.shape[-1]},) (the last dimension of input 0 "
                   f"{a.shape}), got {bias.shape}"))
        return self._compute(a, bias, element_type)


class BiasGelu(BiasGeluBase):
    # Elements a thread must have before a second one helps.  Measured
    # through the evaluator on 2 cores (AVX-512, float32, rows of 256): 8K
    # elements are a wash (6.9 vs 7.2 µs), 16K win (11.1 -> 9.1 µs; 64K:
    # 37.8 -> 22.5 µs).
    min_work_per_thread = 1 << 13

    def _compute(self, a, bias, element_type):
        level = simd.state.level
        if self._usage.enabled:
            key = (element_type, level)
            path = self._paths.get(key)
            if path is None:
                used = simd.LEVEL_NAMES[core.level_used(element_type, level)]
                path = self._paths[key] = f"bias_gelu_{a.dtype.name}_{used}"
            self._usage.record(self.kernel_name, path)
        y = self._new_output(a.shape, a.dtype)
        if y.size == 0:
            return (y,)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if not bias.flags.c_contiguous:
            bias = np.ascontiguousarray(bias)
        threads = self._num_threads(a.size, self.min_work_per_thread)
        core.bias_gelu(a, bias, y, element_type, level, threads)
        return (y,)


KERNELS = {
    "RegisterMicrosoftKernels": (BiasGelu,),
}
