"""If, Loop and Scan: the ai.onnx control flow, every opset (and Optional,
the optional values they carry).

Their bodies are the nested evaluators onnx.reference builds for GRAPH
attributes (``OpRun._load_attributes``); the hook builds them with the
parent's context, so their nodes resolve to our kernels, and ``run`` of a
body takes the hook's lean loop.  These adapters only drive the bodies:
slice, feed, collect, stack; NumPy does that work, no core.

**Outer scope.**  A body may read names of the enclosing graphs without
listing them as inputs.  onnx.reference hands such a node the whole scope
(``context``) and therefore keeps its slow loop for the whole graph.  Our
adapters compute once the names their bodies read from outside
(``outer_inputs``, nested bodies included) and the lean loop feeds those
values after the node's own inputs; under the original loop (verbose,
shape-annotation checks...) they are picked from ``context``.  Either way
a body is fed its inputs and exactly those outer values.

Fixed on the way, against onnx.reference's built-ins:
- **Loop** stacks each scan output to ``(iterations, *shape of one
  iteration)`` (the built-in's ``vstack`` made ``(n, 1)`` of scalars); a
  loop without the ``cond`` input ignores the body's condition (a for
  loop), as the specification says.
- **Scan** opset 8 has its own signature: the optional ``sequence_lens``
  first, batch axis 0, sequence axis 1, shorter sequences' scan outputs
  padded with zeros (the built-in fed the absent ``sequence_lens`` to the
  body as the first state).  Opset 9 on: every axis and direction, negative
  axes included (the built-in takes axis 0 forward only).
- An empty scan output (a loop that ran no iteration, a Scan over an empty
  sequence) takes the element type its body declares, and the declared
  shape of one iteration where it is fully known, else ``(0,)``.

Rejected with a ValueError (TypeError for an element type) naming the
operator: a condition or trip count that is not one element of bool or
int64, a negative trip count, a loop with neither a trip count nor a
condition (it would never end), node and body whose input or output counts
disagree, scan inputs of different lengths, scan outputs whose shape
changes between iterations.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.defs
from onnx import AttributeProto

from ._base import CLEAR_ERRORS, Attr, KernelOp

# the condition fed to a Loop body: shared, so read-only
_TRUE, _FALSE = np.array(True), np.array(False)
_TRUE.flags.writeable = _FALSE.flags.writeable = False


def _tensor_types(op_type: str) -> tuple[str, ...]:
    """The tensor types the latest schema lets the operator carry."""
    schema = onnx.defs.get_schema(op_type)
    allowed = next(c.allowed_type_strs for c in schema.type_constraints
                   if c.type_param_str == "V")
    return tuple(sorted(t for t in allowed if t.startswith("tensor(")))


def subgraphs(node: onnx.NodeProto):
    """The graphs of the node's GRAPH and GRAPHS attributes."""
    for att in node.attribute:
        if att.type == AttributeProto.GRAPH:
            yield att.g
        elif att.type == AttributeProto.GRAPHS:
            yield from att.graphs


def outer_names(graph: onnx.GraphProto) -> tuple[str, ...]:
    """The names ``graph`` reads but does not define (its nodes', its
    outputs', its subgraphs'), in order of first use: what it takes from
    the enclosing scopes."""
    defined = {v.name for v in graph.input}
    defined.update(t.name for t in graph.initializer)
    defined.update(s.values.name for s in graph.sparse_initializer)
    defined.update(name for node in graph.node for name in node.output)
    read: dict[str, None] = {}
    for node in graph.node:
        for name in node.input:
            read[name] = None
        for sub in subgraphs(node):
            read.update(dict.fromkeys(outer_names(sub)))
    read.update(dict.fromkeys(v.name for v in graph.output))
    return tuple(name for name in read if name and name not in defined)


def _declared(graph: onnx.GraphProto, index: int):
    """(dtype or None, shape or None) declared for output ``index`` of a
    body: the shape only where every dimension is a number."""
    tensor = graph.output[index].type.tensor_type
    if not graph.output[index].type.HasField("tensor_type") or not tensor.elem_type:
        return None, None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
    if not tensor.HasField("shape"):
        return dtype, None
    dims = tensor.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return dtype, None
    return dtype, tuple(d.dim_value for d in dims)


