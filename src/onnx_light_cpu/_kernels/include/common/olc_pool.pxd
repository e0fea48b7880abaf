# The shared parallel loop (see olc_pool.h).  A core module calls
# ``olc_pool_import()`` once at import, then ``olc_parallel_for`` with a
# ``cdef void task(void *arg, Py_ssize_t t, int slot) noexcept nogil``.

from cpython.pycapsule cimport PyCapsule_GetPointer

cdef extern from "common/olc_pool.h" nogil:
    ctypedef void (*olc_task_fn)(void *arg, Py_ssize_t task, int slot) noexcept nogil
    void olc_parallel_for(Py_ssize_t ntasks, olc_task_fn fn, void *arg, int threads)
    void olc_pool_bind(void *run)


cdef inline int olc_pool_import() except -1:
    """Bind this module's loop to the one pool, held by _cpu."""
    from onnx_light_cpu._kernels._cpu import POOL
    olc_pool_bind(PyCapsule_GetPointer(POOL, "onnx_light_cpu._kernels._cpu.POOL"))
    return 0
