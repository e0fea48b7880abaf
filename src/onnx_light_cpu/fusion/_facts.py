"""What the rules' conditions read: element types, shapes, constants,
attributes and operator versions of the matched values and nodes.

Types and shapes are the model's own annotations completed by ONNX shape
inference, run once per :func:`~onnx_light_cpu.fusion.fuse` call on a copy
of the model; the inferred facts sit in each value's ``meta`` (never
serialized), so the result carries only the annotations it came with.
Inside model-local functions only the function's own ``value_info``
speaks: shape inference does not annotate function bodies.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx_ir import convenience

_FACT = "onnx_light_cpu.fusion.inferred"
#: meta key of a function's subgraph: the function's opset imports
OPSET_IMPORTS = "onnx_light_cpu.fusion.opset_imports"

FLOAT = ir.DataType.FLOAT
FLOAT16 = ir.DataType.FLOAT16
BFLOAT16 = ir.DataType.BFLOAT16
DOUBLE = ir.DataType.DOUBLE


def subgraphs(node: ir.Node):
    """The If/Loop/Scan bodies (any GRAPH or GRAPHS attribute) of ``node``."""
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            yield attr.value
        elif attr.type == ir.AttributeType.GRAPHS:
            yield from attr.value


def attach_inferred_facts(model: ir.Model, proto: onnx.ModelProto) -> None:
    """Runs ONNX shape inference on a copy of ``proto`` and keeps, in
    ``value.meta``, the type and shape it found for each graph input and
    node output of ``model`` (its deserialized twin).  The inferred model
    has the same nodes in the same order: the walk pairs them by position,
    so equal names in sibling subgraphs cannot mix."""
    try:
        inferred = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto))
    except Exception:  # an invalid or too large model: its annotations alone
        return
    _pair(model.graph, inferred.graph)


def _pair(graph: ir.Graph, inferred: ir.Graph) -> None:
    nodes, twins = list(graph), list(inferred)
    if [n.op_type for n in nodes] != [n.op_type for n in twins]:
        return
    for value, twin in zip(graph.inputs, inferred.inputs):
        _keep_fact(value, twin)
    for node, twin in zip(nodes, twins):
        for value, other in zip(node.outputs, twin.outputs):
            _keep_fact(value, other)
        for sub, other in zip(subgraphs(node), subgraphs(twin)):
            _pair(sub, other)


def _keep_fact(value: ir.Value, twin: ir.Value) -> None:
    if twin.type is not None or twin.shape is not None:
        value.meta[_FACT] = (twin.dtype, twin.shape)


def carry_facts(old: ir.Value, new: ir.Value) -> None:
    """Gives a replacement output what inference found for the value it replaces."""
    fact = old.meta.get(_FACT)
    if fact is not None:
        new.meta[_FACT] = fact


def elem_type(value: ir.Value | None) -> ir.DataType | None:
    """The element type of ``value`` where known."""
    if value is None:
        return None
    fact = value.meta.get(_FACT)
    return value.dtype or (fact[0] if fact else None)


def dims(value: ir.Value | None) -> tuple | None:
    """The dims of ``value`` (an int, a symbolic name or None each), or None
    where the rank is unknown."""
    if value is None:
        return None
    fact = value.meta.get(_FACT)
    shape = fact[1] if fact and fact[1] is not None else value.shape
    if shape is None:
        return None
    return tuple(d if isinstance(d, int) else d.value for d in shape)


def rank(value: ir.Value | None) -> int | None:
    shape = dims(value)
    return None if shape is None else len(shape)


def same_dim(a, b) -> bool:
    """Whether two dims are provably equal: the same int or the same name."""
    return a is not None and a == b


def constant(value: ir.Value | None) -> np.ndarray | None:
    """The value of an initializer no graph input overrides or of a Constant
    node, else None."""
    if value is None or value.is_graph_input():
        return None
    tensor = convenience.get_const_tensor(value)
    if tensor is None or isinstance(tensor, ir.ExternalTensor):
        return None   # a large weight's placeholder (_engine) or data on disk
    return tensor.numpy()


def constant_ints(value: ir.Value | None) -> list[int] | None:
    array = constant(value)
    if array is None or array.dtype.kind not in "iu":
        return None
    return [int(x) for x in array.reshape(-1)]


def attributes(node: ir.Node) -> dict:
    """name -> Python value of every attribute of ``node`` (None for a
    reference to a function attribute, which no rule can read)."""
    return {name: (None if attr.is_ref() else attr.value)
            for name, attr in node.attributes.items()}


def since_version(context, node: ir.Node) -> int | None:
    """The version of the schema ``node`` runs under: the opset its graph or
    function imports for the node's domain, resolved through onnx.defs."""
    scope = context.graph_or_function
    if isinstance(scope, ir.Function):
        imports = scope.opset_imports
    else:  # a subgraph uses its function's imports, or the model's
        imports = scope.meta.get(OPSET_IMPORTS, {})
    version = imports.get(node.domain, context.model.opset_imports.get(node.domain))
    if version is None:
        return None
    try:
        return onnx.defs.get_schema(node.op_type, version, node.domain).since_version
    except onnx.defs.SchemaError:
        return None
