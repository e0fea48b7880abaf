"""Constant folding: what depends only on constants is computed once, when
the evaluator is built.

A node is folded when every input is an initializer, the output of a node
already folded (``Constant`` nodes have no inputs), or the empty name, and
the node is deterministic, holds no subgraph, reads no outer scope and
refers to no function attribute.  Its resolved implementation (our kernel
where one is registered, else ``onnx.reference``'s) runs once, on the
evaluator's own constants; its outputs join ``rt_inits_`` as dense,
read-only arrays and the node leaves ``rt_nodes_``, hence the run plan.
The consumers see those outputs as initializers: adapters that prepare a
constant input once (MatMul packs B, ``KernelOp._prepared_input``) do so
for them too.  A folded Transpose of a weight thus becomes one dense
constant that MatMul packs once, instead of a strided view made, copied
and packed on every run.

Only evaluators whose tree has our kernels installed fold (the built-in
evaluator is left as ``onnx`` made it), each graph and subgraph on its own;
function bodies are left alone (their constants may come from the caller's
attributes).  Opt out with ``fold_constants=False`` on
``register_kernels_global`` / ``register_kernels_for_session`` or, for the
whole process, ``ONNX_LIGHT_CPU_FOLD_CONSTANTS=0``.

Folding never changes a result: the same implementation runs on the same
arrays, only earlier.  A node whose implementation raises here stays in the
graph (it raises at run time as before), and so do nodes whose outputs
would be much larger than their inputs (``ConstantOfShape`` or ``Expand``
of a large shape: keeping them would cost memory the graph never holds at
once): see :data:`GROWTH`.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import onnx

from ..ops._base import KernelOp

#: The environment variable that turns folding off process-wide ("0").
ENV_VAR = "ONNX_LIGHT_CPU_FOLD_CONSTANTS"

#: A node is not folded when its outputs would exceed GROWTH times its
#: inputs' bytes, counted from FLOOR_BYTES: small shape-made constants fold,
#: a mask or a broadcast of hundreds of megabytes made from a shape does not.
GROWTH = 4
FLOOR_BYTES = 1 << 20

# Operators whose result changes from run to run, whatever their inputs.
_RANDOM = frozenset({"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike",
                     "RandomUniform", "RandomUniformLike"})


def _nondeterministic(node: onnx.NodeProto) -> bool:
    return node.op_type in _RANDOM or "Dropout" in node.op_type


@dataclass
class Folded:
    """What folding did to one evaluator (``evaluator._olc_folded``)."""

    nodes: list = field(default_factory=list)  # the folded node implementations
    names: list[str] = field(default_factory=list)  # the values they put in rt_inits_
    nbytes: int = 0  # bytes of those values
    seconds: float = 0.0  # what the folded nodes took once, dense copies included
    original_nodes: list = field(default_factory=list)  # rt_nodes_ before folding


#: The setting of evaluators whose context leaves it unset (None): the
#: latest ``register_kernels_global(fold_constants=...)``.
GLOBAL_SETTING = {"fold_constants": True}


def enabled(context) -> bool:
    """Whether evaluators of ``context`` fold: kernels installed, not opted out."""
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if context is None or not (context.session_kernels or context.global_kernels):
        return False
    setting = context.fold_constants
    return GLOBAL_SETTING["fold_constants"] if setting is None else setting


def fold(evaluator) -> Folded | None:
    """Fold the constant nodes of ``evaluator`` (its own graph, not the
    nested ones); what an earlier call folded is put back first, so that
    nodes re-resolved since are folded with their new implementation."""
    unfold(evaluator)
    nodes = getattr(evaluator, "rt_nodes_", None)
    if (nodes is None or not enabled(evaluator.__dict__.get("_olc_context"))
            or isinstance(evaluator.proto_, onnx.FunctionProto)):
        return None
    inits = evaluator.rt_inits_
    # An initializer listed as a graph input (IR < 4) may be fed: not a constant.
    overridable = set(evaluator.input_names_)
    known = {name for name in inits if name not in overridable}
    known.add("")
    done = Folded(original_nodes=list(nodes))
    kept = []
    usage = evaluator._olc_context.usage
    recording = usage.enabled
    usage.set_enabled(False)  # building is not running: folded nodes are not "used"
    try:
        for node in nodes:
            values = _run_constant(node, inits, known)
            if values is None:
                kept.append(node)
                continue
            outputs, seconds = values
            # constants now: no longer buffers that a run may hand out again
            evaluator._olc_context.buffers.forget(outputs.values())
            for name, value in outputs.items():
                inits[name] = value
                known.add(name)
                done.names.append(name)
                done.nbytes += value.nbytes
            done.nodes.append(node)
            done.seconds += seconds
    finally:
        usage.set_enabled(recording)
    if not done.nodes:
        return None
    folded = set(done.names)
    nodes[:] = [_renewed(node, folded) for node in kept]
    evaluator._olc_folded = done
    return done


def unfold(evaluator) -> bool:
    """Put back what :func:`fold` removed; whether there was anything."""
    done = evaluator.__dict__.pop("_olc_folded", None)
    if done is None:
        return False
    for name in done.names:
        evaluator.rt_inits_.pop(name, None)
    evaluator.rt_nodes_[:] = done.original_nodes
    return True


def _run_constant(node, inits: dict, known: set[str]):
    """({output name: dense value}, seconds) of a node that folds, else None."""
    proto = node.onnx_node
    if (any(name not in known for name in proto.input) or _nondeterministic(proto)
            or getattr(node, "has_subgraph", False) or node.has_linked_attribute
            or node.need_context()):
        return None
    args = [None if name == "" else inits[name] for name in proto.input]
    limit = _limit(proto, args)
    if limit is not None and _predicted_bytes(proto, args) > limit:
        return None
    start = time.perf_counter()
    try:
        results = node.run(*args)
    except Exception:  # noqa: BLE001 - left to raise at run time, as without folding
        return None
    outputs = {}
    for name, value in zip(proto.output, results):
        if name == "":
            continue
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):  # sequences, optionals: not folded
            return None
        outputs[name] = value
    if len(outputs) != sum(1 for name in proto.output if name):
        return None
    if limit is not None and sum(v.nbytes for v in outputs.values()) > limit:
        return None
    for name, value in outputs.items():
        # Dense (a folded Transpose must not stay a view of its input),
        # owned, and read-only: the same array is handed to every run.
        if not _owned_dense(value, args):
            value = _dense_copy(value)
        value.flags.writeable = False
        outputs[name] = value
    # Timed with the dense copy: a Transpose returning a view costs nothing
    # itself, its consumers paid for reading it strided on every run.
    return outputs, time.perf_counter() - start


# Columns copied at a time when the last axis is strided (a transposed
# weight): NumPy's element-order copy of E^T [896, 151936] reads E a column
# at a time, 4.3 s here; 256 columns at a time, 0.38 s.
_TILE = 256


def _dense_copy(value: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``value``, tile by tile when its last axis is strided."""
    if value.ndim < 2 or value.strides[-1] == value.itemsize or value.dtype.hasobject:
        return np.array(value, order="C")
    out = np.empty(value.shape, dtype=value.dtype)
    for j in range(0, value.shape[-1], _TILE):
        out[..., j:j + _TILE] = value[..., j:j + _TILE]
    return out


