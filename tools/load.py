"""A competing process on the second core, for measurements under load.

``competing_load(kind)``: ``idle`` starts nothing; ``busy`` starts a process
that spins without pause; ``bursty`` one that spins 2 ms and sleeps 2 ms,
over and over (a machine shared with short jobs).  The process is stopped
when the block ends.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys

LOADS = ("idle", "busy", "bursty")

_SPIN = """
import time
busy, idle = {busy}, {idle}
while True:
    end = time.perf_counter() + busy
    while time.perf_counter() < end:
        pass
    if idle:
        time.sleep(idle)
"""


@contextlib.contextmanager
def competing_load(kind: str):
    if kind not in LOADS:
        raise ValueError(f"load must be one of {', '.join(LOADS)}, got {kind!r}")
    if kind == "idle":
        yield
        return
    busy, idle = (3600.0, 0.0) if kind == "busy" else (0.002, 0.002)
    process = subprocess.Popen([sys.executable, "-c", _SPIN.format(busy=busy, idle=idle)])
    try:
        yield
    finally:
        process.kill()
        process.wait()
