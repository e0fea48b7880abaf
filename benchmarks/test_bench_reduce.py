"""ReduceSum and Softmax on transformer shapes: row and column sums of
(128, 4096), attention (1, 32, 128, 128) and vocabulary (128, 32000)
softmaxes in float32 and float16; ReduceMean and ReduceMax of a CNN's
last feature map, 8x1280x7x7, over the last axis and over the spatial axes
(global pooling as exporters write it); ours vs ORT and the built-in.

    pytest benchmarks/test_bench_reduce.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case, named_case, named_params

HIDDEN = 4096


@functools.lru_cache(maxsize=1)
def bench_case(name: str):
    rng = np.random.default_rng(0)
    if name.startswith(("ReduceMean", "ReduceMax")):
        op, where = name.split("-")
        feeds = {"x": rng.random((8, 1280, 7, 7), dtype=np.float32),
                 "axes": np.array([-1] if where == "last" else [2, 3], dtype=np.int64)}
        return named_case(make_case(op, feeds, rtol=1e-5, atol=1e-6), f"{name}-8x1280x7x7")
    if name.startswith("ReduceSum"):
        axis = -1 if name.endswith("last") else 0
        feeds = {"x": rng.random((128, HIDDEN), dtype=np.float32),
                 "axes": np.array([axis], dtype=np.int64)}
        return named_case(make_case("ReduceSum", feeds, rtol=1e-4, atol=1e-3), name)
    op, shape, dtype = name.split(":")
    shape = tuple(int(s) for s in shape.split("x"))
    x = (rng.standard_normal(shape, dtype=np.float32) * 3).astype(dtype)
    return named_case(make_case("Softmax", {"x": x}, attrs={"axis": -1}, rtol=3e-3, atol=1e-5),
                  f"Softmax-{'x'.join(map(str, shape))}")


CASES = ("ReduceSum-last", "ReduceSum-first", "ReduceMean-last", "ReduceMean-spatial",
         "ReduceMax-spatial", "Softmax:128x32000:float32",
         "Softmax:128x32000:float16", "Softmax:1x32x128x128:float32",
         "Softmax:1x32x128x128:float16")


@pytest.mark.parametrize("name,threads,contender", named_params(CASES))
def test_reduce(benchmark, bench_options, name, threads, contender):
    case = bench_case(name)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
