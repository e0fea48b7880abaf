"""The glue of exported graphs: Identity, Dropout, Shape, Reshape, Squeeze,
Unsqueeze, Flatten, Constant, ConstantOfShape, Range, Expand, Tile, Where
(Transpose, which has a core, is in ``tensor.py``).

They run on tiny tensors (shapes, masks, position ids) between the real
kernels, so what they cost is the Python around them; NumPy does the work
and there is no core.  Every element type of the schemas is accepted
(strings as NumPy object or unicode arrays).

- **Views, never copies**: Identity, Dropout (in inference), Reshape,
  Squeeze, Unsqueeze and Flatten return their input or a view of it (Reshape and Flatten of an
  input whose strides admit no view copy it, as NumPy must).  Shape returns
  a fresh int64 array.  Constant returns the one array it made from its
  attribute when the node was built, read-only so nothing downstream can
  change it.
- **New contiguous outputs**: Expand and Tile write into an output of
  their own with one ``np.copyto`` from a broadcast view of the input;
  Where is ``np.where``.
- **Sizes**: outputs are sized before they are allocated; a size of 2**63
  bytes or more is a ValueError (no machine holds it), one that does not
  fit in memory the MemoryError of ``KernelOp._check_bytes``.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import AttributeProto, TensorProto

from ._base import Attr, Input, KernelOp

T = TensorProto

# Every tensor element type of the schemas (opset 25), strings included.
ANY_TYPES = (T.BOOL, T.UINT8, T.UINT16, T.UINT32, T.UINT64, T.INT8, T.INT16, T.INT32, T.INT64,
             T.FLOAT16, T.BFLOAT16, T.FLOAT, T.DOUBLE, T.COMPLEX64, T.COMPLEX128, T.STRING,
             T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ, T.FLOAT8E8M0,
             T.UINT4, T.INT4, T.UINT2, T.INT2, T.FLOAT4E2M1)
# Expand, Tile, Where: no 8-, 4- and 2-bit types.
COMMON_TYPES = ANY_TYPES[:16]
# NumPy dtypes of the types above (strings: any NumPy string dtype).
_DTYPES = frozenset(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t))
                    for t in ANY_TYPES if t != T.STRING)
_RANGE_TYPES = (T.FLOAT, T.DOUBLE, T.INT16, T.INT32, T.INT64)
_RANGE_LOW = (T.FLOAT16, T.BFLOAT16)  # from opset 27, computed in stash_type
_FLOAT64, _INT64 = np.dtype(np.float64), np.dtype(np.int64)
_STASH = {T.FLOAT: np.dtype(np.float32), T.DOUBLE: _FLOAT64}
# A size of this many bytes or more is not a size (no int64 holds it).
_BYTES_LIMIT = 1 << 63
# Range computes an output of another type than its compute type this many
# values at a time: no temporary of the whole output (int32 Range of 7e8
# values made 5.7 GB of int64 first and took 25 s).
_RANGE_CHUNK = 1 << 16


def _name(dtype: np.dtype) -> str:
    return "string" if dtype.kind in "OUS" else dtype.name


class _Glue(KernelOp):
    """Checks the glue adapters share."""

    def _check_data(self, index: int, x: np.ndarray) -> None:
        if x.dtype not in _DTYPES and x.dtype.kind not in "OUS":
            raise TypeError(self._input_error(
                index, f"has element type {x.dtype}, which is no ONNX tensor type"))

    def _ints(self, index: int, values: np.ndarray, limit: int) -> list[int]:
        """A 1-D int64 input as a list, refused before converting when it
        has more than ``limit`` values."""
        if values.size > limit:
            raise ValueError(self._input_error(
                index, f"has {values.size} values, more than the {limit} possible"))
        return values.reshape(-1).tolist()

    def _axes(self, index: int, axes, rank: int, what: str) -> list[int]:
        """``axes`` made non-negative for ``rank``, each once."""
        out = []
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(self._input_error(
                    index, f"({what}) has axis {a}, out of range [{-rank}, {rank - 1}]"))
            a = a + rank if a < 0 else a
            if a in out:
                raise ValueError(self._input_error(index, f"({what}) repeats axis {a}"))
            out.append(a)
        return out

    def _output(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A new output of ``shape``, its size checked first."""
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes >= _BYTES_LIMIT:
            raise ValueError(f"{self.onnx_node.op_type}: output 0 of shape {shape} would "
                             f"take {nbytes} bytes, more than 2**63")
        self._check_bytes(f"output 0 of shape {shape}", nbytes)
        try:
            return self._new_output(shape, dtype)
        except MemoryError:  # the check's estimate was too kind (an address-space limit)
            raise MemoryError(f"{self.onnx_node.op_type}: output 0 of shape {shape} needs "
                              f"{nbytes} bytes, which cannot be allocated") from None

    def _label(self, key, label: str) -> None:
        self._record_path(key, lambda: label)


