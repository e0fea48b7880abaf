"""com.microsoft DynamicQuantizeMatMul and MatMulIntegerToFloat: the
quantized MatMuls of ``onnxruntime.quantization``, on the 8-bit engine of
``_kernels/engines/gemm_int8`` (the one MatMulInteger and QLinearMatMul
use), computed as ONNX Runtime 1.32's CPU kernels compute them (measured
with single-node sessions; tests/ops/test_quantization.py).

- **DynamicQuantizeMatMul** (A float32; B, b_zero_point uint8 or int8;
  b_scale and bias float32): A is quantized to uint8 as ONNX Runtime does
  it (``_kernels/quantization``): min and max of A widened to include 0,
  ``scale = (max - min) / 255`` in float32 (1 when max == min),
  ``zero_point = round_half_even(clamp(-min / scale, 0, 255))``, then
  ``q = saturate(round_half_even(A / scale) + zero_point)`` (a division,
  not a multiplication by the reciprocal).  NaN elements of A are skipped
  by the min and max and quantize to 0 (ONNX Runtime's result for NaN
  depends on where its vector lanes meet them: not matched).
- **MatMulIntegerToFloat** (A uint8 or int8; B uint8 or int8; scales
  float32 or float16, output like the scales): a_zero_point one element.
  ONNX Runtime has no kernel for int8 A with uint8 B; this package runs it
  (the engine takes every pair).

Both: Y = float(acc) * multiplier + bias, with acc the exact int32
(A - a_zp)(B - b_zp) (numpy.matmul shapes, B's batch dimensions
broadcast), float(acc) rounded to float32, multiplier = a_scale * b_scale
in float32 per column, each product rounded before the bias is added
(MLAS's output processor; bit for bit).  bias has B's last dimension N
elements (any shape).  A b_scale or b_zero_point is "per column" in ONNX
Runtime's forms only: one element, [N] when B is a matrix, or B's shape
with 1 in the second-to-last dimension.  Any other b_scale (and a
non-scalar a_scale, after ONNX Runtime's swap of the two scales when a
1-D or [..., n] with n != 1 a_scale looks like B's) is not fused: the
product is scaled by 1 (or a_scale) and the output multiplied by it
afterwards, broadcast NumPy style (bias included), as ONNX Runtime does;
it must broadcast to the output's shape.  float16 scales and bias are
widened to float32 and the float32 result rounded to float16 (ONNX
Runtime's Casts, bit for bit).

ONNX Runtime leaves the output of a product with K = 0 uninitialised;
here it is bias (or 0) times the scales.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import quantization as qcore
from ._base import Input
from .matmul_integer import INT8_TYPES, INT32, _IntegerProduct

T = TensorProto
MS = "com.microsoft"
FLOAT32 = np.dtype(np.float32)
UINT8 = np.dtype(np.uint8)
# Elements of A one thread quantizes before a second one helps (two tasks
# of the core's 16384; 128 x 768: 56 -> 30 us at two threads).
QUANTIZE_PER_THREAD = 1 << 15


def _one_element(shape: tuple) -> bool:
    """ONNX Runtime's IsScalarOr1ElementVector."""
    return len(shape) == 0 or (len(shape) == 1 and shape[0] == 1)


def _per_column(shape: tuple, b_shape: tuple) -> bool:
    """ONNX Runtime's IsBQuantParamSupported: one element, [N] for a matrix
    B, or B's shape with 1 in the second-to-last dimension."""
    if _one_element(shape):
        return True
    if len(shape) == 1 and len(b_shape) == 2 and shape[0] == b_shape[1]:
        return True
    if len(shape) != len(b_shape) or len(shape) <= 1 or shape[-2] != 1:
        return False
    return all(s == b for i, (s, b) in enumerate(zip(shape, b_shape)) if i != len(shape) - 2)


class _FloatPlan(NamedTuple):
    product: object          # matmul_integer._Product
    per_batch_scale: bool    # the fused b_scale has one row per B matrix
    fused_b_scale: bool      # b_scale goes into the multiplier
    scalar_a_scale: bool     # a_scale goes into the multiplier
    out_dtype: np.dtype
    empty: bool


