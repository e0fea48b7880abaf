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
import onnx
from ml_dtypes import bfloat16
from onnx import TensorProto

from .. import simd
from .._kernels import skip_norm as core
from ._base import ELEMENT_TYPES, KernelOp, type_string

T = TensorProto
ONNX_TYPES = (T.FLOAT, T.FLOAT16, T.BFLOAT16)
_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float16), np.dtype(bfloat16)))
_INT_MAX = 2**31 - 1
_FLOAT32 = np.dtype(np.float32)


class SkipNormBase(KernelOp):
    """Attributes, input validation and outputs shared by both families;
    subclasses implement ``_compute``."""

    op_domain = "com.microsoft"
    simplified: ClassVar[bool]
    element_types = tuple(type_string(t) for t in ONNX_TYPES)

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context, initializers)
        eps = 1e-12
        for att in onnx_node.attribute:
            if att.name == "epsilon":
                eps = onnx.helper.get_attribute_value(att)
        # Raised at run time: a constructor error would break building the
        # evaluator or registering kernels on it.
        self._epsilon_error = None
        self.epsilon = float(np.float32(eps)) if isinstance(eps, (int, float)) else math.nan
        if not (math.isfinite(self.epsilon) and self.epsilon >= 0):
            self._epsilon_error = (f"{onnx_node.op_type}: attribute epsilon must be finite "
                                   f"and nonnegative, got {eps!r}")
        outputs = onnx_node.output
        self._n_outputs = len(outputs)
        # Which of y, mean, inv_std_var, input_skip_bias_sum are requested.
        self._wanted = tuple(i < len(outputs) and outputs[i] != "" for i in range(4))
        # Input positions: input, skip, gamma, [beta,] bias.
        self._bias_index = 3 if self.simplified else 4

    def _check(self, index: int, a, dtype) -> None:
        if not isinstance(a, np.ndarray):
            raise TypeError(self._input_error(index, f"must be a tensor, got {type(a).__name__}"))
        if a.dtype != dtype:
            raise TypeError(self._input_error(
                index, f"has element type {a.dtype}, expected {dtype} like input 0"))

    def _check_vector(self, index: int, a, dtype, H: int) -> None:
        self._check(index, a, dtype)
        if a.shape != (H,):
            raise ValueError(self._input_error(
                index, f"must have shape ({H},) (the last dimension of input 0), got {a.shape}"))

    def _validate(self, x, skip, gamma, beta, bias) -> None:
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(0, f"must be a tensor, got {type(x).__name__}"))
        dtype = x.dtype
        if dtype not in _DTYPES:
            raise TypeError(self._input_error(
                0, f"has element type {dtype}, expected one of {', '.join(self.element_types)}"))
        if x.ndim not in (2, 3):
            raise ValueError(self._input_error(
                0, f"must have rank 2 [S, H] or 3 [B, S, H], got shape {x.shape}"))
        H = x.shape[-1]
        if H == 0 or H > _INT_MAX:
            raise ValueError(self._input_error(
                0, f"must have a last dimension in [1, {_INT_MAX}], got shape {x.shape}"))
        self._check(1, skip, dtype)
        if skip.shape != x.shape and not (x.ndim == 3 and skip.shape in (x.shape[1:],
                                                                        (1,) + x.shape[1:])):
            allowed = f"{x.shape}" + (f", {x.shape[1:]} or {(1,) + x.shape[1:]}"
                                      if x.ndim == 3 else "")
            raise ValueError(self._input_error(
                1, f"has shape {skip.shape}, expected {allowed} (input 0 is {x.shape})"))
        self._check_vector(2, gamma, dtype, H)
        if beta is not None:
            self._check_vector(3, beta, dtype, H)
        if bias is not None:
            self._check_vector(self._bias_index, bias, dtype, H)

    def _inputs(self, args):
        """(x, skip, gamma, beta, bias) from the node's inputs; absent ones None."""
        op = self.onnx_node.op_type
        if len(args) < 3 or any(a is None for a in args[:3]):
            raise ValueError(f"{op}: inputs input, skip and gamma are required")
        if len(args) > self._bias_index + 1:
            raise ValueError(f"{op}: at most {self._bias_index + 1} inputs, got {len(args)}")
        if self._n_outputs > 4:
            raise ValueError(f"{op}: at most 4 outputs, got {self._n_outputs}")
        x, skip, gamma = args[:3]
        if self.simplified:
            beta, bias = None, (args[3] if len(args) > 3 else None)
        else:
            beta = args[3] if len(args) > 3 else None
            bias = args[4] if len(args) > 4 else None
        return x, skip, gamma, beta, bias

    def _run(self, *args):
        if self._epsilon_error:
            raise ValueError(self._epsilon_error)
        x, skip, gamma, beta, bias = self._inputs(args)
        self._validate(x, skip, gamma, beta, bias)
        return self._compute(x, skip, gamma, beta, bias)

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

    def _record(self, dtype: np.dtype, element_type: int, level: int) -> None:
        key = (element_type, level)
        path = self._paths.get(key)
        if path is None:
            used = simd.LEVEL_NAMES[core.level_used(element_type, level)]
            path = self._paths[key] = f"{self.path_prefix}_{dtype.name}_{used}"
        self._usage.record(self.kernel_name, path)

    def _compute(self, x, skip, gamma, beta, bias):
        dtype = x.dtype
        element_type = ELEMENT_TYPES[dtype]
        level = simd.state.level
        if self._usage.enabled:
            self._record(dtype, element_type, level)
        x = np.ascontiguousarray(x)
        skip = np.ascontiguousarray(skip)
        gamma = np.ascontiguousarray(gamma)
        if beta is not None:
            beta = np.ascontiguousarray(beta)
        if bias is not None:
            bias = np.ascontiguousarray(bias)
        shape = x.shape
        stats_shape = shape[:-1] + (1,)
        wanted = self._wanted
        y = self._new_output(shape, dtype, 0)
        mean = self._new_output(stats_shape, _FLOAT32, 1) if wanted[1] else None
        inv = self._new_output(stats_shape, _FLOAT32, 2) if wanted[2] else None
        residual = self._new_output(shape, dtype, 3) if wanted[3] else None
        threads = self._num_threads(x.size, self.min_work_per_thread)
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
