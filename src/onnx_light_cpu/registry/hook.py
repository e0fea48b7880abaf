"""The hook into ``onnx.reference.ReferenceEvaluator``.

``onnx.reference`` resolves every node once, in the evaluator's constructor,
through ``ReferenceEvaluator._load_impl``; subgraphs (If/Loop/Scan),
model-local functions and expanded function bodies are nested evaluators
built while their parent is being constructed (or, for context-dependent
functions, while the parent resolves a node at run time).  The hook wraps
those two methods:

* ``__init__`` gives each evaluator an :class:`EvaluatorContext`; a nested
  evaluator built inside its parent's constructor or resolver shares the
  parent's context, hence its per-evaluator kernels, its thread count and
  its usage log.  A root evaluator snapshots the global table, so
  registrations made later do not change what it resolves.
* ``_load_impl`` asks the context first and falls back to ``onnx.reference``.
  What neither can run does not stop the construction at the first node:
  the nodes are noted (with where they are: subgraphs, functions) and the
  outermost constructor raises one :class:`MissingOperatorsError` naming
  them all.  Every resolution is noted the same way in a
  :class:`BuildReport`, which ``registry/check.py`` prints.
* ``run`` of an evaluator that has kernels installed takes a lean loop over
  a plan made once (node, input names, output names) when the call needs
  none of the original's extras (verbose logging, shape-annotation checks,
  intermediate results, function attributes, built-in nodes that read the
  outer scope); about 2 µs a node cheaper, and a node of ours costs the loop
  about 0.15 µs more than its run.  Our If/Loop/Scan read the outer scope
  too: they declare the names they read there (``outer_inputs``), which the
  lean loop passes after their inputs.  Anything else goes to the original.

Precedence: per-evaluator registration > the user's ``new_ops`` > global
registration > the built-ins.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter

import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun, RuntimeContextError, RuntimeImplementationError

from .._kernels._runloop import run_plan
from ..context import EvaluatorContext
from ..ops._base import KernelOp
from . import conv_chains
from .fold import fold, unfold
from .records import DEFAULT_DOMAIN, RegisteredKernel, table_domain

# (table domain, op_type) -> tuple of (record, adapter class), one per
# opset range of the operator.
Table = dict[tuple[str, str], tuple[tuple[RegisteredKernel, type], ...]]

GLOBAL_TABLE: Table = {}
GLOBAL_LOCK = threading.Lock()


class _Running(threading.local):
    depth = 0  # lean runs in progress in this thread (subgraphs run nested)


_running = _Running()

# .contexts: contexts of evaluators under construction; .report: the
# BuildReport of the outermost construction in progress.
_building = threading.local()


def lookup(context: EvaluatorContext, node: onnx.NodeProto, opsets: dict,
           new_ops: dict) -> tuple[RegisteredKernel, type] | None:
    """The (record, adapter class) entry that runs ``node`` in ``context``, or None."""
    key = (table_domain(node.domain), node.op_type)
    entries = context.session_kernels.get(key)
    if entries is None:
        if (node.domain, node.op_type) in new_ops:
            return None
        entries = context.global_kernels.get(key)
        if entries is None:
            return None
    version = opsets.get(node.domain)
    if version is None:
        return None
    for record, adapter in entries:
        if record.accepts_opset(version):
            return record, adapter
    return None


def resolve(context: EvaluatorContext, node: onnx.NodeProto, opsets: dict, new_ops: dict,
            initializers: dict | None = None):
    """A factory ``(node, run_params) -> adapter`` for ``node`` in
    ``context``, or None.

    ``initializers`` are the evaluator's constant tensors: an adapter may
    prepare (pack, quantize) those it takes as inputs once."""
    found = lookup(context, node, opsets, new_ops)
    if found is None:
        return None
    return functools.partial(found[1], context=context, initializers=initializers)


class Provider(enum.Enum):
    """Who runs a node, as the hook resolved it."""

    KERNEL = "onnx_light_cpu kernel"
    NEW_OPS = "new_ops"  # a class the user passed to the evaluator
    BUILTIN = "onnx.reference"
    EXPANDED = "onnx.reference, function body"  # the schema's function, expanded
    FUNCTION = "model-local function"
    UNREGISTERED = "onnx_light_cpu kernel, not registered"
    MISSING = "nothing"


@dataclass(frozen=True)
class Resolution:
    """How one node was resolved while an evaluator was built."""

    domain: str  # as written in the node: '' is ai.onnx
    op_type: str
    opset: int | None  # None: the model imports no opset of the domain
    node_name: str  # the node's name, or '#i', its position in its graph
    location: str  # '' for the main graph, else the path of subgraphs and functions
    provider: Provider
    kernel: RegisteredKernel | None = None
    reason: str = ""  # onnx.reference's error (first line) where it had none
    internal: bool = False  # a node of a function body onnx.reference expanded

    @property
    def operator(self) -> str:
        return f"{self.domain or DEFAULT_DOMAIN}::{self.op_type}"

    @property
    def where(self) -> str:
        name = _shown(self.node_name)
        return f"{name} in {self.location}" if self.location else name


class _Frame:
    """An evaluator under construction."""

    __slots__ = ("evaluator", "parent", "parent_node", "parent_index", "internal", "count",
                 "node", "loading", "_location")

    def __init__(self, evaluator, parent: _Frame | None) -> None:
        self.evaluator = evaluator
        self.parent = parent
        # A subgraph is built while its parent instantiates the node that
        # holds it (the last node the parent resolved); an expanded function
        # body while the parent resolves a node; a model-local function
        # before the parent resolves any.
        self.parent_node = None if parent is None else parent.node
        self.parent_index = 0 if parent is None else parent.count - 1
        self.internal = parent is not None and (parent.internal or parent.loading is not None)
        # The evaluator resolves its nodes in order, each once (and again
        # with input types, for a context-dependent function): the count of
        # first resolutions is the position of the next node.
        self.count = 0
        self.node = None  # the last node resolved
        self.loading = None  # the node onnx.reference is resolving for it
        self._location = None

    def location(self) -> str:
        if self._location is None:
            self._location = self._where()
        return self._location

    def _where(self) -> str:
        if self.parent is None:
            return ""
        outer = self.parent.location()
        proto = self.evaluator.proto_
        if self.parent_node is None:
            here = f"function {proto.domain}::{proto.name}"
        else:
            name = _shown(_node_name(self.parent_node, self.parent_index))
            node = f"{self.parent_node.op_type} node {name}"
            here = (f"body of {node}" if isinstance(proto, onnx.FunctionProto)
                    else f"{node} > graph {proto.name!r}")
        return f"{outer} > {here}" if outer else here


def _node_name(node: onnx.NodeProto, index: int) -> str:
    """The node's name, or '#i' for the i-th node of its graph, unnamed."""
    return node.name or f"#{index}"


