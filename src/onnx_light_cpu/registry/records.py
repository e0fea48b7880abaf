"""What the registry records of a kernel: the :class:`RegisteredKernel`
record derived from an adapter class, and the policy that picks the
com.microsoft family.  Imports nothing of the package, so that every
registry module can use it."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

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
