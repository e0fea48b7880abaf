"""Thread-pool interference: our pooled Exp next to OpenBLAS and ORT pools.

Our Exp (1e6 float32, 2 threads) is timed alone, then interleaved with a
NumPy 512x512 float32 matmul (OpenBLAS threads) and an ORT session (its
own intra-op pool, spinning off or on).  Two ways of interleaving:

* ``blocks``: each engine runs a block (warm-up calls, then timed calls),
  the blocks alternate: what a pipeline mixing libraries sees;
* ``calls``: single calls alternate with no warm-up: every call pays for
  the other pools' wake-up and spinning, the worst case.

``extra_info`` holds, per engine, the median call alone and interleaved and
their ratio (``slowdown``, > 1 means slower when mixed), the thread pools
threadpoolctl sees and the OpenMP wait settings in effect.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest

import onnx_light_cpu as olc

from ._harness import (
    Interleaver,
    alone_times,
    check_outputs,
    gc_off,
    make_case,
    openmp_report,
    prepare_ort,
    prepare_ours,
)

SIZE, THREADS, MATMUL_N = 10**6, 2, 512
BLOCKS, CALLS, WARMUP = 15, 10, 3  # per engine: 15 blocks of 3 warm-up + 10 timed calls
GROUP = "interference-Exp-float32-1e6-t2"


@pytest.fixture(scope="module")
def exp_case():
    x = np.random.default_rng(0).uniform(-10.0, 10.0, SIZE).astype(np.float32)
    return make_case("Exp", {"X": x})


@pytest.fixture(scope="module")
def ours(exp_case):
    run, info = prepare_ours(exp_case, THREADS)
    check_outputs(exp_case, run(), "ours")
    return run, info


@pytest.fixture(scope="module")
def matmul():
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((MATMUL_N, MATMUL_N), dtype=np.float32) for _ in range(2))
    c = np.empty_like(a)
    return lambda: np.matmul(a, b, out=c)


def _ort(exp_case, spinning: str):
    run, info = prepare_ort(exp_case, THREADS, spinning)
    check_outputs(exp_case, run(), "ort")
    return run


def _check_openmp_visible(report: dict) -> None:
    if olc.BUILT_WITH_OPENMP:
        assert any(p.startswith("openmp:libgomp") for p in report["threadpools"]), (
            f"threadpoolctl does not see libgomp: {report['threadpools']}")


def _median(times) -> float:
    return statistics.median(times)


def test_exp_alone(benchmark, ours):
    run, info = ours
    report = openmp_report()
    _check_openmp_visible(report)
    benchmark.group = GROUP
    benchmark.extra_info.update(contender="ours-alone", op="Exp", dtype="float32", size=SIZE,
                                threads=THREADS, simd=olc.simd_level(), **info, **report)
    with gc_off():
        benchmark.pedantic(run, rounds=BLOCKS * CALLS, warmup_rounds=WARMUP)


@pytest.mark.parametrize("ort_spinning", ["0", "1"], ids=["ortspin0", "ortspin1"])
@pytest.mark.parametrize("mode", ["blocks", "calls"])
def test_exp_interleaved(benchmark, ours, matmul, exp_case, mode, ort_spinning):
    run, info = ours
    engines = {"ours": run, "matmul": matmul, "ort": _ort(exp_case, ort_spinning)}
    report = openmp_report()
    _check_openmp_visible(report)
    benchmark.group = GROUP
    benchmark.extra_info.update(
        contender=f"ours-{mode}-ortspin{ort_spinning}", op="Exp", dtype="float32", size=SIZE,
        threads=THREADS, simd=olc.simd_level(), mode=mode, ort_allow_spinning=ort_spinning,
        matmul=f"numpy {MATMUL_N}x{MATMUL_N} float32", **info, **report,
    )

    calls, warmup = (CALLS, WARMUP) if mode == "blocks" else (1, 0)
    others = {"matmul": engines["matmul"], "ort": engines["ort"]}
    interleave = Interleaver(others, run, calls, warmup)
    if benchmark.disabled:  # CI: one pass through the machinery, no numbers
        benchmark.pedantic(run, setup=interleave)
        return

    # Alone, half before and half after the interleaved phase: drift shows.
    before = alone_times(engines, BLOCKS // 2 + 1, CALLS, WARMUP)
    with gc_off():
        benchmark.pedantic(run, setup=interleave, rounds=BLOCKS * CALLS)
    after = alone_times(engines, BLOCKS // 2 + 1, CALLS, WARMUP)

    alone = {name: _median(before[name] + after[name]) for name in engines}
    mixed = {"ours": benchmark.stats.stats.median,
             **{name: _median(times) for name, times in interleave.times.items()}}
    benchmark.extra_info.update(
        blocks=BLOCKS, calls_per_block=calls, warmup_calls=warmup,
        alone_median_s=alone, interleaved_median_s=mixed,
        slowdown={name: round(mixed[name] / alone[name], 3) for name in engines},
        alone_drift={name: round(_median(after[name]) / _median(before[name]), 3)
                     for name in engines},
    )
