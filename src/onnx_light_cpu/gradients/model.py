"""gradient_model: the backward model of a single-node model."""

from __future__ import annotations

import onnx
from onnx import helper

from .builder import MS_DOMAIN, GradContext, op_label
from .registry import GradRegistry, default_registry

#: The least default-domain opset of a backward model: ai.onnx Attention's
#: ``qk_matmul_output_mode`` (GroupQueryAttention's rule) needs 23.
GRAD_OPSET = 23


def gradient_model(model: onnx.ModelProto, registry: GradRegistry | None = None
                   ) -> onnx.ModelProto:
    """The backward model of a single-node ``model``.

    Inputs: the forward model's inputs, then ``grad_<output>`` for each
    output of the forward model (same type and shape).  Outputs:
    ``grad_<input>`` for each differentiable input of the node, in the
    node's input order, with the input's type and shape.  The nodes are
    standard ONNX plus com.microsoft operators this package runs; the
    forward initializers are kept.  ``registry``: the rules to use (None:
    the package's own, :func:`register_custom_gradients`)."""
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"gradient_model expects an onnx.ModelProto, got {type(model).__name__}")
    if registry is None:
        registry = default_registry()
    elif not isinstance(registry, GradRegistry):
        raise TypeError(f"gradient_model expects a GradRegistry or None, "
                        f"got {type(registry).__name__}")
    graph = model.graph
    if len(graph.node) != 1:
        ops = [op_label(n.domain, n.op_type) for n in graph.node]
        listed = f" ({', '.join(ops[:4])}{', ...' if len(ops) > 4 else ''})" if ops else ""
        raise ValueError(f"gradient_model expects a single-node model, got {len(ops)} "
                         f"nodes{listed}")
    node = graph.node[0]
    label = op_label(node.domain, node.op_type)
    rule = registry.builder(node.domain, node.op_type)
    if rule is None:
        raise NotImplementedError(f"gradient_model: no gradient rule for {label}")

    infos = _value_infos(model)
    graph_outputs = [o.name for o in graph.output]
    grads = {i: f"grad_{name}" for i, name in enumerate(node.output)
             if name and name in graph_outputs}
    taken = set(node.input) | set(node.output) | set(infos) | set(grads.values())
    ctx = GradContext(node, grads, infos, taken)
    result = rule(ctx)

    # an input the node reads twice (CDist(A, A)) gets the sum of its gradients
    per_name: dict[str, list[str]] = {}
    for position in sorted(result):
        name = ctx.input(position)
        if not name:
            raise ValueError(f"gradient rule of {label} returned a gradient for absent "
                             f"input {position}")
        if name not in infos:
            raise ValueError(f"gradient_model: {label} reads {name!r}, neither a graph input "
                             "nor an initializer")
        per_name.setdefault(name, []).append(result[position])
    outputs, renamed = [], {}
    for name, values in per_name.items():
        target = f"grad_{name}"
        if target in taken:
            raise ValueError(f"gradient_model: {label}'s gradient output {target!r} is already "
                             "a name of the model")
        _name_gradient(ctx, values, target, renamed)
        outputs.append(_renamed(infos[name], target))

    untyped = [node.output[i] for i in grads if not _elem_type(infos[node.output[i]])]
    if untyped:
        raise ValueError(f"gradient_model: the type of {label}'s output(s) {untyped} is "
                         "neither stated nor inferred")
    inputs = list(graph.input) + [_renamed(infos[node.output[i]], g)
                                  for i, g in sorted(grads.items())]
    backward = helper.make_graph(ctx.nodes, f"{graph.name or 'model'}_backward", inputs, outputs,
                                 initializer=list(graph.initializer) + ctx.initializers)
    opsets = _opsets(model, ctx)
    ir_version = max(model.ir_version,
                     helper.find_min_ir_version_for(opsets, ignore_unknown=True))
    return helper.make_model(backward, opset_imports=opsets, ir_version=ir_version,
                             producer_name="onnx_light_cpu.gradient_model")


def _value_infos(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """Name -> value info of the graph's inputs, outputs and initializers;
    an output without an element type takes the one shape inference gives."""
    graph = model.graph
    infos = {i.name: helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
             for i in graph.initializer}
    infos.update({v.name: v for v in graph.input})
    untyped = [o.name for o in graph.output if not _elem_type(o)]
    inferred = {}
    if untyped:
        inferred_graph = onnx.shape_inference.infer_shapes(model).graph
        inferred = {v.name: v for v in list(inferred_graph.value_info) + list(inferred_graph.output)
                    if _elem_type(v)}
    for out in graph.output:
        infos[out.name] = inferred.get(out.name, out) if out.name in untyped else out
    return infos


def _elem_type(info: onnx.ValueInfoProto) -> int:
    return info.type.tensor_type.elem_type if info.type.HasField("tensor_type") else 0


def _renamed(info: onnx.ValueInfoProto, name: str) -> onnx.ValueInfoProto:
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(info)
    copy.name = name
    copy.doc_string = ""
    return copy


def _name_gradient(ctx: GradContext, values: list[str], target: str,
                   renamed: dict[str, str]) -> None:
    """Makes ``target`` the graph output holding the sum of ``values``:
    renames the node output that is the one value (``renamed`` keeps what
    was renamed, for a value that is the gradient of two names), else adds
    Sum or Identity."""
    values = [renamed.get(v, v) for v in values]
    if len(values) > 1:
        ctx.add("Sum", values, outputs=[target])
        return
    value = values[0]
    if value in renamed.values() or not any(value in n.output for n in ctx.nodes):
        ctx.add("Identity", [value], outputs=[target])
        return
    for n in ctx.nodes:
        for field in (n.input, n.output):
            for k, name in enumerate(field):
                if name == value:
                    field[k] = target
    renamed[value] = target


def _opsets(model: onnx.ModelProto, ctx: GradContext) -> list[onnx.OperatorSetIdProto]:
    versions = {"" if o.domain == "ai.onnx" else o.domain: o.version
                for o in model.opset_import}
    versions[""] = max(versions.get("", 0), GRAD_OPSET)
    if any(n.domain == MS_DOMAIN for n in ctx.nodes):
        versions.setdefault(MS_DOMAIN, 1)
    return [helper.make_opsetid(domain, version) for domain, version in sorted(versions.items())]
