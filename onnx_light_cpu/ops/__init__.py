"""Adapters (``OpRun`` subclasses named after their operator) and the
registrars that put them in the inventory."""

from __future__ import annotations

from ..registry.inventory import record_of
from .unary import UNARY_KERNELS


def _register_standard(policy, install) -> None:
    """The ai.onnx kernels: one implementation whatever the policy."""
    for registrar, adapter in UNARY_KERNELS.items():
        install(record_of(adapter, registrar), adapter)


#: Called in order by every registration pass: ``registrar(policy, install)``.
REGISTRARS = (_register_standard,)
