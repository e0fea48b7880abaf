"""Loop (100 iterations of an Add body on 4 float32, one scan output), Scan
(100 rows of 4 float32 summed into a state) and If (an Add branch): ours vs
ORT vs the built-ins, 1 and 2 threads; and ``host_loop``: the built-in Loop
or Scan driving our Add, which isolates the cost of driving the body (per
iteration: divide by 100).  ONNX Runtime's outputs are the reference (the
built-in Loop's scan outputs are right here: one iteration's shape is not
a scalar).

    pytest benchmarks/test_bench_control_flow.py --benchmark-only --benchmark-group-by=group
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc

from ._harness import (
    DEFAULT_IR_VERSION,
    DEFAULT_OPSET,
    PREPARE,
    Case,
    check_outputs,
    ort_session_options,
    time_in_blocks,
)

ITERATIONS = 100
OPS = ("Loop", "Scan", "If")


def _vi(name, elem=T.FLOAT, shape=(4,)):
    return oh.make_tensor_value_info(name, elem, list(shape))


def _model(op: str) -> onnx.ModelProto:
    one = numpy_helper.from_array(np.ones(4, np.float32), "one")
    if op == "Loop":
        body = oh.make_graph(
            [oh.make_node("Add", ["v_in", "one"], ["v_out"]),
             oh.make_node("Add", ["v_out", "v_out"], ["scan"])],
            "body", [_vi("i", T.INT64, ()), _vi("c_in", T.BOOL, ()), _vi("v_in")],
            [_vi("c_in", T.BOOL, ()), _vi("v_out"), _vi("scan")])
        node = oh.make_node("Loop", ["M", "c", "x"], ["y", "ys"], body=body)
        inputs = [_vi("M", T.INT64, ()), _vi("c", T.BOOL, ()), _vi("x")]
        outputs = [_vi("y"), _vi("ys", shape=(ITERATIONS, 4))]
    elif op == "Scan":
        body = oh.make_graph([oh.make_node("Add", ["s_in", "row"], ["s_out"])], "body",
                             [_vi("s_in"), _vi("row")], [_vi("s_out")])
        node = oh.make_node("Scan", ["x", "rows"], ["y"], body=body, num_scan_inputs=1)
        inputs, outputs = [_vi("x"), _vi("rows", shape=(ITERATIONS, 4))], [_vi("y")]
    else:
        branch = oh.make_graph([oh.make_node("Add", ["x", "one"], ["t"])], "t", [], [_vi("t")])
        other = oh.make_graph([oh.make_node("Sub", ["x", "one"], ["e"])], "e", [], [_vi("e")])
        node = oh.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)
        inputs, outputs = [_vi("c", T.BOOL, ()), _vi("x")], [_vi("y")]
    graph = oh.make_graph([node], op, inputs, outputs, initializer=[one])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", DEFAULT_OPSET)],
                         ir_version=DEFAULT_IR_VERSION)


@functools.cache
def control_case(op: str) -> Case:
    x = np.zeros(4, np.float32)
    feeds = {"Loop": {"M": np.array(ITERATIONS, np.int64), "c": np.array(True), "x": x},
             "Scan": {"x": x, "rows": np.arange(4 * ITERATIONS, dtype=np.float32).reshape(-1, 4)},
             "If": {"c": np.array(True), "x": x}}[op]
    model = _model(op)
    case = Case(op, model, feeds, dtype="float32", size=ITERATIONS if op != "If" else 1)
    case.rtol = case.atol = 0.0

    def ort_reference(feeds):
        import onnxruntime as ort

        sess = ort.InferenceSession(model.SerializeToString(), ort_session_options(1),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)

    case.reference = ort_reference
    return case


def prepare_host_loop(case: Case, threads: int):
    """The built-in control-flow node, our Add inside its body."""
    olc.unregister_kernels_global()
    olc.register_kernel_global("", "Add")
    olc.register_kernel_global("", "Sub")
    try:
        sess = ReferenceEvaluator(case.model)
    finally:
        olc.unregister_kernels_global()
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, case.feeds)
    names = olc.used_kernel_names(sess)
    olc.set_kernel_usage_recording(sess, False)
    assert case.kernel_name not in names and "onnx_light_cpu::Add" in names, names
    return (lambda: sess.run(None, case.feeds)), {"path": "onnx.reference control flow"}


@pytest.mark.parametrize("op,threads,contender", [
    pytest.param(op, t, c, id=f"{op}-float32-t{t}-{c}")
    for op in OPS for t in (1, 2) for c in ("ours", "host_loop", "ort", "builtin")])
def test_control_flow(benchmark, bench_options, op, threads, contender):
    case = control_case(op)
    prepare = prepare_host_loop if contender == "host_loop" else PREPARE[contender]
    run, info = prepare(case, threads)
    check_outputs(case, run(), contender)
    benchmark.group = case.group(threads)
    benchmark.extra_info.update(contender=contender, op=op, threads=threads, **info)
    time_in_blocks(benchmark, run, bench_options.budget_s)
