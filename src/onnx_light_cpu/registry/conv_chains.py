"""Conv chains: a float32 Conv, the residual Add and the Relu or Clip that
follow it run as one FusedConv in the evaluator's run plan.

ONNX Runtime fuses these at load (its Conv + Add + Relu and Conv + Clip
fusions) and so writes each output once; unfused, ResNet-50 reads and
writes every Conv output two or three more times.  Here a chain is::

    Conv(X, W [, B]) -> c [-> Add(c, Z) or Add(Z, c) -> s] [-> Relu or Clip] -> y

with at least two nodes, every one of them our kernel; ``c`` and ``s`` are
read by the next node of the chain only and are no graph outputs; Clip's
bounds are constants with min <= max.  The chain runs where its last node
stood (Z may be computed after the Conv), through
:class:`~onnx_light_cpu.ops.conv.FusedConv`, whose epilogue adds the bias,
then Z, then applies the activation, each rounded to float32 as the
separate nodes round: the results are the same bits (NaN and -0 included).

A run whose inputs FusedConv does not take (X, W, B or Z not float32, Z
not of the Conv output's shape, so that the Add broadcasts) runs the
nodes one by one instead, as does a run that asks for ``c`` or ``s``
(``ReferenceEvaluator.run`` with intermediate output names, or
``intermediate=True``: the unfused plan or the original loop).
``rt_nodes_`` keeps the original nodes; only the plan changes.

The same plan fuses a BatchNormalization (inference) and the Relu that
alone reads its output (DenseNet's pre-activation layers; ONNX Runtime's
NCHWc BatchNormalization takes the Relu as its activation): the Relu runs
on each channel right after its normalization, while it is in L1, instead
of one more pass over memory (:class:`NormRelu`); float32 X only, other
runs take the two nodes one by one; the same bits.  Where a Concat along
the channels alone feeds that BatchNormalization (DenseNet: each layer
normalizes the join of every earlier output), the normalization reads each
channel from the Concat input that holds it and the join is never written;
inputs it cannot read in place (not float32, not C-contiguous, not alike
outside the channels) go through the Concat node first.

And it runs the SiLU gate of a SwiGLU MLP (Llama, Qwen)::

    Sigmoid(x) -> s -> Mul(x, s) -> g [-> Mul(g, u) -> y]

as one pass over x and u (:class:`SiluGate`), where ``s`` and ``g`` are
read by the next node alone, no graph outputs, and each Mul takes its
operands in that order (the model builder's; the fused kernel returns a
NaN left operand as the Mul kernel does).  float32 x, and u of x's
shape, only; other runs take the nodes one by one; the same bits.

Opt out of all three with ``fuse_conv=False`` on ``register_kernels_global`` /
``register_kernels_for_session`` or, for the whole process,
``ONNX_LIGHT_CPU_FUSE_CONV=0``.
"""

from __future__ import annotations

import os

import numpy as np
import onnx

from .. import simd
from .._kernels import normalization as norm_core
from .._kernels import unary as unary_core
from ..ops.binary import Add, Mul
from ..ops.conv import Conv, FusedConv
from ..ops.normalization import BatchNormalization
from ..ops.tensor import Concat
from ..ops.unary import Clip, Relu, Sigmoid

#: The environment variable that turns the fusion off process-wide ("0").
ENV_VAR = "ONNX_LIGHT_CPU_FUSE_CONV"

#: The setting of evaluators whose context leaves it unset (None): the
#: latest ``register_kernels_global(fuse_conv=...)``.
GLOBAL_SETTING = {"fuse_conv": True}

FLOAT32 = np.dtype(np.float32)


def enabled(context) -> bool:
    """Whether evaluators of ``context`` fuse Conv chains in their plan."""
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    setting = getattr(context, "fuse_conv", None)
    return GLOBAL_SETTING["fuse_conv"] if setting is None else setting


class _PlanEntry:
    """What the evaluator's loop asks of a node it runs, for an entry that
    stands for several (its ``onnx_node`` is the node it runs)."""

    has_linked_attribute = False

    def need_context(self) -> bool:
        return False


