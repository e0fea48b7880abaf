"""The com.microsoft quantization operators that ``onnxruntime.quantization``
emits, computed as ONNX Runtime 1.32's CPU kernels compute them: every
integer output bit for bit (measured with single-node sessions;
tests/ops/test_quantization.py).  Where ONNX Runtime's behaviour departs
from the contrib schema or its own source, the measured behaviour is the
contract and the class docstring says so.

- DynamicQuantizeMatMul, MatMulIntegerToFloat, QGemm: the 8-bit engine of
  ``_kernels/engines/gemm_int8`` (the one MatMulInteger and QLinearMatMul
  use), the float epilogue fused per tile (``_kernels/quantization``).
- QuantizeLinear, DequantizeLinear (com.microsoft, ``Microsoft<op>``
  kernels): per tensor or per axis; 8-bit per tensor on the core's loop.
- QLinearAdd, QLinearMul: the core's loops with MLAS' roundings.
- QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearWhere: ONNX
  Runtime's 256-entry tables; QLinearSoftmax its exp table;
  QLinearAveragePool, QLinearGlobalAveragePool its float32 / int32 sums.
  These are NumPy (small or table-bound).

The quantized MatMuls in detail:

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
Runtime's Casts, bit for bit).  What comes from initializers alone is
prepared once per node: B packed, the zero points shifted, b_scale and the
bias made float32 (the Python around the engine of a 128 x 768 x 768
MatMulIntegerToFloat went from 9.5 to about 7 us).

ONNX Runtime leaves the output of a product with K = 0 uninitialised;
here it is bias (or 0) times the scales.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import ml_dtypes
import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import quantization as qcore
from .._kernels.engines import gemm_int8 as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp
from .matmul_integer import INT8_TYPES, INT32, _IntegerProduct

T = TensorProto
MS = "com.microsoft"
FLOAT32 = np.dtype(np.float32)
UINT8 = np.dtype(np.uint8)
INT8 = np.dtype(np.int8)
# NumPy dtype -> ONNX element type, the 4-bit types included
ELEMENT_TYPE_OF = {**ELEMENT_TYPES, np.dtype(ml_dtypes.int4): T.INT4,
                   np.dtype(ml_dtypes.uint4): T.UINT4}
# Elements of A one thread quantizes before a second one helps.  Alone,
# called back to back, 128 x 768 took 56 -> 30 us at two threads; inside a
# DynamicQuantizeMatMul run, where the worker sleeps between jobs and its
# wake-up costs the caller more than half the work, 26 us at one thread
# and 52 at two (the whole run 109-122 us against 169-172; 2-core Intel
# Xeon).  From 256 x 768 two threads are no slower.  Two from 2^17.
QUANTIZE_PER_THREAD = 1 << 16


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

    def _multiplier(self, plan: _FloatPlan, a_scale_value: float, b_scale):
        """The float epilogue's multiplier, a_scale * b_scale in float32 as
        ONNX Runtime forms it (b_scale only where it is fused), and its batch
        and column strides; a constant b_scale is made float32 once."""
        a_s = np.float32(a_scale_value if plan.scalar_a_scale else 1.0)
        if not plan.fused_b_scale:
            return np.full(1, a_s, dtype=np.float32), 0, 0
        b32 = self._prepared_input("b_scale", self.B_SCALE_INDEX, b_scale,
                                   lambda: np.ascontiguousarray(b_scale.reshape(-1),
                                                                dtype=np.float32))
        mult = b32 * a_s
        if plan.per_batch_scale:  # one row per B matrix, read per output batch
            N = plan.product.N
            return np.ascontiguousarray(mult.reshape(-1, N)[plan.product.b_index]), N, 1
        return mult, 0, (1 if mult.size > 1 else 0)

    def _float_output(self, plan: _FloatPlan, a_q, za, b, zb, a_scale, b_scale, bias,
                      a_scale_value):
        """The output: the int32 product and the float epilogue fused in the
        engine (each tile converted while in cache), then the unfused
        scales."""
        product = plan.product
        M, N, K = product.M, product.N, product.K
        if plan.empty:
            self._record(a_q, b, 0, False, empty=True)
            return (np.zeros(product.out_shape, dtype=plan.out_dtype),)
        batches = len(product.a_off)
        mult, m_bs, m_cs = self._multiplier(plan, a_scale_value, b_scale)
        if bias is not None:
            bias = self._prepared_input("bias", self.BIAS_INDEX, bias, lambda: np.ascontiguousarray(
                bias.reshape(-1), dtype=np.float32))
        y = self._new_output(product.out_shape, FLOAT32, slot=2 if plan.out_dtype != FLOAT32
                             else 0, aligned=True)  # large ones are streamed to memory
        if K == 0:  # no product: the epilogue on zeros
            acc = self._new_output((batches, M, N), INT32, slot=1)
            acc.fill(0)
            used, constant = 0, False
            qcore.scale_rows(acc, batches * M, N, M, mult, m_bs, m_cs, bias, y,
                             simd.state.level, 1)
        else:
            used = product.used
            args, constant = self._gemm_args(product, a_q, za, b, zb, y)
            qcore.gemm_float(*args, mult, m_bs, m_cs, bias)
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


# ----------------------------------------------- QuantizeLinear, DequantizeLinear

_QUANT_TYPES = (T.UINT8, T.INT8, T.UINT16, T.INT16, T.INT4, T.UINT4)
_DEQUANT_TYPES = _QUANT_TYPES + (T.INT32,)
_RANGES = {T.UINT8: (0, 255), T.INT8: (-128, 127), T.UINT16: (0, 65535),
           T.INT16: (-32768, 32767), T.INT4: (-8, 7), T.UINT4: (0, 15)}


def _linear_params(op, x, scale, zero_point, axis_value):
    """(scale, zero point) shaped to broadcast against x, as ONNX Runtime
    reads them: one element each (per tensor), or 1-D of x's dimension
    ``axis`` (per axis; the zero point absent or the same length)."""
    if _one_element(scale.shape):
        if zero_point is not None and not _one_element(zero_point.shape):
            raise ValueError(op._input_error(
                2, f"has shape {zero_point.shape}: with a per-tensor scale the zero point "
                "must be a scalar or a one-element vector"))
        return scale.reshape(()), None if zero_point is None else zero_point.reshape(())
    if not -x.ndim <= axis_value < x.ndim:
        raise ValueError(f"{op.onnx_node.op_type}: attribute axis {axis_value} is out of range "
                         f"for input 0 of rank {x.ndim} (per-axis scale of shape {scale.shape})")
    axis = axis_value % x.ndim
    length = x.shape[axis]
    if scale.shape != (length,):
        raise ValueError(op._input_error(
            1, f"has shape {scale.shape}: a per-axis scale must be 1-D of input 0's "
            f"dimension {axis} ({length})"))
    if zero_point is not None and zero_point.shape != (length,):
        raise ValueError(op._input_error(
            2, f"has shape {zero_point.shape}: with a per-axis scale the zero point must be "
            f"1-D of length {length}"))
    shape = [1] * x.ndim
    shape[axis] = length
    return scale.reshape(shape), None if zero_point is None else zero_point.reshape(shape)


def _quantize(x, scale, zp, qmin: int, qmax: int) -> np.ndarray:
    """int32 saturate(round_half_even(x / scale) + zp) as MLAS computes it
    (float32 quotient clamped to [qmin - zp, qmax - zp] first, a NaN to the
    lower bound as maxps does)."""
    zp32 = np.float32(0) if zp is None else np.asarray(zp).astype(np.float32)
    with np.errstate(all="ignore"):
        v = np.asarray(x).astype(np.float32, copy=False) / np.asarray(scale, dtype=np.float32)
        v = np.minimum(np.fmax(v, np.float32(qmin) - zp32), np.float32(qmax) - zp32)
        return (np.rint(v) + zp32).astype(np.int32)


class MicrosoftQuantizeLinear(KernelOp):
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), ONNX
    Runtime's com.microsoft QuantizeLinear: x float32 or float16 (widened to
    float32, the quotient rounded once in float32, as MLAS divides); y_scale
    like x; y_zero_point uint8, int8, uint16, int16, int4 or uint4 (absent:
    uint8, zero point 0).  A NaN quotient gives the type's minimum (MLAS
    clamps with maxps first).  Per tensor, or per axis (``axis``, default 1,
    negative from the end): a 1-D scale of x's dimension there.  Per tensor
    to uint8/int8 runs the core's loop; the other forms NumPy."""

    op_type = "QuantizeLinear"
    op_domain = MS
    element_types = ("tensor(float)", "tensor(float16)", "tensor(uint8)", "tensor(int8)",
                     "tensor(uint16)", "tensor(int16)", "tensor(int4)", "tensor(uint4)")
    inputs = (Input("x", types=(T.FLOAT, T.FLOAT16)), Input("y_scale", like=0),
              Input("y_zero_point", types=_QUANT_TYPES, optional=True))
    attributes = (Attr("axis", "int", 1),)
    min_work_per_thread = 1 << 15

    def _run(self, x, y_scale, y_zero_point=None):
        scale, zp = _linear_params(self, x, y_scale, y_zero_point, self.axis)
        out_dtype = UINT8 if y_zero_point is None else y_zero_point.dtype
        qmin, qmax = _RANGES[ELEMENT_TYPE_OF[out_dtype]]
        y = self._new_output(x.shape, out_dtype)
        if x.size == 0:
            self._record_path((out_dtype, "empty"),
                              lambda: f"quantizelinear_{out_dtype.name}_empty")
            return (y,)
        if scale.ndim == 0 and out_dtype in (UINT8, INT8):
            level = simd.state.level
            qcore.quantize_linear_8(
                np.ascontiguousarray(x, dtype=np.float32), y, np.float32(scale),
                0 if zp is None else int(zp), qmin, qmax, level,
                self._num_threads(x.size, self.min_work_per_thread))
            self._record_path((out_dtype, level), lambda: (
                f"quantizelinear_{out_dtype.name}_{simd.LEVEL_NAMES[level]}"))
            return (y,)
        np.copyto(y, _quantize(x, scale, zp, qmin, qmax), casting="unsafe")
        self._record_path((out_dtype, "numpy"), lambda: f"quantizelinear_{out_dtype.name}_numpy")
        return (y,)