class _IntegerToFloat(_IntegerProduct):
    """Shared by both operators: the plan of the scales, the product and the
    float epilogue."""

    op_domain = MS
    since_version = 1
    A_SCALE_INDEX: int | None = None
    B_SCALE_INDEX: int
    BIAS_INDEX: int

    def _float_plan(self, a, b, za, zb, a_scale, b_scale, bias) -> _FloatPlan:
        if zb is not None and not _per_column(zb.shape, b.shape):
            raise ValueError(self._input_error(
                self.ZB_INDEX, f"has shape {zb.shape}: a zero point of B must have one "
                f"element, shape [N] for a matrix B, or B's shape {b.shape} with 1 in the "
                "second-to-last dimension"))
        if za is not None and not _one_element(za.shape):
            raise ValueError(self._input_error(
                self.ZA_INDEX, f"has shape {za.shape}: the zero point of A must be a scalar "
                "or a one-element vector"))
        product = self._product_plan(a, b, za, zb)
        out_shape = product.out_shape
        if bias is not None and bias.size != product.N:
            raise ValueError(self._input_error(
                self.BIAS_INDEX, f"has shape {bias.shape}: it must have B's last dimension "
                f"N = {product.N} elements"))
        scales = [(self.B_SCALE_INDEX, b_scale)]
        if a_scale is not None:
            scales.append((self.A_SCALE_INDEX, a_scale))
        for index, s in scales:
            if s.size == 0 or (not _one_element(s.shape) and not (
                    index == self.B_SCALE_INDEX and _per_column(s.shape, b.shape))
                    and not self._broadcasts(s.shape, out_shape)):
                raise ValueError(self._input_error(
                    index, f"has shape {s.shape}: a scale must have one element, be per "
                    f"column of B (shape {b.shape}) or broadcast to the output's shape "
                    f"{out_shape}"))
        fused_b = _per_column(b_scale.shape, b.shape)
        return _FloatPlan(
            product, fused_b and b_scale.ndim == b.ndim and b.ndim > 2 and b_scale.size > 1,
            fused_b, a_scale is None or _one_element(a_scale.shape),
            FLOAT32 if b_scale.dtype == FLOAT32 else b_scale.dtype,
            math.prod(out_shape) == 0)

    @staticmethod
    def _broadcasts(shape: tuple, out_shape: tuple) -> bool:
        try:
            return np.broadcast_shapes(shape, out_shape) == out_shape
        except ValueError:
            return False

    def _float_output(self, plan: _FloatPlan, a_q, za, b, zb, a_scale, b_scale, bias,
                      a_scale_value):
        """The output: the int32 product into a scratch buffer, then the
        float epilogue and the unfused scales."""
        product = plan.product
        M, N, K = product.M, product.N, product.K
        if plan.empty:
            self._record(a_q, b, 0, False, empty=True)
            return (np.zeros(product.out_shape, dtype=plan.out_dtype),)
        batches = len(product.a_off)
        acc = self._new_output((batches, M, N), INT32, slot=1)
        if K == 0:
            acc.fill(0)
            used, constant, threads = 0, False, 1
        else:
            used, threads = product.used, product.threads
            constant = self._product(product, a_q, za, b, zb, acc)
        # The multiplier, in float32 as ONNX Runtime forms it.
        a_s = np.float32(a_scale_value) if plan.scalar_a_scale else np.float32(1.0)
        if plan.fused_b_scale:
            mult = a_s * b_scale.astype(np.float32, copy=False)
            if plan.per_batch_scale:  # one row per B matrix, read per output batch
                mult = mult.reshape(-1, N)[product.b_index]
                m_bs, m_cs = N, 1
            else:
                mult = mult.reshape(-1)
                m_bs, m_cs = 0, (1 if mult.size > 1 else 0)
        else:
            mult, m_bs, m_cs = np.full(1, a_s, dtype=np.float32), 0, 0
        mult = np.ascontiguousarray(mult, dtype=np.float32)
        if bias is not None:
            bias = np.ascontiguousarray(bias.reshape(-1), dtype=np.float32)
        y = self._new_output(product.out_shape, FLOAT32, slot=2 if plan.out_dtype != FLOAT32
                             else 0)
        qcore.scale_rows(acc, batches * M, N, M, mult, m_bs, m_cs, bias, y,
                         simd.state.level, threads)
        if not plan.scalar_a_scale:
            np.multiply(y, a_scale.astype(np.float32, copy=False), out=y)
        if not plan.fused_b_scale:
            np.multiply(y, b_scale.astype(np.float32, copy=False), out=y)
        if plan.out_dtype != FLOAT32:
            out = self._new_output(product.out_shape, plan.out_dtype)
            np.copyto(out, y, casting="unsafe")
            y = out
        self._record(a_q, b, used, constant, empty=K == 0)
        return (y,)