class ControlFlowOp(KernelOp):
    """Reads the outer scope (``need_context``); ``outer_inputs`` are the
    names it reads there, which the hook's lean loop passes after the
    node's inputs."""

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context=context, initializers=initializers)
        names: dict[str, None] = {}
        for sub in subgraphs(onnx_node):
            names.update(dict.fromkeys(outer_names(sub)))
        self.outer_inputs = tuple(names)
        self._own_inputs = len(onnx_node.input)

    def need_context(self) -> bool:
        return True

    def run(self, *args, linked_attributes=None, context=None, bindings=None):
        if self._attribute_error is not None:
            raise ValueError(self._attribute_error)
        own = self._own_inputs
        if len(args) > own:  # the lean loop: the outer values follow
            outer = dict(zip(self.outer_inputs, args[own:]))
            args = args[:own]
        elif context is not None:
            outer = {name: context[name] for name in self.outer_inputs if name in context}
        else:
            outer = {}
        options = {}
        if bindings is not None:  # the caller checks shape annotations: so do bodies
            options = {"check_shape_annotations": True, "_bindings": bindings}
        if self.has_linked_attribute:  # a body inside a function reads its attributes
            options["attributes"] = linked_attributes or {}
        return self._control(args, outer, options)

    def _control(self, args: tuple, outer: dict, options: dict) -> tuple:
        raise NotImplementedError(type(self).__name__)

    def _call_body(self, body, feeds: dict, options: dict, where: str) -> list:
        """``body`` on ``feeds``; an error inside it names this node too
        ("Loop: body, iteration 2: Add: ..."), of the same clear type.
        (Not ``_run_body``: OpRun sets ``_run_<name>`` for each GRAPH
        attribute.)"""
        try:
            return body.run(None, feeds, **options)
        except Exception as e:  # noqa: BLE001 - reworded, never swallowed
            clear = next((t for t in CLEAR_ERRORS if isinstance(e, t)), ValueError)
            text = str(e) if clear is not ValueError or isinstance(e, ValueError) \
                else f"{type(e).__name__}: {e}"
            raise clear(f"{self.onnx_node.op_type}: {where}: {text}") from None

    def _check_iterations(self, count: int, first: list) -> None:
        """Before a long run: the scan outputs of ``count`` iterations, each
        the size of the ``first``, must fit in memory."""
        nbytes = sum(v.nbytes for v in first if isinstance(v, np.ndarray))
        self._check_bytes(f"the scan outputs of {count} iterations", count * nbytes)

    def _one_element(self, index: int, value, dtype: type, what: str):
        """The single element of input ``index`` (a tensor of ``dtype``)."""
        if not isinstance(value, (np.ndarray, np.generic)):
            raise TypeError(self._input_error(
                index, f"({what}) must be a tensor, got {type(value).__name__}"))
        if value.dtype != dtype:
            raise TypeError(self._input_error(
                index, f"({what}) has element type {value.dtype}, expected {np.dtype(dtype)}"))
        if value.size != 1:
            raise ValueError(self._input_error(
                index, f"({what}) must have exactly one element, got shape {value.shape}"))
        return value.reshape(-1)[0]

    def _body_condition(self, value, iteration: int) -> bool:
        if type(value) is np.ndarray and value.dtype == np.bool_ and value.size == 1:
            return bool(value.item())
        op = self.onnx_node.op_type
        if (not isinstance(value, (np.ndarray, np.generic)) or value.dtype != np.bool_
                or value.size != 1):
            got = (f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray)
                   else type(value).__name__)
            raise ValueError(f"{op}: the body's condition output must be one bool element, "
                             f"got {got} at iteration {iteration}")
        return bool(value.reshape(-1)[0])

    def _stacked(self, what: str, body: onnx.GraphProto, index: int, values: list,
                 axis: int = 0) -> np.ndarray:
        """``what`` (body output ``index``, "scan output k"): the values of
        the iterations stacked on a new ``axis``."""
        op = self.onnx_node.op_type
        if not values:
            dtype, shape = _declared(body, index)
            if dtype is None:
                raise ValueError(
                    f"{op}: {what} has no iteration and the body declares no element "
                    f"type for it ({body.output[index].name!r})")
            if shape is None:
                return np.empty((0,), dtype=dtype)
            shape = list(shape)
            shape.insert(axis if axis >= 0 else axis + len(shape) + 1, 0)
            return np.empty(tuple(shape), dtype=dtype)
        first = values[0]
        for i, v in enumerate(values):
            if not isinstance(v, np.ndarray):
                v = values[i] = np.asarray(v) if isinstance(v, np.generic) else v
                if not isinstance(v, np.ndarray):
                    raise ValueError(f"{op}: {what} must be a tensor, got "
                                     f"{type(v).__name__} at iteration {i}")
            if v.shape != first.shape or v.dtype != first.dtype:
                raise ValueError(
                    f"{op}: {what} changes between iterations: {first.dtype}"
                    f"{list(first.shape)} at iteration 0, {v.dtype}{list(v.shape)} at "
                    f"iteration {i}")
        rank = first.ndim + 1
        if not -rank <= axis < rank:
            raise ValueError(f"{op}: axis {axis} is out of range for {what}, stacked to "
                             f"rank {rank}")
        self._check_bytes(what, len(values) * first.nbytes)
        return np.stack(values, axis=axis)


