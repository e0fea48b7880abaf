"""Schemas of the com.microsoft ... operators (ONNX Runtime 1.32 contract)."""

from __future__ import annotations


def schemas() -> tuple:
    """The LightOpSchema records of this family."""
    return ()
