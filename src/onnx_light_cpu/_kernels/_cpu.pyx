# cython: language_level=3
"""What this build and this CPU offer (instruction-set level, OpenMP), and
the one worker pool every core's parallel loop runs on (olc_pool_impl.h)."""

cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport uint32_t
from libc.stdlib cimport free, malloc
from posix.unistd cimport usleep

from olc_openmp cimport OLC_HAVE_OPENMP, omp_get_max_threads

from olc_cpu cimport OLC_HAVE_AVX512, olc_detect_simd_level


cdef extern from "common/olc_pool_impl.h" nogil:
    ctypedef void (*olc_task_fn)(void *arg, Py_ssize_t task, int slot) noexcept nogil
    int olc_pool_init()
    void *olc_pool_entry()
    void olc_pool_run_tasks(Py_ssize_t ntasks, olc_task_fn fn, void *arg, int threads)
    int olc_pool_started()
    long olc_pool_pulls()
    long olc_pool_spin_ns()
    void olc_pool_set_spin_ns(long ns)
    long olc_pool_spin_stopped_ns_left()
    long olc_pool_now_ns()
    void olc_pool_skip_numbers(uint32_t n)
    void olc_pool_read_ahead(const void *p, size_t n)
    long olc_pool_ahead_lines()


cnp.import_array()

#: Highest level the CPU and the build support (0 scalar, 1 avx2, 2 avx512,
#: 3 avx512vnni).
DETECTED_SIMD_LEVEL = olc_detect_simd_level()
#: Whether the AVX-512 paths were compiled in.
BUILT_WITH_AVX512 = bool(OLC_HAVE_AVX512)
#: Whether the build linked OpenMP (only for its thread-count default, which
#: OMP_NUM_THREADS and threadpoolctl set; the loops run on the pool).
BUILT_WITH_OPENMP = bool(OLC_HAVE_OPENMP)

if olc_pool_init() != 0:
    raise ImportError("onnx_light_cpu: cannot install the worker pool's fork handler")
#: The pool's entry point, bound by every core module at import (olc_pool.pxd).
POOL = PyCapsule_New(olc_pool_entry(), "onnx_light_cpu._kernels._cpu.POOL", NULL)


def read_ahead(cnp.ndarray a not None, Py_ssize_t nbytes):
    """Ask the pool's idle worker of slot 1 to prefetch the first ``nbytes``
    of the C-contiguous array ``a`` until the next parallel loop or request
    (olc_pool_read_ahead); nothing without a worker."""
    if olc_pool_started() and a.flags.c_contiguous:
        olc_pool_read_ahead(cnp.PyArray_DATA(a), min(nbytes, a.nbytes))


def read_ahead_lines():
    """Cache lines the worker has prefetched so far (for tests)."""
    return olc_pool_ahead_lines()


def openmp_max_threads():
    """``omp_get_max_threads()``: OMP_NUM_THREADS or a threadpoolctl limit."""
    return omp_get_max_threads()


def pool_workers():
    """Worker threads the pool has started so far (it grows on demand)."""
    return olc_pool_started()


def pool_pulls():
    """Workers the callers moved to their CPU so far, each found preempted
    in the middle of a task (olc_pool_pull in olc_pool_impl.h)."""
    return olc_pool_pulls()


def pool_spin_us():
    """How long an idle worker spins for the next job before it sleeps."""
    return olc_pool_spin_ns() / 1000.0


def pool_spin_stopped_us():
    """µs left of the period in which workers spin only briefly after a job
    because one lost its CPU to another process (olc_pool_impl.h); 0 when
    they spin the full time."""
    return olc_pool_spin_stopped_ns_left() / 1000.0


def set_pool_spin_us(double us):
    """Set the spin time (ONNX_LIGHT_CPU_SPIN_US sets it at import)."""
    if not us >= 0:
        raise ValueError(f"set_pool_spin_us: expected a time >= 0, got {us!r}")
    olc_pool_set_spin_ns(<long>(us * 1000.0))


def pool_skip_task_numbers(uint32_t n):
    """Move the pool's task numbering on by ``n`` (for tests: numbers
    wrap past 2**32 in a long-running process)."""
    with nogil:
        olc_pool_skip_numbers(n)


cdef struct _CheckJob:
    int *runs    # times each task ran
    int *slots   # the slot that ran it
    int *nested  # runs of the nested loops' tasks, `inner` per task
    int inner
    long task_ns   # each task spins this long
    long stall_ns  # a worker's first task of the job also spins this long
    int stall_sleeps  # (or sleeps, its CPU time standing still)
    int stalled    # (set once a worker stalled)


cdef void _spin(long ns) noexcept nogil:
    cdef long end = olc_pool_now_ns() + ns
    while olc_pool_now_ns() < end:
        pass


cdef void _check_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    cdef _CheckJob *job = <_CheckJob *>arg
    cdef _CheckJob inner
    job.runs[t] += 1
    job.slots[t] = slot
    if job.task_ns:
        _spin(job.task_ns)
    if slot != 0 and job.stall_ns and not job.stalled:  # a worker preempted mid-task
        job.stalled = 1
        if job.stall_sleeps:
            usleep(<unsigned>(job.stall_ns // 1000))
        else:
            _spin(job.stall_ns)
    if job.inner:  # a loop inside a task runs serially, in that task
        inner.runs = job.nested + t * job.inner
        inner.slots = NULL
        inner.nested = NULL
        inner.inner = 0
        inner.task_ns = inner.stall_ns = inner.stalled = 0
        olc_pool_run_tasks(job.inner, _check_nested_task, &inner, 2)


cdef void _check_nested_task(void *arg, Py_ssize_t t, int slot) noexcept nogil:
    (<_CheckJob *>arg).runs[t] += 1


def pool_check(Py_ssize_t ntasks, int threads, int inner=0, double task_us=0,
               double stall_us=0, bint stall_sleeps=False):
    """Run ``ntasks`` tasks on the pool (for tests): the times each task
    ran, the slot that ran each, and, with ``inner``, the times each task
    of the loops nested in them ran (``inner`` per task).  Each task spins
    ``task_us``; the first task a worker takes spins ``stall_us`` more, as
    a worker preempted mid-task would hold it (``stall_sleeps``: sleeps,
    so that its CPU time stands still as a preempted worker's does)."""
    cdef Py_ssize_t size = max(2 * ntasks + ntasks * inner, 1)
    cdef int *buf = <int *>malloc(size * sizeof(int))
    if buf == NULL:
        raise MemoryError()
    cdef Py_ssize_t i
    for i in range(size):
        buf[i] = 0
    cdef _CheckJob job
    job.runs = buf
    job.slots = buf + ntasks
    job.nested = buf + 2 * ntasks
    job.inner = inner
    job.task_ns = <long>(task_us * 1000.0)
    job.stall_ns = <long>(stall_us * 1000.0)
    job.stall_sleeps = stall_sleeps
    job.stalled = 0
    with nogil:
        olc_pool_run_tasks(ntasks, _check_task, &job, threads)
    try:
        return ([buf[i] for i in range(ntasks)], [buf[ntasks + i] for i in range(ntasks)],
                [buf[2 * ntasks + i] for i in range(ntasks * inner)])
    finally:
        free(buf)
