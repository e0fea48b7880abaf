"""Backward graphs of custom operators, made of standard ONNX nodes.

    backward = olc.gradient_model(model)   # model: one node
    sess = ReferenceEvaluator(backward)    # or any ONNX runtime
    grad_a, grad_b = sess.run(None, {"A": a, "B": b, "grad_C": dc})

A :class:`GradRegistry` maps (domain, op_type) to a rule (a module per
operator: ``bias_gelu``, ``cdist``, ``group_query_attention``,
``matmul_nbits``); :func:`register_custom_gradients` adds the package's
rules to a registry; :func:`gradient_model` builds the backward model of a
single-node model with them.
"""

from __future__ import annotations

from .builder import GradContext
from .model import GRAD_OPSET, gradient_model
from .registry import GradBuilder, GradRegistry, default_registry, register_custom_gradients

__all__ = [
    "GRAD_OPSET",
    "GradBuilder",
    "GradContext",
    "GradRegistry",
    "default_registry",
    "gradient_model",
    "register_custom_gradients",
]
