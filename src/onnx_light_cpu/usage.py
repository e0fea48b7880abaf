"""Kernel-usage log of one evaluator (shared by its subgraphs and functions)."""

from __future__ import annotations

import threading

USAGE_LIMIT = 1024


class UsageLog:
    """The first :data:`USAGE_LIMIT` kernel invocations after each clear.

    Kernels test :attr:`enabled` (one attribute read) before calling
    :meth:`record`; recording, reading and clearing share one lock.
    """

    __slots__ = ("enabled", "_lock", "_names", "_paths")

    def __init__(self) -> None:
        self.enabled = False
        self._lock = threading.Lock()
        self._names: list[str] = []
        self._paths: list[str] = []

    def set_enabled(self, enabled: bool) -> None:
        with self._lock:  # waits for appends in progress
            self.enabled = bool(enabled)

    def record(self, name: str, path: str) -> None:
        with self._lock:
            if self.enabled and len(self._names) < USAGE_LIMIT:
                self._names.append(name)
                self._paths.append(path)

    def clear(self) -> None:
        with self._lock:
            self._names.clear()
            self._paths.clear()

    def names(self) -> list[str]:
        with self._lock:
            return list(self._names)

    def paths(self) -> list[str]:
        with self._lock:
            return list(self._paths)
