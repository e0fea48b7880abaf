"""Adapters (``OpRun`` subclasses named after their operator) and the
registrars that put them in the inventory."""

from __future__ import annotations

from ..registry.inventory import record_of
from . import binary, cast, reduce, tensor, unary

#: Family modules of the ai.onnx kernels; each has ``KERNELS``, a dict from
#: registrar name to the tuple of adapter classes it installs.
FAMILIES = (
    unary,
    tensor,
    reduce,
    cast,
    binary,
)


def _register_standard(policy, install) -> None:
    """The ai.onnx kernels: one implementation whatever the policy."""
    for family in FAMILIES:
        for registrar, adapters in family.KERNELS.items():
            for adapter in adapters:
                install(record_of(adapter, registrar), adapter)


#: Called in order by every registration pass: ``registrar(policy, install)``.
REGISTRARS = (_register_standard,)
