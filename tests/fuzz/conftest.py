"""The fuzz budget: ``--fuzz`` (tests/conftest.py) turns on the long sweep
and more Hypothesis examples; environment variables size them:

* ``FUZZ_CASES`` (default 50000), ``FUZZ_SEED`` (0): the long sweep;
* ``FUZZ_JSON``: write the sweep's machine-readable summary there;
* ``FUZZ_EXAMPLES``: Hypothesis examples per operator and test
  (default 10, 200 with --fuzz).
"""

from __future__ import annotations

import os

from . import budget


def pytest_configure(config):
    long = config.getoption("--fuzz", default=False)
    examples = os.environ.get("FUZZ_EXAMPLES")
    budget.EXAMPLES = int(examples) if examples else (200 if long else budget.EXAMPLES)
    budget.SHRINK = long
    budget.SWEEP_CASES = int(os.environ.get("FUZZ_CASES", budget.SWEEP_CASES))
    budget.SWEEP_SEED = int(os.environ.get("FUZZ_SEED", budget.SWEEP_SEED))
    budget.SWEEP_JSON = os.environ.get("FUZZ_JSON") or budget.SWEEP_JSON
