"""Readable NumPy implementations of the com.microsoft operators.

They are the kernels the NAIVE policy installs
(``MicrosoftKernelImplementation.NAIVE``) and the oracles the optimized
kernels are tested against: written for clarity, not speed.
"""
