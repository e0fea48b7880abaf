"""Cast (every opset: ``to``, ``saturate`` from 19, ``round_mode`` from 24).

Each (input dtype, ``to``) pair resolves once to one of these paths:

* ``native``: a C loop between two of bool, the integer widths, float16,
  bfloat16, float and double (vectorised per SIMD level);
* ``float8``: float, float16, bfloat16 or double to a float 8 type
  (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0) in C, ``saturate`` and
  ``round_mode`` included;
* ``lut``: a 1- or 2-byte input (float 8, 4-bit and 2-bit types, int8,
  float16 to int4...) looked up in a table of all its codes, filled once by
  the reference conversion, so it agrees with it bit for bit;
* ``builtin``: the ``onnx.reference`` conversion itself, for strings and the
  few remaining pairs (a 4- or 8-byte input to a 2-, 4- or 6-bit type, a 4-
  or 8-byte integer to float 8).

Float to integer truncates toward zero as NumPy's ``astype`` does on x86-64
(negative to unsigned wraps); NaN and out-of-range values are undefined in
ONNX and give whatever the truncating instructions give, never a trap.
"""

from __future__ import annotations

from typing import ClassVar, NamedTuple

import numpy as np
import onnx
from onnx import TensorProto
from onnx.helper import tensor_dtype_to_np_dtype
from onnx.reference.ops.op_cast import cast_to

from .. import simd
from .._kernels import cast as core
from ._base import Attr, Input, KernelOp, type_string

T = TensorProto

# Element types NumPy (with ml_dtypes) can hold, by dtype.
_DTYPE_TYPES: dict[np.dtype, int] = {}
for _t in T.DataType.values():
    if _t in (T.UNDEFINED, T.STRING, T.COMPLEX64, T.COMPLEX128):
        continue
    try:
        _DTYPE_TYPES.setdefault(np.dtype(tensor_dtype_to_np_dtype(_t)), _t)
    except (KeyError, TypeError, ValueError):  # types this onnx has no dtype for
        pass
_DTYPE_TYPES[np.dtype(np.bool_)] = T.BOOL

# Targets of the C float 8 loops and the sources they read.
_FLOAT8 = frozenset({T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ,
                     T.FLOAT8E8M0})
_ROUND_MODES = {"up": 0, "down": core.ROUND_DOWN, "nearest": core.ROUND_NEAREST}


def _type_name(element_type: int) -> str:
    return T.DataType.Name(element_type).lower()


def _schema_types(opset: int) -> tuple[frozenset[int], frozenset[int]]:
    """Element types of the input (T1) and output (T2) at this opset."""
    schema = onnx.defs.get_schema("Cast", opset)
    sets = {}
    for constraint in schema.type_constraints:
        sets[constraint.type_param_str] = frozenset(
            getattr(T, s[len("tensor("):-1].upper()) for s in constraint.allowed_type_strs)
    return sets["T1"], sets["T2"]


_LATEST_T1, _ = _schema_types(onnx.defs.onnx_opset_version())


class _Plan(NamedTuple):
    """How a run converts one input dtype: the path kind, its argument (the
    (to, dtype) pair of a native or float 8 loop, or the lookup table) and
    the usage label (key, factory)."""

    kind: str
    arg: object
    path: tuple


