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
