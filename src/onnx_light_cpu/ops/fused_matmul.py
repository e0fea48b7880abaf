"""com.microsoft FusedMatMul and FusedGemm: MatMul and Gemm with the
transposes, scale and activation that ONNX Runtime's optimizer folds into
them, on the float GEMM engine of ``ops/matmul.py`` (computed as ONNX
Runtime 1.32's CPU kernels do; tests/ops/test_fused_matmul.py).

- **FusedMatMul**: ``Y = alpha op(A) op(B)`` with numpy.matmul semantics
  (1-D operands, broadcast batch dimensions).  ``transBatchA`` reads A of
  shape (d0, d1, ..., d(r-2), d(r-1)) as (d1, ..., d(r-2), d0, d(r-1)) (its
  first axis moves next to the last one), then ``transA`` swaps the last
  two axes; likewise for B.  Every transpose is a strided read of the
  input, never a copy.  As in ONNX Runtime, transBatchA/transBatchB need
  two inputs of the same rank >= 3, and transA/transB are ignored for a
  1-D operand.  Where ONNX Runtime departs from its schema we follow it:
  with transA and a 1-D B it reads A of shape (..., K, M) as (..., M, K)
  in stored order (a reshape, not the transpose the schema describes).
  float32, float16, double (ONNX Runtime's CPU types) and bfloat16 (this
  package's extension); half types are summed in float32 and rounded once.
- **FusedGemm**: ``Y = act(alpha op(A) op(B) + beta C)``, Gemm's contract
  (2-D A and B, C broadcast to (M, N)) with ``activation`` one of Relu,
  Tanh, Sigmoid, LeakyRelu (activation_alpha), HardSigmoid (alpha, beta),
  Elu (alpha), Selu (alpha, gamma), ThresholdedRelu (alpha), Softplus,
  Softsign, ScaledTanh (alpha tanh(beta x)), ParametricSoftplus (alpha
  log(1 + exp(beta x))) and Celu (alpha).  ONNX Runtime requires the
  activation and the parameters its function reads (there are no defaults;
  the spec leaves them implicit): so do we, naming the missing attribute.
  A ``beta`` of 0 ignores C (a NaN in it too), as ONNX Runtime's Gemm.
  The activation runs on the float32 product before half types are
  rounded, as in ONNX Runtime (which runs float16 through Casts to its
  float kernel).  float32 and float16; bfloat16 is this package's
  extension; ONNX Runtime has no double or integer FusedGemm on CPU,
  neither do we.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from .. import simd
from .._kernels import microsoft_activation as act_core
from .._kernels.engines import gemm as core
from ._base import Attr, Input
from .matmul import PACKED, ZERO, Gemm, _MatMulEngine

T = TensorProto
MS = "com.microsoft"
FLOATS = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.BFLOAT16)


def _read_order(rank: int, batch_trans: bool, trans: bool) -> list[int]:
    """The axes of an input in the order FusedMatMul reads them."""
    order = list(range(rank))
    if batch_trans:
        order = order[1:-1] + [0, rank - 1]
    if trans and rank >= 2:
        order[-1], order[-2] = order[-2], order[-1]
    return order


def _operand(shape, strides, order, batch) -> tuple[int, int, np.ndarray] | None:
    """(row stride, column stride, element offset of each matrix over the
    broadcast ``batch``) of an input of ``shape`` and element ``strides``
    read in ``order`` as (..., rows, columns); None when a stride is
    negative (the engine cannot read it)."""
    shape = [shape[i] for i in order]
    strides = [strides[i] for i in order]
    if any(s < 0 for s in strides):
        return None
    rows, cols = shape[-2:]
    rs, cs = strides[-2:]
    # The stride of an axis of length 1 is never followed: set as in a dense
    # matrix, so that the engine's unit-stride paths apply.
    if cols == 1:
        cs = 1
    if rows == 1:
        rs = cols * cs
    offsets = np.zeros((1,) * len(batch), dtype=np.int64)
    lead = len(batch) - (len(shape) - 2)
    for axis, (size, stride) in enumerate(zip(shape[:-2], strides[:-2])):
        if size != 1 and stride:
            span = [1] * len(batch)
            span[lead + axis] = size
            offsets = offsets + (np.arange(size, dtype=np.int64) * stride).reshape(span)
    offsets = np.ascontiguousarray(np.broadcast_to(offsets, batch).reshape(-1))
    return rs, cs, offsets


def _element_strides(x: np.ndarray):
    """x's strides in elements, or None where one is not a whole element."""
    item = x.itemsize
    if any(s % item for s in x.strides):
        return None
    return tuple(s // item for s in x.strides)


def _dense_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


class FusedMatMul(_MatMulEngine):
    """Y = alpha op(A) op(B), the transposes read through strides."""

    op_domain = MS
    inputs = (Input("A", types=FLOATS), Input("B", like=0))
    attributes = (Attr("alpha", "float", 1.0), Attr("transA", "flag", 0),
                  Attr("transB", "flag", 0), Attr("transBatchA", "flag", 0),
                  Attr("transBatchB", "flag", 0))
    strided_inputs = frozenset({0, 1})

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._opset_types = frozenset(FLOATS)  # not MatMul's opset table

    def _plan(self, a, b):
        """Shapes, read orders and the matrix layout of dense inputs."""
        element_type = self._opset_type(a)
        if a.ndim == 0 or b.ndim == 0:
            which = 0 if a.ndim == 0 else 1
            raise ValueError(self._input_error(which, "must have at least one dimension"))
        if (self.transBatchA or self.transBatchB) and not (a.ndim == b.ndim and a.ndim >= 3):
            raise ValueError(self._input_error(
                1, f"has shape {b.shape}: with transBatchA or transBatchB both inputs must have "
                   f"the same rank >= 3 (A has shape {a.shape})"))
        a_shape = a.shape if a.ndim > 1 else (1,) + a.shape
        b_shape = b.shape if b.ndim > 1 else b.shape + (1,)
        # ONNX Runtime 1.32 with transA and a 1-D B swaps A's last two
        # dimensions but reads its elements in their stored order (a
        # reshape, not a transpose): so do we (dense A, see _execute).
        a_reshaped = bool(self.transA and a.ndim > 1 and b.ndim == 1)
        if a_reshaped:
            a_shape = a_shape[:-2] + a_shape[-2:][::-1]
        a_order = _read_order(len(a_shape), self.transBatchA,
                              self.transA and a.ndim > 1 and not a_reshaped)
        b_order = _read_order(len(b_shape), self.transBatchB, self.transB and b.ndim > 1)
        a_read = tuple(a_shape[i] for i in a_order)
        b_read = tuple(b_shape[i] for i in b_order)
        M, K = a_read[-2:]
        K2, N = b_read[-2:]
        if K != K2:
            raise ValueError(self._input_error(
                1, f"has shape {b.shape}: its inner dimension {K2} differs from A's {K} "
                   f"(A has shape {a.shape}; transA={int(self.transA)}, "
                   f"transB={int(self.transB)}, transBatchA={int(self.transBatchA)}, "
                   f"transBatchB={int(self.transBatchB)})"))
        try:
            batch = np.broadcast_shapes(a_read[:-2], b_read[:-2])
        except ValueError:
            raise ValueError(self._input_error(
                1, f"has shape {b.shape}: its batch dimensions {b_read[:-2]} (as read) do not "
                   f"broadcast with A's {a_read[:-2]} (A has shape {a.shape})")) from None
        out_shape = batch + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ())
        layout = (a_shape, a_order, b_shape, b_order, batch)
        empty = math.prod(out_shape) == 0 or K == 0
        dense = None
        if not empty:
            # two int64 offsets a matrix, and their temporaries
            self._check_bytes("the offsets of the batch's matrices", 32 * math.prod(batch))
            dense = self._layout(layout, M, _dense_strides(a_shape), _dense_strides(b_shape))
        threads = self._product_threads(M, N, K, math.prod(batch))
        return element_type, out_shape, (M, N, K), layout, dense, empty, a_reshaped, threads

    @staticmethod
    def _layout(layout, M, a_strides, b_strides):
        """What the engine reads for inputs of these element strides:
        (rsa, csa, A offsets, rsb, csb, B offsets, rows per matrix), or None
        where a stride is negative.  One B for every batch with A's matrices
        one after the other (a dense A, no transpose): A's batch folds into
        its rows, so B is packed once (and a constant B once per node)."""
        a_shape, a_order, b_shape, b_order, batch = layout
        a_op = _operand(a_shape, a_strides, a_order, batch)
        b_op = _operand(b_shape, b_strides, b_order, batch)
        if a_op is None or b_op is None:
            return None
        (rsa, csa, a_off), (rsb, csb, b_off) = a_op, b_op
        if len(a_off) > 1 and not b_off.any() and np.array_equal(
                a_off, np.arange(len(a_off), dtype=np.int64) * (M * rsa)):
            return rsa, csa, ZERO, rsb, csb, ZERO, M * len(a_off)
        return rsa, csa, a_off, rsb, csb, b_off, M

    def _dense(self, index: int, x: np.ndarray) -> np.ndarray:
        """x as a dense array, after checking that the copy fits."""
        if not x.flags.c_contiguous:
            self._check_bytes(f"{self._input_label(index)} as a dense copy", x.size * x.itemsize)
        return np.ascontiguousarray(x)

    def _input_layout(self, layout, dense, M, a, b):
        """(a, b, engine layout) for these arrays: the plan's for dense
        inputs, their own strides otherwise, a dense copy where the engine
        cannot read them (negative or partial-element strides)."""
        if a.flags.c_contiguous and b.flags.c_contiguous:
            return a, b, dense
        a_shape, _, b_shape, _, _ = layout
        a_strides, b_strides = _element_strides(a), _element_strides(b)
        if a_strides is None:
            a = self._dense(0, a)
        if b_strides is None:
            b = self._dense(1, b)
        if a.flags.c_contiguous:  # also a 1-D A, and A reshaped (see _plan)
            a_strides = _dense_strides(a_shape)
        elif a.ndim == 1:  # read as one row
            a_strides = (0,) + a_strides
        if b.flags.c_contiguous:
            b_strides = _dense_strides(b_shape)
        elif b.ndim == 1:  # read as one column
            b_strides = b_strides + (0,)
        engine = self._layout(layout, M, a_strides, b_strides)
        if engine is None:
            return self._dense(0, a), self._dense(1, b), dense
        return a, b, engine

    def _execute(self, plan, a, b):
        element_type, out_shape, (M, N, K), layout, dense, empty, a_reshaped, threads = plan
        level = simd.state.level
        if a_reshaped:
            a = self._dense(0, a)
        if empty:  # no output element, or sums of no products
            self._record(element_type, a.dtype, "empty", level)
            y = self._new_output(out_shape, a.dtype)
            y.fill(0)
            return (y,)
        if element_type not in PACKED:
            y = self._double_product(level, element_type, a, b, layout, out_shape, M, N, K,
                                     threads)
            self._record(element_type, a.dtype, "blocked", level)
            return (y,)
        a, b, (rsa, csa, a_off, rsb, csb, b_off, rows) = self._input_layout(
            layout, dense, M, a, b)
        batch = len(a_off)
        if rows == 1 and batch == 1 and not a.flags.c_contiguous:
            # the engine's one-row path reads A's row as a dense vector
            a, b, (rsa, csa, a_off, rsb, csb, b_off, rows) = self._input_layout(
                layout, dense, M, self._dense(0, a), b)
        if element_type == T.FLOAT:
            y = self._new_output(out_shape, a.dtype)
            out = y.reshape(batch, rows, N)
        else:
            self._check_bytes("the float32 product", batch * rows * N * 4)
            out = np.empty((batch, rows, N), dtype=np.float32)
        constant = batch == 1 and self._constant_input(1) is b
        kind = self._float_product(level, element_type, a, a_off, rsa, csa, b, b_off, rsb, csb,
                                   rows, N, K, out, self.alpha, False, constant, threads)
        if element_type != T.FLOAT:
            y = out.reshape(out_shape).astype(a.dtype)
        self._record(element_type, a.dtype, kind, level)
        return (y,)

    def _double_product(self, level, element_type, a, b, layout, out_shape, M, N, K, threads):
        """double: the engine's blocked loop wants each B row-major, so B is
        made dense as read; A is read through its dense strides."""
        a_shape, a_order, b_shape, b_order, batch = layout
        a = self._dense(0, a)
        b_read = b.reshape(b_shape).transpose(b_order)
        self._check_bytes(f"{self._input_label(1)} as a dense copy", b_read.size * b.itemsize)
        b_dense = np.ascontiguousarray(b_read)
        rsa, csa, a_off = _operand(a_shape, _dense_strides(a_shape), a_order, batch)
        _, _, b_off = _operand(b_dense.shape, _dense_strides(b_dense.shape),
                               list(range(b_dense.ndim)), batch)
        y = self._new_output(out_shape, a.dtype)
        core.gemm_generic(a, a_off, b_dense, b_off, y, rsa, csa, M, N, K, element_type, level,
                          threads)
        if self.alpha != 1.0:
            y *= self.alpha
        return y


