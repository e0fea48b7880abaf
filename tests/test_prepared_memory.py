"""memory.prepared_empty, the allocator of weights prepared once: 64-byte
aligned at every size, and from 2 MiB up advised for transparent huge
pages over its aligned whole 2 MiB pages (the mapping's VmFlags say "hg")."""

from __future__ import annotations

import os

import numpy as np
import pytest

from onnx_light_cpu.memory import HUGE_PAGE_BYTES, prepared_empty


@pytest.mark.parametrize("size", [0, 1, 17, 1000, HUGE_PAGE_BYTES // 4 - 3,
                                  HUGE_PAGE_BYTES // 4 + 5, 3 * HUGE_PAGE_BYTES // 4])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint8])
def test_shape_dtype_alignment(size, dtype):
    a = prepared_empty(size, dtype)
    assert a.shape == (size,) and a.dtype == np.dtype(dtype)
    assert a.flags.c_contiguous and a.flags.writeable
    assert size == 0 or a.ctypes.data % 64 == 0  # (an empty array has no data to align)
    a[...] = 1  # every element can be written
    assert (a == 1).all()


def _vm_flags(address: int) -> list[str]:
    """VmFlags of the mapping holding ``address`` (/proc/self/smaps)."""
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside and line.startswith("VmFlags:"):
                return line.split()[1:]
    return []


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"),
                    reason="no transparent huge pages on this system")
def test_large_buffers_are_advised_for_huge_pages():
    a = prepared_empty(3 * HUGE_PAGE_BYTES + 100, np.uint8)
    assert "hg" in _vm_flags(a.ctypes.data)
    assert a.ctypes.data % HUGE_PAGE_BYTES == 0  # its first page is a whole one