class ConvChain(_PlanEntry):
    """Conv [+ Add] [+ Relu or Clip] as one plan entry: FusedConv when the
    inputs allow it, else the nodes one by one."""

    def __init__(self, conv, add, act, act_params: tuple[float, float] | None, z: str):
        self.conv, self.add, self.act = conv, add, act
        last = act if act is not None else add
        proto = conv.onnx_node
        b = proto.input[2] if len(proto.input) > 2 else ""
        self.input = (proto.input[0], proto.input[1], b) + ((z,) if add is not None else ())
        self.output = (last.onnx_node.output[0],)
        self._z_first = add is not None and add.onnx_node.input[0] == z
        # Clip's constant bounds, passed again when the nodes run one by one
        self._act_args = tuple(act._initializers.get(name) if name else None
                               for name in act.onnx_node.input[1:]) if act is not None else ()
        node = onnx.helper.make_node(
            "FusedConv", list(self.input), list(self.output), name=proto.name,
            domain="com.microsoft", activation=type(act).__name__ if act is not None else "")
        if act_params:
            node.attribute.append(onnx.helper.make_attribute(
                "activation_params", list(act_params), attr_type=onnx.AttributeProto.FLOATS))
        node.attribute.extend(proto.attribute)
        self.fused = FusedConv(node, conv.run_params, context=conv._context,
                               initializers=conv._initializers)
        self.onnx_node = node  # what the plan runs, for whoever reads it

    def run(self, x, w, b=None, z=None):
        if self._fits(x, w, b, z):
            return self.fused.run(x, w, b, z)
        (y,) = self.conv.run(x, w, b)
        if self.add is not None:
            (y,) = self.add.run(z, y) if self._z_first else self.add.run(y, z)
        if self.act is not None:
            (y,) = self.act.run(y, *self._act_args)
        return (y,)

    def _fits(self, x, w, b, z) -> bool:
        """Whether FusedConv takes these inputs as the nodes would."""
        if not all(type(a) is np.ndarray and a.dtype == FLOAT32 for a in (x, w, b, z)
                   if a is not None):
            return False
        if z is None:
            return True
        try:  # the output shape, from the Conv's plan (kept per input signature)
            return z.shape == self.conv._plan_for((x, w, b))[1]
        except Exception:  # noqa: BLE001 - the Conv node raises it, unfused
            return False


class NormRelu(_PlanEntry):
    """BatchNormalization + Relu as one plan entry: the normalization with
    its Relu applied per channel when X is float32, else the two nodes.
    With ``concat``, the Concat along the channels that alone feeds the
    normalization joins it (DenseNet's layers: Concat, BatchNormalization,
    Relu): the normalization reads each channel from the Concat's input
    holding it, and the join is never written."""

    def __init__(self, norm, relu, concat=None):
        self.norm, self.relu, self.concat = norm, relu, concat
        proto = norm.onnx_node
        self.parts = len(concat.onnx_node.input) if concat is not None else 0
        self.input = (tuple(concat.onnx_node.input) + tuple(proto.input[1:])
                      if concat is not None else tuple(proto.input))
        self.output = (relu.onnx_node.output[0],)
        node = onnx.helper.make_node("BatchNormalization", list(proto.input), list(self.output),
                                     name=proto.name)
        node.attribute.extend(proto.attribute)
        self.fused = BatchNormalization(node, norm.run_params, context=norm._context,
                                        initializers=norm._initializers)
        self.fused.relu = True
        self.onnx_node = node  # what the plan runs, for whoever reads it

    def run(self, *args):
        if self.concat is not None:
            parts, args = args[:self.parts], args[self.parts:]
            channels = self._joined_channels(parts, args)
            if channels >= 0:
                self.concat.record(parts[0].dtype)
                return self.fused.run_joined(parts, channels, *args)
            (x,) = self.concat.run(*parts)
            args = (x,) + args
        x = args[0]
        if type(x) is np.ndarray and x.dtype == FLOAT32:
            return self.fused.run(*args)
        (y,) = self.norm.run(*args)
        return self.relu.run(y)

    def _joined_channels(self, parts: tuple, params: tuple) -> int:
        """The channels of the float32 X the parts join into along axis 1,
        which the fused normalization takes with its four float32 vectors of
        channels; -1 where it does not."""
        first, concat = parts[0], self.concat
        if type(first) is not np.ndarray or first.ndim < 2 or concat.axis not in (
                1, 1 - first.ndim) or concat._attribute_error is not None:
            return -1
        channels = norm_core.join_channels(parts, FLOAT32.num)
        if channels < 0 or not all(type(p) is np.ndarray and p.dtype == FLOAT32
                                   and p.shape == (channels,) for p in params):
            return -1
        return channels


