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


def run_plan(tuple plan, dict results, bint release):
    """Runs an evaluator's lean plan (``registry/hook.py``) over ``results``
    (initializers and feeds in, every node's outputs added): per node
    ``(run, inputs_of, outputs, op, planned, last_read)``, where ``op`` is
    the ``KernelOp`` whose ``run`` is the base class's, or None, and
    ``planned`` says its ``_run`` is the base class's too.  For such an op
    whose inputs have the last checked run's signature, its ``_run``
    (``planned``: its ``_execute`` with its plan) is called directly, which
    saves a Python frame or two a node; an error there is raised by calling
    ``run`` again, which words it.  With ``release``, the names in
    ``last_read`` (intermediates this node reads last, or makes and nobody
    reads) leave ``results`` after the node, so that their buffers can go
    to later nodes (:class:`BufferPool`).  False as soon as an input is
    missing (the caller's original loop words that error)."""
    cdef tuple entry
    for entry in plan:
        run, inputs_of, outputs, op, planned, last_read = entry
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
        if release and last_read:
            args = out = None  # this frame's references too
            for name in <tuple>last_read:
                results.pop(name, None)
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


cdef extern from "Python.h":
    Py_ssize_t PyList_GET_SIZE(object lst)
    PyObject *PyList_GET_ITEM(object lst, Py_ssize_t i)


cdef class AlignedBuffer:
    """Bytes on a 64-byte boundary, for :func:`aligned_empty`: the base of
    its array, by which :class:`BufferPool` tells that array from a view
    of someone else's.  The bytes are a NumPy array's (63 more than asked
    for), so that NumPy's allocator, and tracemalloc, account for them."""

    cdef cnp.ndarray raw
    cdef char *data
    cdef Py_ssize_t size

    def __cinit__(self, Py_ssize_t nbytes):
        self.size = nbytes
        self.raw = np.empty(nbytes + 63, dtype=np.uint8)
        cdef char *start = <char *>cnp.PyArray_DATA(self.raw)
        self.data = start + (-<size_t>start) % 64

    def __getbuffer__(self, Py_buffer *view, int flags):
        view.buf = self.data
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL
        view.ndim = 1
        view.shape = &self.size
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass


def aligned_empty(shape, dtype):
    """An uninitialised C-contiguous array whose data starts on a 64-byte
    boundary (NumPy's large arrays start 16 bytes past one), for kernels
    that store whole cache lines."""
    dtype = np.dtype(dtype)
    cdef Py_ssize_t n = dtype.itemsize
    for d in shape:
        n *= d
    return np.ndarray(shape, dtype=dtype, buffer=AlignedBuffer(n))


# Runs between two sweeps of the pool, and the runs a shape may go unasked
# before its free buffers are dropped.
cdef Py_ssize_t _SWEEP_EVERY = 8


cdef bint _owns_its_data(cnp.ndarray arr):
    """Whether ``arr`` is no view of another array: it owns its data, or
    its data is an :func:`aligned_empty` buffer."""
    base = <object>cnp.PyArray_BASE(arr) if cnp.PyArray_BASE(arr) is not NULL else None
    return base is None or type(base) is AlignedBuffer


cdef inline Py_ssize_t _lendable(PyObject *p, Py_ssize_t want):
    """The elements of pool buffer ``p`` where it can lend ``want`` (> 0)
    of them to a view (:meth:`BufferPool._take_larger`): free (the pool
    holds its only reference), C-contiguous, want to 2 * want elements;
    else 0."""
    if Py_REFCNT(p) != 1 or not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>p):
        return 0
    cdef Py_ssize_t size = cnp.PyArray_SIZE(<cnp.ndarray>p)
    return size if want <= size <= 2 * want else 0


