"""Operator schemas this package adds to ``onnx.defs``.

Importing the package registers them once per process, so that
``onnx.checker``, ``onnx.shape_inference`` and ``onnx.helper`` accept models
that use them.  An operator that ``onnx.defs`` already defines (a newer
``onnx`` release, or another package) is left as it is.
"""

from __future__ import annotations

from .simplified_layer_normalization import simplified_layer_normalization_schema

__all__ = ["register_schemas", "registered_schemas"]

_registered: list = []


def register_schemas() -> tuple:
    """Register the schemas ``onnx.defs`` does not have yet; idempotent.

    Returns the schemas registered by this package (in this or an earlier call).
    """
    import onnx.defs

    if not _registered:
        for make in (simplified_layer_normalization_schema,):
            schema = make()
            if not onnx.defs.has(schema.name, schema.domain):
                onnx.defs.register_schema(schema)
                _registered.append(schema)
            else:
                # Already there: ours (an earlier import of a reloaded module)
                # or a standard one; either way it stays.
                _registered.append(onnx.defs.get_schema(schema.name, schema.domain))
    return tuple(_registered)


def registered_schemas() -> tuple:
    """The schemas :func:`register_schemas` registered or found."""
    return tuple(_registered)


register_schemas()
