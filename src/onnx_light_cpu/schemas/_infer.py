"""Small helpers shared by the shape-inference functions of the schemas.

A shape is a list of dims; a dim is an ``int`` (static), a ``str`` (symbolic)
or ``None`` (unknown).  ``None`` as a whole shape means the rank is unknown.
"""

from __future__ import annotations

import onnx


def input_type(ctx, i: int):
    """The ``TypeProto`` of input ``i``, or None when absent or not known."""
    if i >= ctx.get_num_inputs() or not ctx.has_input(i):
        return None
    return ctx.get_input_type(i)


def elem_type(ctx, i: int) -> int:
    """Input ``i``'s element type (``TensorProto`` enum), 0 when unknown."""
    t = input_type(ctx, i)
    return t.tensor_type.elem_type if t is not None else 0


def shape(ctx, i: int) -> list | None:
    """Input ``i``'s shape as a list of dims, None when absent or of unknown rank."""
    t = input_type(ctx, i)
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    return [_dim(d) for d in t.tensor_type.shape.dim]


def _dim(d) -> int | str | None:
    if d.HasField("dim_value"):
        return d.dim_value
    if d.HasField("dim_param"):
        return d.dim_param
    return None


def attr(ctx, name: str, default=None):
    """An attribute's value (int, float, str, list), or ``default``."""
    a = ctx.get_attribute(name)
    if a is None:
        return default
    return onnx.helper.get_attribute_value(a)


def wants_output(ctx, i: int) -> bool:
    return i < ctx.get_num_outputs() and ctx.has_output(i)


def set_output(ctx, i: int, elem: int, dims: list | None) -> None:
    """Set output ``i`` (when the node has it) to ``elem`` with ``dims``
    (None: rank unknown)."""
    if not wants_output(ctx, i) or not elem:
        return
    t = onnx.TypeProto()
    t.tensor_type.elem_type = elem
    if dims is not None:
        t.tensor_type.shape.SetInParent()
        for d in dims:
            nd = t.tensor_type.shape.dim.add()
            if isinstance(d, int):
                nd.dim_value = d
            elif isinstance(d, str):
                nd.dim_param = d
    ctx.set_output_type(i, t)


def merge_dim(op: str, what: str, a, b):
    """The dim two equal dims share; ValueError when both are static and differ."""
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise ValueError(f"{op}: {what}: {a} != {b}")
        return a
    if isinstance(a, int):
        return a
    if isinstance(b, int):
        return b
    return a if a is not None else b


def product(op: str, *dims):
    """The product of dims: an int when all are static, a symbolic name
    ("N*H") when the factors are known, else None."""
    if all(isinstance(d, int) for d in dims):
        out = 1
        for d in dims:
            out *= d
        return out
    if any(d is None for d in dims):
        return None
    return "*".join(str(d) for d in dims if d != 1)


def add(a, b):
    """a + b for dims: int when both static, "a+b" when both known."""
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if a is None or b is None:
        return None
    if a == 0:
        return b
    if b == 0:
        return a
    return f"{a}+{b}"


def check_rank(op: str, name: str, dims: list | None, ranks) -> None:
    if dims is not None and len(dims) not in ranks:
        allowed = " or ".join(str(r) for r in ranks)
        raise ValueError(f"{op}: input '{name}' must have rank {allowed}, got {len(dims)}")
