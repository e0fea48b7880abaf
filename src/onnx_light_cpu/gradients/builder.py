"""What a gradient rule builds with: the forward node, its gradient inputs,
fresh names, constants and the backward nodes it emits.

A rule is a function ``rule(ctx) -> {input position: gradient name}``; it
reads the forward node through ``ctx`` and appends standard ONNX nodes (or
com.microsoft ones this package runs) with :meth:`GradContext.add`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper

MS_DOMAIN = "com.microsoft"


def op_label(domain: str, op_type: str) -> str:
    """``com.microsoft::BiasGelu``; the default domain reads ``ai.onnx``."""
    return f"{domain or 'ai.onnx'}::{op_type}"


def _value(attribute: onnx.AttributeProto):
    """The attribute's value, strings decoded."""
    value = helper.get_attribute_value(attribute)
    return value.decode() if isinstance(value, bytes) else value


class GradContext:
    """One forward node and the backward graph a rule is building for it.

    ``infos`` holds the value infos the forward model states (graph inputs,
    initializers, outputs); ``taken`` holds every name of the forward
    model, so that fresh names never collide with one."""

    def __init__(self, node: onnx.NodeProto, grads: dict[int, str],
                 infos: dict[str, onnx.ValueInfoProto], taken: Iterable[str]):
        self.node = node
        self.label = op_label(node.domain, node.op_type)
        self.attributes = {a.name: _value(a) for a in node.attribute}
        self._grads = grads
        self._infos = infos
        self._taken = set(taken)
        self._counter = 0
        self._constants: dict[tuple, str] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    # -- the forward node -------------------------------------------------

    def input(self, i: int) -> str:
        """Name of forward input ``i``; '' when it is absent."""
        return self.node.input[i] if i < len(self.node.input) else ""

    def grad(self, i: int) -> str | None:
        """Name of the gradient of forward output ``i``; None when the model
        does not expose that output (it then contributes nothing)."""
        return self._grads.get(i)

    def elem_type(self, name: str) -> int:
        info = self._infos.get(name)
        if info is None or not info.type.tensor_type.elem_type:
            raise ValueError(f"{self.label}: the model does not state the element type of "
                             f"{name!r}, which its gradient rule needs")
        return info.type.tensor_type.elem_type

    def dims(self, name: str) -> list[int | None] | None:
        """The static dimensions of ``name`` (None for a symbolic one), or
        None when the model states no shape."""
        info = self._infos.get(name)
        if info is None or not info.type.tensor_type.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else None
                for d in info.type.tensor_type.shape.dim]

    def attr(self, name: str, default=None):
        return self.attributes.get(name, default)

    def only_attributes(self, names: Iterable[str]) -> None:
        """Rejects any attribute the rule does not know how to differentiate."""
        unknown = sorted(set(self.attributes) - set(names))
        if unknown:
            self.unsupported(f"attribute(s) {unknown} have no gradient rule")

    def unsupported(self, what: str):
        raise NotImplementedError(f"gradient of {self.label}: {what}")

    # -- the backward graph -----------------------------------------------

    def fresh(self, hint: str) -> str:
        """A name no forward name and no earlier backward name uses."""
        while True:
            self._counter += 1
            name = f"{hint}__{self._counter}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    def add(self, op_type: str, inputs: Iterable[str], *, outputs: list[str] | None = None,
            domain: str = "", hint: str | None = None, **attrs):
        """Appends one node; returns its output name, or the list of
        ``outputs`` when given (names, '' for an output nobody reads)."""
        names = [self.fresh(hint or op_type.lower())] if outputs is None else list(outputs)
        self.nodes.append(helper.make_node(op_type, list(inputs), names, domain=domain, **attrs))
        return names[0] if outputs is None else names

    def const(self, value, dtype, hint: str = "const") -> str:
        """An initializer holding ``value`` as ``dtype`` (a NumPy dtype or
        an ONNX element type)."""
        if isinstance(dtype, int):
            dtype = helper.tensor_dtype_to_np_dtype(dtype)
        array = np.asarray(value, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._constants:  # one initializer per distinct value
            self._constants[key] = self.fresh(hint)
            self.initializers.append(numpy_helper.from_array(array, self._constants[key]))
        return self._constants[key]

    def ints(self, values, hint: str = "ints") -> str:
        """An int64 initializer (shapes, axes, slice bounds)."""
        return self.const(values, np.int64, hint)

    # -- patterns every rule uses -------------------------------------------

    def cast(self, name: str, to: int) -> str:
        return self.add("Cast", [name], to=to)

    def cast_like(self, name: str, like: str) -> str:
        return self.add("CastLike", [name, like])

    def reduce_sum(self, name: str, axes: Iterable[int], keepdims: int = 0) -> str:
        return self.add("ReduceSum", [name, self.ints(list(axes), "axes")], keepdims=keepdims)

    def sum_rows(self, name: str, width: str) -> str:
        """Sums ``name`` over every axis but the last, whose length is the
        one-element int64 tensor ``width``: a [..., n] -> [n] reduction that
        needs no rank."""
        shape = self.add("Concat", [self.ints([-1]), width], axis=0)
        return self.reduce_sum(self.add("Reshape", [name, shape]), [0])
