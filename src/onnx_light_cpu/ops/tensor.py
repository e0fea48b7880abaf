"""Concat, Gather, NonZero, Pad, ScatterND, Slice, Split, Transpose: data movement.

These operators only move elements, so the cores work on bytes: an element
type matters through its size.  Every type the schemas allow is accepted;
strings (NumPy object or unicode arrays) go to NumPy, labelled ``*_builtin``.
"""

from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import numpy as np
from onnx import TensorProto

from .._kernels import tensor as core
from ._base import ELEMENT_TYPES, Attr, Input, KernelOp
from .shape import ANY_TYPES, _Glue

T = TensorProto
# Every element type of the movement schemas (string handled by NumPy).
MOVABLE = (T.BOOL, T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64,
           T.FLOAT16, T.BFLOAT16, T.FLOAT, T.DOUBLE, T.COMPLEX64, T.COMPLEX128, T.STRING)
_NUMPY_TYPES = dict(ELEMENT_TYPES)
_NUMPY_TYPES[np.dtype(np.complex64)] = T.COMPLEX64
_NUMPY_TYPES[np.dtype(np.complex128)] = T.COMPLEX128
_DATA_TYPES = ", ".join(dt.name for dt in _NUMPY_TYPES)

# Bytes one thread must copy before a second one is asked to help: with the
# second core idle, two threads win from about 512 KB (measured, 2-core
# Zen 5: Split of 6 MB 138 -> 74 µs, Concat of 2 MB 44 -> 30 µs).  When
# another process holds that core, the caller runs the tasks of the worker
# that does not wake (no ~0.8 ms wait as under OpenMP).
MIN_BYTES_PER_THREAD = 256 << 10


def _is_string(x: np.ndarray) -> bool:
    return x.dtype.kind in "OUS"


def _short(dtype: np.dtype) -> str:
    return "string" if dtype.kind in "OUS" else dtype.name


class _Movement(KernelOp):
    """Shared checks of the movement adapters.  Their data inputs may be
    strings of any NumPy string dtype, which a declared type list cannot
    say: _check_data checks them."""

    onnx_types: ClassVar[tuple[int, ...]] = MOVABLE

    def _check_data(self, index: int, x) -> None:
        if not _is_string(x) and x.dtype not in _NUMPY_TYPES:
            raise TypeError(self._input_error(
                index, f"has element type {x.dtype}, expected one of {_DATA_TYPES} or a string"))

    def _axis(self, axis: int, rank: int, index: int = 0) -> int:
        if not -rank <= axis < rank:
            raise ValueError(self._input_error(
                index, f"of rank {rank} has no axis {axis} (expected [{-rank}, {rank - 1}])"))
        return axis + rank if axis < 0 else axis

    def _label(self, label: str) -> None:
        self._record_path(label, lambda: label)

    def _threads(self, nbytes: int) -> int:
        return self._num_threads(nbytes, MIN_BYTES_PER_THREAD)


_INDEX_TYPES = (T.INT32, T.INT64)


class _ConcatPlan(NamedTuple):
    axis: int
    shape: tuple[int, ...]    # of the output
    outer: int                # rows: the product of the dimensions before axis
    row: int                  # bytes of one output row
    rows: tuple[int, ...]     # bytes of one row of each input (0: empty input)


