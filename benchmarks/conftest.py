"""Options and fixtures of the benchmark suites.

``--bench-large`` (or ``OLC_BENCH_LARGE=1``) adds the 1e7-element cases;
``--bench-time`` (or ``OLC_BENCH_TIME``) is the timed seconds per benchmark;
``--decoders`` (or ``OLC_BENCH_DECODERS=1``) adds the real-size decoders of
test_bench_decoder.py (minutes); ``--vision`` (or ``OLC_BENCH_VISION=1``)
the real-size CNNs and LSTMs of test_bench_vision.py (minutes); ``--load busy|bursty`` (or
``OLC_BENCH_LOAD``) runs the whole session next to a process competing for
one core (``_harness.competing_load``).
The default run stays short enough for CI's ``--benchmark-disable`` pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

# The harness: contenders, timing, the competing load.
from . import _harness  # noqa: F401  (isort: skip)

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import onnx_light_cpu as olc  # noqa: E402

LARGE_SIZE = 10**7


def pytest_addoption(parser):
    group = parser.getgroup("onnx_light_cpu benchmarks")
    group.addoption("--bench-large", action="store_true", default=False,
                    help="also run the 1e7-element cases (slow)")
    group.addoption("--bench-time", type=float, default=None,
                    help="timed seconds per benchmark (default 0.5)")
    group.addoption("--decoders", action="store_true", default=False,
                    help="also run the real-size decoders (slow)")
    group.addoption("--vision", action="store_true", default=False,
                    help="also run the real-size CNNs and LSTMs (slow)")
    group.addoption("--load", choices=_harness.LOADS, default=None,
                    help="a process competing for one core during the session (default idle)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "decoders: real-size decoders, skipped unless --decoders is given")
    config.addinivalue_line(
        "markers", "vision: real-size CNNs and LSTMs, skipped unless --vision is given")


@dataclass(frozen=True)
class BenchOptions:
    large: bool
    budget_s: float
    decoders: bool = False
    vision: bool = False

    def skip_if_too_large(self, size: int) -> None:
        if size >= LARGE_SIZE and not self.large:
            pytest.skip(f"{size:.0e} elements: give --bench-large or OLC_BENCH_LARGE=1")


@pytest.fixture(scope="session")
def bench_options(request) -> BenchOptions:
    large = request.config.getoption("--bench-large") or os.environ.get(
        "OLC_BENCH_LARGE", "") not in ("", "0")
    budget = request.config.getoption("--bench-time")
    if budget is None:
        budget = float(os.environ.get("OLC_BENCH_TIME", "0.5"))
    decoders = request.config.getoption("--decoders") or _env_flag("OLC_BENCH_DECODERS")
    vision = request.config.getoption("--vision") or _env_flag("OLC_BENCH_VISION")
    return BenchOptions(large=bool(large), budget_s=budget, decoders=bool(decoders),
                        vision=bool(vision))


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _load_kind(config) -> str:
    return config.getoption("--load") or os.environ.get("OLC_BENCH_LOAD") or "idle"


@pytest.fixture(scope="session", autouse=True)
def competing_load(request):
    """The competing process of ``--load``, running for the whole session."""
    with _harness.competing_load(_load_kind(request.config)) as load:
        yield load


@pytest.fixture(autouse=True)
def _no_global_kernels():
    """Only per-session registrations act: the builtin stays the builtin."""
    olc.unregister_kernels_global()
    yield
    olc.unregister_kernels_global()


def pytest_benchmark_update_machine_info(config, machine_info):
    """Versions and settings a saved run needs to be read later."""
    import onnxruntime

    machine_info["onnx_light_cpu"] = {
        "version": olc.__version__,
        "simd_level": olc.simd_level(),
        "available_simd_levels": list(olc.available_simd_levels()),
        "built_with_openmp": bool(olc.BUILT_WITH_OPENMP),
        "default_num_threads": olc.get_default_num_threads(),
        "cpu_count": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    machine_info["versions"] = {
        "numpy": np.__version__, "onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__,
    }
    machine_info["openmp"] = _harness.openmp_report()
    machine_info["load"] = _load_kind(config)