def _shown(name: str) -> str:
    """A node name as printed: quoted, or '#i' for the i-th unnamed node."""
    return name if name.startswith("#") else repr(name)


class BuildReport:
    """Every node resolved while one evaluator tree was built, in order."""

    def __init__(self, detailed: bool = False) -> None:
        # Every node is noted when detailed, else only those nobody can run.
        self.detailed = detailed
        self.frames: list[_Frame] = []
        self.first_error: str = ""  # onnx.reference's first refusal
        self.missing_count = 0
        # (frame, node, position, provider, kernel, reason): a Resolution
        # is made only when asked for, which keeps the constructor cheap.
        self._notes: list[tuple] = []

    @property
    def resolutions(self) -> list[Resolution]:
        return [self._resolution(*note) for note in self._notes]

    @property
    def missing(self) -> list[Resolution]:
        return [self._resolution(*note) for note in self._notes
                if note[3] is Provider.MISSING]

    @staticmethod
    def _resolution(frame, node, index, provider, kernel, reason) -> Resolution:
        return Resolution(
            domain=node.domain, op_type=node.op_type,
            opset=frame.evaluator.opsets.get(node.domain), node_name=_node_name(node, index),
            location=frame.location(), provider=provider, kernel=kernel, reason=reason,
            internal=frame.internal)

    def frame_of(self, evaluator) -> _Frame | None:
        for frame in reversed(self.frames):
            if frame.evaluator is evaluator:
                return frame
        return None

    def note(self, frame: _Frame, node: onnx.NodeProto, provider: Provider,
             kernel: RegisteredKernel | None = None, reason: str = "") -> None:
        self._notes.append((frame, node, frame.count - 1, provider, kernel, reason))
        if provider is Provider.MISSING:
            self.missing_count += 1