class DynamicQuantizeMatMul(_IntegerToFloat):
    """Y = MatMulIntegerToFloat(DynamicQuantizeLinear(A), B, ...), A float32."""

    element_types = ("tensor(float)", "tensor(uint8)", "tensor(int8)")
    inputs = (Input("A", types=(T.FLOAT,)), Input("B", types=INT8_TYPES),
              Input("b_scale", types=(T.FLOAT,)),
              Input("b_zero_point", like=1, optional=True),
              Input("bias", types=(T.FLOAT,), optional=True))
    B_INDEX, ZA_INDEX, ZB_INDEX = 1, 0, 3
    B_SCALE_INDEX, BIAS_INDEX = 2, 4
    _ZA = np.zeros((), dtype=np.uint8)  # the zero point's form (a scalar)

    def _plan(self, a, b, b_scale, b_zero_point=None, bias=None):
        return self._float_plan(a, b, self._ZA, b_zero_point, None, b_scale, bias)

    def _execute(self, plan, a, b, b_scale, b_zero_point=None, bias=None):
        # A quantized into a scratch buffer the node keeps (slot 3).
        a_q = self._new_output(a.shape, UINT8, slot=3)
        scale, zp = qcore.dynamic_quantize_u8(np.ascontiguousarray(a), a_q, simd.state.level,
                                              self._num_threads(a.size, QUANTIZE_PER_THREAD))
        return self._float_output(plan, a_q, np.full((), zp, dtype=np.uint8), b, b_zero_point,
                                  None, b_scale, bias, scale)


class MatMulIntegerToFloat(_IntegerToFloat):
    """Y = (A - a_zp)(B - b_zp) a_scale b_scale + bias, float output."""

    element_types = ("tensor(uint8)", "tensor(int8)", "tensor(float)", "tensor(float16)")
    inputs = (Input("A", types=INT8_TYPES), Input("B", types=INT8_TYPES),
              Input("a_scale", types=(T.FLOAT, T.FLOAT16)), Input("b_scale", like=2),
              Input("a_zero_point", like=0, optional=True),
              Input("b_zero_point", like=1, optional=True),
              Input("bias", like=2, optional=True))
    B_INDEX, ZA_INDEX, ZB_INDEX = 1, 4, 5
    A_SCALE_INDEX, B_SCALE_INDEX, BIAS_INDEX = 2, 3, 6

    @staticmethod
    def _scales(a_scale, b_scale):
        """ONNX Runtime's FixupScaleTensor: the two scales swapped when
        a_scale looks like B's (1-D, or its last dimension not 1) or b_scale
        like A's (rank > 1, second-to-last dimension not 1)."""
        if not _one_element(a_scale.shape):
            if a_scale.ndim == 1 or a_scale.shape[-1] != 1:
                return b_scale, a_scale
        elif not _one_element(b_scale.shape):
            if b_scale.ndim > 1 and b_scale.shape[-2] != 1:
                return b_scale, a_scale
        return a_scale, b_scale

    def _plan(self, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None, bias=None):
        a_scale, b_scale = self._scales(a_scale, b_scale)
        return self._float_plan(a, b, a_zero_point, b_zero_point, a_scale, b_scale, bias)

    def _execute(self, plan, a, b, a_scale, b_scale, a_zero_point=None, b_zero_point=None,
                 bias=None):
        a_scale, b_scale = self._scales(a_scale, b_scale)
        a_value = float(a_scale.reshape(-1)[0]) if plan.scalar_a_scale else 1.0
        return self._float_output(plan, a, a_zero_point, b, b_zero_point, a_scale, b_scale,
                                  bias, a_value)


KERNELS = {
    "RegisterQuantizationKernels": (DynamicQuantizeMatMul, MatMulIntegerToFloat),
}
