"""One name, one address: every kernel records its adapter, cores and
headers, each file exists, and its family has a test and a benchmark file
named by the same stem."""

from __future__ import annotations

import pathlib

import pytest

import onnx_light_cpu as olc
from onnx_light_cpu.cli import family_files, main
from onnx_light_cpu.registry.records import PACKAGE_ROOT

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("policy", list(olc.MicrosoftKernelImplementation))
def test_every_recorded_path_exists(policy):
    for record in olc.registered_kernels(policy):
        paths = (record.adapter_path, *record.core_paths, *record.header_paths)
        for path in paths:
            assert (PACKAGE_ROOT / path).is_file(), (record.name, path)
        if REPOSITORY.joinpath("tests").is_dir():  # a checkout, not an install
            for path in family_files(record).values():
                assert (REPOSITORY / path).is_file(), (record.name, path)


# Families computed in NumPy on purpose (small, cold operators): no core.
NUMPY_FAMILIES = frozenset({"microsoft_tensor", "control_flow", "shape", "indexing"})
# Families that run another family's core (the quantized twin of a float one)
CORE_OF = {"qembed_layer_norm": "embed_layer_norm"}


def test_optimized_kernels_name_their_cores():
    """Each optimized kernel runs a core: its family's (same stem) or a
    shared engine's, possibly with others (MoE also calls MatMulNBits'),
    except the NumPy families, which have none."""
    for record in olc.registered_kernels():
        stem = pathlib.Path(record.adapter_path).stem
        cores = [pathlib.Path(p) for p in record.core_paths]
        if stem in NUMPY_FAMILIES:
            assert not cores and not record.header_paths, record.name
            continue
        assert record.header_paths, record.name
        core = CORE_OF.get(stem, stem)
        assert any(p.stem == core or p.parent.name == "engines" for p in cores), record.name


def test_where_prints_the_files(capsys):
    assert main(["where", "MatMulNBits"]) == 0
    out = capsys.readouterr().out
    parts = ["onnx_light_cpu::MatMulNBits", "ops/matmul_nbits.py", "_kernels/matmul_nbits.pyx",
             "include/matmul_nbits/olc_matmul_nbits.h"]
    if PACKAGE_ROOT.parent.joinpath("tests").is_dir():  # a checkout: tests and benchmarks
        parts += ["tests/ops/test_matmul_nbits.py", "benchmarks/test_bench_matmul_nbits.py"]
    for part in parts:
        assert part in out, part


def test_where_unknown_operator(capsys):
    assert main(["where", "NoSuchOp"]) == 2
    assert "NoSuchOp" in capsys.readouterr().err


# where reads the tests beside the package it runs from: none when the
# suite runs against an installed (non-editable) package
@pytest.mark.skipif(not PACKAGE_ROOT.parent.joinpath("tests").is_dir(),
                    reason="an installed package: no tests beside it")
@pytest.mark.parametrize("op_type, tests, not_listed", [
    # an operator with its own file beside its family's (conv)
    ("DeformConv", ["tests/ops/test_deform_conv.py"], "tests/ops/test_conv.py"),
    ("ConvInteger", ["tests/ops/test_conv_integer.py"], "tests/ops/test_conv.py"),
    ("QLinearConv", ["tests/ops/test_conv_integer.py"], "tests/ops/test_conv.py"),
    # the family's file first, then the others that build the operator
    ("Conv", ["tests/ops/test_conv.py", "tests/ops/test_conv_integer.py",
              "tests/ops/test_deform_conv.py"], "tests/ops/test_shape.py"),
    ("Dropout", ["tests/ops/test_dropout.py"], "tests/ops/test_shape.py"),
])
def test_where_finds_the_tests_that_exercise_the_operator(capsys, op_type, tests, not_listed):
    assert main(["where", op_type]) == 0
    listed = [line.split()[-1] for line in capsys.readouterr().out.splitlines()
              if line.strip().startswith("tests:")]
    # the first record's lines (a NAIVE twin repeats them)
    assert listed[:len(tests)] == tests
    assert not_listed not in listed
