"""Bit-level fingerprints of every kernel's outputs, to prove a refactor
changed no result.

    python -m tools.golden --cases 300 --seed 0 --out before.json
    (change the code, rebuild)
    python -m tools.golden --cases 300 --seed 0 --out after.json
    python -m tools.golden --compare before.json after.json

``--only MatMulNBits`` (a substring of ``domain::OpType``) runs or compares
one family's cases of the same numbering.

``--cases`` is per kernel.  Each case is a valid fuzz case (``tests/fuzz``,
no mutation) run at every SIMD level this machine offers and at one and two
threads; the record holds a SHA-256 of the output bytes (or the error's
type and message) and the kernel paths used.  A case depends only on the
seed, the kernel's label and its number, so adding kernels changes no
other case.  ``--compare`` lists every case whose fingerprint
differs at a level both files have.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings

import numpy as np


def _digest(outputs) -> str:
    h = hashlib.sha256()
    for o in outputs:
        if o is None:
            h.update(b"None")
            continue
        a = np.asarray(o)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes() if a.dtype.kind != "O" else repr(a).encode())
    return h.hexdigest()[:20]


def fingerprints(per_target: int, seed: int, only: str | None = None) -> dict:
    """Fingerprints of ``per_target`` cases of every kernel, keyed by the
    kernel's label and the case's number: a case depends on the seed, the
    label and its number only, so adding kernels changes no other case."""
    import zlib

    import onnx_light_cpu as olc
    from onnx_light_cpu.simd import capped_simd_level
    from tests.fuzz.cases import RngDraw
    from tests.fuzz.runner import OurRun
    from tests.fuzz.sweep import make_case, target_label, targets

    out: dict[str, dict] = {}
    for record, policy in targets():
        label = target_label(record, policy)
        if only and only not in label:
            continue
        for k in range(per_target):
            key = f"{label}#{k}"
            try:
                draw = RngDraw((seed, zlib.crc32(label.encode()), k))
                run = OurRun(make_case(draw, record, policy, mutation_rate=0.0))
            except Exception as e:  # noqa: BLE001 - a case the generator or onnx refuses
                out[key] = {"setup": f"{type(e).__name__}"}
                continue
            entry: dict[str, object] = {}
            for level in olc.available_simd_levels():
                with capped_simd_level(level):
                    for threads in (1, 2):
                        try:
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                got = _digest(run.run(threads))
                        except Exception as e:  # noqa: BLE001 - recorded, compared
                            got = f"{type(e).__name__}: {e}"[:300]
                        entry[f"{level}/t{threads}"] = got
                    entry[f"{level}/paths"] = sorted(olc.used_kernel_paths(run.sess))
            out[key] = entry
    return out


def compare(before: dict, after: dict, level_map: dict[str, str], only: str | None = None) -> int:
    """Differences between two runs; ``level_map`` names the level of the
    second run that stands for one of the first's (a run made before a
    level existed)."""
    differ = 0
    if only:
        before = {k: v for k, v in before.items() if only in k}
    for key, old in before.items():
        new = after.get(key)
        if new is None:
            print(f"missing after: {key}")
            differ += 1
            continue
        for level_key, value in old.items():
            level, _, what = level_key.partition("/")
            level_key = f"{level_map.get(level, level)}/{what}"
            if level_key in new and new[level_key] != value:
                print(f"{key} {level_key}: {value} -> {new[level_key]}")
                differ += 1
    print(f"{len(before)} cases compared, {differ} differences")
    return 1 if differ else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=300, help="cases per kernel")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", help="substring of the target label, e.g. MatMulNBits")
    p.add_argument("--out")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    p.add_argument("--map", action="append", default=[], metavar="OLD=NEW",
                   help="compare level OLD of BEFORE with level NEW of AFTER")
    args = p.parse_args(argv)
    if args.compare:
        with open(args.compare[0]) as f0, open(args.compare[1]) as f1:
            return compare(json.load(f0), json.load(f1),
                           dict(m.split("=", 1) for m in args.map), args.only)
    result = fingerprints(args.cases, args.seed, args.only)
    text = json.dumps(result, indent=0, sort_keys=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
