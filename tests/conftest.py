"""Shared test configuration: the `slow` and `fuzz` markers and a clean global table."""

from __future__ import annotations

import pytest

import onnx_light_cpu as olc
from onnx_light_cpu import memory

# What the kernels may take as available memory in tests: the tests of
# requests too large to allocate (tens of gigabytes and more) must be
# refused on a machine with 128 GiB as on CI's 24 GiB, not allocated (one
# was, on a 16-core machine, and its worker was killed).
TEST_MEMORY_CAP = 16 << 30


def pytest_addoption(parser):
    parser.addoption(
        "--runslow", action="store_true", default=False, help="run the exhaustive sweeps"
    )
    parser.addoption(
        "--fuzz", action="store_true", default=False,
        help="run the long fuzz sweep (tests/fuzz) and more Hypothesis examples"
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "fuzz: the long fuzz sweep, skipped unless --fuzz is given")


def pytest_collection_modifyitems(config, items):
    slow = not config.getoption("--runslow")
    fuzz = not config.getoption("--fuzz")
    for item in items:
        if slow and "slow" in item.keywords:
            item.add_marker(pytest.mark.skip(reason="exhaustive sweep: give --runslow"))
        # the marker, not the keyword: tests/fuzz/ makes "fuzz" a keyword of its tests
        if fuzz and item.get_closest_marker("fuzz") is not None:
            item.add_marker(pytest.mark.skip(reason="long fuzz sweep: give --fuzz"))


@pytest.fixture(autouse=True)
def _no_global_kernels():
    """Each test starts and ends with an empty global table."""
    olc.unregister_kernels_global()
    yield
    olc.unregister_kernels_global()


@pytest.fixture(autouse=True)
def _memory_capped(monkeypatch):
    """``memory.available_bytes`` at most :data:`TEST_MEMORY_CAP`."""
    real = memory.available_bytes
    monkeypatch.setattr(memory, "available_bytes", lambda: min(real(), TEST_MEMORY_CAP))
