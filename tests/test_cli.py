"""python -m onnx_light_cpu kernels | run | check | generate."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest

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


# -- generate -------------------------------------------------------------------

def _tiny_decoder():
    """benchmarks/decoders.py's smallest builder-shaped decoder (float32)."""
    root = str(pathlib.Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    from benchmarks.decoders import TINY, build_decoder

    return build_decoder(TINY[0], "float32")


@pytest.fixture(scope="module")
def decoder_folder(tmp_path_factory):
    """A model folder as the builder writes it: model.onnx and genai_config.json."""
    folder = tmp_path_factory.mktemp("tiny-qwen")
    onnx.save(_tiny_decoder(), folder / "model.onnx")
    _write_config(folder)
    return folder


def _write_config(folder, **model):
    config = {"model": {"decoder": {"filename": "model.onnx"}, "context_length": 64, **model}}
    (folder / "genai_config.json").write_text(json.dumps(config))


def _expected_tokens(folder, prompt, new_tokens) -> list[int]:
    from onnx_light_cpu import Generator

    out = Generator(folder, num_threads=1).generate(np.array([prompt]), max_new_tokens=new_tokens)
    return out[0, len(prompt):].tolist()


def test_generate_streams_the_token_ids_then_the_times(decoder_folder, capsys):
    assert main(["generate", str(decoder_folder), "--input-ids", "1,2,3",
                 "--max-new-tokens", "6", "--threads", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"model: {decoder_folder} (onnx_light_cpu, threads 1, simd ")
    assert lines[1] == "prompt: 3 tokens"
    assert lines[2].startswith("new tokens: ")
    tokens = [int(t) for t in lines[2].split(":")[1].split()]
    assert tokens == _expected_tokens(decoder_folder, [1, 2, 3], 6)
    assert lines[3].startswith("prefill: ") and lines[3].endswith(" ms")
    decode = lines[4].split()
    assert decode[0] == "decode:" and float(decode[1]) > 0
    assert " ms per token (median of 5 steps), " in lines[4]
    assert lines[4].endswith(" tokens per second") and float(decode[-4]) > 0
    assert len(lines) == 5


def test_generate_compares_with_ort(decoder_folder, capsys):
    pytest.importorskip("onnxruntime")
    assert main(["generate", str(decoder_folder / "model.onnx"), "--input-ids", "5,6,7,8",
                 "--max-new-tokens", "8", "--threads", "1", "--compare", "ort"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"model: {decoder_folder / 'model.onnx'} ")
    assert lines[-2].startswith("ort: prefill ") and "(ours / ort: " in lines[-2]
    assert lines[-1] == "ort: all 8 new tokens match"


def test_first_difference():
    from onnx_light_cpu.cli import first_difference

    a = np.array([4, 5, 6])
    assert first_difference(a, a.copy()) is None
    assert first_difference(a, np.array([4, 9, 6])) == 1
    assert first_difference(a, a[:2]) == 2  # one loop stopped (an EOS) before the other


def test_generate_reports_the_first_difference(decoder_folder, capsys, monkeypatch):
    pytest.importorskip("onnxruntime")
    from onnx_light_cpu import generation

    expected = _expected_tokens(decoder_folder, [1, 2], 4)
    generate = generation.Generator.generate

    def altered(self, *args, **kwargs):  # ORT's loop draws another third token
        out = generate(self, *args, **kwargs)
        if self.engine == "onnxruntime":
            out[0, 4] += 1
        return out

    monkeypatch.setattr(generation.Generator, "generate", altered)
    assert main(["generate", str(decoder_folder), "--input-ids", "1,2", "--max-new-tokens", "4",
                 "--compare", "ort"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (f"ort: first difference at new token 2 (position 4): ours {expected[2]}, "
                    f"ort {expected[2] + 1}")


def test_generate_stops_at_an_eos_token(tmp_path, decoder_folder, capsys):
    third = _expected_tokens(decoder_folder, [1, 2, 3], 3)[2]
    (tmp_path / "model.onnx").write_bytes((decoder_folder / "model.onnx").read_bytes())
    _write_config(tmp_path, eos_token_id=[third])
    assert main(["generate", str(tmp_path), "--input-ids", "1,2,3",
                 "--max-new-tokens", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[-1] == str(third) and len(lines[2].split()) == 5
    assert lines[3] == "stopped at an end-of-sequence token after 3 new tokens"


def test_generate_samples_with_a_seed(decoder_folder, capsys):
    argv = ["generate", str(decoder_folder), "--input-ids", "1,2,3", "--max-new-tokens", "6",
            "--sample", "--temperature", "0.8", "--top-k", "50", "--top-p", "0.9", "--seed", "7"]
    runs = []
    for _ in range(2):
        assert main(argv) == 0
        runs.append(capsys.readouterr().out.splitlines()[2])
    assert runs[0] == runs[1] and len(runs[0].split()) == 8


def test_generate_from_a_prompt_with_the_tokenizer(tmp_path, decoder_folder, capsys):
    tokenizers = pytest.importorskip("tokenizers")
    (tmp_path / "model.onnx").write_bytes((decoder_folder / "model.onnx").read_bytes())
    _write_config(tmp_path)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(
        {f"w{i}": i for i in range(512)}, unk_token="w0"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    assert main(["generate", str(tmp_path), "--prompt", "w1 w2 w3", "--max-new-tokens", "5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = _expected_tokens(tmp_path, [1, 2, 3], 5)
    assert lines[1] == "prompt: 3 tokens"
    assert lines[2] == "w1 w2 w3 " + " ".join(f"w{t}" for t in expected)


@pytest.mark.parametrize("options,message", [
    (["--prompt", "hello"], "ValueError: Generator: no tokenizer.json next to the model"),
    (["--input-ids", "1,x"], "--input-ids takes comma-separated integers, got 'x'"),
    (["--input-ids", "1,2", "--max-new-tokens", "100"], "exceeds the context length 64"),
    (["--input-ids", "1,99999"], "input_ids must lie in [0, 512)"),
    (["--input-ids", "1", "--temperature", "0.5"], "--temperature: sampling options"),
    (["--input-ids", "1", "--sample", "--temperature", "0"], "temperature must be > 0"),
    (["--input-ids", "1", "--sample", "--compare", "ort"], "compares the greedy loops"),
    (["--input-ids", "1", "--compare", "builtin"], "unknown comparison 'builtin'"),
])
def test_generate_errors_are_one_line_with_status_2(decoder_folder, capsys, options, message):
    argv = ["generate", str(decoder_folder), "--max-new-tokens", "4", *options]
    assert main(argv) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("error: ") and message in line
    assert "Traceback" not in captured.out


def test_generate_reports_a_folder_without_a_model(tmp_path, capsys):
    assert main(["generate", str(tmp_path), "--input-ids", "1", "--max-new-tokens", "2"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ValueError: Generator: ") and "0 .onnx files" in line
