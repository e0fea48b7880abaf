"""The README's inventory table equals the live inventory; its generation
example runs and its generate transcript is the command's output."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import shlex
import sys
import textwrap

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


def _between(start: str, end: str) -> str:
    text = README.read_text()
    return text.split(f".. {start}")[1].split(f".. {end}")[0]


@pytest.fixture(scope="module")
def generation_example(tmp_path_factory):
    """The folder the README's generation example writes (run as a user
    would, from a folder with the repository importable) and what it printed."""
    code = textwrap.dedent(_between("generation-example-start", "generation-example-end")
                           .split(".. code-block:: python")[1])
    folder = tmp_path_factory.mktemp("readme")
    root = str(README.parent)
    cwd, path = os.getcwd(), list(sys.path)
    out = io.StringIO()
    try:
        os.chdir(folder)
        sys.path.insert(0, root)
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.rst", "exec"), {"__name__": "readme_example"})
    finally:
        os.chdir(cwd)
        sys.path[:] = path
    return folder, out.getvalue()


def test_readme_generation_example_runs(generation_example):
    folder, printed = generation_example
    assert (folder / "tiny-qwen" / "genai_config.json").is_file()
    tokens, timing = printed.strip().splitlines()[-2:]
    assert len(tokens.strip("[]").split()) == 16
    assert timing.endswith(" tokens per second") and " ms per token, " in timing


def _masked(line: str) -> str:
    """A line of the generate command's output without what varies: times,
    token ids, the SIMD level."""
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r"simd \w+", "simd S", line.rstrip()))


def test_readme_generate_transcript_is_the_commands_output(generation_example, capsys,
                                                          monkeypatch):
    pytest.importorskip("onnxruntime")
    from onnx_light_cpu.cli import main

    command, *transcript = textwrap.dedent(
        _between("generation-cli-start", "generation-cli-end").split("::", 1)[1]
    ).strip().splitlines()
    argv = shlex.split(command)
    assert argv[:4] == ["$", "python", "-m", "onnx_light_cpu"]
    monkeypatch.chdir(generation_example[0])
    assert main(argv[4:]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [_masked(line) for line in lines] == [_masked(line) for line in transcript]
