"""ai.onnx.ml TreeEnsemble (opset 5): 100 complete trees of depth 8
(255 BRANCH_LEQ splits each) over 20 float32 features, one target, SUM.

    pytest benchmarks/test_bench_tree_ensemble.py --benchmark-only --benchmark-group-by=group

Groups:

* ``TreeEnsemble-100x8-10000rows``: 10 000 rows, 1 and 2 threads, ours vs
  ORT (which runs TreeEnsemble 5 itself).  The built-in takes about 10 s a
  call here, too slow for a suite;
* ``TreeEnsemble-100x8-1000rows``: 1 000 rows, one thread, all three
  contenders (the built-in's row).

Outputs are checked against a single-threaded ORT session: ORT with two
threads sums the trees in another order, hence an absolute tolerance.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from onnx import helper as oh

from ._harness import DEFAULT_IR_VERSION, Case, bench_contender, ort_session_options

ML = "ai.onnx.ml"
N_TREES, DEPTH, FEATURES = 100, 8, 20
CASES = (  # rows, thread counts, contenders
    (10_000, (1, 2), ("ours", "ort")),
    (1_000, (1,), ("ours", "ort", "builtin")),
)


def forest_attributes(rng, n_trees=N_TREES, depth=DEPTH, n_features=FEATURES) -> dict:
    """Complete trees, splits drawn like the (standard normal) features."""
    inner, leaves = 2**depth - 1, 2**depth
    child = np.arange(inner)[:, None] * 2 + np.array([1, 2])  # [inner, (true, false)]
    is_leaf = child >= inner
    local = np.where(is_leaf, child - inner, child)
    tree = np.arange(n_trees)[:, None, None]
    ids = (local + np.where(is_leaf, tree * leaves, tree * inner)).reshape(-1, 2)
    leafs = np.broadcast_to(is_leaf, (n_trees, inner, 2)).reshape(-1, 2).astype(np.int64)
    n = n_trees * inner
    return dict(
        n_targets=1, aggregate_function=1, post_transform=0,
        tree_roots=(np.arange(n_trees) * inner).tolist(),
        nodes_modes=onnx.numpy_helper.from_array(np.zeros(n, np.uint8), "nodes_modes"),
        nodes_featureids=rng.integers(n_features, size=n).tolist(),
        nodes_splits=onnx.numpy_helper.from_array(
            rng.standard_normal(n).astype(np.float32), "nodes_splits"),
        nodes_truenodeids=ids[:, 0].tolist(), nodes_trueleafs=leafs[:, 0].tolist(),
        nodes_falsenodeids=ids[:, 1].tolist(), nodes_falseleafs=leafs[:, 1].tolist(),
        leaf_targetids=[0] * (n_trees * leaves),
        leaf_weights=onnx.numpy_helper.from_array(
            rng.standard_normal(n_trees * leaves).astype(np.float32), "leaf_weights"),
    )


@functools.lru_cache(maxsize=1)  # the tests of one case follow each other
def tree_case(rows: int) -> Case:
    rng = np.random.default_rng(0)
    node = oh.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, **forest_attributes(rng))
    graph = oh.make_graph(
        [node], "single_TreeEnsemble",
        [oh.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [rows, FEATURES])],
        [oh.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(ML, 5)],
                          ir_version=DEFAULT_IR_VERSION)
    feeds = {"X": rng.standard_normal((rows, FEATURES)).astype(np.float32)}

    def reference(f):
        import onnxruntime as ort

        sess = ort.InferenceSession(model.SerializeToString(), ort_session_options(1),
                                    providers=["CPUExecutionProvider"])
        return sess.run(None, f)

    return Case(f"TreeEnsemble-{N_TREES}x{DEPTH}-{rows}rows", model, feeds, dtype="float32",
                size=rows, domain=ML, reference=reference, rtol=1e-5, atol=1e-4,
                expected_kernel="onnx_light_cpu::TreeEnsemble")


def _params():
    for rows, thread_counts, contenders in CASES:
        for threads in thread_counts:
            for contender in contenders:
                yield pytest.param(rows, threads, contender,
                                   id=f"{rows}rows-t{threads}-{contender}")


@pytest.mark.parametrize("rows,threads,contender", list(_params()))
def test_tree_ensemble(benchmark, bench_options, rows, threads, contender):
    pytest.importorskip("onnxruntime")
    case = tree_case(rows)
    bench_contender(benchmark, case, contender, threads, budget_s=bench_options.budget_s)
