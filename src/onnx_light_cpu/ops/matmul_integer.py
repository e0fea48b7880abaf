"""MatMulInteger and QLinearMatMul, on the 8-bit engine of ``_kernels/gemm_int8``.

Both compute the exact int32 product (A - a_zero_point)(B - b_zero_point)
with numpy.matmul semantics (1-D operands, batch broadcasting); zero points
are folded in through row and column sums (see olc_gemm_int8.h).
QLinearMatMul then requantises as the reference does: the int32 product
times float64(a_scale * b_scale / y_scale) (that quotient computed in the
scales' own type, by NumPy), plus y_zero_point, rounded half to even and
saturated.  A constant B (an initializer) is packed once per engine level,
constant zero points shifted once per node.

Zero points and scales are per tensor (one element), per row of A (shape
[M], or [..., M, 1] with A's batch dimensions or ones) or per column of B
([N] or [..., 1, N]), as the schemas describe them.  The float8 types and
bfloat16 scales are rejected: the onnx.reference built-in cannot run them
either (its requantisation uses np.iinfo and int32 x bfloat16 promotion).

The shapes, batch offsets, forms of the zero points and scales, thread
count and engine level of an input signature make the plan (``_plan``);
``_execute`` reads the values.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels.engines import gemm_int8 as core
from ._base import Input, KernelOp
from ._contract import InputChecks

T = TensorProto
INT8_TYPES = (T.UINT8, T.INT8)
INT32 = np.dtype(np.int32)
FLOAT64 = np.dtype(np.float64)


class _Product(NamedTuple):
    """The shape-only part of (A - za)(B - zb)."""

    out_shape: tuple
    batch: tuple   # the output's batch dimensions
    a2: tuple      # A's and B's shapes as matrices (1-D operands widened)
    b2: tuple
    M: int
    N: int
    K: int
    a_off: np.ndarray       # A offset per output batch
    b_index: np.ndarray     # B matrix per output batch
    b_pack_off: np.ndarray  # offsets of B's matrices
    za_form: tuple | None   # the zero points' shapes against A and B (None: absent)
    zb_form: tuple | None
    used: int     # the engine's level
    threads: int


class _IntegerProduct(KernelOp):
    """Shared by both operators: shapes, zero points, B packing, the core call."""

    # Multiply-adds (batch M N K) one thread must have before a second one
    # helps.  Measured on 2 cores (VNNI, best of 300 core calls, t1/t2,
    # packing of A included): 32^3 0.91x, 48^3 1.05x, 64^3 1.21x, 96^3
    # 1.44x, 128^3 1.64x.  Two threads from 64^3 (2 x 2^17).
    min_work_per_thread: ClassVar[int] = 1 << 17
    # AMX tiles (from 16 rows, where the CPU has them) do several times the
    # multiply-adds of VNNI a microsecond, so waking a second thread pays
    # only from far more work.  Measured on a 2-core Intel Xeon (float
    # output, 50 us between calls, t2 / t1 over four runs): 16x768x768 2.43,
    # 64x768x768 1.81, 128x768x768 (75M) 1.17-1.20, 256x768x768 and
    # 128x768x1536 (151M) 0.71-1.12, 384x768x768 0.91-0.97, 128x768x3072
    # 0.65-0.71.  Two threads from 2^27 (134M).
    min_amx_work_per_thread: ClassVar[int] = 1 << 26
    since_version: ClassVar[int] = 10
    B_INDEX: ClassVar[int]  # inputs: B and the two zero points
    ZA_INDEX: ClassVar[int]
    ZB_INDEX: ClassVar[int]

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._prepacked: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # level -> (B, sums)

    def prepared_bytes(self) -> int:
        """Bytes of the constant B packed once for this node (0 when none)."""
        return sum(p.nbytes + s.nbytes for p, s in self._prepacked.values())

    # ---- plan ----

    def _product_plan(self, a, b, za, zb) -> _Product:
        """Shapes, batch offsets and B matrices of (A, B); the zero points'
        shapes checked."""
        a_shape, b_shape, b_at = a.shape, b.shape, self.B_INDEX
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
        za_form = None if za is None else self._axis_form(self.ZA_INDEX, za.shape, a2, True,
                                                          "zero point")
        zb_form = None if zb is None else self._axis_form(self.ZB_INDEX, zb.shape, b2, False,
                                                          "zero point")
        return _Product(
            out_shape, batch, a2, b2, M, N, K, np.ascontiguousarray(ia * (M * K)),
            np.ascontiguousarray(ib), np.arange(nb, dtype=np.int64) * (K * N), za_form, zb_form,
            core.level_used(simd.state.level), self._product_threads(M, M * N * K * len(ia)))

    def _product_threads(self, M: int, work: int) -> int:
        """Threads for ``work`` multiply-adds in products of M rows."""
        amx = core.uses_amx(simd.state.level, M)
        return self._num_threads(work, self.min_amx_work_per_thread if amx
                                 else self.min_work_per_thread)

    def _axis_form(self, index: int, shape: tuple, operand: tuple, row: bool,
                   what: str) -> tuple:
        """The shape a zero point or scale of ``shape`` takes to broadcast
        against batch + (M, 1) (row=True, input A) or batch + (1, N) (input B)."""
        size, ndim = math.prod(shape), len(shape)
        if size == 1 and ndim <= max(1, len(operand)):
            return ()  # (a higher rank would broadcast the output's)
        length = operand[-2] if row else operand[-1]
        if ndim == 1 and shape[0] == length:
            return (length, 1) if row else (1, length)
        if 2 <= ndim <= len(operand):
            # Batch dimensions align right, as in NumPy broadcasting.
            want = (length, 1) if row else (1, length)
            batch = operand[len(operand) - ndim:-2]
            if (shape[-2:] in (want, (1, 1))
                    and all(d in (1, o) for d, o in zip(shape[:-2], batch))):
                return shape
        form = "[M] or [..., M, 1]" if row else "[N] or [..., 1, N]"
        raise ValueError(self._input_error(
            index, f"has shape {shape}: a {what} must have one element or the shape "
            f"{form} (per {'row' if row else 'column'}) for an operand of shape {operand}"))

    # ---- execute ----

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

    @classmethod
    def _zero_points(cls, zp, form, batch, shift):
        """The shifted zero points as the core reads them: (int32 array,
        batch, row, column strides)."""
        if zp is None:
            return np.full(1, shift, dtype=np.int32), 0, 0, 0
        if not form:
            return np.full(1, int(zp.reshape(())) + shift, dtype=np.int32), 0, 0, 0
        arr, bs, rs, cs = cls._strided(zp.reshape(form), batch, INT32)
        arr += shift
        return arr, bs, rs, cs

    def _shifted(self, index, zp, form, batch, shift):
        """``_zero_points`` of input ``index``, made once while the input is
        an initializer or absent (``_prepared_input``: an absent input
        reads as the constant None; a few microseconds a run otherwise)."""
        return self._prepared_input(("zero point", index, form, batch, shift), index, zp,
                                    lambda: self._zero_points(zp, form, batch, shift))

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

    def _product(self, plan: _Product, a, za, b, zb, out) -> bool:
        """out (int32, batch x M x N) = (A - za)(B - zb); returns whether B
        was the constant (packed once)."""
        args, constant = self._gemm_args(plan, a, za, b, zb, out)
        core.gemm(*args)
        return constant

    def _gemm_args(self, plan: _Product, a, za, b, zb, out) -> tuple[tuple, bool]:
        """(the arguments of the engine's ``gemm`` for out = (A - za)(B -
        zb), whether B was the constant): B packed (once when constant),
        the zero points shifted."""
        a_signed = a.dtype == np.int8
        b_signed = b.dtype == np.int8
        constant = self._constant_input(self.B_INDEX) is b
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        if not b.flags.c_contiguous:
            b = np.ascontiguousarray(b)
        packed, sums = self._packed(plan.used, b.view(np.uint8), b_signed, plan.b_pack_off,
                                    plan.K, plan.N, plan.threads, constant)
        # Shifted zero points (see olc_gemm_int8.h): signed A +128, unsigned B -128.
        za_s, za_bs, za_rs, _ = self._shifted(self.ZA_INDEX, za, plan.za_form, plan.batch,
                                              128 if a_signed else 0)
        zb_s, zb_bs, _, zb_cs = self._shifted(self.ZB_INDEX, zb, plan.zb_form, plan.batch,
                                              0 if b_signed else -128)
        return (a.view(np.uint8), plan.a_off, packed, sums, plan.b_index, za_s, zb_s, out,
                za_bs, za_rs, zb_bs, zb_cs, plan.M, plan.N, plan.K, a_signed, plan.used,
                plan.threads), constant

    def _record(self, a, b, used, constant, empty=False):
        if not self._usage.enabled:  # before building the key: a run's cost
            return
        self._record_path(
            (a.dtype, b.dtype, used, constant, empty),
            lambda: (f"{type(self).__name__.lower()}_{a.dtype.name}_{b.dtype.name}_"
                     + ("empty" if empty
                        else simd.LEVEL_NAMES[used] + ("_prepacked" if constant else ""))))


class MatMulInteger(_IntegerProduct):
    """Y (int32) = (A - a_zero_point)(B - b_zero_point), numpy.matmul style."""

    element_types = ("tensor(int8)", "tensor(uint8)", "tensor(int32)")
    inputs = (Input("A", types=INT8_TYPES), Input("B", types=INT8_TYPES),
              Input("a_zero_point", like=0, optional=True),
              Input("b_zero_point", like=1, optional=True))
    B_INDEX, ZA_INDEX, ZB_INDEX = 1, 2, 3

    def _plan(self, a, b, a_zero_point=None, b_zero_point=None):
        plan = self._product_plan(a, b, a_zero_point, b_zero_point)
        return plan, math.prod(plan.out_shape) == 0 or plan.K == 0

    def _execute(self, plan, a, b, a_zero_point=None, b_zero_point=None):
        product, empty = plan
        if empty:
            self._record(a, b, 0, False, empty=True)
            return (np.zeros(product.out_shape, dtype=INT32),)
        y = self._new_output(product.out_shape, INT32)
        constant = self._product(product, a, a_zero_point, b, b_zero_point,
                                 y.reshape(-1, product.M, product.N))
        self._record(a, b, product.used, constant)
        return (y,)


class _Requant(NamedTuple):
    """The shape-only part of QLinearMatMul beyond the product."""

    product: _Product
    a_scale_form: tuple
    b_scale_form: tuple
    out_dtype: np.dtype


class QLinearMatMul(_IntegerProduct):
    """Y = saturate(round((A - a_zp)(B - b_zp) a_scale b_scale / y_scale) + y_zp)."""

    element_types = ("tensor(int8)", "tensor(uint8)", "tensor(float)", "tensor(float16)")
    inputs = (Input("a", types=INT8_TYPES), Input("a_scale", types=(T.FLOAT, T.FLOAT16)),
              Input("a_zero_point", like=0), Input("b", types=INT8_TYPES),
              Input("b_scale", like=1), Input("b_zero_point", like=3), Input("y_scale", like=1),
              Input("y_zero_point", types=INT8_TYPES))
    # Before opset 21 the scales are float32 only.
    _inputs_before_21 = InputChecks(
        inputs[:1] + (Input("a_scale", types=(T.FLOAT,)),) + inputs[2:])
    B_INDEX, ZA_INDEX, ZB_INDEX = 3, 2, 5

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self.opset < 21:
            self._input_checks = self._inputs_before_21

    def _plan(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
              y_zero_point=None):
        for index, x in ((6, y_scale), (7, y_zero_point)):
            if x is not None and (x.size != 1 or x.ndim > 1):
                raise ValueError(self._input_error(
                    index, f"has shape {x.shape}: the output's scale and zero point must "
                    "be scalars or one-element vectors (per tensor)"))
        product = self._product_plan(a, b, a_zero_point, b_zero_point)
        return _Requant(
            product, self._axis_form(1, a_scale.shape, product.a2, True, "scale"),
            self._axis_form(4, b_scale.shape, product.b2, False, "scale"),
            y_zero_point.dtype if y_zero_point is not None else a.dtype)

    def _execute(self, plan, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
                 y_zero_point=None):
        product, out_dtype = plan.product, plan.out_dtype
        M, N, K = product.M, product.N, product.K
        if math.prod(product.out_shape) == 0:
            self._record(a, b, 0, False, empty=True)
            return (np.zeros(product.out_shape, dtype=out_dtype),)
        # The multiplier exactly as the reference forms it: in the scales'
        # type, then widened (int32 x float32/float16 promotes to float64).
        mult = (a_scale.reshape(plan.a_scale_form) * b_scale.reshape(plan.b_scale_form)
                ) / y_scale.reshape(())
        mult, m_bs, m_rs, m_cs = self._strided(np.asarray(mult), product.batch, FLOAT64)
        zp = 0.0 if y_zero_point is None else float(y_zero_point.reshape(()))
        # The int32 product: a scratch buffer the node keeps (slot 1).
        acc = self._new_output((len(product.a_off), M, N), INT32, slot=1)
        if K == 0:
            acc.fill(0)
            used, constant, threads = 0, False, 1
        else:
            used, threads = product.used, product.threads
            constant = self._product(product, a, a_zero_point, b, b_zero_point, acc)
        y = self._new_output(product.out_shape, out_dtype)
        core.requantize(acc, mult, y, len(product.a_off), M, N, m_bs, m_rs, m_cs, zp,
                        out_dtype == np.int8, simd.state.level, threads)
        self._record(a, b, used, constant, empty=K == 0)
        return (y,)


KERNELS = {
    "RegisterIntegerMatMulKernels": (MatMulInteger, QLinearMatMul),
}
