"""TopK, GatherElements, ScatterElements: selection and element indexing.

NumPy does the work.  TopK orders by value, then by the lower index among
equal values (NaN counts as the largest value, as in the built-in).  A
long row is cut first at a value no better than its k-th (guessed from a
sample, checked, else found by ``np.partition``) and only the elements
past the cut are ranked, by a stable sort; short rows pack (value rank,
index) into one uint64 key where both fit, so that a partial selection
picks exactly the elements a stable full sort would.

GatherElements and ScatterElements: indices may be negative (counted from
the end of the axis); an index outside the axis is a ValueError naming the
input; indices shorter than data on another axis address its leading
block, as in ONNX Runtime.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import TensorProto

from ._base import Attr, Input, KernelOp
from .tensor import MOVABLE

T = TensorProto
FLOATS = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16)
NUMERIC = (T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64) + FLOATS
INDICES = (T.INT32, T.INT64)


def _axis(op: KernelOp, axis: int, rank: int, index: int = 0) -> int:
    if not -rank <= axis < rank:
        raise ValueError(op._input_error(
            index, f"of rank {rank} has no axis {axis} (expected [{-rank}, {rank - 1}])"))
    return axis + rank if axis < 0 else axis


def _normalized_indices(op: KernelOp, index: int, indices: np.ndarray, dim: int) -> np.ndarray:
    """``indices`` in [0, dim) (int32 or int64; the input itself when none is
    negative), negative ones counted from the end; ValueError naming input
    ``index`` for any outside [-dim, dim)."""
    if indices.size == 0:
        return indices.astype(np.int64)
    low, high = int(indices.min()), int(indices.max())
    if low < -dim or high >= dim:
        bad = low if low < -dim else high
        raise ValueError(op._input_error(
            index, f"holds index {bad}, outside [{-dim}, {dim - 1}] for an axis of {dim}"))
    if low >= 0:
        return indices  # read only
    out = indices.astype(np.int64)  # a copy: never modify the input
    out[out < 0] += dim
    return out


def _check_shapes(op: KernelOp, data: np.ndarray, indices: np.ndarray, axis: int) -> None:
    if indices.ndim != data.ndim:
        raise ValueError(op._input_error(
            1, f"has rank {indices.ndim} (shape {indices.shape}), expected the rank of input 0 "
               f"({data.ndim})"))
    for d, (n, m) in enumerate(zip(indices.shape, data.shape)):
        if d != axis and n > m:
            raise ValueError(op._input_error(
                1, f"has shape {indices.shape}: dimension {d} exceeds input 0's {data.shape}"))


def _leading(data: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """A view of ``data`` cut to ``shape`` on every axis but ``axis``."""
    return data[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(shape))]


def _flat_positions(shape: tuple[int, ...], idx: np.ndarray, axis: int) -> np.ndarray:
    """Positions in a C-contiguous array of ``shape`` of the elements
    ``idx`` (normalized) addresses along ``axis``, the other coordinates
    those of each index."""
    steps = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    where = idx.astype(np.int64)  # a new array, wide enough for any position
    where *= steps[axis]
    for d, n in enumerate(idx.shape):
        if d != axis and n > 1:
            where += (np.arange(n, dtype=np.int64) * steps[d]).reshape(
                (n,) + (1,) * (idx.ndim - d - 1))
    return where


# ------------------------------------------------------------------- TopK

def _order_key(x: np.ndarray, largest: bool) -> np.ndarray:
    """Integers in the order TopK ranks ``x`` (smallest key first): value
    descending when ``largest``, ascending otherwise; NaN the largest value,
    -0 equal to +0."""
    if x.dtype.kind == "f" or x.dtype.itemsize == 2 and x.dtype.kind == "V":
        # float bits -> signed integers in the float order: a negative
        # value's magnitude bits are flipped (branch-free: np.where is slow
        # on random signs)
        signed = np.dtype(f"i{x.dtype.itemsize}")
        bits = x.view(signed)
        mask = signed.type(np.iinfo(signed).max)
        key = bits ^ ((bits >> (8 * x.dtype.itemsize - 1)) & mask)
        key[key == -1] = 0  # -0 (bits 0x80..0) next to +0
        nan = np.isnan(x)
        if nan.any():
            key[nan] = mask  # above +inf whatever the payload
    else:
        key = x
    return ~key if largest else key  # ~ reverses the order of any integer type


# From this row length on (and for the types np.partition orders), a row
# is cut at a value no better than its k-th first, and only the elements
# on the good side of the cut are ranked exactly: over a [1, 151936] row
# with k = 50, 0.1-0.3 ms instead of 2-4 ms for packing and partitioning
# every element.
CUT_MIN_LENGTH = 1024
# The first cut is guessed from every SAMPLE_STEP-th element, aiming at
# about twice k elements on its good side; with fewer than k there, or a
# NaN in the row, the row is cut at its k-th value instead (np.partition).
SAMPLE_STEP = 16


def _topk_row(row: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """TopK's indices in one long row."""
    n = row.size
    nan = row.dtype.kind == "f" and np.isnan(row).any()
    if not nan and k * 8 <= n:
        sample = row[::SAMPLE_STEP]
        r = min(sample.size, 2 * k // SAMPLE_STEP + 2)
        cut = sample.size - r if largest else r - 1
        t = np.partition(sample, cut)[cut]
        # every element of the top k is at least as good as t when k are
        idx = np.flatnonzero(row >= t if largest else row <= t)
        if idx.size >= k:
            return _ranked(row, idx, k, largest)
    # the exact cut: np.partition puts NaN last, as the largest value
    cut = n - k if largest else k - 1
    part = np.partition(row, cut)
    t = part[cut]
    if np.isnan(t):  # the k-th is a NaN: all NaN (largest), or everything
        near = np.isnan(row) if largest else np.ones(n, bool)
    elif largest:
        near = row >= t
        if nan:  # NaN rank first
            near |= np.isnan(row)
    else:
        near = row <= t
    return _ranked(row, np.flatnonzero(near), k, largest)


def _ranked(row: np.ndarray, idx: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """The k first of ``idx`` (ascending positions holding every element of
    the row's top k) in TopK's order: a stable sort keeps the lower index
    first among equal values."""
    return idx[np.argsort(_order_key(row[idx], largest), kind="stable")[:k]]


def _topk_indices(x: np.ndarray, k: int, largest: bool) -> np.ndarray:
    """Indices along the last axis of the k first elements in TopK's order,
    ties to the lower index."""
    n = x.shape[-1]
    if n >= CUT_MIN_LENGTH and x.dtype.kind in "fiu":
        rows = x.reshape(-1, n)
        out = np.empty((rows.shape[0], k), np.int64)
        for r in range(rows.shape[0]):
            out[r] = _topk_row(rows[r], k, largest)
        return out.reshape(x.shape[:-1] + (k,))
    key = _order_key(x, largest)
    if key.dtype.itemsize <= 4 and n <= 1 << 32:
        # (rank of the key in its type, index) in one uint64: unique, so a
        # partial selection is exact.
        packed = key.astype(np.int64)
        packed -= np.iinfo(key.dtype).min
        packed = packed.view(np.uint64)
        packed <<= np.uint64(32)
        packed |= np.arange(n, dtype=np.uint64)
        if k < n:
            packed = np.partition(packed, k - 1, axis=-1)[..., :k]
        packed.sort(axis=-1)
        return (packed & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return np.argsort(key, axis=-1, kind="stable")[..., :k]


class TopK(KernelOp):
    """The k largest (or smallest) elements along an axis and their indices;
    k an attribute in opset 1, an input from opset 10."""

    inputs = (Input("X", types=NUMERIC), Input("K", types=(T.INT64,), optional=True))
    attributes = (Attr("axis", "int", -1), Attr("largest", "flag", True),
                  Attr("sorted", "flag", True), Attr("k", "int", None))

    def _run(self, x, k_input=None):
        axis = _axis(self, self.axis, x.ndim)
        k = self._k(k_input)
        dim = x.shape[axis]
        if k > dim:
            raise ValueError(self._input_error(
                1, f"asks for k={k} elements of an axis of {dim} (shape {x.shape})"))
        self._record_path(x.dtype, lambda: f"topk_{x.dtype.name}_numpy")
        last = np.moveaxis(x, axis, -1)
        if k == 0 or last.size == 0:
            shape = last.shape[:-1] + (k,)
            idx = np.zeros(shape, np.int64)
        else:
            idx = _topk_indices(last, k, self.largest or self.opset < 11)
        values = np.take_along_axis(last, idx, axis=-1)
        return (np.ascontiguousarray(np.moveaxis(values, -1, axis)),
                np.ascontiguousarray(np.moveaxis(idx, -1, axis)))

    def _k(self, k_input) -> int:
        if self.opset < 10:
            if k_input is not None:
                raise ValueError(self._input_error(
                    1, f"is not an input of TopK-{self.opset} (k is an attribute)"))
            if self.k is None:
                raise ValueError("TopK: attribute k is required before opset 10")
            k = int(self.k)
        else:
            if k_input is None:
                raise ValueError(self._input_error(1, "is required but missing"))
            if k_input.size != 1:
                raise ValueError(self._input_error(
                    1, f"must hold one value, got shape {k_input.shape}"))
            k = int(k_input.reshape(-1)[0])
        if k < 0:
            raise ValueError(self._input_error(1, f"must not be negative, got k={k}"))
        return k


# ------------------------------------------------- GatherElements, Scatter

class GatherElements(KernelOp):
    """output[i][j][k] = data[indices[i][j][k]][j][k] (axis 0), and so on."""

    onnx_types = MOVABLE
    inputs = (Input("data"), Input("indices", types=INDICES))
    attributes = (Attr("axis", "int", 0),)

    def _run(self, data, indices):
        axis = _axis(self, self.axis, data.ndim)
        _check_shapes(self, data, indices, axis)
        self._record_path(data.dtype.kind, lambda: "gather_elements_numpy")
        idx = _normalized_indices(self, 1, indices, data.shape[axis])
        if idx.size == 0:
            return (np.empty(indices.shape, dtype=data.dtype),)
        source = _leading(data, indices.shape, axis)
        return (np.ascontiguousarray(np.take_along_axis(source, idx, axis=axis)),)


_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


class ScatterElements(KernelOp):
    """A copy of data where output[indices[i][j]][j] (axis 0, and so on)
    receives updates[i][j], or that combined with it by the reduction (in
    the order of the updates, for repeated indices)."""

    onnx_types = MOVABLE
    inputs = (Input("data"), Input("indices", types=INDICES), Input("updates", like=0))
    attributes = (Attr("axis", "int", 0),
                  Attr("reduction", "string", "none",
                       allowed=("none", "add", "mul", "max", "min")))

    def _run(self, data, indices, updates):
        axis = _axis(self, self.axis, data.ndim)
        _check_shapes(self, data, indices, axis)
        if updates.shape != indices.shape:
            raise ValueError(self._input_error(
                2, f"has shape {updates.shape}, expected the shape of input 1 {indices.shape}"))
        reduction = self.reduction
        if reduction in ("max", "min") and self.opset < 18 or (
                reduction != "none" and self.opset < 16):
            raise ValueError(f"ScatterElements: reduction {reduction!r} needs opset "
                             f"{18 if reduction in ('max', 'min') else 16}, the model has "
                             f"{self.opset}")
        self._record_path(reduction, lambda: f"scatter_elements_{reduction}_numpy")
        idx = _normalized_indices(self, 1, indices, data.shape[axis])
        out = self._new_output(data.shape, data.dtype)
        out[...] = data
        if idx.size == 0:
            return (out,)
        # Flat positions in out: one fancy index over a 1-D view (ufunc.at
        # over a tuple of broadcast index arrays is 4x slower).
        flat = out.reshape(-1)
        where = _flat_positions(out.shape, idx, axis).reshape(-1)
        if reduction == "none":
            flat[where] = updates.reshape(-1)
        else:
            # ufunc.at applies repeated indices one after the other, in the
            # updates' C order, as the operator's definition does.
            _REDUCTIONS[reduction].at(flat, where, updates.reshape(-1))
        return (out,)


KERNELS = {
    "RegisterTopKKernel": (TopK,),
    "RegisterGatherElementsKernel": (GatherElements,),
    "RegisterScatterElementsKernel": (ScatterElements,),
}
