"""Shared test configuration: the `slow` marker and a clean global table."""

from __future__ import annotations

import pytest

import onnx_light_cpu as olc


def pytest_addoption(parser):
    parser.addoption(
        "--runslow", action="store_true", default=False, help="run the exhaustive sweeps"
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="exhaustive sweep: give --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_global_kernels():
    """Each test starts and ends with an empty global table."""
    olc.unregister_kernels_global()
    yield
    olc.unregister_kernels_global()
