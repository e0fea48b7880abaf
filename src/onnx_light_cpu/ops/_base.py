"""The adapter base class: an ``OpRun`` with a lean ``run``.

``OpRun.run`` spends about 20 µs a node on logging, attribute keyword
arguments and output checks.  Adapters parse attributes once, in the
constructor, and ``run`` goes straight to the adapter; only a node whose
attributes are linked to a calling function's takes the generic route.

An adapter declares its inputs and attributes (:mod:`._contract`); the
base class parses and checks them, then either calls the adapter's
``_run(*inputs)`` or, for an adapter that splits its work, ``_plan`` once
per input signature (dtypes, shapes, SIMD level, thread setting: the work
that depends on nothing else, kept) and ``_execute(plan, *inputs)`` on
every run.  Usage labels go through one cache, :meth:`KernelOp._record_path`.

A run whose inputs are like the last checked run's (the same dtype
objects, ranks and missing inputs, plain dense arrays: what the checks
depend on, compared in C) goes straight to the adapter: a tiny Add or Abs
then costs about 1 µs a node in all, loop included (2.5-2.9 µs before).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import onnx
import onnx.numpy_helper
from ml_dtypes import bfloat16
from onnx import TensorProto
from onnx.reference.op_run import OpRun

from .._kernels._runloop import aligned_empty, cached_plan, input_signature, same_signature
from ..context import EvaluatorContext
from ..memory import check_allocation
from ..threads import decide_num_threads
from ._contract import Attr, Input, InputChecks, parse_attributes, type_string

__all__ = ["Attr", "Input", "KernelOp", "type_string"]

# Outputs come from the evaluator tree's pool of buffers
# (``context.buffers``, a ``BufferPool``): a buffer nobody else holds any
# more is handed out again, to any node asking for its shape and type.
# Large ones: malloc maps buffers afresh (or trims them back to the
# system), and faulting in their zeroed pages costs as much as a
# memory-bound kernel (measured: Split of 6 MB 140 -> 100 µs, Abs of 40 MB
# 4.1 -> 1.6 ms); within a run, a buffer freed by the lean loop and taken
# by a later node is still in cache.  Small ones: a reference count and a
# shape compare cost less than making a new array.

# NumPy dtype -> ONNX element type, for the types the cores handle.
ELEMENT_TYPES: dict[np.dtype, int] = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(bfloat16): TensorProto.BFLOAT16,
}


def _attribute(template: onnx.AttributeProto, value) -> onnx.AttributeProto:
    """An attribute of ``template``'s name and type holding ``value``."""
    if template.type == onnx.AttributeProto.TENSOR and isinstance(value, np.ndarray):
        value = onnx.numpy_helper.from_array(value)
    return onnx.helper.make_attribute(template.name, value, attr_type=template.type)


#: ``strided_inputs`` of an adapter that brings every input to a layout its
#: core reads itself, copying only what it must (never a broadcast axis).
EVERY_INPUT = frozenset(range(64))

# The exception types an adapter rejects input with; anything else escaping
# ``_run`` is reworded by ``KernelOp.run`` into a ValueError naming the node.
CLEAR_ERRORS = (ValueError, TypeError, NotImplementedError, MemoryError)
# What ``KernelOp.run`` catches: the clear errors, and those of a check an
# adapter lacks (reworded into a ValueError).
RUN_ERRORS = CLEAR_ERRORS + (ArithmeticError, AttributeError, LookupError, RuntimeError)


def _describe(args) -> str:
    return ", ".join("None" if a is None else f"{a.dtype}{list(a.shape)}" for a in args)


# Plans kept per adapter instance: one per input signature seen, dropped
# all at once past this many (a node fed ever new shapes).
PLAN_CACHE_SIZE = 32


