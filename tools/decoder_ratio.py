"""Ratio table ours / ONNX Runtime of the whole decoders, per load condition.

    python -m tools.decoder_ratio [--loads idle,busy,bursty] [--decoders]
        [-k EXPR] [--bench-time S] [--save DIR]
    python -m tools.decoder_ratio --from RUN.json [RUN.json ...]

Runs benchmarks/test_bench_decoder.py once per load condition (``--load``
of benchmarks/conftest.py: idle, a second process spinning on one core, or
spinning in 2 ms bursts), each run a fresh pytest process, and prints a
markdown table: one row per case and thread count, the median ratio ours/ORT
under each load (below 1: ours faster), and the geometric mean per load of
the tiny decoders and of the real-size ones at each thread count.  ``--decoders`` adds the
real-size cases (minutes each load); ``-k`` selects cases as pytest does
(``-k "int4 and decode"``).  ``--from`` only reads runs saved before
(``--benchmark-json``, or ``--save`` here).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = "benchmarks/test_bench_decoder.py"
LOADS = ("idle", "busy", "bursty")


def run_suite(load: str, out: Path, decoders: bool, keyword: str | None,
              bench_time: float | None) -> None:
    """One pytest process timing the decoder cases under ``load``."""
    cmd = [sys.executable, "-m", "pytest", SUITE, "--benchmark-only", "-q",
           "-p", "no:cacheprovider", f"--load={load}", f"--benchmark-json={out}"]
    if decoders:
        cmd.append("--decoders")
    if keyword:
        cmd += ["-k", keyword]
    if bench_time is not None:
        cmd.append(f"--bench-time={bench_time}")
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), str(ROOT),
                                         os.environ.get("PYTHONPATH")]))
    print(f"# {load}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
    # pytest's report goes to stderr: stdout keeps only the table
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": path},
                          stdout=sys.stderr)
    if proc.returncode not in (0, 5):  # 5: nothing selected
        raise SystemExit(f"decoder_ratio: the {load} run failed (exit {proc.returncode})")


def read_ratios(paths) -> dict:
    """{(case, threads): {load: ratio}} and which cases are real-size."""
    table: dict = {}
    for path in paths:
        data = json.loads(Path(path).read_text())
        run_load = (data.get("machine_info") or {}).get("load", "idle")
        for bench in data.get("benchmarks", []):
            info = bench.get("extra_info") or {}
            if "ratio" not in info:
                continue
            case = f"{info['model']}-{info['dtype']}-{info['step']}"
            key = (case, info["threads"])
            table.setdefault(key, {})[info.get("load", run_load)] = info["ratio"]
    return table


def geometric_mean(values) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _cell(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}"


def render(table: dict, loads) -> str:
    """The markdown table, then a geometric mean per family and load."""
    lines = ["| case | threads | " + " | ".join(loads) + " |",
             "|---|---|" + "---|" * len(loads)]
    for (case, threads) in sorted(table, key=lambda k: (k[0].startswith("tiny"), k)):
        row = table[(case, threads)]
        lines.append(f"| {case} | {threads} | "
                     + " | ".join(_cell(row.get(load)) for load in loads) + " |")
    families = (("tiny decoders", lambda c: c.startswith("tiny")),
                ("real-size decoders", lambda c: not c.startswith("tiny")))
    for family, select in families:
        for threads in sorted({t for _, t in table}):
            keys = [k for k in table if select(k[0]) and k[1] == threads]
            if not keys:
                continue
            means = [geometric_mean(table[k].get(load) for k in keys) for load in loads]
            lines.append(f"| **{family}, geometric mean** ({len(keys)} rows) | {threads} | "
                         + " | ".join(_cell(m) for m in means) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default=",".join(LOADS),
                        help="comma-separated load conditions (default all three)")
    parser.add_argument("--decoders", action="store_true", help="add the real-size decoders")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression selecting cases")
    parser.add_argument("--bench-time", type=float, help="timed seconds per case")
    parser.add_argument("--save", type=Path, help="keep each run's JSON in this folder")
    parser.add_argument("--from", dest="inputs", nargs="+", type=Path,
                        help="read these saved runs instead of running")
    args = parser.parse_args(argv)

    if args.inputs:
        table = read_ratios(args.inputs)
        loads = [load for load in LOADS if any(load in row for row in table.values())]
    else:
        loads = [load.strip() for load in args.loads.split(",") if load.strip()]
        unknown = set(loads) - set(LOADS)
        if unknown:
            parser.error(f"unknown load {sorted(unknown)}: choose among {LOADS}")
        with tempfile.TemporaryDirectory() as tmp:
            folder = args.save or Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            paths = []
            for load in loads:
                paths.append(folder / f"decoders-{load}.json")
                run_suite(load, paths[-1], args.decoders, args.keyword, args.bench_time)
            table = read_ratios(p for p in paths if p.exists())
    print(render(table, loads))
    return 0


if __name__ == "__main__":
    sys.exit(main())
