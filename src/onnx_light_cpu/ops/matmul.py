"""MatMul and Gemm, on the engine of ``_kernels/gemm`` (see olc_gemm.h).

float32, float16 and bfloat16 run the packed-panel engine (half types are
widened to float32 while packing and rounded once at the end); double and
the integer types a blocked loop; integers wrap around as in NumPy.  A
constant B (an initializer, a folded constant) is packed once per node and
SIMD level.  A strided float B with no batch of its own (a Transpose view of
a weight, a slice) is read through its strides, never copied per run.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels.engines import gemm as core
from ..memory import prepared_empty
from ..threads import product_threads
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp, type_string

T = TensorProto
HALF = (T.FLOAT16, T.BFLOAT16)
PACKED = (T.FLOAT,) + HALF
FLOAT32 = np.dtype(np.float32)
ZERO = np.zeros(1, dtype=np.int64)


def _allowed_types(op_type: str, opset: int) -> tuple[int, ...]:
    """Element types the schema allows at ``opset`` (MatMul and Gemm alike)."""
    types = (T.FLOAT16, T.FLOAT, T.DOUBLE)
    if opset >= 9:
        types += (T.UINT32, T.UINT64, T.INT32, T.INT64)
    if opset >= 13:
        types += (T.BFLOAT16,)
    return types


ALL_TYPES = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.UINT32, T.UINT64, T.INT32, T.INT64, T.BFLOAT16)


def _matrix_strides(b: np.ndarray, K: int, N: int) -> tuple[int, int] | None:
    """Element strides (row, column) of B's K x N matrix (a 1-D B is one
    column), or None where the engine cannot read them (negative, not a
    whole number of elements).  The stride of an axis of length 1 is never
    followed: it is set as in a dense B."""
    item = b.itemsize
    if b.ndim == 1:
        row, column = b.strides[0], item
    else:
        row, column = b.strides[-2:]
    if row < 0 or column < 0 or row % item or column % item:
        return None
    row, column = row // item, column // item
    if N == 1:
        column = 1
    if K == 1:
        row = N * column
    return row, column


class _MatMulEngine(KernelOp):
    """Shared by MatMul and Gemm: the opset's types, B packing and core calls."""

    # Multiply-adds (M N K) one thread must have before a second one helps.
    # Measured on 2 cores, t2 / t1 (medians of alternating blocks): on an
    # Intel Xeon with AVX-512, 64^3 1.06, 128x64x128 1.08, 128^3 0.98,
    # 128x64x512 0.81 (its second thread wakes later than a Zen 5's, where
    # 64^3 already ran 1.40x faster).  Two threads from 2^21 (128^3).
    min_work_per_thread: ClassVar[int] = 1 << 20
    # A product of a few rows (a decode step's) streams B once and waits on
    # memory, not on multiply-adds: threads pay from less work
    # (threads.product_threads).  On 16 cores (an Intel Xeon, idle) MatMul
    # 1x896x4864 took 0.22 ms from 4 threads on (the cap 2^20 set) and 0.09
    # at 16 with 2^17.
    min_decode_work_per_thread: ClassVar[int] = 1 << 17
    decode_rows: ClassVar[int] = 4

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        # the declared types are those of the latest opset
        self._opset_types = frozenset(_allowed_types(onnx_node.op_type, self.opset))
        self._prepacked: dict[int, np.ndarray] = {}  # level -> packed constant B

    def prepared_bytes(self) -> int:
        """Bytes of the constant B packed once for this node (0 when none)."""
        return sum(p.nbytes for p in self._prepacked.values())

    def _product_threads(self, M: int, N: int, K: int, batches: int = 1) -> int:
        """Threads for ``batches`` products of M x K by K x N."""
        return product_threads(M * N * K * batches, self.min_work_per_thread,
                               self.min_decode_work_per_thread, M * batches <= self.decode_rows,
                               self._context.num_threads)

    def _opset_type(self, a: np.ndarray) -> int:
        """The element type of input 0 (and of the others, declared like
        it), which must be one of the node's opset."""
        element_type = ELEMENT_TYPES[a.dtype]
        if element_type not in self._opset_types:
            names = ", ".join(type_string(t) for t in sorted(self._opset_types))
            raise TypeError(self._input_error(
                0, f"has element type {a.dtype}, expected one of {names} (opset {self.opset})"))
        return element_type

    def _record(self, element_type: int, dtype: np.dtype, kind: str, level: int) -> None:
        if not self._usage.enabled:  # before building the closure: a run's cost
            return

        def label():
            used = simd.LEVEL_NAMES[core.level_used(level)]
            middle = f"_{kind}" if kind else ""
            return f"{type(self).__name__.lower()}_{dtype.name}{middle}_{used}"

        self._record_path((element_type, kind, level), label)

    def _packed_b(self, level, element_type, b, rsb, csb, K, N, threads):
        """The constant B packed for the float engine, once per level of code
        (AVX-512 VNNI runs the AVX-512 code: one packing for both)."""
        level = core.level_used(level)
        packed = self._prepacked.get(level)
        if packed is None:
            packed = prepared_empty(core.packed_size(K, N, level), np.float32)
            core.pack_b(b, ZERO, packed, rsb, csb, K, N, element_type, level, threads)
            self._prepacked[level] = packed
        return packed

    def _float_product(self, level, element_type, a, a_offsets, rsa, csa, b, b_offsets, rsb,
                       csb, M, N, K, out, alpha, accumulate, constant, threads) -> str:
        """out (float32, batch x M x N) = alpha A B (+ out); returns the path kind."""
        if constant:
            packed = self._packed_b(level, element_type, b, rsb, csb, K, N, threads)
            core.sgemm(a, a_offsets, packed, ZERO, b, ZERO, out, rsa, csa, rsb, csb, M, N, K,
                       alpha, accumulate, element_type, level, threads)
            return "prepacked"
        if (M == 1 and len(a_offsets) == 1 and element_type == T.FLOAT and csb == 1
                and csa == 1):
            # Decode shape: stream B once instead of packing it.
            row = a.reshape(-1)[a_offsets[0]:a_offsets[0] + K]
            # the core reads B from its first element: a strided B as it is
            b = b if b_offsets[0] == 0 else b.reshape(-1)[b_offsets[0]:]
            core.sgemv(row, b, out, rsb, K, N, alpha, accumulate, level, threads)
            return "gemv"
        core.sgemm(a, a_offsets, None, ZERO, b, b_offsets, out, rsa, csa, rsb, csb, M, N, K,
                   alpha, accumulate, element_type, level, threads)
        return ""


