"""Adapters (``OpRun`` subclasses named after their operator) and the
registrars that put them in the inventory."""

from __future__ import annotations

from ..naive import bias_gelu as naive_bias_gelu
from ..naive import causal_conv_with_state as naive_causal_conv_with_state
from ..naive import cdist as naive_cdist
from ..naive import group_query_attention as naive_group_query_attention
from ..naive import linear_attention as naive_linear_attention
from ..naive import multi_head_attention as naive_multi_head_attention
from ..naive import skip_norm as naive_skip_norm
from ..registry.inventory import MicrosoftKernelImplementation, record_of
from . import (
    attention,
    bias_gelu,
    binary,
    cast,
    causal_conv_with_state,
    cdist,
    gather_block_quantized,
    group_query_attention,
    linear_attention,
    matmul,
    matmul_integer,
    matmul_nbits,
    moe,
    multi_head_attention,
    normalization,
    reduce,
    rotary_embedding,
    skip_norm,
    swiglu,
    tensor,
    tree_ensemble,
    unary,
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
)


def _register_standard(policy, install) -> None:
    """The kernels with one implementation whatever the policy."""
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
)


def _register_microsoft(policy, install) -> None:
    """The com.microsoft kernels of the policy's family."""
    naive = policy is MicrosoftKernelImplementation.NAIVE
    implementation = "naive" if naive else "optimized"
    for optimized_family, naive_family in MICROSOFT_FAMILIES:
        for registrar, adapters in (naive_family if naive else optimized_family).KERNELS.items():
            for adapter in adapters:
                install(record_of(adapter, registrar, implementation), adapter)


#: Called in order by every registration pass: ``registrar(policy, install)``.
REGISTRARS = (_register_standard, _register_microsoft)
