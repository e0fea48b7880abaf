"""How much the fuzz tests run: a bounded default, a long sweep with --fuzz.

tests/fuzz/conftest.py sets these from the command line before the test
module is imported."""

# Hypothesis examples per operator and test in the normal suite.
EXAMPLES = 10
# Shrink failing examples (slow on known findings): only with --fuzz.
SHRINK = False
# The long sweep (--fuzz): case count, seed and the JSON summary path.
SWEEP_CASES = 50000
SWEEP_SEED = 0
SWEEP_JSON = None
