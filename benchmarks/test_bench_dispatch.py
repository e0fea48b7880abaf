"""Per-node cost of the adapter: a chain of 200 Abs nodes on 4 elements.

The kernel's work is negligible, so this times the evaluator loop plus each
adapter's ``run``; the built-in Abs goes through ``OpRun.run``'s generic
checks.  ORT is listed for scale only: its session runs the whole graph in
C++.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ._harness import CONTENDERS, DEFAULT_IR_VERSION, Case, bench_contender

CHAIN_LENGTH = 200


def abs_chain_case() -> Case:
    names = ["X"] + [f"t{i}" for i in range(CHAIN_LENGTH - 1)] + ["Y"]
    nodes = [helper.make_node("Abs", [names[i]], [names[i + 1]]) for i in range(CHAIN_LENGTH)]
    graph = helper.make_graph(
        nodes, "abs_chain",
        [helper.make_tensor_value_info("X", 1, [4])],
        [helper.make_tensor_value_info("Y", 1, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                              ir_version=DEFAULT_IR_VERSION)
    feeds = {"X": np.array([-1.5, 2.0, -3.0, 4.0], dtype=np.float32)}
    # The dtype label names the chain so the group reads Abs-float32xchain200-4-t1.
    return Case("Abs", model, feeds, dtype=f"float32xchain{CHAIN_LENGTH}", size=4)


@pytest.mark.parametrize("contender", CONTENDERS)
def test_abs_chain_200(benchmark, bench_options, contender):
    case = abs_chain_case()
    bench_contender(benchmark, case, contender, 1, budget_s=bench_options.budget_s)
    benchmark.extra_info["nodes"] = CHAIN_LENGTH
    if contender == "ort":
        benchmark.extra_info["path"] = f"Abs x{CHAIN_LENGTH}"