# ------------------------------------------------------------------ views

class Identity(_Glue):
    """The input itself: a tensor, a sequence or an optional (None)."""

    onnx_types = ANY_TYPES

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        # None stands for an empty optional, unless the node names no input
        self._named = len(onnx_node.input) == 1 and onnx_node.input[0] != ""

    def run(self, *args, linked_attributes=None, context=None, bindings=None):
        if len(args) != 1:
            raise ValueError(f"Identity: takes 1 input, got {len(args)}")
        if not self._named:
            raise ValueError(self._input_error(0, "is required but missing"))
        if self._usage.enabled:
            self._label("view", "identity_view")
        return args


_DROPOUT_TYPES = (T.FLOAT16, T.FLOAT, T.DOUBLE, T.BFLOAT16, T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ,
                  T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ)


class Dropout(_Glue):
    """Dropout from opset 7: in inference (opsets 7 and 10; from opset 12
    without ``training_mode`` or with it false, or a ratio of 0) the output
    is the input itself, as Identity's, and the optional mask all true
    (bool; of the data's type before opset 10, as that schema says).

    Training mode with a ratio above 0 draws a random mask: it is done as
    the built-in does it (NumPy's ``RandomState(seed)``, so a node with a
    ``seed`` gives the built-in's and the ONNX backend cases' bits), not
    refused, so that a graph exported in training mode still runs; the
    package folds no Dropout into a constant (``registry/fold.py``)."""

    since_version = 7  # Dropout-6 and older: is_test, training by default
    inputs = (Input("data", types=_DROPOUT_TYPES),
              Input("ratio", types=_DROPOUT_TYPES, optional=True),
              Input("training_mode", types=(T.BOOL,), optional=True))
    attributes = (Attr("ratio", "float", 0.5), Attr("seed", "int", None))
    strided_inputs = frozenset({0})  # returned as it is

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._mask = len(onnx_node.output) > 1 and onnx_node.output[1] != ""

    def _run(self, x, ratio=None, training_mode=None):
        if self.opset < 12:
            if ratio is not None or training_mode is not None:
                raise ValueError(self._input_error(
                    1, f"is not an input of Dropout-{self.opset} (ratio is an attribute)"))
            # always inference: the ratio attribute is not used, and any
            # value of it is taken, as ONNX Runtime and the built-in do
            p, training = 0.0, False
        else:
            p = 0.5 if ratio is None else self._scalar(1, ratio)
            training = False if training_mode is None else bool(self._scalar(2, training_mode))
            # refused in inference too (NaN included), as ONNX Runtime does
            if not 0.0 <= p < 1.0:
                raise ValueError(self._input_error(1, f"(ratio) is {p}, outside [0, 1)"))
        if training and p > 0:
            if self._usage.enabled:
                self._label("training", "dropout_training_numpy")
            rnd = np.random.RandomState(self.seed)
            keep = rnd.uniform(0, 1.0, x.shape) >= p
            y = keep * x * (1.0 / (1.0 - p))
            return (y.astype(x.dtype, copy=False), keep) if self._mask else (y,)
        if self._usage.enabled:
            self._label("view", "dropout_view")
        if not self._mask:
            return (x,)
        mask = self._output(x.shape, np.dtype(bool) if self.opset >= 10 else x.dtype)
        mask[...] = 1
        return (x, mask)

    def _scalar(self, index: int, value: np.ndarray):
        if value.size != 1:
            raise ValueError(self._input_error(
                index, f"must hold one value (a scalar), got shape {value.shape}"))
        return value.reshape(-1)[0].item()