class Concat(_Movement):
    """Inputs joined along ``axis``: each output row is the inputs' rows in turn."""

    inputs = (Input("inputs", variadic=True),)
    attributes = (Attr("axis", "int", None),)
    # Opset 1 made axis optional (default 1); OpRun checks the newest schema,
    # where it is required, unless the class already has the attribute.
    axis = None

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self.axis is None:
            if self.opset < 4:
                self.axis = 1
            else:
                self._reject_attribute("attribute axis is required")

    def _plan(self, first, *rest):
        self._check_data(0, first)
        rank = first.ndim
        if rank == 0:
            raise ValueError(self._input_error(0, "is a scalar, Concat needs rank >= 1"))
        axis = self._axis(self.axis, rank)
        total = 0
        for i, x in enumerate((first, *rest)):
            if x is None:  # only the first input is declared required
                raise ValueError(self._input_error(i, "is required but missing"))
            if x.dtype != first.dtype:
                raise TypeError(self._input_error(
                    i, f"has element type {x.dtype}, expected {first.dtype} like input 0"))
            if x.ndim != rank or x.shape[:axis] != first.shape[:axis] \
                    or x.shape[axis + 1:] != first.shape[axis + 1:]:
                raise ValueError(self._input_error(
                    i, f"has shape {x.shape}, which does not match input 0's {first.shape} "
                       f"outside axis {axis}"))
            total += x.shape[axis]
        shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]
        inner = math.prod(shape[axis + 1:]) * first.dtype.itemsize
        rows = tuple(x.shape[axis] * inner for x in (first, *rest))
        return _ConcatPlan(axis, shape, math.prod(shape[:axis]), total * inner, rows)

    def record(self, dtype: np.dtype) -> None:
        """Record that the numeric copy ran (also where a plan entry reads
        the inputs in place of the join: registry/conv_chains.py)."""
        self._record_path(dtype, lambda: f"concat_{dtype.name}")

    def _execute(self, plan: _ConcatPlan, *inputs):
        first = inputs[0]
        if _is_string(first):
            self._label("concat_string_builtin")
            return (np.concatenate(inputs, axis=plan.axis),)
        self.record(first.dtype)
        out = self._new_output(plan.shape, first.dtype)
        srcs, dsts, rows = [], [], []
        offset = 0
        for x, row in zip(inputs, plan.rows):
            if row:
                srcs.append((np.ascontiguousarray(x), 0))
                dsts.append((out, offset))
                rows.append(row)
            offset += row
        core.copy_rows(srcs, dsts, rows, [plan.row] * len(rows), rows, plan.outer,
                       self._threads(out.nbytes))
        return (out,)


class _SplitPlan(NamedTuple):
    axis: int
    sizes: list[int] | None   # None: from the ``split`` input, on each run
    outer: int                # the product of the dimensions before axis
    inner: int                # bytes of one element of axis