class SiluGate(_PlanEntry):
    """Sigmoid(x), Mul(x, s) and, where it follows, Mul(g, u) as one plan
    entry: one pass over float32 x (and u of x's shape), else the nodes one
    by one."""

    def __init__(self, sigmoid, mul, gate=None):
        self.sigmoid, self.mul, self.gate = sigmoid, mul, gate
        last = gate if gate is not None else mul
        self.input = (sigmoid.onnx_node.input[0],) + (
            (gate.onnx_node.input[1],) if gate is not None else ())
        self.output = (last.onnx_node.output[0],)
        self.onnx_node = last.onnx_node  # the node whose output it writes

    def run(self, x, u=None):
        if (type(x) is np.ndarray and x.dtype == FLOAT32
                and (u is None or (type(u) is np.ndarray and u.dtype == FLOAT32
                                   and u.shape == x.shape))):
            return self._fused(x, u)
        (s,) = self.sigmoid.run(x)
        (y,) = self.mul.run(x, s)
        if self.gate is not None:
            (y,) = self.gate.run(y, u)
        return (y,)

    def _fused(self, x, u):
        sigmoid = self.sigmoid
        level = simd.state.level
        if sigmoid._usage.enabled:  # the label is built once per level
            def label():
                used = unary_core.silu_gate_level_used(level)
                return f"silu_gate_float32_{simd.LEVEL_NAMES[used]}"

            for node in (sigmoid, self.mul):  # the gate is a Mul too
                node._record_path(("silu_gate", level), label)
        # (a 0-d array is contiguous; np.ascontiguousarray would make it 1-d)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if u is not None and not u.flags.c_contiguous:
            u = np.ascontiguousarray(u)
        y = (self.gate or self.mul)._new_output(x.shape, FLOAT32)
        unary_core.silu_gate(x, u, y, level,
                             sigmoid._num_threads(x.size, sigmoid.min_work_per_thread))
        return (y,)


