"""After/before ratios of two sets of pytest-benchmark runs.

    python -m tools.bench_compare --before B1.json B2.json --after A1.json A2.json [--markdown]

Each benchmark's median is taken in every run; a side's time is the median
of its runs' medians (runs made in alternating blocks, so that both sides
meet the same load); the ratio is after / before (below 1: faster after).
One row per benchmark file: its rows, the geometric mean of their ratios,
the lowest and the highest, and how many rows moved by more than 15 %.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict


def medians(paths: list[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for path in paths:
        with open(path) as f:
            for bench in json.load(f)["benchmarks"]:
                out[bench["fullname"]].append(bench["stats"]["median"])
    return out


def compare(before: dict, after: dict) -> dict[str, list[float]]:
    """Ratios per benchmark file (the part of the name before '::')."""
    ratios: dict[str, list[float]] = defaultdict(list)
    for name, times in after.items():
        if name in before:
            ratios[name.split("::")[0]].append(
                statistics.median(times) / statistics.median(before[name]))
    return ratios


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", nargs="+", required=True)
    p.add_argument("--after", nargs="+", required=True)
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    ratios = compare(medians(args.before), medians(args.after))
    head = ("file", "rows", "geomean", "min", "max", "< 0.85", "> 1.15")
    rows = []
    for name in sorted(ratios):
        r = ratios[name]
        gm = math.exp(sum(math.log(x) for x in r) / len(r))
        rows.append((name.rsplit("/", 1)[-1], str(len(r)), f"{gm:.3f}", f"{min(r):.2f}",
                     f"{max(r):.2f}", str(sum(x < 0.85 for x in r)),
                     str(sum(x > 1.15 for x in r))))
    every = [x for r in ratios.values() for x in r]
    if every:
        gm = math.exp(sum(math.log(x) for x in every) / len(every))
        rows.append(("all", str(len(every)), f"{gm:.3f}", f"{min(every):.2f}",
                     f"{max(every):.2f}", str(sum(x < 0.85 for x in every)),
                     str(sum(x > 1.15 for x in every))))
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        for row in [head, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