class If(ControlFlowOp):
    element_types = _tensor_types("If")

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context=context, initializers=initializers)
        count = len(onnx_node.output)
        for name in ("then_branch", "else_branch"):
            branch = getattr(self, name, None)
            if branch is not None and len(branch.output_names) != count:
                self._reject_attribute(
                    f"the {name} returns {len(branch.output_names)} outputs, the node "
                    f"has {count}")

    def _control(self, args, outer, options):
        if not args or args[0] is None:
            raise ValueError(self._input_error(0, "(cond) is required but missing"))
        cond = bool(self._one_element(0, args[0], np.bool_, "cond"))
        name = "then_branch" if cond else "else_branch"
        self._record_path(cond, lambda: f"If_{name}")
        return tuple(self._call_body(getattr(self, name), outer, options, name))


class Loop(ControlFlowOp):
    element_types = _tensor_types("Loop")

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context=context, initializers=initializers)
        body = self.body
        inputs, outputs = len(body.input_names), len(body.output_names)
        self._carried = inputs - 2
        self._scans = outputs - 1 - self._carried
        given = max(len(onnx_node.input) - 2, 0)
        if inputs < 2:
            self._reject_attribute(
                f"the body takes {inputs} inputs, expected at least 2 (iteration number, "
                "condition)")
        elif given != self._carried:
            self._reject_attribute(
                f"the body takes {self._carried} loop-carried values, the node gives {given}")
        elif self._scans < 0:
            self._reject_attribute(
                f"the body returns {outputs} outputs, expected at least {1 + self._carried} "
                f"(the condition and {self._carried} loop-carried values)")
        elif len(onnx_node.output) > self._carried + self._scans:
            self._reject_attribute(
                f"the node has {len(onnx_node.output)} outputs, the body returns "
                f"{self._carried} loop-carried values and {self._scans} scan outputs")

    def _control(self, args, outer, options):
        trips = args[0] if len(args) > 0 else None
        cond = args[1] if len(args) > 1 else None
        carried = list(args[2:])
        limit = None
        if trips is not None:
            limit = int(self._one_element(0, trips, np.int64, "M"))
            if limit < 0:
                raise ValueError(self._input_error(0, f"(M) must not be negative, got {limit}"))
        going = True
        if cond is not None:
            going = bool(self._one_element(1, cond, np.bool_, "cond"))
        elif limit is None:
            raise ValueError("Loop: neither the trip count M nor the condition cond is "
                             "given: the loop would never end")
        self._record_path(None, lambda: "Loop_body")
        body = self.body
        names = body.input_names
        graph = body.proto_
        n = self._carried
        scans: list[list] = [[] for _ in range(self._scans)]
        i = 0
        while going and (limit is None or i < limit):
            feeds = dict(outer)
            feeds[names[0]] = np.array(i, dtype=np.int64)
            feeds[names[1]] = _TRUE if going else _FALSE
            feeds.update(zip(names[2:], carried))
            outputs = self._call_body(body, feeds, options, f"body, iteration {i}")
            if i == 0 and limit is not None and scans:
                self._check_iterations(limit, outputs[1 + n:])
            if cond is not None:  # without it the body's condition is ignored
                going = self._body_condition(outputs[0], i)
            carried = outputs[1:1 + n]
            for k, values in enumerate(scans):
                values.append(outputs[1 + n + k])
            i += 1
        stacked = [self._stacked(f"scan output {k}", graph, 1 + n + k, values)
                   for k, values in enumerate(scans)]
        return tuple(carried) + tuple(stacked)


