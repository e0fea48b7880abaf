"""Readable NumPy implementations of the com.microsoft operators.

They are the NAIVE policy's kernels and the test oracles of the optimized
ones.  The first com.microsoft kernels arrive with later work; until then
both policies install the same (standard-domain) set.
"""
