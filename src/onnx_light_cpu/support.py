"""The support inventory: what this package provides per custom operator.

One :class:`OperatorSupport` per com.microsoft operator the package runs and
per experimental default-domain operator (SimplifiedLayerNormalization):

- ``shape_inference``: the type-and-shape inference function of its
  :class:`~onnx_light_cpu.schemas.LightOpSchema` record (None while the
  operator has no record);
- ``peak_memory``: its memory estimate (``peak_memory_bytes`` bound to the
  operator, see :mod:`onnx_light_cpu.memory_estimate`), or None;
- ``fusion_patterns``: the names of the :mod:`onnx_light_cpu.fusion`
  patterns that produce the operator (``fuse(model, patterns=[name])``);
- ``gradient``: whether the package's default :class:`~onnx_light_cpu.GradRegistry`
  has a backward rule for it (:mod:`onnx_light_cpu.gradients`).

:func:`operator_support` builds the inventory from the kernel inventory,
the schema records and the memory estimates without registering or running
anything.  :func:`register_operator_support` registers the schemas with
``onnx.defs`` (once per process) and records the inventory as the one in
effect; every kernel registration helper calls it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

__all__ = [
    "FUSION_PATTERNS",
    "OperatorSupport",
    "operator_support",
    "register_operator_support",
]

MS_DOMAIN = "com.microsoft"
EXPERIMENTAL_DOMAIN = ""

#: (domain, op_type) -> names of the :mod:`onnx_light_cpu.fusion` patterns
#: that produce it (``fuse(model, [name])``; tests/fusion holds this table
#: equal to ``fusion.PATTERNS``, which this layer cannot import).
FUSION_PATTERNS: dict[tuple[str, str], tuple[str, ...]] = {
    (MS_DOMAIN, "BiasGelu"): ("bias_gelu",),
    (MS_DOMAIN, "CDist"): ("cdist",),
    (MS_DOMAIN, "FusedConv"): ("fused_conv",),
    (MS_DOMAIN, "GroupQueryAttention"): ("group_query_attention",),
    (MS_DOMAIN, "LinearAttention"): ("linear_attention",),
    (MS_DOMAIN, "MatMulNBits"): ("matmul_nbits_bias",),
    (MS_DOMAIN, "QuickGelu"): ("quick_gelu",),
}


class OperatorSupport(NamedTuple):
    """What the package provides for one operator (see the module doc)."""

    domain: str
    op_type: str
    shape_inference: Callable | None
    peak_memory: Callable | None
    fusion_patterns: tuple[str, ...]
    gradient: bool


def _custom_operators() -> set[tuple[str, str]]:
    """(domain, op_type) of every com.microsoft and experimental operator the
    package runs: those with a schema record (tests/test_schemas.py holds the
    records equal to the com.microsoft kernel inventory)."""
    from .schemas import custom_op_schemas, experimental_op_schemas

    ops = {(MS_DOMAIN, r.name) for r in custom_op_schemas(init_doc=False)}
    ops |= {(EXPERIMENTAL_DOMAIN, r.name) for r in experimental_op_schemas(init_doc=False)}
    return ops


def _inference(domain: str, op_type: str) -> Callable | None:
    from .schemas import custom_op_schemas, experimental_op_schemas

    select = custom_op_schemas if domain == MS_DOMAIN else experimental_op_schemas
    records = [r for r in select(op_type, init_doc=False) if r.name == op_type]
    if not records:
        return None
    # the latest version's function
    return max(records, key=lambda r: r.since_version).infer


def operator_support() -> tuple[OperatorSupport, ...]:
    """One :class:`OperatorSupport` per custom and experimental operator,
    sorted by (domain, op_type); registers and runs nothing."""
    from .gradients import default_registry
    from .memory_estimate import memory_function

    gradients = default_registry()
    return tuple(
        OperatorSupport(domain, op_type, _inference(domain, op_type),
                        memory_function(domain, op_type),
                        FUSION_PATTERNS.get((domain, op_type), ()),
                        (domain, op_type) in gradients)
        for domain, op_type in sorted(_custom_operators()))


_REGISTERED: list[tuple[OperatorSupport, ...]] = []


def register_operator_support() -> tuple[OperatorSupport, ...]:
    """Registers the schemas (``onnx.defs``, once per process) and keeps the
    inventory of :func:`operator_support` as the one in effect; idempotent
    and cheap after the first call.  Returns the inventory."""
    if not _REGISTERED:
        from .schemas import register_schemas

        register_schemas()
        _REGISTERED.append(operator_support())
    return _REGISTERED[0]


def registered_operator_support() -> tuple[OperatorSupport, ...]:
    """The inventory :func:`register_operator_support` recorded (empty
    before its first call)."""
    return _REGISTERED[0] if _REGISTERED else ()
