"""Pooling on CNN shapes: ours vs ONNX Runtime vs the built-in, 1 and 2 threads.

    pytest benchmarks/test_bench_pooling.py --benchmark-only --benchmark-group-by=group

- ResNet stem MaxPool 3x3 stride 2 pad 1 on 1x64x112x112;
- GlobalAveragePool on 1x2048x7x7 (ResNet-50) and 8x1280x7x7 (MobileNet-V2);
- AveragePool 3x3 stride 1 pad 1 on 1x192x28x28 (GoogLeNet's pool branch);
- LRN size 5 on 1x64x56x56 (GoogLeNet, AlexNet).

The expected outputs come from float64 NumPy formulas (the built-in's
LRN normalises only the channels below the batch size, and its window loops
in Python take seconds); the built-in still runs as a contender where it is
right, MaxPool and AveragePool only on the smaller shapes (it loops over
every window in Python).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import CONTENDERS, bench_contender, make_case

THREADS = (1, 2)


def _windows(x, k, s, pad, fill):
    """[N, C, OH, OW, k*k] windows of x padded with ``fill``."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    oh = (xp.shape[2] - k) // s + 1
    ow = (xp.shape[3] - k) // s + 1
    taps = [xp[:, :, i:i + s * oh:s, j:j + s * ow:s] for i in range(k) for j in range(k)]
    return np.stack(taps, axis=-1)


def _maxpool_ref(f):
    return [_windows(f["X"].astype(np.float64), 3, 2, 1, -np.inf).max(-1).astype(np.float32)]


def _avgpool_ref(f):
    x = f["X"].astype(np.float64)
    sums = _windows(x, 3, 1, 1, 0.0).sum(-1)
    counts = _windows(np.ones_like(x[:1, :1]), 3, 1, 1, 0.0).sum(-1)
    return [(sums / counts).astype(np.float32)]


def _gap_ref(f):
    return [f["X"].astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(np.float32)]


def _lrn_ref(f, size=5, alpha=1e-4, beta=0.75, bias=2.0):
    x = f["X"].astype(np.float64)
    C = x.shape[1]
    sq = np.zeros_like(x)
    for c in range(C):
        lo, hi = max(0, c - (size - 1) // 2), min(C - 1, c + size // 2)
        sq[:, c] = (x[:, lo:hi + 1] ** 2).sum(axis=1)
    a, b, k = (float(np.float32(v)) for v in (alpha, beta, bias))
    return [(x / (k + a / size * sq) ** b).astype(np.float32)]


CASES = {
    "maxpool-resnet-stem": ("MaxPool", (1, 64, 112, 112),
                            {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                            _maxpool_ref, 22, False),
    "gap-resnet50": ("GlobalAveragePool", (1, 2048, 7, 7), {}, _gap_ref, 22, True),
    "gap-mobilenetv2-b8": ("GlobalAveragePool", (8, 1280, 7, 7), {}, _gap_ref, 22, True),
    "avgpool-googlenet": ("AveragePool", (1, 192, 28, 28),
                          {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1, 1, 1, 1]},
                          _avgpool_ref, 19, False),
    "lrn-googlenet": ("LRN", (1, 64, 56, 56),
                      {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 2.0}, _lrn_ref, 13,
                      False),
}


@functools.lru_cache(maxsize=1)
def pool_case(name: str):
    op, shape, attrs, reference, opset, _ = CASES[name]
    x = np.random.default_rng(len(name)).standard_normal(shape).astype(np.float32)
    case = make_case(op, {"X": x}, attrs=attrs, opset=opset)
    case.dtype = f"float32-{name}"
    case.reference = reference
    case.rtol, case.atol = 1e-5, 1e-6
    return case


def _params():
    for name, (_, _, _, _, _, builtin_ok) in CASES.items():
        for threads in THREADS:
            for contender in CONTENDERS:
                if contender == "builtin" and not builtin_ok:
                    continue  # wrong (LRN) or seconds a call (window loops in Python)
                yield pytest.param(name, threads, contender, id=f"{name}-t{threads}-{contender}")


@pytest.mark.parametrize("name,threads,contender", list(_params()))
def test_pooling(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, pool_case(name), contender, threads,
                    budget_s=bench_options.budget_s)