class MatMul(_MatMulEngine):
    """Y = A B with numpy.matmul semantics (1-D operands, batch broadcasting)."""

    inputs = (Input("A", types=ALL_TYPES), Input("B", like=0))

    def _plan(self, a, b):
        """Shapes, offsets and batch layout of one (A, B) signature."""
        element_type = self._opset_type(a)
        a_shape, b_shape = a.shape, b.shape
        if len(a_shape) == 0 or len(b_shape) == 0:
            which = 0 if len(a_shape) == 0 else 1
            raise ValueError(self._input_error(which, "must have at least one dimension"))
        a2 = (1,) + a_shape if len(a_shape) == 1 else a_shape
        b2 = b_shape + (1,) if len(b_shape) == 1 else b_shape
        M, K = a2[-2:]
        K2, N = b2[-2:]
        if K != K2:
            raise ValueError(self._input_error(
                1, f"has shape {b_shape}: its inner dimension {K2} differs from A's {K} "
                f"(A has shape {a_shape})"))
        a_batch, b_batch = a2[:-2], b2[:-2]
        try:
            batch = np.broadcast_shapes(a_batch, b_batch)
        except ValueError:
            raise ValueError(self._input_error(
                1, f"has shape {b_shape}: batch dimensions {b_batch} do not broadcast with "
                f"A's {a_batch} (A has shape {a_shape})")) from None
        out_shape = batch + ((M,) if len(a_shape) > 1 else ()) + ((N,) if len(b_shape) > 1 else ())
        nb = math.prod(b_batch)
        if nb == 1:
            # One B for every batch: fold A's batch into its rows.
            dims = (math.prod(batch) * M, N, K)
            a_off = b_off = ZERO
        else:
            na = math.prod(a_batch)
            ia = np.broadcast_to(np.arange(na, dtype=np.int64).reshape(a_batch), batch).ravel()
            ib = np.broadcast_to(np.arange(nb, dtype=np.int64).reshape(b_batch), batch).ravel()
            dims = (M, N, K)
            a_off = np.ascontiguousarray(ia * (M * K))
            b_off = np.ascontiguousarray(ib * (K * N))
        M, N, K = dims
        empty = M == 0 or N == 0 or len(a_off) == 0 or math.prod(out_shape) == 0 or K == 0
        threads = self._product_threads(M, N, K, len(a_off))
        return (element_type, out_shape, dims, a_off, b_off, nb == 1, empty, threads,
                self._constant_b(element_type, b, nb == 1 and not empty, K, N, threads))

    def _constant_b(self, element_type, b, single_b, K, N, threads):
        """(B, its packed copy, its strides) for a float32 B that is the
        node's constant, packed at planning (the plan's key holds the SIMD
        level and threads); None for any other B."""
        if not (single_b and element_type == T.FLOAT and self._constant_input(1) is b):
            return None
        strides = (N, 1) if b.flags.c_contiguous else _matrix_strides(b, K, N)
        if strides is None:
            return None
        packed = self._packed_b(simd.state.level, element_type, b, *strides, K, N, threads)
        return (b, packed) + strides

    def _execute(self, plan, a, b):
        (element_type, out_shape, (M, N, K), a_off, b_off, single_b, empty, threads,
         constant_b) = plan
        level = simd.state.level
        if constant_b is not None and constant_b[0] is b and a.flags.c_contiguous:
            # The common case of a model's projections, with the least
            # Python between the run and the core (it costs microseconds).
            _, packed, rsb, csb = constant_b
            y = self._new_output(out_shape, FLOAT32)
            core.sgemm(a, ZERO, packed, ZERO, b, ZERO, y, K, 1, rsb, csb, M, N, K, 1.0, False,
                       T.FLOAT, level, threads)
            self._record(element_type, FLOAT32, "prepacked", level)
            self._context.streamed(self, packed, threads)
            return (y,)
        if empty:
            self._record(element_type, a.dtype, "empty", level)
            return (np.zeros(out_shape, dtype=a.dtype),)
        is_float = element_type in PACKED
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        constant = single_b and is_float and self._constant_input(1) is b
        rsb, csb = N, 1
        if not b.flags.c_contiguous:
            # One B (a transposed weight, a slice): the float engine reads it
            # through its strides; a copy would cost a pass over B per run.
            strides = _matrix_strides(b, K, N) if single_b and is_float else None
            if strides is None:
                b = np.ascontiguousarray(b)
            else:
                rsb, csb = strides
        batch = len(a_off)
        if is_float:
            if element_type == T.FLOAT:
                y = self._new_output(out_shape, a.dtype)
                out = y.reshape(batch, M, N)
            else:
                out = np.empty((batch, M, N), dtype=np.float32)
            kind = self._float_product(level, element_type, a, a_off, K, 1, b, b_off, rsb, csb,
                                       M, N, K, out, 1.0, False, constant, threads)
            if element_type != T.FLOAT:
                y = out.reshape(out_shape).astype(a.dtype)
        else:
            y = self._new_output(out_shape, a.dtype)
            core.gemm_generic(a, a_off, b, b_off, y, K, 1, M, N, K, element_type, level, threads)
            kind = "blocked"
        self._record(element_type, a.dtype, kind, level)
        return (y,)


