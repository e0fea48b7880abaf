"""Operator schemas this package adds to ``onnx.defs``.

Each family module has ``schemas()``, the :class:`LightOpSchema` records of
its operators.  Importing the package registers them once per process, so
that ``onnx.checker``, ``onnx.shape_inference`` and ``onnx.helper`` accept
models that use them.  An operator that ``onnx.defs`` already defines (a newer
``onnx`` release, or another package) is left as it is.
"""

from __future__ import annotations

import functools

from . import (
    microsoft_attention,
    microsoft_misc,
    microsoft_quantization,
    simplified_layer_normalization,
)
from ._record import LightAttribute, LightOpSchema, LightParameter, LightTypeConstraint

__all__ = [
    "LightAttribute",
    "LightOpSchema",
    "LightParameter",
    "LightTypeConstraint",
    "custom_op_schemas",
    "experimental_op_schemas",
    "operator_schema_lookup",
    "register_schemas",
    "registered_schemas",
]

#: com.microsoft families, then the experimental default-domain ones.
MICROSOFT_FAMILIES = (microsoft_attention, microsoft_quantization, microsoft_misc)
EXPERIMENTAL_FAMILIES = (simplified_layer_normalization,)

_registered: list = []


@functools.cache
def _records(family) -> tuple:
    """A family's records, built once: each record (its inference function
    included) is then one object wherever it is looked up."""
    return family.schemas()


def _select(families, op_type: str, init_doc: bool) -> tuple:
    records = [r for family in families for r in _records(family)
               if not op_type or r.name == op_type]
    if not init_doc:
        records = [r.without_doc() for r in records]
    return tuple(sorted(records, key=lambda r: (r.name, r.since_version)))


def custom_op_schemas(op_type: str = "", init_doc: bool = True) -> tuple:
    """The :class:`LightOpSchema` records of the com.microsoft operators this
    package runs (only ``op_type``'s when given; ``init_doc=False`` leaves
    the docs empty)."""
    return _select(MICROSOFT_FAMILIES, op_type, init_doc)


def experimental_op_schemas(op_type: str = "", init_doc: bool = True) -> tuple:
    """The records of the non-standard default-domain operators this package
    runs (SimplifiedLayerNormalization)."""
    return _select(EXPERIMENTAL_FAMILIES, op_type, init_doc)


def operator_schema_lookup(op_type: str, domain: str = "", version: int | None = None):
    """The ``onnx.defs.OpSchema`` of ``op_type`` in ``domain`` ("" and
    "ai.onnx" are the default domain) at opset ``version`` (latest when
    None): standard, com.microsoft and experimental schemas alike.  Raises
    ``KeyError`` when none is known."""
    import onnx.defs

    register_schemas()
    domain = "" if domain == "ai.onnx" else domain
    try:
        if version is None:
            return onnx.defs.get_schema(op_type, domain)
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError:
        raise KeyError(f"no schema for {domain or 'ai.onnx'}::{op_type}"
                       + (f" at opset {version}" if version is not None else "")) from None


def register_schemas() -> tuple:
    """Register the schemas ``onnx.defs`` does not have yet; idempotent.

    Returns the ``OpSchema`` objects of this package's operators as
    ``onnx.defs`` holds them (registered now, earlier, or by onnx itself).
    """
    import onnx.defs

    # onnx.reference builds a by-name table of every schema once, at its
    # import, and refuses a name two domains define: it must see onnx's
    # schemas before com.microsoft Attention, Gelu, QuantizeLinear, Range, ...
    # join their ai.onnx namesakes.
    import onnx.reference.op_run  # noqa: F401

    if not _registered:
        for record in custom_op_schemas() + experimental_op_schemas():
            if not onnx.defs.has(record.name, record.domain):
                onnx.defs.register_schema(record.to_onnx())
            _registered.append(onnx.defs.get_schema(record.name, record.domain))
    return tuple(_registered)


def registered_schemas() -> tuple:
    """The schemas :func:`register_schemas` registered or found."""
    return tuple(_registered)


register_schemas()
