"""Property-based fuzzing of every registered kernel.

* :mod:`.cases`: the case record, the draw source shared by Hypothesis and
  the seeded sweep, array layouts and the one-node model builder;
* :mod:`.generators`: a valid-case generator per operator;
* :mod:`.mutations`: generic invalid-input mutations;
* :mod:`.runner`: runs one case in-process and classifies the outcome;
* :mod:`.sweep`: the long sweep in worker subprocesses (crashes, hangs).
"""
