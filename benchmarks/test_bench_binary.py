"""Binary element-wise kernels: Add/Mul on the broadcast fast paths, Div and
Pow (float32), Equal/Less (int64), at 1 and 2 threads.

    pytest benchmarks/test_bench_binary.py --benchmark-only --benchmark-group-by=group

Groups are ``<op>-<dtype>[<A shape>+<B shape>]-<size>-t<threads>``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ._harness import CONTENDERS, bench_contender, make_case

THREADS = (1, 2)

# (op, dtype, shape of A, shape of B)
CASES = (
    ("Add", "float32", (128, 4096), (4096,)),
    ("Mul", "float32", (128, 4096), (4096,)),
    ("Add", "float32", (1, 128, 4096), (1, 128, 4096)),
    ("Mul", "float32", (1, 128, 4096), (1, 128, 4096)),
    ("Add", "float32", (4096,), ()),
    ("Mul", "float32", (4096,), ()),
    ("Add", "float16", (128, 4096), (4096,)),
    ("Add", "float32", (128, 4096), (128, 1)),
    ("Div", "float32", (128, 4096), (128, 4096)),
    ("Pow", "float32", (128, 4096), (128, 4096)),
    ("Equal", "int64", (10**6,), (10**6,)),
    ("Less", "int64", (10**6,), (10**6,)),
)


def _label(shape) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def binary_case(op_type: str, dtype: str, shape_a: tuple, shape_b: tuple):
    rng = np.random.default_rng(len(op_type) + len(shape_a))
    if dtype == "int64":
        a = rng.integers(-3, 4, size=shape_a, dtype=np.int64)
        b = rng.integers(-3, 4, size=shape_b, dtype=np.int64)
        outputs = [("Y", np.bool_)]
    else:
        low = 0.5 if op_type == "Pow" else -4.0  # positive bases: no NaN
        a = rng.uniform(low, 4.0, size=shape_a).astype(dtype)
        b = rng.uniform(0.5, 3.0, size=shape_b).astype(dtype)
        outputs = None
    case = make_case(op_type, {"A": a, "B": b}, outputs=outputs)
    case.dtype = f"{dtype}[{_label(shape_a)}+{_label(shape_b)}]"
    if op_type == "Pow":
        case.rtol = 2e-6  # powf vs NumPy's float32 pow: a few ulp
    return case


def _params():
    for op_type, dtype, shape_a, shape_b in CASES:
        for threads in THREADS:
            for contender in CONTENDERS:
                yield pytest.param(
                    op_type, dtype, shape_a, shape_b, threads, contender,
                    id=f"{op_type}-{dtype}-{_label(shape_a)}+{_label(shape_b)}-t{threads}-"
                       f"{contender}",
                )


@pytest.mark.parametrize("op_type,dtype,shape_a,shape_b,threads,contender", list(_params()))
def test_binary(benchmark, bench_options, op_type, dtype, shape_a, shape_b, threads,
                contender):
    case = binary_case(op_type, dtype, shape_a, shape_b)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