def missing_listing(missing: list[Resolution], limit: int = 8) -> list[str]:
    """One line per operator (domain, op_type, opset) nobody runs, with its nodes."""
    groups: dict[tuple[str, int | None], list[Resolution]] = {}
    for r in missing:
        groups.setdefault((r.operator, r.opset), []).append(r)
    lines = []
    for (operator, opset), nodes in sorted(groups.items(), key=_operator_order):
        version = f"opset {opset}" if opset is not None else "domain not imported by the model"
        where = ", ".join(r.where for r in nodes[:limit])
        if len(nodes) > limit:
            where += f", ... ({len(nodes) - limit} more)"
        lines.append(f"  {operator} ({version}): {counted(len(nodes), 'node')}: {where}")
    return lines


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _operator_order(item) -> tuple:
    (operator, opset), _nodes = item
    domain, op_type = operator.rsplit("::", 1)
    return domain != DEFAULT_DOMAIN, domain, op_type, opset or 0


class MissingOperatorsError(RuntimeImplementationError):
    """The operators of a model that neither a registered onnx_light_cpu
    kernel nor onnx.reference can run, all of them.

    A ``NotImplementedError`` (through onnx's ``RuntimeImplementationError``),
    as onnx.reference raises for the first unknown node, hence also a
    ``RuntimeError``.  ``missing`` holds one :class:`Resolution` per node."""

    def __init__(self, missing: list[Resolution], first_error: str = "",
                 stopped_by: BaseException | None = None) -> None:
        self.missing = tuple(missing)
        operators = {(r.operator, r.opset) for r in missing}
        lines = ["neither onnx_light_cpu nor onnx.reference can run "
                 f"{counted(len(operators), 'operator')} of this model "
                 f"({counted(len(missing), 'node')}):"]
        lines += missing_listing(missing)
        if first_error:
            lines.append(f"onnx.reference said first: {first_error}")
        if stopped_by is not None:
            lines.append(f"(then the construction stopped at {type(stopped_by).__name__}: "
                         f"{first_line(stopped_by)})")
        super().__init__("\n".join(lines))


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else ""


def _cannot_run(error: Exception) -> bool:
    """Whether onnx.reference's error says it has no implementation for the
    node (a missing operator), not that something else went wrong."""
    if isinstance(error, RuntimeContextError):
        return False
    if isinstance(error, NotImplementedError):
        return True
    return str(error).startswith(("No implementation for operator ",
                                  "No default implementation for operator "))


@contextlib.contextmanager
def recording(context: EvaluatorContext) -> Iterator[BuildReport]:
    """Build evaluators with ``context`` as their tree's context and note how
    every node resolves, without raising for missing operators: the
    report says which are."""
    report = BuildReport(detailed=True)
    previous = getattr(_building, "report", None)
    _building.report = report
    stack = _stack()
    stack.append(context)
    try:
        yield report
    finally:
        stack.pop()
        _building.report = previous


def _stack() -> list[EvaluatorContext]:
    stack = getattr(_building, "contexts", None)
    if stack is None:
        stack = _building.contexts = []
    return stack


def _new_root_context() -> EvaluatorContext:
    with GLOBAL_LOCK:
        return EvaluatorContext(dict(GLOBAL_TABLE))


_original_init = ReferenceEvaluator.__init__
_original_load_impl = ReferenceEvaluator._load_impl
_original_run = ReferenceEvaluator.run


def _patched_init(self, *args, **kwargs):
    stack = _stack()
    context = stack[-1] if stack else _new_root_context()
    self._olc_context = context
    report = getattr(_building, "report", None)
    owner = report is None  # the outermost construction raises what is missing
    if owner:
        report = _building.report = BuildReport()
    frame = _Frame(self, report.frames[-1] if report.frames else None)
    report.frames.append(frame)
    stack.append(context)
    try:
        _original_init(self, *args, **kwargs)
    except Exception as error:
        if owner and report.missing_count:  # the first missing node came first
            raise MissingOperatorsError(report.missing, report.first_error, error) from error
        raise
    finally:
        stack.pop()
        report.frames.pop()
        if owner:
            _building.report = None
    if owner and report.missing_count:
        raise MissingOperatorsError(report.missing, report.first_error)
    fold(self)
    make_plan(self)