class Shape(_Glue):
    """The dimensions of ``data`` from ``start`` to ``end`` (opset 15),
    clamped to its rank, as a new int64 array."""

    inputs = (Input("data"),)
    onnx_types = ANY_TYPES
    attributes = (Attr("start", "int", 0), Attr("end", "int", None))
    strided_inputs = frozenset({0})  # only its shape is read

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self.opset < 15:  # no start and end before opset 15
            self.start, self.end = 0, None
        self._whole = self.start == 0 and self.end is None

    def _run(self, data):
        if self._usage.enabled:
            self._label("shape", "shape_int64")
        if self._whole:
            return (np.array(data.shape, dtype=np.int64),)
        # Python's slice clamps as the specification does
        return (np.array(data.shape[self.start:self.end], dtype=np.int64),)


class Reshape(_Glue):
    """``data`` with the dimensions of ``shape`` (0: the input's
    dimension, unless ``allowzero``; -1: inferred), a view."""

    inputs = (Input("data"), Input("shape", types=(T.INT64,), ranks=(1,), optional=True))
    onnx_types = ANY_TYPES
    # Opset 1 gives the shape as an attribute; allowzero exists from opset 14.
    attributes = (Attr("shape", "ints", None), Attr("allowzero", "flag", False))
    strided_inputs = frozenset({1})

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._targets: dict = {}  # (input shape, dtype, shape values) -> output shape

    def _run(self, data, shape=None):
        if self.opset < 5:
            dims = self.shape
            if dims is None:
                raise ValueError("Reshape: attribute shape is required before opset 5")
        elif shape is None:
            raise ValueError(self._input_error(1, "is required but missing"))
        else:
            dims = self._ints(1, shape, 64)
        key = (data.shape, data.dtype, tuple(dims))
        target = self._targets.get(key)
        if target is None:
            self._check_data(0, data)
            target = self._target(data, dims)
            if len(self._targets) >= 64:
                self._targets.clear()
            self._targets[key] = target
        if self._usage.enabled:
            self._label("view", "reshape_view")
        return (data.reshape(target),)

    def _target(self, data: np.ndarray, dims: list[int]) -> tuple[int, ...]:
        out = list(dims)
        infer = None
        for i, d in enumerate(dims):
            if d == 0 and not self.allowzero:
                if i >= data.ndim:
                    raise ValueError(self._input_error(
                        1, f"copies dimension {i} (a 0) of data of shape {data.shape}, "
                           f"which has rank {data.ndim}"))
                out[i] = data.shape[i]
            elif d == -1:
                if infer is not None:
                    raise ValueError(self._input_error(1, f"has more than one -1: {dims}"))
                infer = i
            elif d < 0:
                raise ValueError(self._input_error(1, f"has a negative dimension: {dims}"))
        if infer is not None:
            if self.allowzero and 0 in dims:
                raise ValueError(self._input_error(
                    1, f"has both 0 and -1 with allowzero=1: {dims}"))
            known = math.prod(out[:infer] + out[infer + 1:])
            if known == 0 or data.size % known:
                raise ValueError(self._input_error(
                    1, f"{dims} cannot reshape data of shape {data.shape} "
                       f"({data.size} elements)"))
            out[infer] = data.size // known
        elif math.prod(out) != data.size:
            raise ValueError(self._input_error(
                1, f"{dims} gives {math.prod(out)} elements, data of shape {data.shape} "
                   f"has {data.size}"))
        return tuple(out)


