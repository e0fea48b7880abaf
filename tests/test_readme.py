"""The README's inventory table equals the live inventory."""

from __future__ import annotations

import pathlib

import pytest

import onnx_light_cpu as olc

README = pathlib.Path(__file__).resolve().parents[1] / "README.rst"


def _readme_rows() -> set[tuple[str, str, str, str]]:
    text = README.read_text()
    table = text.split(".. inventory-table-start")[1].split(".. inventory-table-end")[0]
    rows = set()
    for line in table.splitlines():
        if not line.strip() or line.startswith("=") or line.startswith("Registrar"):
            continue
        registrar, domain, device, operators = line.split(None, 3)
        for op in operators.split(","):
            rows.add((registrar, domain, device, op.strip()))
    return rows


@pytest.mark.parametrize("policy", list(olc.MicrosoftKernelImplementation))
def test_inventory_table_matches_registered_kernels(policy):
    live = {(r.registrar, r.domain, r.device, r.op_type)
            for r in olc.registered_kernels(microsoft_implementation=policy)}
    assert _readme_rows() == live


def test_readme_commands_are_the_ci_commands():
    ci = (README.parent / ".ci" / "run").read_text()
    assert 'pip install -e ".[test]" && python -m pytest' in README.read_text()
    assert 'pip install -e ".[test]" && python -m pytest' in ci
    # the main command, run in a fresh virtual environment by a CI step
    fresh = (README.parent / "tools" / "fresh_venv_check.sh").read_text()
    assert "pip install . && python -m onnx_light_cpu run" in README.read_text()
    assert "pip install -q . && python -m onnx_light_cpu run" in fresh
    assert "tools/fresh_venv_check.sh" in ci