class Scan(ControlFlowOp):
    element_types = _tensor_types("Scan")
    since_version = 8
    attributes = (Attr("num_scan_inputs", "int"),
                  Attr("directions", "ints", None),  # opset 8
                  Attr("scan_input_axes", "ints", None),
                  Attr("scan_input_directions", "ints", None),
                  Attr("scan_output_axes", "ints", None),
                  Attr("scan_output_directions", "ints", None))

    def __init__(self, onnx_node, run_params, context=None, initializers=None):
        super().__init__(onnx_node, run_params, context=context, initializers=initializers)
        body = self.body
        m = self.num_scan_inputs or 0
        batched = self.opset < 9  # opset 8: sequence_lens first, batch axis 0
        self._batched = batched
        self._states = len(onnx_node.input) - m - batched
        self._scans = len(body.output_names) - self._states
        if m < 1:
            self._reject_attribute(f"attribute num_scan_inputs must be at least 1, got {m}")
        elif self._states < 0:
            self._reject_attribute(
                f"the node has {len(onnx_node.input)} inputs, fewer than "
                f"{'1 + ' if batched else ''}num_scan_inputs = {m}")
        elif len(body.input_names) != self._states + m:
            self._reject_attribute(
                f"the body takes {len(body.input_names)} inputs, expected {self._states} "
                f"states + {m} scan inputs")
        elif self._scans < 0:
            self._reject_attribute(
                f"the body returns {len(body.output_names)} outputs, fewer than its "
                f"{self._states} states")
        if batched:
            self._in_dirs = self._per_item("directions", self.directions, m, (0, 1))
            self._in_axes, self._out_axes = [0] * m, [0] * max(self._scans, 0)
            self._out_dirs = [0] * max(self._scans, 0)
        else:
            self._in_axes = self._per_item("scan_input_axes", self.scan_input_axes, m)
            self._in_dirs = self._per_item("scan_input_directions", self.scan_input_directions,
                                           m, (0, 1))
            k = max(self._scans, 0)
            self._out_axes = self._per_item("scan_output_axes", self.scan_output_axes, k)
            self._out_dirs = self._per_item("scan_output_directions",
                                            self.scan_output_directions, k, (0, 1))

    def _per_item(self, name: str, values, count: int, allowed=None) -> list[int]:
        if values is None:
            return [0] * count
        if len(values) != count:
            self._reject_attribute(f"attribute {name} has {len(values)} values, expected "
                                   f"{count}")
        elif allowed is not None and any(v not in allowed for v in values):
            self._reject_attribute(f"attribute {name} must hold 0 (forward) or 1 (reverse), "
                                   f"got {list(values)}")
        return list(values)

    def _control(self, args, outer, options):
        n = self._states
        for i in range(self._batched, len(args)):  # states and scan inputs: tensors, all given
            if args[i] is None:
                raise ValueError(self._input_error(i, "is required but missing"))
        if self._batched:
            return self._run_batched(args[0] if args else None, args[1:1 + n], args[1 + n:],
                                     outer, options)
        self._record_path(False, lambda: "Scan_body")
        states, scans, length = list(args[:n]), [], None
        for j, x in enumerate(args[n:]):
            index = n + j
            x, axis = self._scan_input(index, x, self._in_axes[j])
            if length is not None and x.shape[axis] != length:
                raise ValueError(self._input_error(
                    index, f"has {x.shape[axis]} elements on its scan axis {axis}, scan input "
                           f"0 has {length}"))
            length = x.shape[axis]
            scans.append((x, axis, self._in_dirs[j]))
        states, outputs = self._iterate(states, scans, length, outer, options)
        body = self.body.proto_
        stacked = []
        for k, values in enumerate(outputs):
            if self._out_dirs[k]:
                values.reverse()
            stacked.append(self._stacked(f"scan output {k}", body, n + k, values,
                                         self._out_axes[k]))
        return tuple(states) + tuple(stacked)

    def _scan_input(self, index: int, x, axis: int):
        if not isinstance(x, np.ndarray):
            raise TypeError(self._input_error(
                index, f"(a scan input) must be a tensor, got {type(x).__name__}"))
        if not -x.ndim <= axis < x.ndim:
            raise ValueError(self._input_error(
                index, f"has rank {x.ndim} (shape {x.shape}): scan axis {axis} is out of range"))
        return x, axis % x.ndim

    def _iterate(self, states: list, scans: list, length: int, outer: dict, options: dict):
        """Runs the body over ``length`` elements: (final states, the scan
        outputs' values per iteration)."""
        body = self.body
        n = self._states
        state_names, scan_names = body.input_names[:n], body.input_names[n:]
        outputs: list[list] = [[] for _ in range(self._scans)]
        for t in range(length):
            feeds = dict(outer)
            feeds.update(zip(state_names, states))
            for name, (x, axis, reverse) in zip(scan_names, scans):
                at = length - 1 - t if reverse else t
                feeds[name] = x[(slice(None),) * axis + (at,)]
            results = self._call_body(body, feeds, options, f"body, iteration {t}")
            if t == 0 and outputs:
                self._check_iterations(length, results[n:])
            states = results[:n]
            for k, values in enumerate(outputs):
                values.append(results[n + k])
        return states, outputs

    def _run_batched(self, lengths, states, scans, outer, options):
        """Scan opset 8: every state and scan input has the batch axis 0,
        every scan input the sequence axis 1."""
        self._record_path(True, lambda: "Scan8_body")
        n = self._states
        for j, x in enumerate(scans):
            if not isinstance(x, np.ndarray) or x.ndim < 2:
                raise ValueError(self._input_error(
                    1 + n + j, "(a scan input) must be a tensor of rank >= 2 (batch, sequence, "
                               f"...), got {getattr(x, 'shape', type(x).__name__)}"))
            if x.shape[:2] != scans[0].shape[:2]:
                raise ValueError(self._input_error(
                    1 + n + j, f"has batch and sequence sizes {x.shape[:2]}, scan input 0 "
                               f"has {scans[0].shape[:2]}"))
        batch, longest = scans[0].shape[:2]
        for i, s in enumerate(states):
            if not isinstance(s, np.ndarray) or s.ndim < 1 or s.shape[0] != batch:
                raise ValueError(self._input_error(
                    1 + i, f"(a state) must have the batch size {batch} on axis 0, got "
                           f"{getattr(s, 'shape', type(s).__name__)}"))
        if lengths is None:
            lengths = np.full(batch, longest, dtype=np.int64)
        elif (not isinstance(lengths, np.ndarray) or lengths.dtype != np.int64
              or lengths.shape != (batch,)):
            raise ValueError(self._input_error(
                0, f"(sequence_lens) must be int64 of shape ({batch},), got "
                   f"{getattr(lengths, 'dtype', type(lengths).__name__)}"
                   f"{list(getattr(lengths, 'shape', ()))}"))
        elif ((lengths < 0) | (lengths > longest)).any():
            raise ValueError(self._input_error(
                0, f"(sequence_lens) must lie in [0, {longest}], got {lengths.tolist()}"))
        body = self.body.proto_
        finals: list[list] = [[] for _ in range(n)]
        padded: list[list] = [[] for _ in range(self._scans)]
        for b in range(batch):
            length = int(lengths[b])
            items = [(x[b], 0, self._in_dirs[j]) for j, x in enumerate(scans)]
            # a shorter sequence is read from its own start (or end) onwards
            items = [(x[:length], axis, d) for x, axis, d in items]
            got, outputs = self._iterate([s[b] for s in states], items, length, outer, options)
            for i, s in enumerate(got):
                finals[i].append(s)
            for k, values in enumerate(outputs):
                y = self._stacked(f"scan output {k}", body, n + k, values)
                if length < longest:
                    pad = np.zeros((longest - length, *y.shape[1:]), dtype=y.dtype)
                    y = np.concatenate([y, pad]) if values else pad
                padded[k].append(y)
        results = [self._stacked(f"state {i}", body, i, values) for i, values in enumerate(finals)]
        results += [self._stacked(f"scan output {k}", body, n + k, values)
                    for k, values in enumerate(padded)]
        return tuple(results)


class Optional(KernelOp):
    """The optional value If and Loop carry where their schemas allow one:
    the input itself (a tensor or a sequence), or None, the empty optional,
    when the node has none.  The built-in wraps the value in a list, which
    OptionalHasElement and OptionalGetElement do not unwrap."""

    element_types = _tensor_types("If")
    since_version = 15

    def run(self, *args, linked_attributes=None, context=None, bindings=None):
        value = args[0] if args else None
        if value is None and not any(a.name == "type" for a in self.onnx_node.attribute):
            raise ValueError("Optional: a node without input must have the attribute type")
        self._record_path(None, lambda: "Optional_python")
        return (value,)


KERNELS = {"RegisterControlFlowKernels": (If, Loop, Scan, Optional)}
