"""The fusion engine: patterns, the walk over every graph, the result.

A :class:`FusionPattern` is a name, the operator it produces and one or
more rewrite rules of the onnxscript rewriter (``onnxscript.rewriter.
pattern.RewriteRule``): the rewriter matches a rule's pattern at a node,
runs its condition, checks that the matched nodes can go (every
intermediate value is read by the match only, none is a graph output,
subgraphs' reads of outer values included), and builds the replacement.
This module applies them: it walks the main graph, every If/Loop/Scan
body and every model-local function, splices each replacement in place
of its match, names what the replacement created, and drops constants
that only the removed nodes read.

The conditions read types, shapes and constants through :mod:`._facts`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import onnx
import onnx_ir as ir
from onnx_ir import convenience
from onnxscript.rewriter import pattern as rewriter

from ._facts import OPSET_IMPORTS, attach_inferred_facts, carry_facts, subgraphs

MS_DOMAIN = "com.microsoft"
#: The file a placeholder of a large weight names (there is none).
PLACEHOLDER = "onnx_light_cpu.fusion: weight left out of the rewrite"


@dataclass(frozen=True)
class FusionPattern:
    """One fusion: its ``name`` (reported in :class:`FusionResult` counts and
    listed in ``support.FUSION_PATTERNS``), the ``(domain, op_type)`` it
    produces, and its rewrite rules, tried in order at each node."""

    name: str
    produces: tuple[str, str]
    rules: tuple[rewriter.RewriteRule, ...]
    doc: str = ""

    def __repr__(self) -> str:
        return f"FusionPattern({self.name!r} -> {self.produces[0]}::{self.produces[1]})"


class FusionResult(NamedTuple):
    """What :func:`fuse` returns: the new model and, per pattern name, how
    many times it rewrote the model (0 included for every pattern asked)."""

    model: onnx.ModelProto
    counts: dict[str, int]

    @property
    def total(self) -> int:
        """The number of rewrites of every pattern."""
        return sum(self.counts.values())


def apply(model: onnx.ModelProto, patterns: Sequence[FusionPattern]) -> FusionResult:
    """Applies ``patterns`` to a copy of ``model``, one pattern after the
    other, each to the main graph, the subgraphs and the model-local
    functions.  The input is never modified; a model nothing matched comes
    back as an exact copy (a rewritten one is serialized from onnx-ir)."""
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"fuse expects an onnx.ModelProto, got {type(model).__name__}")
    counts = {p.name: 0 for p in patterns}
    # onnx-ir wraps the proto's tensors and may write to them (a Constant's
    # tensor gets its output's name): it reads a copy, one without the
    # large weights' data.
    light, large = _without_large_data(model)
    rewritten = ir.serde.deserialize_model(light)
    _declare_function_inputs(rewritten, model)
    attach_inferred_facts(rewritten, light)
    names = _Names(rewritten)
    for fusion in patterns:
        for scope, function in list(_scopes(rewritten)):
            counts[fusion.name] += _apply(fusion, rewritten, scope, function, names)
    if not any(counts.values()):
        unchanged = onnx.ModelProto()
        unchanged.CopyFrom(model)
        return FusionResult(unchanged, counts)
    fused = ir.serde.serialize_model(rewritten)
    for tensor in fused.graph.initializer:
        if tensor.name in large:
            tensor.CopyFrom(large[tensor.name])
    return FusionResult(fused, counts)


#: Main-graph initializers from this size on go through a rewrite as
#: placeholders (their type and shape, a reference to no file): no pattern
#: reads a weight's values, and a decoder's weights would otherwise be
#: copied three times (and onnx's shape inference refuses 2 GB).
LARGE_BYTES = 1 << 20


def _copy_except(message, skip: str):
    """A copy of a protobuf message without its field ``skip``."""
    out = type(message)()
    for field, value in message.ListFields():
        if field.name == skip:
            continue
        if hasattr(value, "extend"):          # a repeated field (any protobuf)
            getattr(out, field.name).extend(value)
        elif field.message_type is not None:
            getattr(out, field.name).CopyFrom(value)
        else:
            setattr(out, field.name, value)
    return out


def _without_large_data(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict]:
    """(a copy of ``model`` whose large initializers are placeholders, the
    originals by name)."""
    light = _copy_except(model, "graph")
    light.graph.CopyFrom(_copy_except(model.graph, "initializer"))
    large = {}
    for tensor in model.graph.initializer:
        if tensor.ByteSize() < LARGE_BYTES:
            light.graph.initializer.append(tensor)
            continue
        large[tensor.name] = tensor
        placeholder = light.graph.initializer.add()
        placeholder.name, placeholder.data_type = tensor.name, tensor.data_type
        placeholder.dims.extend(tensor.dims)
        placeholder.data_location = onnx.TensorProto.EXTERNAL
        placeholder.external_data.add(key="location", value=PLACEHOLDER)
    return light, large


def _declare_function_inputs(model: ir.Model, proto: onnx.ModelProto) -> None:
    """Gives function inputs the types their value_info declares: onnx-ir
    1.1 reads it for the other values of a function only (and would drop it
    when writing the model back)."""
    for function in proto.functions:
        declared = {info.name: info for info in function.value_info}
        target = model.functions.get((function.domain, function.name, function.overload))
        for value in target.inputs if target is not None else ():
            if value.name in declared:
                ir.serde.deserialize_value_info_proto(declared[value.name], value)


# -- where rules apply ------------------------------------------------------------


def _graph_and_subgraphs(graph: ir.Graph) -> Iterator[ir.Graph]:
    yield graph
    for node in graph:
        for sub in subgraphs(node):
            yield from _graph_and_subgraphs(sub)


def _scopes(model: ir.Model) -> Iterator[tuple[ir.Graph | ir.Function, ir.Function | None]]:
    """(scope, its function): the main graph and its subgraphs (None), every
    model-local function and its subgraphs (the function, whose opset
    imports they use: kept in their ``meta`` for the rules)."""
    for graph in _graph_and_subgraphs(model.graph):
        yield graph, None
    for function in model.functions.values():
        yield function, function
        for node in function:
            for sub in subgraphs(node):
                for graph in _graph_and_subgraphs(sub):
                    graph.meta[OPSET_IMPORTS] = function.opset_imports
                    yield graph, function


def _apply(fusion: FusionPattern, model: ir.Model, scope, function, names: _Names) -> int:
    count = 0
    for node in scope:  # the node list tolerates removals while iterating
        for rule in fusion.rules:
            delta = rule.try_rewrite(model, scope, node)
            if delta is None:
                continue
            if delta.new_initializers:  # rules create Constant nodes: functions have none
                raise RuntimeError(f"fusion rule {fusion.name} created initializers")
            _splice(scope, node, delta, names)
            if function is not None:  # the rewriter imported the opsets in the subgraph
                for domain, version in delta.used_opsets:
                    function.opset_imports.setdefault(domain, version or 1)
            count += 1
            break
    return count


def _splice(scope, anchor: ir.Node, delta, names: _Names) -> None:
    """Puts the replacement in place of the match (after ``anchor``, the
    node of the match's outputs), then drops the constants only it read."""
    base = next((v.name for v in delta.match.outputs if v.name), anchor.op_type)
    kept = set(map(id, delta.new_outputs))
    for node in delta.new_nodes:
        for value in node.outputs:
            if not value.name and id(value) not in kept:
                value.name = names.new(f"{base}_{node.op_type}")
    for old, new in zip(delta.match.outputs, delta.new_outputs):
        carry_facts(old, new)
    read = [v for n in delta.match.nodes for v in n.inputs if v is not None]
    convenience.replace_nodes_and_values(scope, anchor, delta.match.nodes, delta.new_nodes,
                                         delta.match.outputs, delta.new_outputs)
    for value in read:
        _drop_if_dead(value)


def _drop_if_dead(value: ir.Value) -> None:
    """Removes an initializer or a Constant node nothing reads any more."""
    if value.uses() or value.is_graph_output() or value.is_graph_input():
        return
    producer = value.producer()
    if producer is not None:
        if producer.op_type == "Constant" and producer.domain == "" and producer.graph:
            producer.graph.remove(producer, safe=True)
    elif value.is_initializer() and value.graph is not None:
        value.graph.initializers.pop(value.name, None)


class _Names:
    """Every value name of the model, to give new values unused names."""

    def __init__(self, model: ir.Model):
        self.used = set()
        for scope, _ in _scopes(model):
            self.used.update(v.name for v in scope.inputs)
            if isinstance(scope, ir.Graph):
                self.used.update(scope.initializers)
            for node in scope:
                self.used.update(v.name for v in node.outputs)

    def new(self, base: str) -> str:
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name
