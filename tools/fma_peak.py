"""This machine's float32 FMA peak, the yardstick of the MatMul benchmarks.

    python -m tools.fma_peak [--threads 1 2] [--iters 20000000]

How: ``gemm.fma_peak_gflops`` runs, on each of T pool threads, a loop of
independent fused multiply-add chains that never touch memory (AVX-512:
24 chains of 16 lanes, AVX2: 12 chains of 8 lanes; more chains than FMA
latency x FMA ports, so only FMA throughput limits the loop) and counts
2 flops per lane and FMA.  The best of several runs is reported: on a
shared machine a run can only lose time, never gain it.
"""

from __future__ import annotations

import argparse
import json

from onnx_light_cpu._kernels.engines import gemm
from onnx_light_cpu.simd import LEVEL_NAMES, state


def fma_peak(threads: int, level: int | None = None, iters: int = 20_000_000,
             repeats: int = 5) -> float:
    """Best GFLOP/s of ``repeats`` runs of the FMA loop on ``threads`` threads."""
    level = state.level if level is None else level
    return max(gemm.fma_peak_gflops(iters, level, threads) for _ in range(repeats))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--iters", type=int, default=20_000_000)
    args = parser.parse_args(argv)
    report = {"simd": LEVEL_NAMES[gemm.level_used(state.level)]}
    for t in args.threads:
        report[f"gflops_{t}_threads"] = round(fma_peak(t, iters=args.iters), 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
