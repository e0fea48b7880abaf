# cython: language_level=3
"""The per-run glue of ``KernelOp`` in C, where Python costs a node
microseconds: the input signature that lets a run skip the checks its
inputs already passed, plan keys, and the reuse of kept output buffers."""

cimport numpy as cnp
from cpython.ref cimport PyObject

import numpy as np

cnp.import_array()

# Bound once, as ops/_base binds them: a test that caps the SIMD level sets
# ``simd.state.level``, which is read on every call.
from onnx_light_cpu import simd as _simd
from onnx_light_cpu.threads import get_default_num_threads as _default_threads

cdef extern from "Python.h":
    Py_ssize_t Py_REFCNT(PyObject *o)
    PyObject *PyDict_GetItem(object d, object key)


def input_signature(tuple args, strided):
    """What ``KernelOp``'s per-run input checks depend on, or None when a
    run must take them: per input None (missing) or (dtype, ndim, dense),
    ``dense`` meaning the check wanted it C-contiguous (not in ``strided``).
    None as soon as an input is not a plain ndarray (a scalar, a subclass
    to convert) or is strided where a dense copy would be checked."""
    cdef Py_ssize_t i, n = len(args)
    cdef cnp.ndarray arr
    cdef list out = []
    for i in range(n):
        a = args[i]
        if a is None:
            out.append(None)
            continue
        if not cnp.PyArray_CheckExact(a):
            return None
        arr = <cnp.ndarray>a
        dense = i not in strided
        if dense and not cnp.PyArray_IS_C_CONTIGUOUS(arr):
            return None
        out.append((<object>cnp.PyArray_DESCR(arr), cnp.PyArray_NDIM(arr), dense))
    return tuple(out)


def same_signature(tuple args, tuple signature):
    """Whether ``args`` have ``signature`` (from :func:`input_signature`):
    the same inputs missing, plain ndarrays of the same dtype objects and
    ranks, dense where it was wanted."""
    cdef Py_ssize_t i, n = len(args)
    cdef cnp.ndarray arr
    cdef tuple s
    if signature is None or len(signature) != n:
        return False
    for i in range(n):
        a = args[i]
        if signature[i] is None:
            if a is not None:
                return False
            continue
        if not cnp.PyArray_CheckExact(a):
            return False
        arr = <cnp.ndarray>a
        s = <tuple>signature[i]
        if (<object>cnp.PyArray_DESCR(arr) is not s[0] or cnp.PyArray_NDIM(arr) != <int>s[1]
                or (s[2] is True and not cnp.PyArray_IS_C_CONTIGUOUS(arr))):
            return False
    return True


def plan_key(int level, int threads, tuple args):
    """(level, threads, then dtype and shape of each input, None for a
    missing one): what a plan depends on."""
    cdef list key = [level, threads]
    for a in args:
        if a is None:
            key.append(None)
        else:
            key.append(a.dtype)
            key.append(a.shape)
    return tuple(key)


cdef bint _is_key_of(object key, int level, object threads, tuple args):
    """Whether ``key`` is ``plan_key(level, threads, args)``, read in place
    (no key built): dtype objects compared by identity, shapes by value.
    False also where only an equal, not identical, dtype differs: the
    caller then builds the key."""
    cdef Py_ssize_t pos = 2, i, ndim
    cdef tuple k, shape
    cdef cnp.ndarray arr
    if type(key) is not tuple:
        return False
    k = <tuple>key
    if len(k) < 2 or k[0] != level or k[1] != threads:
        return False
    for a in args:
        if pos >= len(k):
            return False
        if a is None:
            if k[pos] is not None:
                return False
            pos += 1
            continue
        if not cnp.PyArray_Check(a) or pos + 1 >= len(k):
            return False
        arr = <cnp.ndarray>a
        if k[pos] is not <object>cnp.PyArray_DESCR(arr):
            return False
        shape = <tuple>k[pos + 1]
        ndim = cnp.PyArray_NDIM(arr)
        if len(shape) != ndim:
            return False
        for i in range(ndim):
            if cnp.PyArray_DIM(arr, i) != <cnp.npy_intp>shape[i]:
                return False
        pos += 2
    return pos == len(k)


def cached_plan(op, tuple args):
    """``op``'s plan for ``args`` (a ``KernelOp`` with ``_plan``): the last
    run's when its key repeats (the common case, compared in place), else
    ``op._new_plan(key, args)``.  The key: the SIMD level, the thread
    setting (the evaluator's, else the process default) and each input's
    dtype and shape."""
    threads = op._context.num_threads
    if threads is None:
        threads = _default_threads()
    cdef int level = _simd.state.level
    cdef tuple last = op._last_plan
    if _is_key_of(last[0], level, threads, args):
        return last[1]
    key = plan_key(level, threads, args)
    if key == last[0]:
        return last[1]
    return op._new_plan(key, args)


def run_plan(tuple plan, dict results):
    """Runs an evaluator's lean plan (``registry/hook.py``) over ``results``
    (initializers and feeds in, every node's outputs added): per node
    ``(run, inputs_of, outputs, op, planned)``, where ``op`` is the
    ``KernelOp`` whose ``run`` is the base class's, or None, and ``planned``
    says its ``_run`` is the base class's too.  For such an op whose inputs
    have the last checked run's signature, its ``_run`` (``planned``: its
    ``_execute`` with its plan) is called directly, which saves a Python
    frame or two a node; an error there is raised by calling ``run``
    again, which words it.  False as soon as an input is missing (the
    caller's original loop words that error)."""
    cdef tuple entry
    for entry in plan:
        run, inputs_of, outputs, op, planned = entry
        try:
            args = inputs_of(results)
        except KeyError:
            return False
        if op is not None and same_signature(args, op._signature):
            try:
                if planned:
                    out = op._execute(cached_plan(op, args), *args)
                else:
                    out = op._run(*args)
            except Exception:
                out = run(*args)  # raises the clear error of KernelOp.run
        else:
            out = run(*args)
        if type(outputs) is str:  # one output; a run returns a tuple
            results[outputs] = out[0]
        else:
            for name, value in zip(outputs, out):
                results[name] = value
    return True


def dense(tuple arrays):
    """``arrays`` with every ndarray that is not C-contiguous replaced by a
    dense copy (other items as they are): the tuple itself when all are."""
    cdef Py_ssize_t i, n = len(arrays)
    cdef list out = None
    for i in range(n):
        a = arrays[i]
        if cnp.PyArray_Check(a) and not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a):
            if out is None:
                out = list(arrays)
            out[i] = np.ascontiguousarray(a)
    return arrays if out is None else tuple(out)


def reusable_output(dict kept, slot, shape, dtype):
    """``kept[slot]`` when nothing but ``kept`` references it and it has
    ``shape`` and ``dtype``, else None.  Its reference count says it all:
    a caller keeping it, a view of it, an evaluator's result dict or a
    later node's input each hold one."""
    cdef PyObject *p = PyDict_GetItem(kept, slot)
    cdef Py_ssize_t i, ndim
    if p is NULL or Py_REFCNT(p) != 1:
        return None
    arr = <cnp.ndarray>p
    if <object>cnp.PyArray_DESCR(arr) is not dtype and arr.dtype != dtype:
        return None
    if type(shape) is not tuple:
        return arr if (<object>arr).shape == tuple(shape) else None
    ndim = cnp.PyArray_NDIM(arr)
    if len(<tuple>shape) != ndim:
        return None
    for i in range(ndim):
        if cnp.PyArray_DIM(arr, i) != <cnp.npy_intp>(<tuple>shape)[i]:
            return None
    return arr
