"""Plain NumPy oracles: readable implementations that no registration
installs, used by the NAIVE adapters and the tests."""
