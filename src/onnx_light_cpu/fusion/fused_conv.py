"""Conv, then a residual Add and/or an activation -> com.microsoft FusedConv.

Before::

    X, W [, B] ──> Conv ──> c ──> Add(c, Z) ──> s ──> Relu ──> Y
    X, W [, B] ──> Conv ──> c ──> Clip(min, max) ──> Y
    X, W [, B] ──> Conv ──> c ──> Add(c, Z) ──> Y

After::

    X, W [, B] [, Z] ──> FusedConv(activation, activation_params) ──> Y

FusedConv computes act(conv(X, W) + B + Z) in one pass over the output,
in that order, as ONNX Runtime's CPU kernel does and as the unfused nodes
round (for Relu, Clip and the Add, bit for bit).  The activations are those
FusedConv takes: Relu, Clip (its min and max constants, or the float
limits where absent), LeakyRelu, Sigmoid, Tanh and HardSigmoid (their
attributes).  Z is the Add's other operand and must have the Conv output's
shape, every dimension known and provably equal (FusedConv does not
broadcast it).  X is float32, FusedConv's one type.  ``c`` and ``s`` are
read by the next node only and are no graph outputs.  The fused node takes
the Conv's name and attributes.  ResNet's Conv + Add + Relu and
MobileNet's Conv + Clip(0, 6) are what ONNX Runtime's own Conv fusions
produce on its CPU provider.
"""

from __future__ import annotations

import numpy as np
from onnxscript.rewriter import pattern as rewriter

from . import _facts as facts
from ._engine import MS_DOMAIN, FusionPattern

FLOAT32_MAX = float(np.finfo(np.float32).max)
ACTIVATIONS = ("Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid")


def _conv(op, x):
    return op.Conv(x, _allow_other_inputs=True, _outputs=["c"])


def _activation(op, name, value):
    if name == "Clip":
        return getattr(op, name)(value, _allow_other_inputs=True, _outputs=["y"])
    return getattr(op, name)(value, _outputs=["y"])


def _patterns():
    """(name, pattern function) of every Conv [+ Add] [+ activation] form."""
    def act_only(name):
        return lambda op, x: _activation(op, name, _conv(op, x))

    def add_act(name, conv_first):
        def pattern(op, x, z):
            c = _conv(op, x)
            s = op.Add(c, z) if conv_first else op.Add(z, c)
            return _activation(op, name, s)
        return pattern

    def add_only(conv_first):
        def pattern(op, x, z):
            c = _conv(op, x)
            return op.Add(c, z, _outputs=["y"]) if conv_first else op.Add(z, c, _outputs=["y"])
        return pattern

    for name in ACTIVATIONS:  # the longest forms first
        yield add_act(name, True)
        yield add_act(name, False)
    for name in ACTIVATIONS:
        yield act_only(name)
    yield add_only(True)
    yield add_only(False)


def _activation_node(y):
    node = y.producer()
    return node if node.op_type in ACTIVATIONS and node.domain == "" else None


def _activation_params(node) -> tuple[str, list[float]] | None:
    """FusedConv's activation and activation_params for ``node``, or None
    where they are not constants.  A Clip before opset 11 has its bounds as
    attributes and one input; from 11 on, as optional inputs."""
    attrs = facts.attributes(node)
    if node.op_type == "LeakyRelu":
        return node.op_type, [float(attrs.get("alpha", 0.01))]
    if node.op_type == "HardSigmoid":
        return node.op_type, [float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))]
    if node.op_type != "Clip":
        return node.op_type, []
    bounds = [float(attrs.get("min", -FLOAT32_MAX)), float(attrs.get("max", FLOAT32_MAX))]
    for i in (1, 2):
        value = node.inputs[i] if len(node.inputs) > i else None
        if value is None:
            continue
        array = facts.constant(value)
        if array is None or array.size != 1:
            return None
        bounds[i - 1] = float(array.reshape(-1)[0])
    return "Clip", bounds


def _fusable_activation_next(value) -> bool:
    """Whether ``value``'s one reader is an activation FusedConv takes."""
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return False
    node = uses[0][0]
    return (node.op_type in ACTIVATIONS and node.domain == ""
            and _activation_params(node) is not None)


def _condition(context, x, c, y, z=None, **_):
    conv = c.producer()
    if conv.domain != "" or facts.elem_type(x) != facts.FLOAT or len(conv.inputs) > 3:
        return False
    if any(v is None for v in conv.inputs[:2]):
        return False
    act = _activation_node(y)
    if act is not None and _activation_params(act) is None:
        return False
    if z is None:
        return True
    if act is None and _fusable_activation_next(y):
        return False  # left to the longer form, matched at the activation
    c_dims, z_dims = facts.dims(c), facts.dims(z)
    return (z is not c and c_dims is not None and z_dims is not None
            and len(c_dims) == len(z_dims)
            and all(facts.same_dim(a, b) for a, b in zip(c_dims, z_dims)))


def _rewrite(op, x, c, y, z=None, **_):
    conv = c.producer()
    inputs = list(conv.inputs)
    if z is not None:
        inputs += [None] * (3 - len(inputs)) + [z]
    attrs = dict(conv.attributes)
    act = _activation_node(y)
    if act is not None:
        name, params = _activation_params(act)
        attrs["activation"] = name
        if params:
            attrs["activation_params"] = params
    return op.FusedConv(*inputs, _domain=MS_DOMAIN, _name=conv.name, **attrs)


FUSED_CONV = FusionPattern(
    "fused_conv", (MS_DOMAIN, "FusedConv"),
    tuple(rewriter.RewriteRule(p, _rewrite, _condition) for p in _patterns()),
    doc=__doc__)
