"""TopK, GatherElements and ScatterElements at a decoder's sizes: ours vs
ONNX Runtime vs the built-in, 1 and 2 threads (ours is NumPy, one thread).

* TopK of next-token logits: [1, 151936] float32 (Qwen2's vocabulary),
  k = 50, and a batch of 8 rows;
* ScatterElements of [8, 4096] float32 along the last axis with [8, 512]
  indices (cache updates), without and with reduction="add";
* GatherElements of [256, 32] float32 along the last axis with [256, 32]
  indices (the built-in's np.choose takes fewer than 64 choices: wider axes
  fail there).

    pytest benchmarks/test_bench_indexing.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import CONTENDERS, bench_contender, make_case, named_case

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)
THREADS = (1, 2)
CASES = ("TopK-1x151936-k50", "TopK-8x151936-k50", "GatherElements-256x32",
         "ScatterElements-8x4096", "ScatterElements-add-8x4096")


@functools.cache
def indexing_case(name: str):
    rng = np.random.default_rng(0)
    op = name.split("-")[0]
    if op == "TopK":
        rows = int(name.split("-")[1].split("x")[0])
        logits = rng.standard_normal((rows, 151936)).astype(F32)
        case = make_case(op, {"X": logits, "K": np.array([50], I64)},
                         outputs=[("values", F32), ("indices", I64)])
    elif op == "GatherElements":
        data = rng.standard_normal((256, 32)).astype(F32)
        idx = rng.integers(0, 32, (256, 32)).astype(I64)
        case = make_case(op, {"data": data, "indices": idx}, attrs={"axis": 1})
    else:
        data = rng.standard_normal((8, 4096)).astype(F32)
        # distinct positions per row: without a reduction, repeats are free
        idx = np.argsort(rng.random((8, 4096)), axis=1)[:, :512].astype(I64)
        updates = rng.standard_normal((8, 512)).astype(F32)
        attrs = {"axis": 1}
        if "add" in name:
            attrs["reduction"] = "add"
        case = make_case(op, {"data": data, "indices": idx, "updates": updates}, attrs=attrs)
    return named_case(case, name)


@pytest.mark.parametrize("name,threads,contender", [
    pytest.param(n, t, c, id=f"{n}-t{t}-{c}") for n in CASES for t in THREADS
    for c in CONTENDERS])
def test_indexing(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, indexing_case(name), contender, threads,
                    budget_s=bench_options.budget_s)
