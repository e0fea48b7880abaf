"""Fold a constant rank-one bias Add into the MatMulNBits that feeds it.

Before::

    A, B, scales, ... ──> MatMulNBits ──> y ──> Add(y, bias[N]) ──> Y

After::

    A, B, scales, ..., bias ──> MatMulNBits(bias = input 5) ──> Y

The rewrite applies only where it cannot change a result or a visible name:
``y`` is not a graph output and nothing else reads it (neither another node
nor a subgraph through the outer scope); the Add is a plain ai.onnx Add (no
attributes: the opset < 7 ``broadcast``/``axis`` forms are left alone) whose
other operand is a constant (an initializer that no graph input overrides,
or a Constant node) of shape [N] and of the MatMulNBits' element type
(checked where the graph states the type of A or scales); the MatMulNBits
has no bias yet.  The fused node takes the Add's place in the
node list (the bias and every MatMulNBits input exist by then) and the Add's
output name.  The main graph, If/Loop/Scan bodies and model-local functions
are rewritten; everything else is copied as it is.
"""

from __future__ import annotations

from collections import Counter

import onnx
from onnx import AttributeProto, helper

from ..ops.control_flow import subgraphs

MS_DOMAIN = "com.microsoft"
BIAS_INPUT = 5


def fuse_matmul_nbits_bias(model: onnx.ModelProto) -> onnx.ModelProto:
    """A new model where each MatMulNBits + rank-one constant bias Add is one
    MatMulNBits with the bias as input 5; ``model`` is not modified."""
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"fuse_matmul_nbits_bias expects an onnx.ModelProto, "
                        f"got {type(model).__name__}")
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    _fuse_graph(fused.graph)
    for function in fused.functions:
        _fuse_function(function)
    return fused


# -- one scope: a graph or a function body ---------------------------------------


class _Scope:
    """What the pattern needs to know of the names of one graph or function."""

    def __init__(self, nodes, outputs, constants: dict, types: dict):
        self.outputs = set(outputs)
        self.constants = constants  # name -> TensorProto
        self.types = types  # name -> ONNX element type, where known
        self.uses = Counter()
        for node in nodes:
            for name in node.input:
                self.uses[name] += 1
            # A subgraph may read this scope's values by name: each counts.
            for name in _names_read_by_subgraphs(node):
                self.uses[name] += 1


def _fuse_graph(graph: onnx.GraphProto) -> None:
    for node in graph.node:
        for subgraph in subgraphs(node):
            _fuse_graph(subgraph)
    # An initializer that is also a graph input is only a default: not constant.
    overridable = {value.name for value in graph.input}
    constants = {t.name: t for t in graph.initializer if t.name not in overridable}
    types = {t.name: t.data_type for t in graph.initializer}
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    fused_away = _fuse_scope(graph.node, [v.name for v in graph.output], constants, types)
    if fused_away:
        kept = [v for v in graph.value_info if v.name not in fused_away]
        del graph.value_info[:]
        graph.value_info.extend(kept)


def _fuse_function(function: onnx.FunctionProto) -> None:
    for node in function.node:
        for subgraph in subgraphs(node):
            _fuse_graph(subgraph)
    types = {}
    for value in function.value_info:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    fused_away = _fuse_scope(function.node, function.output, {}, types)
    if fused_away:
        kept = [v for v in function.value_info if v.name not in fused_away]
        del function.value_info[:]
        function.value_info.extend(kept)


def _fuse_scope(nodes, outputs, constants: dict, types: dict) -> set[str]:
    """Rewrite every match among ``nodes``; return the names no longer produced."""
    for node in nodes:  # Constant nodes are constants too
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.output:
            tensor = _constant_value(node)
            if tensor is not None:
                constants[node.output[0]] = tensor
                types[node.output[0]] = tensor.data_type
    scope = _Scope(nodes, outputs, constants, types)
    node_list = list(nodes)
    consumer = {}  # name -> index of a node reading it
    for index, node in enumerate(node_list):
        for name in node.input:
            consumer[name] = index

    replaced = {}  # index of a fused Add -> the fused node that takes its place
    removed = set()  # indices of the MatMulNBits nodes folded into them
    fused_away = set()
    for index, node in enumerate(node_list):
        if node.op_type != "MatMulNBits" or node.domain != MS_DOMAIN or not node.output:
            continue
        y = node.output[0]
        add_index = consumer.get(y)
        if (add_index is None or scope.uses[y] != 1 or y in scope.outputs
                or add_index in replaced):
            continue
        add = node_list[add_index]
        bias = _bias_operand(node, add, y, scope)
        if bias is None:
            continue
        inputs = list(node.input[:BIAS_INPUT])
        inputs += [""] * (BIAS_INPUT - len(inputs))  # empty optional slots
        fused = helper.make_node(node.op_type, inputs + [bias], [add.output[0]],
                                 name=node.name, domain=node.domain)
        fused.attribute.extend(node.attribute)
        if node.doc_string:
            fused.doc_string = node.doc_string
        replaced[add_index] = fused
        removed.add(index)
        fused_away.add(y)
    if replaced:
        # Copies first: the old entries go with the field's contents.
        new_nodes = []
        for index, node in enumerate(node_list):
            if index not in removed:
                copy = onnx.NodeProto()
                copy.CopyFrom(replaced.get(index, node))
                new_nodes.append(copy)
        del nodes[:]
        nodes.extend(new_nodes)
    return fused_away


def _bias_operand(matmul: onnx.NodeProto, add: onnx.NodeProto, y: str, scope: _Scope):
    """The name of the Add's constant [N] bias operand, or None if no match."""
    if (add.op_type != "Add" or add.domain not in ("", "ai.onnx") or len(add.input) != 2
            or len(add.output) != 1 or add.attribute):
        return None
    if len(matmul.input) > BIAS_INPUT and matmul.input[BIAS_INPUT]:
        return None  # already has a bias
    if list(add.input).count(y) != 1:
        return None
    bias = add.input[1] if add.input[0] == y else add.input[0]
    tensor = scope.constants.get(bias)
    n = next((a.i for a in matmul.attribute if a.name == "N"), None)
    if tensor is None or n is None or list(tensor.dims) != [n]:
        return None
    # The bias must have the operator's element type (that of A and scales).
    # A valid Add already implies it; where the types are known, check.
    known = {scope.types[name] for name in matmul.input[:3:2] if name in scope.types}
    if known and known != {tensor.data_type}:
        return None
    return bias


def _constant_value(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """The tensor of a Constant node given as ``value`` or ``value_floats``."""
    for att in node.attribute:
        if att.name == "value" and att.type == AttributeProto.TENSOR:
            return att.t
        if att.name == "value_floats" and att.type == AttributeProto.FLOATS:
            return helper.make_tensor("", onnx.TensorProto.FLOAT, [len(att.floats)],
                                      list(att.floats))
    return None


def _names_read_by_subgraphs(node: onnx.NodeProto) -> set[str]:
    """Every name a node inside ``node``'s subgraphs reads (a superset of
    what they take from the outer scope: local names only make it safer)."""
    names = set()
    for graph in subgraphs(node):
        for inner in graph.node:
            names.update(inner.input)
            names.update(_names_read_by_subgraphs(inner))
        names.update(v.name for v in graph.output)
    return names
