"""MatMulInteger and QLinearMatMul, on the 8-bit engine of ``_kernels/gemm_int8``.

Both compute the exact int32 product (A - a_zero_point)(B - b_zero_point)
with numpy.matmul semantics (1-D operands, batch broadcasting); zero points
are folded in through row and column sums (see olc_gemm_int8.h).
QLinearMatMul then requantises as the reference does: the int32 product
times float64(a_scale * b_scale / y_scale) (that quotient computed in the
scales' own type, by NumPy), plus y_zero_point, rounded half to even and
saturated.  A constant B (an initializer) is packed once per engine level.

Zero points and scales are per tensor (one element), per row of A (shape
[M], or [..., M, 1] with A's batch dimensions or ones) or per column of B
([N] or [..., 1, N]), as the schemas describe them.  The float8 types and
bfloat16 scales are rejected: the onnx.reference built-in cannot run them
either (its requantisation uses np.iinfo and int32 x bfloat16 promotion).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from .. import simd
from .._kernels.engines import gemm_int8 as core
from ._base import KernelOp

INT8 = (np.dtype(np.uint8), np.dtype(np.int8))
INT32 = np.dtype(np.int32)
FLOAT64 = np.dtype(np.float64)


class _IntegerProduct(KernelOp):
    """Shared by both operators: shapes, zero points, B packing, the core call."""

    # Multiply-adds (batch M N K) one thread must have before a second one
    # helps.  Measured on 2 cores (VNNI, best of 300 core calls, t1/t2,
    # packing of A included): 32^3 0.91x, 48^3 1.05x, 64^3 1.21x, 96^3
    # 1.44x, 128^3 1.64x.  Two threads from 64^3 (2 x 2^17).
    min_work_per_thread: ClassVar[int] = 1 << 17
    since_version: ClassVar[int] = 10
    B_INDEX: ClassVar[int]  # inputs: B and the two zero points
    ZA_INDEX: ClassVar[int]
    ZB_INDEX: ClassVar[int]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.kernel_name = f"onnx_light_cpu::{cls.__name__}"
        cls._labels = {}

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._plans: dict = {}
        self._prepacked: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # level -> (B, sums)

    def prepared_bytes(self) -> int:
        """Bytes of the constant B packed once for this node (0 when none)."""
        return sum(p.nbytes + s.nbytes for p, s in self._prepacked.values())

    # ---- checks ----

    def _int8(self, index: int, x) -> np.ndarray:
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(index, f"must be a tensor, got {type(x).__name__}"))
        if x.dtype not in INT8:
            raise TypeError(self._input_error(
                index, f"has element type {x.dtype}, expected uint8 or int8"
                + (" (float8 types are not supported: the onnx.reference built-in "
                   "cannot run them either)" if "float8" in x.dtype.name else "")))
        return x

    def _zero_point_type(self, index: int, zp, x: np.ndarray, of: int) -> None:
        if not isinstance(zp, np.ndarray):
            raise TypeError(self._input_error(index, f"must be a tensor, got {type(zp).__name__}"))
        if zp.dtype != x.dtype:
            raise TypeError(self._input_error(
                index, f"has element type {zp.dtype} but input {of} has {x.dtype}"))

    def _plan(self, a_shape, b_shape):
        """Shapes, batch offsets and B matrices of one (A, B) shape pair, cached."""
        key = (a_shape, b_shape)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        b_at = self.B_INDEX
        if len(a_shape) == 0 or len(b_shape) == 0:
            which = 0 if len(a_shape) == 0 else b_at
            raise ValueError(self._input_error(which, "must have at least one dimension"))
        a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
        b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
        M, K = a2[-2:]
        K2, N = b2[-2:]
        if K != K2:
            raise ValueError(self._input_error(
                b_at, f"has shape {b_shape}: its inner dimension {K2} differs from A's {K} "
                f"(A has shape {a_shape})"))
        a_batch, b_batch = a2[:-2], b2[:-2]
        try:
            batch = np.broadcast_shapes(a_batch, b_batch)
        except ValueError:
            raise ValueError(self._input_error(
                b_at, f"has shape {b_shape}: batch dimensions {b_batch} do not broadcast with "
                f"A's {a_batch} (A has shape {a_shape})")) from None
        out_shape = batch + ((M,) if len(a_shape) > 1 else ()) + ((N,) if len(b_shape) > 1 else ())
        na, nb = math.prod(a_batch), math.prod(b_batch)
        ia = np.broadcast_to(np.arange(na, dtype=np.int64).reshape(a_batch), batch).ravel()
        ib = np.broadcast_to(np.arange(nb, dtype=np.int64).reshape(b_batch), batch).ravel()
        plan = self._plans[key] = (
            out_shape, batch, a2, b2, M, N, K,
            np.ascontiguousarray(ia * (M * K)),           # A offset per output batch
            np.ascontiguousarray(ib),                     # B matrix per output batch
            np.arange(nb, dtype=np.int64) * (K * N))      # offsets of B's matrices
        return plan

    def _axis_form(self, index: int, x: np.ndarray, operand: tuple, row: bool,
                   what: str) -> np.ndarray:
        """``x`` (a zero point or scale) reshaped to broadcast against
        batch + (M, 1) (row=True, input A) or batch + (1, N) (input B)."""
        if x.size == 1 and x.ndim <= max(1, len(operand)):
            return x.reshape(())  # (a higher rank would broadcast the output's)
        length = operand[-2] if row else operand[-1]
        if x.ndim == 1 and x.shape[0] == length:
            return x.reshape((length, 1) if row else (1, length))
        if 2 <= x.ndim <= len(operand):
            # Batch dimensions align right, as in NumPy broadcasting.
            want = (length, 1) if row else (1, length)
            batch = operand[len(operand) - x.ndim:-2]
            if (x.shape[-2:] in (want, (1, 1))
                    and all(d in (1, o) for d, o in zip(x.shape[:-2], batch))):
                return x
        form = "[M] or [..., M, 1]" if row else "[N] or [..., 1, N]"
        raise ValueError(self._input_error(
            index, f"has shape {x.shape}: a {what} must have one element or the shape "
            f"{form} (per {'row' if row else 'column'}) for an operand of shape {operand}"))

    @staticmethod
    def _strided(x: np.ndarray, batch: tuple, dtype: np.dtype):
        """(contiguous array, batch, row, column strides in elements) reading
        ``x`` (broadcastable to batch + (M, N)) per (flat batch, row, column)."""
        if x.ndim == 0:
            return np.full(1, x, dtype=dtype), 0, 0, 0
        x = x.reshape((1,) * (len(batch) + 2 - x.ndim) + x.shape)
        rows, cols = x.shape[-2:]
        if any(d > 1 for d in x.shape[:-2]):
            x = np.broadcast_to(x, batch + (rows, cols))
            bs = rows * cols
        else:
            bs = 0
        x = np.ascontiguousarray(x, dtype=dtype)
        return x, bs, (cols if rows > 1 else 0), (1 if cols > 1 else 0)

    # ---- the product ----

    def _packed(self, used, b, b_signed, b_pack_off, K, N, threads, constant):
        cached = self._prepacked.get(used) if constant else None
        if cached is not None:
            return cached
        nb = len(b_pack_off)
        packed = np.empty(nb * core.packed_size(K, N), dtype=np.int8)
        sums = np.empty(nb * core.colsum_size(N), dtype=np.int32)
        core.pack_b(b, b_pack_off, packed, sums, K, N, b_signed, used, threads)
        if constant:
            self._prepacked[used] = (packed, sums)
        return packed, sums

    def _product(self, a, za, b, zb, plan, out, level):
        """out (int32, batch x M x N) = (A - za)(B - zb); returns the engine's
        level, whether B was constant and the thread count."""
        _, batch, a2, b2, M, N, K, a_off, b_index, b_pack_off = plan
        used = core.level_used(level)
        a_signed = a.dtype == np.int8
        b_signed = b.dtype == np.int8
        threads = self._num_threads(M * N * K * len(a_off), self.min_work_per_thread)
        constant = self._constant_input(self.B_INDEX) is b
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if not b.flags.c_contiguous:
            b = np.ascontiguousarray(b)
        packed, sums = self._packed(used, b.view(np.uint8), b_signed, b_pack_off, K, N,
                                    threads, constant)
        # Shifted zero points (see olc_gemm_int8.h): signed A +128, unsigned B -128.
        za_s, za_bs, za_rs, _ = self._zero_points(self.ZA_INDEX, za, a2, True, batch,
                                                  128 if a_signed else 0)
        zb_s, zb_bs, _, zb_cs = self._zero_points(self.ZB_INDEX, zb, b2, False, batch,
                                                  0 if b_signed else -128)
        core.gemm(a.view(np.uint8), a_off, packed, sums, b_index, za_s, zb_s, out, za_bs,
                  za_rs, zb_bs, zb_cs, M, N, K, a_signed, used, threads)
        return used, constant, threads

    def _zero_points(self, index, zp, operand, row, batch, shift):
        if zp is None:
            return np.full(1, shift, dtype=np.int32), 0, 0, 0
        form = self._axis_form(index, zp, operand, row, "zero point")
        if form.ndim == 0:
            return np.full(1, int(form) + shift, dtype=np.int32), 0, 0, 0
        arr, bs, rs, cs = self._strided(form, batch, INT32)
        arr += shift
        return arr, bs, rs, cs

    def _record(self, a, b, used, constant, empty=False):
        key = (a.dtype, b.dtype, used, constant, empty)
        label = self._labels.get(key)
        if label is None:
            tail = ("empty" if empty
                    else simd.LEVEL_NAMES[used] + ("_prepacked" if constant else ""))
            label = self._labels[key] = (f"{type(self).__name__.lower()}_{a.dtype.name}_"
                                         f"{b.dtype.name}_{tail}")
        self._usage.record(self.kernel_name, label)


class MatMulInteger(_IntegerProduct):
    """Y (int32) = (A - a_zero_point)(B - b_zero_point), numpy.matmul style."""

    element_types = ("tensor(int8)", "tensor(uint8)", "tensor(int32)")
    B_INDEX, ZA_INDEX, ZB_INDEX = 1, 2, 3

    def _run(self, a, b, a_zero_point=None, b_zero_point=None):
        self._int8(0, a)
        self._int8(1, b)
        if a_zero_point is not None:
            self._zero_point_type(2, a_zero_point, a, 0)
        if b_zero_point is not None:
            self._zero_point_type(3, b_zero_point, b, 1)
        plan = self._plan(a.shape, b.shape)
        out_shape, batch, a2, b2, M, N, K = plan[:7]
        if math.prod(out_shape) == 0 or K == 0:
            # Still check the zero points' shapes.
            self._zero_points(2, a_zero_point, a2, True, batch, 0)
            self._zero_points(3, b_zero_point, b2, False, batch, 0)
            if self._usage.enabled:
                self._record(a, b, 0, False, empty=True)
            return (np.zeros(out_shape, dtype=INT32),)
        y = self._new_output(out_shape, INT32)
        used, constant, _ = self._product(a, a_zero_point, b, b_zero_point, plan,
                                          y.reshape(-1, M, N), simd.state.level)
        if self._usage.enabled:
            self._record(a, b, used, constant)
        return (y,)


class QLinearMatMul(_IntegerProduct):
    """Y = saturate(round((A - a_zp)(B - b_zp) a_scale b_scale / y_scale) + y_zp)."""

    element_types = ("tensor(int8)", "tensor(uint8)", "tensor(float)", "tensor(float16)")
    B_INDEX, ZA_INDEX, ZB_INDEX = 3, 2, 5

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._scale_types = ((np.dtype(np.float32),) if self.opset < 21
                             else (np.dtype(np.float32), np.dtype(np.float16)))

    def _scale(self, index: int, x, first) -> None:
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(index, f"must be a tensor, got {type(x).__name__}"))
        if x.dtype not in self._scale_types:
            names = " or ".join(t.name for t in self._scale_types)
            extra = (" (bfloat16 is not supported: the onnx.reference built-in cannot run it "
                     "either)" if x.dtype.name == "bfloat16" and self.opset >= 21 else "")
            raise TypeError(self._input_error(
                index, f"has element type {x.dtype}, expected {names} (opset {self.opset})"
                + extra))
        if first is not None and x.dtype != first.dtype:
            raise TypeError(self._input_error(
                index, f"has element type {x.dtype} but input 1 (a_scale) has {first.dtype}"))

    def _run(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
             y_zero_point=None):
        self._int8(0, a)
        self._int8(3, b)
        self._scale(1, a_scale, None)
        self._scale(4, b_scale, a_scale)
        self._scale(6, y_scale, a_scale)
        if a_zero_point is not None:
            self._zero_point_type(2, a_zero_point, a, 0)
        if b_zero_point is not None:
            self._zero_point_type(5, b_zero_point, b, 3)
        if y_zero_point is not None:
            self._int8(7, y_zero_point)
        out_dtype = y_zero_point.dtype if y_zero_point is not None else a.dtype
        for index, x in ((6, y_scale), (7, y_zero_point)):
            if x is not None and (x.size != 1 or x.ndim > 1):
                raise ValueError(self._input_error(
                    index, f"has shape {x.shape}: the output's scale and zero point must "
                    "be scalars or one-element vectors (per tensor)"))
        plan = self._plan(a.shape, b.shape)
        out_shape, batch, a2, b2, M, N, K = plan[:7]
        a_s = self._axis_form(1, a_scale, a2, True, "scale")
        b_s = self._axis_form(4, b_scale, b2, False, "scale")
        if math.prod(out_shape) == 0:
            self._zero_points(2, a_zero_point, a2, True, batch, 0)
            self._zero_points(5, b_zero_point, b2, False, batch, 0)
            if self._usage.enabled:
                self._record(a, b, 0, False, empty=True)
            return (np.zeros(out_shape, dtype=out_dtype),)
        # The multiplier exactly as the reference forms it: in the scales'
        # type, then widened (int32 x float32/float16 promotes to float64).
        mult = (a_s * b_s) / y_scale.reshape(())
        mult, m_bs, m_rs, m_cs = self._strided(np.asarray(mult), batch, FLOAT64)
        zp = 0.0 if y_zero_point is None else float(y_zero_point.reshape(()))
        level = simd.state.level
        # The int32 product: a scratch buffer the node keeps (slot 1).
        acc = self._new_output((len(plan[7]), M, N), INT32, slot=1)
        if K == 0:
            self._zero_points(2, a_zero_point, a2, True, batch, 0)
            self._zero_points(5, b_zero_point, b2, False, batch, 0)
            acc.fill(0)
            used, constant, threads = 0, False, 1
        else:
            used, constant, threads = self._product(a, a_zero_point, b, b_zero_point, plan, acc,
                                                    level)
        y = self._new_output(out_shape, out_dtype)
        core.requantize(acc, mult, y, len(plan[7]), M, N, m_bs, m_rs, m_cs, zp,
                        out_dtype == np.int8, level, threads)
        if self._usage.enabled:
            self._record(a, b, used, constant, empty=K == 0)
        return (y,)


KERNELS = {
    "RegisterIntegerMatMulKernels": (MatMulInteger, QLinearMatMul),
}
