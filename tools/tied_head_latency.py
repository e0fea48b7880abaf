"""A tied-embedding LM head, one decode step: what constant folding saves.

    python -m tools.tied_head_latency                       # Qwen2-0.5B: 151936 x 896
    python -m tools.tied_head_latency --vocab 32000 --repeat 5 --threads 1

The graph, as a float32 export of a model whose LM head reuses the input
embedding E [vocab, hidden]::

    h      = Gather(E, ids)              ids [1, 1] -> h [1, 1, hidden]
    logits = MatMul(h, Transpose(E))     -> [1, 1, vocab]

Contenders, on the same model and feeds:

* builtin: ``ReferenceEvaluator`` with ``onnx.reference``'s kernels (its
  Transpose returns a view; NumPy's matmul reads it);
* ours, unfolded: our kernels, ``fold_constants=False`` (the Transpose view
  is made on every run and MatMul reads it through its strides);
* ours, folded: our kernels, E^T folded once at construction into a dense
  constant that MatMul packs once;
* ORT: an onnxruntime CPU session (its own constant folding), pool not
  spinning, same thread count.

Construction (plus the first run) is reported apart.  The steady state
alternates one call of each contender per round and reports medians per
call and ratios to ORT; outputs are checked against the folded evaluator.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as oh
from onnx import numpy_helper as nh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc


def tied_head_model(vocab: int, hidden: int, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    embedding = rng.standard_normal((vocab, hidden), dtype=np.float32) * np.float32(0.02)
    graph = oh.make_graph(
        [oh.make_node("Gather", ["embedding", "ids"], ["h"]),
         oh.make_node("Transpose", ["embedding"], ["embedding_t"], perm=[1, 0]),
         oh.make_node("MatMul", ["h", "embedding_t"], ["logits"])],
        "tied_head",
        [oh.make_tensor_value_info("ids", T.INT64, [1, 1])],
        [oh.make_tensor_value_info("logits", T.FLOAT, [1, 1, vocab])],
        [nh.from_array(embedding, "embedding")])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)], ir_version=10)


def _ours(model, threads: int, fold: bool):
    sess = ReferenceEvaluator(model)
    olc.register_kernels_for_session(sess, fold_constants=fold)
    olc.set_num_threads_for_session(sess, threads)
    return lambda feeds: sess.run(None, feeds)[0]


def _builtin(model, threads: int):
    sess = ReferenceEvaluator(model)
    return lambda feeds: sess.run(None, feeds)[0]


def _ort(model, threads: int):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)[0]


CONTENDERS = {
    "builtin": _builtin,
    "ours unfolded": lambda model, threads: _ours(model, threads, False),
    "ours folded": lambda model, threads: _ours(model, threads, True),
    "ort": _ort,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=151936)
    parser.add_argument("--hidden", type=int, default=896)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=15, help="rounds (default 15)")
    parser.add_argument("--skip", default="", help="comma-separated contenders to leave out")
    args = parser.parse_args(argv)
    model = tied_head_model(args.vocab, args.hidden)
    feeds = {"ids": np.array([[args.vocab // 3]], dtype=np.int64)}
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    runs, built = {}, {}
    for name, make in CONTENDERS.items():
        if name in skip:
            continue
        start = time.perf_counter()
        run = make(model, args.threads)
        if run is None:
            print(f"{name}: not available")
            continue
        runs[name] = (run, run(feeds))
        built[name] = time.perf_counter() - start
    want = runs["ours folded"][1] if "ours folded" in runs else None
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeat):
        for name, (run, _) in runs.items():
            start = time.perf_counter()
            run(feeds)
            times[name].append(time.perf_counter() - start)
    print(f"tied LM head {args.vocab} x {args.hidden} float32, one decode step, "
          f"{args.threads} thread(s), {args.repeat} alternating rounds")
    reference = statistics.median(times["ort"]) if "ort" in times else None
    print(f"{'contender':14} {'build+1st (s)':>13} {'median (ms)':>12} "
          f"{'/ort':>7} {'max |diff|':>11}")
    for name, samples in times.items():
        median = statistics.median(samples)
        ratio = f"{median / reference:7.2f}" if reference else "    n/a"
        diff = (f"{float(np.max(np.abs(runs[name][1] - want))):11.2e}" if want is not None
                else "        n/a")
        print(f"{name:14} {built[name]:13.2f} {median * 1e3:12.2f} {ratio} {diff}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