cdef class BufferPool:
    """The output buffers of an evaluator tree, shared by its nodes.

    A buffer is free when the pool holds its only reference: a result dict
    entry, a caller's variable, a view of it or a later node's input each
    hold one.  The lean run loop drops each intermediate from its results
    after its last reader ran, so a node later in the same run takes the
    buffer while it is still in cache (a prefill's intermediates, hundreds
    of megabytes, otherwise come from memory on every write), and the next
    run takes it again (large fresh arrays fault their pages in, which
    costs as much as a memory-bound kernel).  What a run returns to its
    caller leaves the pool (:meth:`forget`) and comes back at one of the
    next two runs once the caller lets it go (:meth:`reclaim`; ``y =
    sess.run(...)`` in a loop holds the last run's outputs during the
    next run); buffers of a shape not
    asked for during the last runs are dropped (:meth:`end_run`).  A shape
    with no buffers of its own takes a view of a free one up to twice its
    size (:meth:`_take_larger`), the one it took last when that is free.""" 

    cdef dict lists   # (dtype, shape) -> [run it was last asked for, arrays...]
    cdef dict hints   # (dtype, shape) of no list -> (key, index) of the buffer it last took
    cdef object run   # the run count, a Python int
    cdef Py_ssize_t runs

    def __cinit__(self):
        self.lists = {}
        self.hints = {}
        self.runs = 0
        self.run = 0

    def take(self, shape, dtype):
        """A free array of ``shape`` and ``dtype`` (a NumPy dtype), else None
        (then allocate one and :meth:`keep` it).  A shape the pool has never
        kept a buffer of takes a view of a larger free one instead
        (:meth:`_take_larger`); one it has kept buffers of waits for its
        own, so that it does not take the buffer another shape of the same
        run asks for next (a FusedConv's output the Winograd scratch)."""
        cdef Py_ssize_t i, n
        cdef PyObject *p
        shape = shape if type(shape) is tuple else tuple(shape)
        lst = self.lists.get((dtype, shape))
        if lst is None:
            return self._take_larger(shape, dtype)
        lst[0] = self.run
        n = PyList_GET_SIZE(lst)
        for i in range(1, n):
            p = PyList_GET_ITEM(lst, i)
            if Py_REFCNT(p) == 1:
                return <object>p
        return None

    cdef object _take_larger(self, tuple shape, dtype):
        """A view of the first elements of the smallest free C-contiguous
        buffer of ``dtype`` with ``want`` to ``2 * want`` elements, or
        None.  Where every output has a shape of its own (DenseNet: each
        Concat and its BatchNormalization and Relu 32 channels wider than
        the last), no buffer came back within a run and every write went
        to memory.  The view holds the buffer, which is free again once
        the view is gone."""
        cdef Py_ssize_t want = 1, size, best_size = 0, i, best_i = 0
        for d in shape:
            want *= d
        if want <= 0:
            return None
        # first the buffer this shape took last, if it is free: the scan
        # reads every buffer's header, out of cache inside a model's run
        hint = self.hints.get((dtype, shape))
        if hint is not None:
            lst = self.lists.get(hint[0])
            i = hint[1]
            if (lst is not None and i < PyList_GET_SIZE(lst)
                    and _lendable(PyList_GET_ITEM(lst, i), want)):
                return self._lend(lst, i, shape, want)
        best_list = best_key = None
        for key, lst in self.lists.items():
            if key[0] != dtype:
                continue
            for i in range(1, PyList_GET_SIZE(lst)):
                size = _lendable(PyList_GET_ITEM(lst, i), want)
                if size and (best_list is None or size < best_size):
                    best_size, best_list, best_key, best_i = size, lst, key, i
        if best_list is None:
            return None
        self.hints[(dtype, shape)] = (best_key, best_i)
        return self._lend(best_list, best_i, shape, want)

    cdef object _lend(self, list lst, Py_ssize_t i, tuple shape, Py_ssize_t want):
        """A view of ``shape`` on the first ``want`` elements of buffer
        ``i`` of ``lst``, whose shape is then in use (kept at the next
        sweep)."""
        lst[0] = self.run
        return (<object>PyList_GET_ITEM(lst, i)).reshape(-1)[:want].reshape(shape)

    def keep(self, cnp.ndarray arr):
        """Adds a new array (allocated after :meth:`take` found none)."""
        key = (arr.dtype, (<object>arr).shape)
        lst = self.lists.get(key)
        if lst is None:
            self.lists[key] = [self.run, arr]
        else:
            lst.append(arr)

    def forget(self, values):
        """Takes the arrays among ``values`` (a run's results, now the
        caller's) out of the pool."""
        cdef Py_ssize_t i
        for v in values:
            if not cnp.PyArray_CheckExact(v):
                continue
            lst = self.lists.get((v.dtype, v.shape))
            if lst is None:
                continue
            for i in range(1, len(lst)):
                if lst[i] is v:
                    del lst[i]
                    break

    def reclaim(self, list values):
        """Puts back the arrays among ``values`` (what a run returned, see
        :meth:`forget`) that nobody holds any more, so that a run makes its
        outputs in the buffers its caller let go; returns the others
        (empties ``values``)."""
        cdef Py_ssize_t i, n = len(values), refs
        cdef PyObject *p
        cdef list held = []
        for i in range(n):
            p = PyList_GET_ITEM(values, i)
            refs = Py_REFCNT(p)  # before any reference of this frame
            arr = <object>p
            if (not cnp.PyArray_CheckExact(arr) or not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>arr)
                    or not _owns_its_data(<cnp.ndarray>arr)):
                continue
            if refs == 1:
                self.keep(arr)
            else:
                held.append(arr)
        del values[:]
        return held

    def end_run(self):
        """Counts a run; every few runs, drops the free buffers of the
        shapes no run asked for since the last sweep."""
        cdef Py_ssize_t i
        self.runs += 1
        self.run = self.runs
        if self.runs % _SWEEP_EVERY:
            return
        self.hints.clear()  # shapes of past runs (a growing sequence) leave with them
        for key in list(self.lists):
            lst = self.lists[key]
            if <Py_ssize_t>lst[0] >= self.runs - _SWEEP_EVERY:
                continue
            kept = [lst[0]]
            for i in range(1, PyList_GET_SIZE(lst)):
                if Py_REFCNT(PyList_GET_ITEM(lst, i)) > 1:  # in use
                    kept.append(lst[i])
            if len(kept) > 1:
                self.lists[key] = kept
            else:
                del self.lists[key]

    def clear(self):
        self.lists.clear()
        self.hints.clear()

    @property
    def nbytes(self):
        """Bytes of the arrays the pool holds."""
        return sum(a.nbytes for lst in self.lists.values() for a in lst[1:])


