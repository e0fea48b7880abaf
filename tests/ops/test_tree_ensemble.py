"""ai.onnx.ml TreeEnsemble (opset 5): differential tests against the
onnx.reference built-in on random forests (random depths, every mode with
membership sets, NaN features with and without missing-value tracking,
every aggregate function and post transform, several targets, float,
double and float16), at every SIMD level and 1/2 threads; against ONNX
Runtime where it runs the operator (float and double) and agrees by
definition; the schema's semantics where the built-in departs from them;
bad attributes and inputs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as oh
from onnx.reference import ReferenceEvaluator

import onnx_light_cpu as olc
from onnx_light_cpu.simd import available_simd_levels, capped_simd_level

from differential import THREAD_COUNTS, assert_close, same_bits, unaligned

ML = "ai.onnx.ml"
KERNEL = "onnx_light_cpu::TreeEnsemble"
NP_TO_ONNX = {np.dtype(np.float32): T.FLOAT, np.dtype(np.float64): T.DOUBLE,
              np.dtype(np.float16): T.FLOAT16}
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
AVERAGE, SUM, MIN, MAX = range(4)
NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT = range(5)
# Split values and features come from one grid so EQ, NEQ and membership
# splits are taken both ways; 0 is left out of the sets (the built-in reads
# a member 0.0 as the end of its set).
GRID = np.arange(-4, 5) / 2.0


def tensor(name, values, dtype):
    return onnx.numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


def ensemble_model(x_dtype, **attrs) -> onnx.ModelProto:
    node = oh.make_node("TreeEnsemble", ["X"], ["Y"], domain=ML, **attrs)
    et = NP_TO_ONNX[np.dtype(x_dtype)]
    graph = oh.make_graph([node], "tree_ensemble",
                          [oh.make_tensor_value_info("X", et, [None, None])],
                          [oh.make_tensor_value_info("Y", et, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid(ML, 5)])


def random_forest(rng, n_trees=5, max_depth=4, n_features=4, n_targets=2, modes=(LEQ,),
                  missing=False, stop=0.25, attr_dtype=np.float32, member_grid=GRID[GRID != 0]):
    """Attributes of a random forest whose nodes are numbered depth-first,
    true branch first (the order the built-in reads membership sets in)."""
    nodes = {k: [] for k in ("modes", "featureids", "splits", "truenodeids", "trueleafs",
                             "falsenodeids", "falseleafs", "missing")}
    leaf_w, leaf_t, members, roots = [], [], [], []

    def leaf():
        leaf_w.append(float(rng.normal()) * 4)
        leaf_t.append(int(rng.integers(n_targets)))
        return len(leaf_w) - 1

    def build(depth):
        i = len(nodes["modes"])
        mode = int(rng.choice(modes))
        split = float(rng.choice(GRID)) + (0.25 if mode <= GT and rng.random() < 0.3 else 0)
        for k, v in (("modes", mode), ("featureids", int(rng.integers(n_features))),
                     ("splits", split), ("missing", int(missing and rng.random() < 0.5)),
                     ("truenodeids", -1), ("trueleafs", 0),
                     ("falsenodeids", -1), ("falseleafs", 0)):
            nodes[k].append(v)
        if mode == MEMBER:
            size = int(rng.integers(1, 5))
            members.extend(rng.choice(member_grid, size=size, replace=False).tolist())
            members.append(np.nan)
        for side in ("true", "false"):
            if depth + 1 >= max_depth or rng.random() < stop:
                nodes[f"{side}nodeids"][i], nodes[f"{side}leafs"][i] = leaf(), 1
            else:
                nodes[f"{side}nodeids"][i] = build(depth + 1)
        return i

    for _ in range(n_trees):
        roots.append(build(0))
    attrs = dict(
        n_targets=n_targets, tree_roots=roots,
        nodes_modes=oh.make_tensor("nodes_modes", T.UINT8, (len(nodes["modes"]),),
                                   nodes["modes"]),
        nodes_featureids=nodes["featureids"],
        nodes_splits=tensor("nodes_splits", nodes["splits"], attr_dtype),
        nodes_truenodeids=nodes["truenodeids"], nodes_trueleafs=nodes["trueleafs"],
        nodes_falsenodeids=nodes["falsenodeids"], nodes_falseleafs=nodes["falseleafs"],
        leaf_targetids=leaf_t, leaf_weights=tensor("leaf_weights", leaf_w, attr_dtype))
    if missing:
        attrs["nodes_missing_value_tracks_true"] = nodes["missing"]
    if members:
        attrs["membership_values"] = tensor("membership_values", members, attr_dtype)
    return attrs


def random_x(rng, rows, n_features, dtype, nan=0.0):
    x = rng.choice(GRID, size=(rows, n_features))
    x += np.where(rng.random(x.shape) < 0.3, rng.normal(size=x.shape) * 2, 0)
    x[rng.random(x.shape) < nan] = np.nan
    return x.astype(dtype)


# ---- the post transforms of onnx.reference's ML helpers, in double ----

def _erf_inv(x):
    sgn = np.where(x < 0, -1.0, 1.0)
    x = (1.0 - x) * (1.0 + x)
    with np.errstate(all="ignore"):
        lg = np.log(x)
        v = 2.0 / (np.pi * 0.147) + 0.5 * lg
        v2 = 1.0 / 0.147 * lg
        v3 = -v + np.sqrt(v * v - v2)
        return np.where(x == 0, 0.0, sgn * np.sqrt(v3))


def post_transform(raw, post):
    v = raw.astype(np.float64)
    with np.errstate(all="ignore"):
        if post == LOGISTIC:
            e = 1.0 / (1.0 + np.exp(-np.abs(v)))
            v = np.where(v < 0, 1.0 - e, e)
        elif post == PROBIT:
            v = 1.41421356 * _erf_inv(v * 2 - 1)
        elif post == SOFTMAX:
            e = np.exp(v - v.max(axis=1, keepdims=True))
            v = e / e.sum(axis=1, keepdims=True)
        elif post == SOFTMAX_ZERO:
            m = v.max(axis=1, keepdims=True)
            e = np.where((v > 1e-7) | (v < -1e-7), np.exp(v - m), v * np.exp(-m))
            s = e.sum(axis=1, keepdims=True)
            v = np.where(s == 0, 0.5, e / np.where(s == 0, 1, s))
    return v.astype(raw.dtype)


def run_builtin(x, **attrs):
    raw = dict(attrs, post_transform=NONE)
    out = ReferenceEvaluator(ensemble_model(x.dtype, **raw)).run(None, {"X": x})[0]
    return post_transform(out, attrs.get("post_transform", NONE))


def run_ours(x, threads=1, **attrs):
    sess = ReferenceEvaluator(ensemble_model(x.dtype, **attrs))
    olc.register_kernels_for_session(sess)
    olc.set_num_threads_for_session(sess, threads)
    olc.set_kernel_usage_recording(sess, True)
    y = sess.run(None, {"X": x})[0]
    return y, olc.used_kernel_names(sess), olc.used_kernel_paths(sess)


def check(x, expected, tolerance=None, **attrs):
    """Ours at every SIMD level and thread count against ``expected``."""
    original = x.copy()
    for level in available_simd_levels():
        with capped_simd_level(level):
            results = []
            for threads in THREAD_COUNTS:
                y, names, _ = run_ours(x, threads, **attrs)
                assert KERNEL in names, names
                assert_close(y, expected, f"TreeEnsemble at {level}, {threads} threads", tolerance)
                results.append(y)
            assert same_bits(results[0], results[1]), "thread count changed the result"
    assert same_bits(x, original), "TreeEnsemble modified its input"


def check_builtin(x, tolerance=None, **attrs):
    check(x, run_builtin(x, **attrs), tolerance, **attrs)


# ---- against the built-in ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("modes", [(LEQ,), (LT,), (GTE,), (GT,), (EQ, NEQ, MEMBER),
                                   (LEQ, LT, GTE, GT, EQ, NEQ, MEMBER)])
def test_modes(dtype, modes):
    rng = np.random.default_rng(hash(modes) % 1000 + np.dtype(dtype).itemsize)
    attrs = random_forest(rng, n_trees=6, max_depth=5, modes=modes, attr_dtype=dtype)
    check_builtin(random_x(rng, 37, 4, dtype), **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("modes", [(LEQ,), (GT,), (LEQ, LT, GTE, GT, EQ, NEQ, MEMBER)])
def test_nan_features(dtype, missing, modes):
    rng = np.random.default_rng(7 + missing)
    attrs = random_forest(rng, n_trees=5, max_depth=5, modes=modes, missing=missing,
                          attr_dtype=dtype)
    check_builtin(random_x(rng, 29, 4, dtype, nan=0.3), **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("aggregate", [AVERAGE, SUM, MIN, MAX])
@pytest.mark.parametrize("post", [NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT])
def test_aggregate_post_transform(dtype, aggregate, post):
    rng = np.random.default_rng(aggregate * 10 + post)
    attrs = random_forest(rng, n_trees=7, max_depth=4, n_targets=3, modes=(LEQ, GT),
                          attr_dtype=dtype)
    attrs.update(aggregate_function=aggregate, post_transform=post)
    if post == PROBIT:  # scores in (0, 1), where probit is defined
        w = np.abs(onnx.numpy_helper.to_array(attrs["leaf_weights"]).astype(np.float64))
        attrs["leaf_weights"] = tensor("leaf_weights", w / (w.max() * 8), dtype)
    check_builtin(random_x(rng, 23, 4, dtype), **attrs)


@pytest.mark.parametrize("n_targets", [1, 5])
@pytest.mark.parametrize("attr_dtype", [np.float16, np.float32, np.float64])
def test_splits_of_another_type(n_targets, attr_dtype):
    """Float32 inputs meet splits of another float type exactly."""
    rng = np.random.default_rng(n_targets)
    attrs = random_forest(rng, n_trees=4, max_depth=4, n_targets=n_targets,
                          modes=(LEQ, LT, GTE, GT, EQ, NEQ, MEMBER), attr_dtype=attr_dtype)
    splits = onnx.numpy_helper.to_array(attrs["nodes_splits"]).astype(np.float64)
    if attr_dtype == np.float64:  # splits no float equals, just above or below one
        splits = splits + rng.choice([-1e-12, 0.0, 1e-12], size=splits.shape)
        attrs["nodes_splits"] = tensor("nodes_splits", splits, attr_dtype)
    check_builtin(random_x(rng, 31, 4, np.float32), **attrs)


def test_two_threads_engage():
    """Enough rows that the second thread gets blocks of its own."""
    rng = np.random.default_rng(3)
    attrs = random_forest(rng, n_trees=20, max_depth=6, n_features=6, n_targets=2,
                          modes=(LEQ,), stop=0.05)
    x = random_x(rng, 1000, 6, np.float32)
    check_builtin(x, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_unaligned_and_strided_input(dtype):
    rng = np.random.default_rng(4)
    attrs = random_forest(rng, n_trees=3, max_depth=4, attr_dtype=dtype)
    x = random_x(rng, 19, 8, dtype)
    check_builtin(x[:, ::2], **attrs)  # not contiguous
    check_builtin(unaligned(x[:, :4]), **attrs)


def test_empty_and_single_rows():
    rng = np.random.default_rng(5)
    attrs = random_forest(rng, n_trees=3, max_depth=3, n_targets=4)
    y, names, _ = run_ours(np.zeros((0, 4), np.float32), **attrs)
    assert y.shape == (0, 4) and y.dtype == np.float32 and KERNEL in names
    check_builtin(random_x(rng, 1, 4, np.float32), **attrs)


def test_shared_subtrees_and_roots():
    """Trees may share nodes (a DAG) or a root; each tree counts once."""
    attrs = dict(
        n_targets=1, tree_roots=[0, 0, 1],
        nodes_modes=oh.make_tensor("m", T.UINT8, (3,), [0, 0, 0]), nodes_featureids=[0, 1, 0],
        nodes_splits=tensor("s", [0.0, 0.5, 1.0], np.float32),
        nodes_truenodeids=[1, 2, 0], nodes_trueleafs=[0, 0, 1],
        nodes_falsenodeids=[2, 0, 1], nodes_falseleafs=[0, 1, 1],
        leaf_targetids=[0, 0], leaf_weights=tensor("w", [1.0, 10.0], np.float32))
    x = np.array([[-1, 0], [-1, 1], [2, 0], [0.5, 2]], np.float32)
    check_builtin(x, **attrs)


def test_one_leaf_trees():
    """A tree that is one leaf: a node whose branches reference the same
    leaf.  With the root's index equal to the leaf's both readings agree."""
    attrs = dict(
        n_targets=2, tree_roots=[0, 1],
        nodes_modes=oh.make_tensor("m", T.UINT8, (2,), [0, 0]), nodes_featureids=[0, 0],
        nodes_splits=tensor("s", [0.0, 0.0], np.float32),
        nodes_truenodeids=[0, 1], nodes_trueleafs=[1, 1],
        nodes_falsenodeids=[0, 1], nodes_falseleafs=[1, 1],
        leaf_targetids=[0, 1], leaf_weights=tensor("w", [2.5, -1.0], np.float32))
    check_builtin(np.array([[1.0], [-1.0]], np.float32), **attrs)
    # No feature is read: an input without columns works.
    y, _, _ = run_ours(np.zeros((3, 0), np.float32), **attrs)
    np.testing.assert_array_equal(y, [[2.5, -1.0]] * 3)


def test_one_leaf_tree_reaches_its_referenced_leaf():
    """The schema: the leaf the node references (ONNX Runtime agrees; the
    built-in reads the leaf at the root's node index instead)."""
    attrs = dict(
        n_targets=1, tree_roots=[1],
        nodes_modes=oh.make_tensor("m", T.UINT8, (2,), [0, 0]), nodes_featureids=[0, 0],
        nodes_splits=tensor("s", [0.5, 0.5], np.float32),
        nodes_truenodeids=[0, 0], nodes_trueleafs=[1, 1],
        nodes_falsenodeids=[1, 0], nodes_falseleafs=[1, 1],
        leaf_targetids=[0, 0], leaf_weights=tensor("w", [3.0, 7.0], np.float32))
    y, _, _ = run_ours(np.zeros((2, 1), np.float32), **attrs)
    np.testing.assert_array_equal(y, [[3.0], [3.0]])


def test_membership_in_node_order_and_zero_member():
    """Sets belong to the BRANCH_MEMBER nodes in node order, 0.0 included
    (the schema; the built-in would end a set at 0.0)."""
    # node 0: x0 in {0, 2} ? leaf 0 : node 1;  node 1: x0 in {-1} ? leaf 1 : leaf 2
    attrs = dict(
        n_targets=1, tree_roots=[0],
        nodes_modes=oh.make_tensor("m", T.UINT8, (2,), [MEMBER, MEMBER]), nodes_featureids=[0, 0],
        nodes_splits=tensor("s", [0, 0], np.float32),
        nodes_truenodeids=[0, 1], nodes_trueleafs=[1, 1],
        nodes_falsenodeids=[1, 2], nodes_falseleafs=[0, 1],
        leaf_targetids=[0, 0, 0], leaf_weights=tensor("w", [1, 2, 3], np.float32),
        membership_values=tensor("mv", [0.0, 2.0, np.nan, -1.0, np.nan], np.float32))
    x = np.array([[0.0], [-0.0], [2.0], [-1.0], [5.0], [np.nan]], np.float32)
    for dtype in (np.float32, np.float64, np.float16):
        y, _, _ = run_ours(x.astype(dtype), **attrs)
        np.testing.assert_array_equal(y, np.array([[1], [1], [1], [2], [3], [3]], dtype))


def test_long_membership_sets():
    """Sets long enough to be bisected rather than scanned."""
    rng = np.random.default_rng(11)
    members = np.arange(1, 60, 2.0)
    attrs = dict(
        n_targets=1, tree_roots=[0],
        nodes_modes=oh.make_tensor("m", T.UINT8, (1,), [MEMBER]), nodes_featureids=[0],
        nodes_splits=tensor("s", [0], np.float32),
        nodes_truenodeids=[0], nodes_trueleafs=[1], nodes_falsenodeids=[1], nodes_falseleafs=[1],
        leaf_targetids=[0, 0], leaf_weights=tensor("w", [1, 2], np.float32),
        membership_values=tensor("mv", np.append(rng.permutation(members), np.nan), np.float32))
    x = np.arange(-2, 64, 0.5, dtype=np.float32).reshape(-1, 1)
    y, _, _ = run_ours(x, **attrs)
    np.testing.assert_array_equal(y[:, 0], np.where(np.isin(x[:, 0], members), 1, 2))


@pytest.mark.parametrize("modes", [(LEQ,), (LEQ, EQ)])
def test_deep_lopsided_tree(modes):
    """A chain 60 nodes deep: most rows leave it early, some go to the end."""
    n = 60
    attrs = dict(
        n_targets=1, tree_roots=[0, 0],
        nodes_modes=oh.make_tensor("m", T.UINT8, (n,), [modes[i % len(modes)] for i in range(n)]),
        nodes_featureids=[0] * n, nodes_splits=tensor("s", np.arange(n) - 0.5, np.float32),
        nodes_truenodeids=list(range(n)), nodes_trueleafs=[1] * n,
        nodes_falsenodeids=list(range(1, n)) + [n], nodes_falseleafs=[0] * (n - 1) + [1],
        leaf_targetids=[0] * (n + 1), leaf_weights=tensor("w", np.arange(n + 1.0), np.float32))
    x = np.concatenate([np.arange(-1, n + 2, 0.5), np.full(20, 3.0), np.full(20, 100.0)])
    check_builtin(x.astype(np.float32).reshape(-1, 1), **attrs)


def test_kernel_path_recorded():
    rng = np.random.default_rng(12)
    attrs = random_forest(rng, n_trees=2, max_depth=3, modes=(LT,))
    _, _, paths = run_ours(random_x(rng, 5, 4, np.float32), **attrs)
    assert "tree_ensemble_branch_lt_float32" in paths
    attrs = random_forest(rng, n_trees=2, max_depth=3, modes=(LEQ, EQ))
    _, _, paths = run_ours(random_x(rng, 5, 4, np.float16), **attrs)
    assert "tree_ensemble_generic_float16" in paths
    attrs = random_forest(rng, n_trees=3, max_depth=4, modes=(GTE,), missing=True)
    assert any(attrs["nodes_missing_value_tracks_true"])
    _, _, paths = run_ours(random_x(rng, 5, 4, np.float64), **attrs)
    assert "tree_ensemble_branch_gte_nan_float64" in paths


def _sweep(seed):
    rng = np.random.default_rng(100 + seed)
    dtype = [np.float32, np.float64, np.float16][seed % 3]
    modes = tuple(rng.choice(7, size=int(rng.integers(1, 5)), replace=False).tolist())
    attrs = random_forest(rng, n_trees=int(rng.integers(1, 12)), max_depth=int(rng.integers(1, 9)),
                          n_features=int(rng.integers(1, 7)), n_targets=int(rng.integers(1, 6)),
                          modes=modes, missing=bool(seed % 2), attr_dtype=dtype)
    attrs.update(aggregate_function=int(rng.integers(4)), post_transform=int(rng.integers(4)))
    f = len(attrs["nodes_featureids"]) and max(attrs["nodes_featureids"]) + 1
    check_builtin(random_x(rng, int(rng.integers(1, 300)), max(f, 1), dtype, nan=0.1), **attrs)


@pytest.mark.parametrize("seed", range(30))
def test_random_forests(seed):
    """Random modes, depths, sizes, targets, aggregates and transforms."""
    _sweep(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(30, 400))
def test_random_sweep(seed):
    _sweep(seed)


# ---- against ONNX Runtime ----

def run_ort(x, **attrs):
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(ensemble_model(x.dtype, **attrs).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, {"X": x})[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("aggregate", [AVERAGE, SUM, MIN, MAX])
@pytest.mark.parametrize("post", [NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT])
def test_against_onnxruntime(dtype, aggregate, post):
    """Every aggregate and post transform on several targets (ORT leaves a
    single target untransformed, except PROBIT), NaN features tracked."""
    rng = np.random.default_rng(50 + aggregate * 10 + post)
    attrs = random_forest(rng, n_trees=8, max_depth=5, n_targets=3,
                          modes=(LEQ, LT, GTE, GT, EQ, NEQ, MEMBER), missing=True, attr_dtype=dtype,
                          member_grid=np.array([-2.0, -1.0, 1.0, 2.0]))  # ORT: integer sets
    attrs.update(aggregate_function=aggregate, post_transform=post)
    if post == PROBIT:
        w = np.abs(onnx.numpy_helper.to_array(attrs["leaf_weights"]).astype(np.float64))
        attrs["leaf_weights"] = tensor("leaf_weights", w / (w.max() * 10) + 0.01, dtype)
    # ORT truncates a feature to an integer before a membership test.
    x = np.trunc(random_x(rng, 200, 4, dtype, nan=0.1))
    # ORT 1.32 reads post_transform 1 as LOGISTIC and 2 as SOFTMAX, the
    # schema the other way round.
    ort_post = {SOFTMAX: LOGISTIC, LOGISTIC: SOFTMAX}.get(post, post)
    want = run_ort(x, **dict(attrs, post_transform=ort_post))
    got, names, _ = run_ours(x, **attrs)
    assert KERNEL in names
    # Where the definitions differ, compare the rest: a target no leaf
    # reached under MIN/MAX reads +-max here (the built-in) and 0 in ORT; a
    # zero score's probit is 0 here (onnx.reference's helper), -inf in ORT.
    raw = run_ours(x, **dict(attrs, post_transform=NONE))[0]
    keep = np.abs(raw) != np.finfo(dtype).max
    if post == NONE:
        got, want = np.where(keep, got, 0), np.where(keep, want, 0)
    else:
        if post == PROBIT:
            keep &= raw != 0
        if post in (SOFTMAX, SOFTMAX_ZERO):
            keep = np.repeat(keep.all(axis=1, keepdims=True), keep.shape[1], axis=1)
        got, want = got[keep], want[keep]
    # ORT divides the sum once for AVERAGE and transforms in float, also
    # for double outputs.
    tol = (2e-5, 1e-7) if dtype == np.float32 or post != NONE else (1e-9, 1e-12)
    assert_close(got, want, "TreeEnsemble vs ORT", tol)


# ---- bad attributes and inputs ----

def _simple(**changes):
    attrs = dict(
        n_targets=2, tree_roots=[0],
        nodes_modes=oh.make_tensor("m", T.UINT8, (2,), [0, 0]), nodes_featureids=[0, 1],
        nodes_splits=tensor("s", [0.5, 0.5], np.float32),
        nodes_truenodeids=[1, 0], nodes_trueleafs=[0, 1],
        nodes_falsenodeids=[2, 1], nodes_falseleafs=[1, 1],
        leaf_targetids=[0, 1, 1], leaf_weights=tensor("w", [1, 2, 3], np.float32))
    attrs.update(changes)
    return {k: v for k, v in attrs.items() if v is not None}


def test_simple_model_runs():
    x = np.array([[0, 0], [0, 1], [1, 0]], np.float32)
    check_builtin(x, **_simple())


@pytest.mark.parametrize("changes, words", [
    (dict(nodes_featureids=[0]), "nodes_featureids"),
    (dict(nodes_splits=tensor("s", [0.5], np.float32)), "nodes_splits"),
    (dict(nodes_truenodeids=[1, 0, 0]), "nodes_truenodeids"),
    (dict(nodes_missing_value_tracks_true=[1]), "nodes_missing_value_tracks_true"),
    (dict(leaf_weights=tensor("w", [1, 2], np.float32)), "leaf_weights"),
    (dict(leaf_targetids=[0, 2, 1]), "leaf_targetids"),
    (dict(leaf_targetids=[0, -1, 1]), "leaf_targetids"),
    (dict(nodes_truenodeids=[5, 0]), "nodes_truenodeids"),
    (dict(nodes_falsenodeids=[2, 3]), "nodes_falsenodeids"),
    (dict(nodes_truenodeids=[-1, 0]), "nodes_truenodeids"),
    (dict(tree_roots=[2]), "tree_roots"),
    (dict(nodes_featureids=[0, -1]), "nodes_featureids"),
    (dict(nodes_featureids=[0, 1 << 40]), "nodes_featureids"),
    (dict(nodes_modes=oh.make_tensor("m", T.UINT8, (2,), [0, 7])), "nodes_modes"),
    (dict(nodes_modes=oh.make_tensor("m", T.UINT8, (2,), [0, MEMBER])), "membership_values"),
    (dict(nodes_modes=oh.make_tensor("m", T.UINT8, (2,), [0, MEMBER]),
          membership_values=tensor("mv", [1, np.nan, 2, np.nan], np.float32)), "membership_values"),
    (dict(aggregate_function=4), "aggregate_function"),
    (dict(post_transform=5), "post_transform"),
    (dict(n_targets=0), "n_targets"),
    (dict(n_targets=None), "n_targets"),
    (dict(leaf_weights=oh.make_tensor("w", T.INT32, (3,), [1, 2, 3])), "leaf_weights"),
    (dict(nodes_truenodeids=[1, 1], nodes_trueleafs=[0, 0]), "cycle"),
])
def test_bad_attributes(changes, words):
    x = np.zeros((2, 2), np.float32)
    sess = ReferenceEvaluator(ensemble_model(np.float32, **_simple(**changes)))
    olc.register_kernels_for_session(sess)  # building and registering succeed
    with pytest.raises(ValueError, match=f"TreeEnsemble: .*{words}"):
        sess.run(None, {"X": x})


def test_bad_inputs():
    sess = ReferenceEvaluator(ensemble_model(np.float32, **_simple()))
    olc.register_kernels_for_session(sess)
    with pytest.raises(ValueError, match=r"TreeEnsemble: input 0 \('X'\) has 1 features"):
        sess.run(None, {"X": np.zeros((3, 1), np.float32)})
    with pytest.raises(ValueError,
                       match=r"TreeEnsemble: input 0 \('X'\) has rank 1 .*expected rank 2"):
        sess.run(None, {"X": np.zeros(3, np.float32)})
    with pytest.raises(TypeError, match=r"TreeEnsemble: input 0 \('X'\) has element type int64"):
        sess.run(None, {"X": np.zeros((3, 2), np.int64)})