class MicrosoftDequantizeLinear(KernelOp):
    """y = (x - x_zero_point) * x_scale, ONNX Runtime's com.microsoft
    DequantizeLinear: x uint8, int8, uint16, int16, int32, int4 or uint4;
    x_scale float32 or float16 (the output's type: computed in float32, then
    rounded); the difference in int32 (wrapping for int32 x, as ONNX
    Runtime's), rounded to float32, times the scale.  Per tensor or per axis
    as QuantizeLinear."""

    op_type = "DequantizeLinear"
    op_domain = MS
    element_types = ("tensor(uint8)", "tensor(int8)", "tensor(uint16)", "tensor(int16)",
                     "tensor(int32)", "tensor(int4)", "tensor(uint4)", "tensor(float)",
                     "tensor(float16)")
    inputs = (Input("x", types=_DEQUANT_TYPES), Input("x_scale", types=(T.FLOAT, T.FLOAT16)),
              Input("x_zero_point", like=0, optional=True))
    attributes = (Attr("axis", "int", 1),)

    def _run(self, x, x_scale, x_zero_point=None):
        scale, zp = _linear_params(self, x, x_scale, x_zero_point, self.axis)
        y = self._new_output(x.shape, x_scale.dtype)
        self._record_path(x.dtype, lambda: f"dequantizelinear_{x.dtype.name}_numpy")
        if x.size == 0:
            return (y,)
        d = x.astype(np.int64)
        if zp is not None:
            d = d - zp.astype(np.int64)
        d = d.astype(np.int32) if x.dtype == INT32 else d  # int32 wraps
        with np.errstate(over="ignore"):  # float16 overflows to inf, as ONNX Runtime's
            np.multiply(d.astype(np.float32), scale.astype(np.float32), out=y,
                        casting="unsafe")
        return (y,)