class Cast(KernelOp):
    """y = x converted to the element type ``to``."""

    element_types = tuple(sorted(type_string(t) for t in _LATEST_T1))
    since_version = 1
    # The input's allowed types depend on the opset, and a string input may
    # be any NumPy string dtype: checked in _plan.
    inputs = (Input("input"),)
    # ``to`` is an int, or a type name in Cast-1: parsed in __init__.
    attributes = (Attr("saturate", "int", 1),
                  Attr("round_mode", "string", "up", allowed=tuple(_ROUND_MODES)))
    # A conversion is memory-bound: two threads win from 128K elements
    # (measured on 2 cores, float32 <-> float16 at AVX-512: 4.6 us with one,
    # 2.8 us with two; no gain at 64K).
    min_work_per_thread = 1 << 16

    _types_by_opset: ClassVar[dict[int, tuple[frozenset[int], frozenset[int]]]] = {}
    # Lookup tables, shared by every node: (input dtype, to, saturate,
    # round_mode) -> table.
    _tables: ClassVar[dict[tuple, np.ndarray]] = {}

    def __init__(self, onnx_node, run_params, **kwargs):
        super().__init__(onnx_node, run_params, **kwargs)
        types = self._types_by_opset.get(self.opset)
        if types is None:
            types = self._types_by_opset[self.opset] = _schema_types(self.opset)
        self._sources, targets = types
        self.to = T.FLOAT  # a 'to' linked to a function attribute: this instance never runs
        to = next((a for a in onnx_node.attribute if a.name == "to" and not a.ref_attr_name), None)
        if to is None:
            if not self.has_linked_attribute:
                self._reject_attribute("attribute to is required")
        else:
            self.to = self._parse_to(to)
            if self.to is not None and self.to not in targets:
                self._reject_attribute(
                    f"attribute to must be an element type Cast-{self.opset} accepts "
                    f"({', '.join(sorted(_type_name(t) for t in targets))}), got {self.to}")
        self.saturate = bool(self.saturate)
        # Without the attributes (before opsets 19 and 24) the defaults apply.
        self._flags = ((core.SATURATE if self.saturate else 0)
                       | _ROUND_MODES.get(self.round_mode, 0))
        self._out_dtype = (np.dtype(tensor_dtype_to_np_dtype(self.to))
                           if self.to in targets and self.to != T.STRING else None)

    def _parse_to(self, att: onnx.AttributeProto) -> int | None:
        if att.type != onnx.AttributeProto.STRING:
            return int(att.i)
        # Cast-1 names the type: to="FLOAT".
        name = att.s.decode()
        try:
            return T.DataType.Value(name.upper())
        except ValueError:
            self._reject_attribute(f"attribute to must be an element type, got {name!r}")
            return None

    # -- planning -------------------------------------------------------------

    def _run(self, x):
        """``_execute`` with the plan of the input's dtype at the SIMD level
        in use: nothing else (its shape, the thread setting) changes it."""
        key = (x.dtype, simd.state.level)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._plan(x)
        return self._execute(plan, x)

    def _plan(self, x):
        dtype, level = x.dtype, simd.state.level
        src = T.STRING if dtype.kind in "OUS" else _DTYPE_TYPES.get(dtype)
        if src not in self._sources:
            allowed = ", ".join(sorted(_type_name(t) for t in self._sources))
            raise TypeError(self._input_error(
                0, f"has element type {dtype}, Cast-{self.opset} accepts {allowed}"))
        to, out = self.to, self._out_dtype
        if src == T.STRING or to == T.STRING:
            return _Plan("builtin", None, ("string", lambda: "cast_string_builtin"))
        pair = f"{dtype.name}_{out.name}"
        if src == to and to not in _FLOAT8:  # float 8 to itself may saturate or round
            return _Plan("copy", None, ("copy", lambda: "cast_copy"))
        if core.has_native(to, src):
            return _Plan("native", (to, src), (
                ("native", dtype, to, level),
                lambda: f"cast_{pair}_{simd.LEVEL_NAMES[core.level_used(level)]}"))
        if to in _FLOAT8 and core.has_float8(to, src):
            return _Plan("float8", (to, src),
                         (("float8", dtype, to), lambda: f"cast_{pair}_scalar"))
        if dtype.itemsize in (1, 2) and out.itemsize in (1, 2, 4, 8):
            return _Plan("lut", self._table(dtype),
                         (("lut", dtype, to), lambda: f"cast_{pair}_lut"))
        return _Plan("builtin", None, (("builtin", dtype, to), lambda: f"cast_{pair}_builtin"))

    def _table(self, dtype: np.dtype) -> np.ndarray:
        """The reference result for every code of ``dtype`` (1 or 2 bytes)."""
        key = (dtype, self.to, self.saturate, self.round_mode)
        table = self._tables.get(key)
        if table is None:
            codes = np.arange(1 << (8 * dtype.itemsize), dtype=f"u{dtype.itemsize}").view(dtype)
            table = self._reference(codes)
            table = np.ascontiguousarray(table, dtype=self._out_dtype)
            self._tables[key] = table
        return table

    def _reference(self, x: np.ndarray) -> np.ndarray:
        """The onnx.reference conversion, its failures named after the node."""
        try:
            with np.errstate(all="ignore"):
                return cast_to(x, self.to, self.saturate, self.round_mode)
        except (TypeError, ValueError) as exc:
            raise type(exc)(self._input_error(
                0, f"cannot be cast from {x.dtype} to {_type_name(self.to)}: {exc}")) from exc

    # -- running --------------------------------------------------------------

    def _execute(self, plan: _Plan, x):
        kind, arg, path = plan
        if self._usage.enabled:
            self._record_path(*path)
        if kind == "builtin":
            y = self._reference(x)
            # Never hand the input back as the output.
            return (y.copy() if np.may_share_memory(x, y) else y,)
        if kind == "copy":
            return (np.array(x, copy=True, order="C"),)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = self._new_output(x.shape, self._out_dtype)
        threads = self._num_threads(x.size, self.min_work_per_thread)
        if kind == "native":
            core.convert(x, y, arg[0], arg[1], simd.state.level, threads)
        elif kind == "float8":
            core.convert_float8(x, y, arg[0], self._flags, arg[1], threads)
        else:
            core.lookup(x, arg, y, threads)
        return (y,)


KERNELS = {
    "RegisterCastKernel": (Cast,),
}