class Split(_Movement):
    """The input cut along ``axis`` into consecutive pieces, one per output."""

    inputs = (Input("input"), Input("split", types=(T.INT64,), optional=True))
    attributes = (Attr("axis", "int", 0), Attr("split", "ints", None),
                  Attr("num_outputs", "int", None))
    strided_inputs = frozenset({1})  # ``split`` is counted before it is read

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self.n_outputs = len(onnx_node.output)
        if self.num_outputs is not None and self.num_outputs != self.n_outputs:
            self._reject_attribute(f"attribute num_outputs is {self.num_outputs} but the node "
                                   f"has {self.n_outputs} outputs")

    def _plan(self, x, split=None):
        self._check_data(0, x)
        if x.ndim == 0:
            raise ValueError(self._input_error(0, "is a scalar, Split needs rank >= 1"))
        axis = self._axis(self.axis, x.ndim)
        sizes = None if split is not None else self._sizes(x.shape[axis], None)
        return _SplitPlan(axis, sizes, math.prod(x.shape[:axis]),
                          math.prod(x.shape[axis + 1:]) * x.dtype.itemsize)

    def _sizes(self, dim: int, split) -> list[int]:
        if split is not None:
            if split.size != self.n_outputs:  # before converting: it may be huge
                raise ValueError(self._input_error(
                    1, f"has {split.size} sizes for {self.n_outputs} outputs"))
            sizes = [int(s) for s in split.reshape(-1)]
        elif self.split is not None:
            sizes = self.split
        else:  # equal pieces; with num_outputs the last may be smaller
            n = self.n_outputs
            piece = -(-dim // n)
            sizes = [piece] * (n - 1) + [dim - piece * (n - 1)]
            if dim % n and self.num_outputs is None and self.opset < 18:
                raise ValueError(self._input_error(
                    0, f"has {dim} elements on axis {self.axis}, "
                       f"not divisible into {n} equal outputs"))
        if len(sizes) != self.n_outputs or any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise ValueError(self._input_error(
                1 if split is not None else 0,
                f"split sizes {sizes} do not cut a dimension of {dim} into "
                f"{self.n_outputs} outputs"))
        return sizes

    def _execute(self, plan: _SplitPlan, x, split=None):
        axis = plan.axis
        sizes = plan.sizes if plan.sizes is not None else self._sizes(x.shape[axis], split)
        if _is_string(x):
            self._label("split_string_builtin")
            bounds = np.cumsum(sizes)[:-1]
            return tuple(np.array(p) for p in np.split(x, bounds, axis=axis))
        self._record_path(x.dtype, lambda: f"split_{x.dtype.name}")
        x = np.ascontiguousarray(x)
        in_row = x.shape[axis] * plan.inner
        outs, srcs, dsts, rows = [], [], [], []
        offset = 0
        for k, size in enumerate(sizes):
            out = self._new_output(x.shape[:axis] + (size,) + x.shape[axis + 1:], x.dtype, k)
            outs.append(out)
            row = size * plan.inner
            if row:
                srcs.append((x, offset))
                dsts.append((out, 0))
                rows.append(row)
            offset += row
        core.copy_rows(srcs, dsts, [in_row] * len(rows), rows, rows, plan.outer,
                       self._threads(x.nbytes))
        return tuple(outs)


class Slice(_Movement):
    """data[starts:ends:steps] on the given axes, ONNX clamping rules."""

    inputs = (Input("data"), Input("starts", types=_INDEX_TYPES, optional=True),
              Input("ends", types=_INDEX_TYPES, optional=True),
              Input("axes", types=_INDEX_TYPES, optional=True),
              Input("steps", types=_INDEX_TYPES, optional=True))
    # Before opset 10, starts, ends and axes are attributes.
    attributes = (Attr("starts", "ints", None), Attr("ends", "ints", None),
                  Attr("axes", "ints", None))
    strided_inputs = frozenset({0, 1, 2, 3, 4})  # data is read through its strides

    def _list(self, index: int, values, rank: int) -> list[int]:
        if values.ndim != 1:
            raise ValueError(self._input_error(index, f"must be 1-D, got shape {values.shape}"))
        if values.size > rank:  # each axis at most once; checked before converting
            raise ValueError(self._input_error(
                index, f"has {values.size} values for data of rank {rank}"))
        return values.tolist()

    def _index(self, data, starts, ends, axes, steps) -> tuple:
        """The NumPy index of the slice: one slice per dimension, clamped."""
        rank = data.ndim
        if self.opset < 10:
            starts_l, ends_l = self.starts, self.ends
            axes_l, steps_l = self.axes, None
        else:
            if starts is None or ends is None:
                raise ValueError(self._input_error(1 if starts is None else 2,
                                                   "is required but missing"))
            starts_l, ends_l = self._list(1, starts, rank), self._list(2, ends, rank)
            axes_l = self._list(3, axes, rank) if axes is not None else None
            steps_l = self._list(4, steps, rank) if steps is not None else None
        n = len(starts_l)
        if len(ends_l) != n:
            raise ValueError(self._input_error(2, f"has {len(ends_l)} values, starts has {n}"))
        if axes_l is None:
            axes_l = list(range(n))
        elif len(axes_l) != n:
            raise ValueError(self._input_error(3, f"has {len(axes_l)} values, starts has {n}"))
        if steps_l is None:
            steps_l = [1] * n
        elif len(steps_l) != n:
            raise ValueError(self._input_error(4, f"has {len(steps_l)} values, starts has {n}"))
        index = [slice(None)] * rank
        seen = set()
        for start, end, axis, step in zip(starts_l, ends_l, axes_l, steps_l):
            axis = self._axis(axis, rank, 3)
            if axis in seen:
                raise ValueError(self._input_error(3, f"repeats axis {axis}"))
            seen.add(axis)
            if step == 0:
                raise ValueError(self._input_error(4, "has a step of 0"))
            dim = data.shape[axis]
            start += dim if start < 0 else 0
            end += dim if end < 0 else 0
            if step > 0:
                start, end = min(max(start, 0), dim), min(max(end, 0), dim)
            else:
                start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
            index[axis] = slice(start, None if end < 0 else end, step)
        return tuple(index)

    def _run(self, data, starts=None, ends=None, axes=None, steps=None):
        self._check_data(0, data)
        index = self._index(data, starts, ends, axes, steps)
        view = data[index]
        if _is_string(data):
            self._label("slice_string_builtin")
            return (np.array(view),)
        runs = all(s.step in (None, 1) for s in index[-1:])
        self._record_path((data.dtype, runs), lambda: f"slice_{data.dtype.name}_"
                                                    f"{'runs' if runs else 'strided'}")
        out = self._new_output(view.shape, data.dtype)
        if view.ndim == 0 or view.size == 0:
            out[...] = view
            return (out,)
        core.strided_copy(view, out, self._threads(out.nbytes))
        return (out,)


class _GatherPlan(NamedTuple):
    axis: int
    shape: tuple[int, ...]    # of the output
    outer: int                # the product of the dimensions before axis
    row: int                  # bytes of one row (the dimensions after axis)


class Gather(_Movement):
    """Rows of ``data`` along ``axis`` picked by ``indices`` (negative count from the end)."""

    inputs = (Input("data"), Input("indices", types=_INDEX_TYPES))
    attributes = (Attr("axis", "int", 0),)
    strided_inputs = frozenset({0})  # a strided ``data`` is read in place, never densified

    def _plan(self, data, indices):
        self._check_data(0, data)
        if data.ndim == 0:
            raise ValueError(self._input_error(0, "is a scalar, Gather needs rank >= 1"))
        axis = self._axis(self.axis, data.ndim)
        return _GatherPlan(axis, data.shape[:axis] + indices.shape + data.shape[axis + 1:],
                           math.prod(data.shape[:axis]),
                           math.prod(data.shape[axis + 1:]) * data.dtype.itemsize)

    def _execute(self, plan: _GatherPlan, data, indices):
        axis = plan.axis
        dim = data.shape[axis]
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        bad = core.check_indices(idx, dim)
        if bad >= 0:
            raise ValueError(self._input_error(
                1, f"holds index {int(idx.reshape(-1)[bad])} out of range for axis {axis} "
                   f"of size {dim}"))
        if _is_string(data):
            self._label("gather_string_builtin")
            return (np.take(data, indices.astype(np.int64), axis=axis),)
        out = self._new_output(plan.shape, data.dtype)
        if not data.flags.c_contiguous and data.nbytes > out.nbytes:
            # A dense copy of data (a broadcast view, say) would cost more
            # than the rows gathered: NumPy's indexing reads them in place
            # (np.take would copy data first).
            self._record_path(("strided", data.dtype),
                              lambda: f"gather_{data.dtype.name}_strided_builtin")
            out[...] = data[(slice(None),) * axis + (idx.reshape(indices.shape),)]
            return (out,)
        self._record_path(data.dtype, lambda: f"gather_{data.dtype.name}")
        data = np.ascontiguousarray(data)
        core.gather(data, idx, out, plan.outer, dim, plan.row, self._threads(out.nbytes))
        return (out,)


class NonZero(_Movement):
    """int64 [rank, n] coordinates of the non-zero elements, row-major order."""

    inputs = (Input("X"),)

    def _run(self, x):
        self._check_data(0, x)
        if x.ndim == 0:  # a scalar counts as one element of a 1-D tensor (as ORT)
            x = x.reshape(1)
        if _is_string(x):
            self._label("nonzero_string_builtin")
            return (np.array(np.nonzero(x != ""), dtype=np.int64).reshape(x.ndim, -1),)
        self._record_path(x.dtype, lambda: f"nonzero_{x.dtype.name}")
        return (core.nonzero(np.ascontiguousarray(x), _NUMPY_TYPES[x.dtype]),)


_REDUCTIONS = {"none": 0, "add": 1, "mul": 2, "max": 3, "min": 4}


class _ScatterPlan(NamedTuple):
    k: int                    # length of an index tuple
    m: int                    # index tuples
    element_type: int | None  # the core's, None for NumPy (strings, complex)
    path: tuple


class ScatterND(_Movement):
    """A copy of ``data`` where the slices ``indices`` address take (or are
    combined with, by ``reduction``) the ``updates``, in update order."""

    inputs = (Input("data"), Input("indices", types=(T.INT64,)), Input("updates", like=0))
    attributes = (Attr("reduction", "string", "none"),)

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self.reduction = self.reduction or "none"
        if self.reduction not in _REDUCTIONS:
            self._reject_attribute(f"attribute reduction must be one of "
                                   f"{', '.join(_REDUCTIONS)}, got {self.reduction!r}")
        self.reduction_code = _REDUCTIONS.get(self.reduction, 0)

    def _plan(self, data, indices, updates):
        self._check_data(0, data)
        if indices.ndim == 0:
            raise ValueError(self._input_error(1, "must have rank >= 1"))
        k = indices.shape[-1]
        if k > data.ndim:
            raise ValueError(self._input_error(
                1, f"has index tuples of length {k}, data has rank {data.ndim}"))
        want = indices.shape[:-1] + data.shape[k:]
        if updates.shape != want:
            raise ValueError(self._input_error(2, f"has shape {updates.shape}, expected {want}"))
        element_type = _NUMPY_TYPES.get(data.dtype)
        name = _short(data.dtype)
        if _is_string(data) or not core.scatter_supports(element_type):
            return _ScatterPlan(k, 0, None, (("builtin", name),
                                             lambda: f"scatternd_{name}_builtin"))
        reduction = self.reduction
        return _ScatterPlan(k, math.prod(indices.shape[:-1]), element_type, (
            (reduction, name), lambda: f"scatternd_{reduction}_{name}"))

    def _execute(self, plan: _ScatterPlan, data, indices, updates):
        out = np.array(data, copy=True, order="C")
        self._record_path(*plan.path)
        if plan.element_type is None:
            return (self._numpy(out, indices, updates),)
        k, m = plan.k, plan.m
        idx = np.ascontiguousarray(indices, dtype=np.int64).reshape(m, k)
        bad = core.scatter_nd(idx, np.ascontiguousarray(updates), out, self.reduction_code, m, k,
                              plan.element_type)
        if bad >= 0:
            raise ValueError(self._input_error(
                1, f"holds index tuple {idx[bad].tolist()} out of range for data of shape "
                   f"{data.shape}"))
        return (out,)

    def _numpy(self, out, indices, updates):
        """Strings and complex numbers: the sequential definition in NumPy."""
        for i in np.ndindex(indices.shape[:-1]):
            where = tuple(int(v) for v in indices[i])
            for axis, v in enumerate(where):
                if not -out.shape[axis] <= v < out.shape[axis]:
                    raise ValueError(self._input_error(
                        1, f"holds index tuple {list(where)} out of range for data of shape "
                           f"{out.shape}"))
            if self.reduction_code == 0:
                out[where] = updates[i]
            elif self.reduction_code == 1:
                out[where] = out[where] + updates[i]
            elif self.reduction_code == 2:
                out[where] = out[where] * updates[i]
            else:
                raise TypeError(self._input_error(
                    0, f"has element type {_short(out.dtype)}, which has no "
                       f"{self.reduction} reduction"))
        return out


def _matrices(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(batch, rows, columns) when transposing by ``perm`` is transposing a
    batch of rows x columns matrices (batch 1: one matrix), else None.
    Axes of size 1 move nothing and are dropped; axes that are neighbours
    in the output as in the input move as one."""
    kept = [a for a in perm if shape[a] != 1]
    groups: list[list[int]] = []  # runs of neighbouring input axes, output order
    for a in kept:
        if groups and groups[-1][-1] + 1 == a:
            groups[-1].append(a)
        else:
            groups.append([a])
    dims = [math.prod(shape[a] for a in g) for g in groups]
    starts = [g[0] for g in groups]
    if len(groups) == 2 and starts[0] > starts[1]:  # [R, C] -> [C, R]
        return 1, dims[1], dims[0]
    if len(groups) == 3 and starts[0] < starts[2] < starts[1]:  # [B, R, C] -> [B, C, R]
        return dims[0], dims[2], dims[1]
    return None


class Transpose(_Glue):
    """``data`` with its axes permuted by ``perm`` (reversed by default),
    a new contiguous tensor: every element type of the schema, as the glue
    of ``shape.py`` takes them.  A batch of matrix transposes (once axes of
    size 1 are dropped and axes that stay neighbours merged: a weight's
    [K, N] -> [N, K], [B, S, H] -> [B, H, S]) is the core's tiled copy;
    other permutations move whole rows, which ``np.copyto`` does well."""

    inputs = (Input("data"),)
    onnx_types = ANY_TYPES
    attributes = (Attr("perm", "ints", None),)
    strided_inputs = frozenset({0})  # copied through its strides

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        # (shape, dtype) -> (checked permutation, its matrices or None)
        self._layouts: dict = {}

    def _perm(self, rank: int) -> tuple[int, ...]:
        if self.perm is None:
            return tuple(range(rank - 1, -1, -1))
        perm = tuple(self._axes(0, self.perm, rank, "perm"))
        if len(perm) != rank:
            raise ValueError(self._input_error(
                0, f"of rank {rank} cannot be transposed by perm {self.perm}"))
        return perm

    def _run(self, x):
        key = (x.shape, x.dtype)
        layout = self._layouts.get(key)
        if layout is None:
            self._check_data(0, x)
            perm = self._perm(x.ndim)
            matrices = None if x.dtype.kind in "OUS" else _matrices(x.shape, perm)
            if len(self._layouts) >= 64:
                self._layouts.clear()
            layout = self._layouts[key] = (perm, matrices)
        perm, matrices = layout
        view = x.transpose(perm)
        out = self._output(view.shape, x.dtype)
        if matrices is not None and x.flags.c_contiguous:
            if self._usage.enabled:
                self._label(("tiles", x.dtype), f"transpose_{_short(x.dtype)}_tiles")
            core.transpose(x, out, *matrices, self._num_threads(out.nbytes, MIN_BYTES_PER_THREAD))
            return (out,)
        if self._usage.enabled:
            self._label(x.dtype, f"transpose_{_short(x.dtype)}_numpy")
        np.copyto(out, view)
        return (out,)


class MapPlan(NamedTuple):
    """An index-map copy (``core.map_copy``, tensor/olc_tensor_map.h):
    Pad and Resize's nearest mode.  ``maps`` None: the output is the input."""

    shape: tuple[int, ...]            # of the output
    maps: list[np.ndarray] | None     # per outer axis, input byte offsets (-1: fill)
    runs: np.ndarray                  # int64 [n, 3] (dst, src or -1, bytes), or empty
    cols: np.ndarray                  # int64 src byte offsets per column (gather form)
    elem: int                         # bytes of a column element
    repeat: int = 0                   # > 0: cols is consecutive elements, each this many times


_NO_RUNS = np.zeros((0, 3), dtype=np.int64)
_NO_COLS = np.zeros(0, dtype=np.int64)


def map_plan(in_shape: tuple[int, ...], itemsize: int,
             axis_maps: list[np.ndarray | None]) -> MapPlan:
    """The plan of out[o0, ..., ok] = in[m0[o0], ..., mk[ok]] (the fill where
    any map holds -1; None: the identity) on a C-contiguous input.  Trailing
    identity axes make one column element; the last mapped axis is the
    column axis, copied in runs (consecutive sources: one memcpy) or, when
    nearly every column has its own source, gathered element by element."""
    shape = tuple(len(m) if m is not None else d for m, d in zip(axis_maps, in_shape))
    mapped = [k for k, m in enumerate(axis_maps) if m is not None]
    if not mapped:
        return MapPlan(shape, None, _NO_RUNS, _NO_COLS, itemsize)
    c = mapped[-1]
    strides = [itemsize * math.prod(in_shape[k + 1:]) for k in range(len(in_shape))]
    elem = strides[c]
    maps = []
    for k in range(c):
        m = axis_maps[k]
        if m is None:
            maps.append(np.arange(in_shape[k], dtype=np.int64) * strides[k])
        else:
            m = np.asarray(m, dtype=np.int64)
            maps.append(np.where(m >= 0, m * strides[k], -1))
    if not maps:
        maps.append(np.zeros(1, dtype=np.int64))
    col = np.asarray(axis_maps[c], dtype=np.int64)
    n = len(col)
    if n == 0:
        return MapPlan(shape, maps, _NO_RUNS, _NO_COLS, elem)
    # a run starts where a column does not continue the previous one
    cont = np.zeros(n, dtype=bool)
    cont[1:] = ((col[:-1] >= 0) & (col[1:] == col[:-1] + 1)) | ((col[1:] < 0) & (col[:-1] < 0))
    starts = np.flatnonzero(~cont)
    if len(starts) * 4 > n and elem <= 16:
        repeat = 0
        k = n // max(len(np.unique(col)), 1)
        if k >= 2 and col[0] >= 0 and n % k == 0 and np.array_equal(
                col, np.repeat(np.arange(col[0], col[0] + n // k), k)):
            repeat = k  # an integer upsampling
        return MapPlan(shape, maps, _NO_RUNS, np.where(col >= 0, col * elem, -1), elem, repeat)
    lengths = np.diff(np.append(starts, n))
    src = col[starts]
    runs = np.stack([starts * elem, np.where(src >= 0, src * elem, -1), lengths * elem], axis=1)
    return MapPlan(shape, maps, np.ascontiguousarray(runs, dtype=np.int64), _NO_COLS, elem)


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


class Pad(_Glue):
    """``data`` padded (or, with negative pads, cropped) on each axis:
    ``constant`` (the constant_value), ``reflect`` (mirror, edge not
    repeated), ``edge`` (the border repeated), ``wrap`` (opset 19: periodic).
    Negative pads crop first, then the positive pads are taken from the
    cropped region, as ONNX Runtime does (the built-in refuses them).  Every
    output coordinate of an axis maps to one input coordinate (or to the
    constant): the core copies whole runs of the last padded axis with
    memcpy, rows whose source is the previous row's as one copy.
    Opset 2-10: ``pads`` and ``value`` attributes; 11+: inputs; 18+:
    ``axes``."""

    inputs = (Input("data"), Input("pads", types=(T.INT64,), optional=True),
              Input("constant_value", optional=True),
              Input("axes", types=(T.INT32, T.INT64), optional=True))
    onnx_types = ANY_TYPES
    attributes = (Attr("mode", "string", "constant"), Attr("pads", "ints", None),
                  Attr("value", "float", 0.0))
    since_version = 2
    strided_inputs = frozenset({1, 2, 3})

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self.mode not in _PAD_MODES or (self.mode == "wrap" and self.opset < 19):
            self._reject_attribute(f"attribute mode {self.mode!r} is not supported at opset "
                                   f"{self.opset} (expected one of "
                                   f"{', '.join(_PAD_MODES[:3 + (self.opset >= 19)])})")
        if self.opset < 11 and self.pads is None:
            self._reject_attribute("attribute pads is required before opset 11")
        # (shape, dtype, pads, axes) -> MapPlan
        self._maps: dict = {}

    def _pad_values(self, rank: int, pads, axes) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if self.opset < 11:
            pad_list = list(self.pads)
            axes_l = list(range(rank))
        else:
            if pads is None:
                raise ValueError(self._input_error(1, "is required but missing"))
            if pads.ndim > 1:
                raise ValueError(self._input_error(1, f"must be 1-D, got shape {pads.shape}"))
            if axes is not None and self.opset >= 18:
                if axes.ndim > 1:
                    raise ValueError(self._input_error(3, f"must be 1-D, got shape "
                                                          f"{axes.shape}"))
                axes_l = self._axes(3, self._ints(3, axes, rank), rank, "axes")
            else:
                axes_l = list(range(rank))
            pad_list = self._ints(1, pads, 2 * rank)
        if len(pad_list) != 2 * len(axes_l):
            raise ValueError(self._input_error(
                1, f"has {len(pad_list)} values, expected {2 * len(axes_l)} "
                   f"(a begin and an end for each of {len(axes_l)} axes)"))
        begin, end = [0] * rank, [0] * rank
        n = len(axes_l)
        for i, a in enumerate(axes_l):
            begin[a], end[a] = int(pad_list[i]), int(pad_list[n + i])
        return tuple(begin), tuple(end)

    def _axis_map(self, axis: int, dim: int, begin: int, end: int) -> np.ndarray | None:
        if begin == 0 and end == 0:
            return None
        lo, hi = max(0, -begin), dim - max(0, -end)
        size = dim + begin + end
        if hi < lo or size < 0:
            raise ValueError(self._input_error(
                1, f"pads ({begin}, {end}) crop more than axis {axis} of size {dim}"))
        extent = hi - lo
        pb, pe = max(begin, 0), max(end, 0)
        s = np.arange(size, dtype=np.int64) - pb
        if self.mode == "constant":
            return np.where((s >= 0) & (s < extent), s + lo, -1)
        if pb or pe:
            if extent == 0:
                raise ValueError(self._input_error(
                    0, f"has no element left on axis {axis} (size {dim}) to pad in "
                       f"{self.mode} mode"))
            if self.mode == "reflect":
                if extent < 2:
                    raise ValueError(self._input_error(
                        0, f"has {extent} element on axis {axis} after cropping: reflect "
                           f"mode needs at least 2"))
                if pb > extent - 1 or pe > extent - 1:
                    raise ValueError(self._input_error(
                        1, f"pads ({pb}, {pe}) of axis {axis} exceed {extent - 1}, the most "
                           f"reflect mode allows for a size of {extent}"))
        if self.mode == "edge":
            return np.clip(s, 0, max(extent - 1, 0)) + lo
        if self.mode == "wrap":
            return np.mod(s, max(extent, 1)) + lo
        s = np.abs(s)  # reflect
        return np.where(s >= extent, 2 * (extent - 1) - s, s) + lo

    def _run(self, data, pads=None, constant_value=None, axes=None):
        self._check_data(0, data)
        begin, end = self._pad_values(data.ndim, pads, axes)
        key = (data.shape, data.dtype, begin, end)
        plan = self._maps.get(key)
        if plan is None:
            axis_maps = [self._axis_map(k, d, b, e)
                         for k, (d, b, e) in enumerate(zip(data.shape, begin, end))]
            plan = map_plan(data.shape, data.dtype.itemsize, axis_maps)
            if len(self._maps) >= 32:
                self._maps.clear()
            self._maps[key] = plan
        fill = self._fill(data.dtype, constant_value)
        if data.dtype.kind in "OUS":
            self._label(("string", self.mode), f"pad_{self.mode}_string_builtin")
            index = tuple(slice(max(0, -b), d - max(0, -e))
                          for d, b, e in zip(data.shape, begin, end))
            width = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
            if self.mode == "constant":
                return (np.pad(data[index], width, mode="constant", constant_values=fill),)
            return (np.pad(data[index], width, mode=self.mode),)
        if self._usage.enabled:
            self._label((self.mode, data.dtype), f"pad_{self.mode}_{_short(data.dtype)}")
        out = self._output(plan.shape, data.dtype)
        if plan.maps is None:
            np.copyto(out, data)
            return (out,)
        data = np.ascontiguousarray(data)
        core.map_copy(data, out, plan.maps, plan.runs, plan.cols, plan.elem,
                      np.ascontiguousarray(fill).view(np.uint8).reshape(-1),
                      self._num_threads(out.nbytes, MIN_BYTES_PER_THREAD))
        return (out,)

    def _fill(self, dtype: np.dtype, constant_value) -> np.ndarray:
        """The constant as one element of ``dtype``."""
        if self.opset < 11:
            value = self.value
        elif constant_value is None or constant_value.size == 0:
            value = "" if dtype.kind in "OUS" else 0
        else:
            if constant_value.size != 1:
                raise ValueError(self._input_error(
                    2, f"must hold one value, got shape {constant_value.shape}"))
            if constant_value.dtype != dtype and not (
                    dtype.kind in "OUS" and constant_value.dtype.kind in "OUS"):
                raise TypeError(self._input_error(
                    2, f"has element type {constant_value.dtype}, expected {dtype} like input 0"))
            value = constant_value.reshape(-1)[0]
        if dtype.kind in "OUS":
            return np.array(value, dtype=object)
        return np.array(value).astype(dtype).reshape(1)


KERNELS = {
    "RegisterConcatKernel": (Concat,),
    "RegisterGatherKernel": (Gather,),
    "RegisterNonZeroKernel": (NonZero,),
    "RegisterPadKernel": (Pad,),
    "RegisterScatterNDKernel": (ScatterND,),
    "RegisterSliceKernel": (Slice,),
    "RegisterSplitKernel": (Split,),
    "RegisterTransposeKernel": (Transpose,),
}