class Squeeze(_Glue):
    """``data`` without the dimensions of size 1 listed in ``axes`` (all of
    them when absent), a view."""

    # axes of rank 0 too: ONNX's own function bodies (AffineGrid) and ONNX
    # Runtime take a scalar
    inputs = (Input("data"), Input("axes", types=(T.INT64,), ranks=(0, 1), optional=True))
    onnx_types = ANY_TYPES
    attributes = (Attr("axes", "ints", None),)  # an input from opset 13
    strided_inputs = frozenset({0, 1})  # dropping dimensions of 1 is always a view

    def _run(self, data, axes=None):
        self._check_data(0, data)
        shape = data.shape
        if self.opset < 13:
            axes = self.axes
            index = 0
        else:
            index = 1
            if axes is not None:
                axes = self._ints(1, axes, data.ndim)
        if self._usage.enabled:
            self._label("view", "squeeze_view")
        if axes is None:
            return (data.reshape(tuple(d for d in shape if d != 1)),)
        drop = self._axes(index, axes, data.ndim, "axes")
        for a in drop:
            if shape[a] != 1:
                raise ValueError(self._input_error(
                    index, f"(axes) squeezes axis {a} of size {shape[a]} "
                           f"(data of shape {shape})"))
        return (data.reshape(tuple(d for i, d in enumerate(shape) if i not in drop)),)


class Unsqueeze(_Glue):
    """``data`` with dimensions of size 1 inserted at ``axes`` (positions in
    the output), a view."""

    # axes of rank 0 too: ONNX's own function bodies (AffineGrid) and ONNX
    # Runtime take a scalar
    inputs = (Input("data"), Input("axes", types=(T.INT64,), ranks=(0, 1), optional=True))
    onnx_types = ANY_TYPES
    attributes = (Attr("axes", "ints", None),)  # an input from opset 13
    strided_inputs = frozenset({0, 1})  # inserting dimensions of 1 is always a view

    def _run(self, data, axes=None):
        self._check_data(0, data)
        if self.opset < 13:
            if self.axes is None:
                raise ValueError("Unsqueeze: attribute axes is required before opset 13")
            axes, index = self.axes, 0
        else:
            if axes is None:
                raise ValueError(self._input_error(1, "is required but missing"))
            axes, index = self._ints(1, axes, 64), 1
        rank = data.ndim + len(axes)
        shape = list(data.shape)
        for a in sorted(self._axes(index, axes, rank, "axes")):
            shape.insert(a, 1)
        if self._usage.enabled:
            self._label("view", "unsqueeze_view")
        return (data.reshape(shape),)


class Flatten(_Glue):
    """``data`` as a matrix: the dimensions before ``axis`` make its rows, a view."""

    inputs = (Input("input"),)
    onnx_types = ANY_TYPES
    attributes = (Attr("axis", "int", 1),)

    def _run(self, x):
        self._check_data(0, x)
        rank = x.ndim
        axis = self.axis
        if not -rank <= axis <= rank:
            raise ValueError(self._input_error(
                0, f"of rank {rank} cannot be flattened at axis {axis} "
                   f"(expected [{-rank}, {rank}])"))
        if axis < 0:
            axis += rank
        if self._usage.enabled:
            self._label("view", "flatten_view")
        return (x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])),)


# ------------------------------------------------------------------ constants

# Constant's attributes: name -> NumPy dtype of the list kinds (None: a tensor).
_CONSTANT_VALUES = {"value": None, "sparse_value": None, "value_float": np.float32,
                    "value_floats": np.float32, "value_int": np.int64,
                    "value_ints": np.int64, "value_string": object, "value_strings": object}


def _dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    """The dense array of a sparse tensor: zeros but at its indices."""
    values = onnx.numpy_helper.to_array(sparse.values)
    indices = onnx.numpy_helper.to_array(sparse.indices).astype(np.int64)
    shape = tuple(sparse.dims)
    out = np.zeros(shape, dtype=values.dtype)
    if indices.ndim == 2:  # [NNZ, rank] coordinates
        out[tuple(indices.T)] = values
    else:  # [NNZ] positions in the flattened tensor
        out.reshape(-1)[indices] = values
    return out


