"""pytest-benchmark suites: onnx_light_cpu vs onnxruntime vs onnx.reference.

A package so that ``pytest benchmarks`` puts the repository root on
``sys.path`` (the in-place build is importable) and the suites share
``benchmarks._harness``.
"""