class KernelOp(OpRun):
    """Base of every adapter; the class name is the operator type unless
    the class sets ``op_type`` (the com.microsoft twins of ai.onnx
    operators are named ``Microsoft<op_type>``)."""

    op_type: ClassVar[str]
    op_domain = ""
    kernel_name: ClassVar[str]
    element_types: ClassVar[tuple[str, ...]]
    since_version: ClassVar[int] = 1
    until_version: ClassVar[int | None] = None
    #: ONNX element types (TensorProto codes) of the inputs the kernel takes.
    onnx_types: ClassVar[tuple[int, ...]] = ()
    #: "Naive" for the readable NumPy family of the com.microsoft kernels.
    kernel_prefix: ClassVar[str] = ""
    #: Inputs the adapter reads through their strides, never as a dense
    #: copy: exempt from the check that such a copy would fit in memory.
    strided_inputs: ClassVar[frozenset[int]] = frozenset()
    #: The inputs and attributes the operator takes (see ``._contract``).
    inputs: ClassVar[tuple[Input, ...]] = ()
    attributes: ClassVar[tuple[Attr, ...]] = ()
    #: The first invalid attribute of the node, raised by every run: a
    #: constructor error would break building the evaluator or a
    #: registration that re-resolves its nodes.
    _attribute_error: str | None = None
    #: What the last checked run's inputs were like (``_runloop.input_signature``):
    #: runs with inputs like them skip the checks.
    _signature: tuple | None = None
    #: The constant weights of the product that ran after this adapter's
    #: the last time (``EvaluatorContext.streamed``).
    weights_after = None

    def __init_subclass__(cls, **kwargs):
        """What the inventory says of an adapter, derived from its class: the
        kernel name from the operator (class) name, the type strings from
        ``onnx_types`` (unless the class lists them); and a per-class cache
        of usage path labels."""
        super().__init_subclass__(**kwargs)
        if "op_type" not in cls.__dict__:
            cls.op_type = cls.__name__
        cls.kernel_name = f"onnx_light_cpu::{cls.kernel_prefix}{cls.__name__}"
        if "onnx_types" not in cls.__dict__ and "inputs" in cls.__dict__ and cls.inputs:
            cls.onnx_types = cls.inputs[0].types or cls.onnx_types
        cls._input_checks = InputChecks(cls.inputs) if cls.inputs else None
        if "element_types" not in cls.__dict__ and cls.onnx_types:
            cls.element_types = tuple(type_string(t) for t in cls.onnx_types)
        cls._paths = {}

    def __init__(self, onnx_node, run_params, context: EvaluatorContext | None = None,
                 initializers: dict | None = None):
        super().__init__(onnx_node, run_params)
        # The evaluator's own dict, not a copy: values folded into it after
        # this adapter was made are constants to it too.
        self._initializers = {} if initializers is None else initializers
        if context is None:  # used through new_ops, outside the hook
            context = EvaluatorContext({})
        self._context = context
        self._usage = context.usage
        self.opset = run_params["opsets"].get(onnx_node.domain, 1)
        # the node's input names as a tuple: reading the protobuf field
        # costs a microsecond a run in ``_constant_input``
        self._input_names = tuple(onnx_node.input)
        self._plans: dict = {}
        self._last_plan: tuple = (None, None)  # (key, plan) of the last run
        checks = self._input_checks
        self._required = frozenset(checks.required) if checks is not None else frozenset()
        if self.attributes:
            values, problem = parse_attributes(onnx_node, self.attributes)
            self.__dict__.update(values)
            if problem:
                self._reject_attribute(problem)

    def run(self, *args, linked_attributes=None, context=None, bindings=None):
        # The common case: inputs like the last run's (same dtype objects,
        # ranks, missing inputs, plain dense arrays), so every check
        # ``_checked_run`` would make passes again.
        if not same_signature(args, self._signature):
            return self._checked_run(args, linked_attributes)
        try:
            return self._run(*args)
        except RUN_ERRORS as e:
            clear = self._reworded(e, args)
            if clear is None:
                raise
            raise clear from e

    def _checked_run(self, args: tuple, linked_attributes):
        adapter = self
        if self.has_linked_attribute:
            adapter = self._with_linked_attributes(linked_attributes or {})
        if adapter._attribute_error is not None:
            raise ValueError(adapter._attribute_error)
        args = self._checked_inputs(args)
        checks = self._input_checks
        if checks is not None:
            problem = checks.problem(args)
            if problem is not None:
                index, message, error = problem
                raise error(self._input_error(index, message))
        if adapter is self:  # inputs like these pass every check above
            self._signature = input_signature(args, self.strided_inputs)
        try:
            return adapter._run(*args)
        except RUN_ERRORS as e:
            clear = self._reworded(e, args)
            if clear is None:
                raise
            raise clear from e

    def _reworded(self, e: Exception, args: tuple) -> Exception | None:
        """The error a run raises for ``e`` escaping ``_run``: None to raise
        ``e`` itself (a clear error that names the node already)."""
        op_type = self.onnx_node.op_type
        if isinstance(e, CLEAR_ERRORS):
            if op_type in str(e):
                return None
            clear = next(t for t in CLEAR_ERRORS if isinstance(e, t))
            return clear(f"{op_type}: {e}")
        # A check an adapter lacks: still a clear rejection, never a bare
        # IndexError from deep inside.
        if op_type in str(e):
            return ValueError(str(e))
        return ValueError(f"{op_type}: cannot run on inputs "
                          f"({_describe(args)}): {type(e).__name__}: {e}")

    def _run(self, *args):
        """The work of one run: ``_execute`` with the plan of this input
        signature (for adapters that define ``_plan``; others override
        ``_run``)."""
        return self._execute(cached_plan(self, args), *args)

    def _plan(self, *args):
        """What a run needs that depends only on the inputs' dtypes and
        shapes, the attributes, the SIMD level and the thread setting (never
        on input values): computed once per signature."""
        raise NotImplementedError(f"{type(self).__name__} defines neither _run nor _plan")

    def _execute(self, plan, *args):
        raise NotImplementedError(f"{type(self).__name__} defines _plan but not _execute")

    def _plan_for(self, args: tuple):
        """The plan of ``args``' signature (``_runloop.cached_plan``)."""
        return cached_plan(self, args)

    def _new_plan(self, key: tuple, args: tuple):
        """The plan of a signature unlike the last run's: kept per key.  One
        attribute holds the (key, plan) pair, so that another thread never
        sees a key with the plan of another."""
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(*args)
            if len(self._plans) >= PLAN_CACHE_SIZE:
                self._plans.clear()
            self._plans[key] = plan
        self._last_plan = (key, plan)
        return plan

    def _record_path(self, key, make) -> None:
        """Record that the code labelled ``make()`` ran; the label is built
        once per ``key`` (hashable: whatever the label depends on) and kept
        for the class.  Nothing is built while recording is off."""
        if not self._usage.enabled:
            return
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = make()
        self._usage.record(self.kernel_name, path)

    def _reject_attribute(self, message: str) -> None:
        """Keep ``message`` (about an attribute) for the runs to raise."""
        if self._attribute_error is None:
            self._attribute_error = f"{self.onnx_node.op_type}: {message}"
            self._signature = None  # every run raises it

    def _checked_inputs(self, args: tuple) -> tuple:
        """``args`` with NumPy scalars made arrays, after checking that every
        required input is given, that every input is a tensor, and that a
        non-contiguous one could be copied densely."""
        for i in self._required:
            if i >= len(args) or args[i] is None:
                raise ValueError(self._input_error(i, "is required but missing"))
        converted = None
        for i, a in enumerate(args):
            if a is None:
                continue
            if type(a) is not np.ndarray:
                if not isinstance(a, (np.ndarray, np.generic)):
                    raise TypeError(self._input_error(
                        i, f"must be a tensor, got {type(a).__name__}"))
                # a NumPy scalar, an ndarray subclass: the plain array
                converted = converted or list(args)
                converted[i] = a = np.asarray(a)
            if not a.flags.c_contiguous and i not in self.strided_inputs:
                self._check_bytes(f"{self._input_label(i)} as a dense copy",
                                  a.size * a.dtype.itemsize)
        return args if converted is None else tuple(converted)

    def _with_linked_attributes(self, linked: dict) -> KernelOp:
        """This node inside a function body, its attributes that refer to the
        function's set from the caller's values: an adapter parses its
        attributes once, so each set of values gets its own instance."""
        key = tuple(sorted((name, repr(value)) for name, value in linked.items()))
        cache = self.__dict__.setdefault("_linked_instances", {})
        instance = cache.get(key)
        if instance is None:
            node = onnx.NodeProto()
            node.CopyFrom(self.onnx_node)
            del node.attribute[:]
            for att in self.onnx_node.attribute:
                if not att.ref_attr_name:
                    node.attribute.append(att)
                elif att.ref_attr_name in linked:
                    node.attribute.append(_attribute(att, linked[att.ref_attr_name]))
                # else: the function's caller left it unset, the default applies
            instance = cache[key] = type(self)(node, self.run_params, context=self._context,
                                               initializers=self._initializers)
        return instance

    def _new_output(self, shape: tuple[int, ...], dtype: np.dtype, slot: int = 0,
                    aligned: bool = False) -> np.ndarray:
        """An uninitialised array for output ``slot`` (or a scratch buffer)
        that no one else references: a free one of the evaluator's pool
        when there is one.  ``aligned``: a new one starts on a 64-byte
        boundary (for a kernel that stores whole cache lines; one from the
        pool may not, and the kernel then stores as usual)."""
        dtype = np.dtype(dtype)
        pool = self._context.buffers
        out = pool.take(shape, dtype)
        if out is None:
            self._check_bytes(f"output {slot} of shape {shape}", math.prod(shape) * dtype.itemsize)
            out = aligned_empty(shape, dtype) if aligned else np.empty(shape, dtype=dtype)
            pool.keep(out)
        return out

    def _check_bytes(self, what: str, nbytes: int) -> None:
        """MemoryError naming the node when ``nbytes`` (an output, a scratch
        buffer) cannot fit; call before allocating."""
        check_allocation(self.onnx_node.op_type, what, nbytes)

    def _constant_input(self, index: int) -> np.ndarray | None:
        """Input ``index`` when it is an initializer of the evaluator (the
        same array on every run, to prepare once), else None."""
        names = self._input_names
        return self._initializers.get(names[index]) if index < len(names) else None

    def _prepared_input(self, key, index: int, value: np.ndarray, prepare):
        """``prepare()`` computed once per ``key`` while ``value`` is the
        initializer of input ``index`` (the same array on every run, so
        derived layouts can be kept in ``self._prepared_inputs``), else
        computed afresh on each run."""
        if self._constant_input(index) is not value:
            return prepare()
        cache = self.__dict__.setdefault("_prepared_inputs", {})
        if key not in cache:
            cache[key] = prepare()
        return cache[key]

    def _num_threads(self, work: int, min_work_per_thread: int) -> int:
        return decide_num_threads(work, min_work_per_thread, self._context.num_threads)

    def _input_label(self, index: int) -> str:
        names = self.onnx_node.input
        return f"input {index} ({names[index]!r})" if index < len(names) else f"input {index}"

    def _input_error(self, index: int, message: str) -> str:
        return f"{self.onnx_node.op_type}: {self._input_label(index)} {message}"