def _owned_dense(value: np.ndarray, args: list) -> bool:
    """Whether ``value`` is a dense array that shares no memory with an input."""
    return (value.flags.c_contiguous and value.flags.owndata
            and not any(a is not None and np.may_share_memory(value, a) for a in args))


def _limit(proto: onnx.NodeProto, args: list) -> int | None:
    """Bytes a node's outputs may take to be folded; None for no limit
    (a Constant's value is already in the model)."""
    if proto.op_type == "Constant" and proto.domain in ("", "ai.onnx"):
        return None
    return GROWTH * max(FLOOR_BYTES, sum(getattr(a, "nbytes", 0) for a in args))


def _predicted_bytes(proto: onnx.NodeProto, args: list) -> int:
    """An upper bound of the output bytes of the operators that make large
    tensors from small inputs, before running them; 0 for the others."""
    if proto.domain not in ("", "ai.onnx"):
        return 0
    op, itemsize = proto.op_type, 8  # the widest numeric element
    try:
        if op == "ConstantOfShape" and args:
            return math.prod(int(d) for d in args[0].reshape(-1)) * itemsize
        if op == "Expand" and len(args) == 2:
            shape = tuple(int(d) for d in args[1].reshape(-1))
            out = np.broadcast_shapes(args[0].shape, shape)
            return math.prod(out) * args[0].itemsize
        if op == "Tile" and len(args) == 2:
            return args[0].nbytes * math.prod(int(r) for r in args[1].reshape(-1))
        if op == "Range" and len(args) == 3:
            start, limit, delta = (float(a.reshape(-1)[0]) for a in args)
            return max(0, math.ceil((limit - start) / delta)) * args[0].itemsize
    except (ValueError, TypeError, ArithmeticError, IndexError, AttributeError):
        return 0  # malformed: the node runs (and raises) as without folding
    return 0


def _renewed(node, folded: set[str]):
    """A fresh instance of an adapter that reads a folded value: whatever it
    prepared before (from an earlier fold, after a re-registration) was
    prepared from another array."""
    if not isinstance(node, KernelOp) or not folded.intersection(node.onnx_node.input):
        return node
    return type(node)(node.onnx_node, node.run_params, context=node._context,
                      initializers=node._initializers)


def folded_of(evaluators) -> Folded:
    """What folding did to all of ``evaluators``, summed."""
    total = Folded()
    for evaluator in evaluators:
        done = evaluator.__dict__.get("_olc_folded")
        if done is not None:
            total.nodes += done.nodes
            total.names += done.names
            total.nbytes += done.nbytes
            total.seconds += done.seconds
    return total
