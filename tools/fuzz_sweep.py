"""The long fuzz sweep over every registered kernel (tests/fuzz/sweep.py).

    python -m tools.fuzz_sweep --cases 50000 --json fuzz.json
    python -m tools.fuzz_sweep --replay 1234          # one case, in-process
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(_TESTS) not in sys.path:
    sys.path.insert(0, str(_TESTS))

from fuzz.sweep import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
