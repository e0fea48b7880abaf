"""Resize on CNN shapes: nearest 2x (an FPN or U-Net upsampling) and
bilinear 2x (half_pixel, align_corners=0: torch's F.interpolate default
export) of 1x256x32x32 and 1x64x128x128 float32.

    pytest benchmarks/test_bench_resize.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import bench_contender, make_case, named_case, named_params

SHAPES = {"256x32": (1, 256, 32, 32), "64x128": (1, 64, 128, 128)}


@functools.lru_cache(maxsize=1)
def bench_case(name: str):
    _, mode, shape = name.split("-")
    rng = np.random.default_rng(0)
    feeds = {"x": rng.random(SHAPES[shape], dtype=np.float32),
             "roi": np.zeros(0, np.float32),
             "scales": np.array([1, 1, 2, 2], np.float32)}
    attrs = {"mode": mode, "coordinate_transformation_mode": "half_pixel"}
    if mode == "nearest":
        attrs["coordinate_transformation_mode"] = "asymmetric"
        attrs["nearest_mode"] = "floor"
    return named_case(make_case("Resize", feeds, attrs=attrs), name)


CASES = tuple(f"Resize-{mode}-{shape}" for mode in ("nearest", "linear") for shape in SHAPES)


@pytest.mark.parametrize("name,threads,contender", named_params(CASES))
def test_resize(benchmark, bench_options, name, threads, contender):
    case = bench_case(name)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