class Constant(_Glue):
    """Its attribute's value, made once when the node is built and returned
    read-only on every run (never copied)."""

    inputs = ()
    onnx_types = ANY_TYPES

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        self._value = None
        given = [att for att in onnx_node.attribute if att.name in _CONSTANT_VALUES]
        if any(att.ref_attr_name for att in given):
            return  # a function's attribute: the instance made for its value parses it
        if len(given) != 1:
            names = ", ".join(_CONSTANT_VALUES)
            self._reject_attribute(f"exactly one of the attributes {names} must be set, "
                                   f"got {len(given)}")
            return
        att = given[0]
        try:
            value = self._parse(att)
        except (ValueError, TypeError) as e:
            self._reject_attribute(f"attribute {att.name}: {e}")
            return
        value.flags.writeable = False  # one array shared by every run
        self._value = (value,)
        self._path = f"constant_{_name(value.dtype)}"

    @staticmethod
    def _parse(att: AttributeProto) -> np.ndarray:
        if att.type == AttributeProto.TENSOR:
            return onnx.numpy_helper.to_array(att.t)
        if att.type == AttributeProto.SPARSE_TENSOR:
            return _dense(att.sparse_tensor)
        dtype = _CONSTANT_VALUES[att.name]
        value = onnx.helper.get_attribute_value(att)
        if dtype is object:
            if isinstance(value, bytes):
                return np.array(value.decode("utf-8"), dtype=object)
            return np.array([v.decode("utf-8") for v in value], dtype=object)
        return np.array(value, dtype=dtype)

    def run(self, *args, linked_attributes=None, context=None, bindings=None):
        if self.has_linked_attribute:
            return super().run(*args, linked_attributes=linked_attributes)
        if self._attribute_error is not None:
            raise ValueError(self._attribute_error)
        if args:
            raise ValueError(f"Constant: takes no input, got {len(args)}")
        if self._usage.enabled:
            self._label(self._path, self._path)
        return self._value

    def _run(self):
        return self.run()


def _shape_values(op: _Glue, index: int, shape: np.ndarray) -> tuple[int, ...]:
    """A 1-D int64 ``shape`` input as a tuple of dimensions >= 0."""
    dims = tuple(op._ints(index, shape, 64))
    for d in dims:
        if d < 0:
            raise ValueError(op._input_error(index, f"has a negative dimension: {list(dims)}"))
    return dims


class ConstantOfShape(_Glue):
    """A tensor of ``shape`` filled with ``value`` (one element, float32 0
    by default)."""

    since_version = 9
    inputs = (Input("input", types=(T.INT64,), ranks=(1,)),)
    onnx_types = tuple(t for t in ANY_TYPES if t not in (T.STRING, T.COMPLEX64, T.COMPLEX128))
    attributes = (Attr("value", "tensor", None),)
    strided_inputs = frozenset({0})

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        value = self.value
        if value is None:
            value = np.zeros(1, np.float32)
        if value.size != 1:
            self._reject_attribute(f"attribute value must hold one element, got shape "
                                   f"{value.shape}")
        elif value.dtype.kind in "OUSc":
            self._reject_attribute(f"attribute value has element type {_name(value.dtype)}, "
                                   f"which ConstantOfShape does not take")
        self._fill = value.reshape(-1)[:1].copy().reshape(()) if value.size else None
        self._path = f"constantofshape_{_name(value.dtype)}"

    def _run(self, shape):
        dims = _shape_values(self, 0, shape)
        out = self._output(dims, self._fill.dtype)
        if self._usage.enabled:
            self._label(self._path, self._path)
        out[...] = self._fill
        return (out,)


