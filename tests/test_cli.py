"""python -m onnx_light_cpu kernels | run | check."""

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


def _check_model_file(tmp_path, *extra_nodes):
    """Abs (ours), Floor (onnx.reference), SkipSimplifiedLayerNormalization
    (ours, com.microsoft), then ``extra_nodes``."""
    from onnx import TensorProto as T
    from onnx import helper as oh

    nodes = [oh.make_node("Abs", ["x"], ["a"], name="abs"),
             oh.make_node("Floor", ["a"], ["b"]),
             oh.make_node("SkipSimplifiedLayerNormalization", ["b", "b", "g"], ["c"],
                          domain="com.microsoft", epsilon=1e-5),
             oh.make_node("Floor", ["c"], ["y"]), *extra_nodes]
    vi = [oh.make_tensor_value_info(n, T.FLOAT, [None]) for n in ("x", "g", "y")]
    model = oh.make_model(oh.make_graph(nodes, "g", vi[:2], vi[2:]), opset_imports=[
        oh.make_opsetid("", 18), oh.make_opsetid("com.microsoft", 1),
        oh.make_opsetid("my.domain", 2)])
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def test_check_says_who_runs_each_operator(tmp_path, capsys):
    path = _check_model_file(tmp_path)
    assert main(["check", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"model: {path}", "policy: optimized (com.microsoft kernels)"]
    table = [line.split(None, 4) for line in lines[2:-1]]
    assert table == [
        ["domain", "op_type", "opset", "nodes", "runs it"],
        ["ai.onnx", "Abs", "18", "1", "onnx_light_cpu::Abs (optimized)"],
        ["ai.onnx", "Floor", "18", "2", "onnx.reference"],
        ["com.microsoft", "SkipSimplifiedLayerNormalization", "1", "1",
         "onnx_light_cpu::SkipSimplifiedLayerNormalization (optimized)"],
    ]
    assert lines[-1] == "all 3 operators (4 nodes) can run"


def test_check_naive_policy(tmp_path, capsys):
    path = _check_model_file(tmp_path)
    assert main(["check", str(path), "--policy", "naive"]) == 0
    out = capsys.readouterr().out
    assert "policy: naive" in out
    assert "onnx_light_cpu::NaiveSkipSimplifiedLayerNormalization (naive)" in out


def test_check_lists_what_nothing_runs_and_fails(tmp_path, capsys):
    from onnx import helper as oh

    path = _check_model_file(
        tmp_path,
        oh.make_node("FancyGelu", ["y"], ["u"], domain="com.microsoft", name="g1"),
        oh.make_node("FancyGelu", ["u"], ["v"], domain="com.microsoft", name="g2"),
        oh.make_node("FancyNorm", ["v"], ["w"], domain="com.microsoft", name="n1"),
        oh.make_node("Widget", ["w"], ["z"], domain="my.domain", name="w1"))
    assert main(["check", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "com.microsoft  FancyGelu" in lines[5] and lines[5].endswith("2  nothing")
    assert lines[-4:] == [
        "3 of 6 operators (4 of 8 nodes) cannot run:",
        "  com.microsoft::FancyGelu (opset 1): 2 nodes: 'g1', 'g2'",
        "  com.microsoft::FancyNorm (opset 1): 1 node: 'n1'",
        "  my.domain::Widget (opset 2): 1 node: 'w1'",
    ]
    # run fails the same way, listing them all
    assert main(["run", str(path), "--repeat", "1", "--compare", ""]) == 1
    err = capsys.readouterr().err
    assert "can run 3 operators of this model (4 nodes)" in err
    assert all(line in err.splitlines() for line in lines[-3:])


def test_check_reports_an_unreadable_model(tmp_path, capsys):
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"not a model")
    assert main(["check", str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ")
