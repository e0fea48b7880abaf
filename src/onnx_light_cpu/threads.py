"""How many threads a kernel call uses.

:func:`decide_num_threads` is the only place that decides.  The request is
the evaluator's override if it has one, else the process default: the value
given to :func:`set_default_num_threads`, or else ``omp_get_max_threads()``
(which honours ``OMP_NUM_THREADS`` and ``threadpoolctl`` limits; a build
without OpenMP reads ``OMP_NUM_THREADS`` itself, else counts the CPUs this
process may use).  A call runs serially below its kernel's measured work
threshold, because handing out tasks costs microseconds even for four
elements.  The threads are the worker pool's (``_kernels/_cpu.pyx``).
"""

from __future__ import annotations

import os

from ._kernels import _cpu

_default_num_threads: int | None = None


def _check_count(n: int | None, what: str) -> int | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"{what} must be a positive integer or None, got {n!r}")
    return n


def set_default_num_threads(n: int | None) -> None:
    """Process-wide thread count for kernels; None restores the OpenMP default."""
    global _default_num_threads
    _default_num_threads = _check_count(n, "set_default_num_threads")


def get_default_num_threads() -> int:
    """The process-wide thread count kernels request."""
    if _default_num_threads is not None:
        return _default_num_threads
    if _cpu.BUILT_WITH_OPENMP:
        return _cpu.openmp_max_threads()
    return _cpu_count()


def _cpu_count() -> int:
    """OMP_NUM_THREADS's first value if set and valid, else the usable CPUs."""
    text = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def product_threads(work: int, min_work_per_thread: int, min_decode_work_per_thread: int,
                    few_rows: bool, requested: int | None) -> int:
    """Threads for a matrix product: :func:`decide_num_threads`, except that
    a product of few rows (a decode step's, memory-bound: it streams its
    weights once) takes a thread per ``min_decode_work_per_thread``."""
    threshold = min_decode_work_per_thread if few_rows else min_work_per_thread
    return decide_num_threads(work, threshold, requested)


def decide_num_threads(work: int, min_work_per_thread: int, requested: int | None) -> int:
    """Threads for a call doing ``work`` units, each thread taking at least
    ``min_work_per_thread`` of them; ``requested`` is the evaluator's override.
    """
    if work < 2 * min_work_per_thread:
        return 1
    wanted = requested if requested is not None else get_default_num_threads()
    return max(1, min(wanted, work // min_work_per_thread))
