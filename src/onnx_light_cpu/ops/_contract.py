"""What an adapter declares about its node: its inputs and its attributes.

An adapter lists them as class attributes::

    class CDist(KernelOp):
        inputs = (Input("A", types=(T.FLOAT, T.DOUBLE), ranks=(2,)),
                  Input("B", like=0, ranks=(2,)))
        attributes = (Attr("metric", "string", "sqeuclidean",
                           allowed=("sqeuclidean", "euclidean")),)

and :class:`~onnx_light_cpu.ops._base.KernelOp` does the rest: it parses
the attributes once, in the constructor, into instance attributes of the
same name (``self.metric``), keeps the first invalid one for every run to
raise (a constructor error would break building the evaluator), and checks
the inputs on every run before the adapter sees them.  The messages have
one format, naming the operator and the input or attribute::

    CDist: input 1 ('B') has element type float64, expected float32 like input 0
    CDist: input 0 ('A') has rank 3 (shape (2, 3, 4)), expected rank 2
    CDist: attribute metric must be one of sqeuclidean, euclidean, got 'cosine'

What a declaration cannot say (shapes that must agree, values) stays in
the adapter, written in the same style with ``KernelOp._input_error``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto

#: ``Attr.default`` of an attribute the node must set.
REQUIRED = object()

_KINDS = {
    "int": (AttributeProto.INT,),
    "flag": (AttributeProto.INT,),
    "float": (AttributeProto.FLOAT, AttributeProto.INT),
    "string": (AttributeProto.STRING,),
    "ints": (AttributeProto.INTS,),
    "floats": (AttributeProto.FLOATS, AttributeProto.INTS),
    "strings": (AttributeProto.STRINGS,),
    "tensor": (AttributeProto.TENSOR,),
}


@dataclass(frozen=True)
class Input:
    """One input of an operator.

    ``types``: the ONNX element types (TensorProto codes) allowed; empty
    means any (or, with ``like``, that input's type).  ``like``: the index
    of an earlier input whose element type this one must have.  ``ranks``:
    the ranks allowed; empty means any.  ``optional``: the node may leave
    it out (an empty name) or stop before it.  ``variadic``: this input and
    every later one share the declaration (at least one unless optional).
    """

    name: str
    types: tuple[int, ...] = ()
    like: int | None = None
    ranks: tuple[int, ...] = ()
    optional: bool = False
    variadic: bool = False


@dataclass(frozen=True)
class Attr:
    """One attribute: its ``kind`` (int, flag, float, string, ints, floats,
    strings, tensor), its ``default`` (``REQUIRED`` when the node must set
    it) and the values ``allowed`` (empty: any of its kind; a flag is 0 or
    1, read as a bool)."""

    name: str
    kind: str
    default: object = REQUIRED
    allowed: tuple = ()

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"Attr {self.name}: unknown kind {self.kind!r}")


def type_string(element_type: int) -> str:
    """'tensor(float)' style name of an ONNX element type."""
    name = TensorProto.DataType.Name(element_type).lower()
    return "tensor(float)" if name == "float" else f"tensor({name})"


def _type_name(element_type: int) -> str:
    return onnx.helper.tensor_dtype_to_np_dtype(element_type).name \
        if element_type != TensorProto.BFLOAT16 else "bfloat16"


def _value(att: AttributeProto):
    value = onnx.helper.get_attribute_value(att)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    if att.type == AttributeProto.TENSOR:
        return onnx.numpy_helper.to_array(value)
    return value


def parse_attributes(node: onnx.NodeProto, declared: tuple[Attr, ...]) -> tuple[dict, str | None]:
    """The declared attributes' values (defaults for those the node leaves
    out) and the first problem found, if any (without the operator name)."""
    # An attribute linked to a calling function's (ref_attr_name) has no value
    # here: the instance KernelOp makes for the caller's values parses it.
    given = {att.name: att for att in node.attribute if not att.ref_attr_name}
    values, problem = {}, None

    def reject(message: str) -> None:
        nonlocal problem
        problem = problem or message

    for attr in declared:
        att = given.get(attr.name)
        if att is None:
            if attr.default is REQUIRED:
                reject(f"attribute {attr.name} is required")
                values[attr.name] = None
            else:
                values[attr.name] = attr.default
            continue
        if att.type not in _KINDS[attr.kind]:
            kind = AttributeProto.AttributeType.Name(att.type).lower()
            reject(f"attribute {attr.name} must be of kind {attr.kind}, got {kind}")
            values[attr.name] = attr.default if attr.default is not REQUIRED else None
            continue
        value = _value(att)
        if attr.kind == "float":
            value = float(value)
        elif attr.kind == "floats":
            value = [float(v) for v in value]
        if attr.kind == "flag" and value not in (0, 1):
            reject(f"attribute {attr.name} must be 0 or 1, got {value}")
        elif attr.allowed and value not in attr.allowed:
            reject(f"attribute {attr.name} must be one of "
                   f"{', '.join(str(a) for a in attr.allowed)}, got {value!r}")
        if attr.kind == "flag":
            value = bool(value)
        values[attr.name] = value
    return values, problem


class InputChecks:
    """The declared inputs of a class, compiled for the per-run check."""

    __slots__ = ("declared", "required", "at_most", "checks")

    def __init__(self, declared: tuple[Input, ...]):
        self.declared = declared
        variadic = next((i for i, d in enumerate(declared) if d.variadic), None)
        self.at_most = None if variadic is not None else len(declared)
        self.required = tuple(i for i, d in enumerate(declared) if not d.optional)
        # (index, allowed numpy dtypes or None, like, ranks) per input that
        # has something to check
        self.checks = tuple(
            (i, _dtypes(d.types), d.like, frozenset(d.ranks))
            for i, d in enumerate(declared) if d.types or d.like is not None or d.ranks)

    def declaration(self, index: int) -> Input:
        if index < len(self.declared):
            return self.declared[index]
        return self.declared[-1]  # a variadic tail

    def problem(self, args: tuple) -> tuple[int, str, type] | None:
        """(input index, message, exception type) of the first input that
        breaks its declaration, or None."""
        if self.at_most is not None and len(args) > self.at_most:
            return (self.at_most, f"is one input too many: the operator takes at most "
                                  f"{self.at_most}", ValueError)
        for i, dtypes, like, ranks in self.checks:
            if i >= len(args) or args[i] is None:
                continue
            a = args[i]
            if like is not None and like < len(args) and args[like] is not None:
                if a.dtype != args[like].dtype:
                    return (i, f"has element type {a.dtype}, expected {args[like].dtype} "
                               f"like input {like}", TypeError)
            elif dtypes is not None and a.dtype not in dtypes:
                return (i, f"has element type {a.dtype}, expected one of "
                           f"{', '.join(dtypes[t] for t in dtypes)}", TypeError)
            if ranks and a.ndim not in ranks:
                expected = (f"rank {next(iter(ranks))}" if len(ranks) == 1
                            else f"one of ranks {', '.join(map(str, sorted(ranks)))}")
                return (i, f"has rank {a.ndim} (shape {a.shape}), expected {expected}",
                        ValueError)
        return None


def _dtypes(types: tuple[int, ...]) -> dict[np.dtype, str] | None:
    """numpy dtype -> its name, for the element types in ``types``."""
    if not types:
        return None
    from ml_dtypes import bfloat16

    out = {}
    for t in types:
        dtype = (np.dtype(bfloat16) if t == TensorProto.BFLOAT16
                 else np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t)))
        out[dtype] = _type_name(t)
    return out
