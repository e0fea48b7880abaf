"""How much memory a kernel may ask for, checked before it asks.

Linux grants an allocation larger than the free memory and kills the
process when the pages are touched, so a shape that cannot fit must be
refused from its size alone, before NumPy or a core allocates anything.
"""

from __future__ import annotations

import resource

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
