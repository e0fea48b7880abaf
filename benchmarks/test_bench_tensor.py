"""Concat, Gather, Slice, Split, ReduceSum, Softmax on transformer shapes.

    pytest benchmarks/test_bench_tensor.py --benchmark-only --benchmark-group-by=group

Shapes: a KV-cache append (Concat), 128 embedding rows out of a 32000x4096
table (Gather), a fused QKV projection cut in three (Slice, Split), row and
column sums of (128, 4096) (ReduceSum) and attention / vocabulary softmaxes.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import CONTENDERS, bench_contender, make_case

THREADS = (1, 2)
HIDDEN = 4096


def _rand(rng, shape, dtype="float32"):
    return rng.random(shape, dtype=np.float32).astype(dtype, copy=False)


def _named(case, label):
    """Distinct groups for cases of one operator and dtype with equal sizes."""
    case.expected_kernel = f"onnx_light_cpu::{case.op_type}"
    case.op_type = label
    return case


@functools.lru_cache(maxsize=1)
def bench_case(name: str):
    rng = np.random.default_rng(0)
    i64 = functools.partial(np.array, dtype=np.int64)
    if name == "Concat-kv":
        feeds = {"past": _rand(rng, (1, 8, 512, 128)), "new": _rand(rng, (1, 8, 1, 128))}
        return _named(make_case("Concat", feeds, attrs={"axis": 2}), "Concat-kv")
    if name == "Gather-rows":
        feeds = {"table": _rand(rng, (32000, HIDDEN)),
                 "ids": rng.integers(0, 32000, size=(1, 128)).astype(np.int64)}
        return _named(make_case("Gather", feeds, attrs={"axis": 0}), "Gather-rows")
    qkv = _rand(rng, (1, 128, 3 * HIDDEN))
    if name == "Slice-qkv":
        feeds = {"qkv": qkv, "starts": i64([HIDDEN]), "ends": i64([2 * HIDDEN]),
                 "axes": i64([-1])}
        return _named(make_case("Slice", feeds), "Slice-qkv")
    if name == "Split-qkv":
        outputs = [(n, np.float32) for n in ("q", "k", "v")]
        return _named(make_case("Split", {"qkv": qkv}, attrs={"axis": -1, "num_outputs": 3},
                                outputs=outputs), "Split-qkv")
    if name.startswith("ReduceSum"):
        axis = -1 if name.endswith("last") else 0
        feeds = {"x": _rand(rng, (128, HIDDEN)), "axes": i64([axis])}
        return _named(make_case("ReduceSum", feeds, rtol=1e-4, atol=1e-3), name)
    op, shape, dtype = name.split(":")
    shape = tuple(int(s) for s in shape.split("x"))
    x = (rng.standard_normal(shape, dtype=np.float32) * 3).astype(dtype)
    return _named(make_case("Softmax", {"x": x}, attrs={"axis": -1}, rtol=3e-3, atol=1e-5),
                  f"Softmax-{'x'.join(map(str, shape))}")


CASES = ("Concat-kv", "Gather-rows", "Slice-qkv", "Split-qkv", "ReduceSum-last",
         "ReduceSum-first", "Softmax:128x32000:float32", "Softmax:128x32000:float16",
         "Softmax:1x32x128x128:float32", "Softmax:1x32x128x128:float16")


def _params():
    for name in CASES:
        for threads in THREADS:
            for contender in CONTENDERS:
                yield pytest.param(name, threads, contender,
                                   id=f"{name.replace(':', '-')}-t{threads}-{contender}")


@pytest.mark.parametrize("name,threads,contender", list(_params()))
def test_tensor(benchmark, bench_options, name, threads, contender):
    case = bench_case(name)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
