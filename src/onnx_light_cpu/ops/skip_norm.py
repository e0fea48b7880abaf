"""com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization
(the OPTIMIZED family; the NAIVE one is in :mod:`onnx_light_cpu.naive.skip_norm`).

    v = input + skip (+ bias), in float32
    SkipLayerNormalization:           y = (v - mean(v)) / sqrt(var(v) + eps) * gamma (+ beta)
    SkipSimplifiedLayerNormalization: y = v / sqrt(mean(v * v) + eps) * gamma

over the last axis.  Outputs by position, each optional but the first:
y, mean (float32, zeros for the simplified one), inv_std_var (float32), and
input_skip_bias_sum (v in the input type).  input is [S, H] or [B, S, H];
skip matches it or, for rank 3, is [S, H] or [1, S, H]; gamma, beta and bias
have length H.  float16 and bfloat16 are computed in float32 and rounded
once, at the store.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import skip_norm as core
from .._kernels._runloop import dense
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
ONNX_TYPES = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
_INT_MAX = 2**31 - 1
_FLOAT32 = np.dtype(np.float32)

_VECTOR = {"like": 0, "ranks": (1,)}
_LN_INPUTS = (Input("input", types=ONNX_TYPES, ranks=(2, 3)), Input("skip", like=0),
              Input("gamma", **_VECTOR), Input("beta", optional=True, **_VECTOR),
              Input("bias", optional=True, **_VECTOR))
_RMS_INPUTS = _LN_INPUTS[:3] + _LN_INPUTS[4:]


def checked_epsilon(op: KernelOp) -> float:
    """The node's epsilon rounded to float32, as the row functions add it; a
    NaN, infinite or negative one is kept as the attribute error the runs
    raise (SkipLayerNormalization and EmbedLayerNormalization)."""
    eps = float(np.float32(op.epsilon))
    if not (math.isfinite(eps) and eps >= 0):
        op._reject_attribute(
            f"attribute epsilon must be finite and nonnegative, got {op.epsilon!r}")
    return eps


class SkipNormBase(KernelOp):
    """Attributes, input validation and outputs shared by both families:
    ``_plan`` checks the shapes, subclasses implement ``_compute`` (or their
    own ``_plan`` and ``_execute``)."""

    op_domain = "com.microsoft"
    simplified: ClassVar[bool]
    attributes = (Attr("epsilon", "float", 1e-12),)

    def __init_subclass__(cls, **kwargs):
        # The operator's inputs: SkipSimplifiedLayerNormalization has no beta.
        if "simplified" in cls.__dict__:
            cls.inputs = _RMS_INPUTS if cls.simplified else _LN_INPUTS
        super().__init_subclass__(**kwargs)

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        self.epsilon = checked_epsilon(self)
        outputs = onnx_node.output
        self._n_outputs = len(outputs)
        if self._n_outputs > 4:
            self._reject_attribute(f"at most 4 outputs, got {self._n_outputs}")
        # Which of y, mean, inv_std_var, input_skip_bias_sum are requested.
        self._wanted = tuple(i < len(outputs) and outputs[i] != "" for i in range(4))
        # Input positions: input, skip, gamma, [beta,] bias.
        self._bias_index = 3 if self.simplified else 4

    def _inputs(self, args):
        """(x, skip, gamma, beta, bias) from the node's inputs; absent ones None."""
        x, skip, gamma = args[:3]
        if self.simplified:
            beta, bias = None, (args[3] if len(args) > 3 else None)
        else:
            beta = args[3] if len(args) > 3 else None
            bias = args[4] if len(args) > 4 else None
        return x, skip, gamma, beta, bias

    def _plan(self, *args):
        """Checks the shapes the declarations cannot."""
        x, skip, gamma, beta, bias = self._inputs(args)
        H = x.shape[-1]
        if H == 0 or H > _INT_MAX:
            raise ValueError(self._input_error(
                0, f"must have a last dimension in [1, {_INT_MAX}], got shape {x.shape}"))
        if skip.shape != x.shape and not (x.ndim == 3 and skip.shape in (x.shape[1:],
                                                                        (1,) + x.shape[1:])):
            allowed = f"{x.shape}" + (f", {x.shape[1:]} or {(1,) + x.shape[1:]}"
                                      if x.ndim == 3 else "")
            raise ValueError(self._input_error(
                1, f"has shape {skip.shape}, expected {allowed} (input 0 is {x.shape})"))
        for index, a in ((2, gamma), (3, beta), (self._bias_index, bias)):
            if a is not None and a.shape != (H,):
                raise ValueError(self._input_error(
                    index, f"must have shape ({H},) (the last dimension of input 0), "
                           f"got {a.shape}"))
        return None

    def _execute(self, plan, *args):
        return self._compute(*self._inputs(args))

    def _outputs(self, y, mean, inv, residual) -> tuple:
        """The node's outputs in order; unrequested slots None."""
        return (y, mean, inv, residual)[: self._n_outputs]


class _SkipNorm(SkipNormBase):
    """The fused core: one pass over the rows, no scratch memory."""

    # Elements a thread must have before a second one helps.  Measured
    # through the evaluator on 2 idle cores (AVX-512), float32 and float16,
    # rows of 896 and 4096: at 16K elements two threads are a wash (7.0 vs
    # 7.1 µs), from 28K they win (9.1 -> 7.9 µs; 64K: 17.4 -> 11.5 µs).
    min_work_per_thread = 1 << 14

    def _plan(self, *args):
        super()._plan(*args)
        x = args[0]
        element_type = ELEMENT_TYPES[x.dtype]
        level = simd.state.level
        dtype_name = x.dtype.name

        def label():
            used = simd.LEVEL_NAMES[core.level_used(element_type, level)]
            return f"{self.path_prefix}_{dtype_name}_{used}"

        return (element_type, level, self._num_threads(x.size, self.min_work_per_thread),
                x.shape[:-1] + (1,), ((element_type, level), label))

    def _execute(self, plan, *args):
        element_type, level, threads, stats_shape, path = plan
        self._record_path(*path)
        x, skip, gamma, beta, bias = dense(self._inputs(args))
        shape, dtype = x.shape, x.dtype
        wanted = self._wanted
        y = self._new_output(shape, dtype, 0)
        mean = self._new_output(stats_shape, _FLOAT32, 1) if wanted[1] else None
        inv = self._new_output(stats_shape, _FLOAT32, 2) if wanted[2] else None
        residual = self._new_output(shape, dtype, 3) if wanted[3] else None
        core.apply(x, skip, gamma, beta, bias, y, residual, mean, inv, self.simplified,
                   self.epsilon, element_type, level, threads)
        return self._outputs(y, mean, inv, residual)


class SkipLayerNormalization(_SkipNorm):
    simplified = False
    path_prefix = "skip_layer_norm"


class SkipSimplifiedLayerNormalization(_SkipNorm):
    simplified = True
    path_prefix = "skip_simplified_layer_norm"


KERNELS = {
    "RegisterMicrosoftKernels": (SkipLayerNormalization, SkipSimplifiedLayerNormalization),
}
