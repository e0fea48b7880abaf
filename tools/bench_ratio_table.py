"""Ratio table of a pytest-benchmark run: ours vs onnxruntime vs onnx.reference.

    python -m tools.bench_ratio_table RUN.json [--markdown | --rst]

RUN.json is what ``--benchmark-json=RUN.json`` or ``--benchmark-autosave``
wrote for ``benchmarks/``.  One row per benchmark group with the median time
of each contender and the ratios ours/ORT and ours/builtin: below 1 means
ours is faster.  A contender the run lacks (skipped, or no ORT kernel) shows
"n/a".  Groups with none of the three contenders (the interference suite)
are listed after the table with the slowdowns they recorded.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass, field

CONTENDERS = ("ours", "ort", "builtin")
NA = "n/a"


@dataclass
class Row:
    group: str
    median: dict[str, float] = field(default_factory=dict)
    ours_path: str = ""
    ort_graph: str = ""

    def ratio(self, other: str) -> float | None:
        if "ours" in self.median and other in self.median and self.median[other] > 0:
            return self.median["ours"] / self.median[other]
        return None


def _contender(bench: dict) -> str | None:
    """The contender of a benchmark: its extra_info, else the last id token."""
    name = (bench.get("extra_info") or {}).get("contender")
    if name is None:
        match = re.search(r"\[(.*)\]$", bench.get("name", ""))
        token = match.group(1).rsplit("-", 1)[-1] if match else None
        name = token if token in CONTENDERS else None
    return name


def read_rows(data: dict) -> tuple[list[Row], list[dict]]:
    """Rows sorted by group, and the benchmarks of other contenders."""
    rows: dict[str, Row] = {}
    others: list[dict] = []
    for bench in data.get("benchmarks", []):
        group = bench.get("group") or bench.get("name", "?")
        contender = _contender(bench)
        if contender not in CONTENDERS:
            others.append(bench)
            continue
        row = rows.setdefault(group, Row(group))
        row.median[contender] = bench["stats"]["median"]
        info = bench.get("extra_info") or {}
        if contender == "ours":
            row.ours_path = info.get("path", "")
        elif contender == "ort" and info.get("path") and info.get("path") != info.get("op"):
            row.ort_graph = info["path"]  # e.g. Cast>Exp>Cast: no kernel of its own
    return sorted(rows.values(), key=lambda r: _natural(r.group)), others


def _natural(text: str):
    """'Exp-float32-1e5-t2' sorts by op, dtype, then numbers as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def format_time(seconds: float | None) -> str:
    if seconds is None:
        return NA
    units = (("ns", 1e-9), ("µs", 1e-6), ("ms", 1e-3), ("s", 1.0))
    unit, scale = next((u for u in units if seconds < u[1] * 1000), units[-1])
    value = seconds / scale
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:.{digits}f} {unit}"


def format_ratio(ratio: float | None) -> str:
    return NA if ratio is None else f"{ratio:.2f}"


HEADER = ("group", "ours", "ORT", "builtin", "ours/ORT", "ours/builtin", "ours path", "ORT ran")


def table_cells(rows: list[Row]) -> list[tuple[str, ...]]:
    cells = []
    for row in rows:
        cells.append((
            row.group,
            format_time(row.median.get("ours")),
            format_time(row.median.get("ort")),
            format_time(row.median.get("builtin")),
            format_ratio(row.ratio("ort")),
            format_ratio(row.ratio("builtin")),
            row.ours_path or NA,
            row.ort_graph or ("" if "ort" in row.median else NA),
        ))
    return cells


def summary(rows: list[Row]) -> list[str]:
    lines = []
    for other, label in (("ort", "ORT"), ("builtin", "builtin")):
        ratios = [r for r in (row.ratio(other) for row in rows) if r is not None]
        if not ratios:
            lines.append(f"ours <= {label}: no group has both")
            continue
        wins = sum(r <= 1.0 for r in ratios)
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        lines.append(f"ours <= {label} in {wins} of {len(ratios)} groups "
                     f"(geometric mean ours/{label} = {geomean:.2f})")
    return lines


def other_lines(others: list[dict]) -> list[str]:
    """One line per benchmark outside the table, e.g. the interference suite."""
    lines = []
    for bench in sorted(others, key=lambda b: _natural(b.get("group") or "")):
        info = bench.get("extra_info") or {}
        text = (f"{bench.get('group')}: {info.get('contender') or bench.get('name')} "
                f"median {format_time(bench['stats']['median'])}")
        if info.get("slowdown"):
            text += ", slowdown vs alone " + ", ".join(
                f"{name} {ratio:.2f}" for name, ratio in info["slowdown"].items())
        lines.append(text)
    return lines


def render_text(cells, rst: bool = False) -> str:
    """Aligned columns; with ``rst`` the borders of a reST simple table."""
    widths = [max(len(c[i]) for c in [HEADER, *cells]) for i in range(len(HEADER))]
    # reST simple tables need a non-empty first column: groups always are.
    line = lambda c: "  ".join(v.ljust(w) for v, w in zip(c, widths)).rstrip()  # noqa: E731
    border = "  ".join("=" * w for w in widths)
    if rst:
        return "\n".join([border, line(HEADER), border, *map(line, cells), border])
    return "\n".join([line(HEADER), "  ".join("-" * w for w in widths), *map(line, cells)])


def render_markdown(cells) -> str:
    right = {1, 2, 3, 4, 5}  # numbers align right
    lines = ["| " + " | ".join(HEADER) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(HEADER))) + "|"]
    lines += ["| " + " | ".join(c) + " |" for c in cells]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_ratio_table",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="pytest-benchmark JSON (--benchmark-json or autosave)")
    style = parser.add_mutually_exclusive_group()
    style.add_argument("--markdown", action="store_true", help="GitHub markdown table")
    style.add_argument("--rst", action="store_true", help="reStructuredText simple table")
    args = parser.parse_args(argv)

    with open(args.run, encoding="utf-8") as f:
        data = json.load(f)
    rows, others = read_rows(data)
    if not rows and not others:
        print(f"{args.run}: no benchmarks", file=sys.stderr)
        return 1

    notes = []
    if rows:
        cells = table_cells(rows)
        print(render_markdown(cells) if args.markdown else render_text(cells, rst=args.rst))
        print()
        notes = summary(rows)
        notes.append("times are medians; ratio < 1: ours is faster")
        if any(row.ort_graph for row in rows):
            notes.append("ORT ran: the graph ORT executed when it is not the node itself")
    notes += other_lines(others)
    for note in notes:
        print(f"- {note}" if args.markdown else note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