class Range(_Glue):
    """start, start + delta, ... up to limit (excluded): element ``i`` is
    ``start + i * delta``, computed in float64 for the float types (in
    ``stash_type`` for float16 and bfloat16, opset 27) as the reference
    does, exactly for the integers."""

    since_version = 11
    inputs = (Input("start", types=_RANGE_TYPES + _RANGE_LOW, ranks=(0, 1)),
              Input("limit", like=0, ranks=(0, 1)), Input("delta", like=0, ranks=(0, 1)))
    attributes = (Attr("stash_type", "int", T.FLOAT),)
    strided_inputs = frozenset({0, 1, 2})

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        if self.opset >= 27 and self.stash_type not in _STASH:
            self._reject_attribute(f"attribute stash_type must be {T.FLOAT} (float) or "
                                   f"{T.DOUBLE} (double), got {self.stash_type}")

    def _scalar(self, index: int, name: str, x: np.ndarray):
        if x.size != 1:
            raise ValueError(self._input_error(
                index, f"({name}) must be a scalar or of shape (1,), got shape {x.shape}"))
        return x.item()

    def _run(self, start, limit, delta):
        dtype = start.dtype
        floating = dtype.kind == "f" or dtype.kind == "V"  # V: bfloat16
        low = floating and dtype.itemsize == 2
        if low and self.opset < 27:
            raise TypeError(self._input_error(
                0, f"has element type {dtype}, which Range takes from opset 27 "
                   f"(this model imports opset {self.opset})"))
        first = self._scalar(0, "start", start)
        last = self._scalar(1, "limit", limit)
        step = self._scalar(2, "delta", delta)
        if step == 0:
            raise ValueError(self._input_error(2, "(delta) must not be zero"))
        if floating:
            compute = _STASH[self.stash_type] if low else _FLOAT64
            # the ends as the compute type sees them, then Python floats (double)
            first, last, step = (float(compute.type(v)) for v in (first, last, step))
            try:
                n = max(math.ceil((last - first) / step), 0)
            except (ValueError, OverflowError):  # NaN or infinite
                raise ValueError(
                    f"Range: the number of elements ceil((limit - start) / delta) is not "
                    f"finite (start {first}, limit {last}, delta {step})") from None
        else:  # exact, whatever the width of limit - start
            compute = _INT64
            n = max(-((first - last) // step), 0)
        # the output; another compute type's values go through it in chunks
        nbytes = n * dtype.itemsize + (dtype != compute) * min(n, _RANGE_CHUNK) * compute.itemsize
        if nbytes >= _BYTES_LIMIT:
            raise ValueError(f"Range: output 0 of {n} elements (start {first}, limit {last}, "
                             f"delta {step}) would take {nbytes} bytes, more than 2**63")
        self._check_bytes(f"output 0 of {n} elements", nbytes)
        if self._usage.enabled:
            self._label(dtype, f"range_{_name(dtype)}")
        # start + i * delta in the compute type (float64, or stash_type for
        # float16 and bfloat16; int64, exact, for the integers: the last value
        # lies between start and limit, so it fits the type), then rounded
        try:
            if dtype == compute:
                values = np.arange(n, dtype=compute)
                values *= step
                values += first
                return (values,)
            out = np.empty(n, dtype)
            for i in range(0, n, _RANGE_CHUNK):
                values = np.arange(i, min(n, i + _RANGE_CHUNK), dtype=compute)
                values *= step
                values += first
                out[i:i + len(values)] = values
            return (out,)
        except MemoryError:  # the check's estimate was too kind
            raise MemoryError(f"Range: output 0 of {n} elements needs {nbytes} bytes, "
                              f"which cannot be allocated") from None


# ------------------------------------------------------------------ copies

def _broadcast(op: _Glue, a: tuple[int, ...], b: tuple[int, ...], index: int) -> tuple:
    """The bidirectional broadcast of shapes ``a`` (input 0's) and ``b``
    (input ``index``'s)."""
    rank = max(len(a), len(b))
    a1 = (1,) * (rank - len(a)) + a
    b1 = (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(a1, b1):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise ValueError(op._input_error(
                index, f"shape {b} does not broadcast with input 0's {a}"))
    return tuple(out)


class Expand(_Glue):
    """``input`` broadcast to ``shape`` (both ways), a new tensor."""

    since_version = 8
    inputs = (Input("input"), Input("shape", types=(T.INT64,), ranks=(1,)))
    onnx_types = COMMON_TYPES
    strided_inputs = frozenset({0, 1})  # copied through its strides

    def _run(self, x, shape):
        self._check_data(0, x)
        out = self._output(_broadcast(self, x.shape, _shape_values(self, 1, shape), 1),
                           x.dtype)
        if self._usage.enabled:
            self._label(x.dtype, f"expand_{_name(x.dtype)}_numpy")
        np.copyto(out, x)
        return (out,)


class Tile(_Glue):
    """``input`` repeated ``repeats[i]`` times along each axis ``i``, a new
    tensor.  Opset 1 repeats one axis: inputs ``tiles`` and ``axis``."""

    # Opset 1's tiles and axis may be of any numeric type: checked in _run.
    inputs = (Input("input"), Input("repeats", ranks=(0, 1)),
              Input("axis", ranks=(0, 1), optional=True))
    onnx_types = COMMON_TYPES
    strided_inputs = frozenset({0, 1, 2})  # copied through its strides

    def _run(self, x, repeats, axis=None):
        self._check_data(0, x)
        rank = x.ndim
        if self.opset < 6:
            if axis is None:
                raise ValueError(self._input_error(2, "is required but missing before opset 6"))
            if repeats.size != 1 or axis.size != 1:
                raise ValueError(self._input_error(1, "(tiles) and input 2 (axis) must be "
                                                      "scalars before opset 6"))
            (a,) = self._axes(2, [int(axis.reshape(-1)[0])], rank, "axis")
            times = [1] * rank
            times[a] = int(repeats.reshape(-1)[0])
        else:
            if axis is not None:
                raise ValueError(self._input_error(2, "is one input too many from opset 6"))
            if repeats.dtype != np.int64 or repeats.ndim != 1:
                raise TypeError(self._input_error(
                    1, f"(repeats) must be a 1-D int64 tensor, got {repeats.dtype} of shape "
                       f"{repeats.shape}"))
            times = self._ints(1, repeats, rank)
            if len(times) != rank:
                raise ValueError(self._input_error(
                    1, f"has {len(times)} values for input 0 of rank {rank}"))
        if any(t < 0 for t in times):
            raise ValueError(self._input_error(1, f"has a negative repeat count: {times}"))
        out = self._output(tuple(d * t for d, t in zip(x.shape, times)), x.dtype)
        if self._usage.enabled:
            self._label(x.dtype, f"tile_{_name(x.dtype)}_numpy")
        if out.size:
            # out as (t0, d0, t1, d1, ...) takes x as (1, d0, 1, d1, ...): one copy
            tiled = tuple(v for pair in zip(times, x.shape) for v in pair)
            spread = tuple(v for d in x.shape for v in (1, d))
            np.copyto(out.reshape(tiled), x.reshape(spread))
        return (out,)


class Where(_Glue):
    """``X`` where ``condition`` holds, else ``Y``, all three broadcast, a
    new tensor."""

    since_version = 9
    inputs = (Input("condition", types=(T.BOOL,)), Input("X"), Input("Y", like=1))
    onnx_types = COMMON_TYPES
    strided_inputs = frozenset({0, 1, 2})  # read through their strides

    def _plan(self, condition, x, y):
        self._check_data(1, x)
        shape = _broadcast(self, x.shape, condition.shape, 0)
        shape = _broadcast(self, shape, y.shape, 2)
        self._check_bytes(f"output 0 of shape {shape}", math.prod(shape) * x.dtype.itemsize)
        return f"where_{_name(x.dtype)}_numpy", shape

    def _execute(self, plan, condition, x, y):
        label, shape = plan
        if self._usage.enabled:
            self._label(label, label)
        try:
            return (np.where(condition, x, y),)
        except MemoryError:  # the check's estimate was too kind
            raise MemoryError(f"Where: output 0 of shape {shape} cannot be "
                              f"allocated") from None


KERNELS = {
    "RegisterShapeKernels": (Identity, Shape, Reshape, Squeeze, Unsqueeze, Flatten, Constant,
                             ConstantOfShape, Range, Expand, Tile, Where),
    "RegisterDropoutKernel": (Dropout,),
}
