"""Ours vs ONNX Runtime on single kernels under three loads of the second core.

    python -m tools.load_ratio [--loads idle,busy,bursty] [--threads 1,2]
                               [--blocks 15] [--cases abs,softmax,matmul] [--json OUT]

The default cases are issue 14's: Abs over 1M float32, Softmax over
128x32000 float32, MatMul 1x896 by a constant 896x4864 float32.  More for
thread scaling on many cores (``--threads 1,2,4,8,16``): ``matmul128`` (the
same MatMul for 128 rows), ``int4-decode``/``float32-decode`` (one
Qwen2-0.5B-shaped decode step after 128 positions, benchmarks/decoders.py),
``int4-prefill``/``float32-prefill`` (its 128-token prefill) and
``resnet50`` (benchmarks/vision.py, batch 1).  For each load
(``benchmarks._harness.competing_load``: nothing, a process spinning on the
last CPU, or one busy 2 ms out of every 4 ms), each case runs ours and ORT at every
thread count in alternating blocks (warm-up, then timed calls); the table
gives the median per call and the ratios ours/ORT and 2 threads/1 thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from benchmarks._harness import competing_load, ort_session_options, time_calls

F = TensorProto.FLOAT


def _model(node, inputs, outputs, initializers=()):
    graph = helper.make_graph([node], "case", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def case_abs():
    x = np.random.default_rng(0).standard_normal(10**6, dtype=np.float32)
    model = _model(helper.make_node("Abs", ["X"], ["Y"]),
                   [helper.make_tensor_value_info("X", F, [10**6])],
                   [helper.make_tensor_value_info("Y", F, [10**6])])
    return "Abs 1M float32", model, {"X": x}


def case_softmax():
    x = np.random.default_rng(0).standard_normal((128, 32000), dtype=np.float32)
    model = _model(helper.make_node("Softmax", ["X"], ["Y"], axis=-1),
                   [helper.make_tensor_value_info("X", F, [128, 32000])],
                   [helper.make_tensor_value_info("Y", F, [128, 32000])])
    return "Softmax 128x32000", model, {"X": x}


def case_matmul():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 896), dtype=np.float32)
    b = (rng.standard_normal((896, 4864), dtype=np.float32) / 30).astype(np.float32)
    model = _model(helper.make_node("MatMul", ["A", "B"], ["Y"]),
                   [helper.make_tensor_value_info("A", F, [1, 896])],
                   [helper.make_tensor_value_info("Y", F, [1, 4864])],
                   [numpy_helper.from_array(b, "B")])
    return "MatMul 1x896x4864", model, {"A": a}


def case_matmul128():
    label, model, feeds = case_matmul()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 128
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 128
    a = np.random.default_rng(1).standard_normal((128, 896), dtype=np.float32)
    return "MatMul 128x896x4864", model, {"A": a}


def _decoder_case(dtype, seq, past):
    from benchmarks.decoders import QWEN2_0_5B, build_decoder, make_feeds
    step = f"prefill {seq}" if past == 0 else f"decode past {past}"
    return (f"Qwen2-0.5B {dtype} {step}", build_decoder(QWEN2_0_5B, dtype),
            make_feeds(QWEN2_0_5B, seq, past))


def case_resnet50():
    from benchmarks.vision import RESNET50, build_cnn, cnn_feeds
    return "ResNet-50 batch 1", build_cnn(RESNET50), cnn_feeds(RESNET50)


CASES = {"abs": case_abs, "softmax": case_softmax, "matmul": case_matmul,
         "matmul128": case_matmul128,
         "int4-decode": lambda: _decoder_case("int4", 1, 128),
         "float32-decode": lambda: _decoder_case("float32", 1, 128),
         "int4-prefill": lambda: _decoder_case("int4", 128, 0),
         "float32-prefill": lambda: _decoder_case("float32", 128, 0),
         "resnet50": case_resnet50}
DEFAULT_CASES = "abs,softmax,matmul"


def ours_runners(model, feeds, threads):
    """One evaluator (a real model's weights are prepared once), a runner per
    thread count that sets it before each call."""
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess)
    olc.set_kernel_usage_recording(sess, True)
    sess.run(None, feeds)
    if not olc.used_kernel_names(sess):
        raise RuntimeError("our kernel did not run")
    olc.set_kernel_usage_recording(sess, False)

    def runner(n):
        def run():
            olc.set_num_threads_for_session(sess, n)
            return sess.run(None, feeds)
        return run
    return {n: runner(n) for n in threads}


def ort_runner(model, feeds, threads):
    options = ort_session_options(threads)
    # ORT's default level, as the tables were measured (nothing to fuse in
    # one node either way)
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, feeds)


def calls_per_block(run, seconds=0.02) -> int:
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        run()
        n += 1
    return max(2, n)


def measure(runners: dict, blocks: int) -> dict:
    """Median seconds per call of each runner, timed in alternating blocks."""
    calls = {name: calls_per_block(run) for name, run in runners.items()}
    times = {name: [] for name in runners}
    for _ in range(blocks):
        for name, run in runners.items():  # one warm-up call after the other engine ran
            times[name].extend(time_calls(run, calls[name], warmup=1))
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="idle,busy,bursty")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    results = []
    for load in args.loads.split(","):
        with competing_load(load):
            for key in args.cases.split(","):
                label, model, feeds = CASES[key]()
                onnx.checker.check_model(model)
                ours = ours_runners(model, feeds, threads)
                runners = {}
                for n in threads:
                    runners[f"ours-t{n}"] = ours[n]
                    runners[f"ort-t{n}"] = ort_runner(model, feeds, n)
                medians = measure(runners, args.blocks)
                results.append({"case": label, "load": load, "median_s": medians})
                print(f"{load:7s} {label:20s} " + " ".join(
                    f"{name}={medians[name] * 1e6:9.1f}us" for name in runners), flush=True)
    print()
    print("| case | load | " + " | ".join(f"ours/ORT t{n}" for n in threads)
          + (" | ours t2/t1 |" if 1 in threads and 2 in threads else " |"))
    print("|---" * (2 + len(threads) + (1 in threads and 2 in threads)) + "|")
    for r in results:
        m = r["median_s"]
        cells = [f"{m[f'ours-t{n}'] / m[f'ort-t{n}']:.2f}" for n in threads]
        if 1 in threads and 2 in threads:
            cells.append(f"{m['ours-t2'] / m['ours-t1']:.2f}")
        print(f"| {r['case']} | {r['load']} | " + " | ".join(cells) + " |")
    more = [n for n in threads if n != 1]
    if 1 in threads and len(more) > 1:  # speed-up over one thread, both engines
        print()
        print("| case | load | " + " | ".join(f"ours t{n}/t1 | ORT t{n}/t1" for n in more)
              + " |")
        print("|---" * (2 + 2 * len(more)) + "|")
        for r in results:
            m = r["median_s"]
            cells = [f"{m[f'{e}-t{n}'] / m[f'{e}-t1']:.2f}"
                     for n in more for e in ("ours", "ort")]
            print(f"| {r['case']} | {r['load']} | " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
