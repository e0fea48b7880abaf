"""The kernel inventory: what a registration pass installs.

Each registrar of :data:`REGISTRARS` calls ``install(record, adapter_class)``
once per kernel of its families.  Installing into a table and listing the
inventory run the same pass with a different ``install``, so they cannot
disagree.  This is the one module that knows every adapter: the registry
imports the adapters (``ops``, ``naive``), never the other way round.
"""

from __future__ import annotations

from ..naive import bias_gelu as naive_bias_gelu
from ..naive import causal_conv_with_state as naive_causal_conv_with_state
from ..naive import cdist as naive_cdist
from ..naive import embed_layer_norm as naive_embed_layer_norm
from ..naive import group_query_attention as naive_group_query_attention
from ..naive import linear_attention as naive_linear_attention
from ..naive import microsoft_attention as naive_microsoft_attention
from ..naive import multi_head_attention as naive_multi_head_attention
from ..naive import qattention as naive_qattention
from ..naive import qembed_layer_norm as naive_qembed_layer_norm
from ..naive import skip_norm as naive_skip_norm
from ..ops import (
    attention,
    bias_gelu,
    binary,
    cast,
    causal_conv_with_state,
    cdist,
    control_flow,
    conv,
    embed_layer_norm,
    fused_matmul,
    gather_block_quantized,
    group_query_attention,
    indexing,
    linear_attention,
    matmul,
    matmul_integer,
    matmul_nbits,
    microsoft_activation,
    microsoft_attention,
    microsoft_tensor,
    moe,
    multi_head_attention,
    normalization,
    pooling,
    qattention,
    qembed_layer_norm,
    quantization,
    recurrent,
    reduce,
    resize,
    rotary_embedding,
    shape,
    skip_norm,
    swiglu,
    tensor,
    tree_ensemble,
    unary,
)
from .records import (
    DEFAULT_DOMAIN,
    Install,
    MicrosoftKernelImplementation,
    RegisteredKernel,
    check_policy,
    record_of,
)

#: Family modules with one implementation whatever the policy (the ai.onnx
#: kernels, and com.microsoft ones the policy does not cover, such as
#: GatherBlockQuantized); each has ``KERNELS``, a dict from registrar name to
#: the tuple of adapter classes it installs.
FAMILIES = (
    unary,
    tensor,
    reduce,
    cast,
    binary,
    matmul,
    matmul_integer,
    normalization,
    gather_block_quantized,
    matmul_nbits,
    swiglu,
    rotary_embedding,
    causal_conv_with_state,
    attention,
    tree_ensemble,
    linear_attention,
    moe,
    recurrent,
    control_flow,
    shape,
    indexing,
    resize,
    pooling,
    conv,
)


def _register_standard(policy, install) -> None:
    """The kernels with one implementation whatever the policy (which is
    therefore not read)."""
    for family in FAMILIES:
        for registrar, adapters in family.KERNELS.items():
            for adapter in adapters:
                install(record_of(adapter, registrar), adapter)


#: com.microsoft families as (optimized module, naive module) pairs, each with
#: ``KERNELS``; one registration pass installs one of the two (the policy).
MICROSOFT_FAMILIES = (
    (skip_norm, naive_skip_norm),
    (bias_gelu, naive_bias_gelu),
    (cdist, naive_cdist),
    (causal_conv_with_state.microsoft_family, naive_causal_conv_with_state),
    (linear_attention.microsoft_family, naive_linear_attention),
    (multi_head_attention, naive_multi_head_attention),
    (group_query_attention, naive_group_query_attention),
    (microsoft_attention, naive_microsoft_attention),
    (embed_layer_norm, naive_embed_layer_norm),
    (qattention, naive_qattention),
    (qembed_layer_norm, naive_qembed_layer_norm),
)


#: com.microsoft families of one kernel each (no NAIVE twin): the Microsoft
#: registration installs them whatever the policy.
MICROSOFT_SINGLE_FAMILIES = (microsoft_tensor, microsoft_activation, fused_matmul, quantization,
                             conv.microsoft_family)


def _register_microsoft(policy, install) -> None:
    """The com.microsoft kernels of the policy's family, then those that
    have one implementation."""
    naive = policy is MicrosoftKernelImplementation.NAIVE
    implementation = "naive" if naive else "optimized"
    for optimized_family, naive_family in MICROSOFT_FAMILIES:
        for registrar, adapters in (naive_family if naive else optimized_family).KERNELS.items():
            for adapter in adapters:
                install(record_of(adapter, registrar, implementation), adapter)
    for family in MICROSOFT_SINGLE_FAMILIES:
        for registrar, adapters in family.KERNELS.items():
            for adapter in adapters:
                install(record_of(adapter, registrar), adapter)


#: Called in order by every registration pass: ``registrar(policy, install)``.
REGISTRARS = (_register_standard, _register_microsoft)


def registration_pass(policy: MicrosoftKernelImplementation, install: Install) -> None:
    """Run every registrar once for one implementation family."""
    check_policy(policy)
    for registrar in REGISTRARS:
        registrar(policy, install)


OPTIMIZED = MicrosoftKernelImplementation.OPTIMIZED


def registered_kernels(
    microsoft_implementation: MicrosoftKernelImplementation = OPTIMIZED,
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
