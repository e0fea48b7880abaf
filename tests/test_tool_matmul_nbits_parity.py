"""tools/benchmark_matmul_nbits_parity.py keeps running: one tiny shape, two
samples, through ``python -m`` as a user would call it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import onnx_light_cpu as olc

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools import benchmark_matmul_nbits_parity as tool  # noqa: E402


def _run(*args, tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.benchmark_matmul_nbits_parity", *args, "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, json.loads(out.read_text())


@pytest.mark.parametrize("accuracy_level", [0, 4])
def test_tiny_shape_runs(tmp_path, accuracy_level):
    stdout, data = _run("--shape", "1,80,24", "--repeat", "2", "--warmup", "1",
                        "--threads", "1", "--accuracy-level", str(accuracy_level),
                        tmp_path=tmp_path)
    assert "| shape 1x80x24 | 1 | 80 | 24 | float32 | 4/32 |" in stdout
    assert "M=1 bandwidth" in stdout and "stream GB/s" in stdout
    (result,) = data["results"]
    assert result["ort_ms"] > 0 and result["ort_prep_ms"] > 0
    assert result["ort_err_vs_oracle"] < (1e-5 if accuracy_level == 0 else 5e-2)
    assert data["stream_gbps"]["1"] > 0
    if "MatMulNBits" in olc.registered_kernel_names():
        assert result["ours_ms"] > 0 and result["ours_prep_ms"] > 0
        assert result["err_vs_ort"] < (1e-5 if accuracy_level == 0 else 5e-3)
        assert result["path"] and result["scratch_bytes"] is not None
    else:
        assert result["ours_ms"] is None
        assert "not registered" in stdout


def test_case_selection():
    parser_cases = lambda *argv: tool.select_cases(_args(*argv))  # noqa: E731
    default = parser_cases()
    assert {(c.K, c.N) for c in default} == {(k, n) for _, k, n in tool.MUSE_FAMILIES}
    assert {c.M for c in default} == {1, 8, 128}
    assert {(c.dtype, c.bits, c.block, c.accuracy_level) for c in default} == {
        ("float32", 4, 32, 0)}
    assert any(c.N == 202048 for c in parser_cases("--vocabulary"))
    qwen = parser_cases("--qwen-int8")
    assert len(qwen) == 6 and {(c.M, c.bits, c.accuracy_level) for c in qwen} == {(128, 8, 4)}
    decode = parser_cases("--qwen-int8-decode", "--threads", "1", "2")
    assert {c.M for c in decode} == {1, 2, 4} and {c.threads for c in decode} == {1, 2}
    full = parser_cases("--full")
    assert len(full) == 81 and {c.dtype for c in full} == {"float32", "float16", "bfloat16"}
    assert {c.accuracy_level for c in parser_cases("--accuracy-level", "4")} == {4}


def _args(*argv):
    return tool.parse_args(list(argv))


def test_oracle_matches_a_dense_dequantization():
    """Codes low bits first, zero point 2^(bits-1), padded last block."""
    assert tool.unpack_codes(np.array([[[0x21]]], np.uint8), 4).tolist() == [[1, 2]]
    assert tool.unpack_codes(np.array([[[0b11100100]]], np.uint8), 2).tolist() == [[0, 1, 2, 3]]
    K, N, block = 40, 5, 16
    for bits in (2, 4, 8):
        packed, scales = tool.make_weights(K, N, bits, block, "float32")
        codes = tool.unpack_codes(packed, bits)[:, :K].astype(np.float64)
        dense = (codes - 2 ** (bits - 1)) * np.repeat(scales, block, axis=1)[:, :K]
        a = tool.make_activation(3, K, "float32")
        got = tool.oracle(a, packed, scales, K, bits, block, chunk_elements=2 * K)
        np.testing.assert_allclose(got, a.astype(np.float64) @ dense.T, rtol=1e-12)