def make_plan(evaluator) -> None:
    """Prepare the lean run loop, or clear it where it does not apply."""
    context = evaluator.__dict__.get("_olc_context")
    plan = every = None
    nodes = getattr(evaluator, "rt_nodes_", None)
    if (context is not None and (context.session_kernels or context.global_kernels)
            and nodes is not None and not isinstance(evaluator.proto_, onnx.FunctionProto)
            and not any(n.has_linked_attribute for n in nodes)):
        names = [plan_inputs(n) for n in nodes]
        if all(inputs is not None for inputs in names):
            plan = every = _plan_of(evaluator, nodes, names)
            if conv_chains.enabled(context):
                fused_nodes, fused_names = conv_chains.fuse(evaluator, nodes, names)
                if fused_nodes is not nodes:
                    plan = _plan_of(evaluator, fused_nodes, fused_names)
    # the plan that computes every intermediate, for runs that ask for one
    evaluator._olc_plan_every = every
    evaluator._olc_plan = plan


def _plan_of(evaluator, nodes, names) -> tuple:
    """Per node what the lean loop calls, bound once: its run method, the
    getter of its inputs (a tuple of them, whatever their number), its
    output name (a str: one output) or names (a tuple), the node itself
    where its run is KernelOp's and whether its _run is too (``run_plan``
    may skip to its _run or _execute), and the intermediates it reads last."""
    last = _last_reads(evaluator, nodes, names)
    entries = []
    for n, inputs, drops in zip(nodes, names, last):
        direct = isinstance(n, KernelOp) and type(n).run is KernelOp.run
        entries.append((n.run, _inputs_getter(inputs),
                        n.output[0] if len(n.output) == 1 else tuple(n.output),
                        n if direct else None, direct and type(n)._run is KernelOp._run, drops))
    return tuple(entries)


def _last_reads(evaluator, nodes, names) -> list[tuple[str, ...]]:
    """Per node, the intermediates the lean loop can drop after it: those
    it is the last to read, and its outputs that nobody reads.  Graph
    inputs, initializers and graph outputs stay."""
    keep = {"", *evaluator.input_names_, *evaluator.output_names_, *evaluator.rt_inits_}
    last: dict[str, int] = {}
    for i, (node, inputs) in enumerate(zip(nodes, names)):
        for name in node.output:
            last.setdefault(name, i)
        for name in inputs:
            last[name] = i
    drops: list[list[str]] = [[] for _ in nodes]
    for name, i in last.items():
        if name not in keep:
            drops[i].append(name)
    return [tuple(d) for d in drops]


def plan_inputs(node) -> tuple[str, ...] | None:
    """The names the lean loop passes a node: its inputs, then, for a node
    that reads the outer scope, the names it declares it reads there
    (``outer_inputs``: our If, Loop, Scan); None for one that needs the
    whole scope (onnx.reference's), which keeps the original loop."""
    if not node.need_context():
        return tuple(node.input)
    outer = getattr(node, "outer_inputs", None)
    return None if outer is None else tuple(node.input) + tuple(outer)


def _no_inputs(results: dict) -> tuple:
    return ()


def _inputs_getter(names: tuple):
    """``results -> (results[name] for name in names)`` as a tuple (one
    itemgetter call, in C, for two names and more); raises KeyError for a
    name missing from results."""
    if not names:
        return _no_inputs
    if len(names) == 1:
        get = itemgetter(names[0])  # of one name: the value, not a 1-tuple
        return lambda results: (get(results),)
    return itemgetter(*names)


def _patched_run(self, output_names, feed_inputs, attributes=None, intermediate=False,
                 check_shape_annotations=None, _bindings=None):
    nested = _running.depth
    context = self.__dict__.get("_olc_context")
    # A subgraph's outputs are its caller's intermediates; the outermost run
    # hands its outputs over (out of the pool) and takes back, first, those
    # of its last two runs that the caller let go (``y = sess.run(...)`` in
    # a loop still holds the last run's outputs).
    pool = None if nested or context is None else context.buffers
    if pool is not None:
        held = pool.reclaim(self.__dict__.setdefault("_olc_returned", []))
        pool.reclaim(self.__dict__.setdefault("_olc_returned_before", []))
        self._olc_returned_before = held
    _running.depth = nested + 1
    try:
        outputs = _run(self, output_names, feed_inputs, attributes, intermediate,
                       check_shape_annotations, _bindings)
    finally:
        _running.depth = nested
    if pool is not None:
        values = list(outputs.values() if isinstance(outputs, dict) else outputs)
        pool.forget(values)
        pool.end_run()
        self._olc_returned = values
    return outputs


