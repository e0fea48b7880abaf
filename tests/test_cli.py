"""python -m onnx_light_cpu kernels | run."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx

from onnx_light_cpu.cli import default_model, main

from differential import node_model


def test_kernels_lists_the_inventory(capsys):
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    assert "onnx_light_cpu::Abs" in out and "onnx_light_cpu::Not" in out


def test_run_default_model_shows_kernels_and_differences(capsys):
    assert main(["run", "--repeat", "1", "--threads", "1", "--compare", "builtin"]) == 0
    out = capsys.readouterr().out
    assert "default (gated activation" in out
    for op in ("Tanh", "Sigmoid", "Abs", "Exp", "Log", "Not"):
        assert f"onnx_light_cpu::{op}" in out
    difference = float(out.split("max abs difference vs builtin:")[1].split()[0])
    assert difference < 1e-5


def test_run_model_file_with_inputs(tmp_path, capsys):
    x = np.linspace(0.5, 3, 12, dtype=np.float32)
    path = tmp_path / "log.onnx"
    onnx.save(node_model("Log", [x]), path)
    np.savez(tmp_path / "feeds.npz", x0=x)
    assert main(["run", str(path), "--inputs", str(tmp_path / "feeds.npz"),
                 "--repeat", "2", "--compare", "builtin"]) == 0
    out = capsys.readouterr().out
    assert "onnx_light_cpu::Log [log_float32_" in out
    assert "x0[12]:float32" in out


def test_unknown_comparison_fails(capsys):
    assert main(["run", "--repeat", "1", "--compare", "tvm"]) == 2


def test_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "onnx_light_cpu", "kernels"],
                         capture_output=True, text=True, check=True).stdout
    assert "onnx_light_cpu::Exp" in out


def test_default_model_is_valid():
    onnx.checker.check_model(default_model(), full_check=True)


def _skip_norm_model():
    """A com.microsoft node, as in every decoder: the built-in cannot run it."""
    x = np.ones((2, 3, 8), np.float32)
    gamma = np.ones(8, np.float32)
    model = node_model("SkipSimplifiedLayerNormalization", [x, x, gamma],
                       domain="com.microsoft", epsilon=1e-5)
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT  # ORT needs it
    return model, [x, x, gamma]


def test_run_microsoft_model_compares_each_contender(tmp_path, capsys):
    model, inputs = _skip_norm_model()
    path = tmp_path / "skip.onnx"
    onnx.save(model, path)
    np.savez(tmp_path / "feeds.npz", **{f"x{i}": a for i, a in enumerate(inputs)})
    assert main(["run", str(path), "--inputs", str(tmp_path / "feeds.npz"),
                 "--repeat", "1", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "onnx_light_cpu::SkipSimplifiedLayerNormalization" in out
    skipped = [line for line in out.splitlines() if "builtin:" in line]
    assert skipped == ["  builtin: skipped: onnx.reference cannot run "
                       "com.microsoft::SkipSimplifiedLayerNormalization"]
    assert "max abs difference vs ort" in out


def test_run_reports_feeds_that_do_not_match(tmp_path, capsys):
    model, inputs = _skip_norm_model()
    path = tmp_path / "skip.onnx"
    onnx.save(model, path)
    np.savez(tmp_path / "feeds.npz", x0=inputs[0], x1=inputs[1].astype(np.float64), bogus=inputs[2])
    assert main(["run", str(path), "--inputs", str(tmp_path / "feeds.npz"), "--repeat", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert "missing x2" in line and "unknown bogus" in line and "x1 is float64" in line
    assert "it expects: x0[?,?,?]:float, x1[?,?,?]:float, x2[?]:float" in line


def test_run_reports_an_unreadable_model(tmp_path, capsys):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"not a model")
    assert main(["run", str(path), "--repeat", "1"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ")