# ------------------------------------------------------- QLinear element-wise

_Q8 = (T.UINT8, T.INT8)


def _scalar_param(op, index, x, name):
    """The one element of a per-tensor scale or zero point (None when absent)."""
    if x is None:
        return None
    if not _one_element(x.shape):
        raise ValueError(op._input_error(
            index, f"has shape {x.shape}: {name} must be a scalar or a one-element vector "
            "(per tensor)"))
    return x.reshape(-1)[0]


def _zero(zp) -> int:
    return 0 if zp is None else int(zp)


def _mlas_operands(a_shape: tuple, b_shape: tuple, out_shape: tuple) -> tuple[bool, int]:
    """How ONNX Runtime's broadcast loop hands (A, B) to MLAS: whether B is
    the operand MLAS reads as its first (when A is constant within the
    innermost run of dimensions that broadcast alike, or everything is one
    element), and the length of that run."""
    rank = len(out_shape)
    a = (1,) * (rank - len(a_shape)) + tuple(a_shape)
    b = (1,) * (rank - len(b_shape)) + tuple(b_shape)
    status, span = None, 1
    for d in reversed(range(rank)):
        if out_shape[d] == 1:
            continue
        here = (a[d] == 1, b[d] == 1)
        if status is None:
            status = here
        elif here != status:
            break
        span *= out_shape[d]
    b_first = status is None or status[0]
    return b_first, span


class _QLinearBinary(KernelOp):
    """QLinearAdd and QLinearMul: per-tensor scales and zero points, NumPy
    broadcasting of A and B, the core's loop with MLAS' roundings."""

    op_domain = MS
    element_types = ("tensor(uint8)", "tensor(int8)")
    inputs = (Input("A", types=_Q8), Input("A_scale", types=(T.FLOAT,)),
              Input("A_zero_point", like=0, optional=True), Input("B", like=0),
              Input("B_scale", types=(T.FLOAT,)), Input("B_zero_point", like=0, optional=True),
              Input("C_scale", types=(T.FLOAT,)), Input("C_zero_point", like=0, optional=True))
    MUL: bool
    min_work_per_thread = 1 << 15

    def _run(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c_scale,
             c_zero_point=None):
        sa = _scalar_param(self, 1, a_scale, "A_scale")
        za = _zero(_scalar_param(self, 2, a_zero_point, "A_zero_point"))
        sb = _scalar_param(self, 4, b_scale, "B_scale")
        zb = _zero(_scalar_param(self, 5, b_zero_point, "B_zero_point"))
        sc = _scalar_param(self, 6, c_scale, "C_scale")
        zc = _zero(_scalar_param(self, 7, c_zero_point, "C_zero_point"))
        try:
            out_shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ValueError(self._input_error(
                3, f"has shape {b.shape}, which does not broadcast with input 0's "
                f"{a.shape}")) from None
        y = self._new_output(out_shape, a.dtype)
        level = simd.state.level
        self._record_path((a.dtype, level), lambda: (
            f"{type(self).__name__.lower()}_{a.dtype.name}_{simd.LEVEL_NAMES[level]}"))
        if y.size == 0:
            return (y,)
        b_first, span = _mlas_operands(a.shape, b.shape, out_shape)
        x, sx, zx, w, sw, zw = (b, sb, zb, a, sa, za) if b_first else (a, sa, za, b, sb, zb)
        x = np.ascontiguousarray(np.broadcast_to(x, out_shape))
        w = np.ascontiguousarray(np.broadcast_to(w, out_shape))
        qcore.binary_8(x, w, y, self.MUL, 1 if span == 1 else 0, a.dtype == INT8,
                       float(sx), float(sw), float(sc), zx, zw, zc, level,
                       self._num_threads(y.size, self.min_work_per_thread))
        return (y,)


class QLinearAdd(_QLinearBinary):
    """C = saturate(round((A - za) sa + (B - zb) sb) / sc) + zc), uint8 or
    int8, as MLAS' AVX2 kernel rounds it: ratios sa / sc and sb / sc in
    float32 and fused multiply-adds (bit for bit, including which operand
    MLAS takes first after ONNX Runtime's broadcast loop)."""

    MUL = False


class QLinearMul(_QLinearBinary):
    """C = saturate(round(float((A - za)(B - zb)) (sa sb / sc) + zc)), uint8
    or int8, as MLAS computes it (two float32 roundings, then half to even)."""

    MUL = True


