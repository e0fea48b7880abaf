"""The glue of a decoder step on Qwen2-0.5B shapes (hidden 896, 14 heads of
64, 128 tokens): Reshape and Transpose of (1, 128, 896) and (1, 14, 128, 64),
Shape, Unsqueeze, Squeeze, Range of position ids, ConstantOfShape, Expand
and Where of attention masks, Tile of KV heads; ours vs the onnx.reference
built-in vs ORT, 1 thread (these kernels never start a second one).  At
these sizes the time is mostly per-call overhead: the number to watch is
the ratio to the built-in.  The built-in Transpose returns a view (its
consumer pays the copy); ours and ORT's write a contiguous output.

    pytest benchmarks/test_bench_shape.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case, named_case, named_params

I64 = np.int64
TOKENS, HIDDEN, HEADS, HEAD = 128, 896, 14, 64


@functools.cache
def bench_case(name: str):
    rng = np.random.default_rng(0)
    hidden = rng.standard_normal((1, TOKENS, HIDDEN), dtype=np.float32)
    heads = rng.standard_normal((1, HEADS, TOKENS, HEAD), dtype=np.float32)
    i64 = [("Y", np.dtype(I64))]
    cases = {
        "Reshape-1x128x896": lambda: make_case(
            "Reshape", {"x": hidden, "shape": np.array([1, TOKENS, HEADS, HEAD], I64)}),
        "Transpose-1x128x896": lambda: make_case("Transpose", {"x": hidden},
                                                 attrs={"perm": [0, 2, 1]}),
        "Transpose-1x14x128x64": lambda: make_case("Transpose", {"x": heads},
                                                   attrs={"perm": [0, 2, 1, 3]}),
        "Shape-1x14x128x64": lambda: make_case("Shape", {"x": heads}, outputs=i64),
        "Unsqueeze-128": lambda: make_case(
            "Unsqueeze", {"x": np.arange(TOKENS, dtype=I64), "axes": np.array([0, 1], I64)}),
        "Squeeze-1x128x1": lambda: make_case(
            "Squeeze", {"x": hidden[..., :1].copy(), "axes": np.array([2], I64)}),
        "Range-128": lambda: make_case(
            "Range", {"start": np.array(0, I64), "limit": np.array(TOKENS, I64),
                      "delta": np.array(1, I64)}),
        "ConstantOfShape-1x128": lambda: make_case(
            "ConstantOfShape", {"shape": np.array([1, TOKENS], I64)}, outputs=i64,
            attrs={"value": _tensor(np.array([1], I64))}),
        "Expand-mask-1x1x128x128": lambda: make_case(
            "Expand", {"x": rng.random((1, 1, 1, TOKENS)) < 0.9,
                       "shape": np.array([1, 1, TOKENS, TOKENS], I64)}),
        "Where-mask-1x1x128x128": lambda: make_case(
            "Where", {"c": np.tril(np.ones((TOKENS, TOKENS), bool))[None, None],
                      "x": np.zeros((1, 1, TOKENS, TOKENS), np.float32),
                      "y": np.array(-np.inf, np.float32)}, outputs=[("Y", np.dtype(np.float32))]),
        "Tile-kv-1x2x128x64": lambda: make_case(
            "Tile", {"x": heads[:, :2].copy(), "repeats": np.array([1, 7, 1, 1], I64)}),
    }
    case = cases[name]()
    case.rtol = case.atol = 0.0  # data movement: the same values
    return named_case(case, name)


def _tensor(value):
    import onnx.numpy_helper

    return onnx.numpy_helper.from_array(value)


CASES = ("Reshape-1x128x896", "Transpose-1x128x896", "Transpose-1x14x128x64",
         "Shape-1x14x128x64", "Unsqueeze-128", "Squeeze-1x128x1", "Range-128",
         "ConstantOfShape-1x128", "Expand-mask-1x1x128x128", "Where-mask-1x1x128x128",
         "Tile-kv-1x2x128x64")


@pytest.mark.parametrize("name,threads,contender", named_params(CASES, threads=(1,)))
def test_shape(benchmark, bench_options, name, threads, contender):
    bench_contender(benchmark, bench_case(name), contender, threads,
                    budget_s=bench_options.budget_s)
