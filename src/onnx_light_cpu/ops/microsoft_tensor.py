"""com.microsoft Range, Trilu, Unique, ExpandDims: the contrib tensor
operators of ONNX Runtime's transformers and conversion tools, computed as
ONNX Runtime 1.32's CPU kernels compute them (measured with single-node
sessions; tests/ops/test_microsoft_tensor.py).  They are small and cold, so
NumPy does the work; no input is modified and no output is allocated before
its size has been checked.

- **Range** (float, double, int16, int32, int64): start, limit and the
  optional delta (default 1) are "scalar like", of shape () or (1,), and of
  one type.  The count is ``ceil((limit - start) / delta)``, computed in
  double for float and double (so ``limit - start`` may round or overflow
  to infinity) and exactly for the integers (``limit - start`` never wraps);
  a zero delta, a count that is not finite (NaN or infinite ends or delta)
  or one of 2**63 and more are rejected; a negative count gives an empty
  output.  The values accumulate ``start += delta`` in the element type,
  so float32 rounds at every step (not ``start + i * delta``).
- **Trilu** (float, double, int64; float16 through the Casts ONNX Runtime
  inserts, bit for bit the same): X of rank >= 2, the last two axes a
  matrix; k (int64, shape () or (1,), default 0) any value; ``upper``
  (default 1): any non-zero value keeps the upper triangle
  (``j - i >= k``), 0 the lower one (``j - i <= k``).
- **Unique** (float; float16 through Casts): x 1-D; exactly three outputs:
  the distinct values in order of first occurrence, idx (int64, x's shape:
  each element's position in the first output) and counts (int64).  -0.0
  and 0.0 are one value, written as the one seen first; every NaN is a
  value of its own (count 1).
- **ExpandDims** (every tensor type but bfloat16 and complex, strings
  included): axis int32 of shape () or (1,), in [-(r+1), r] for X of rank
  r; a negative axis counts from the end of the output's shape.  The output
  is a copy.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto

from ._base import ELEMENT_TYPES, Attr, Input, KernelOp

T = TensorProto
MS = "com.microsoft"

_RANGE_TYPES = (T.FLOAT, T.DOUBLE, T.INT16, T.INT32, T.INT64)
_TRILU_TYPES = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT64)
_UNIQUE_TYPES = (T.FLOAT, T.FLOAT16)
_EXPAND_TYPES = (T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8,
                 T.UINT16, T.UINT32, T.UINT64, T.BOOL, T.STRING)
_EXPAND_DTYPES = frozenset(d for d, t in ELEMENT_TYPES.items() if t in _EXPAND_TYPES)
_EXPAND_NAMES = ", ".join("string" if t == T.STRING else np.dtype(d).name
                          for t in _EXPAND_TYPES
                          for d in [onnx.helper.tensor_dtype_to_np_dtype(t)])
# ceil of the count at or above this is not an int64 (ONNX Runtime's bound)
_COUNT_LIMIT = 2.0 ** 63


def _scalar_like(op: KernelOp, index: int, name: str, x: np.ndarray):
    """The one element of ``x``, which must have shape () or (1,)."""
    if x.shape not in ((), (1,)):
        raise ValueError(op._input_error(
            index, f"({name}) must be a scalar or of shape (1,), got shape {x.shape}"))
    return x.reshape(-1)[0]


def _label(op_type: str, dtype: np.dtype) -> str:
    name = "string" if dtype.kind in "OUS" else dtype.name
    return f"{op_type}_{name}_numpy"


class MicrosoftRange(KernelOp):
    op_type = "Range"
    op_domain = MS
    inputs = (Input("start", types=_RANGE_TYPES, ranks=(0, 1)),
              Input("limit", like=0, ranks=(0, 1)),
              Input("delta", like=0, ranks=(0, 1), optional=True))

    def _run(self, start, limit, delta=None):
        dtype = start.dtype
        first = _scalar_like(self, 0, "start", start)
        last = _scalar_like(self, 1, "limit", limit)
        step = dtype.type(1) if delta is None else _scalar_like(self, 2, "delta", delta)
        if step == 0:
            raise ValueError(self._input_error(2, "(delta) must not be zero"))
        if dtype.kind == "f":
            with np.errstate(all="ignore"):
                count = np.ceil((np.float64(last) - np.float64(first)) / np.float64(step))
            if not math.isfinite(count):
                raise ValueError(
                    f"Range: the number of elements ceil((limit - start) / delta) is not "
                    f"finite (start {first}, limit {last}, delta {step})")
        else:  # exact, whatever the width of limit - start
            count = -((int(first) - int(last)) // int(step))
        if count >= _COUNT_LIMIT:
            raise ValueError(
                f"Range: the number of elements ceil((limit - start) / delta) = {count:g} "
                f"exceeds the int64 range (start {first}, limit {last}, delta {step})")
        n = int(count) if count > 0 else 0
        self._check_bytes(f"output 0 of {n} elements", n * dtype.itemsize)
        self._record_path(dtype, lambda: _label("range", dtype))
        y = self._new_output((n,), dtype)
        if n:
            # start, start + delta, ... added one step at a time in the
            # element type, as ONNX Runtime's loop does
            y[0] = first
            y[1:] = step
            with np.errstate(all="ignore"):
                np.add.accumulate(y, out=y)
        return (y,)


class MicrosoftTrilu(KernelOp):
    op_type = "Trilu"
    op_domain = MS
    inputs = (Input("X", types=_TRILU_TYPES),
              Input("k", types=(T.INT64,), ranks=(0, 1), optional=True))
    # ONNX Runtime reads any non-zero value as upper
    attributes = (Attr("upper", "int", 1),)

    def _run(self, x, k=None):
        if x.ndim < 2:
            raise ValueError(self._input_error(
                0, f"must have rank >= 2 (a matrix or a batch of them), got shape {x.shape}"))
        diagonal = 0 if k is None else int(_scalar_like(self, 1, "k", k))
        h, w = x.shape[-2:]
        self._check_bytes(f"a mask of {h} x {w}", h * w)
        self._record_path(x.dtype, lambda: _label("trilu", x.dtype))
        y = self._new_output(x.shape, x.dtype)
        np.copyto(y, x)
        if y.size:
            # clamped so that the mask is the same and nothing overflows
            diagonal = min(max(diagonal, -h), w)
            if self.upper != 0:  # zero where j - i < k
                zero = np.tri(h, w, diagonal - 1, dtype=bool)
            else:  # zero where j - i > k
                zero = ~np.tri(h, w, diagonal, dtype=bool)
            np.copyto(y, 0, where=zero)
        return (y,)


class MicrosoftUnique(KernelOp):
    op_type = "Unique"
    op_domain = MS
    inputs = (Input("x", types=_UNIQUE_TYPES, ranks=(1,)),)

    def _run(self, x):
        outputs = len(self.onnx_node.output)
        if outputs != 3:
            raise ValueError(f"Unique: the node must have 3 outputs (y, idx, counts), "
                             f"got {outputs}")
        n = x.shape[0]
        self._check_bytes(f"the sort of {n} elements", n * (3 * 8 + x.dtype.itemsize))
        self._record_path(x.dtype, lambda: _label("unique", x.dtype))
        idx = self._new_output((n,), np.dtype(np.int64), 1)
        if n == 0:
            return (np.empty(0, x.dtype), idx, np.empty(0, np.int64))
        # Sorted distinct values (a stable sort: the first occurrence of
        # each leads its run), every NaN apart; then reordered by first
        # occurrence.  -0.0 == 0.0, so they share a run.
        _, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                              return_counts=True, equal_nan=False)
        order = np.argsort(first, kind="stable")
        rank = np.empty(order.size, np.int64)
        rank[order] = np.arange(order.size, dtype=np.int64)
        np.take(rank, inverse.reshape(-1), out=idx)
        # the values as first seen (the sign of a zero included)
        return (x[first[order]], idx, counts[order].astype(np.int64, copy=False))


class ExpandDims(KernelOp):
    op_domain = MS
    onnx_types = _EXPAND_TYPES
    inputs = (Input("X"), Input("axis", types=(T.INT32,), ranks=(0, 1)))

    def _run(self, x, axis):
        if x.dtype not in _EXPAND_DTYPES and x.dtype.kind not in "OUS":
            raise TypeError(self._input_error(
                0, f"has element type {x.dtype}, expected one of {_EXPAND_NAMES}"))
        position = int(_scalar_like(self, 1, "axis", axis))
        rank = x.ndim
        if not -(rank + 1) <= position <= rank:
            raise ValueError(self._input_error(
                1, f"(axis) must be in [{-(rank + 1)}, {rank}] for input 0 of rank {rank}, "
                   f"got {position}"))
        if position < 0:
            position += rank + 1
        shape = x.shape[:position] + (1,) + x.shape[position:]
        self._record_path(x.dtype, lambda: _label("expand_dims", x.dtype))
        y = self._new_output(shape, x.dtype)
        np.copyto(y.reshape(x.shape), x)
        return (y,)


KERNELS = {
    "RegisterMicrosoftKernels": (MicrosoftRange, MicrosoftTrilu, MicrosoftUnique, ExpandDims),
}