class _QLinearLookup(KernelOp):
    """QLinearSigmoid and QLinearLeakyRelu: a table of the 256 results,
    built as ONNX Runtime builds it (dequantize each code in float32, the
    function, MLAS' quantization), then looked up."""

    op_domain = MS
    element_types = ("tensor(uint8)", "tensor(int8)")
    inputs = (Input("X", types=_Q8), Input("X_scale", types=(T.FLOAT,)),
              Input("X_zero_point", like=0, optional=True), Input("Y_scale", types=(T.FLOAT,)),
              Input("Y_zero_point", like=0, optional=True))

    def _function(self, v: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _run(self, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None):
        sx = np.float32(_scalar_param(self, 1, x_scale, "X_scale"))
        zx = _zero(_scalar_param(self, 2, x_zero_point, "X_zero_point"))
        sy = np.float32(_scalar_param(self, 3, y_scale, "Y_scale"))
        zy = _zero(_scalar_param(self, 4, y_zero_point, "Y_zero_point"))
        key = (float(sx), zx, float(sy), zy, x.dtype)
        cache = self.__dict__.setdefault("_tables", {})
        table = cache.get(key)
        if table is None:
            codes = np.arange(256, dtype=np.uint8).view(x.dtype).astype(np.int32)
            with np.errstate(all="ignore"):
                v = sx * (codes - zx).astype(np.float32)
                lo, hi = (-128, 127) if x.dtype == INT8 else (0, 255)
                table = _quantize(self._function(v), sy, zy, lo, hi).astype(x.dtype)
            if len(cache) > 16:
                cache.clear()
            cache[key] = table
        y = self._new_output(x.shape, x.dtype)
        np.take(table, x.view(np.uint8), out=y)
        self._record_path(x.dtype, lambda: f"{type(self).__name__.lower()}_{x.dtype.name}_table")
        return (y,)


class QLinearLeakyRelu(_QLinearLookup):
    """Y = quantize(v >= 0 ? v : alpha v), v = dequantize(X), in float32 (bit
    for bit with ONNX Runtime)."""

    attributes = (Attr("alpha", "float", 0.01),)

    def _function(self, v):
        return np.where(v >= 0, v, np.float32(self.alpha) * v)


class QLinearSigmoid(_QLinearLookup):
    """Y = quantize(1 / (1 + exp(-v))), v = dequantize(X).  ONNX Runtime
    evaluates MLAS' rational approximation of the logistic; here it is
    computed in float64 and rounded to float32, so a code whose value lies
    within MLAS' error of a rounding boundary can differ by one (measured:
    tests/ops/test_quantization.py)."""

    def _function(self, v):
        return (1.0 / (1.0 + np.exp(-v.astype(np.float64)))).astype(np.float32)


def _requantize_table(op, dtype, x_scale, x_zero_point, y_scale, y_zero_point):
    """The 256-entry table ONNX Runtime builds to move codes of one (scale,
    zero point) to another: dequantize in float32, MLAS' quantization."""
    codes = np.arange(256, dtype=np.uint8).view(dtype).astype(np.int32)
    lo, hi = (-128, 127) if dtype == INT8 else (0, 255)
    with np.errstate(all="ignore"):
        v = np.float32(x_scale) * (codes - _zero(x_zero_point)).astype(np.float32)
        return _quantize(v, y_scale, _zero(y_zero_point), lo, hi).astype(dtype)


class QLinearConcat(KernelOp):
    """Concat of 8-bit tensors, each (X, X_scale, X_zero_point) moved to
    (Y_scale, Y_zero_point) through ONNX Runtime's table (a copy when the
    scale and zero point are the output's): bit for bit.  ``axis`` is
    required (negative from the end); every tensor has Y_zero_point's type
    and one rank, dimensions equal but on the axis."""

    op_domain = MS
    element_types = ("tensor(uint8)", "tensor(int8)", "tensor(float)")
    inputs = (Input("Y_scale", types=(T.FLOAT,)), Input("Y_zero_point", types=_Q8),
              Input("inputs", variadic=True))
    attributes = (Attr("axis", "int"),)

    def _run(self, y_scale, y_zero_point, *tuples):
        sy = _scalar_param(self, 0, y_scale, "Y_scale")
        zy = _scalar_param(self, 1, y_zero_point, "Y_zero_point")
        dtype = y_zero_point.dtype
        if len(tuples) == 0 or len(tuples) % 3:
            raise ValueError(f"QLinearConcat: the inputs after Y_scale and Y_zero_point must be "
                             f"(X, X_scale, X_zero_point) triples, got {len(tuples)}")
        xs = tuples[0::3]
        rank = xs[0].ndim
        if not -rank <= self.axis < max(rank, 1):
            raise ValueError(f"QLinearConcat: attribute axis {self.axis} is out of range for "
                             f"inputs of rank {rank}")
        axis = self.axis % max(rank, 1)
        parts = []
        for k in range(len(xs)):
            x, sx, zx = tuples[3 * k: 3 * k + 3]
            index = 2 + 3 * k
            if x is None or sx is None or zx is None:
                raise ValueError(self._input_error(index, "and its scale and zero point are "
                                                          "required"))
            for offset, t, want in ((0, x, dtype), (2, zx, dtype)):
                if t.dtype != want:
                    raise TypeError(self._input_error(
                        index + offset, f"has element type {t.dtype}, expected {want} like "
                        "Y_zero_point"))
            if sx.dtype != FLOAT32:
                raise TypeError(self._input_error(index + 1, f"has element type {sx.dtype}, "
                                                             "expected float32"))
            if x.ndim != rank or x.shape[:axis] + x.shape[axis + 1:] != (
                    xs[0].shape[:axis] + xs[0].shape[axis + 1:]):
                raise ValueError(self._input_error(
                    index, f"has shape {x.shape}, which differs from input 2's {xs[0].shape} "
                    f"outside axis {axis}"))
            scale = _scalar_param(self, index + 1, sx, "a scale")
            zero = _scalar_param(self, index + 2, zx, "a zero point")
            if np.float32(scale) == np.float32(sy) and int(zero) == int(zy):
                parts.append(x)
            else:
                parts.append(np.take(_requantize_table(self, dtype, scale, zero, sy, zy),
                                     x.view(np.uint8)))
        self._record_path(dtype, lambda: f"qlinearconcat_{dtype.name}_table")
        return (np.concatenate(parts, axis=axis),)


class QLinearWhere(KernelOp):
    """Z = where(condition, X, Y), X and Y moved to (z_scale, z_zero_point)
    through ONNX Runtime's tables, the three broadcast NumPy style."""

    op_domain = MS
    element_types = ("tensor(bool)", "tensor(uint8)", "tensor(int8)", "tensor(float)")
    inputs = (Input("condition", types=(T.BOOL,)), Input("X", types=_Q8),
              Input("x_scale", types=(T.FLOAT,)), Input("x_zero_point", like=1),
              Input("Y", like=1), Input("y_scale", types=(T.FLOAT,)),
              Input("y_zero_point", like=1), Input("z_scale", types=(T.FLOAT,)),
              Input("z_zero_point", like=1))

    def _run(self, condition, x, x_scale, x_zero_point, y, y_scale, y_zero_point, z_scale,
             z_zero_point):
        params = [_scalar_param(self, i, t, name) for i, t, name in (
            (2, x_scale, "x_scale"), (3, x_zero_point, "x_zero_point"), (5, y_scale, "y_scale"),
            (6, y_zero_point, "y_zero_point"), (7, z_scale, "z_scale"),
            (8, z_zero_point, "z_zero_point"))]
        sx, zx, sy, zy, sz, zz = params
        try:
            shape = np.broadcast_shapes(condition.shape, x.shape, y.shape)
        except ValueError:
            raise ValueError(self._input_error(
                4, f"has shape {y.shape}: condition {condition.shape}, X {x.shape} and Y do "
                "not broadcast together")) from None
        dtype = x.dtype
        tx = _requantize_table(self, dtype, sx, zx, sz, zz)
        ty = _requantize_table(self, dtype, sy, zy, sz, zz)
        z = self._new_output(shape, dtype)
        np.copyto(z, np.where(condition, np.take(tx, x.view(np.uint8)),
                              np.take(ty, y.view(np.uint8))))
        self._record_path(dtype, lambda: f"qlinearwhere_{dtype.name}_table")
        return (z,)


def _global_average(op, x, sx, zx, sy, zy, spatial: tuple) -> np.ndarray:
    """MLAS' quantized global average over the ``spatial`` axes of x (kept
    as ones): int32 sums less zx * size, times sx / (sy * size) in float32,
    rounded half to even, plus zy, saturated."""
    size = math.prod(x.shape[d] for d in spatial)
    if x.size == 0 or size == 0:
        raise ValueError(op._input_error(0, f"has shape {x.shape}: empty images have no "
                                            "average"))
    if size >= 1 << 24:
        raise ValueError(op._input_error(0, f"has images of {size} elements: 2^24 or more "
                                            "cannot be averaged exactly"))
    with np.errstate(all="ignore"):
        scale = np.float32(sx) / (np.float32(sy) * np.float32(size))
    if not (2.0 ** -32 <= scale < 256.0):
        raise ValueError(f"{op.onnx_node.op_type}: x_scale / (y_scale * image size) = {scale} "
                         "is outside [2^-32, 256), where ONNX Runtime computes it")
    acc = x.astype(np.int64).sum(axis=spatial, keepdims=True) - zx * size
    lo, hi = (-128, 127) if x.dtype == INT8 else (0, 255)
    v = np.rint(acc.astype(np.int32).astype(np.float32) * scale) + zy
    return np.clip(v, lo, hi).astype(x.dtype)


class QLinearGlobalAveragePool(KernelOp):
    """Y = saturate(round_half_even(float32(sum(X) - x_zp * size) * s) +
    y_zp) per image and channel, s = x_scale / (y_scale * size) in float32,
    as MLAS computes it (bit for bit).  X is N x C x spatial...
    (``channels_last`` 0) or N x spatial... x C (1); Y keeps X's rank with
    ones for the spatial dimensions.  As ONNX Runtime: an image of 2^24
    elements or more, and s outside [2^-32, 256), are rejected."""

    op_domain = MS
    element_types = ("tensor(uint8)", "tensor(int8)")
    inputs = (Input("X", types=_Q8), Input("x_scale", types=(T.FLOAT,)),
              Input("x_zero_point", like=0), Input("y_scale", types=(T.FLOAT,)),
              Input("y_zero_point", like=0))
    attributes = (Attr("channels_last", "flag", 0),)

    def _run(self, x, x_scale, x_zero_point, y_scale, y_zero_point):
        sx = np.float32(_scalar_param(self, 1, x_scale, "x_scale"))
        zx = _zero(_scalar_param(self, 2, x_zero_point, "x_zero_point"))
        sy = np.float32(_scalar_param(self, 3, y_scale, "y_scale"))
        zy = _zero(_scalar_param(self, 4, y_zero_point, "y_zero_point"))
        if x.ndim < 3:
            raise ValueError(self._input_error(
                0, f"has shape {x.shape}: rank 3 or more expected (N, C and spatial "
                "dimensions)"))
        last = self.channels_last != 0
        spatial = tuple(range(1, x.ndim - 1)) if last else tuple(range(2, x.ndim))
        out_shape = tuple(1 if d in spatial else n for d, n in enumerate(x.shape))
        y = self._new_output(out_shape, x.dtype)
        np.copyto(y, _global_average(self, x, sx, zx, sy, zy, spatial))
        self._record_path(x.dtype, lambda: f"qlinearglobalaveragepool_{x.dtype.name}_numpy")
        return (y,)


class QLinearAveragePool(KernelOp):
    """AveragePool of an 8-bit tensor as ONNX Runtime 1.32 computes it: X
    dequantized to float32 (x_scale (x - x_zp)), each window summed in
    float32 in row-major order (padding skipped), divided by its count
    (the kernel's size with ``count_include_pad``, else the elements inside
    X), then y = saturate(round_half_even(v / y_scale + y_zp)), each step
    rounded in float32 (bit for bit).  1 to 3 spatial dimensions; NCHW, or
    NHWC with ``channels_last``; ``auto_pad``, ``pads``, ``strides``,
    ``ceil_mode`` as ONNX Runtime sizes the output.  A kernel covering the
    whole image without padding is a global average, computed as
    QLinearGlobalAveragePool computes it (as ONNX Runtime does)."""

    op_domain = MS
    element_types = ("tensor(uint8)", "tensor(int8)")
    inputs = (Input("X", types=_Q8), Input("x_scale", types=(T.FLOAT,)),
              Input("x_zero_point", like=0, optional=True), Input("y_scale", types=(T.FLOAT,)),
              Input("y_zero_point", like=0, optional=True))
    attributes = (Attr("kernel_shape", "ints"), Attr("pads", "ints", None),
                  Attr("strides", "ints", None),
                  Attr("auto_pad", "string", "NOTSET",
                       allowed=("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")),
                  Attr("ceil_mode", "flag", 0), Attr("count_include_pad", "flag", 0),
                  Attr("channels_last", "flag", 0))

    def _geometry(self, spatial: tuple):
        """(output sizes, head pads) per spatial dimension, as ONNX Runtime's
        PoolAttributes computes them."""
        kernel = list(self.kernel_shape)
        n = len(spatial)
        if len(kernel) != n or any(k < 1 for k in kernel):
            raise ValueError(f"QLinearAveragePool: attribute kernel_shape {kernel} must have "
                             f"{n} positive values (input 0 has {n} spatial dimensions)")
        strides = list(self.strides) if self.strides else [1] * n
        pads = list(self.pads) if self.pads else [0] * (2 * n)
        if len(strides) != n or len(pads) != 2 * n or any(st < 1 for st in strides):
            raise ValueError(f"QLinearAveragePool: attributes strides {strides} and pads "
                             f"{pads} must have {n} and {2 * n} values (strides positive)")
        if any(not 0 <= p < kernel[d % n] for d, p in enumerate(pads)):
            raise ValueError(f"QLinearAveragePool: attribute pads {pads} must be >= 0 and "
                             f"smaller than the kernel {kernel} (as ONNX Runtime requires)")
        outs, heads = [], []
        for d, (size, k, st) in enumerate(zip(spatial, kernel, strides)):
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                out = (size + st - 1) // st
                needed = max(0, (out - 1) * st + k - size)
                head = (needed + 1) // 2 if self.auto_pad == "SAME_LOWER" else needed // 2
            else:  # NOTSET, or VALID: no padding (ceil_mode applies to both)
                valid = self.auto_pad == "VALID"
                head = 0 if valid else pads[d]
                span = size - k if valid else size + pads[d] + pads[d + n] - k
                out = (-(-span // st) if self.ceil_mode else span // st) + 1
                if self.ceil_mode and (out - 1) * st >= size + head:
                    out -= 1
            if out < 1:
                raise ValueError(f"QLinearAveragePool: the kernel {kernel} does not fit in "
                                 f"the padded image {spatial}")
            outs.append(out)
            heads.append(head)
        return outs, heads, kernel, strides

    def _run(self, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None):
        sx = np.float32(_scalar_param(self, 1, x_scale, "x_scale"))
        zx = _zero(_scalar_param(self, 2, x_zero_point, "x_zero_point"))
        sy = np.float32(_scalar_param(self, 3, y_scale, "y_scale"))
        zy = _zero(_scalar_param(self, 4, y_zero_point, "y_zero_point"))
        if not 3 <= x.ndim <= 5:
            raise ValueError(self._input_error(
                0, f"has shape {x.shape}: rank 3 to 5 expected (N, C and 1 to 3 spatial "
                "dimensions)"))
        last = self.channels_last != 0
        xc = np.moveaxis(x, -1, 1) if last else x  # N, C, spatial...
        spatial = xc.shape[2:]
        outs, heads, kernel, strides = self._geometry(spatial)
        tails = [max(0, (o - 1) * st + k - n - h)
                 for o, st, k, n, h in zip(outs, strides, kernel, spatial, heads)]
        lo, hi = (-128, 127) if x.dtype == INT8 else (0, 255)
        if list(kernel) == list(spatial) and not any(heads) and not any(tails):
            y = _global_average(self, xc, sx, zx, sy, zy, tuple(range(2, xc.ndim)))
        else:
            with np.errstate(all="ignore"):
                xf = sx * (xc.astype(np.int32) - zx).astype(np.float32)
                xf = np.pad(xf, [(0, 0), (0, 0)] + list(zip(heads, tails)))
                acc = np.zeros(xc.shape[:2] + tuple(outs), dtype=np.float32)
                for offset in np.ndindex(*kernel):
                    window = tuple(slice(o, o + (n - 1) * st + 1, st)
                                   for o, n, st in zip(offset, outs, strides))
                    acc += xf[(Ellipsis,) + window]
                if self.count_include_pad:
                    count = np.float32(math.prod(kernel))
                else:
                    count = np.ones((), dtype=np.int64)
                    for o, st, k, n, h in zip(outs, strides, kernel, spatial, heads):
                        start = np.arange(o) * st - h
                        per = np.minimum(start + k, n) - np.maximum(start, 0)
                        count = np.multiply.outer(count, per)
                    count = count.astype(np.float32)
                v = np.rint(acc / count / sy + np.float32(zy))
                y = np.clip(v, lo, hi).astype(x.dtype)
        if last:
            y = np.moveaxis(y, 1, -1)
        out = self._new_output(y.shape, x.dtype)
        np.copyto(out, y)
        self._record_path(x.dtype, lambda: f"qlinearaveragepool_{x.dtype.name}_numpy")
        return (out,)


def _int32(value: int) -> int:
    """``value`` narrowed to int32 as a C++ cast wraps it."""
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


class QLinearSoftmax(KernelOp):
    """Softmax of 8-bit codes as ONNX Runtime 1.32 computes it (bit for bit):
    a table e[i] = float32(exp((i - 255 + shift) x_scale)) in double, shift =
    max(0, log(FLT_MAX / D) - 5) / x_scale, D the reduced length; per row the
    codes are shifted so that the maximum reads e[255], the float32 sum is
    taken in order, and y = saturate(round_half_even(e / sum * floor(1 /
    y_scale)) + y_zero_point), each step in float32 (e * floor(1 / y_scale)
    first would overflow for a single-element row, where ONNX Runtime does
    not).  ``opset`` (required) < 13: the input is flattened from
    ``axis`` into rows; 13 and above: along ``axis``; ``axis`` defaults to -1
    for both (ONNX Runtime reads the schema's default, not its opset-12 rule
    of 1).  x_zero_point is checked and unused (the shift cancels).
    Measured against ONNX Runtime 1.32 (its kernel saturates int8 at 127,
    where the source it was built from suggests a wrap)."""

    op_domain = MS
    element_types = ("tensor(uint8)", "tensor(int8)")
    inputs = (Input("X", types=_Q8), Input("X_scale", types=(T.FLOAT,)),
              Input("x_zero_point", like=0, optional=True), Input("y_scale", types=(T.FLOAT,)),
              Input("y_zero_point", like=0))
    attributes = (Attr("opset", "int"), Attr("axis", "int", None))  # None: -1

    @staticmethod
    def _table(x_scale: np.float32, length: int, signed: bool) -> np.ndarray:
        f32max = np.finfo(np.float32).max
        shift = math.log(float(np.float32(f32max) / np.float32(length)))
        shift = max(0.0, shift - 5.0) / float(x_scale)
        i = np.arange(256, dtype=np.float64)
        values = np.exp((i - 255 + shift) * float(x_scale)).astype(np.float32)
        table = np.empty(256, dtype=np.float32)
        index = ((np.arange(256) - 128) if signed else np.arange(256)).astype(np.int64) & 0xFF
        table[index] = values
        return table

    def _run(self, x, x_scale, x_zero_point=None, y_scale=None, y_zero_point=None):
        sx = np.float32(_scalar_param(self, 1, x_scale, "X_scale"))
        _scalar_param(self, 2, x_zero_point, "x_zero_point")  # checked, unused (as ORT)
        sy = np.float32(_scalar_param(self, 3, y_scale, "y_scale"))
        zy = _zero(_scalar_param(self, 4, y_zero_point, "y_zero_point"))
        y = self._new_output(x.shape, x.dtype)
        self._record_path(x.dtype, lambda: f"qlinearsoftmax_{x.dtype.name}_table")
        if x.size == 0:
            return (y,)
        # ONNX Runtime narrows both attributes to int32 (wrapping)
        opset = _int32(self.opset)
        axis = -1 if self.axis is None else _int32(self.axis)
        if not -x.ndim <= axis < max(x.ndim, 1):
            raise ValueError(f"QLinearSoftmax: attribute axis {axis} is out of range for "
                             f"input 0 of rank {x.ndim}")
        axis %= max(x.ndim, 1)
        if opset < 13:
            rows = x.reshape(math.prod(x.shape[:axis]), -1)
        else:
            rows = np.moveaxis(x, axis, -1)
        length = rows.shape[-1]
        signed = x.dtype == INT8
        table = self._table(sx, length, signed)
        codes = rows.astype(np.int32)
        top = codes.max(axis=-1, keepdims=True)
        if signed:  # uint8(127 - max + x), wrapping
            index = (127 - top + codes) & 0xFF
        else:  # the table read from 255 - max
            index = 255 - top + codes
        e = table[index]
        total = np.cumsum(e, axis=-1, dtype=np.float32)[..., -1:]  # in order
        lo, hi = (-128, 127) if signed else (0, 255)
        with np.errstate(all="ignore"):
            v = e / total * np.floor(np.float32(1.0) / sy)
            out = np.clip(np.rint(v).astype(np.float64) + zy, lo, hi).astype(x.dtype)
        out = out.reshape(x.shape) if opset < 13 else np.moveaxis(out, -1, axis)
        np.copyto(y, out)
        return (y,)


class QGemm(_IntegerProduct):
    """com.microsoft QGemm as ONNX Runtime 1.32 computes it, on the int8
    engine: acc (int32) = C + (A' - a_zp)(B' - b_zp) with A' = A or A^T,
    B' = B or B^T (``transA``, ``transB``), C int32 broadcast from (), [N],
    [1, N], [M, 1] or [M, N] (wrapping as int32 sums do); the scale per
    column s = alpha * a_scale * b_scale[n] (float32, in that order), divided
    by y_scale when given.  With y_zero_point: Y (its type) =
    saturate(round_half_even(float32(acc) * s) + y_zp), MLAS' requantization;
    without: Y float32 = float32(acc) * s.  A uint8 or int8, B uint8 or int8
    (ONNX Runtime has no int8 A with uint8 B: run here all the same);
    a_scale, a_zero_point one element; b_scale and b_zero_point one element
    or [N], of the same shape.  ONNX Runtime's output for K = 0 is not
    reproduced (it writes bytes into a float output): here acc = C."""

    op_domain = MS
    since_version = 1
    element_types = ("tensor(uint8)", "tensor(int8)", "tensor(float)", "tensor(int32)")
    inputs = (Input("A", types=INT8_TYPES), Input("a_scale", types=(T.FLOAT,)),
              Input("a_zero_point", like=0), Input("B", types=INT8_TYPES),
              Input("b_scale", types=(T.FLOAT,)), Input("b_zero_point", like=3),
              Input("C", types=(T.INT32,), optional=True),
              Input("y_scale", types=(T.FLOAT,), optional=True),
              Input("y_zero_point", types=INT8_TYPES, optional=True))
    attributes = (Attr("transA", "flag", 0), Attr("transB", "flag", 0),
                  Attr("alpha", "float", 1.0))
    B_INDEX, ZA_INDEX, ZB_INDEX = 3, 2, 5

    def _run(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, c=None, y_scale=None,
             y_zero_point=None):
        if a.ndim != 2 or b.ndim != 2:
            which = 0 if a.ndim != 2 else 3
            raise ValueError(self._input_error(which, "must be a matrix (rank 2)"))
        A = a.T if self.transA else a
        Bm = b.T if self.transB else b
        M, K = A.shape
        K2, N = Bm.shape
        if K != K2:
            raise ValueError(self._input_error(
                3, f"has shape {b.shape}: its inner dimension {K2} differs from A's {K}"))
        sa = np.float32(_scalar_param(self, 1, a_scale, "a_scale"))
        za = _scalar_param(self, 2, a_zero_point, "a_zero_point")
        for index, t in ((4, b_scale), (5, b_zero_point)):
            if not (t.ndim == 0 or (t.ndim == 1 and t.shape[0] in (1, N))):
                raise ValueError(self._input_error(
                    index, f"has shape {t.shape}: it must be a scalar or 1-D of 1 or N = {N} "
                    "elements"))
        if b_scale.shape != b_zero_point.shape:
            raise ValueError(self._input_error(
                5, f"has shape {b_zero_point.shape}: b_scale and b_zero_point must have the "
                f"same shape (b_scale has {b_scale.shape})"))
        if c is not None and c.shape not in ((), (1,), (1, 1), (N,), (1, N), (M, 1), (M, N)):
            raise ValueError(self._input_error(
                6, f"has shape {c.shape}: it must broadcast to (M, N) = ({M}, {N}) as (), "
                "[N], [1, N], [M, 1] or [M, N]"))
        sy = None if y_scale is None else np.float32(_scalar_param(self, 7, y_scale, "y_scale"))
        zy = _scalar_param(self, 8, y_zero_point, "y_zero_point")
        out_dtype = FLOAT32 if y_zero_point is None else y_zero_point.dtype
        y = self._new_output((M, N), out_dtype)
        if M == 0 or N == 0:
            self._record_path((a.dtype, b.dtype, "empty"), lambda: (
                f"qgemm_{a.dtype.name}_{b.dtype.name}_empty"))
            return (y,)
        acc = self._new_output((1, M, N), INT32, slot=1)
        if c is None:
            acc.fill(0)
        else:
            np.copyto(acc[0], np.broadcast_to(c.reshape(c.shape[-2:] if c.ndim == 2 else c.shape),
                                              (M, N)))
        used = simd.state.level
        if K:
            used = core.level_used(used)
            threads = self._product_threads(M, M * N * K)
            constant = self._constant_input(3) is b
            bt = self._prepared_input(("B", self.transB), 3, b, lambda: np.ascontiguousarray(Bm))
            packed, sums = self._packed(used, bt.view(np.uint8), b.dtype == INT8,
                                        np.zeros(1, dtype=np.int64), K, N, threads, constant)
            za_s, _, _, _ = self._zero_points(np.asarray(za).reshape(()), (), (),
                                              128 if a.dtype == INT8 else 0)
            zb_form = (1, N) if b_zero_point.size > 1 else ()
            zb_s, _, _, zb_cs = self._zero_points(b_zero_point.reshape(-1)[:N].reshape(zb_form)
                                                  if zb_form else b_zero_point.reshape(()),
                                                  zb_form, (), 0 if b.dtype == INT8 else -128)
            prod = self._new_output((1, M, N), INT32, slot=2)
            core.gemm(np.ascontiguousarray(A).view(np.uint8), np.zeros(1, dtype=np.int64),
                      packed, sums, np.zeros(1, dtype=np.int64), za_s, zb_s, prod, 0, 0, 0,
                      zb_cs, M, N, K, a.dtype == INT8, used, threads)
            np.add(acc, prod, out=acc)
        # float32 scales, formed in ONNX Runtime's order
        scale = np.float32(self.alpha) * sa * b_scale.astype(np.float32).reshape(-1)
        if sy is not None:
            scale = scale / sy
        with np.errstate(all="ignore"):
            v = acc[0].astype(np.float32) * scale.astype(np.float32)
            if zy is None:
                np.copyto(y, v)
            else:
                lo, hi = (-128, 127) if out_dtype == INT8 else (0, 255)
                v = np.minimum(np.fmax(v, np.float32(lo - int(zy))), np.float32(hi - int(zy)))
                np.copyto(y, np.rint(v) + int(zy), casting="unsafe")
        self._record_path((a.dtype, b.dtype, out_dtype, used), lambda: (
            f"qgemm_{a.dtype.name}_{b.dtype.name}_{out_dtype.name}_{simd.LEVEL_NAMES[used]}"))
        return (y,)


KERNELS = {
    "RegisterMicrosoftKernels": (DynamicQuantizeMatMul, MatMulIntegerToFloat,
                                 MicrosoftQuantizeLinear, MicrosoftDequantizeLinear, QLinearAdd,
                                 QLinearMul, QLinearLeakyRelu, QLinearSigmoid, QLinearConcat,
                                 QLinearWhere, QLinearGlobalAveragePool, QLinearAveragePool,
                                 QLinearSoftmax, QGemm),
}
