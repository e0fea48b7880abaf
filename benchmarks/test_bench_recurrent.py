"""Bidirectional LSTM (hidden 128 and 512, input equal to hidden, batch 1,
sequence 32 and 256) and a forward GRU (hidden 256, sequence 64), weights
as initializers as in an exported model: ours vs ONNX Runtime vs the
built-in, 1 and 2 threads.

    pytest benchmarks/test_bench_recurrent.py --benchmark-only --benchmark-group-by=group

The sequence-256 and hidden-512 cases run with ``--bench-large`` (or
OLC_BENCH_LARGE=1); the built-in is skipped on them.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh

from ._harness import CONTENDERS, Case, bench_contender, node_model

THREADS = (1, 2)
# (op, hidden, sequence, direction, large)
CASES = (
    ("LSTM", 128, 32, "bidirectional", False),
    ("LSTM", 128, 256, "bidirectional", True),
    ("LSTM", 512, 32, "bidirectional", True),
    ("LSTM", 512, 256, "bidirectional", True),
    ("GRU", 256, 64, "forward", False),
)
GATES = {"LSTM": 4, "GRU": 3}


def _label(op, hidden, steps, direction):
    return f"{op}-h{hidden}-s{steps}-{direction[:5]}"


@functools.lru_cache(maxsize=2)
def recurrent_case(op, hidden, steps, direction):
    rng = np.random.default_rng(hidden + steps)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    scale = 1.0 / np.sqrt(hidden)
    x = rng.standard_normal((steps, 1, hidden)).astype(np.float32)
    inits = {
        "W": (rng.standard_normal((D, G * hidden, hidden)) * scale).astype(np.float32),
        "R": (rng.standard_normal((D, G * hidden, hidden)) * scale).astype(np.float32),
        "B": (rng.standard_normal((D, 2 * G * hidden)) * 0.1).astype(np.float32),
    }
    outputs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    node = oh.make_node(op, ["X", "W", "R", "B"], outputs, hidden_size=hidden,
                        direction=direction)
    model = node_model(node, {"X": x}, inits, [TensorProto.FLOAT] * len(outputs))
    case = Case(_label(op, hidden, steps, direction), model, {"X": x}, dtype="float32",
                size=x.size, expected_kernel=f"onnx_light_cpu::{op}", rtol=1e-4, atol=1e-5)
    # ONNX Runtime is the reference (the built-in is too slow on the large ones)
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    case.reference = lambda feeds: sess.run(None, feeds)
    return case


def _params():
    for op, hidden, steps, direction, large in CASES:
        for threads in THREADS:
            for contender in CONTENDERS:
                if contender == "builtin" and large:
                    continue
                yield pytest.param(
                    op, hidden, steps, direction, large, threads, contender,
                    id=f"{_label(op, hidden, steps, direction)}-t{threads}-{contender}")


@pytest.mark.parametrize("op,hidden,steps,direction,large,threads,contender", list(_params()))
def test_recurrent(benchmark, bench_options, op, hidden, steps, direction, large, threads,
                   contender):
    if large and not bench_options.large:
        pytest.skip("a large recurrent case: give --bench-large or OLC_BENCH_LARGE=1")
    case = recurrent_case(op, hidden, steps, direction)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