#: The activation_* attributes each FusedGemm activation reads (all required
#: by ONNX Runtime's kernel).
ACTIVATION_PARAMETERS = {
    "Relu": (), "Tanh": (), "Sigmoid": (), "Softplus": (), "Softsign": (),
    "LeakyRelu": ("alpha",), "Elu": ("alpha",), "ThresholdedRelu": ("alpha",),
    "Celu": ("alpha",), "HardSigmoid": ("alpha", "beta"), "Selu": ("alpha", "gamma"),
    "ScaledTanh": ("alpha", "beta"), "ParametricSoftplus": ("alpha", "beta"),
}


class FusedGemm(Gemm):
    """Y = act(alpha op(A) op(B) + beta C), the activation applied to the
    float32 product in place."""

    op_domain = MS
    inputs = (Input("A", types=(T.FLOAT, T.FLOAT16, T.BFLOAT16), ranks=(2,)),
              Input("B", like=0, ranks=(2,)), Input("C", like=0, optional=True))
    attributes = Gemm.attributes + (
        Attr("activation", "string", None, allowed=tuple(ACTIVATION_PARAMETERS)),
        Attr("activation_alpha", "float", None), Attr("activation_beta", "float", None),
        Attr("activation_gamma", "float", None))

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._opset_types = frozenset((T.FLOAT, T.FLOAT16, T.BFLOAT16))
        self.c_broadcast = True  # Gemm-7 and later: C broadcasts
        if self.activation not in ACTIVATION_PARAMETERS:  # missing (invalid: kept already)
            self._reject_attribute("attribute activation is required (one of "
                                   f"{', '.join(ACTIVATION_PARAMETERS)})")
            return
        for name in ACTIVATION_PARAMETERS[self.activation]:
            if getattr(self, f"activation_{name}") is None:
                self._reject_attribute(f"attribute activation_{name} is required by "
                                       f"activation {self.activation}")
        self._act = act_core.ACTIVATIONS[self.activation]
        self._act_params = tuple(getattr(self, f"activation_{name}") or 0.0
                                 for name in ("alpha", "beta", "gamma"))

    def _epilogue(self, out):
        """The activation, in place on Gemm's float32 product (before a half
        type is rounded)."""
        if out.size:
            threads = self._num_threads(out.size, 1 << 14)
            act_core.fused_activation(out, self._act, *self._act_params, simd.state.level,
                                      threads)


KERNELS = {
    "RegisterMicrosoftKernels": (FusedMatMul, FusedGemm),
}