def _run(self, output_names, feed_inputs, attributes, intermediate, check_shape_annotations,
         _bindings):
    """The lean loop where the evaluator has a plan and the call allows it,
    else the original one."""
    plan = self.__dict__.get("_olc_plan")
    if (plan is None or attributes is not None or intermediate or _bindings is not None
            or check_shape_annotations or self.check_shape_annotations_ or self.verbose):
        return _original_run(self, output_names, feed_inputs, attributes, intermediate,
                             check_shape_annotations, _bindings)
    results = {"": None}
    results.update(self.rt_inits_)
    results.update(feed_inputs)
    # intermediates leave the results once read, unless the caller asks for
    # one: then every node runs as it is (no Conv chain fused)
    release = output_names is None or set(output_names) <= set(self.output_names_)
    if not release:
        plan = self._olc_plan_every
    if not run_plan(plan, results, release):  # a missing input: the original words the error
        return _original_run(self, output_names, feed_inputs)
    try:
        return [results[name]
                for name in (self.output_names_ if output_names is None else output_names)]
    except KeyError:  # an unknown output name, likewise
        return _original_run(self, output_names, feed_inputs)


def _patched_load_impl(self, node, input_types=None):
    context = context_of(self)
    report = getattr(_building, "report", None)
    frame = None if report is None else report.frame_of(self)
    # A node is noted on its first resolution: a retry with input types
    # (context-dependent functions) is not a new node, and a resolution at
    # run time has no report.
    noting = frame is not None and input_types is None
    if frame is not None:
        frame.node = node
        frame.count += noting
    detailed = noting and report.detailed
    found = lookup(context, node, self.opsets, self.new_ops_)
    if found is not None:
        if detailed:
            report.note(frame, node, Provider.KERNEL, found[0])
        return functools.partial(found[1], context=context, initializers=self.rt_inits_)
    stack = _stack()
    stack.append(context)  # function bodies built here join this tree
    if frame is not None:
        frame.loading = node
    try:
        factory = _original_load_impl(self, node, input_types)
    except RuntimeContextError:  # expanded once the input types are known
        if detailed:
            report.note(frame, node, Provider.EXPANDED)
        raise
    except (NotImplementedError, RuntimeError) as error:
        if not (_cannot_run(error) or node.domain not in self.opsets):
            raise
        reason = first_line(error)
        if _inventory_accepts(node, self.opsets):
            # onnx.reference cannot run it (SimplifiedLayerNormalization, the
            # com.microsoft operators) but we have a kernel: let the evaluator
            # be built, so that a per-evaluator registration can still resolve it.
            if detailed:
                report.note(frame, node, Provider.UNREGISTERED, reason=reason)
            return functools.partial(Unregistered, reason=reason)
        if not noting:
            raise
        # Nobody runs it: noted, and the outermost constructor raises for
        # every such node once the whole tree is built.
        report.note(frame, node, Provider.MISSING, reason=reason)
        report.first_error = report.first_error or reason
        return functools.partial(Missing, reason=reason)
    finally:
        stack.pop()
        if frame is not None:
            frame.loading = None
    if detailed:
        report.note(frame, node, _provider_of(self, node, factory))
    return factory


def _provider_of(evaluator, node: onnx.NodeProto, factory) -> Provider:
    """Who onnx.reference's ``_load_impl`` gave the node to."""
    key = (node.domain, node.op_type)
    if isinstance(factory, type):
        return Provider.NEW_OPS if evaluator.new_ops_.get(key) is factory else Provider.BUILTIN
    # OpFunction: a model-local function, or a schema's function body
    return Provider.FUNCTION if key in evaluator.functions_ else Provider.EXPANDED


@functools.lru_cache(maxsize=1)
def _inventory() -> dict[tuple[str, str], tuple[RegisteredKernel, ...]]:
    from .inventory import registered_kernels  # the inventory imports every adapter
    from .records import MicrosoftKernelImplementation

    records: dict[tuple[str, str], tuple[RegisteredKernel, ...]] = {}
    for r in registered_kernels(MicrosoftKernelImplementation.OPTIMIZED):
        key = (table_domain(r.domain), r.op_type)
        records[key] = records.get(key, ()) + (r,)
    return records


