"""Concat, Gather, Slice, Split on transformer shapes; Pad on a CNN's.

    pytest benchmarks/test_bench_tensor.py --benchmark-only --benchmark-group-by=group

Shapes: a KV-cache append (Concat), 128 embedding rows out of a 32000x4096
table (Gather), a fused QKV projection cut in three (Slice, Split), a
1x64x112x112 feature map padded by 1 and 3 pixels on H and W, constant and
reflect (Pad).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case, named_case, named_params

HIDDEN = 4096


def _rand(rng, shape, dtype="float32"):
    return rng.random(shape, dtype=np.float32).astype(dtype, copy=False)


@functools.lru_cache(maxsize=1)
def bench_case(name: str):
    rng = np.random.default_rng(0)
    i64 = functools.partial(np.array, dtype=np.int64)
    if name == "Concat-kv":
        feeds = {"past": _rand(rng, (1, 8, 512, 128)), "new": _rand(rng, (1, 8, 1, 128))}
        return named_case(make_case("Concat", feeds, attrs={"axis": 2}), "Concat-kv")
    if name == "Gather-rows":
        feeds = {"table": _rand(rng, (32000, HIDDEN)),
                 "ids": rng.integers(0, 32000, size=(1, 128)).astype(np.int64)}
        return named_case(make_case("Gather", feeds, attrs={"axis": 0}), "Gather-rows")
    if name.startswith("Pad-"):
        _, mode, width = name.split("-")
        p = int(width)
        feeds = {"x": _rand(rng, (1, 64, 112, 112)),
                 "pads": i64([0, 0, p, p, 0, 0, p, p])}
        return named_case(make_case("Pad", feeds, attrs={"mode": mode}), name)
    qkv = _rand(rng, (1, 128, 3 * HIDDEN))
    if name == "Slice-qkv":
        feeds = {"qkv": qkv, "starts": i64([HIDDEN]), "ends": i64([2 * HIDDEN]),
                 "axes": i64([-1])}
        return named_case(make_case("Slice", feeds), "Slice-qkv")
    outputs = [(n, np.float32) for n in ("q", "k", "v")]
    return named_case(make_case("Split", {"qkv": qkv}, attrs={"axis": -1, "num_outputs": 3},
                            outputs=outputs), "Split-qkv")


CASES = ("Concat-kv", "Gather-rows", "Slice-qkv", "Split-qkv", "Pad-constant-1",
         "Pad-constant-3", "Pad-reflect-1", "Pad-reflect-3")


@pytest.mark.parametrize("name,threads,contender", named_params(CASES))
def test_tensor(benchmark, bench_options, name, threads, contender):
    case = bench_case(name)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
