"""ai.onnx SwiGLU (opset 28): Y = A * Sigmoid(alpha * A) * B, A and B of one
shape and type (no broadcasting).  float16 and bfloat16 are computed in
float32 and rounded once at the store; double runs a scalar libm loop."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels.engines import activation as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto


class SwiGLU(KernelOp):
    since_version = 28
    inputs = (Input("A", types=(T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)), Input("B", like=0))
    attributes = (Attr("alpha", "float", 1.0),)
    # Elements a thread must have before a second one helps.  Measured
    # through the evaluator on 2 cores (AVX-512, float32): 16K elements are
    # a wash (7.1 vs 7.2 µs), 32K win (12.1 -> 9.9 µs; 64K: 21.8 -> 14.1 µs).
    min_work_per_thread = 1 << 14

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self.alpha = float(np.float32(self.alpha))

    def _plan(self, a, b):
        if b.shape != a.shape:
            raise ValueError(self._input_error(
                1, f"has shape {b.shape}, expected {a.shape} like input 0 (no broadcasting)"))
        element_type, level = ELEMENT_TYPES[a.dtype], simd.state.level
        name = a.dtype.name

        def label():
            return f"swiglu_{name}_{simd.LEVEL_NAMES[core.level_used(element_type, level)]}"

        return (element_type, level, self._num_threads(a.size, self.min_work_per_thread),
                ((element_type, level), label))

    def _execute(self, plan, a, b):
        element_type, level, threads, path = plan
        self._record_path(*path)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if not b.flags.c_contiguous:
            b = np.ascontiguousarray(b)
        y = self._new_output(a.shape, a.dtype)
        core.swiglu(a, b, y, self.alpha, element_type, level, threads)
        return (y,)


KERNELS = {
    "RegisterSwiGLUKernel": (SwiGLU,),
}
