"""Layouts the cores read: an input as it is when a core can walk its
strides, else the smallest copy that it can."""

from __future__ import annotations

import numpy as np


def compact(x: np.ndarray) -> np.ndarray:
    """``x`` with its broadcast (stride 0) axes but the last cut to length 1:
    what a computation on a broadcast input needs to read, to broadcast back
    with ``np.broadcast_to(result, x.shape)``."""
    last = x.ndim - 1
    return x[tuple(slice(0, 1) if st == 0 and ax != last else slice(None)
                   for ax, st in enumerate(x.strides))]


def engine_ready(x: np.ndarray, dtype=None) -> np.ndarray:
    """``x`` (in ``dtype`` when given) itself when the engine can read it
    (last axis contiguous, strides whole elements), else a copy that is
    contiguous where it must be: axes of stride 0 (broadcast inputs) stay
    broadcast, so a huge stride-0 input costs a compact copy, never a dense
    one."""
    item = x.itemsize
    if (dtype is None or x.dtype == dtype) and (
            x.size == 0 or ((x.ndim == 0 or x.shape[-1] <= 1 or x.strides[-1] == item)
                            and all(st % item == 0 for st in x.strides))):
        return x
    return np.broadcast_to(np.ascontiguousarray(compact(x), dtype=dtype), x.shape)