def fuse(evaluator, nodes: list, names: list) -> tuple[list, list]:
    """``nodes`` and their plan input ``names`` with each chain's nodes
    replaced by one :class:`ConvChain`, :class:`NormRelu` or
    :class:`SiluGate` where its last node stood."""
    readers: dict[str, list[int]] = {}
    for j, inputs in enumerate(names):
        for name in inputs:
            readers.setdefault(name, []).append(j)
    producer = {name: j for j, node in enumerate(nodes) for name in node.onnx_node.output}
    outputs = set(evaluator.output_names_)
    fed = set(evaluator.input_names_)
    constants = {k: v for k, v in evaluator.rt_inits_.items() if k not in fed}

    def only_reader(name: str) -> int | None:
        """The index of the one node reading ``name``, once, if it is no output."""
        found = readers.get(name, ())
        return found[0] if len(found) == 1 and name not in outputs else None

    replaced: dict[int, ConvChain | NormRelu | SiluGate] = {}
    removed: set[int] = set()
    for i, node in enumerate(nodes):
        if type(node) is Sigmoid:
            chain = _silu_chain(i, nodes, only_reader)
            if len(chain) > 1 and not any(k in removed or k in replaced for k in chain):
                replaced[chain[-1]] = SiluGate(*(nodes[k] for k in chain))
                removed.update(chain[:-1])
            continue
        if _inference_norm(node):
            j = only_reader(node.output[0])
            if j is not None and type(nodes[j]) is Relu and j not in replaced:
                k = producer.get(node.input[0])
                concat = nodes[k] if k is not None else None
                # along the channels: axis 1, or a negative one (the rank decides)
                if (type(concat) is Concat and only_reader(node.input[0]) == i
                        and k not in replaced and k not in removed and concat.axis is not None
                        and (concat.axis == 1 or concat.axis < 0)):
                    removed.add(k)
                else:
                    concat = None
                replaced[j] = NormRelu(node, nodes[j], concat)
                removed.add(i)
            continue
        if type(node) is not Conv or node._attribute_error is not None:
            continue
        conv = node
        chain, j = [i], only_reader(conv.output[0])
        add = act = None
        z = ""
        if j is not None and type(nodes[j]) is Add and len(set(nodes[j].input)) == 2:
            add = nodes[j]
            z = next(name for name in add.input if name != conv.output[0])
            chain.append(j)
            j = only_reader(add.output[0])
        act_params = None
        if j is not None and j not in removed:
            act_params = _activation(nodes[j], constants)
            if act_params is not None:
                act = nodes[j]
                chain.append(j)
        if len(chain) < 2 or any(k in removed or k in replaced for k in chain[1:]):
            continue
        replaced[chain[-1]] = ConvChain(conv, add, act, act_params, z)
        removed.update(chain[:-1])
    if not replaced:
        return nodes, names
    kept = [(replaced.get(i, node), tuple(replaced[i].input) if i in replaced else names[i])
            for i, node in enumerate(nodes) if i not in removed]
    return [n for n, _ in kept], [inputs for _, inputs in kept]


def _silu_chain(i: int, nodes: list, only_reader) -> list[int]:
    """The indices of a SiluGate's nodes from the Sigmoid ``nodes[i]`` on:
    Mul(x, s), ``s`` read by it alone, then Mul(g, u) where that alone
    reads ``g``; our kernels, in that operand order (the model builder's,
    and the one the fused kernel's NaN rule follows).  [i] alone where no
    Mul follows."""
    x, s = nodes[i].onnx_node.input[0], nodes[i].onnx_node.output[0]
    j = only_reader(s)
    if j is None or type(nodes[j]) is not Mul or list(nodes[j].onnx_node.input) != [x, s]:
        return [i]
    g = nodes[j].onnx_node.output[0]
    k = only_reader(g)
    if (k is not None and type(nodes[k]) is Mul and nodes[k].onnx_node.input[0] == g
            and nodes[k].onnx_node.input[1] != g):
        return [i, j, k]
    return [i, j]


def _inference_norm(node) -> bool:
    """Whether ``node`` is our BatchNormalization in inference, Y its only
    output."""
    return (type(node) is BatchNormalization and node._attribute_error is None
            and not node.training and sum(1 for name in node.onnx_node.output if name) == 1)


def _activation(node, constants: dict) -> tuple[float, float] | None:
    """FusedConv's activation_params for a Relu (()) or a Clip with constant
    float32 bounds, min <= max; None for any other node."""
    if type(node) is Relu:
        return ()
    if type(node) is not Clip or node._attribute_error is not None:
        return None
    if node.opset < 11:
        lo, hi = float(np.float32(node.min)), float(np.float32(node.max))
    else:
        bounds = []
        for name, extreme in zip((list(node.input[1:]) + ["", ""])[:2], (-np.inf, np.inf)):
            if not name:
                bounds.append(extreme)
                continue
            value = constants.get(name)
            if (value is None or value.dtype != FLOAT32 or value.shape not in ((), (1,))):
                return None
            bounds.append(float(value.reshape(())))
        lo, hi = bounds
    if not lo <= hi:  # NaN, or min > max (every element is max): left to Clip
        return None
    return (lo, hi)


def count(evaluators) -> int:
    """The Conv chains the run plans of ``evaluators`` fuse."""
    return sum(isinstance(getattr(entry[0], "__self__", None), ConvChain)
               for evaluator in evaluators
               for entry in evaluator.__dict__.get("_olc_plan") or ())