class Gemm(_MatMulEngine):
    """Y = alpha op(A) op(B) + beta C, C broadcast unidirectionally to (M, N)."""

    inputs = (Input("A", types=ALL_TYPES, ranks=(2,)), Input("B", like=0, ranks=(2,)),
              Input("C", like=0, optional=True))
    attributes = (Attr("alpha", "float", 1.0), Attr("beta", "float", 1.0),
                  Attr("transA", "flag", 0), Attr("transB", "flag", 0),
                  Attr("broadcast", "int", 0))

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        # Opset 1-6: C is added with broadcasting only when broadcast=1;
        # otherwise it must have the output's shape exactly.
        self.c_broadcast = bool(self.broadcast) if self.opset < 7 else True

    def _plan(self, a, b, c=None):
        element_type = self._opset_type(a)
        M, K = (a.shape[1], a.shape[0]) if self.transA else a.shape
        K2, N = (b.shape[1], b.shape[0]) if self.transB else b.shape
        if K != K2:
            raise ValueError(self._input_error(
                1, f"has shape {b.shape} (transB={int(self.transB)}): its inner dimension {K2} "
                f"differs from A's {K} (A has shape {a.shape}, transA={int(self.transA)})"))
        if c is not None:
            self._check_c(c, M, N)
        return element_type, M, N, K

    def _execute(self, plan, a, b, c=None):
        element_type, M, N, K = plan
        level = simd.state.level
        with_c = c is not None and self.beta != 0.0
        if element_type in PACKED:
            y, kind = self._run_float(level, element_type, a, b, c if with_c else None, M, N, K)
        else:
            y, kind = self._run_generic(level, element_type, a, b, c, M, N, K)
        self._record(element_type, a.dtype, kind, level)
        return (y,)

    def _check_c(self, c, M, N):
        ok = c.shape == (M, N)
        if not ok and self.c_broadcast and c.ndim <= 2:
            ok = all(d in (1, want) for d, want in zip(c.shape[::-1], (N, M)))
        if not ok:
            how = "broadcastable" if self.c_broadcast else "equal (broadcast=0)"
            raise ValueError(self._input_error(
                2, f"has shape {c.shape}, not {how} to the output shape {(M, N)}"))

    def _operand_strides(self, a, b):
        rsa, csa = (1, a.shape[1]) if self.transA else (a.shape[1], 1)
        rsb, csb = (1, b.shape[1]) if self.transB else (b.shape[1], 1)
        return rsa, csa, rsb, csb

    def _run_float(self, level, element_type, a, b, c, M, N, K):
        constant = self._constant_input(1) is b
        if not a.flags.c_contiguous:
            a = np.ascontiguousarray(a)
        b_strides = None  # B's own (row, column) strides when read in place
        if not b.flags.c_contiguous:
            b_strides = _matrix_strides(b, *b.shape)
            if b_strides is None:
                b = np.ascontiguousarray(b)
        is_f32 = element_type == T.FLOAT
        out = self._new_output((M, N), a.dtype) if is_f32 else np.empty((M, N), np.float32)
        accumulate = False
        if c is not None:
            # beta C first, then the product accumulates onto it: a float32
            # C by the core's loop (numpy.multiply's broadcasting, run once
            # in a model's run, is out of cache by then: 23 µs inside
            # MobileNet-V2)
            if type(c) is np.ndarray and c.dtype == FLOAT32 and c.flags.aligned:
                core.fill_scaled(c, out, self.beta)
            else:
                np.multiply(c.astype(np.float32, copy=False), np.float32(self.beta), out=out)
            accumulate = True
        kind = "empty"
        if K == 0:
            if not accumulate:
                out.fill(0)
        elif M and N:
            rsa, csa, rsb, csb = self._operand_strides(a, b)
            if b_strides is not None:
                rsb, csb = b_strides[::-1] if self.transB else b_strides
            threads = self._product_threads(M, N, K)
            kind = self._float_product(level, element_type, a, ZERO, rsa, csa, b, ZERO, rsb,
                                       csb, M, N, K, out, self.alpha, accumulate, constant,
                                       threads)
        self._epilogue(out)
        return (out if is_f32 else out.astype(a.dtype)), kind

    def _epilogue(self, out):
        """In-place work on the float32 result before a half type is
        rounded: none for Gemm (FusedGemm applies its activation)."""

    def _run_generic(self, level, element_type, a, b, c, M, N, K):
        a = np.ascontiguousarray(a)
        rsa, csa = (1, M) if self.transA else (K, 1)
        b = np.ascontiguousarray(b.T if self.transB else b)  # the loop wants B row-major
        y = np.empty((M, N), dtype=a.dtype)
        kind = "empty"
        if K == 0:
            y.fill(0)
        elif M and N:
            threads = self._product_threads(M, N, K)
            core.gemm_generic(a, ZERO, b, ZERO, y, rsa, csa, M, N, K, element_type, level,
                              threads)
            kind = "blocked"
        with_c = c is not None and self.beta != 0.0
        if a.dtype.kind in "iu":
            if self.alpha == 1.0 and (not with_c or self.beta == 1.0):
                if with_c:
                    y += c  # integers: exact, wrapping
                return y, kind
            # Non-unit factors: as the schema's float arithmetic (and the
            # built-in) does it, in float64, then back to the integer type.
            r = y * self.alpha
            if with_c:
                r = r + c * self.beta
            return r.astype(a.dtype), kind
        if self.alpha != 1.0:
            y *= self.alpha
        if with_c:
            y += c * self.beta if self.beta != 1.0 else c
        return y, kind


KERNELS = {
    "RegisterMatMulKernel": (MatMul,),
    "RegisterGemmKernel": (Gemm,),
}
