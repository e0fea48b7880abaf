"""Cython/SIMD CPU kernels for ``onnx.reference.ReferenceEvaluator``.

    import onnx_light_cpu as olc
    olc.register_kernels_global()
    sess = onnx.reference.ReferenceEvaluator(model)   # runs our kernels
"""

from __future__ import annotations

from . import schemas as _schemas  # registers the onnx.defs schemas
from ._kernels._cpu import BUILT_WITH_OPENMP
from .generation import DecoderSpec, GenerationStats, Generator, decoder_spec
from .gradients import GradRegistry, gradient_model, register_custom_gradients
from .memory_estimate import (
    ModelPeakMemory,
    NodePeakMemory,
    PeakMemory,
    peak_memory,
    peak_memory_bytes,
)
from .registry import hook as _hook
from .registry.api import (
    clear_used_kernel_names,
    get_num_threads_for_session,
    register_kernel_for_session,
    register_kernel_global,
    register_kernels,
    register_kernels_for_session,
    register_kernels_global,
    set_kernel_usage_recording,
    set_num_threads_for_session,
    unregister_kernels_global,
    used_kernel_names,
    used_kernel_paths,
)
from .registry.hook import MissingOperatorsError
from .registry.inventory import registered_kernel_names, registered_kernels
from .registry.records import MicrosoftKernelImplementation, RegisteredKernel
from .schemas import (
    LightOpSchema,
    custom_op_schemas,
    experimental_op_schemas,
    operator_schema_lookup,
)
from .simd import available_simd_levels, simd_level
from .support import OperatorSupport, operator_support, register_operator_support
from .threads import get_default_num_threads, set_default_num_threads

__version__ = "0.1.0"

_hook.install()

#: Names of :mod:`onnx_light_cpu.fusion` this module exports.  They load on
#: first use: the fusion engine imports onnxscript and onnx-ir, 0.45 s on
#: top of the package's 1.3 s import, which running kernels never needs.
_FUSION_EXPORTS = ("FusionPattern", "FusionResult", "fuse")


def __getattr__(name: str):
    if name in _FUSION_EXPORTS:
        from . import fusion

        return getattr(fusion, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "MissingOperatorsError",
    "BUILT_WITH_OPENMP",
    "DecoderSpec",
    "FusionPattern",
    "FusionResult",
    "GenerationStats",
    "Generator",
    "GradRegistry",
    "LightOpSchema",
    "MicrosoftKernelImplementation",
    "ModelPeakMemory",
    "NodePeakMemory",
    "OperatorSupport",
    "PeakMemory",
    "RegisteredKernel",
    "available_simd_levels",
    "clear_used_kernel_names",
    "custom_op_schemas",
    "decoder_spec",
    "experimental_op_schemas",
    "fuse",
    "get_default_num_threads",
    "get_num_threads_for_session",
    "gradient_model",
    "operator_schema_lookup",
    "operator_support",
    "peak_memory",
    "peak_memory_bytes",
    "register_custom_gradients",
    "register_operator_support",
    "register_kernel_for_session",
    "register_kernel_global",
    "register_kernels",
    "register_kernels_for_session",
    "register_kernels_global",
    "registered_kernel_names",
    "registered_kernels",
    "set_default_num_threads",
    "set_kernel_usage_recording",
    "set_num_threads_for_session",
    "simd_level",
    "unregister_kernels_global",
    "used_kernel_names",
    "used_kernel_paths",
]
