"""What the registry records of a kernel: the :class:`RegisteredKernel`
record derived from an adapter class, and the policy that picks the
com.microsoft family.  Imports nothing of the package, so that every
registry module can use it."""

from __future__ import annotations

import enum
import functools
import inspect
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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
    #: Where it is written, relative to the folder holding the package
    #: (``src/`` in a checkout): the adapter's module, the cores it calls
    #: (``.pyx``) and the C headers those declare.
    adapter_path: str = ""
    core_paths: tuple[str, ...] = ()
    header_paths: tuple[str, ...] = ()

    def accepts_opset(self, version: int) -> bool:
        return self.since_version <= version and (
            self.until_version is None or version <= self.until_version
        )


def table_domain(domain: str) -> str:
    """The key a domain has in the tables: '' and 'ai.onnx' are one domain."""
    return "" if domain == DEFAULT_DOMAIN else domain


PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding onnx_light_cpu/
EXTERN = re.compile(r'^cdef extern from "([\w/]+\.h)"', re.M)
# A core's declarations of a header: ``from olc_unary cimport ...`` reads
# include/<folder>/olc_unary.pxd.
CIMPORT = re.compile(r"^from (olc_\w+) cimport", re.M)
INCLUDE = "onnx_light_cpu/_kernels/include"


def _relative(path: str | Path) -> str:
    return Path(path).resolve().relative_to(PACKAGE_ROOT).as_posix()


def _cores_of(module: types.ModuleType) -> set[str]:
    """The extension modules ``module`` imports."""
    return {value.__name__ for value in vars(module).values()
            if isinstance(value, types.ModuleType)
            and value.__name__.startswith("onnx_light_cpu._kernels.")}


@functools.cache
def source_paths(adapter: type) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(adapter module, cores, headers) of an adapter class.  The cores are
    the extension modules its module imports, and those of the ``ops``
    modules it takes functions or classes from (MultiHeadAttention calls
    the attention engine through ``ops.attention``); a NAIVE adapter has
    none of its own.  The headers are those the cores declare with
    ``cdef extern from``."""
    module = sys.modules[adapter.__module__]
    cores = set()
    if not module.__name__.startswith("onnx_light_cpu.naive."):
        cores = _cores_of(module)
        for value in vars(module).values():
            source = getattr(value, "__module__", None) or ""
            if source.startswith("onnx_light_cpu.ops.") and source != module.__name__:
                cores |= _cores_of(sys.modules[source])
    core_paths = sorted(name.replace(".", "/") + ".pyx" for name in cores)
    headers = sorted({f"{INCLUDE}/{h}" for core in core_paths for h in _headers_of(core)})
    return _relative(inspect.getsourcefile(adapter)), tuple(core_paths), tuple(headers)


def _headers_of(core: str) -> set[str]:
    """The headers (relative to include/) a core declares, in its .pyx or
    in the .pxd files it cimports; none in a build without sources."""
    source = PACKAGE_ROOT / core
    if not source.is_file():
        return set()
    text = source.read_text()
    for name in CIMPORT.findall(text):
        text += "".join(p.read_text() for p in (PACKAGE_ROOT / INCLUDE).rglob(f"{name}.pxd"))
    return set(EXTERN.findall(text))


def record_of(adapter: type, registrar: str, implementation: str = "optimized") -> RegisteredKernel:
    """The inventory record of an adapter class, from its class attributes."""
    adapter_path, core_paths, header_paths = source_paths(adapter)
    return RegisteredKernel(
        domain=adapter.op_domain or DEFAULT_DOMAIN,
        op_type=adapter.op_type,
        device=DEVICE,
        name=adapter.kernel_name,
        element_types=tuple(adapter.element_types),
        since_version=adapter.since_version,
        until_version=adapter.until_version,
        implementation=implementation,
        registrar=registrar,
        adapter_path=adapter_path,
        core_paths=core_paths,
        header_paths=header_paths,
    )


Install = Callable[[RegisteredKernel, type], None]


def check_policy(policy) -> MicrosoftKernelImplementation:
    if not isinstance(policy, MicrosoftKernelImplementation):
        raise TypeError(
            "microsoft_implementation must be a MicrosoftKernelImplementation, "
            f"got {policy!r}"
        )
    return policy
