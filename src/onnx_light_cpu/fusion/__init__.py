"""Graph rewrites: pure functions from a model to a new model.

    from onnx_light_cpu.fusion import fuse_matmul_nbits_bias
    model = fuse_matmul_nbits_bias(model)   # MatMulNBits + Add(bias[N]) -> one MatMulNBits

A rewrite never modifies the model it is given and leaves every graph
input, output and node it does not match as it was.
"""

from __future__ import annotations

from .matmul_nbits_bias import fuse_matmul_nbits_bias

__all__ = ["fuse_matmul_nbits_bias"]
