"""How much memory a kernel may ask for, checked before it asks.

Linux grants an allocation larger than the free memory and kills the
process when the pages are touched, so a shape that cannot fit must be
refused from its size alone, before NumPy or a core allocates anything.
"""

from __future__ import annotations

import mmap
import resource

import numpy as np

# Transparent huge pages: the size of one, and where asking for them starts.
HUGE_PAGE_BYTES = 2 << 20

# Requests below this size are not checked: reading /proc costs about 20 µs,
# and a request this small cannot take a machine down.
CHECK_FROM_BYTES = 64 << 20


def available_bytes() -> int:
    """Bytes this process can still allocate and touch: the kernel's estimate
    of available memory, lowered by an address-space limit if one is set."""
    available = None
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    if available is None:  # not Linux: physical memory is the best bound known
        import os

        available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit != resource.RLIM_INFINITY:
        available = min(available, max(0, limit - _address_space_used()))
    return available


def _address_space_used() -> int:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def check_allocation(op_type: str, what: str, nbytes: int) -> None:
    """Raise MemoryError, naming the operator and what needs the memory,
    when ``nbytes`` more cannot fit."""
    if nbytes < CHECK_FROM_BYTES:
        return
    available = available_bytes()
    if nbytes > available:
        raise MemoryError(f"{op_type}: {what} needs {nbytes} bytes, more than the "
                          f"{available} bytes available")


def check_buffer(op_type: str, what: str, shape, itemsize: int) -> int:
    """The bytes a buffer of ``shape`` and ``itemsize`` needs (Python
    integers: no overflow), after :func:`check_allocation` of them."""
    nbytes = int(itemsize)
    for d in shape:
        nbytes *= int(d)
    if nbytes >= CHECK_FROM_BYTES:  # the message only when it may be needed
        check_allocation(op_type, f"{what} of shape {tuple(int(d) for d in shape)}", nbytes)
    return nbytes


def prepared_empty(size: int, dtype) -> np.ndarray:
    """An uninitialised 1-D array of ``size`` elements for weights prepared
    once and read on every run, on a 64-byte boundary (a vector load from a
    packed panel then never straddles two cache lines).

    From 2 MiB up it gets memory of its own, and the kernel is asked to back
    its whole 2 MiB pages with huge pages (``madvise``; Linux's default
    transparent huge page mode gives them only when asked, and NumPy asks
    only from 4 MiB, above most projections of a small decoder).  A decode
    step streams every weight once from memory; with one TLB entry per
    2 MiB instead of per 4 KiB, a chain of 48 cold 896 x 4864 int4
    projections ran 2-7 % faster (a 2-core AVX-512 EPYC, 1 and 2 threads).  Only the
    aligned whole pages are advised, so the tail costs no more memory than
    before; the slack mapped in front for the alignment is never touched."""
    dtype = np.dtype(dtype)
    nbytes = int(size) * dtype.itemsize
    advise = getattr(mmap, "MADV_HUGEPAGE", None)
    if nbytes >= HUGE_PAGE_BYTES and advise is not None:
        try:
            region = mmap.mmap(-1, nbytes + HUGE_PAGE_BYTES,
                               flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        except OSError:   # no mapping to spare: the plain allocation below
            region = None
        if region is not None:
            raw = np.frombuffer(region, dtype=np.uint8)
            start = -raw.ctypes.data % HUGE_PAGE_BYTES
            try:
                region.madvise(advise, start, nbytes // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES)
            except OSError:   # a kernel without them: plain pages
                pass
            return raw[start:start + nbytes].view(dtype)
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + nbytes].view(dtype)
