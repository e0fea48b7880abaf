"""The per-kernel pages in docs/operators/ are those the inventory, the schemas
and the support inventory generate today (``python -m tools.operator_pages``
rewrites them); CI builds them with Sphinx, warnings as errors."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import onnx_light_cpu as olc  # noqa: E402
from tools import operator_pages  # noqa: E402


def test_every_registered_kernel_has_a_page():
    names = {f"{operator_pages.page_name(k)}.rst" for k in olc.registered_kernels()}
    assert names | {"index.rst"} == set(operator_pages.pages())


def test_pages_are_up_to_date(capsys):
    status = operator_pages.main(["--check"])
    stale = capsys.readouterr().out
    assert status == 0, f"run `python -m tools.operator_pages`:\n{stale}"


def test_a_microsoft_page_has_its_schema_and_support():
    text = operator_pages.pages()["com_microsoft_SkipSimplifiedLayerNormalization.rst"]
    for part in ("* Domain: ``com.microsoft``", "Operator support", "LightOpSchema",
                 "**Inputs**", "- **gamma** (``T``)", "**Attributes**", "- **epsilon**",
                 "**Type constraints**", "Shape inference"):
        assert part in text, part