def _inventory_accepts(node: onnx.NodeProto, opsets: dict) -> bool:
    """Whether a kernel of ours could run the node once registered."""
    version = opsets.get(node.domain)
    return version is not None and any(
        r.accepts_opset(version)
        for r in _inventory().get((table_domain(node.domain), node.op_type), ()))


class Missing(OpRun):
    """Stands for a node nobody runs while the evaluator tree is built; the
    outermost constructor then raises :class:`MissingOperatorsError`."""

    op_schema = None  # not the schema of a standard operator of the same name

    def __init__(self, onnx_node, run_params, reason: str = ""):
        try:  # builds the subgraphs of its attributes: their nodes are noted too
            super().__init__(onnx_node, run_params)
        except Exception:  # the outermost constructor raises for this node anyway
            self.onnx_node, self.run_params, self._schema = onnx_node, run_params, None
            self.has_subgraph = self.has_linked_attribute = False
        self.reason = reason

    def _run(self, *args, **kwargs):
        raise NotImplementedError(self.reason)


class Unregistered(OpRun):
    """Stands for a node only our kernels can run, until they are registered."""

    def __init__(self, onnx_node, run_params, reason: str = ""):
        super().__init__(onnx_node, run_params)
        self.reason = reason

    def _run(self, *args, **kwargs):
        node = self.onnx_node
        raise NotImplementedError(
            f"{node.domain or 'ai.onnx'}::{node.op_type} has an onnx_light_cpu kernel but it "
            "is not registered for this evaluator: call "
            "onnx_light_cpu.register_kernels_for_session(sess) (or "
            "register_kernels_global() before building it). onnx.reference: "
            f"{self.reason}")


def install() -> None:
    """Patch ReferenceEvaluator once (idempotent)."""
    if getattr(ReferenceEvaluator, "_olc_hooked", False):
        return
    ReferenceEvaluator.__init__ = _patched_init
    ReferenceEvaluator._load_impl = _patched_load_impl
    ReferenceEvaluator.run = _patched_run
    ReferenceEvaluator._olc_hooked = True


def iter_evaluators(root: ReferenceEvaluator) -> Iterator[ReferenceEvaluator]:
    """The evaluator and every nested one: model-local functions, expanded
    function bodies and If/Loop/Scan bodies, each once."""
    seen = set()
    pending = [root]
    while pending:
        evaluator = pending.pop()
        if id(evaluator) in seen:
            continue
        seen.add(id(evaluator))
        yield evaluator
        pending.extend(getattr(evaluator, "functions_", {}).values())
        for node in getattr(evaluator, "rt_nodes_", ()):
            body = getattr(node, "impl_", None)
            if isinstance(body, ReferenceEvaluator):
                pending.append(body)
            if getattr(node, "has_subgraph", False):
                for att in node.onnx_node.attribute:
                    sub = getattr(node, att.name, None)
                    if isinstance(sub, ReferenceEvaluator):
                        pending.append(sub)


def context_of(sess) -> EvaluatorContext:
    """The context of an evaluator; one built before the hook gets one now."""
    if not isinstance(sess, ReferenceEvaluator):
        raise TypeError(
            f"expected an onnx.reference.ReferenceEvaluator, got {type(sess).__name__}"
        )
    context = sess.__dict__.get("_olc_context")
    if context is None:
        context = _new_root_context()
        for evaluator in iter_evaluators(sess):
            evaluator.__dict__.setdefault("_olc_context", context)
    return context


def reresolve(sess: ReferenceEvaluator, keys: set[tuple[str, str]]) -> None:
    """Rebuild the nodes of ``keys`` in the evaluator tree with its context."""
    context = context_of(sess)
    stack = _stack()
    stack.append(context)  # the bodies a new If/Loop/Scan node builds join this tree
    try:
        for evaluator in list(iter_evaluators(sess)):
            unfold(evaluator)  # folded again below, by the new implementations
            nodes = getattr(evaluator, "rt_nodes_", [])
            for i, node in enumerate(nodes):
                proto = node.onnx_node
                if (table_domain(proto.domain), proto.op_type) not in keys:
                    continue
                factory = resolve(context, proto, evaluator.opsets, evaluator.new_ops_,
                                  evaluator.rt_inits_)
                if factory is not None:
                    nodes[i] = factory(proto, node.run_params)
            fold(evaluator)
            make_plan(evaluator)
    finally:
        stack.pop()
