"""ai.onnx SwiGLU (opset 28): Y = A * Sigmoid(alpha * A) * B, A and B of one
shape and type (no broadcasting).  float16 and bfloat16 are computed in
float32 and rounded once at the store; double runs a scalar libm loop."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from .. import simd
from .._kernels.engines import activation as core
from ._base import KernelOp

T = TensorProto


class SwiGLU(KernelOp):
    onnx_types = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)
    since_version = 28
    # Elements a thread must have before a second one helps.  Measured
    # through the evaluator on 2 cores (AVX-512, float32): 16K elements are
    # a wash (7.1 vs 7.2 µs), 32K win (12.1 -> 9.9 µs; 64K: 21.8 -> 14.1 µs).
    min_work_per_thread = 1 << 14

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        alpha = 1.0
        for att in onnx_node.attribute:
            if att.name == "alpha":
                alpha = onnx.helper.get_attribute_value(att)
        self.alpha = float(np.float32(alpha))

    def _run(self, *args):
        element_type = self._same_typed_inputs(args, "A and B")
        a, b = args
        if b.shape != a.shape:
            raise ValueError(self._input_error(
                1, f"has shape {b.shape}, expected {a.shape} like input 0 (no broadcasting)"))
        level = simd.state.level
        if self._usage.enabled:
            key = (element_type, level)
            path = self._paths.get(key)
            if path is None:
                used = simd.LEVEL_NAMES[core.level_used(element_type, level)]
                path = self._paths[key] = f"swiglu_{a.dtype.name}_{used}"
            self._usage.record(self.kernel_name, path)
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if not b.flags.c_contiguous:
            b = np.ascontiguousarray(b)
        y = self._new_output(a.shape, a.dtype)
        threads = self._num_threads(a.size, self.min_work_per_thread)
        core.swiglu(a, b, y, self.alpha, element_type, level, threads)
        return (y,)


KERNELS = {
    "RegisterSwiGLUKernel": (SwiGLU,),
}
