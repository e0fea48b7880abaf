"""The kernel inventory: what a registration pass installs.

Every family module in :mod:`onnx_light_cpu.ops` contributes a registrar
``register(policy, install)`` that calls ``install(record, adapter_class)``
once per kernel.  Installing into a table and listing the inventory run the
same pass with a different ``install``, so they cannot disagree.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Callable

DEFAULT_DOMAIN = "ai.onnx"
MICROSOFT_DOMAIN = "com.microsoft"
DEVICE = "CPU"


class MicrosoftKernelImplementation(enum.Enum):
    """Which family of the com.microsoft kernels a registration installs."""

    OPTIMIZED = "optimized"
    NAIVE = "naive"


@dataclass(frozen=True)
class RegisteredKernel:
    """One kernel a registration installs (immutable)."""

    domain: str
    op_type: str
    device: str
    name: str
    element_types: tuple[str, ...]
    since_version: int
    until_version: int | None
    implementation: str
    registrar: str

    def accepts_opset(self, version: int) -> bool:
        return self.since_version <= version and (
            self.until_version is None or version <= self.until_version
        )


def table_domain(domain: str) -> str:
    """The key a domain has in the tables: '' and 'ai.onnx' are one domain."""
    return "" if domain == DEFAULT_DOMAIN else domain


def record_of(adapter: type, registrar: str, implementation: str = "optimized") -> RegisteredKernel:
    """The inventory record of an adapter class, from its class attributes."""
    return RegisteredKernel(
        domain=adapter.op_domain or DEFAULT_DOMAIN,
        op_type=adapter.__name__,
        device=DEVICE,
        name=adapter.kernel_name,
        element_types=tuple(adapter.element_types),
        since_version=adapter.since_version,
        until_version=adapter.until_version,
        implementation=implementation,
        registrar=registrar,
    )


Install = Callable[[RegisteredKernel, type], None]


def check_policy(policy) -> MicrosoftKernelImplementation:
    if not isinstance(policy, MicrosoftKernelImplementation):
        raise TypeError(
            "microsoft_implementation must be a MicrosoftKernelImplementation, "
            f"got {policy!r}"
        )
    return policy


def registration_pass(policy: MicrosoftKernelImplementation, install: Install) -> None:
    """Run every registrar once for one implementation family."""
    from ..ops import REGISTRARS  # the ops import the registry's base pieces

    check_policy(policy)
    for registrar in REGISTRARS:
        registrar(policy, install)


def registered_kernels(
    microsoft_implementation: MicrosoftKernelImplementation = MicrosoftKernelImplementation.OPTIMIZED,
) -> tuple[RegisteredKernel, ...]:
    """Every kernel a registration with this policy installs; installs nothing."""
    records: list[RegisteredKernel] = []
    registration_pass(microsoft_implementation, lambda record, _cls: records.append(record))
    return tuple(records)


def registered_kernel_names() -> dict[str, str]:
    """Kernel name per operator.  An operator present in several domains is
    keyed ``domain::op_type`` outside the default domain."""
    records = registered_kernels()
    domains: dict[str, set[str]] = {}
    for r in records:
        domains.setdefault(r.op_type, set()).add(r.domain)
    names = {}
    for r in records:
        shared = len(domains[r.op_type]) > 1 and r.domain != DEFAULT_DOMAIN
        names[f"{r.domain}::{r.op_type}" if shared else r.op_type] = r.name
    return names
