"""Per-node cost of the run loop: chains of 200 tiny nodes.

* ``Add``: float32 [1, 8] + a constant [1, 8], 200 times;
* ``Reshape``: float32 [1, 8] reshaped to [8] and back, 200 times (the
  shapes are initializers).

The work of each node is negligible, so a run times the evaluator loop plus
each node's ``run``: ``per_node_us`` in the extra info is the median run
time / 200.  ``ours`` runs our kernel where one is registered for the
operator (Reshape goes through onnx.reference's built-in inside our lean
loop until then: the ``path`` says which); ``builtin`` is onnx.reference
alone; ORT runs the whole graph in C++ and is listed for scale.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

import onnx_light_cpu as olc

from ._harness import (
    CONTENDERS,
    DEFAULT_IR_VERSION,
    Case,
    bench_contender,
    check_outputs,
    time_in_blocks,
)

CHAIN_LENGTH = 200
WIDTH = 8


def chain_case(op_type: str) -> Case:
    names = ["X"] + [f"t{i}" for i in range(CHAIN_LENGTH - 1)] + ["Y"]
    if op_type == "Add":
        constant = np.linspace(-1, 1, WIDTH, dtype=np.float32).reshape(1, WIDTH)
        inits = [numpy_helper.from_array(constant, "C")]
        second = ["C"] * CHAIN_LENGTH
    else:  # Reshape: [1, 8] -> [8] -> [1, 8] ...
        inits = [numpy_helper.from_array(np.array([WIDTH], np.int64), "flat"),
                 numpy_helper.from_array(np.array([1, WIDTH], np.int64), "row")]
        second = ["flat" if i % 2 == 0 else "row" for i in range(CHAIN_LENGTH)]
    nodes = [helper.make_node(op_type, [names[i], second[i]], [names[i + 1]])
             for i in range(CHAIN_LENGTH)]
    graph = helper.make_graph(
        nodes, f"{op_type.lower()}_chain",
        [helper.make_tensor_value_info("X", 1, [1, WIDTH])],
        [helper.make_tensor_value_info("Y", 1, [1, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                              ir_version=DEFAULT_IR_VERSION)
    feeds = {"X": np.arange(WIDTH, dtype=np.float32).reshape(1, WIDTH)}
    # The group reads Add-float32xchain200-8-t1.
    return Case(op_type, model, feeds, dtype=f"float32xchain{CHAIN_LENGTH}", size=WIDTH)


def _ours_through_builtin(case: Case):
    """Our evaluator (lean loop, our kernels registered) where no kernel of
    ours runs the operator yet: the built-in runs each node."""
    from onnx.reference import ReferenceEvaluator

    sess = ReferenceEvaluator(case.model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, case.feeds)
    used = olc.used_kernel_names(sess)
    olc.set_kernel_usage_recording(sess, False)
    assert not used, f"expected the built-in {case.op_type}, our kernels ran: {used}"
    return (lambda: sess.run(None, case.feeds)), {
        "path": f"onnx.reference {case.op_type} in the lean loop (no kernel of ours yet)"}


@pytest.mark.parametrize("contender", CONTENDERS)
@pytest.mark.parametrize("op_type", ["Add", "Reshape"])
def test_chain_200(benchmark, bench_options, op_type, contender):
    case = chain_case(op_type)
    if contender == "ours" and op_type not in olc.registered_kernel_names():
        run, info = _ours_through_builtin(case)
        check_outputs(case, run(), contender)
        benchmark.group = case.group(1)
        benchmark.extra_info.update(contender=contender, op=op_type, dtype=case.dtype,
                                    size=case.size, threads=1, **info)
        time_in_blocks(benchmark, run, bench_options.budget_s)
    else:
        bench_contender(benchmark, case, contender, 1, budget_s=bench_options.budget_s)
    benchmark.extra_info["nodes"] = CHAIN_LENGTH
    if contender == "ort":
        benchmark.extra_info["path"] = f"{op_type} x{CHAIN_LENGTH} (as ORT optimized it)"
    stats = getattr(benchmark, "stats", None)
    if stats is not None and not benchmark.disabled:
        benchmark.extra_info["per_node_us"] = round(stats.stats.median / CHAIN_LENGTH * 1e6, 3)
